"""The `logos` command: one-shot agent tasks from a terminal, resumable runs, dry runs."""

__all__ = ["main"]
