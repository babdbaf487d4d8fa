"""sandboxd: a daemon that runs commands in Docker containers that see only allowed paths."""
