"""A project's agents in sandboxes: each sees only its own allowed paths, enforced by a
real sandboxd (logos never imports it: the server opens its runner by kind name)."""

from __future__ import annotations

import pytest

from tests.support.cli_harness import Home
from tests.support.project_harness import ProjectClient, of_type, replies
from tests.support.sandboxd_harness import Daemon
from tests.support.serve_harness import sandboxd_config, serving
from tests.support.sse_server import ScriptedServer, openai_stream


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_a_talons_sandbox_cannot_read_a_path_only_the_captain_was_given(
    home: Home, daemon: Daemon, sse_server: ScriptedServer
) -> None:
    captain_dir, talon_dir = home.work / "captain", home.work / "talon"
    captain_dir.mkdir()
    talon_dir.mkdir()
    (captain_dir / "secret.txt").write_text("captain-only\n")
    sse_server.enqueue(
        openai_stream(f"<cmd>cat {captain_dir}/secret.txt</cmd>"),
        openai_stream("I can read it.\n@talon read the same file"),
        openai_stream(f"<cmd>cat {captain_dir}/secret.txt; echo written > mine.txt</cmd>"),
        openai_stream("I cannot read it."),
    )
    config = sandboxd_config(daemon.socket)
    with serving(home, sse_server, config=config) as served:
        project = ProjectClient.create(
            served.client(),
            allowed_paths=[
                {"path": str(captain_dir), "read_only": False},
                {"path": str(talon_dir), "read_only": False},
            ],
        )
        sandbox = {"kind": "sandbox"}
        project.add(
            "boss",
            "captain",
            runner={**sandbox, "allowed_paths": [{"path": str(captain_dir), "read_only": True}]},
        )
        project.add(
            "talon",
            runner={**sandbox, "allowed_paths": [{"path": str(talon_dir), "read_only": False}]},
        )
        wider = project.client.post(
            f"{project.path}/agents",
            json={
                "name": "wide",
                "runner": {**sandbox, "allowed_paths": [{"path": str(home.root)}]},
            },
        )
        assert wider.status_code == 403, wider.text
        events = project.ask("read the secret")
    results = [
        (e["agent"], e["event"]["result"])
        for e in of_type(events, "command")
        if e["event"]["type"] == "command_result"
    ]
    assert results[0][0] == "boss" and results[0][1]["stdout"] == "captain-only\n"
    talon, result = results[1]
    assert talon == "talon"
    assert "captain-only" not in result["stdout"]
    assert "No such file or directory" in result["stdout"] + result["stderr"]
    assert (talon_dir / "mine.txt").read_text() == "written\n"
    assert replies(events)[-1] == ("talon", "complete", "I cannot read it.")
