"""The SSE decoder against the WHATWG rules, fed whole and in awkward pieces."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import given, strategies as st

from logos.providers.sse import ServerSentEvent, SSEDecoder, aiter_sse


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


def every_split(data: bytes) -> list[tuple[bytes, bytes]]:
    return [(data[:i], data[i:]) for i in range(len(data) + 1)]


def test_fields_and_default_event_type() -> None:
    stream = b"event: delta\ndata: one\nid: 7\nretry: 1500\n\ndata: two\n\n"
    assert decode(stream) == [
        ServerSentEvent(event="delta", data="one", id="7", retry=1500),
        # The event type resets after dispatch; the last event id carries over.
        ServerSentEvent(event="message", data="two", id="7", retry=None),
    ]


def test_data_lines_are_joined_with_newlines() -> None:
    assert decode(b"data: a\ndata:\ndata: c\n\n") == [ServerSentEvent(data="a\n\nc")]


def test_only_one_leading_space_is_removed() -> None:
    assert decode(b"data:  two spaces\ndata:none\n\n")[0].data == " two spaces\nnone"


def test_comments_unknown_fields_and_bare_field_names() -> None:
    stream = b": keep-alive comment\nfoo: ignored\ndata\ndata: x\n\n"
    # A line without a colon is a field with an empty value: "data" adds an empty line.
    assert decode(stream) == [ServerSentEvent(data="\nx")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    stream = b"event: e" + newline + b"data: x" + newline + newline
    assert decode(stream) == [ServerSentEvent(event="e", data="x")]


def test_mixed_line_endings() -> None:
    assert decode(b"data: a\rdata: b\r\ndata: c\n\r\n") == [ServerSentEvent(data="a\nb\nc")]


def test_crlf_split_between_chunks_is_one_line_ending() -> None:
    # Were CR and LF counted as two endings, the blank line would dispatch "a" alone.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [ServerSentEvent(data="a\nb")]


def test_cr_alone_at_chunk_end_then_more_text() -> None:
    assert decode(b"data: a\r", b"data: b\r", b"\r") == [ServerSentEvent(data="a\nb")]


def test_every_split_point_of_a_crlf_stream() -> None:
    stream = b"event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n"
    expected = decode(stream)
    assert len(expected) == 2
    for head, tail in every_split(stream):
        assert decode(head, tail) == expected, (head, tail)


def test_multibyte_characters_split_across_chunks() -> None:
    text = "é € 😀 中文"
    stream = f"data: {text}\n\n".encode()
    for head, tail in every_split(stream):
        assert decode(head, tail) == [ServerSentEvent(data=text)]
    assert decode(*[bytes([b]) for b in stream]) == [ServerSentEvent(data=text)]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert decode(b"data: a\xffb\n\n") == [ServerSentEvent(data="a\ufffdb")]


def test_leading_bom_is_dropped_even_when_split() -> None:
    stream = b"\xef\xbb\xbfdata: x\n\n"
    for head, tail in every_split(stream):
        assert decode(head, tail) == [ServerSentEvent(data="x")]


def test_only_a_leading_bom_is_dropped() -> None:
    # A BOM later in the stream is content: here it makes an unknown field name.
    assert decode(b"data: x\n\n\xef\xbb\xbfdata: y\n\n") == [ServerSentEvent(data="x")]


def test_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: ping\n\ndata: x\n\n") == [ServerSentEvent(data="x")]


def test_id_with_nul_and_non_numeric_retry_are_ignored() -> None:
    events = decode(b"id: 1\n\nid: a\0b\nretry: 10s\ndata: x\n\n")
    assert events == [ServerSentEvent(data="x", id="1", retry=None)]


def test_unterminated_event_at_end_is_discarded() -> None:
    assert decode(b"data: complete\n\ndata: cut off") == [ServerSentEvent(data="complete")]
    assert decode(b"data: complete\n\ndata: cut off\n") == [ServerSentEvent(data="complete")]


_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\0"),
    max_size=12,
)
_events = st.lists(
    st.tuples(st.sampled_from(["message", "delta", "x y"]), st.lists(_text, min_size=1)),
    min_size=1,
    max_size=5,
)


@given(
    events=_events,
    newline=st.sampled_from(["\n", "\r", "\r\n"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_any_split_gives_the_same_events(
    events: list[tuple[str, list[str]]], newline: str, cuts: list[int]
) -> None:
    wire = "".join(
        f"event: {name}{newline}" + "".join(f"data: {line}{newline}" for line in lines) + newline
        for name, lines in events
    ).encode()
    points = sorted({cut % (len(wire) + 1) for cut in cuts})
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    expected = [ServerSentEvent(event=name, data="\n".join(lines)) for name, lines in events]
    assert decode(*chunks) == expected


@pytest.mark.anyio
async def test_aiter_sse_reads_an_async_byte_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in (b"data: he", b"llo\n", b"\ndata: x\n\n"):
            yield piece

    assert [event.data async for event in aiter_sse(chunks())] == ["hello", "x"]
