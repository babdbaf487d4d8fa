"""Attacks on who may call a local server, through each one's real HTTP front: a real `logos
serve`, a real `logos mcp --http` and a real `sandboxd mcp --http`. They keep one set of rules
(`logos.access`), so each attack is one test run against all three: a request without the
right token, under a rebinding name or from a foreign origin is refused (401, 421, 403) with
what to do; a token file that is a symlink, another user's, readable by others, too short or
not a file stops the server at start, saying what to do, and is left as it was.

`sandboxd mcp` needs no daemon here: every request is answered before a tool would run.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli_harness import Home, logos, make_home, openai_env
from tests.support.mcp_servers import INITIALIZE, http_server
from tests.support.processes import log_text
from tests.support.serve_harness import Served, client_tls, serving
from tests.support.sse_server import ScriptedServer

pytestmark = pytest.mark.timeout(180)

SERVERS = ("logos serve", "logos mcp", "sandboxd mcp")
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
OTHER_UID = 1000
ALLOWED_ORIGIN = "http://127.0.0.1:6274"
"""The MCP servers are launched to allow it (the MCP Inspector's page)."""
KNOWN_TEXT = "a-line-the-attacker-knows-0123456789abcdef\n"
"""The text of a file of the user's that a symlinked token file points at."""


@dataclass(frozen=True)
class Front:
    """One running server, and a request of its that needs the token."""

    name: str
    base: str
    """`http://127.0.0.1:PORT`."""
    token_file: Path

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def send(
        self, authorization: str | None = "own", *extra: tuple[str, str], **headers: str
    ) -> httpx.Response:
        """The request, with `Authorization: Bearer <its token>` unless told otherwise;
        `extra`: more headers, repeats allowed."""
        if authorization == "own":
            authorization = f"Bearer {self.token}"
        given = [(name.replace("_", "-"), value) for name, value in headers.items()]
        if authorization is not None:
            given.append(("authorization", authorization))
        with httpx.Client(base_url=self.base, timeout=30, verify=client_tls()) as http:
            if self.name == "logos serve":
                return http.get("/v1/sessions", headers=[*given, *extra])
            return http.post(
                "/mcp", json=INITIALIZE, headers=[*MCP_HEADERS.items(), *given, *extra]
            )


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return make_home(tmp_path_factory.mktemp("access"))


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(place: Home, model: ScriptedServer) -> Iterator[Served]:
    with serving(place, model) as server:
        yield server


@pytest.fixture(scope="module", params=SERVERS)
def front(request: pytest.FixtureRequest, place: Home, model: ScriptedServer) -> Iterator[Front]:
    """Each server once for the module, with the token file it created at start."""
    name: str = request.param
    if name == "logos serve":
        served: Served = request.getfixturevalue("served")
        yield Front(name, served.url, served.token_path)
        return
    token_file = place.root / name.replace(" ", "-") / "new" / "token"
    program = name.split()[0]
    extra = ["--model", "m"] if program == "logos" else ["--socket", str(place.root / "none")]
    with http_server(
        program,
        "mcp",
        *extra,
        "--token-file",
        str(token_file),
        "--allow-origin",
        ALLOWED_ORIGIN,
        log_dir=place.root,
        env=openai_env(place, model),
        cwd=place.work,
    ) as server:
        yield Front(name, server.url.removesuffix("/mcp"), token_file)


def test_a_missing_token_file_is_created_private(front: Front) -> None:
    assert stat.S_IMODE(front.token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(front.token_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(front.token_file.parent.parent.stat().st_mode) == 0o700
    assert len(front.token) >= 43


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        (None, "this request has no bearer token"),
        ("Bearer not-the-token-0123456789abcdef-0123", "this request has a wrong bearer token"),
        ("Bearer {short}", "this request has a wrong bearer token"),
        ("Bearer {token}{token}", "this request has a wrong bearer token"),
        ("Basic dXNlcjpwYXNz", "has an Authorization header that is not a bearer token"),
        ("{token}", "has an Authorization header that is not a bearer token"),
    ],
    ids=["none", "wrong", "one-short", "doubled", "basic", "no-scheme"],
)
def test_a_request_without_the_right_token_is_refused(
    front: Front, authorization: str | None, expected: str
) -> None:
    token = front.token
    sent = None if authorization is None else authorization.format(token=token, short=token[:-1])
    refused = front.send(sent)
    assert refused.status_code == 401, refused.text
    assert refused.headers["www-authenticate"] == "Bearer"
    message = refused.json()["error"]
    assert expected in message
    assert "send Authorization: Bearer <token>" in message
    assert token not in refused.text


def test_the_token_is_taken_with_its_scheme_in_any_case(front: Front) -> None:
    assert front.send(f"bearer {front.token}").status_code == 200
    assert front.send(f"BEARER {front.token}").status_code == 200


def test_two_authorization_headers_are_refused(front: Front) -> None:
    """One could be checked and the other read: the right token second must not help."""
    refused = front.send("Bearer not-the-token-0123456789abcdef-0123", ("authorization", "x"))
    assert refused.status_code == 400, refused.text
    assert "more than one authorization header" in refused.json()["error"]


@pytest.mark.parametrize(
    "name",
    ["rebind.attacker.example", "127.0.0.1.attacker.example", "localhost.attacker.example"],
)
def test_a_rebinding_name_is_refused_even_with_the_token(front: Front, name: str) -> None:
    host = f"{name}:{front.port}"
    refused = front.send(host=host)
    assert refused.status_code == 421, refused.text
    message = refused.json()["error"]
    assert f"does not answer to the name {host!r} (its Host header)" in message
    assert "127.0.0.1, ::1, localhost" in message


@pytest.mark.parametrize(
    "origin",
    ["http://attacker.example", "null", "http://127.0.0.1:1", "https://127.0.0.1:{port}"],
    ids=["foreign", "null", "another-local-port", "another-scheme"],
)
def test_a_foreign_origin_is_refused_even_with_the_token(front: Front, origin: str) -> None:
    """A page on another origin, a sandboxed frame's "null", and a page of another local web
    server are refused, a GET (serve's) as much as a POST (the MCP servers')."""
    origin = origin.format(port=front.port)
    refused = front.send(origin=origin)
    assert refused.status_code == 403, refused.text
    assert f"a page from another origin ({origin!r}) may not call" in refused.json()["error"]


def test_its_own_names_origin_and_a_tunnels_port_are_let_through(front: Front) -> None:
    """Loopback's names, the server's own origin, and the port of an SSH tunnel that forwards
    to it (`ssh -L 9000:127.0.0.1:PORT`: the Host names the tunnel's port)."""
    own = f"localhost:{front.port}"
    assert front.send().status_code == 200
    assert front.send(host=own, origin=f"http://{own}").status_code == 200
    assert front.send(host=f"[::1]:{front.port}").status_code == 200
    assert front.send(host="127.0.0.1:9000", origin="http://127.0.0.1:9000").status_code == 200


@pytest.mark.parametrize("front", ["logos mcp", "sandboxd mcp"], indirect=True)
def test_an_origin_the_mcp_servers_were_launched_to_allow_is_let_through(front: Front) -> None:
    assert front.send(origin=ALLOWED_ORIGIN).status_code == 200
    refused = front.send(origin="http://127.0.0.1:6275")
    assert refused.status_code == 403
    assert "or start the server with --allow-origin http://127.0.0.1:6275" in refused.text


def test_on_every_address_serve_answers_to_addresses_but_not_to_a_rebinding_name(
    place: Home, model: ScriptedServer, tmp_path: Path
) -> None:
    """`--host 0.0.0.0 --allow-remote`: any address of the machine names it; a DNS name it
    was not given does not (a rebinding page's, whatever address it resolves to)."""
    with serving(make_home(tmp_path), model, ["--host", "0.0.0.0", "--allow-remote"]) as served:
        port = served.url.rsplit(":", 1)[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            headers = {"authorization": f"Bearer {served.token}"}

            def status(host: str) -> int:
                return http.get("/v1/sessions", headers={**headers, "host": host}).status_code

            assert status(f"127.0.0.1:{port}") == 200
            assert status(f"192.0.2.7:{port}") == 200
            assert status(f"[2001:db8::7]:{port}") == 200
            assert status(f"rebind.attacker.example:{port}") == 421


def test_a_client_refuses_the_servers_token_file_through_a_symlink(
    place: Home, served: Served, tmp_path: Path
) -> None:
    """`logos project` sends the token it reads: never the text of a file a link leads to."""
    link = tmp_path / "token-link"
    link.symlink_to(served.token_path)
    refused = logos(["project", "--url", served.url, "--token-file", str(link), "list"], place, {})
    listed = logos(["project", "--url", served.url, "list"], place, place.env())
    assert refused.returncode == 2
    assert f"the token file {link} is a symbolic link" in refused.stderr
    assert listed.returncode == 0, listed.stderr


# A token file's problems, at start ------------------------------------------------------

PROBLEMS = {
    "symlink": "is a symbolic link: a token file must be a regular file of yours",
    "another-owner": f"belongs to uid {OTHER_UID}, not to you",
    "group-readable": "can be read or written by others (mode 640): run chmod 600",
    "short": "holds no usable token (15 characters, fewer than the 32 a token needs)",
    "fifo": "is not a regular file",
}
ENV_VARIABLES = {"logos mcp": "LOGOS_MCP_TOKEN", "sandboxd mcp": "SANDBOXD_MCP_TOKEN"}


@dataclass
class Start:
    """A server started with a bad token: how it ended, and the file as it was before."""

    proc: subprocess.Popen[bytes]
    log: Path
    token_file: Path
    before: Any

    def output(self) -> str:
        return log_text(self.log)


def _plant(problem: str, path: Path) -> Any:
    """A bad token file at `path` (its directory made); returns what must be left as it is."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    good = "g" * 43 + "\n"
    if problem == "symlink":
        known = path.parent / "known.txt"
        known.write_text(KNOWN_TEXT)
        known.chmod(0o600)
        path.symlink_to(known)
        return os.readlink(path), known.read_text()
    if problem == "fifo":
        os.mkfifo(path, 0o600)
        return stat.S_ISFIFO(path.lstat().st_mode)
    path.write_text("short-token-123\n" if problem == "short" else good)
    path.chmod(0o640 if problem == "group-readable" else 0o600)
    if problem == "another-owner":
        os.chown(path, OTHER_UID, OTHER_UID)
    return path.read_text(), path.lstat().st_mode, path.lstat().st_uid


def _as_it_was(problem: str, path: Path) -> Any:
    if problem == "symlink":
        return os.readlink(path), Path(os.readlink(path)).read_text()
    if problem == "fifo":
        return stat.S_ISFIFO(path.lstat().st_mode)
    return path.read_text(), path.lstat().st_mode, path.lstat().st_uid


def _start(
    server: str, root: Path, model: ScriptedServer, problem: str | None, env: dict[str, str]
) -> Start:
    """`server` started with `problem` planted in its token file, or with `env`."""
    root.mkdir()
    home = make_home(root)
    program, command = server.split()
    if program == "logos" and command == "serve":
        token_file = home.state / "serve" / "token"
        args = ["serve", "--port", "0", "--model", "m"]
    else:
        token_file = root / "mcp-token"
        args = ["mcp", *(["--model", "m"] if program == "logos" else []), "--http"]
        args += ["127.0.0.1:0", *([] if env else ["--token-file", str(token_file)])]
    before = None if problem is None else _plant(problem, token_file)
    log = root / "start.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", program, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=home.work,
            env={**openai_env(home, model), **env},
        )
    return Start(proc, log, token_file, before)


@pytest.fixture(scope="module")
def refused_starts(
    tmp_path_factory: pytest.TempPathFactory, model: ScriptedServer
) -> Iterator[dict[tuple[str, str], Start]]:
    """Each server started with each bad token file (and each MCP server with a short token
    in its variable), all at once: a start costs seconds of imports, and they wait on none."""
    root = tmp_path_factory.mktemp("refused")
    starts: dict[tuple[str, str], Start] = {}
    for server in SERVERS:
        for problem in PROBLEMS:
            if problem == "another-owner" and os.geteuid() != 0:
                continue  # only root can give a file away
            where = root / f"{server.replace(' ', '-')}-{problem}"
            starts[server, problem] = _start(server, where, model, problem, {})
    for server, variable in ENV_VARIABLES.items():
        where = root / f"{server.replace(' ', '-')}-env"
        starts[server, "env"] = _start(server, where, model, None, {variable: "short-token-123"})
    deadline = time.monotonic() + 150
    try:
        for start in starts.values():
            start.proc.wait(max(1.0, deadline - time.monotonic()))
        yield starts
    finally:
        for start in starts.values():
            if start.proc.poll() is None:
                start.proc.kill()
                start.proc.wait()


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("server", SERVERS)
def test_a_bad_token_file_stops_the_server_at_start_and_is_left_as_it_was(
    refused_starts: dict[tuple[str, str], Start], server: str, problem: str
) -> None:
    if (server, problem) not in refused_starts:
        pytest.skip("only root can give a file to another user")
    start = refused_starts[server, problem]
    output = start.output()
    assert start.proc.returncode == 2, output
    assert f"the token file {start.token_file} {PROBLEMS[problem]}" in output
    assert "serving on" not in output
    assert "Traceback" not in output
    assert _as_it_was(problem, start.token_file) == start.before
    assert KNOWN_TEXT.strip() not in output


@pytest.mark.parametrize("server", ENV_VARIABLES)
def test_a_short_token_in_the_environment_stops_an_mcp_server_at_start(
    refused_starts: dict[tuple[str, str], Start], server: str
) -> None:
    start = refused_starts[server, "env"]
    output = start.output()
    assert start.proc.returncode == 2, output
    variable = ENV_VARIABLES[server]
    assert f"${variable} holds no usable token (15 characters, fewer than the 32" in output
    assert "short-token-123" not in output
