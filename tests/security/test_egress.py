"""Attacks on network by name: a sandbox with allowed_hosts reaches those hosts and nothing else.

The sandbox has no network; its only way out is the daemon's egress proxy. Every server here
is one the test starts on the host's loopback, reached through names the daemon's
`egress_hosts` table maps to it; denials are proven by the proxy's answer, never by trying an
outside address (the raw-socket attempts use TEST-NET-2, which is never routed, and fail in
the sandbox's own kernel before any packet leaves).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from logos import ExecOptions
from sandboxd.client.runner import SandboxRunner
from sandboxd.egress.tls_hello import ACCESS_DENIED_ALERT
from tests.support.browser import css, text_appears
from tests.support.cli_harness import Home, logos, make_home, openai_env
from tests.support.local_http import LocalHTTPServer
from tests.support.processes import run_module
from tests.support.sandboxd_harness import REPO, Daemon, running_daemon
from tests.support.serve_harness import read_events, sandbox_in_work, sandboxd_config, serving
from tests.support.sse_server import ScriptedServer, openai_stream
from tests.support.tls_hellos import with_names, with_second_name_extension
from tests.support.view_harness import viewing

pytestmark = pytest.mark.docker

BIG_BYTES = 3 * 1024 * 1024
MAX_BYTES = 1024 * 1024
MAX_CONNECTIONS = 4
CONFIG = f"""allow_private_hosts = true
egress_max_connections = {MAX_CONNECTIONS}
egress_max_bytes = {MAX_BYTES}
[egress_hosts]
"web.test" = ["127.0.0.1"]
"api.web.test" = ["127.0.0.1"]
"other.test" = ["127.0.0.1"]
"metadata.test" = ["169.254.169.254"]
"""


class _Web(LocalHTTPServer):
    """The allowed host: a page, a redirect to a host that is not allowed, a large body."""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", f"http://other.test:{server.port}/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"x" * BIG_BYTES if self.path == "/big" else b"hello from web.test\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])


class _Recorder:
    """A raw TCP server on the host's loopback that keeps what each connection sent, until it
    ends or is silent for half a second."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = int(self._server.getsockname()[1])

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(0.5)
                got = b""
                with contextlib.suppress(OSError):
                    while chunk := conn.recv(65536):
                        got += chunk
                self.received.append(got)

    def __enter__(self) -> _Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


@pytest.fixture(scope="module")
def web() -> Iterator[_Web]:
    with _Web() as server:
        yield server


@pytest.fixture(scope="module")
def egress_daemon(docker_client: Any) -> Iterator[Daemon]:
    with running_daemon(docker_client, CONFIG) as daemon:
        yield daemon


def _allowed(port: int) -> list[str]:
    """web.test on `port`, and its loopback address on that port (special: named on
    purpose)."""
    return [f"web.test:{port}", f"127.0.0.1:{port}"]


def _run(daemon: Daemon, command: str, hosts: list[str], session: str) -> dict[str, Any]:
    with daemon.client() as client:
        response = client.post(
            "/v1/run",
            json={"command": command, "allowed_hosts": hosts, "session": session, "timeout_s": 60},
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] is None, body
    return body


def _web_stdout(daemon: Daemon, web: _Web, command: str, session: str = "egress") -> str:
    """What `command` printed in a sandbox whose allowlist is web.test (see _allowed)."""
    return str(_run(daemon, command, _allowed(web.port), session)["stdout"])


def _curl(daemon: Daemon, url: str, hosts: list[str], session: str = "egress") -> str:
    """What curl in the sandbox got: `<status> <body>` (status 000 when it got no answer)."""
    # WHY --noproxy '': even loopback targets go to the proxy (the sandbox's own loopback
    # is left direct by its no_proxy, and is not what these tests are about).
    command = (
        "rm -f /tmp/body; curl -sS --noproxy '' --max-time 20 -o /tmp/body -w '%{http_code}' "
        f"{shlex.quote(url)}; cat /tmp/body 2>/dev/null"
    )
    return str(_run(daemon, command, hosts, session)["stdout"])


def _egress_lines(daemon: Daemon) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    return [line for line in lines if line.get("event") == "egress"]


