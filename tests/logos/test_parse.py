"""The `<cmd>` parser: the rules, and stream == batch under every way of splitting a text."""

from __future__ import annotations

import itertools
import time
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from logos.protocol.parse import (
    CmdStreamParser,
    CommandBlock,
    Event,
    ProseDelta,
    UnclosedBlock,
    parse_cmd_blocks,
    strip_cmd_blocks,
    tidy_prose,
)

HEREDOC = (
    "I will write the prompt file.\n"
    "<cmd>cat > prompt.txt <<'EOF'\n"
    "Use <cmd>ls</cmd> to list files.\n"
    "EOF</cmd>\n"
    "Done."
)

TRICKY_MESSAGES = [
    "Let me look.\n<cmd>ls -la</cmd>\nThen <cmd>cat a.txt</cmd> done.",
    HEREDOC,
    "Search: <cmd>grep -rn '<cmd>' src</cmd>\nand <cmd>ls</cmd> end",
    "a </cmd> b <cmd>  </cmd> c <cm d <<cmd>x</cmd>> e <",
    "unclosed at the end <cmd>echo hi\n<c",
    "<<<cmd>>>x</cmd></cmd></cmd><cmd",
    "héllo 🌍 <cmd>echo '日本語'</cmd>\n\n\n\nfin ✓ <cmd>printf '\\u00e9'</cmd>",
    "<CMD>ls</CMD> <cmd >x</cmd> <cmd>a</cmd>",
    "```\n<cmd>ls</cmd>\n```\n<cmd>cat <<EOF\n<cmd>\nEOF</cmd>",
    "<cmd><cmd></cmd></cmd><cmd>\n</cmd>tail</cmd>",
    "<cmd>echo cmd> /cmd> < /cmd> <<cmd>>a</cmd>/cmd></cmd> out cmd> </cmd>",
    "x <cmd>grep '<cmd>' a</cmd> y <cmd>ls</cmd> z <cmd>grep '<cmd>' b</cmd>\n<cm",
]


def reference_parse(text: str, truncated: bool = False) -> tuple[list[str], str, str | None]:
    """An independent, deliberately naive statement of the rules, for use as an oracle."""
    blocks: list[str] = []
    prose: list[str] = []
    unclosed: str | None = None
    pos = 0
    while True:
        opening = text.find("<cmd>", pos)
        if opening < 0:
            prose.append(text[pos:])
            break
        prose.append(text[pos:opening])
        depth, i = 1, opening + 5
        while depth and i < len(text):
            if text.startswith("<cmd>", i):
                depth, i = depth + 1, i + 5
            elif text.startswith("</cmd>", i):
                depth, i = depth - 1, i + 6
            else:
                i += 1
        if depth == 0:
            content, pos = text[opening + 5 : i - 6], i
        else:
            rest = text[opening + 5 :]
            cut = rest.find("</cmd>")
            if cut < 0 or truncated:
                unclosed = rest.strip()
                break
            content, pos = rest[:cut], opening + 5 + cut + 6
        if content.strip():
            blocks.append(content.strip())
    return blocks, "".join(prose), unclosed


def run_stream(
    deltas: list[str], truncated: bool = False
) -> tuple[list[str], str, str | None, CmdStreamParser]:
    """Feed the deltas; return the commands, the concatenated prose and any unclosed text."""
    parser = CmdStreamParser()
    events: list[Event] = []
    for delta in deltas:
        events.extend(parser.feed(delta))
    events.extend(parser.close(truncated=truncated))
    commands: list[str] = []
    prose: list[str] = []
    unclosed: str | None = None
    for event in events:
        if isinstance(event, CommandBlock):
            assert event.index == len(commands), "indexes count the commands from 0"
            commands.append(event.command)
        elif isinstance(event, ProseDelta):
            assert event.text, "no empty prose events"
            prose.append(event.text)
        else:
            assert unclosed is None, "at most one unclosed block, and it comes last"
            assert event.index == len(commands)
            unclosed = event.partial_text
    assert not any(isinstance(e, UnclosedBlock) for e in events[:-1]), "unclosed comes last"
    return commands, "".join(prose), unclosed, parser


