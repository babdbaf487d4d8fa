"""The page as a workspace, in a real headless chromium against one real `logos serve` (a
scripted model) whose sandbox is a real sandboxd: a team with a sandboxed talon hands work
over, a command is approved from the chat, the file the talon changed opens as a diff; every
state has its own look and words; stale answers and form errors speak the person's words;
the keyboard works; and at a phone's, a tablet's and a laptop's width nothing scrolls
sideways, no box scrolls inside another, axe-core finds nothing serious, and the page is
photographed (light and dark) for the docs.

The server, the daemon and the browser are shared by the module's tests, in order."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    click,
    css,
    dark,
    layout_problems,
    open_page,
    screenshot,
    serious_violations,
    sized,
    text_appears,
    until,
)
from tests.support.cli_harness import Home, make_home
from tests.support.project_harness import ProjectClient
from tests.support.sandboxd_harness import Daemon
from tests.support.serve_harness import Served, sandboxd_config, serving
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]
CALC = "def add(a, b):\n    return a + b\n"
ADDED = "def total(numbers):\n    return sum(numbers)\n"


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


DEMO_ROOT = Path(tempfile.gettempdir()) / "logos-demo"
"""Where the workspace lives: the docs show these screenshots, so the paths they show read as
a user's, not as the test runner's."""


@pytest.fixture(scope="module")
def workspace() -> Iterator[Home]:
    """A user's places, and a git repository holding calc.py in its work directory."""
    shutil.rmtree(DEMO_ROOT, ignore_errors=True)  # a run stopped before its cleanup
    DEMO_ROOT.mkdir(mode=0o700)
    try:
        yield _calc_repository(make_home(DEMO_ROOT))
    finally:
        shutil.rmtree(DEMO_ROOT, ignore_errors=True)


def _calc_repository(home: Home) -> Home:
    repo = home.work / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text(CALC)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
            cwd=repo,
            check=True,
        )
    return home


@pytest.fixture(scope="module")
def served(workspace: Home, model: ScriptedServer, daemon: Daemon) -> Iterator[Served]:
    config = sandboxd_config(daemon.socket) + "[serve]\nallow_local_auto = true\n"
    with serving(workspace, model, config=config) as server:
        yield server


@pytest.fixture(scope="module")
def team(served: Served) -> ProjectClient:
    """A project on the repository: a captain on this machine that asks before each command,
    and a talon in its own sandbox that sees only the repository."""
    repo = str(served.home.work / "calc")
    paths = [{"path": repo, "read_only": False}]
    project = ProjectClient.create(
        served.client(), name="calculator", goal="grow calc.py", allowed_paths=paths
    )
    project.add("boss", "captain", approval="confirm")
    project.add("talon", runner={"kind": "sandbox"})
    return project


def _open_project(browser: Any, served: Served, project: ProjectClient) -> None:
    open_page(browser, served)
    click(browser, f'#project-list li[data-id="{project.id}"] a')
    text_appears(browser, "roster", "talon")


def _chip(browser: Any, selector: str) -> str:
    return str(css(browser, selector)[0].text)


def test_a_team_hands_over_a_sandboxed_talon_writes_and_its_diff_opens(
    browser: Any, served: Served, model: ScriptedServer, team: ProjectClient
) -> None:
    model.enqueue(
        openai_stream("Let me look first.\n<cmd>ls</cmd>"),
        openai_stream("**Plan**: the talon writes it.\n\n@talon please add `total` to calc.py"),
        openai_stream(f"<cmd>sleep 1; printf '{ADDED}' >> calc.py</cmd>", chunk_size=40),
        openai_stream(f"Added `total`:\n\n```python\n{ADDED}```\n- tested: no"),
    )
    _open_project(browser, served, team)
    roster = browser.find_element("id", "roster").text
    assert "talon's sandbox: sees" in roster and "local bash on this machine" in roster
    assert "m · sandbox" in roster  # the model every agent uses, and its runner
    message = browser.find_element("id", "project-message")
    message.send_keys("add a total function")
    message.send_keys(_ctrl_enter())
    card = until(browser, lambda d: css(d, "#project-chat .command.waiting"))[0]
    assert "waiting for approval" in card.find_element("css selector", ".card-state").text
    item = f'#project-list li[data-id="{team.id}"]'
    until(browser, lambda d: "waiting for approval" in _chip(d, item + " .chip"))
    assert "waiting for approval" in browser.find_element("id", "project-state").text
    assert team.status()["status"] == "waiting"
    screenshot(browser, "project-waiting-for-approval")
    card.find_element("css selector", "button.approve").click()
    talons = "#project-chat .message[data-author='talon'] .command"
    working = until(browser, lambda d: css(d, talons))
    until(browser, lambda d: "working" in _chip(d, item + " .chip"))
    assert team.status()["status"] == "busy"
    text_appears(browser, "project-chat", "turn answered")

    route = css(browser, "#project-chat .route")[-1]
    assert route.text == "→ talon: @talon named by boss: please add total to calc.py"
    assert route.find_element("css selector", "code").text == "total"
    boss = css(browser, "#project-chat .message[data-author='boss']")[0]
    assert boss.find_element("css selector", "strong").text == "Plan"
    assert "**" not in boss.text
    foot = working[0].find_element("css selector", ".card-foot").text
    assert foot.endswith(" s · in talon's sandbox")
    assert "exit 0" in working[0].text
    local = boss.find_element("css selector", ".command .card-foot").text
    assert local.endswith("on this machine (local bash)")
    talon = css(browser, "#project-chat .message[data-author='talon']")[0]
    code = talon.find_element("css selector", ".codeblock pre").text
    assert code == ADDED.rstrip("\n")
    assert talon.find_element("css selector", ".codeblock button.copy").text == "Copy"
    assert [li.text for li in talon.find_elements("css selector", ".md li")] == ["tested: no"]
    assert "this reply changed 1 file: calc.py" in talon.text
    until(browser, lambda d: "idle" in _chip(d, item + " .chip"))

    files = until(browser, lambda d: css(d, "#files-list .file-toggle"))
    assert files[0].text.split() == ["M", "calc.py", "+2", "\N{MINUS SIGN}0"]
    files[0].click()
    diff = until(browser, lambda d: css(d, "#files-list pre.diff"))[0]
    added = [line.text for line in diff.find_elements("css selector", ".line.add")]
    assert added == ["+def total(numbers):", "+    return sum(numbers)"]
    assert (served.home.work / "calc" / "calc.py").read_text() == CALC + ADDED
    screenshot(browser, "project-diff")
    assert serious_violations(browser) == []
    assert layout_problems(browser) == []