def test_an_allowed_name_is_reached_and_audited(egress_daemon: Daemon, web: _Web) -> None:
    hosts = _allowed(web.port)
    out = _curl(egress_daemon, f"http://web.test:{web.port}/", hosts)
    assert out == "200hello from web.test\n"
    # WHY a wait: the line is written as the connection ends, maybe after the command answered.
    deadline = time.monotonic() + 10
    while not (allowed := [line for line in _egress_lines(egress_daemon) if line["allowed"]]):
        assert time.monotonic() < deadline, "no egress line for an allowed connection"
        time.sleep(0.05)
    assert allowed[-1]["host"] == "web.test" and allowed[-1]["port"] == web.port
    assert allowed[-1]["address"] == "127.0.0.1" and allowed[-1]["bytes_down"] > 19


@pytest.mark.parametrize(
    "url",
    [
        "http://other.test:{port}/",  # a name not in the list, that resolves like web.test
        "http://198.51.100.7/",  # an IP literal
        "http://[::1]:{port}/",  # IPv6 loopback
        "http://[::ffff:127.0.0.1]:{port}/",  # IPv4-mapped IPv6
        "http://web.test:1/",  # an allowed name on another port
    ],
)
def test_what_is_not_in_the_list_is_refused_with_a_readable_answer(
    egress_daemon: Daemon, web: _Web, url: str
) -> None:
    out = _curl(egress_daemon, url.format(port=web.port), [f"web.test:{web.port}"])
    assert out.startswith("403blocked by sandbox policy: host "), out
    assert "is not in the allowlist" in out


def test_https_goes_through_connect_and_is_refused_by_name(egress_daemon: Daemon) -> None:
    out = _curl(egress_daemon, "https://other.test/", ["web.test"])
    assert out.startswith("000"), out  # curl reports the proxy's refusal of its CONNECT
    denied = _egress_lines(egress_daemon)[-1]
    assert denied["method"] == "CONNECT" and denied["host"] == "other.test"
    assert not denied["allowed"] and "not in the allowlist" in denied["reason"]


@pytest.mark.parametrize(
    ("name", "kind"), [("web.test", "loopback"), ("metadata.test", "link-local")]
)
def test_an_allowed_name_pointed_at_a_special_address_is_refused(
    egress_daemon: Daemon, web: _Web, name: str, kind: str
) -> None:
    out = _curl(egress_daemon, f"http://{name}:{web.port}/", [f"{name}:{web.port}"])
    assert out.startswith(f"403blocked by sandbox policy: host {name} resolves only to "), out
    assert kind in out


@pytest.mark.parametrize(
    "entries",
    [
        ["web.test:*", "127.0.0.1"],  # the address entry allows 80 and 443 only
        ["web.test:{port}", "127.0.0.1:1"],
        ["web.test:{port}", "127.0.0.0/8:443", "10.0.0.0/8:{port}"],
    ],
)
def test_an_address_entry_opens_only_its_ports_to_names_that_resolve_into_it(
    egress_daemon: Daemon, web: _Web, entries: list[str]
) -> None:
    """Every entry's port holds: a name allowed on the port resolves to loopback, which the
    list names only for other ports."""
    hosts = [entry.format(port=web.port) for entry in entries]
    out = _curl(egress_daemon, f"http://web.test:{web.port}/", hosts)
    assert out.startswith(
        "403blocked by sandbox policy: host web.test resolves only to addresses the allowlist "
        f"does not name with port {web.port}: 127.0.0.1 (loopback; "
    ), out
    assert f"(e.g. 127.0.0.1:{web.port}) to allow it on purpose" in out


def test_a_wildcard_allows_names_below_it(egress_daemon: Daemon, web: _Web) -> None:
    hosts = [f"*.web.test:{web.port}", f"127.0.0.1:{web.port}"]
    assert _curl(egress_daemon, f"http://api.web.test:{web.port}/", hosts).startswith("200")
    assert _curl(egress_daemon, f"http://web.test:{web.port}/", hosts).startswith("403")


def test_a_redirect_to_a_host_not_allowed_is_not_followed(egress_daemon: Daemon, web: _Web) -> None:
    command = f"curl -sS -L --max-time 20 http://web.test:{web.port}/redirect"
    out = _web_stdout(egress_daemon, web, command)
    assert out.startswith("blocked by sandbox policy: host other.test"), out


