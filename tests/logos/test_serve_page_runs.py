"""The page's runs in a real headless chromium against a real `logos serve` (the model is
scripted): runs started anywhere appear by themselves, a run streams into its timeline,
approvals are answered inline (and "always allow" writes a rule), stop works, a reload shows
every event exactly once, and what models and commands write stays text."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.support.browser import (
    click,
    css as _css,
    open_page,
    shown_ids,
    text_appears,
    until,
)
from tests.support.cli_harness import Home, read_jsonl
from tests.support.serve_harness import (
    AUTO_LOCAL,
    JOB_AFTER_HALF_A_SECOND,
    Served,
    read_events,
    script_a_build_that_goes_on_as_a_job,
    serving,
)
from tests.support.sse_server import ScriptedServer, openai_stream
from tests.support.tcp_proxy import cuttable_proxy

pytestmark = pytest.mark.timeout(150)
CONFIRM = "check_back = false\n"


def _open_run_from_list(browser: Any, run_id: str) -> None:
    click(browser, f'#run-list li[data-id="{run_id}"] a')


def _watch_a_run(
    browser: Any, served: Served, prompt: str, approval: str
) -> tuple[httpx.Client, str]:
    """Open the page, start a run through the API and open it from the list."""
    open_page(browser, served)
    client = served.client()
    run_id: str = served.start_run(client, prompt=prompt, approval=approval)["run"]
    _open_run_from_list(browser, run_id)
    return client, run_id


def _start_from_the_page(browser: Any, served: Served, prompt: str) -> None:
    """Open the page, start a run with its form, and wait for its first approval."""
    open_page(browser, served)
    browser.find_element("css selector", "a[data-go='new-run']").click()
    browser.find_element("id", "prompt").send_keys(prompt)
    browser.find_element("id", "start-button").click()
    text_appears(browser, "transcript", "waiting for approval")


def test_a_run_started_through_the_api_streams_into_the_open_page(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Looking around first.\n<cmd>echo from-the-api</cmd>\n"),
        openai_stream("Done: it printed from-the-api."),
    )
    with serving(home, sse_server, config=CONFIRM) as served:
        open_page(browser, served)
        client = served.client()
        started = served.start_run(client, prompt="a task sent by the API", approval="confirm")
        text_appears(browser, "run-list", "a task sent by the API")  # by itself: no reload
        _open_run_from_list(browser, started["run"])
        text_appears(browser, "transcript", "Looking around first.")
        text_appears(browser, "transcript", "waiting for approval")
        assert not _css(browser, "#transcript .command .output")  # not run before approval
        _css(browser, "#transcript .approval-box button.approve")[0].click()
        text_appears(browser, "run-end", "finished: final")
        text_appears(browser, "transcript", "Done: it printed from-the-api.")
        card = _css(browser, "#transcript .command")[0]
        assert "$ echo from-the-api" in card.text
        assert "exit 0" in card.text and "local" in card.text
        assert _css(browser, "#transcript .command .output")[0].text == "from-the-api"
        row = f'#run-list li[data-id="{started["run"]}"]'
        until(browser, lambda driver: "done" in _css(driver, f"{row} .chip")[0].text)
        assert _css(browser, f"{row} .steps")[0].text == "2"  # two model turns
        events = read_events(client, started["run"])
        assert shown_ids(browser) == [event.id for event in events]
        audit = read_jsonl(home.state / "audit.jsonl")
        assert [(a["action"], a["command"]) for a in audit] == [("yes", "echo from-the-api")]
        _check_token_stays_private(browser, served)


def _check_token_stays_private(browser: Any, served: Served) -> None:
    """No URL the browser asked the server for holds the token, and the server's output
    holds it only in the line that tells its owner where the page is."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    asked = [url for url in urls if url.startswith(served.url)]
    assert any("/v1/runs" in url for url in asked)
    assert not [url for url in asked if served.token in url.partition("#")[0]]
    lines = [line for line in served.output().splitlines() if served.token in line]
    assert len(lines) == 1 and "open the page at" in lines[0]


def test_always_allow_writes_a_rule_that_later_commands_follow(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>echo first</cmd>\n"),
        openai_stream("<cmd>echo first again</cmd>\n"),
        openai_stream("Both ran."),
    )
    with serving(home, sse_server, config=CONFIRM) as served:
        _start_from_the_page(browser, served, "allow echo for good")
        _css(browser, "#transcript .approval-box button.always")[0].click()
        text_appears(browser, "run-end", "finished: final")
        text_appears(browser, "transcript", "ran without asking (an approval rule allows it)")
        rules = (home.state / "serve" / "approval-rules.toml").read_text()
        assert 'program = "echo"' in rules and 'args = ["first", "**"]' in rules
        audit = read_jsonl(home.state / "audit.jsonl")
        assert [(a["action"], a["command"]) for a in audit] == [
            ("yes", "echo first"),
            ("auto", "echo first again"),
        ]
        outputs = [node.text for node in _css(browser, "#transcript .command .output")]
        assert outputs == ["first", "first again"]


