"""Attack: a client with the token sends an endless request body. Read whole before being
checked, it would take the server's memory with it; it is refused as soon as it passes
`max_body_bytes`, with the server's memory where it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.memory import read_status_kib
from tests.support.cli_harness import make_home
from tests.support.serve_harness import serving
from tests.support.sse_server import ScriptedServer

pytestmark = pytest.mark.timeout(120)
MIB = 1024 * 1024
SENT = 256 * MIB


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _endless_json() -> Iterator[bytes]:
    yield b'{"prompt": "'
    chunk = b"x" * MIB
    for _ in range(SENT // MIB):
        yield chunk
    yield b'"}'


def test_an_endless_body_is_refused_without_taking_memory(
    tmp_path: Path, sse_server: ScriptedServer
) -> None:
    home = make_home(tmp_path)
    with serving(home, sse_server) as served, served.client(timeout=60) as client:
        pid = served.proc.pid
        assert client.get("/v1/sessions").status_code == 200  # warm up
        _reset_peak(pid)
        before = read_status_kib(pid, "VmHWM")
        try:
            answer = client.post(
                "/v1/runs",
                content=_endless_json(),  # chunked: no Content-Length to refuse it by
                headers={"content-type": "application/json"},
            )
            status = answer.status_code
        except httpx.HTTPError:
            status = None  # the server hung up mid-body after answering: fine
        grown_mib = (read_status_kib(pid, "VmHWM") - before) / 1024
        assert status in (413, None)
        assert grown_mib < 32, f"the server's memory grew by {grown_mib:.0f} MiB"
        assert client.get("/v1/sessions").status_code == 200
