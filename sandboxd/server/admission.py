"""Admission control on the output memory of the requests in flight.

WHY: a command's output crosses the daemon several times over (the supervisor's reply line,
the strings parsed from it, the JSON of the HTTP answer) and a control character takes six
bytes of JSON, so a handful of concurrent large outputs could take the daemon's memory (eight
at max_output_bytes = 8 MiB reached 1.4 GiB). Each request reserves its worst case before its
command runs and gives it back once its answer is sent; a request that does not fit waits,
in arrival order, for a bounded time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import anyio

JSON_EXPANSION = 6
"""Bytes of JSON per byte of output at worst: a control character becomes \\u00XX."""
_CUT_NOTE_BYTES = 256
"""Room for the note the capture puts where it cut an output."""
_REPLY_OVERHEAD_BYTES = 64 * 1024
"""The reply's other fields, both JSON documents' framing."""
_STRING_BYTES_PER_BYTE = 4
"""Python stores a string at up to four bytes per character (one astral character does it)."""
_LINE_COPIES = 3
"""While the channel reads a reply: its buffer, the slice it cuts off, the bytes it returns."""


def reply_memory_bound(max_output_bytes: int) -> int:
    """The most memory the daemon holds at once for one reply at `max_output_bytes` per stream.

    Both streams keep up to max_output_bytes each. As JSON that is up to JSON_EXPANSION
    bytes per byte (control characters), for the supervisor's reply line and again for the
    HTTP answer's body; as parsed strings, up to four bytes per byte. The stages overlap:
    reading the line holds three copies of it; then the line and its strings; then the
    strings and the body; then the body and the event loop's copy of what the socket has
    not taken yet. (Tied to how sandboxd.docker.supervisor_client reads a reply: when that
    changes, so must this.) An answer with a long output is now streamed as it is encoded
    (sandboxd.server.http.StreamedJson) rather than built whole, so its body stages are a margin
    kept on purpose: the reservation stays what the README promises.
    """
    kept = 2 * (max_output_bytes + _CUT_NOTE_BYTES)
    line = body = JSON_EXPANSION * kept
    strings = _STRING_BYTES_PER_BYTE * kept
    stages = (_LINE_COPIES * line, line + strings, strings + body, 2 * body)
    return max(stages) + _REPLY_OVERHEAD_BYTES


class OutputMemoryRefused(Exception):
    """The request cannot have its output memory: `budget_exceeded` when it never could."""

    def __init__(self, message: str, *, budget_exceeded: bool) -> None:
        super().__init__(message)
        self.message = message
        self.budget_exceeded = budget_exceeded


@dataclass(eq=False)
class _Waiter:
    amount: int
    granted: anyio.Event = field(default_factory=anyio.Event)


@dataclass(eq=False)
class Reservation:
    """Output memory held for one request until `release()` (idempotent)."""

    budget: OutputMemoryBudget
    amount: int
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.budget.give_back(self.amount)


class OutputMemoryBudget:
    """`capacity` bytes shared by the requests in flight, granted first come, first served."""

    def __init__(self, capacity: int, *, wait_s: float) -> None:
        self.capacity = capacity
        self.wait_s = wait_s
        self.in_use = 0
        self._waiters: deque[_Waiter] = deque()

    async def reserve(self, amount: int) -> Reservation:
        """Wait (up to `wait_s`) until `amount` fits; OutputMemoryRefused when it does not."""
        if amount > self.capacity:
            raise OutputMemoryRefused(
                f"this request may need {_mib(amount)} of reply memory, more than the daemon's "
                f"whole budget (max_output_memory = {_mib(self.capacity)})",
                budget_exceeded=True,
            )
        if not self._waiters and self.in_use + amount <= self.capacity:
            self.in_use += amount
            return Reservation(self, amount)
        waiter = _Waiter(amount)
        self._waiters.append(waiter)
        try:
            with anyio.move_on_after(self.wait_s):
                await waiter.granted.wait()
        except BaseException:
            self._withdraw(waiter)
            raise
        if not waiter.granted.is_set():
            self._withdraw(waiter)
            raise OutputMemoryRefused(
                f"the daemon's output memory (max_output_memory = {_mib(self.capacity)}) stayed "
                f"in use by other commands for {self.wait_s:g} s",
                budget_exceeded=False,
            )
        return Reservation(self, amount)

    def give_back(self, amount: int) -> None:
        self.in_use -= amount
        self._grant_waiting()

    def _withdraw(self, waiter: _Waiter) -> None:
        """A waiter gives up: its grant, if it came meanwhile, goes back; the next may fit."""
        if waiter.granted.is_set():
            self.give_back(waiter.amount)
        else:
            self._waiters.remove(waiter)
            self._grant_waiting()

    def _grant_waiting(self) -> None:
        while self._waiters and self.in_use + self._waiters[0].amount <= self.capacity:
            waiter = self._waiters.popleft()
            self.in_use += waiter.amount
            waiter.granted.set()


def _mib(amount: int) -> str:
    return f"{amount / 1024**2:.0f} MiB"
