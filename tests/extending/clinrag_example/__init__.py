"""A third-party package that adds a method, a dataset and a chat backend to clinrag, one file each, found
through the entry points in ../clinrag_example-0.1.dist-info/entry_points.txt (README "Extending clinrag")."""
