"""An incremental decoder for server-sent events, as the WHATWG HTML standard defines them.

WHY our own: it is ~100 lines, the spec is small and exact, and owning it lets us test the
awkward cases (CR/LF split across reads, multi-byte characters split across reads, a BOM)
that model APIs and proxies really produce.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class ServerSentEvent:
    event: str = "message"
    """The `event:` field, "message" when the event had none."""
    data: str = ""
    """The `data:` lines joined with "\\n"."""
    id: str = ""
    """The last event ID seen on the stream so far (it carries over between events)."""
    retry: int | None = None
    """A reconnection time in milliseconds, when this event's block set one."""


class SSEDecoder:
    """Turns a byte stream, fed in arbitrary pieces, into events.

    Feed bytes with `feed()`; it returns the events completed by that piece. An event not
    closed by a blank line when the stream ends is never dispatched, as the standard says:
    a cut stream cannot pass off half an event as a whole one.
    """

    def __init__(self) -> None:
        # WHY utf-8-sig: it drops one leading BOM, even when split across pieces, and
        # nothing else; "replace" is the standard's error handling.
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._partial_line: list[str] = []
        self._skip_leading_lf = False
        self._event_type = ""
        self._data: list[str] = []
        self._last_event_id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        return self._feed_text(self._decoder.decode(chunk))

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        # WHY: a CR ended the previous piece; if this piece starts with LF, it is the same
        # CRLF line ending and must not count as a second (blank) line.
        if self._skip_leading_lf and text[0] == "\n":
            text = text[1:]
        self._skip_leading_lf = False
        events: list[ServerSentEvent] = []
        start = 0
        for match in _LINE_END.finditer(text):
            self._partial_line.append(text[start : match.start()])
            line = "".join(self._partial_line)
            self._partial_line = []
            event = self._process_line(line)
            if event is not None:
                events.append(event)
            start = match.end()
        if start < len(text):
            self._partial_line.append(text[start:])
        elif text.endswith("\r"):
            self._skip_leading_lf = True
        return events

    def _process_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event_type = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event_type, retry = self._data, self._event_type, self._retry
        self._data, self._event_type, self._retry = [], "", None
        if not data:
            return None
        return ServerSentEvent(
            event=event_type or "message",
            data="\n".join(data),
            id=self._last_event_id,
            retry=retry,
        )


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a byte stream such as `httpx.Response.aiter_bytes()`."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
