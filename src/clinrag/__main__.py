from clinrag.app.cli import main

main()
