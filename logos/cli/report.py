"""What a run reports while it goes, to either display: people (render) or programs (events)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from rich.console import Console

from logos.records.events import RunObserver


class Reporter(RunObserver, Protocol):
    """Hears the run's progress (`RunObserver`), and what the user should know besides."""

    def notice(self, text: str) -> None:
        """Something the user should know that is not part of the run (to stderr)."""
        ...

    def prompting(self) -> AbstractContextManager[Console]:
        """Hold the display still while the user answers a question."""
        ...