def test_a_host_header_that_differs_from_the_target_is_refused(
    egress_daemon: Daemon, web: _Web
) -> None:
    url = f"http://web.test:{web.port}/"
    command = f"curl -sS --max-time 20 -H 'Host: other.test:{web.port}' {url}"
    out = _web_stdout(egress_daemon, web, command)
    assert out.startswith("blocked by sandbox policy: the Host header"), out


SNI = """
import socket, ssl, sys
sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
target = "web.test:" + sys.argv[1]
sock.sendall(("CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % (target, target)).encode())
print(sock.recv(4096).split(b"\\r\\n")[0].decode())
context = ssl.create_default_context()
try:
    context.wrap_socket(sock, server_hostname=sys.argv[2])
except ssl.SSLError as exc:
    print(exc.reason if exc.reason == "TLSV1_ALERT_ACCESS_DENIED" else "handshake failed")
except OSError:
    print("handshake failed")
"""


@pytest.mark.parametrize("sni", ["evil.test", "web.test"])
def test_a_tls_server_name_must_be_the_connect_host(egress_daemon: Daemon, sni: str) -> None:
    with _Recorder() as recorder:
        hosts = _allowed(recorder.port)
        command = f"python3 -c {shlex.quote(SNI)} {recorder.port} {sni}"
        out = _run(egress_daemon, command, hosts, "egress")["stdout"]
    failed = "handshake failed" if sni == "web.test" else "TLSV1_ALERT_ACCESS_DENIED"
    assert out.splitlines() == ["HTTP/1.1 200 Connection established", failed]
    if sni == "web.test":  # the ClientHello reached the server (which speaks no TLS)
        assert len(recorder.received) == 1 and recorder.received[0].startswith(b"\x16\x03")
    else:
        assert recorder.received in ([], [b""])
        reason = _egress_lines(egress_daemon)[-1]["reason"]
        assert reason == (
            "blocked by sandbox policy: TLS server name 'evil.test' differs from the CONNECT "
            "host web.test"
        )


CRAFTED_HELLO = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
sock.sendall(("CONNECT web.test:%s HTTP/1.1\\r\\n\\r\\n" % sys.argv[1]).encode())
print(sock.recv(4096).split(b"\\r\\n")[0].decode())
sock.sendall(bytes.fromhex(sys.argv[2]))
print(sock.recv(4096).hex() or "closed")
"""


@pytest.mark.parametrize(
    ("hello", "says"),
    [
        (
            with_names(b"web.test", b"evil.test"),
            "a TLS ClientHello naming 2 servers (web.test, evil.test): name one, the CONNECT "
            "host web.test",
        ),
        (
            with_second_name_extension(b"evil.test"),
            "a TLS ClientHello the proxy cannot check: it carries two server_name extensions",
        ),
        (
            with_names(b"[web.test]"),
            "a TLS ClientHello the proxy cannot check: its server name b'[web.test]' is not a "
            "host name",
        ),
    ],
)
def test_every_server_name_of_a_tls_hello_is_checked(
    egress_daemon: Daemon, hello: bytes, says: str
) -> None:
    """A ClientHello built to name the allowed host first (or only to a lenient reader), and
    another server to one that reads the rest: nothing reaches the server, the client reads
    an access_denied alert."""
    with _Recorder() as recorder:
        command = f"python3 -c {shlex.quote(CRAFTED_HELLO)} {recorder.port} {hello.hex()}"
        ran = _run(egress_daemon, command, _allowed(recorder.port), "egress")
    assert recorder.received in ([], [b""]), recorder.received
    alert = ACCESS_DENIED_ALERT.hex()
    assert ran["stdout"].splitlines() == ["HTTP/1.1 200 Connection established", alert]
    reason = "blocked by sandbox policy: " + says
    assert _egress_lines(egress_daemon)[-1]["reason"] == reason
    assert ran["blocked"] == [f"web.test:{recorder.port}: {reason}"]  # what the model reads


SMUGGLE = """
import socket, sys
port, how = sys.argv[1], sys.argv[2]
sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
if how == "tunnel":
    sock.sendall(("CONNECT web.test:%s HTTP/1.1\\r\\n\\r\\n" % port).encode())
    print(sock.recv(4096).split(b"\\r\\n")[0].decode())
    sock.sendall(b"GET /secret HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n")
