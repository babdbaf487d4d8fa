"""`logos view FILE` in a real headless chromium: a trajectory the `logos` command saved opens
in the page's run viewer (long output folded, "show all" unfolds it), and a batch's
results.jsonl opens as its report, charts drawn by the vendored uPlot; the page's file picker
opens the same report in `logos serve`'s page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logos.batch.results import TaskResult
from tests.support.browser import css as _css, open_page, shown_ids, text_appears, until
from tests.support.cli_harness import Home, logos, openai_env
from tests.support.serve_harness import serving
from tests.support.sse_server import ScriptedServer, openai_stream
from tests.support.view_harness import viewing

pytestmark = pytest.mark.timeout(150)
LINES = 100


def test_a_saved_trajectory_opens_in_the_run_viewer(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Counting.\n<cmd>seq 1 100</cmd>\n"),
        openai_stream("Counted to <b>100</b>."),
    )
    saved = home.root / "run.jsonl"
    ran = logos(
        ["--model", "m", "--yes", "--no-check-back", "--trajectory", str(saved), "count it"],
        home,
        openai_env(home, sse_server),
    )
    assert ran.returncode == 0, ran.stderr
    with viewing(home, saved) as url:
        assert "/#token=" in url and url.endswith("&view=run")
        browser.get(url)
        text_appears(browser, "status", "viewing a saved run")
        text_appears(browser, "run-end", "finished: final")
        text = browser.find_element("id", "transcript").text
        assert "count it" in text and "Counting." in text and "Counted to <b>100</b>." in text
        assert not _css(browser, "#transcript b")
        output = _css(browser, "#transcript .command .output")[0]
        assert "76 lines hidden" in output.text
        assert output.text.startswith("1\n2\n") and output.text.endswith("99\n100")
        _css(browser, "#transcript .command button.show-all")[0].click()
        until(browser, lambda _: output.text == "\n".join(str(n) for n in range(1, LINES + 1)))
        assert "exit 0" in _css(browser, "#transcript .command")[0].text
        assert not browser.find_element("id", "start").is_displayed()
        shown = shown_ids(browser)
        assert shown == list(range(1, len(shown) + 1))
        assert browser.execute_script("return location.hash") == "#run=saved"


def _results_file(path: Path) -> Path:
    lines = [
        TaskResult(
            id=f"task-{n}",
            attempt=1,
            status="passed" if n % 3 else "failed",
            stop_reason="final",
            steps=n,
            cost_usd=0.01 * n,
            wall_s=1.5 * n,
            started_at="2026-01-01T00:00:00Z",
            ended_at="2026-01-01T00:01:00Z",
        ).model_dump_json()
        for n in range(1, 7)
    ]
    lines.append('{"id": "<img src=x onerror=\\"window.pwned=1\\">", "status": "error"}')
    path.write_text("\n".join(lines) + "\n")
    return path


def _check_report(browser: Any) -> None:
    text_appears(browser, "batch-summary", "7 tasks: 4 passed, 2 failed, 1 error, 0 canceled")
    rows = [row.text for row in _css(browser, "#batch-table tbody tr")]
    assert rows[0] == "task-1 passed 1.5 1 $0.0100"
    assert rows[-1].startswith('<img src=x onerror="window.pwned=1"> error')
    assert len(_css(browser, "#batch-outcomes canvas")) == 1
    assert len(_css(browser, "#batch-times canvas")) == 1
    assert browser.execute_script("return window.pwned") is None


def test_a_batch_report_opens_with_logos_view(browser: Any, home: Home) -> None:
    with viewing(home, _results_file(home.root / "results.jsonl")) as url:
        browser.get(url)
        text_appears(browser, "status", "viewing a batch report")
        _check_report(browser)
        assert not browser.find_element("id", "run").is_displayed()


def test_the_served_page_opens_a_batch_report_from_a_file(
    browser: Any, home: Home, sse_server: ScriptedServer
) -> None:
    results = _results_file(home.root / "results.jsonl")
    with serving(home, sse_server) as served:
        open_page(browser, served)
        browser.find_element("css selector", "a[data-go='batch']").click()
        browser.find_element("id", "batch-file").send_keys(str(results))
        _check_report(browser)


def test_logos_view_says_what_it_cannot_open(home: Home) -> None:
    other = home.root / "notes.txt"
    other.write_text("not a run\n")
    ran = logos(["view", str(other)], home, {"PATH": "/usr/bin:/bin"})
    assert ran.returncode != 0
    assert "logos view opens a run's trajectory or a batch's results.jsonl" in ran.stderr
