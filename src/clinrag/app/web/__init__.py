"""clinrag's HTTP API and web UI (`clinrag serve`)."""