else:
    first = "GET http://web.test:%s/ HTTP/1.1\\r\\nHost: web.test:%s\\r\\n\\r\\n" % (port, port)
    sock.sendall(first.encode() + b"GET /secret HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n")
sock.settimeout(3)
try:
    print(len(sock.recv(4096)))
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.parametrize("how", ["tunnel", "pipelined"])
def test_no_unchecked_request_rides_an_allowed_connection(egress_daemon: Daemon, how: str) -> None:
    """Plain HTTP inside a CONNECT tunnel, or a second request pipelined after an allowed
    one, would reach another virtual host of the allowed address unchecked."""
    with _Recorder() as recorder:
        hosts = _allowed(recorder.port)
        command = f"python3 -c {shlex.quote(SMUGGLE)} {recorder.port} {how}"
        answered = _run(egress_daemon, command, hosts, "egress")["stdout"].splitlines()
    assert all(b"evil.test" not in got for got in recorder.received), recorder.received
    if how == "tunnel":
        assert recorder.received in ([], [b""])
        reason = _egress_lines(egress_daemon)[-1]["reason"]
        assert "a CONNECT tunnel must carry TLS" in reason
    else:
        assert recorder.received[0].startswith(b"GET / HTTP/1.1\r\n")
        assert answered == ["0"]  # the recorder answers nothing: the connection just ends


def test_a_request_body_goes_through_and_a_chunked_one_is_refused(
    egress_daemon: Daemon, web: _Web
) -> None:
    url = f"http://web.test:{web.port}/"
    posted = f"curl -sS --noproxy '' --max-time 20 -d 'a body' {url}"
    assert _web_stdout(egress_daemon, web, posted) == "a body"
    command = f"curl -sS --noproxy '' --max-time 20 -H 'Transfer-Encoding: chunked' -d x {url}"
    out = _web_stdout(egress_daemon, web, command)
    assert out.startswith("the sandbox's proxy takes a request body only with a Content-Length")


LONG_HEAD = """
import socket, sys, time
port, method, how = sys.argv[1], sys.argv[2], sys.argv[3]
authority = "web.test:" + port
target = "http://%s/" % authority if method == "GET" else authority
head = ("%s %s HTTP/1.1\\r\\nHost: %s\\r\\nX-Pad: " % (method, target, authority)).encode()
head += b"a" * (17000 - len(head) - 4) + b"\\r\\n\\r\\n"
sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
step = 1000 if how == "trickled" else len(head)
for at in range(0, len(head), step):
    sock.sendall(head[at : at + step])
    time.sleep(0.01)
print(len(head), sock.recv(65536).split(b"\\r\\n")[0].decode())
"""


@pytest.mark.parametrize("how", ["at once", "trickled"])
@pytest.mark.parametrize("method", ["GET", "CONNECT"])
def test_a_request_head_past_16_kib_is_refused(
    egress_daemon: Daemon, web: _Web, method: str, how: str
) -> None:
    """A 17,000-byte head to an allowed host, sent at once or in pieces of 1,000 bytes."""
    command = f"python3 -c {shlex.quote(LONG_HEAD)} {web.port} {method} {shlex.quote(how)}"
    ran = _run(egress_daemon, command, _allowed(web.port), "egress")
    assert ran["stdout"] == "17000 HTTP/1.1 431 Request Header Fields Too Large\n", ran
    reason = (
        "blocked by sandbox policy: the request head (request line and headers) is 17000 "
        "bytes, more than the 16384 the sandbox's proxy takes: send fewer or shorter headers"
    )
    assert _egress_lines(egress_daemon)[-1]["reason"] == reason
    assert ran["blocked"] == [f"(no target): {reason}"]


RAW = """
import socket
# TEST-NET-2: never routed; with no interface but loopback nothing leaves anyway.
attempts = ((socket.SOCK_STREAM, ("198.51.100.7", 80)), (socket.SOCK_DGRAM, ("198.51.100.7", 53)))
for kind, address in attempts:
    sock = socket.socket(socket.AF_INET, kind)
    sock.settimeout(5)
    try:
        if kind == socket.SOCK_STREAM:
            sock.connect(address)
        else:
            sock.sendto(b"tunnel.example.test", address)
        print("SENT")
    except OSError as exc:
        print(exc.errno)
import os
print(sorted(os.listdir("/sys/class/net")))
"""


