"""Real headless chromium (Debian's, driven through chromedriver) for the page's tests."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
    """Wait until `check(driver)` is truthy; its value."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(check)


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


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium for one test, which logs the requests it sends."""
    with headless_chromium(log_requests=True) as driver:
        yield driver
