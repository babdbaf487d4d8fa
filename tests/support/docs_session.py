"""One docs page's blocks run as a reader runs them: in order, in a fresh copy of the
repository, with a home of the page's own and an activated virtualenv (this checkout's), a
model from the page's script (tests/support/docs_model.py), and a person at the terminal who
answers yes to each question logos asks.

Shell blocks run with bash (stopping at the first command that fails), stdin a terminal,
stdout and stderr kept apart; a line that starts `sandboxd serve` or `logos serve` in the
background is waited for until it serves. Python blocks run as a script with the
virtualenv's Python. Everything the page started (found by a variable of the page's own in
each process's environment, whatever detached itself) is stopped when the page ends, and the
containers of its daemons are removed.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxd.paths import default_state_dir
from tests.support.docs_model import answer_by_rules
from tests.support.docs_pages import REPO, Block, model_script
from tests.support.sandboxd_harness import (
    containers_of,
    remove_kept,
    remove_with_volumes,
    short_dir,
)
from tests.support.sse_server import ScriptedServer

BLOCK_TIMEOUT_S = 300.0
SERVE_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
CONFIRM_QUESTION = "[y]es  [n]o  [a]lways"
BACKGROUND_SERVER = re.compile(r"^\s*(sandboxd serve|logos serve)\b[^#]*&\s*(#.*)?$", re.MULTILINE)
PAGE_MARK = "LOGOS_DOCS_PAGE"
DOCS_KEY = "docs-key"


@dataclass(frozen=True)
class Outcome:
    """How a block ended."""

    status: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"exit status {self.status}\n--- stdout ---\n{self.stdout[-4000:]}\n"
            f"--- stderr ---\n{self.stderr[-4000:]}"
        )


def copy_of_the_repository(destination: Path) -> Path:
    """The working tree's files (tracked, and new ones not ignored), as a fresh clone has
    them plus what is not committed yet."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    names = [os.fsdecode(item) for item in listed if item]
    files = [name for name in names if (REPO / name).is_file()]
    destination.mkdir(parents=True, exist_ok=True)
    # WHY one cp rather than a copy per file: 700 copies from Python cost half a second of
    # CPU, and the docs tests copy the repository once per page.
    subprocess.run(
        ["cp", "--preserve=mode,timestamps", "--parents", "-t", str(destination), "--", *files],
        cwd=REPO,
        check=True,
    )
    return destination