def test_a_runs_states_each_have_their_look_and_words(
    browser: Any, served: Served, model: ScriptedServer
) -> None:
    model.enqueue(
        openai_stream("Cleaning up.\n<cmd>rm -rf build</cmd>"),
        openai_stream("Understood: I leave `build` alone."),
    )
    open_page(browser, served)
    client = served.client()
    run = served.start_run(client, prompt="clean the build", approval="confirm")["run"]
    item = until(browser, lambda d: css(d, f'#run-list li[data-id="{run}"] a'))[0]
    until(browser, lambda d: "waiting for approval" in item.text)
    item.click()
    card = until(browser, lambda d: css(d, "#transcript .command.waiting"))[0]
    assert card.find_element("css selector", ".card-state").text == "waiting for approval"
    text_appears(browser, "run-state", "waiting for approval")
    screenshot(browser, "run-waiting-for-approval")
    card.find_element("css selector", "input.reason").send_keys("not now")
    card.find_element("css selector", "button.deny").click()
    text_appears(browser, "run-end", "finished: final")
    assert card.find_element("css selector", ".card-state").text == "denied: not now"
    assert card.find_element("css selector", ".card-foot").text == "did not run"
    assert "(no output)" not in card.text and "0.00 s" not in card.text
    assert card.find_elements("css selector", ".output") == []
    text_appears(browser, "run-state", "done")
    until(browser, lambda d: "done" in css(d, f'#run-list li[data-id="{run}"] .chip')[0].text)
    facts = browser.find_element("id", "run-facts").text
    assert "Model\nm" in facts and "Runner\nlocal bash" in facts


def test_a_stale_approval_says_what_happened_in_the_page(
    browser: Any, served: Served, model: ScriptedServer
) -> None:
    model.enqueue(openai_stream("<cmd>echo twice</cmd>"), openai_stream("Done."))
    open_page(browser, served)
    client = served.client()
    served.start_run(client, prompt="approve me twice", approval="confirm")
    pending = until(browser, lambda d: css(d, "#approval-list li.pending"))[0]
    waiting = client.get("/v1/approvals").json()["approvals"]
    assert client.post(f"/v1/approvals/{waiting[0]['id']}", json={"approve": True}).is_success
    pending.find_element("css selector", "button.approve").click()
    note = until(browser, lambda d: pending.find_element("css selector", ".approval-note").text)
    assert note.startswith("this command was approved already (from another page")
    assert pending.find_elements("css selector", "button") == []
    assert browser.execute_script("return typeof window.alert") == "function"
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018


def test_the_run_form_speaks_of_its_own_fields(browser: Any, served: Served) -> None:
    open_page(browser, served)
    css(browser, "a[data-go='new-run']")[0].click()
    browser.find_element("id", "prompt").send_keys("look at it")
    browser.find_element("css selector", "#runner option[value='sandbox']").click()
    browser.find_element("id", "start-button").click()
    text_appears(browser, "start-error", "Give the sandbox a directory")
    assert browser.find_element("id", "workdir").get_attribute("aria-invalid") == "true"
    assert browser.switch_to.active_element.get_attribute("id") == "workdir"
    assert "allowed_paths" not in browser.find_element("id", "start-error").text
    browser.find_element("id", "workdir").send_keys("no/slash")
    browser.find_element("id", "start-button").click()
    text_appears(browser, "start-error", "Give the directory as a full path, starting with /.")
    browser.find_element("css selector", "#runner option[value='local']").click()
    browser.find_element("id", "workdir").clear()
    browser.find_element("id", "workdir").send_keys("/no/such/dir")
    browser.find_element("id", "start-button").click()
    text_appears(browser, "start-error", "Directory '/no/such/dir' is not an absolute path")
    assert "runner." not in browser.find_element("id", "start-error").text
    screenshot(browser, "new-run-error")


