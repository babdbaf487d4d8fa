"""A running command's output reaches watchers while it runs: bounded pieces from the local
runner's real processes, through the executor, into `--json` events."""

from __future__ import annotations

import json

import anyio
import pytest

from logos import ExecOptions, LocalRunner, Result
from logos.agent.execute import BlockExecutor
from logos.runners.live import PIECE_BYTES, LiveOutput, LivePiece
from tests.support.cli_harness import Home, PtySession, logos, openai_env
from tests.support.sse_server import ScriptedServer, openai_stream

TICKS = "for i in 1 2 3; do echo tick$i; echo warn$i >&2; sleep 0.4; done"


def test_pieces_come_per_stream_and_a_character_split_between_writes_stays_whole() -> None:
    live = LiveOutput()
    accented = "é".encode()
    live.write("stdout", b"caf" + accented[:1])
    live.write("stderr", b"oops\n")
    first = live.take()
    live.write("stdout", accented[1:] + b"\n")
    second = live.take()
    assert first == [LivePiece("stdout", "caf"), LivePiece("stderr", "oops\n")]
    assert second == [LivePiece("stdout", "é\n")]
    assert live.take() == []


def test_a_flood_between_takes_shows_its_newest_bytes_and_counts_the_rest() -> None:
    live = LiveOutput()
    flood = b"".join(b"%07d\n" % n for n in range(20_000))  # 160,000 bytes
    for start in range(0, len(flood), 4096):
        live.write("stdout", flood[start : start + 4096])
    (piece,) = live.take()
    assert piece.skipped_bytes == len(flood) - PIECE_BYTES
    assert piece.text.encode() == flood[-PIECE_BYTES:]


def test_a_cut_through_a_character_skips_its_remains_rather_than_show_them_broken() -> None:
    live = LiveOutput()
    live.write("stdout", "€".encode() * (PIECE_BYTES // 3 + 1) + b"end")
    (piece,) = live.take()
    assert "\ufffd" not in piece.text and piece.text.endswith("€end")
    assert piece.skipped_bytes + len(piece.text.encode()) == 3 * (PIECE_BYTES // 3 + 1) + 3


def test_live_output_stops_at_its_limit_and_says_so_once() -> None:
    live = LiveOutput(limit_bytes=10)
    live.write("stdout", b"0123456")
    assert live.take() == [LivePiece("stdout", "0123456")]
    live.write("stdout", b"789abcdef")
    assert live.take() == [LivePiece("stdout", "789", last=True)]
    live.write("stdout", b"more")
    assert live.take() == []


def test_nothing_is_taken_after_close() -> None:
    live = LiveOutput()
    live.write("stdout", b"printed as the command ended")
    live.close()
    live.write("stdout", b"after")
    assert live.take() == []


async def _run_watched(command: str) -> tuple[list[tuple[str, object]], Result]:
    heard: list[tuple[str, object]] = []
    executor = BlockExecutor(
        LocalRunner(),
        ExecOptions(),
        on_output=lambda index, piece: heard.append(("output", piece)),
        on_result=lambda index, result: heard.append(("result", result)),
    )
    async with executor:
        executor.submit(command)
    return heard, executor.results[0]


@pytest.mark.timeout(30)
def test_a_running_command_is_heard_before_its_result_and_no_more_after() -> None:
    heard, result = anyio.run(_run_watched, TICKS)
    kinds = [kind for kind, _ in heard]
    assert kinds[-1] == "result" and kinds.count("result") == 1
    pieces = [piece for kind, piece in heard if isinstance(piece, LivePiece)]
    assert pieces, "a command printing for over a second was never heard while it ran"
    stdout = "".join(piece.text for piece in pieces if piece.stream == "stdout")
    stderr = "".join(piece.text for piece in pieces if piece.stream == "stderr")
    assert stdout.startswith("tick1\n") and result.stdout.startswith(stdout)
    assert stderr.startswith("warn1\n") and result.stderr.startswith(stderr)
    assert not any(piece.skipped_bytes for piece in pieces)


@pytest.mark.timeout(30)
def test_a_quick_command_is_heard_only_through_its_result() -> None:
    heard, result = anyio.run(_run_watched, "echo quick")
    assert [kind for kind, _ in heard] == ["result"] and result.stdout == "quick\n"


@pytest.mark.timeout(60)
def test_json_events_carry_a_running_commands_output_between_its_start_and_result(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream(f"<cmd>{TICKS}</cmd>"), openai_stream("It ticked."))
    done = logos(["--model", "m", "--yes", "--json", "go"], home, openai_env(home, sse_server))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    types = [event["type"] for event in events]
    start, result = types.index("command_start"), types.index("command_result")
    outputs = [i for i, kind in enumerate(types) if kind == "command_output"]
    assert outputs and start < min(outputs) and max(outputs) < result
    first = events[outputs[0]]
    assert (first["turn"], first["index"]) == (1, 0)
    printed = "".join(events[i]["text"] for i in outputs if events[i]["stream"] == "stdout")
    assert printed.startswith("tick1\n")
    assert events[result]["result"]["stdout"] == "tick1\ntick2\ntick3\n"


@pytest.mark.timeout(60)
def test_a_terminal_shows_a_running_commands_latest_line_under_its_spinner(
    home: Home, sse_server: ScriptedServer
) -> None:
    ticking = "for i in 1 2 3 4 5 6; do echo line-$i-of-six; sleep 0.5; done"
    sse_server.enqueue(openai_stream(f"<cmd>{ticking}</cmd>"), openai_stream("It ticked."))
    terminal = PtySession(["--model", "m", "--yes", "tick"], home, openai_env(home, sse_server))
    try:
        # Its result shows only the last four lines: line 2 can come only from the live region.
        terminal.expect("│ line-2-of-six")
        terminal.expect("2 more lines")  # the result, after it
        terminal.expect("It ticked.")
        assert terminal.wait() == 0
    finally:
        terminal.close()
