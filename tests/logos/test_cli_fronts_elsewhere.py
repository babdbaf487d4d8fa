"""logos's fronts started where a newcomer or an editor starts them: an environment with only
PATH, HOME and a provider's variables (no XDG_RUNTIME_DIR, no config file), a server on a port
or socket of its own choosing, no sandbox daemon, no server at all. Each works, or says what
is wrong and what to pass; none ends in an internal error."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.logos.test_batch_examples import SOLUTIONS
from tests.support.processes import wait_for
from tests.support.readme import (
    command_bin,
    newcomer_env,
    private_default_socket,
    readme_daemon,
    readme_line,
    serving_line,
)
from tests.support.sandboxd_harness import short_dir
from tests.support.sse_server import RecordedRequest, Reply, ScriptedServer, openai_stream

REPO = Path(__file__).resolve().parents[2]
NO_DAEMON = (
    "(the default socket): start it with `sandboxd serve`, or pass --socket PATH (or set "
    "$SANDBOXD_SOCKET) to reach a daemon that listens elsewhere"
)
SERVE_NAMED = (
    "Start one with `logos serve`, or name the one that runs with --url URL (or "
    "$LOGOS_SERVE_URL; a Unix socket's path works too)"
)


def logos(env: Mapping[str, str], *args: str, cwd: Path | None = None) -> Any:
    """`logos ARGS` in `env`, to its end: never an internal error."""
    done = subprocess.run(
        ["logos", *args],
        env=dict(env),
        cwd=cwd or env["HOME"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return done


def newcomer(prefix: str, model: ScriptedServer | None = None) -> dict[str, str]:
    root = short_dir(prefix)
    (root / "home").mkdir()
    provider = (
        {}
        if model is None
        else {"OPENAI_BASE_URL": model.base_url + "/v1", "OPENAI_API_KEY": "test-key"}
    )
    return newcomer_env(command_bin(root / "bin"), root / "home", **provider)


def record_of(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) / ".local" / "state" / "logos" / "serve" / "address.json"


def serving(env: Mapping[str, str], *args: str) -> Any:
    """`logos serve ARGS` in the background until the block ends."""
    line = " ".join(["logos", "serve", *args])
    return serving_line(line, env, Path(env["HOME"]), lambda out: "serving on" in out, line)


def test_the_task_cli_runs_and_names_the_sandbox_it_looked_for(
    sse_server: ScriptedServer,
) -> None:
    env = newcomer("fet", sse_server)
    sse_server.enqueue(openai_stream("<cmd>echo hi</cmd>"), openai_stream("It said hi."))
    done = logos(env, "--yes", "say hi")
    assert (done.returncode, done.stdout) == (0, "It said hi.\n"), done.stderr
    socket_path = private_default_socket(Path(env["HOME"]))
    sandboxed = logos(env, "--sandbox", "say hi")
    assert sandboxed.returncode == 2
    assert f"sandboxd is not running on {socket_path} {NO_DAEMON}" in sandboxed.stderr


def test_serve_on_any_port_or_socket_is_found_by_project_until_it_stops(
    sse_server: ScriptedServer,
) -> None:
    env = newcomer("fes", sse_server)
    record = record_of(env)
    with serving(env, "--port", "0") as (first, _):
        written = json.loads(record.read_text())
        assert record.stat().st_mode & 0o777 == 0o600
        assert written["pid"] == first.pid and written["sandbox"] == "sandboxd"
        assert written["token_file"] == str(record.parent / "token")
        assert logos(env, "project", "create", "found").returncode == 0
        other = logos(env, "project", "agent", "found", "t", "--sandbox", "temenos")
        assert other.returncode == 2
        assert (
            f"--sandbox temenos: the server at {written['url']} runs its sandboxed agents in "
            "sandboxd (its config's `sandbox`): drop the kind, or start `logos serve` with "
            'sandbox = "temenos" in its config file'
        ) in other.stderr
        port = int(written["url"].rpartition(":")[2])
        busy = logos(env, "serve", "--port", str(port))
        assert busy.returncode == 2
        assert (
            f"logos: cannot listen on 127.0.0.1:{port}: Address already in use: choose another "
            "--port (0 picks a free one) or --host\n"
        ) == busy.stderr
        assert json.loads(record.read_text())["pid"] == first.pid
    assert not record.exists()
    gone = logos(env, "project", "--url", written["url"], "list")
    assert gone.returncode == 2
    assert f"no logos serve answers at {written['url']} (given with --url): " in gone.stderr
    assert SERVE_NAMED in gone.stderr

    unix = Path(env["HOME"]) / "logos.sock"
    with serving(env, "--socket", str(unix)):
        assert json.loads(record.read_text())["url"] == f"unix:{unix}"
        listed = logos(env, "project", "list")
        assert listed.returncode == 0 and "found  idle" in listed.stdout
    assert not record.exists()


def test_project_without_a_server_says_what_it_tried(sse_server: ScriptedServer) -> None:
    env = newcomer("fep", sse_server)
    record = record_of(env)
    nothing = logos(env, "project", "list")
    assert nothing.returncode == 2
    assert (
        f"no logos serve is running for you: none recorded where it listens, and there is no "
        f"server token at {record.parent / 'token'}. Start one with `logos serve`, or name one "
        "with --url URL (or $LOGOS_SERVE_URL) and --token-file FILE"
    ) in nothing.stderr
    with serving(env, "--port", "0") as (server, _):
        pass  # leaves its token behind
    killed = subprocess.Popen(
        ["logos", "serve", "--port", "0"],
        env=env,
        cwd=env["HOME"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(record.exists), "logos serve recorded no address"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{closed.getsockname()[1]}"
    stale = logos({**env, "LOGOS_SERVE_URL": nobody}, "project", "list")
    assert stale.returncode == 2
    assert f"no logos serve answers at {nobody} (from $LOGOS_SERVE_URL): " in stale.stderr
    assert SERVE_NAMED in stale.stderr
    assert server.returncode == 0
    left = json.loads(record.read_text())
    (record.parent / "token").unlink()
    forgotten = logos(env, "project", "list")
    assert (
        f"({record} names a logos serve (pid {left['pid']}, at {left['url']}) that is no "
        "longer running)"
    ) in forgotten.stderr
    garbled = logos(env, "project", "--url", "nonsense", "--token-file", "/dev/null", "list")
    assert garbled.returncode == 2
    assert (
        "'nonsense' (given with --url) is not where a logos serve can listen (it names no "
        "http:// address): give http://HOST:PORT, or the path of its Unix socket"
    ) in garbled.stderr


def solve_the_examples(request: RecordedRequest) -> Reply:
    """A model that does each example task of the README's batch line, then answers."""
    messages = request.json["messages"]
    if any("<result>" in str(message["content"]) for message in messages[1:]):
        return openai_stream("Done.")
    task = str(messages[-1]["content"])
    for prompt, command in (
        ("Fix the bug in calc.py", SOLUTIONS["fix-add"]),
        ("the word sandbox", SOLUTIONS["count-sandbox"]),
        ("Rename hello.txt", SOLUTIONS["rename-greeting"]),
    ):
        if prompt in task:
            return openai_stream(f"<cmd>{command}</cmd>")
    raise AssertionError(f"not an example task: {task[:200]}")


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_the_readmes_batch_line_with_and_without_the_daemon(
    docker_client: Any, sse_server: ScriptedServer
) -> None:
    env = newcomer("feb", sse_server)
    checkout = Path(env["HOME"]) / "logos"
    shutil.copytree(REPO / "examples", checkout / "examples")
    line = readme_line("A short tour", "logos batch")
    words = line.split()[1:]
    socket_path = private_default_socket(Path(env["HOME"]))
    refused = logos(env, *words, cwd=checkout)
    assert refused.returncode == 2
    assert f"sandboxd is not running on {socket_path} {NO_DAEMON}" in refused.stderr
    sse_server.answer_with(solve_the_examples)
    with readme_daemon(docker_client, env, checkout):
        done = logos(env, *words, cwd=checkout)
    assert done.returncode == 0, done.stderr
    summary = json.loads((checkout / "runs" / "examples" / "summary.json").read_text())
    assert summary["passed"] == 3, summary
