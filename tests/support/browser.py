"""Real headless chromium (Debian's, driven through chromedriver) for the page's tests."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.docs_screenshots import publish
from tests.support.parts import require
from tests.support.serve_harness import Served

CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 20


@contextlib.contextmanager
def headless_chromium(*, log_requests: bool = False) -> Iterator[Any]:
    """A browser; with `log_requests`, its performance log holds every request it sent."""
    chromium = shutil.which("chromium")
    require(
        chromium is not None and Path(CHROMEDRIVER).exists(),
        "no chromium and chromedriver: run ./scripts/setup-browser",
    )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    if log_requests:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def text_appears(driver: Any, element_id: str, text: str, timeout: float = WAIT_S) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        expected_conditions.text_to_be_present_in_element((By.ID, element_id), text)
    )


def until(driver: Any, check: Any, timeout: float = WAIT_S) -> Any:
    """Wait until `check(driver)` is truthy; its value. An element the page drew anew while
    `check` read it is read again (lists are redrawn as they change)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout, ignored_exceptions=[StaleElementReferenceException])
    return wait.until(check)


def click(driver: Any, selector: str, timeout: float = WAIT_S) -> None:
    """Click the first element `selector` finds, once there is one; found again when the page
    redrew it between the finding and the click (lists are redrawn as they change)."""

    def clicked(driver: Any) -> bool:
        found = css(driver, selector)
        if found:
            found[0].click()
        return bool(found)

    until(driver, clicked, timeout)


def open_page(driver: Any, served: Served, via: str | None = None) -> None:
    """Open the served page with its token in the URL's fragment, and wait until the page is
    connected (it has taken the token and left the fragment). `via`: another address that
    reaches the server (a proxy's), instead of its own."""
    driver.get(f"{via or served.url}/#token={served.token}")
    text_appears(driver, "status", "connected")


def shown_ids(driver: Any, variable: str = "logosShown") -> list[int]:
    """The ids of the events the page has drawn, in order: the page keeps them in
    `window.logosShown` (a run's) and `window.logosProjectShown` (a project's) for the tests
    that check each event appears once."""
    shown: list[int] = driver.execute_script(f"return window.{variable}")
    return shown


def css(driver: Any, selector: str) -> list[Any]:
    """The elements `selector` finds now (none is no error)."""
    from selenium.webdriver.common.by import By

    found: list[Any] = driver.find_elements(By.CSS_SELECTOR, selector)
    return found


WIDE = (1440, 900)
"""The window the page's tests use unless they say otherwise (a laptop's)."""
WIDTHS = {"phone": (375, 812), "tablet": (768, 1024), "wide": WIDE}
"""The widths the workspace is checked and photographed at."""
REPO = Path(__file__).resolve().parents[2]
AXE = REPO / ".cache/npm/node_modules/axe-core/axe.min.js"


@pytest.fixture(scope="session")
def chromium_session() -> Iterator[Any]:
    """One headless chromium for the whole test session (it logs the requests it sends):
    starting one costs a second, and every page test needs one."""
    with headless_chromium(log_requests=True) as driver:
        yield driver


@pytest.fixture
def browser(chromium_session: Any) -> Any:
    """The session's chromium, as a fresh one: a blank page, no storage of a previous test's
    server, the wide window, the system's light scheme, its request log read empty."""
    driver = chromium_session
    driver.get("about:blank")
    driver.delete_all_cookies()
    driver.set_window_size(*WIDE)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    driver.get_log("performance")
    return driver


def sized(driver: Any, size: tuple[int, int]) -> None:
    """The window at `size` (width, height), its layout settled."""
    driver.set_window_size(*size)
    until(driver, lambda d: d.execute_script("return window.innerWidth") == size[0])


def dark(driver: Any, on: bool = True) -> None:
    """The system's colour scheme as the page sees it (prefers-color-scheme)."""
    features = [{"name": "prefers-color-scheme", "value": "dark" if on else "light"}]
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})


def screenshots_dir() -> Path:
    """Where the page's screenshots are kept: LOGOS_SCREENSHOTS, else build/screenshots."""
    directory = Path(os.environ.get("LOGOS_SCREENSHOTS") or REPO / "build" / "screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def screenshot(driver: Any, name: str) -> Path:
    """The window as a PNG named `name` and its width, kept with the test run."""
    width = driver.execute_script("return window.innerWidth")
    path = screenshots_dir() / f"{name}-{width}.png"
    driver.save_screenshot(str(path))
    publish(path)  # the few the docs show
    return path


def serious_violations(driver: Any) -> list[str]:
    """What axe-core finds serious or critical on the page as it is now (injected by the
    driver, which the page's policy does not govern), each as `rule: where`."""
    require(AXE.exists(), "axe-core is missing: run ./scripts/setup-browser")
    driver.execute_script(AXE.read_text())
    driver.set_script_timeout(60)
    found: dict[str, Any] = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        "  .then((r) => done(r.violations), (e) => done([{id: 'axe failed', impact: 'critical',"
        "   nodes: [{target: [String(e)]}]}]));"
    )
    return [
        f"{violation['id']}: {node['target']}"
        for violation in found
        if violation["impact"] in ("serious", "critical")
        for node in violation["nodes"]
    ]


def layout_problems(driver: Any) -> list[str]:
    """What makes a page hard to read at this width: sideways scrolling, and a box that
    scrolls inside another box that scrolls."""
    problems: list[str] = driver.execute_script(
        """
        const found = [];
        const root = document.scrollingElement;
        if (root.scrollWidth > window.innerWidth + 1) {
          found.push('the page scrolls sideways: ' + root.scrollWidth + ' > ' + window.innerWidth);
        }
        const can = (value) => value === 'auto' || value === 'scroll';
        const scrolls = (node) => {
          const style = getComputedStyle(node);
          return can(style.overflowY) && node.scrollHeight > node.clientHeight + 1
            || can(style.overflowX) && node.scrollWidth > node.clientWidth + 1;
        };
        for (const node of document.querySelectorAll('body *')) {
          if (!node.offsetParent || !scrolls(node)) continue;
          for (let up = node.parentElement; up && up !== document.body; up = up.parentElement) {
            if (scrolls(up)) {
              found.push('a scroll box inside a scroll box: ' + node.id + '.' + node.className);
              break;
            }
          }
        }
        return found;
        """
    )
    return problems
