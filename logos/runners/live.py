"""A running command's output as it comes, for whoever watches the run (never for the model).

The model reads a command's output once, in its result. A person watching a long build wants
to see it move. A runner that can tell (the local runner) writes each chunk its command
prints into the `LiveOutput` that `watching()` made current for that command; the executor
takes what gathered every `FLUSH_S` and hands it on as text.

WHY a context variable rather than a parameter of `Runner.run`: runners wrap runners (the
approval wrapper, a caller's own), and each would have to pass it on by hand; the context
reaches the innermost runner through any wrapper that awaits it, and a runner that cannot
stream (a remote daemon answering once) simply never looks.

Bounded whatever the command prints: at most `PIECE_BYTES` per stream per take (the newest
bytes; what was skipped is counted) and `LIMIT_BYTES` in all, after which it says it stopped.
"""

from __future__ import annotations

import codecs
import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

FLUSH_S = 0.25
"""How often what gathered is handed on; also how long a command runs before its first piece
(a quick command's output arrives with its result, nothing sooner)."""
PIECE_BYTES = 16 * 1024
"""Per stream and per take: a flood shows its newest bytes, the rest is counted as skipped."""
LIMIT_BYTES = 256 * 1024
"""Per command, all pieces together: then live output stops and the result tells the rest."""

Stream = Literal["stdout", "stderr"]


@dataclass(frozen=True)
class LivePiece:
    """Text a command printed on one stream since the last piece."""

    stream: Stream
    text: str
    skipped_bytes: int = 0
    """Bytes printed before `text` that are not shown (more came than a piece holds)."""
    last: bool = False
    """Live output stops after this piece: the command printed `LIMIT_BYTES` already."""


class _StreamBuffer:
    def __init__(self) -> None:
        self.pending = bytearray()
        self.skipped = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, data: bytes) -> None:
        self.pending += data
        excess = len(self.pending) - PIECE_BYTES
        if excess > 0:
            # The cut moves past a character split in two: its start is gone with the rest.
            while excess < len(self.pending) and 0x80 <= self.pending[excess] < 0xC0:
                excess += 1
            del self.pending[:excess]
            self.skipped += excess
            self.decoder.reset()


class LiveOutput:
    """One command's output on its way to a watcher: written from any thread, taken from one.

    WHY a lock: the local runner's watching thread writes while the event loop takes.
    """

    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        self._lock = threading.Lock()
        self._limit = limit_bytes
        self._handed = 0
        self._streams: dict[Stream, _StreamBuffer] = {
            "stdout": _StreamBuffer(),
            "stderr": _StreamBuffer(),
        }
        self._closed = False

    def write(self, stream: Stream, data: bytes, skipped: int = 0) -> None:
        """`data` as printed on `stream`; `skipped`: bytes printed before it that its source
        did not pass on (a sandbox relaying pieces it cut)."""
        with self._lock:
            if self._closed or not (data or skipped):
                return
            buffer = self._streams[stream]
            if skipped:
                # What gathered before the gap goes with it: a piece is a gap, then text.
                buffer.skipped += len(buffer.pending) + skipped
                buffer.pending.clear()
                buffer.decoder.reset()
            buffer.add(data)

    def close(self) -> None:
        """No more is written or taken: the command's result has the rest."""
        with self._lock:
            self._closed = True

    def take(self) -> list[LivePiece]:
        """What gathered since the last take, a piece per stream that printed something."""
        pieces: list[LivePiece] = []
        with self._lock:
            for name, buffer in self._streams.items():
                if self._closed or not (buffer.pending or buffer.skipped):
                    continue
                room = self._limit - self._handed
                data = bytes(buffer.pending[:room])
                self._handed += len(data)
                last = self._handed >= self._limit
                text = buffer.decoder.decode(data, final=last)
                pieces.append(LivePiece(name, text, buffer.skipped, last))
                buffer.pending.clear()
                buffer.skipped = 0
                if last:
                    self._closed = True
        return pieces


_CURRENT: ContextVar[LiveOutput | None] = ContextVar("logos_live_output", default=None)


def current_live_output() -> LiveOutput | None:
    """Where the command about to run should write its output as it comes, if anyone
    watches (a runner reads this as it starts the command)."""
    return _CURRENT.get()


@contextlib.contextmanager
def watching(live: LiveOutput) -> Iterator[LiveOutput]:
    """Make `live` the current command's live output in this context."""
    token = _CURRENT.set(live)
    try:
        yield live
    finally:
        _CURRENT.reset(token)