def test_search_unread_and_the_keyboard(
    browser: Any, served: Served, model: ScriptedServer, team: ProjectClient
) -> None:
    other = ProjectClient.create(served.client(), name="notes", goal="keep notes")
    other.add("scribe", "captain", approval="auto")
    _open_project(browser, served, team)
    model.enqueue(openai_stream("Noted."))
    other.ask("note this")
    item = f'#project-list li[data-id="{other.id}"]'
    until(browser, lambda d: css(d, item + ".has-unread .unread"))
    search = browser.find_element("id", "search")
    search.send_keys("calc")
    until(browser, lambda d: not css(d, item)[0].is_displayed())
    until(browser, lambda d: css(d, f'#project-list li[data-id="{team.id}"]')[0].is_displayed())
    search.clear()
    search.send_keys("zzz-nothing")
    text_appears(browser, "project-list", "Nothing matches")
    search.clear()
    search.send_keys(" ")
    click(browser, item + " a")
    text_appears(browser, "project-chat", "Noted.")
    until(browser, lambda d: not css(d, item + ".has-unread"))

    from selenium.webdriver.common.keys import Keys

    box = css(browser, "#agent-form-box summary")[0]
    box.click()
    assert browser.find_element("id", "agent-form-box").get_attribute("open") == "true"
    browser.find_element("id", "agent-name").send_keys(Keys.ESCAPE)
    until(browser, lambda d: d.find_element("id", "agent-form-box").get_attribute("open") is None)
    assert browser.switch_to.active_element.tag_name == "summary"  # the focus stays near
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    focused = browser.switch_to.active_element
    assert focused.tag_name in ("a", "button", "select", "summary")  # reached by keyboard
    assert browser.execute_script("return arguments[0].matches(':focus-visible')", focused)
    outline = browser.execute_script("return getComputedStyle(arguments[0]).outlineStyle", focused)
    assert outline == "solid"


@pytest.mark.parametrize("width", ["phone", "tablet", "wide"])
def test_every_width_reads_without_sideways_scrolling_and_passes_axe(
    browser: Any, served: Served, team: ProjectClient, width: str
) -> None:
    sized(browser, WIDTHS[width])
    _open_project_at_any_width(browser, served, team)
    text_appears(browser, "project-chat", "turn answered")
    for scheme in ("light", "dark"):
        dark(browser, scheme == "dark")
        assert layout_problems(browser) == [], scheme
        assert serious_violations(browser) == [], scheme
        screenshot(browser, f"project-{scheme}")
    dark(browser, False)
    background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    dark(browser, True)
    assert browser.execute_script("return getComputedStyle(document.body).backgroundColor") != (
        background
    )
    dark(browser, False)
    runs = served.client().get("/v1/runs").json()["runs"]
    browser.get(f"{served.url}/#run={runs[-1]['id']}")
    text_appears(browser, "run-end", "finished")
    assert layout_problems(browser) == []
    assert serious_violations(browser) == []
    screenshot(browser, "run")
    browser.get(f"{served.url}/#new-run")
    until(browser, lambda d: d.find_element("id", "prompt").is_displayed())
    assert layout_problems(browser) == []
    screenshot(browser, "new-run")
    browser.get(f"{served.url}/")
    until(browser, lambda d: d.find_element("css selector", ".home-view").is_displayed())
    assert serious_violations(browser) == []
    screenshot(browser, "home")
    if width != "wide":
        assert not browser.find_element("id", "sidebar").is_displayed()
        browser.find_element("id", "menu-button").click()
        until(browser, lambda d: d.find_element("id", "search").is_displayed())
        assert browser.switch_to.active_element.get_attribute("id") == "search"
        screenshot(browser, "drawer")
        from selenium.webdriver.common.keys import Keys

        browser.switch_to.active_element.send_keys(Keys.ESCAPE)
        until(browser, lambda d: not d.find_element("id", "sidebar").is_displayed())


def _open_project_at_any_width(browser: Any, served: Served, project: ProjectClient) -> None:
    browser.get(f"{served.url}/#token={served.token}")
    text_appears(browser, "status", "connected")
    browser.get(f"{served.url}/#project={project.id}")
    text_appears(browser, "roster", "talon")


def _ctrl_enter() -> str:
    from selenium.webdriver.common.keys import Keys

    return str(Keys.CONTROL + Keys.ENTER)
