"""The temenos auth token (a Kubernetes service-account token, read from its file) reaches the
daemon and nothing else: not the sandboxed command, not an error the model reads, not the
trajectory, the audit logs or the output, even when a daemon quotes it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_harness import Home, logos, openai_env, sent_messages
from tests.support.sandboxd_harness import Daemon
from tests.support.sse_server import ScriptedServer, openai_stream
from tests.support.temenos_server import temenos_server

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VydmljZS1hY2NvdW50.not-a-real-signature"


def _token_file(home: Home) -> Path:
    # Outside the directories commands may use, as a pod's token is.
    secrets = home.root / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text(TOKEN + "\n")
    return secrets / "token"


def _places_holding(root: Path, token_file: Path, *texts: str) -> list[str]:
    """Every file under `root` but the token's own, and each text, that holds the token."""
    found = [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and path != token_file and TOKEN.encode() in path.read_bytes()
    ]
    return found + [f"output #{index}" for index, text in enumerate(texts) if TOKEN in text]


@pytest.mark.docker
def test_the_token_never_leaves_the_request(
    daemon: Daemon, home: Home, sse_server: ScriptedServer
) -> None:
    token_file = _token_file(home)
    sse_server.enqueue(
        openai_stream(
            "<cmd>env; cat /proc/self/environ | tr '\\0' '\\n'</cmd><cmd>cat /etc/shadow</cmd>"
        ),
        openai_stream("Done."),
    )
    args = ["--model", "m", "--sandbox", "temenos", "--sandbox-addr", str(daemon.socket)]
    done = logos(
        [*args, "--sandbox-token-file", str(token_file), "--json", "look around"],
        home,
        openai_env(home, sse_server),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "PAGER=cat" in sent_messages(sse_server, 1)[-1]["content"]  # the commands ran
    leaks = _places_holding(home.root, token_file, done.stdout, done.stderr, daemon.output())
    leaks += [str(daemon.audit_log)] if TOKEN in daemon.audit_log.read_text() else []
    assert leaks == []


def test_a_daemon_quoting_the_token_back_does_not_put_it_before_the_model(
    home: Home, sse_server: ScriptedServer
) -> None:
    token_file = _token_file(home)
    sse_server.enqueue(openai_stream("<cmd>ls</cmd>"), openai_stream("Done."))
    with temenos_server(echo_token_refusal=True) as server:
        done = logos(
            [
                "--model",
                "m",
                "--sandbox",
                "temenos",
                "--sandbox-addr",
                server.address,
                "--sandbox-token-file",
                str(token_file),
                "--json",
                "look around",
            ],
            home,
            openai_env(home, sse_server),
        )
        sent = [body["auth_token"] for body in server.run_bodies()]
    assert done.returncode == 0, done.stderr
    assert sent == [TOKEN]  # the daemon got it…
    refusal = sent_messages(sse_server, 1)[-1]["content"]
    assert "refused (HTTP 403): token [auth token] is not allowed" in refusal
    assert _places_holding(home.root, token_file, done.stdout, done.stderr) == []  # …nobody else
