"""The repository's own development tools (not shipped in the package)."""
