"""The web page in a real headless browser (Debian's chromium, driven through chromedriver):
start a run against the scripted model, watch its text stream, approve the command that
waits, see its result; then the session and a memory note."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import open_page, text_appears as _text_appears
from tests.support.cli_harness import Home, read_jsonl
from tests.support.serve_harness import Served, serving
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(120)


def test_start_watch_approve_and_browse_from_the_page(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    sse_server.enqueue(
        openai_stream("Let me check the machine.\n<cmd>echo from-the-page</cmd>\n"),
        openai_stream("All done: it printed from-the-page."),
    )
    with serving(home, sse_server, config="check_back = false\n") as served:
        open_page(browser, served)
        assert browser.execute_script("return location.hash") == ""
        assert browser.execute_script("return sessionStorage.getItem('logos-token')") == (
            served.token
        )

        browser.find_element(By.CSS_SELECTOR, "a[data-go='new-run']").click()
        browser.find_element(By.ID, "prompt").send_keys("say something from the page")
        Select(browser.find_element(By.ID, "approval")).select_by_value("confirm")
        browser.find_element(By.ID, "start-button").click()
        _text_appears(browser, "transcript", "Let me check the machine.")
        _text_appears(browser, "approval-list", "echo from-the-page")
        assert not browser.find_elements(By.CSS_SELECTOR, "#transcript .command .output")
        browser.find_element(By.CSS_SELECTOR, "#approval-list button.approve").click()
        _text_appears(browser, "transcript", "from-the-page")
        _text_appears(browser, "transcript", "All done: it printed from-the-page.")
        _text_appears(browser, "run-end", "finished: final")

        browser.find_element(By.CSS_SELECTOR, "a[data-go='sessions']").click()
        _text_appears(browser, "session-list", "say something from the page")
        browser.find_element(By.CSS_SELECTOR, "a[data-go='memory']").click()
        browser.find_element(By.ID, "note-key").send_keys("Test Runner")
        browser.find_element(By.ID, "note-text").send_keys("pytest -x")
        browser.find_element(By.CSS_SELECTOR, "#note-form button").click()
        _text_appears(browser, "note-list", "test runner: pytest -x")
        _check_saved(served)


def test_the_page_without_a_token_asks_for_one(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    from selenium.webdriver.common.by import By

    with serving(home, sse_server) as served:
        browser.get(f"{served.url}/")
        assert browser.find_element(By.ID, "login").is_displayed()
        assert not browser.find_element(By.ID, "app").is_displayed()
        browser.find_element(By.ID, "token-input").send_keys(served.token)
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        _text_appears(browser, "status", "connected")


def _check_saved(served: Served) -> None:
    audit = read_jsonl(served.home.state / "audit.jsonl")
    assert [(a["action"], a["command"]) for a in audit] == [("yes", "echo from-the-page")]
    notes = (served.home.state / "memory.json").read_text()
    assert '"key": "test runner"' in notes
