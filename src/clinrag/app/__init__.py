"""User-facing entry points: command line (and later HTTP API and web UI)."""