def test_commands_cannot_use_the_proxys_socket_directly(egress_daemon: Daemon) -> None:
    """Only the forwarder (started before Unix sockets were denied) connects to it; even a
    sandbox that allows Unix sockets would reach the same proxy, which decides anyway."""
    probe = (
        "import socket\ntry:\n    socket.socket(socket.AF_UNIX).connect('/.sandboxd/egress')\n"
        "    print('connected')\nexcept OSError as exc:\n    print(type(exc).__name__)"
    )
    out = _run(egress_daemon, f"python3 -c {shlex.quote(probe)}", ["web.test"], "egress")
    assert out["stdout"] == "PermissionError\n"


def test_raw_tcp_and_udp_have_no_route_past_the_proxy(egress_daemon: Daemon) -> None:
    command = f"python3 -c {shlex.quote(RAW)}"
    out = _run(egress_daemon, command, ["web.test"], "egress")["stdout"].splitlines()
    assert out == ["101", "101", "['lo']"]  # ENETUNREACH: no interface but loopback


HOLD = """
import socket, time
held = []
for _ in range(%d):
    sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    sock.sendall(b"CONNECT web.test:%d HTTP/1.1\\r\\n\\r\\n")
    held.append((sock, sock.recv(4096).split(b"\\r\\n")[0].decode()))
print(sorted(set(line for _, line in held)))
"""


def test_connections_at_once_are_bounded_per_sandbox(egress_daemon: Daemon, web: _Web) -> None:
    command = f"python3 -c {shlex.quote(HOLD % (MAX_CONNECTIONS + 2, web.port))}"
    out = _web_stdout(egress_daemon, web, command, "egress-held").strip()
    assert out == "['HTTP/1.1 200 Connection established', 'HTTP/1.1 429 Too Many Requests']"


def test_a_flood_of_bytes_is_cut_at_the_sandboxes_budget(egress_daemon: Daemon, web: _Web) -> None:
    url = f"http://web.test:{web.port}/big"
    command = f"curl -s --max-time 20 -o /tmp/big {url}; stat -c %s /tmp/big; curl -s {url}"
    out = _web_stdout(egress_daemon, web, command, "egress-flood").splitlines()
    assert int(out[0]) < MAX_BYTES
    assert out[1].startswith("blocked by sandbox policy: this sandbox has moved")


@pytest.mark.anyio
async def test_the_sandbox_runner_sends_the_commands_hosts(
    egress_daemon: Daemon, web: _Web
) -> None:
    url = f"http://web.test:{web.port}/"
    options = ExecOptions(allowed_hosts=tuple(_allowed(web.port)))
    other = f"http://other.test:{web.port}/"
    async with SandboxRunner(socket=egress_daemon.socket) as runner:
        fetched = await runner.run(f"curl -sS --noproxy '' --max-time 20 {url}", options)
        blocked = await runner.run(f"curl -sS --noproxy '' --max-time 20 {other}", options)
        refused = await runner.run("true", ExecOptions(allowed_hosts=("*.org",)))
    assert fetched.stdout == "hello from web.test\n" and fetched.blocked == (), fetched
    assert len(blocked.blocked) == 1, blocked
    assert blocked.blocked[0].startswith(
        f"other.test:{web.port}: blocked by sandbox policy: host other.test"
    )
    assert refused.error is not None and "422 invalid_host" in refused.error


