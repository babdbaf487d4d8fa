"""Family `page`: how the web page opens, and how it copes with a long run.

- load: the real `logos serve` (`bench.serve_server`, its scripted model) holding a project
  of two agents whose captain answered, and a few finished runs, opened `plan.page_loads` times in
  headless chromium: first paint, first contentful paint, DOM ready, load, and ready (the
  page connected, its lists drawn: what a person waits for), each from navigation start;

A saved run of `plan.page_steps` model turns, each with one command whose output is an equal
share of `plan.page_output_bytes`, is written as a real trajectory and opened with the real
`logos view` (its server in a child process) in headless chromium. The page receives every
event at once (a replay, the heaviest case: a live run arrives at the model's pace) and
draws it through the same viewer as a live run.

- render time: from the page's navigation start to the run's end drawn in its timeline;
- frames: a requestAnimationFrame loop, injected before the page's own scripts (through the
  DevTools protocol: the page's policy forbids inline script), records the time between
  frames until the run's end is drawn (which also times the render, to a frame); the
  longest is how long the page was unresponsive at most.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.daemon import BenchSetupError
from bench.plan import Plan
from bench.processes import stop_process
from bench.results import MEASURE_HEADERS, Section, Series, SeriesGroup, Target, measure_row, ms
from bench.serve import bench_server
from logos.agent.steps import StepMessage
from logos.jsonl import utc_now
from logos.providers.base import Usage
from logos.records.events import RunSummary
from logos.records.trajectory import RunHeader, TrajectoryWriter
from logos.result import Result

FAMILY = "page"
TITLE = "the web page: opening the workspace, and drawing a saved run of 1,000 steps (10 MB)"
TARGET_LONGEST_FRAME_MS = 200.0
"""The page may be slow to finish, never frozen: no frame longer than this."""
CHROMEDRIVER = "/usr/bin/chromedriver"
_OPEN = re.compile(r"logos view: open (\S+)")
_REPO = Path(__file__).resolve().parents[1]
_RENDER_TIMEOUT_S = 600.0
_FRAME_PROBE = """
window.benchFrames = [];
window.benchDrawn = null;
(function probe(last) {
  requestAnimationFrame((now) => {
    window.benchFrames.push(now - last);
    const end = document.getElementById("run-end");
    if (end && end.textContent.includes("finished")) window.benchDrawn = now;
    else probe(now);
  });
})(performance.now());
"""


async def run(plan: Plan) -> Section:
    chromium = shutil.which("chromium")
    if chromium is None or not Path(CHROMEDRIVER).exists():
        raise BenchSetupError("no chromium and chromedriver: run ./scripts/setup-browser")
    problems: list[str] = []
    async with bench_server("logos-bench-page-serve-", problems) as (client, _):
        await _seed(client)
        url = f"{client.base_url}/#token={client.headers['authorization'].split()[-1]}"
        with _browser(chromium) as driver:
            loads = [_load(driver, url) for _ in range(plan.page_loads)]
    work = Path(tempfile.mkdtemp(prefix="logos-bench-page-"))
    try:
        saved = _write_run(work / "run.jsonl", plan.page_steps, plan.page_output_bytes)
        size = saved.stat().st_size
        with _viewing(saved) as url, _browser(chromium) as driver:
            render_s, frames_s, events = _draw(driver, url)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    longest = max(frames_s)
    load_rows = tuple(
        measure_row(f"open the workspace: {label}", [load[key] for load in loads])
        for label, key in LOAD_MEASURES
    )
    rows = (
        *load_rows,
        (
            f"{plan.page_steps} steps, {plan.page_output_bytes / 1e6:.0f} MB of output: drawn",
            str(events),
            ms(render_s),
            "",
            f"trajectory {size / 1e6:.1f} MB",
        ),
        measure_row("frames while it draws", frames_s, f"longest {ms(longest)}"),
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=MEASURE_HEADERS,
        rows=rows,
        groups=(SeriesGroup("the page: time between frames", (Series("frame", frames_s),)),),
        targets=(
            Target(
                f"longest frame ≤ {TARGET_LONGEST_FRAME_MS:g} ms",
                ms(longest),
                longest * 1000 <= TARGET_LONGEST_FRAME_MS,
            ),
        ),
        notes=(
            "headless chromium on this machine, served by `logos view` over loopback; every "
            "event arrives at once (a replay); long outputs are folded to head and tail",
        ),
        raw={
            "render_s": render_s,
            "frames_s": list(frames_s),
            "events": events,
            "loads": loads,
            "problems": problems,
        },
    )


LOAD_MEASURES = (
    ("first paint", "first_paint_s"),
    ("first contentful paint", "first_contentful_paint_s"),
    ("DOM ready", "dom_ready_s"),
    ("load", "load_s"),
    ("ready (connected, lists drawn)", "ready_s"),
)
"""(label, key) of what one load measures, each from navigation start."""
_READY_PROBE = """
window.benchReady = null;
(function probe() {
  requestAnimationFrame(() => {
    const status = document.getElementById("status");
    const runs = document.getElementById("run-list");
    if (status && status.textContent === "connected" && runs && runs.children.length) {
      window.benchReady = performance.now();
    } else probe();
  });
})();
"""


async def _seed(client: httpx.AsyncClient) -> None:
    """What a workspace holds: a project of two agents that answered once, and finished runs."""
    made = await client.post("/v1/projects", json={"name": "bench", "goal": "measure the page"})
    project = made.json()["id"]
    for name, role in (("captain", "captain"), ("talon", "talon")):
        body = {"name": name, "role": role, "approval": "auto", "runner": {"kind": "local"}}
        await client.post(f"/v1/projects/{project}/agents", json=body)
    await client.post(f"/v1/projects/{project}/messages", json={"text": "hello\n@talon too"})
    for _ in range(SEEDED_RUNS):
        await client.post("/v1/runs", json={"prompt": "hello", "approval": "never-run"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runs = (await client.get("/v1/runs")).json()["runs"]
        busy = (await client.get(f"/v1/projects/{project}")).json()["status"] != "idle"
        if not busy and all(run["status"] != "running" for run in runs):
            return
        await anyio.sleep(0.05)
    raise BenchSetupError("the seeded runs and project did not finish within 30 s")


SEEDED_RUNS = 5


def _load(driver: Any, url: str) -> dict[str, float]:
    """Open the page afresh and time it (seconds from navigation start)."""
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    probe = driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": _READY_PROBE}
    )
    try:
        driver.get(url)
        deadline = time.monotonic() + 60
        while driver.execute_script(
            "return window.benchReady === null || performance.getEntriesByType('paint').length < 2"
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the page was not ready (and painted) within 60 s")
            time.sleep(0.02)
        timing: dict[str, float] = driver.execute_script(
            "const nav = performance.getEntriesByType('navigation')[0];"
            "const paint = Object.fromEntries(performance.getEntriesByType('paint')"
            "  .map((entry) => [entry.name, entry.startTime]));"
            "return {first_paint_s: paint['first-paint'] / 1000,"
            "  first_contentful_paint_s: paint['first-contentful-paint'] / 1000,"
            "  dom_ready_s: nav.domContentLoadedEventEnd / 1000, load_s: nav.loadEventEnd / 1000,"
            "  ready_s: window.benchReady / 1000};"
        )
    finally:
        driver.execute_cdp_cmd(
            "Page.removeScriptToEvaluateOnNewDocument", {"identifier": probe["identifier"]}
        )
    return timing


def _write_run(path: Path, steps: int, output_bytes: int) -> Path:
    """A trajectory as `logos` writes it: `steps` turns, each a command and its result."""
    header = RunHeader(
        logos_version="bench",
        provider="openai",
        model="bench-model",
        base_url="http://127.0.0.1:1",
        runner="local",
        cwd="/",
        started_at=utc_now(),
        system_prompt="bench",
    )
    line = "a line of a command's output, about sixty characters long\n"
    per_step = max(1, output_bytes // steps)
    output = (line * (per_step // len(line) + 1))[:per_step]
    usage = Usage(input_tokens=1000, output_tokens=50)
    writer = TrajectoryWriter.create(path, header)
    try:
        writer.prompt("look at every file, one at a time")
        for turn in range(1, steps + 1):
            command = f"cat file-{turn}.txt"
            content = f"Step {turn}: reading the next file.\n<cmd>{command}</cmd>\n"
            writer.step(StepMessage("assistant", content, usage=usage))
            result = Result(command, stdout=output, exit_code=0, duration_s=0.01)
            writer.step(StepMessage("result", f"<result>{turn}</result>", results=(result,)))
        writer.step(StepMessage("assistant", "Every file read.", usage=usage))
        summary = RunSummary(stop_reason="final", turns=steps + 1, usage=usage, wall_s=1.0)
        writer.done(summary, model=header.model)
    finally:
        writer.close()
    return path


@contextlib.contextmanager
def _viewing(saved: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "logos", "view", str(saved), "--port", "0"],
        cwd=_REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = _OPEN.search(line)
        if found is None:
            raise BenchSetupError(f"logos view did not start: {line}{proc.stderr.read()}")
        yield found.group(1)
    finally:
        stop_process(proc)


@contextlib.contextmanager
def _browser(chromium: str) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,1000")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _draw(driver: Any, url: str) -> tuple[float, tuple[float, ...], int]:
    """(navigation start → the run's end drawn, the gaps between frames, events drawn)."""
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _FRAME_PROBE})
    driver.get(url)
    deadline = time.monotonic() + _RENDER_TIMEOUT_S
    while True:
        drawn = driver.execute_script("return window.benchDrawn")
        if drawn is not None:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the page did not draw the run within {_RENDER_TIMEOUT_S:g} s")
        time.sleep(0.05)
    frames: list[float] = driver.execute_script("return window.benchFrames")
    events: int = driver.execute_script("return window.logosShown.length")
    return float(drawn) / 1000, tuple(frame / 1000 for frame in frames), events
