"""`--json`: the run as a stream of JSON events (`logos.records.events`), one per line on
stdout, and nothing else. Human messages (warnings, the confirm prompt) go to stderr.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from pydantic import BaseModel
from rich.console import Console

from logos.records.events import RunEvents


class JsonEvents(RunEvents):
    """A Reporter that writes events to `out`, one flushed line each."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        super().__init__(self._write)
        self._out = out
        # WHY soft_wrap: a message is one line however wide, like the events themselves.
        self._err = Console(
            file=err or sys.stderr, highlight=False, markup=False, emoji=False, soft_wrap=True
        )

    def _write(self, event: BaseModel) -> None:
        self._out.write(event.model_dump_json() + "\n")
        self._out.flush()

    def notice(self, text: str) -> None:
        self._err.print(f"logos: {text}")

    def error(self, message: str) -> None:
        super().error(message)
        self._err.print(f"logos: error: {message}")

    @contextlib.contextmanager
    def prompting(self) -> Iterator[Console]:
        yield self._err