def assert_stream_matches_batch(text: str, deltas: list[str]) -> None:
    assert "".join(deltas) == text
    commands, raw_prose, unclosed, parser = run_stream(deltas)
    assert commands == parse_cmd_blocks(text)
    assert commands == parser.blocks
    assert raw_prose == parser.raw_prose
    assert tidy_prose(raw_prose) == strip_cmd_blocks(text) == parser.prose
    assert (commands, raw_prose, unclosed) == reference_parse(text)
    assert parser.in_block == (unclosed is not None)


# --- the rules, on whole texts ------------------------------------------------------------


def test_blocks_in_order_trimmed_and_prose_without_them() -> None:
    text = "Let me look.\n<cmd>  ls -la \n</cmd>\nThen <cmd>cat a.txt</cmd> done."
    assert parse_cmd_blocks(text) == ["ls -la", "cat a.txt"]
    assert strip_cmd_blocks(text) == "Let me look.\n\nThen  done."


def test_text_without_blocks_is_all_prose() -> None:
    assert parse_cmd_blocks("just < words > here </cmd>") == []
    assert strip_cmd_blocks("  just < words > here </cmd>\n") == "just < words > here </cmd>"
    assert parse_cmd_blocks("") == []
    assert strip_cmd_blocks("") == ""


def test_heredoc_with_nested_tags_is_one_command() -> None:
    assert parse_cmd_blocks(HEREDOC) == [
        "cat > prompt.txt <<'EOF'\nUse <cmd>ls</cmd> to list files.\nEOF"
    ]
    assert strip_cmd_blocks(HEREDOC) == "I will write the prompt file.\n\nDone."


def test_deeper_nesting_counts_every_level() -> None:
    text = "<cmd>a <cmd>b <cmd>c</cmd> d</cmd> e</cmd> after"
    assert parse_cmd_blocks(text) == ["a <cmd>b <cmd>c</cmd> d</cmd> e"]
    assert strip_cmd_blocks(text) == "after"


def test_unmatched_nested_open_is_recovered_at_the_end() -> None:
    text = "Search: <cmd>grep -rn '<cmd>' src</cmd>\nthen <cmd>ls</cmd> end"
    assert parse_cmd_blocks(text) == ["grep -rn '<cmd>' src", "ls"]
    assert strip_cmd_blocks(text) == "Search: \nthen  end"


def test_every_unmatched_nested_open_is_recovered() -> None:
    """After a recovered block the rest is parsed again, and may need recovering in turn."""
    text = (
        "a <cmd>grep -e '<cmd>' -e '<cmd>' 1</cmd> b </cmd> c <cmd>ls</cmd> d "
        "<cmd>grep '<cmd>' 2</cmd> e <cmd>x <cmd>y</cmd> z</cmd> f <cmd>grep '<cmd>' 3"
    )
    assert parse_cmd_blocks(text) == [
        "grep -e '<cmd>' -e '<cmd>' 1",
        "ls",
        "grep '<cmd>' 2",
        "x <cmd>y</cmd> z",
    ]
    commands, raw_prose, unclosed, parser = run_stream([text])
    assert raw_prose == "a  b </cmd> c  d  e  f "
    assert unclosed == "grep '<cmd>' 3"
    assert parser.in_block
    assert (commands, raw_prose, unclosed) == reference_parse(text)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("delta_chars", [None, 20])
