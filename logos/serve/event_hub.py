"""A run's event log: every event numbered, written to its file, and fanned out to the
clients that watch it, each of whom can catch up on what it missed.

Publishing never waits for a client. Each subscriber has a bounded buffer; one that falls
behind by a whole buffer is dropped (its stream ends with a comment saying so) and
reconnects with `Last-Event-ID` to replay the rest: from memory while the run is live
(the latest `replay_memory` events), from the file otherwise (after the run, and after a
restart of the server).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel

from logos.jsonl import JsonLinesFile, open_private_append


@dataclass(frozen=True)
class Published:
    """One event as the clients get it."""

    id: int
    type: str
    data: str
    """The event's JSON."""

    def frame(self) -> bytes:
        """The server-sent event: `id`, `event` and `data` lines, then a blank line."""
        return f"id: {self.id}\nevent: {self.type}\ndata: {self.data}\n\n".encode()

    def line(self) -> str:
        """The event log's line."""
        return f'{{"id":{self.id},"event":{self.data}}}'


def read_published(path: Path, after: int) -> Iterator[Published]:
    """The events in the log at `path` with an id above `after`, in order; a damaged
    last line (a crash mid-write) is skipped."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for text in handle:
            try:
                record = json.loads(text)
                number, event = int(record["id"]), record["event"]
                kind = str(event["type"])
            except (ValueError, KeyError, TypeError):
                continue
            if number > after:
                data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
                yield Published(number, kind, data)


class Subscription:
    """One client's view: the events it missed, then the live ones as they come."""

    def __init__(
        self, backlog: list[Published], receive: MemoryObjectReceiveStream[Published]
    ) -> None:
        self.backlog = backlog
        self._receive = receive
        self.dropped = False
        """Set when the client fell a whole buffer behind and was cut off."""

    async def events(self, keepalive_s: float) -> AsyncIterator[Published | None]:
        """The backlog, then live events; None after `keepalive_s` without one (time for
        a keep-alive comment). Ends when the run's log closes or the client is dropped."""
        for missed in self.backlog:
            yield missed
        self.backlog = []
        async with self._receive:
            while True:
                event: Published | None = None
                with anyio.move_on_after(keepalive_s):
                    try:
                        event = await self._receive.receive()
                    except anyio.EndOfStream:
                        return
                # WHY yield outside the timeout's scope: its deadline must not fire in the
                # consumer's code while this generator is suspended.
                yield event


class Changes:
    """A version number that grows whenever any run publishes, starts or ends, so a list of
    runs can follow them all through one stream instead of asking again and again."""

    def __init__(self) -> None:
        self.version = 0
        self.closed = False
        """Set as the server shuts down: the streams that follow the runs end."""
        self._changed = anyio.Event()

    def close(self) -> None:
        self.closed = True
        self.bump()

    def bump(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def bumped(self) -> None:
        """Return at the next bump."""
        await self._changed.wait()

    async def after(self, version: int, timeout_s: float) -> int:
        """The version once it is past `version`, or the same after `timeout_s` without a
        change (time for a keep-alive)."""
        if self.version == version:
            with anyio.move_on_after(timeout_s):
                await self._changed.wait()
        return self.version


class EventLog:
    """The events of one run: numbered from 1, each appended to the file before anyone
    sees it."""

    def __init__(
        self,
        path: Path,
        *,
        replay_memory: int,
        subscriber_buffer: int,
        on_publish: Callable[[], None] = lambda: None,
        resume: bool = False,
    ) -> None:
        """`resume`: go on numbering a log the file holds already (a project's, after a
        restart); else the file must be new."""
        self.path = path
        self._on_publish = on_publish
        self.last_id = 0
        if resume and path.exists():
            for saved in read_published(path, 0):
                self.last_id = saved.id
        self._file = JsonLinesFile(path, open_private_append(path, exclusive=not resume))
        self._recent: deque[Published] = deque(maxlen=replay_memory)
        self._buffer = subscriber_buffer
        self._senders: dict[MemoryObjectSendStream[Published], Subscription] = {}
        self.closed = False

    def publish(self, event: BaseModel) -> None:
        published = Published(
            self.last_id + 1, str(getattr(event, "type", "event")), event.model_dump_json()
        )
        self._file.write_line(published.line())
        self.last_id = published.id
        self._recent.append(published)
        self._on_publish()
        for sender, subscription in list(self._senders.items()):
            try:
                sender.send_nowait(published)
            except anyio.WouldBlock:
                # WHY drop rather than wait: one slow client must never slow the run.
                subscription.dropped = True
                del self._senders[sender]
                sender.close()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                del self._senders[sender]  # the client went away

    def subscribe(self, after: int) -> Subscription:
        """Events above `after`: the missed ones first (from memory when it still holds
        them, else from the file), then the live ones."""
        backlog: list[Published] = []
        if after < self.last_id:
            oldest = self._recent[0].id if self._recent else self.last_id + 1
            if after + 1 >= oldest:
                backlog = [event for event in self._recent if event.id > after]
            else:
                backlog = list(read_published(self.path, after))
        send, receive = anyio.create_memory_object_stream[Published](self._buffer)
        subscription = Subscription(backlog, receive)
        if self.closed:
            send.close()
        else:
            self._senders[send] = subscription
        return subscription

    @property
    def subscribers(self) -> int:
        return len(self._senders)

    def close(self) -> None:
        """The run is over: streams end once they have sent what they hold, and later
        clients replay from the file."""
        self.closed = True
        self._file.close()
        self._recent.clear()
        for sender in self._senders:
            sender.close()
        self._senders.clear()
