"""`logos serve` refuses bad input with a clear 4xx that says what was wrong and what to
do: unknown fields, wrong tokens, unknown ids, wider limits, busy sessions, full servers."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.cli_harness import Home, make_home
from tests.support.serve_harness import Served, client_tls, serving
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(90)

CONFIG = """check_back = false
max_steps = 5
max_cost = 2.0
timeout = 60
[serve]
max_concurrent_runs = 2
max_body_bytes = 4096
"""
ROUTES = [
    ("POST", "/v1/runs"),
    ("GET", "/v1/runs"),
    ("GET", "/v1/runs/0123456789abcdef"),
    ("GET", "/v1/runs/0123456789abcdef/events"),
    ("POST", "/v1/runs/0123456789abcdef/cancel"),
    ("GET", "/v1/approvals"),
    ("POST", "/v1/approvals/0123456789abcdef"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/0123456789abcdef"),
    ("DELETE", "/v1/sessions/0123456789abcdef"),
    ("GET", "/v1/memory"),
    ("GET", "/v1/memory/key"),
    ("PUT", "/v1/memory/key"),
    ("DELETE", "/v1/memory/key"),
    ("GET", "/v1/nothing-here"),
]


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return make_home(tmp_path_factory.mktemp("serve-api"))


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(module_home: Home, model: ScriptedServer) -> Iterator[Served]:
    with serving(module_home, model, config=CONFIG) as server:
        yield server


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as client:
        yield client


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic dXNlcjpwYXNz"])
def test_every_route_needs_the_token(
    served: Served, method: str, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    with httpx.Client(base_url=served.url, timeout=10, verify=client_tls()) as anonymous:
        answer = anonymous.request(method, path, headers=headers, json={})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert "bearer token" in answer.json()["error"]


def test_the_page_is_served_without_the_token_and_holds_no_data(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10, verify=client_tls()) as anonymous:
        page = anonymous.get("/")
        script = anonymous.get("/page.js")
    assert page.status_code == 200 and "<title>logos</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert script.headers["content-type"].startswith("text/javascript")
    assert served.token not in page.text + script.text


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    assert "Traceback" not in answer.text
    message: str = answer.json()["error"]
    return message


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        ({"prompt": "x", "colour": "red"}, 422, "unknown field 'colour'"),
        ({"prompt": "x", "limits": {"max_step": 3}}, 422, "unknown field 'limits.max_step'"),
        ({"prompt": "x", "runner": {"kind": "vm"}}, 422, "field 'runner.kind'"),
        ({}, 422, "missing field 'prompt'"),
        ({"prompt": ""}, 422, "field 'prompt'"),
        ({"prompt": "x", "limits": {"max_steps": 0}}, 422, "field 'limits.max_steps'"),
        (
            {"prompt": "x", "limits": {"max_steps": 6}},
            403,
            "limits.max_steps 6 is above this server's limit of 5 (max_steps in its config file)",
        ),
        (
            {"prompt": "x", "limits": {"max_cost_usd": 3}},
            403,
            "limits.max_cost_usd 3 is above this server's limit of 2 (max_cost",
        ),
        (
            {"prompt": "x", "limits": {"timeout_s": 61}},
            403,
            "limits.timeout_s 61 is above this server's limit of 60 (timeout",
        ),
        ({"prompt": "x", "approval": "auto"}, 403, "allow_local_auto = true in its [serve]"),
        ({"prompt": "x", "session": "0123456789abcdef"}, 404, "no session '0123456789abcdef'"),
        ({"prompt": "x", "session": "../../etc"}, 404, "no session '../../etc'"),
        (
            {"prompt": "x", "runner": {"kind": "local", "workdir": "relative/dir"}},
            400,
            "runner.workdir 'relative/dir' is not an absolute path to a directory",
        ),
        (
            {"prompt": "x", "runner": {"kind": "local", "network": True}},
            400,
            "allowed_paths, network and allowed_hosts are for the sandbox",
        ),
        (
            {"prompt": "x", "runner": {"kind": "local", "allowed_hosts": ["pypi.org"]}},
            400,
            "allowed_paths, network and allowed_hosts are for the sandbox",
        ),
        (
            {
                "prompt": "x",
                "runner": {
                    "kind": "sandbox",
                    "allowed_paths": [{"path": "/tmp"}],
                    "network": True,
                    "allowed_hosts": ["pypi.org"],
                },
            },
            400,
            "runner.network opens every host: use one or the other",
        ),
    ],
)
def test_a_bad_run_request_says_what_is_wrong(
    client: httpx.Client, body: dict[str, object], status: int, expected: str
) -> None:
    assert expected in _error(client.post("/v1/runs", json=body), status)


def test_bodies_must_be_json_and_small(client: httpx.Client) -> None:
    message = _error(client.post("/v1/runs", content=b"prompt=x"), 415)
    assert "Content-Type: application/json" in message
    big = {"prompt": "x" * 5000, "approval": "never-run"}
    assert "over 4096 bytes" in _error(client.post("/v1/runs", json=big), 413)
    assert "max_body_bytes" in _error(
        client.post(
            "/v1/runs",
            content=iter([b'{"prompt": "', b"x" * 5000, b'"}']),  # chunked: no length given
            headers={"content-type": "application/json"},
        ),
        413,
    )
    invalid = client.post(
        "/v1/runs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert "Invalid JSON" in _error(invalid, 422)


def test_unknown_ids_are_404s_naming_them(client: httpx.Client) -> None:
    unknown = "0123456789abcdef"
    assert f"no run '{unknown}'" in _error(client.get(f"/v1/runs/{unknown}"), 404)
    assert f"no run '{unknown}'" in _error(client.get(f"/v1/runs/{unknown}/events"), 404)
    assert f"no run '{unknown}'" in _error(client.post(f"/v1/runs/{unknown}/cancel"), 404)
    assert f"no session '{unknown}'" in _error(client.get(f"/v1/sessions/{unknown}"), 404)
    assert f"no session '{unknown}'" in _error(client.delete(f"/v1/sessions/{unknown}"), 404)
    assert "no command waits for approval" in _error(
        client.post(f"/v1/approvals/{unknown}", json={"approve": True}), 404
    )
    assert "no note 'nothing'" in _error(client.get("/v1/memory/nothing"), 404)
    assert "no such route: GET /v1/nothing" in _error(client.get("/v1/nothing"), 404)
    assert "DELETE is not allowed" in _error(client.delete("/v1/runs"), 405)
    bad = client.get(f"/v1/runs/{unknown}/events", headers={"last-event-id": "soon"})
    assert "Last-Event-ID 'soon' is not an event id" in _error(bad, 400)


def test_an_approval_answer_with_unknown_fields_is_refused(client: httpx.Client) -> None:
    answer = client.post("/v1/approvals/x", json={"approve": True, "always": True})
    assert "unknown field 'always'" in _error(answer, 422)
    assert "missing field 'approve'" in _error(client.post("/v1/approvals/x", json={}), 422)


def test_two_runs_on_one_session_and_too_many_runs(
    served: Served, client: httpx.Client, model: ScriptedServer, module_home: Home
) -> None:
    slow = openai_stream("a slow answer", chunk_size=1, event_pause_s=0.2)
    model.enqueue(slow, slow)
    first = served.start_run(client, prompt="one", approval="never-run")
    busy = client.post(
        "/v1/runs", json={"prompt": "two", "session": first["session"], "approval": "never-run"}
    )
    assert "has a run going" in _error(busy, 409)
    assert "cancel it first" in _error(client.delete(f"/v1/sessions/{first['session']}"), 409)
    second = served.start_run(client, prompt="two", approval="never-run")
    full = client.post("/v1/runs", json={"prompt": "three", "approval": "never-run"})
    message = _error(full, 429)
    assert "2 runs are going, the most max_concurrent_runs (2" in message
    for started in (first, second):
        client.post(f"/v1/runs/{started['run']}/cancel")
        served.wait_finished(client, started["run"])
    assert client.delete(f"/v1/sessions/{first['session']}").status_code == 204
    assert not (module_home.state / "serve" / "sessions" / first["session"]).exists()
    assert client.get(f"/v1/runs/{first['run']}").status_code == 200  # still in memory


def test_a_run_refused_for_want_of_room_leaves_its_session_as_it_was(
    served: Served, client: httpx.Client, model: ScriptedServer, module_home: Home
) -> None:
    model.enqueue(openai_stream("done"))
    earlier = served.start_run(client, prompt="one", approval="never-run")
    served.wait_finished(client, earlier["run"])
    session = module_home.state / "serve" / "sessions" / earlier["session"]
    recorded = {path.name: path.read_bytes() for path in session.rglob("*") if path.is_file()}
    slow = openai_stream("a slow answer", chunk_size=1, event_pause_s=0.2)
    model.enqueue(slow, slow, openai_stream("continued"))
    going = [served.start_run(client, prompt=p, approval="never-run") for p in ("two", "three")]
    refused = client.post(
        "/v1/runs", json={"prompt": "four", "session": earlier["session"], "approval": "never-run"}
    )
    assert "2 runs are going" in _error(refused, 429)
    assert {p.name: p.read_bytes() for p in session.rglob("*") if p.is_file()} == recorded
    for started in going:
        client.post(f"/v1/runs/{started['run']}/cancel")
        served.wait_finished(client, started["run"])
    again = served.start_run(
        client, prompt="four", session=earlier["session"], approval="never-run"
    )
    served.wait_finished(client, again["run"])


def test_notes_with_bad_keys_or_texts_are_400s(client: httpx.Client) -> None:
    assert "control characters" in _error(client.put("/v1/memory/a%0Ab", json={"text": "x"}), 400)
    long_key = "k" * 101
    assert "at most 100 characters" in _error(
        client.put(f"/v1/memory/{long_key}", json={"text": "x"}), 400
    )
    assert "at most 4000 fit" in _error(client.put("/v1/memory/k", json={"text": "x" * 4001}), 400)