def test_recovery_takes_linear_time(delta_chars: int | None) -> None:
    """Many unmatched nested opens: each recovery must not re-scan the rest of the message.

    Re-scanning took about 140 s for this message (quadratic); one pass takes about 0.1 s.
    The bound is far from both, so the test neither flakes on a loaded machine nor passes
    a quadratic parser.
    """
    units = 20_000
    text = "Look: <cmd>grep -n '<cmd>' f.py</cmd> then\n" * units  # ~0.9 MB
    size = delta_chars or len(text)
    deltas = [text[i : i + size] for i in range(0, len(text), size)]
    started = time.perf_counter()
    commands, raw_prose, unclosed, parser = run_stream(deltas)
    elapsed = time.perf_counter() - started
    assert elapsed < 10, f"{elapsed:.1f} s to parse {len(text)} characters: not linear"
    assert commands == ["grep -n '<cmd>' f.py"] * units
    assert raw_prose == "Look:  then\n" * units
    assert unclosed is None
    assert not parser.in_block


def test_recovery_is_skipped_when_the_message_was_truncated() -> None:
    text = "Search: <cmd>grep -rn '<cmd>' src</cmd>\nthen <cmd>ls</cmd> end"
    commands, raw_prose, unclosed, parser = run_stream([text], truncated=True)
    assert commands == []
    assert raw_prose == "Search: "
    assert unclosed == "grep -rn '<cmd>' src</cmd>\nthen <cmd>ls</cmd> end"
    assert parser.in_block


def test_truncated_heredoc_is_never_run() -> None:
    cut = "<cmd>cat > doc.md <<'EOF'\nRun <cmd>ls</cmd> or <cmd>pw"
    commands, _, unclosed, parser = run_stream([cut], truncated=True)
    assert commands == []
    assert unclosed == "cat > doc.md <<'EOF'\nRun <cmd>ls</cmd> or <cmd>pw"
    assert parser.in_block


@pytest.mark.parametrize(
    ("text", "commands", "prose"),
    [
        pytest.param(
            # the documented limitation of depth counting
            "<cmd>grep '</cmd>' f</cmd>",
            ["grep '"],
            "' f</cmd>",
            id="unmatched_close_inside_a_block_ends_it_early",
        ),
        pytest.param(
            "Example:\n```\n<cmd>ls</cmd>\n```\n",
            ["ls"],
            "Example:\n```\n\n```",
            id="code_fences_in_prose_are_not_special",
        ),
    ],
)
def test_the_commands_and_the_prose_of(text: str, commands: list[str], prose: str) -> None:
    assert parse_cmd_blocks(text) == commands
    assert strip_cmd_blocks(text) == prose


def test_unclosed_trailing_block_is_not_a_command_and_is_cut_from_prose() -> None:
    text = "Running it now.\n<cmd>ls\n\nmore"
    assert parse_cmd_blocks(text) == []
    assert strip_cmd_blocks(text) == "Running it now."
    assert parse_cmd_blocks("<cmd>a</cmd> and <cmd>b") == ["a"]


def test_empty_blocks_are_skipped_without_taking_an_index() -> None:
    text = "x <cmd>  \n </cmd> y <cmd></cmd> z <cmd>pwd</cmd>"
    assert parse_cmd_blocks(text) == ["pwd"]
    assert strip_cmd_blocks(text) == "x  y  z"
    _, _, _, parser = run_stream([text])
    assert parser.blocks == ["pwd"]


def test_only_exact_lowercase_tags_count() -> None:
    text = "<CMD>ls</CMD> <Cmd>a</Cmd> <cmd >b</cmd > < cmd>c</cmd> <cmd>d</cmd>"
    assert parse_cmd_blocks(text) == ["d"]
    assert strip_cmd_blocks(text).startswith("<CMD>ls</CMD> <Cmd>a</Cmd> <cmd >b</cmd >")


def test_stray_closing_tag_is_prose() -> None:
    assert strip_cmd_blocks("a </cmd> b") == "a </cmd> b"
    assert parse_cmd_blocks("a </cmd> b <cmd>c</cmd>") == ["c"]


def test_blank_line_runs_collapse_to_one_blank_line() -> None:
    text = "one\n\n\n\ntwo\n \t\n\n  \nthree\n<cmd>a</cmd>\n\n<cmd>b</cmd>\n\nfour\n\n"
    assert strip_cmd_blocks(text) == "one\n\ntwo\n\nthree\n\nfour"
    assert strip_cmd_blocks("single\nnewlines\nstay") == "single\nnewlines\nstay"
    assert strip_cmd_blocks("a\n\nb") == "a\n\nb"


