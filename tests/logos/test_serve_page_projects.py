"""The page's projects in a real headless chromium against a real `logos serve` (the model
is scripted): a two-agent handoff streams into the open page, a talon's command is approved
from the chat, a reload mid-turn shows every message exactly once, and the overview counts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import click, css, open_page, shown_ids, text_appears, until
from tests.support.cli_harness import Home
from tests.support.project_harness import ProjectClient
from tests.support.serve_harness import AUTO_LOCAL, Served, read_stream, serving
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(150)


@pytest.fixture
def served(home: Home, sse_server: ScriptedServer) -> Iterator[Served]:
    with serving(home, sse_server, config=AUTO_LOCAL) as server:
        yield server


def _open_team(browser: Any, served: Served, worker_approval: str = "auto") -> ProjectClient:
    """A captain (boss) and a talon (worker), their project's chat open in the page."""
    project = ProjectClient.create(served.client(), goal="greet")
    project.add("boss", "captain", approval="auto")
    project.add("worker", approval=worker_approval)
    open_page(browser, served)
    click(browser, f'#project-list li[data-id="{project.id}"] a')
    text_appears(browser, "roster", "boss")
    return project


def _send(browser: Any, text: str) -> None:
    browser.find_element("id", "project-message").send_keys(text)
    browser.find_element("id", "send-message").click()


def _answer(browser: Any, box: str, says: str, button: str) -> None:
    """Click `button` in the chat's first `box`, which must say `says`."""
    found = css(browser, f"#project-chat {box}")[0]
    assert says in found.text
    found.find_element("css selector", f"button.{button}").click()


def test_a_two_agent_handoff_streams_into_the_open_page(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Handing this over.\n@worker print the greeting"),
        openai_stream("Printing.\n<cmd>echo hello-from-worker</cmd>"),
        openai_stream("The greeting is printed."),
    )
    _open_team(browser, served)
    _send(browser, "greet everyone")
    text_appears(browser, "project-chat", "turn answered")
    messages = css(browser, "#project-chat .message")
    authors = [m.get_attribute("data-author") for m in messages]
    assert authors == ["you", "boss", "worker"]
    assert "greet everyone" in messages[0].text
    assert "Handing this over." in messages[1].text
    worker = messages[2]
    assert "Printing." in worker.text and "The greeting is printed." in worker.text
    card = worker.find_element("css selector", ".command")
    assert "$ echo hello-from-worker" in card.text and "exit 0" in card.text
    assert card.find_element("css selector", ".output").text == "hello-from-worker"
    routes = [r.text for r in css(browser, "#project-chat .route")]
    assert routes == [
        "→ boss: captain by default",
        "→ worker: @worker named by boss: print the greeting",
    ]
    text_appears(browser, "roster", "worker")
    until(browser, lambda d: "tokens" in d.find_element("id", "project-spend").text)
    text_appears(browser, "project-metrics", "1 active, 0 paused")


def test_a_talons_command_is_approved_from_the_chat(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("@worker run the check"),
        openai_stream("<cmd>echo checked-after-approval</cmd>"),
        openai_stream("Checked."),
    )
    _open_team(browser, served, worker_approval="confirm")
    _send(browser, "check it")
    text_appears(browser, "project-chat", "worker waits for your approval")
    _answer(
        browser,
        ".message[data-author='worker'] .command.waiting",
        "echo checked-after-approval",
        "approve",
    )
    text_appears(browser, "project-chat", "turn answered")
    assert "approved" in css(browser, "#project-chat .approval-box, #project-chat .decided")[0].text
    output = css(browser, "#project-chat .message[data-author='worker'] .output")[0]
    assert output.text == "checked-after-approval"


def test_a_reload_mid_turn_shows_every_message_exactly_once(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("@worker take it " + "slowly " * 30, chunk_size=4, event_pause_s=0.04),
        openai_stream("Worker " + "done " * 30, chunk_size=4, event_pause_s=0.02),
    )
    project = _open_team(browser, served)
    _send(browser, "a long one")
    text_appears(browser, "project-chat", "slowly slowly")
    browser.refresh()
    text_appears(browser, "project-chat", "turn answered")
    events = read_stream(
        project.client,
        f"{project.path}/events",
        stop_after=shown_ids(browser, "logosProjectShown")[-1],
    )
    assert shown_ids(browser, "logosProjectShown") == [event.id for event in events]
    messages = css(browser, "#project-chat .message")
    assert [m.get_attribute("data-author") for m in messages] == ["you", "boss", "worker"]
    assert messages[1].text.count("@worker take it") == 1
    assert messages[2].text.count("Worker done") == 1
    chat = browser.find_element("id", "project-chat").text
    assert chat.count("a long one") == 1