def test_stop_from_the_page_ends_a_run_and_its_command(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>sleep 60</cmd>\n"), openai_stream("never asked"))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        client, run_id = _watch_a_run(browser, served, "sleep a while", "auto")
        text_appears(browser, "transcript", "$ sleep 60")
        browser.find_element("id", "cancel-button").click()
        text_appears(browser, "run-end", "finished: canceled", timeout=30)
        status = served.wait_finished(client, run_id)
        assert status["stop_reason"] == "canceled"
        row = f'#run-list li[data-id="{run_id}"] .chip'
        until(browser, lambda driver: _css(driver, row)[0].text == "stopped")


def test_a_reload_mid_run_shows_every_event_exactly_once(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Streaming prose, in many small pieces.\n<cmd>echo after-reload</cmd>\n"),
        openai_stream("The end of the run."),
    )
    with serving(home, sse_server, config=CONFIRM) as served:
        _start_from_the_page(browser, served, "reload me")
        before = shown_ids(browser)
        assert before == list(range(1, len(before) + 1))
        browser.refresh()
        text_appears(browser, "transcript", "waiting for approval")
        until(browser, lambda driver: len(shown_ids(driver)) >= len(before))
        assert shown_ids(browser) == before
        transcript = browser.find_element("id", "transcript").text
        assert transcript.count("Streaming prose, in many small pieces.") == 1
        assert len(_css(browser, "#transcript .command")) == 1
        _css(browser, "#transcript .approval-box button.approve")[0].click()
        text_appears(browser, "run-end", "finished: final")
        shown = shown_ids(browser)
        assert shown == list(range(1, len(shown) + 1))
        assert browser.find_element("id", "transcript").text.count("The end of the run.") == 1
        assert [node.text for node in _css(browser, "#transcript .output")] == ["after-reload"]


HOSTILE_PROSE = (
    'Look: <img src="x" onerror="window.pwned = 1"> and '
    "<script>window.pwned = 2</script> <b>bold?</b>\n"
)
HOSTILE_COMMAND = (
    "printf '%s' '<img src=y onerror=\"window.pwned=3\"><script>window.pwned=4</script>'"
)


def test_html_and_script_from_the_model_and_commands_stay_text(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream(HOSTILE_PROSE + f"<cmd>{HOSTILE_COMMAND}</cmd>\n"),
        openai_stream("<i>done</i> <script>window.pwned = 5</script>"),
    )
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        open_page(browser, served)
        client = served.client()
        started = served.start_run(
            client, prompt="<script>window.pwned=6</script>", approval="auto"
        )
        text_appears(browser, "run-list", "<script>window.pwned=6</script>")
        _open_run_from_list(browser, started["run"])
        text_appears(browser, "run-end", "finished: final")
        text = browser.find_element("id", "transcript").text
        assert '<img src="x" onerror="window.pwned = 1">' in text
        assert "<script>window.pwned = 2</script> <b>bold?</b>" in text
        assert '<img src=y onerror="window.pwned=3"><script>window.pwned=4</script>' in text
        assert "<i>done</i> <script>window.pwned = 5</script>" in text
        assert not _css(
            browser, "#transcript img, #transcript script, #transcript b, #run-list img"
        )
        assert not _css(browser, "#run-list script")
        assert browser.execute_script("return window.pwned") is None
        _check_inline_script_is_refused(browser)


def _check_inline_script_is_refused(browser: Any) -> None:
    """Were some HTML to reach the page, its policy would still refuse inline code."""
    browser.execute_script(
        "window.violations = [];"
        "document.addEventListener('securitypolicyviolation',"
        "  (event) => window.violations.push(event.violatedDirective));"
        "const box = document.createElement('div');"
        'box.innerHTML = \'<img src="/nothing.png" onerror="window.inlineRan = 1">\';'
        "document.body.append(box);"
        "const script = document.createElement('script');"
        "script.textContent = 'window.inlineRan = 2';"
        "document.body.append(script);"
    )
    violations = until(browser, lambda driver: driver.execute_script("return window.violations"))
    assert all(directive.startswith("script-src") for directive in violations)
    time.sleep(0.3)
    assert browser.execute_script("return window.inlineRan") is None


def test_the_server_checks_host_and_origin_and_sends_a_strict_policy(
    home: Home, sse_server: ScriptedServer
) -> None:
    with serving(home, sse_server, config=CONFIRM) as served:
        page = httpx.get(f"{served.url}/")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "default-src 'none'" in policy
        client = served.client()
        rebound = client.get("/v1/runs", headers={"host": "attacker.example:80"})
        assert rebound.status_code == 421
        assert "does not answer to the name 'attacker.example:80'" in rebound.json()["error"]
        assert httpx.get(f"{served.url}/", headers={"host": "attacker.example"}).status_code == 421
        body = {"prompt": "from elsewhere"}
        foreign = client.post("/v1/runs", json=body, headers={"origin": "http://attacker.example"})
        assert foreign.status_code == 403
        assert "another origin ('http://attacker.example')" in foreign.json()["error"]
        port = served.url.rsplit(":", 1)[1]
        for name in ("127.0.0.1", "localhost"):
            own = client.put(
                "/v1/memory/k",
                json={"text": "t"},
                headers={"origin": f"http://{name}:{port}", "host": f"{name}:{port}"},
            )
            assert own.status_code == 200, own.text
        deleted = client.delete("/v1/memory/k", headers={"origin": "null"})
        assert deleted.status_code == 403
        foreign_read = client.get("/v1/memory/k", headers={"origin": "http://attacker.example"})
        assert foreign_read.status_code == 403
        assert client.get("/v1/runs").status_code == 200


def test_a_rule_is_refused_for_a_command_it_cannot_name(
    home: Home, sse_server: ScriptedServer
) -> None:
    with serving(home, sse_server, config=CONFIRM) as served:
        client = served.client()
        for command, said in [
            ("echo a | tee out", "only a single simple command"),
            ("./build.sh", "is not a program found by name"),
            ("echo hi > out.txt", "would not hold"),
        ]:
            refused = client.post("/v1/approval-rules", json={"command": command})
            assert refused.status_code == 422, refused.text
            assert said in refused.json()["error"]
        assert not (home.state / "serve" / "approval-rules.toml").exists()
        added = client.post("/v1/approval-rules", json={"command": "git status --short"})
        assert added.status_code == 201
        assert added.json()["args"] == ["status", "**"]
        again = client.post("/v1/approval-rules", json={"command": "git status"})
        assert again.json()["name"] == added.json()["name"]
        assert (home.state / "serve" / "approval-rules.toml").read_text().count("[[rule]]") == 1
        exact = client.post("/v1/approval-rules", json={"command": "rm -rf 'build*'"})
        assert exact.json()["args"] == ["-rf", "build[*]"]
        pipe = client.post("/v1/approval-rules", json={"command": "grep 'a|b' notes"})
        assert pipe.status_code == 422 and "holding `|`" in pipe.json()["error"]


def test_show_all_reads_the_saved_full_output(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>seq 1 300000</cmd>\n"), openai_stream("Counted."))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        client, run_id = _watch_a_run(browser, served, "count far", "auto")
        text_appears(browser, "run-end", "finished: final")
        result = next(
            event.data["result"]
            for event in read_events(client, run_id)
            if event.type == "command_result"
        )
        assert result["stdout_dropped_bytes"] > 0 and result["stdout_file"]
        output = _css(browser, "#transcript .command .output")[0]
        assert "lines hidden" in output.text and "150000\n" not in output.text
        _css(browser, "#transcript .command button.show-all")[0].click()
        expected = "".join(f"{n}\n" for n in range(1, 300001))
        until(
            browser,
            lambda driver: (
                driver.execute_script(
                    "return document.querySelector('#transcript .output').textContent.length"
                )
                >= len(expected)
            ),
        )
        shown = browser.execute_script(
            "return document.querySelector('#transcript .output').textContent"
        )
        assert shown == expected
        answer = client.get(
            f"/v1/runs/{run_id}/output", params={"turn": 1, "index": 0, "stream": "stdout"}
        )
        assert answer.text == expected
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        missing = client.get(
            f"/v1/runs/{run_id}/output", params={"turn": 2, "index": 0, "stream": "stdout"}
        )
        assert missing.status_code == 404 and "has no saved stdout" in missing.json()["error"]
        bad = client.get(f"/v1/runs/{run_id}/output", params={"turn": "x"})
        assert bad.status_code == 400


def test_a_dropped_stream_resumes_after_the_last_event_shown(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Before the drop.\n<cmd>echo while-cut</cmd>\n"),
        openai_stream("After the drop."),
    )
    with serving(home, sse_server, config=CONFIRM) as served:
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        with cuttable_proxy(host, int(port)) as proxy:
            open_page(browser, served, via=f"http://{host}:{proxy.port}")
            client = served.client()
            started = served.start_run(client, prompt="drop me", approval="confirm")
            _open_run_from_list(browser, started["run"])
            text_appears(browser, "transcript", "waiting for approval")
            before = shown_ids(browser)
            proxy.cut()  # the page's stream (and any other connection) ends mid-run
            pending = client.get("/v1/approvals").json()["approvals"]
            assert client.post(f"/v1/approvals/{pending[0]['id']}", json={"approve": True})
            text_appears(browser, "run-end", "finished: final")
        shown = shown_ids(browser)
        assert shown == [event.id for event in read_events(client, started["run"])]
        assert browser.find_element("id", "transcript").text.count("After the drop.") == 1
        assert browser.find_element("id", "transcript").text.count("Before the drop.") == 1
        assert [node.text for node in _css(browser, "#transcript .output")] == ["while-cut"]
        resumed = [
            message["params"]["request"]["headers"]
            for entry in browser.get_log("performance")
            if (message := json.loads(entry["message"])["message"])["method"]
            == "Network.requestWillBeSent"
            and message["params"]["request"]["url"].endswith("/events")
        ]
        assert len(resumed) >= 2
        headers = {name.lower(): value for name, value in resumed[-1].items()}
        assert int(headers["last-event-id"]) >= before[-1]


def test_the_list_shows_a_running_runs_steps_and_tokens_from_its_event_log(
    home: Home, sse_server: ScriptedServer
) -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "cost": 0.25}
    sse_server.enqueue(
        openai_stream("<cmd>echo one</cmd>\n", usage=usage),
        openai_stream("<cmd>echo two</cmd>\n", usage=usage),
        openai_stream("Counted.", usage=usage),
    )
    with serving(home, sse_server, config=CONFIRM) as served:
        client = served.client()
        run_id = served.start_run(client, prompt="count my tokens", approval="confirm")["run"]
        _approve_next(client, "echo one")
        pending = _wait_pending(client, "echo two")
        listed = next(run for run in client.get("/v1/runs").json()["runs"] if run["id"] == run_id)
        assert listed["task"] == "count my tokens" and listed["status"] == "running"
        assert listed["live"] == {
            "steps": 1,
            "input_tokens": 120,
            "output_tokens": 30,
            "cost_usd": 0.25,
        }
        assert client.post(f"/v1/approvals/{pending}", json={"approve": True}).is_success
        finished = served.wait_finished(client, run_id)
        assert finished["cost_usd"] == 0.75 and finished["usage"]["output_tokens"] == 90
        listed = next(run for run in client.get("/v1/runs").json()["runs"] if run["id"] == run_id)
        assert "live" not in listed and listed["turns"] == 3


def _wait_pending(client: httpx.Client, command: str) -> str:
    """The id of the approval `command` waits for, once it waits."""
    deadline = time.monotonic() + 20
    while True:
        waiting = client.get("/v1/approvals").json()["approvals"]
        found = [pending["id"] for pending in waiting if pending["command"] == command]
        if found:
            return str(found[0])
        assert time.monotonic() < deadline, f"{command!r} never waited for approval"
        time.sleep(0.05)


def _approve_next(client: httpx.Client, command: str) -> None:
    pending = _wait_pending(client, command)
    assert client.post(f"/v1/approvals/{pending}", json={"approve": True}).is_success


def test_a_command_that_goes_on_as_a_job_ends_in_its_card(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    script_a_build_that_goes_on_as_a_job(sse_server)
    with serving(home, sse_server, config=JOB_AFTER_HALF_A_SECOND) as served:
        _watch_a_run(browser, served, "build it", "auto")
        text_appears(browser, "transcript", "went on as job 1")
        text_appears(browser, "run-end", "finished: final")
        cards = _css(browser, "#transcript .command")
        assert "$ echo started; sleep 1.5; echo built" in cards[0].text
        assert "exit 0" in cards[0].text and "went on as job" not in cards[0].text
        assert _css(browser, "#transcript .command .output")[0].text == "started\nbuilt"
        assert "$ wait %1" in cards[1].text


LIVE_TICKS = (
    'for i in 1 2 3 4 5 6; do echo "tick-$i <img src=z onerror=window.pwned=7>"; sleep 0.5; done'
)


def test_a_running_commands_output_shows_in_its_card_as_text_then_its_result_replaces_it(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream(f"<cmd>{LIVE_TICKS}</cmd>\n"), openai_stream("It ticked."))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        _watch_a_run(browser, served, "tick for a while", "auto")
        live = until(
            browser, lambda driver: _css(driver, "#transcript .command.running pre.output.live")
        )
        until(browser, lambda driver: "tick-2 <img" in live[0].text)
        assert "tick-1 <img src=z onerror=window.pwned=7>\n" in live[0].text
        text_appears(browser, "run-end", "finished: final")
        assert not _css(browser, "#transcript pre.output.live")
        (output,) = _css(browser, "#transcript .command .output")
        lines = output.text.splitlines()
        assert lines == [f"tick-{i} <img src=z onerror=window.pwned=7>" for i in range(1, 7)]
        assert not _css(browser, "#transcript img")
        assert browser.execute_script("return window.pwned") is None