def test_unicode_survives_untouched() -> None:
    text = "Voilà 🌍 — 日本語\n<cmd>echo 'naïve ✓' > f\u200b</cmd>\nçà\U0001f600"
    assert parse_cmd_blocks(text) == ["echo 'naïve ✓' > f\u200b"]
    assert strip_cmd_blocks(text) == "Voilà 🌍 — 日本語\n\nçà\U0001f600"


def test_events_are_frozen() -> None:
    event = ProseDelta("x")
    with pytest.raises(FrozenInstanceError):
        event.text = "y"  # type: ignore[misc]
    assert event == ProseDelta("x")
    assert hash(event) == hash(ProseDelta("x"))
    assert repr(event) == "ProseDelta(text='x')"
    block = CommandBlock(0, "ls")
    with pytest.raises(FrozenInstanceError):
        block.command = "rm"  # type: ignore[misc]
    assert block == CommandBlock(index=0, command="ls") != CommandBlock(1, "ls")
    assert hash(block) == hash(CommandBlock(0, "ls"))
    assert repr(block) == "CommandBlock(index=0, command='ls')"


# --- the stream parser --------------------------------------------------------------------


def test_prose_streams_immediately_and_only_a_partial_tag_is_held() -> None:
    parser = CmdStreamParser()
    assert parser.feed("Hello") == [ProseDelta("Hello")]
    assert parser.feed(" wor<") == [ProseDelta(" wor")]
    assert parser.feed("ld> a <c") == [ProseDelta("<ld> a ")]
    assert parser.feed("m") == []
    assert parser.feed("d") == []
    assert not parser.in_block
    assert parser.feed(">ls -") == []
    assert parser.in_block
    assert parser.feed("l</cmd") == []
    assert parser.feed(">") == [CommandBlock(0, "ls -l")]
    assert not parser.in_block
    assert parser.feed("\nbye <cmd") == [ProseDelta("\nbye ")]
    assert parser.close() == [ProseDelta("<cmd")]  # "<cmd" alone is not a tag


def test_close_flushes_a_held_partial_tag_as_prose() -> None:
    parser = CmdStreamParser()
    assert parser.feed("bye <cmd") == [ProseDelta("bye ")]
    assert parser.close() == [ProseDelta("<cmd")]
    assert not parser.in_block
    assert parser.prose == "bye <cmd"


def test_close_reports_an_unclosed_block() -> None:
    parser = CmdStreamParser()
    events = parser.feed("Running <cmd>make te")
    assert events == [ProseDelta("Running ")]
    assert parser.in_block
    assert parser.close() == [UnclosedBlock(0, "make te")]
    assert parser.in_block
    assert parser.blocks == []


def test_a_stray_closing_tag_prefix_outside_a_block_is_not_held() -> None:
    parser = CmdStreamParser()
    assert parser.feed("a </cm") == [ProseDelta("a </cm")]
    assert parser.feed("d>") == [ProseDelta("d>")]


def test_inside_a_block_a_partial_closing_tag_is_held() -> None:
    parser = CmdStreamParser()
    parser.feed("<cmd>echo </")
    assert parser.feed("b>") == []
    assert parser.feed("</cmd>") == [CommandBlock(0, "echo </b>")]


def test_recovered_commands_arrive_from_close() -> None:
    parser = CmdStreamParser()
    streamed = parser.feed("<cmd>grep '<cmd>' f</cmd>\nok <cmd>ls</cmd>")
    assert streamed == []
    assert parser.in_block
    assert parser.close() == [
        CommandBlock(0, "grep '<cmd>' f"),
        ProseDelta("\nok "),
        CommandBlock(1, "ls"),
    ]
    assert not parser.in_block
    assert parser.prose == "ok"