class PageRun:
    """The places, the environment and the model of one page's run; see the module
    docstring. Use with `with`."""

    def __init__(self, page: Path, *, environment: Mapping[str, str] | None = None) -> None:
        self.page = page
        self.root = short_dir("doc")
        self.home = self.root / "home"
        self.work = self.root / "logos"
        self.logs = self.root / "logs"
        self.mark = uuid.uuid4().hex
        self.model = ScriptedServer()
        self._extra = dict(environment or {})
        self._count = 0

    def __enter__(self) -> PageRun:
        self.home.mkdir()
        self.logs.mkdir()
        copy_of_the_repository(self.work)
        cache = REPO / ".cache"
        if cache.exists():  # the models and tools ./scripts/test fetched, as in a developer's clone
            (self.work / ".cache").symlink_to(cache.resolve())
        git = ["git", "-c", "user.name=reader", "-c", "user.email=reader@example.org"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a clone"]):
            subprocess.run([*git, *args], cwd=self.work, check=True, capture_output=True)
        self.model.__enter__()
        self.model.answer_with(answer_by_rules(model_script(self.page)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop_everything()
        finally:
            self.model.__exit__(*exc_info)

    @property
    def env(self) -> dict[str, str]:
        """A reader's terminal: an activated virtualenv holding this checkout's logos and
        sandboxd, a home of the page's own, a provider key that reaches the page's model."""
        venv = Path(sys.executable).parent
        env = {
            "PATH": os.pathsep.join([str(venv), "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin"]),
            "VIRTUAL_ENV": str(venv.parent),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "USER": os.environ.get("USER", "root"),
            "COLUMNS": "100",
            "HF_ENDPOINT": os.environ["HF_ENDPOINT"],  # WHY: no test reaches the real Hub
            "ANTHROPIC_API_KEY": DOCS_KEY,
            "ANTHROPIC_BASE_URL": self.model.base_url,
            "OPENAI_API_KEY": DOCS_KEY,
            "OPENAI_BASE_URL": self.model.base_url + "/v1",
            PAGE_MARK: self.mark,
        }
        return {**env, **self._extra}

    def path_of(self, title: str) -> Path:
        """Where a file block titled `title` goes: `~` is the home, the rest is relative to
        the directory the commands run in."""
        if title == "~" or title.startswith("~/"):
            return self.home / title[2:]
        return self.work / title

    def write(self, block: Block) -> Path:
        assert block.title is not None
        path = self.path_of(block.title)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text + "\n", encoding="utf-8")
        return path

    def run_shell(self, block: Block) -> Outcome:
        """The block run by bash as a reader types it, a yes to each question logos asks."""
        assert not re.search(r"\bpip install\b", block.text), (
            f"{block.where}: a block that installs must be marked not run: here it would "
            "install into the tests' own virtualenv"
        )
        status, stdout, stderr = 0, "", ""
        for segment in _segments(block.text):
            outcome = self._run(["bash", "-e", "-o", "pipefail", "-c", segment], block)
            status, stdout, stderr = (
                outcome.status,
                stdout + outcome.stdout,
                stderr + outcome.stderr,
            )
            if status != 0:
                break
        return Outcome(status, stdout, stderr)

    def run_python(self, block: Block) -> Outcome:
        """The block saved as a script and run by the virtualenv's Python."""
        script = self.root / f"example_{block.line}.py"
        script.write_text(block.text + "\n", encoding="utf-8")
        return self._run([sys.executable, str(script)], block)

    def _run(self, command: list[str], block: Block) -> Outcome:
        self._count += 1
        out, err = (self.logs / f"{self._count}.{name}" for name in ("out", "err"))
        keyboard, terminal = pty.openpty()
        try:
            with out.open("wb") as stdout, err.open("wb") as stderr:
                proc = subprocess.Popen(
                    command,
                    cwd=self.work,
                    env=self.env,
                    stdin=terminal,
                    stdout=stdout,
                    stderr=stderr,
                    # WHY not a session of its own: its leader would take the terminal as its
                    # controlling one, and its end would hang up what it left in the background.
                    process_group=0,
                )
            answered = 0
            deadline = time.monotonic() + BLOCK_TIMEOUT_S
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    raise AssertionError(
                        f"{block.where}: still running after {BLOCK_TIMEOUT_S:g} s\n"
                        + Outcome(-1, _read(out), _read(err)).describe()
                    )
                asked = _read(err).count(CONFIRM_QUESTION)
                if asked > answered:
                    os.write(keyboard, b"y\n")
                    answered += 1
                time.sleep(0.05)
        finally:
            os.close(keyboard)
            os.close(terminal)
        servers = len(BACKGROUND_SERVER.findall(command[-1])) if block.is_shell else 0
        self._wait_serving(servers, out, err, block)
        return Outcome(proc.returncode, _read(out), _read(err))

    def _wait_serving(self, servers: int, out: Path, err: Path, block: Block) -> None:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while (_read(out) + _read(err)).count("serving on") < servers:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{block.where}: what it starts in the background did not serve within "
                    f"{SERVE_TIMEOUT_S:g} s\n" + Outcome(0, _read(out), _read(err)).describe()
                )
            time.sleep(0.1)

    def page_processes(self) -> list[int]:
        """The processes the page started, wherever they went (daemons, servers, clusters)."""
        found = []
        needle = f"{PAGE_MARK}={self.mark}".encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                        found.append(int(entry))
        return found

    def stop_everything(self, docker_client: Any | None = None) -> None:
        """SIGTERM what the page started (daemons clean up after themselves), SIGKILL what is
        left after STOP_TIMEOUT_S, then remove whatever containers its daemons left."""
        started = self.page_processes()
        daemons = [pid for pid in started if b"sandboxd" in _cmdline(pid)]
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.page_processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.page_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if docker_client is not None:
            for pid in daemons:
                for container in containers_of(docker_client, pid):
                    with contextlib.suppress(Exception):
                        remove_with_volumes(container)
            # A stopped daemon keeps its sandboxes for the next one on its state directory.
            remove_kept(docker_client, default_state_dir(self.env))


def _segments(script: str) -> list[str]:
    """A shell block cut after each line that starts a server in the background: a reader
    types the next line once the server says it serves, and so does the run."""
    segments, current = [], []
    for line in script.splitlines():
        current.append(line)
        if BACKGROUND_SERVER.match(line):
            segments.append("\n".join(current))
            current = []
    if any(line.strip() for line in current):
        segments.append("\n".join(current))
    return segments


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@contextlib.contextmanager
def page_run(page: Path, docker_client: Any | None = None, **environment: str) -> Iterator[PageRun]:
    """A PageRun, its processes stopped and its daemons' containers removed after."""
    run = PageRun(page, environment=environment)
    with run:
        try:
            yield run
        finally:
            run.stop_everything(docker_client)