@pytest.mark.timeout(150)
def test_json_events_and_the_page_show_what_the_proxy_blocked(
    egress_daemon: Daemon, web: _Web, home: Home, sse_server: ScriptedServer, browser: Any
) -> None:
    other = f"http://other.test:{web.port}/"
    sse_server.enqueue(
        openai_stream(f"<cmd>curl -sS --noproxy '' --max-time 20 {other}</cmd>"),
        openai_stream("Blocked."),
    )
    saved = home.root / "run.jsonl"
    flags = [
        "--sandbox",
        "--socket",
        str(egress_daemon.socket),
        "--json",
        "--trajectory",
        str(saved),
    ]
    hosts = [flag for host in _allowed(web.port) for flag in ("--allow-host", host)]
    done = logos(
        ["--model", "m", *flags, *hosts, "fetch"], home, openai_env(home, sse_server), timeout=120
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (result,) = [event["result"] for event in events if event["type"] == "command_result"]
    assert result["blocked"][0].startswith(f"other.test:{web.port}: blocked by sandbox policy")
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert f"HTTP_PROXY and HTTPS_PROXY: web.test:{web.port}, 127.0.0.1:{web.port};" in system
    with viewing(home, saved) as url:
        browser.get(url)
        text_appears(browser, "run-end", "finished: final")
        (blocked,) = css(browser, "#transcript .command .blocked")
        assert blocked.text.startswith(
            f"the sandbox's proxy refused: other.test:{web.port}: blocked by sandbox policy"
        )


@pytest.mark.timeout(180)
def test_a_served_run_takes_its_hosts_and_its_events_show_the_blocked(
    tmp_path: Path, egress_daemon: Daemon, web: _Web, sse_server: ScriptedServer
) -> None:
    home = make_home(tmp_path)
    sse_server.enqueue(
        openai_stream(
            f"<cmd>curl -sS --noproxy '' --max-time 20 http://other.test:{web.port}/</cmd>"
        ),
        openai_stream("Done."),
    )
    config = sandboxd_config(egress_daemon.socket)
    hosts = _allowed(web.port)
    with serving(home, sse_server, config=config) as served, served.client() as client:
        started = served.start_run(
            client, prompt="fetch", runner=sandbox_in_work(home, allowed_hosts=hosts)
        )
        events = read_events(client, started["run"])
    result = next(e for e in events if e.type == "command_result").data["result"]
    assert result["blocked"][0].startswith(f"other.test:{web.port}: blocked by sandbox policy")
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert f"HTTP_PROXY and HTTPS_PROXY: {', '.join(hosts)};" in system


def test_sandboxd_run_takes_allow_host(egress_daemon: Daemon, web: _Web) -> None:
    url = f"http://web.test:{web.port}/"
    hosts = [flag for host in _allowed(web.port) for flag in ("--allow-host", host)]
    curl = ["curl", "-sS", "--noproxy", "", "--max-time", "20", url]
    argv = ["run", "--socket", str(egress_daemon.socket), *hosts, "--", *curl]
    done = run_module("sandboxd", *argv, cwd=REPO, timeout=120)
    assert (done.returncode, done.stdout) == (0, "hello from web.test\n"), done.stderr


def test_the_allowlist_belongs_to_the_sandbox(egress_daemon: Daemon, web: _Web) -> None:
    """A session's command without the list runs in another sandbox, with no way out."""
    url = f"http://web.test:{web.port}/"
    with_list = _curl(egress_daemon, url, _allowed(web.port), "shared")
    without = _curl(egress_daemon, url, [], "shared")
    assert with_list.startswith("200") and without.startswith("000")


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"allowed_hosts": ["*.org"]}, 422, "invalid_host"),
        ({"allowed_hosts": ["web.test:99999"]}, 422, "invalid_host"),
        ({"allowed_hosts": ["bad host"]}, 422, "invalid_host"),
        ({"allowed_hosts": ["0.0.0.0/0"]}, 422, "invalid_host"),
        ({"allowed_hosts": ["web.test"], "network": True}, 422, "hosts_with_network"),
        ({"allowed_hosts": [f"h{n}.test" for n in range(65)]}, 422, "too_many_hosts"),
    ],
)
def test_bad_allowlists_are_refused_with_a_reason(
    egress_daemon: Daemon, fields: dict[str, Any], status: int, code: str
) -> None:
    with egress_daemon.client() as client:
        response = client.post("/v1/run", json={"command": "true", **fields})
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_special_addresses_need_the_daemons_consent(docker_client: Any) -> None:
    with running_daemon(docker_client) as strict, strict.client() as client:
        refused = client.post(
            "/v1/run", json={"command": "true", "allowed_hosts": ["169.254.169.254"]}
        )
        public = client.post("/v1/run", json={"command": "true", "allowed_hosts": ["pypi.org"]})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "private_host_refused"
    assert "allow_private_hosts" in refused.json()["error"]["message"]
    assert public.status_code == 200 and public.json()["exit_code"] == 0
