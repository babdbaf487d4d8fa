"""How the `logos` command ends: its exit codes and the error that carries one."""

from __future__ import annotations

EXIT_OK = 0
"""The model gave its final answer (`exec`: every block succeeded; `doctor`: all checks ok)."""
EXIT_STOPPED = 1
"""A budget or the hallucination limit stopped the run (`exec`: a block failed)."""
EXIT_ERROR = 2
"""A provider, sandbox or configuration error, or bad usage."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT); other signals give 128 + their number."""


class CliError(Exception):
    """Ends the command: the message (what is wrong and what to do) goes to stderr."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
