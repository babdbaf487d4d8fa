"""A sandboxed command's output reaches watchers while it runs: through the supervisor, the
daemon's live answer (NDJSON lines over real HTTP) and the SandboxRunner, on real Docker."""

from __future__ import annotations

import json
import socket
import time

import anyio
import pytest

from logos import ExecOptions, Result
from logos.agent.execute import BlockExecutor
from logos.runners.live import LIMIT_BYTES, LivePiece
from sandboxd.api import NDJSON
from sandboxd.client.runner import SandboxRunner
from tests.support.sandboxd_harness import Daemon

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

TICKS = "for i in 1 2 3; do echo tick$i; echo warn$i >&2; sleep 0.5; done"


async def _run_watched(daemon: Daemon, command: str) -> tuple[list[tuple[str, object]], Result]:
    heard: list[tuple[str, object]] = []
    async with SandboxRunner(socket=daemon.socket) as runner:
        executor = BlockExecutor(
            runner,
            ExecOptions(timeout_s=60),
            on_output=lambda index, piece: heard.append(("output", piece)),
            on_result=lambda index, result: heard.append(("result", result)),
        )
        async with executor:
            executor.submit(command)
    return heard, executor.results[0]


async def test_a_sandboxed_commands_output_is_heard_while_it_runs_then_its_result(
    daemon: Daemon,
) -> None:
    heard, result = await _run_watched(daemon, TICKS)
    kinds = [kind for kind, _ in heard]
    assert kinds[-1] == "result" and kinds.count("result") == 1
    pieces = [piece for kind, piece in heard if kind == "output"]
    assert all(isinstance(piece, LivePiece) for piece in pieces)
    # Heard before the end: the first ticks came while the later ones were still to come.
    out = "".join(p.text for p in pieces if isinstance(p, LivePiece) and p.stream == "stdout")
    err = "".join(p.text for p in pieces if isinstance(p, LivePiece) and p.stream == "stderr")
    assert out.startswith("tick1\n") and "warn1\n" in err
    assert (result.stdout, result.stderr, result.exit_code) == (
        "tick1\ntick2\ntick3\n",
        "warn1\nwarn2\nwarn3\n",
        0,
    )


async def test_a_quick_sandboxed_command_answers_once_with_no_live_output(
    daemon: Daemon,
) -> None:
    heard, result = await _run_watched(daemon, "echo quick")
    assert [kind for kind, _ in heard] == ["result"]
    assert result.stdout == "quick\n"


async def test_a_flood_reaches_the_watcher_bounded_and_the_result_stays_whole(
    daemon: Daemon,
) -> None:
    # About 9 MB over 3 s: far more than live output may carry.
    flood = "for i in $(seq 30); do head -c 300000 /dev/zero | tr '\\0' x; sleep 0.1; done; echo"
    heard, result = await _run_watched(daemon, flood)
    pieces = [piece for kind, piece in heard if kind == "output" and isinstance(piece, LivePiece)]
    shown = sum(len(piece.text.encode()) for piece in pieces)
    assert 0 < shown <= LIMIT_BYTES
    assert pieces[-1].last or shown < LIMIT_BYTES
    assert result.exit_code == 0 and result.stdout_dropped_bytes > 0


def _live_lines(daemon: Daemon, body: dict[str, object]) -> tuple[str, list[dict[str, object]]]:
    with daemon.client() as http, http.stream("POST", "/v1/run", json=body) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
        return response.headers["content-type"], lines


def test_the_wire_format_is_lines_of_output_then_the_answer_with_its_status(
    daemon: Daemon,
) -> None:
    kind, lines = _live_lines(
        daemon, {"command": "echo a; sleep 1; echo b", "session": "live-wire", "live": True}
    )
    assert kind == NDJSON
    *outputs, last = lines
    assert outputs and all(set(line) == {"output"} for line in outputs)
    assert outputs[0]["output"] == {
        "stream": "stdout",
        "text": "a\n",
        "skipped_bytes": 0,
        "last": False,
    }
    assert last["status"] == 200
    answer = last["answer"]
    assert isinstance(answer, dict)
    assert (answer["stdout"], answer["exit_code"]) == ("a\nb\n", 0)


def test_a_refusal_of_a_live_request_is_a_plain_4xx(daemon: Daemon) -> None:
    with daemon.client() as http:
        response = http.post(
            "/v1/run",
            json={
                "command": "echo no",
                "live": True,
                "allowed_paths": [{"path": "/etc", "read_only": True}],
            },
        )
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/json"
    assert "error" in response.json()


async def test_a_watcher_that_vanishes_mid_command_gets_it_killed(daemon: Daemon) -> None:
    body = json.dumps(
        {
            "command": "echo started; sleep 30; touch /tmp/survived",
            "session": "live-vanish",
            "live": True,
        }
    ).encode()
    raw = socket.socket(socket.AF_UNIX)
    raw.connect(str(daemon.socket))
    raw.sendall(
        b"POST /v1/run HTTP/1.1\r\nhost: sandboxd\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    raw.settimeout(10)
    seen = b""
    while b"started" not in seen:
        chunk = raw.recv(65536)
        assert chunk, seen
        seen += chunk
    assert b"200 OK" in seen and NDJSON.encode() in seen
    raw.close()
    deadline = time.monotonic() + 15
    with daemon.client() as http:
        while True:
            check = http.post(
                "/v1/run",
                json={"command": "pgrep -x sleep || echo gone", "session": "live-vanish"},
            ).json()
            if check["stdout"] == "gone\n" or time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
    assert check["stdout"] == "gone\n"