def test_prose_property_tidies_and_raw_prose_keeps_everything() -> None:
    parser = CmdStreamParser()
    parser.feed("  a\n<cmd>x</cmd>\n\n\n")
    assert parser.raw_prose == "  a\n\n\n\n"
    assert parser.prose == "a"
    parser.feed("b  ")
    assert parser.prose == "a\n\nb"
    parser.close()
    assert parser.prose == strip_cmd_blocks("  a\n<cmd>x</cmd>\n\n\nb  ")


def test_blocks_property_is_a_copy() -> None:
    parser = CmdStreamParser()
    parser.feed("<cmd>ls</cmd>")
    parser.blocks.append("rm -rf /")
    assert parser.blocks == ["ls"]


def test_feed_and_close_after_close_are_errors() -> None:
    parser = CmdStreamParser()
    parser.close()
    with pytest.raises(RuntimeError, match="new parser"):
        parser.feed("x")
    with pytest.raises(RuntimeError, match="new parser"):
        parser.close()


def test_empty_deltas_are_harmless() -> None:
    parser = CmdStreamParser()
    assert parser.feed("") == []
    parser.feed("<c")
    assert parser.feed("") == []
    assert parser.feed("md>x") == []
    assert parser.feed("") == []
    assert parser.feed("</cmd>") == [CommandBlock(0, "x")]


# --- stream == batch under every split ----------------------------------------------------


@pytest.mark.parametrize("text", TRICKY_MESSAGES)
def test_every_two_way_split_matches_batch(text: str) -> None:
    for cut in range(len(text) + 1):
        assert_stream_matches_batch(text, [text[:cut], text[cut:]])


@pytest.mark.parametrize("text", TRICKY_MESSAGES)
def test_every_three_way_split_matches_batch(text: str) -> None:
    for first, second in itertools.combinations_with_replacement(range(len(text) + 1), 2):
        assert_stream_matches_batch(text, [text[:first], text[first:second], text[second:]])


@pytest.mark.parametrize("text", TRICKY_MESSAGES)
def test_character_by_character_matches_batch(text: str) -> None:
    assert_stream_matches_batch(text, list(text))


@pytest.mark.parametrize("text", TRICKY_MESSAGES)
def test_prose_is_held_back_only_while_it_may_start_a_tag(text: str) -> None:
    """After every character, the prose emitted so far is all the prose decided so far."""
    parser = CmdStreamParser()
    for end in range(1, len(text) + 1):
        parser.feed(text[end - 1])
        if parser.in_block:
            continue
        whole = CmdStreamParser()
        whole.feed(text[:end])
        whole.close()
        decided = whole.raw_prose
        held = decided[len(parser.raw_prose) :]
        assert decided.startswith(parser.raw_prose)
        assert held in ("", "<", "<c", "<cm", "<cmd"), (text[:end], held)
        assert text[:end].endswith(held)


TAG_HEAVY = st.lists(
    st.sampled_from(
        [
            *("<", "c", "m", "d", "/", ">", "\n", " ", "a", "é", "🌍"),
            *("<cmd>", "</cmd>", "cmd>", "</", "`", "EOF"),
        ]
    ),
    max_size=80,
).map("".join)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=TAG_HEAVY, data=st.data())
def test_random_texts_and_random_splits_match_batch(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    deltas = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert_stream_matches_batch(text, deltas)


@settings(max_examples=300, deadline=None)
@given(text=TAG_HEAVY, size=st.integers(1, 7), truncated=st.booleans())
def test_truncated_close_matches_the_reference(text: str, size: int, truncated: bool) -> None:
    deltas = [text[i : i + size] for i in range(0, len(text), size)]
    commands, raw_prose, unclosed, _ = run_stream(deltas, truncated=truncated)
    assert (commands, raw_prose, unclosed) == reference_parse(text, truncated=truncated)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), data=st.data())
def test_arbitrary_unicode_matches_batch(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    assert_stream_matches_batch(text, [text[a:b] for a, b in itertools.pairwise(bounds)])