def test_a_project_and_its_agents_are_made_from_the_page(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("Hello from the captain."))
    open_page(browser, served)
    browser.find_element("css selector", "a[data-go='new-project']").click()
    browser.find_element("id", "new-project-name").send_keys("made here")
    browser.find_element("id", "new-project-goal").send_keys("say hello")
    browser.find_element("id", "create-project").click()
    text_appears(browser, "project-name", "made here")
    until(browser, lambda d: d.find_element("id", "agent-name").is_displayed())
    browser.find_element("id", "agent-name").send_keys("cap")
    browser.find_element("css selector", "#agent-role option[value='captain']").click()
    browser.find_element("css selector", "#agent-approval option[value='auto']").click()
    browser.find_element("id", "add-agent").click()
    text_appears(browser, "roster", "captain")
    browser.find_element("id", "agent-name").send_keys("cap2")
    browser.find_element("id", "add-agent").click()
    text_appears(browser, "roster", "cap2")
    browser.find_element("id", "agent-name").send_keys("Bad Name")
    browser.find_element("id", "add-agent").click()
    text_appears(browser, "agent-error", "'Bad Name' cannot be addressed as @name")
    _send(browser, "hi")
    text_appears(browser, "project-chat", "Hello from the captain.")
    listed = served.client().get("/v1/hierarchy").json()["projects"]
    assert [(p["name"], [a["name"] for a in p["agents"]]) for p in listed] == [
        ("made here", ["cap", "cap2"])
    ]
    text_appears(browser, "project-list", "made here\nidle\n2 agents")
    # WHY until: the roster is drawn anew as the agents' states come in; read whole.
    roster = until(
        browser,
        lambda driver: (
            [card.text.split("\n")[:3] for card in css(driver, "#roster .agent-card")] or None
        ),
    )
    assert roster == [["cap", "captain", "idle"], ["cap2", "talon", "idle"]]


def test_html_from_agents_commands_and_the_person_stays_text(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    hostile = '<img src="x" onerror="window.pwned = 1"><script>window.pwned = 2</script>'
    sse_server.enqueue(
        openai_stream(f"{hostile}\n<cmd>printf '%s' '<b onmouseover=x>bold</b>'</cmd>"),
        openai_stream(f"Done {hostile}"),
    )
    _open_team(browser, served)
    _send(browser, f"me too {hostile}")
    text_appears(browser, "project-chat", "turn answered")
    assert browser.execute_script("return window.pwned") is None
    assert css(browser, "#project-chat img, #project-chat script, #project-chat b") == []
    chat = browser.find_element("id", "project-chat").text
    assert chat.count(hostile) == 3  # the person's, the captain's twice
    assert "<b onmouseover=x>bold</b>" in chat


def test_a_guard_is_answered_from_the_chat(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("@worker check it"),
        openai_stream("@boss checked"),
        openai_stream("@worker check it again"),
        openai_stream("Checked again, all good."),
    )
    project = _open_team(browser, served)
    _send(browser, "check")
    text_appears(browser, "project-chat", "turn held")
    assert project.status()["status"] == "held"  # it waits for the person, not idle
    text_appears(browser, "project-state", "held: your call")
    item = f'#project-list li[data-id="{project.id}"] .chip'
    until(browser, lambda d: css(d, item)[0].text == "held: your call")
    _answer(
        browser, ".guard-box", "boss → worker again: the same handoff twice in one turn", "continue"
    )
    text_appears(browser, "project-chat", "you chose continue")
    text_appears(browser, "project-chat", "Checked again, all good.")
    text_appears(browser, "project-chat", "turn answered")


def test_a_running_commands_output_shows_live_in_its_agents_message(
    browser: Any, served: Served, sse_server: ScriptedServer
) -> None:
    ticks = 'for i in 1 2 3 4 5; do echo "tick-$i"; sleep 0.5; done'
    sse_server.enqueue(openai_stream(f"<cmd>{ticks}</cmd>"), openai_stream("It ticked."))
    _open_team(browser, served)
    _send(browser, "tick")
    card = until(
        browser,
        lambda d: css(d, "#project-chat .message[data-author='boss'] .command.running"),
    )[0]
    until(browser, lambda d: "tick-2" in card.text)
    assert "running" in card.find_element("css selector", ".card-state").text
    text_appears(browser, "project-chat", "turn answered")
    assert "exit 0" in card.text
    output = card.find_element("css selector", ".output").text
    assert output.splitlines() == [f"tick-{n}" for n in range(1, 6)]
