"""A `logos serve` run in the sandbox: the server opens sandboxd's runner by its kind name
(logos never imports sandboxd) and the commands run in a real container."""

from __future__ import annotations

import pytest

from tests.support.cli_harness import Home
from tests.support.sandboxd_harness import Daemon
from tests.support.serve_harness import read_events, sandbox_in_work, sandboxd_config, serving
from tests.support.sse_server import ScriptedServer, openai_stream


@pytest.mark.docker
@pytest.mark.timeout(180)
def test_a_sandbox_run_mounts_only_the_allowed_path(
    home: Home, daemon: Daemon, sse_server: ScriptedServer
) -> None:
    outside = home.root / "state"  # on the host, beside the allowed path
    sse_server.enqueue(
        openai_stream(f"<cmd>echo from-the-sandbox > made.txt; ls {outside} 2>&1</cmd>"),
        openai_stream("Done."),
    )
    config = sandboxd_config(daemon.socket)
    with serving(home, sse_server, config=config) as served, served.client() as client:
        refused = client.post("/v1/runs", json={"prompt": "x", "runner": {"kind": "sandbox"}})
        assert refused.status_code == 400
        assert "needs runner.allowed_paths" in refused.json()["error"]
        started = served.start_run(client, prompt="make a file", runner=sandbox_in_work(home))
        events = read_events(client, started["run"])
    start = events[0].data
    assert (start["runner"], start["approval"]) == ("sandbox", "auto")
    result = next(e for e in events if e.type == "command_result").data["result"]
    assert "No such file or directory" in result["stdout"], result
    assert (home.work / "made.txt").read_text() == "from-the-sandbox\n"
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert f"sees only these host paths: {home.work} (read-write)" in system
