"""Drive the real `logos` command in a subprocess, as a user would: isolated home, real
environment variables, a pseudo-terminal when a test needs one. The root conftest registers
its `home` fixture.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import running
from tests.support.sse_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
ANSI_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")
SGR = re.compile(r"\x1b\[[0-9;]*m")
_PROVIDER_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "SANDBOXD_SOCKET",
    "NO_COLOR",
    "FORCE_COLOR",
    "VISUAL",
    "EDITOR",
    "CI",
)


@dataclass(frozen=True)
class Home:
    """A user's private places, all under one temporary directory."""

    root: Path
    work: Path
    """The directory the command runs in."""

    @property
    def state(self) -> Path:
        return self.root / "state" / "logos"

    @property
    def config_file(self) -> Path:
        return self.root / "config" / "logos" / "config.toml"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARIABLES}
        env.update(
            HOME=str(self.root / "home"),
            XDG_STATE_HOME=str(self.root / "state"),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_RUNTIME_DIR=str(self.root / "runtime"),
            PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(":"),
            COLUMNS="100",
        )
        env.update(extra)
        return env

    def runs(self) -> list[Path]:
        directory = self.state / "runs"
        return sorted(directory.glob("*.jsonl")) if directory.exists() else []

    def only_run(self) -> Path:
        runs = self.runs()
        assert len(runs) == 1, runs
        return runs[0]

    def run_records(self) -> list[dict[str, Any]]:
        """The records of the only run so far: its header, its steps, its end."""
        return read_jsonl(self.only_run())

    def audit(self) -> list[dict[str, Any]]:
        return read_jsonl(self.state / "audit.jsonl")


def make_home(tmp_path: Path) -> Home:
    for name in ("home", "state", "config", "runtime", "work"):
        (tmp_path / name).mkdir()
    return Home(tmp_path, tmp_path / "work")


@pytest.fixture
def home(tmp_path: Path) -> Home:
    """A user's private places (home, state, config, runtime and the work directory) under
    the test's temporary directory."""
    return make_home(tmp_path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def logos(
    args: Sequence[str],
    home: Home,
    env: Mapping[str, str],
    *,
    stdin: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`python -m logos ARGS` with pipes for stdin, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "logos", *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=home.work,
        timeout=timeout,
    )


@contextlib.contextmanager
def running_logos(
    args: Sequence[str], home: Home, env: Mapping[str, str]
) -> Iterator[subprocess.Popen[str]]:
    """`python -m logos ARGS` in the background, for a test that acts while it runs (see
    `running`)."""
    with running([sys.executable, "-m", "logos", *args], home.work, env) as proc:
        yield proc


class PtySession:
    """`python -m logos ARGS` on a pseudo-terminal: stdin, stdout and stderr are the terminal."""

    def __init__(
        self, args: Sequence[str], home: Home, env: Mapping[str, str], cols: int = 100
    ) -> None:
        self._start([sys.executable, "-m", "logos", *args], home, env, cols)

    @classmethod
    def of(
        cls, argv: Sequence[str], home: Home, env: Mapping[str, str], cols: int = 100
    ) -> PtySession:
        """Any program on a pseudo-terminal, in the home's work directory."""
        session = cls.__new__(cls)
        session._start(argv, home, env, cols)
        return session

    def _start(self, argv: Sequence[str], home: Home, env: Mapping[str, str], cols: int) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm-256color"},
            cwd=home.work,
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""
        self._seen = 0

    def read_available(self, wait_s: float = 0.05) -> bool:
        """Read what the terminal shows now; False once the program has closed it."""
        readable, _, _ = select.select([self.master], [], [], wait_s)
        if not readable:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the terminal has exited
            return False
        if not data:
            return False
        self.output += data.decode(errors="replace")
        return True

    def expect(self, pattern: str, timeout: float = 30) -> str:
        """Wait until `pattern` (a regex) appears in the plain text after the last match."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            plain = strip_ansi(self.output)
            match = regex.search(plain, self._seen)
            if match:
                self._seen = match.end()
                return plain[match.start() : match.end()]
            if time.monotonic() > deadline or not self.read_available(0.1):
                if match is None and self.proc.poll() is not None:
                    self.read_available(0)
                raise AssertionError(
                    f"{pattern!r} did not appear within {timeout} s; the terminal shows:\n"
                    + strip_ansi(self.output)
                )

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.read_available(0.1) and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                while self.read_available(0.05):
                    pass
                break
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does: every later write to it fails
        (EIO), and the program gets SIGHUP."""
        os.close(self.master)
        self.master = -1
        self.proc.send_signal(signal.SIGHUP)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


def strip_ansi(text: str) -> str:
    return ANSI_ESCAPE.sub("", text).replace("\r", "")


def run_task(
    home: Home, server: ScriptedServer, *args: str, model: str = "m", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`logos --model MODEL --yes ARGS` on the scripted model, as most tests run a task."""
    argv = ["--model", model, "--yes", *args]
    return logos(argv, home, openai_env(home, server), timeout=timeout)


def doctor(
    args: Sequence[str], home: Home, server: ScriptedServer
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """`logos doctor ARGS` on the scripted model: the command, and what it said of each
    check by name ("ok", "FAIL" or "skip")."""
    done = logos(["doctor", *args], home, openai_env(home, server))
    return done, {line.split()[1]: line.split()[0] for line in done.stdout.splitlines()}


def openai_env(home: Home, server: ScriptedServer, **extra: str) -> dict[str, str]:
    return home.env(OPENAI_BASE_URL=server.base_url + "/v1", OPENAI_API_KEY="test-key", **extra)


def anthropic_env(home: Home, server: ScriptedServer, **extra: str) -> dict[str, str]:
    return home.env(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="test-key", **extra)


def sent_messages(server: ScriptedServer, index: int) -> list[dict[str, Any]]:
    """The conversation of the `index`-th model request (system prompt left out)."""
    body = server.requests[index].json
    return [m for m in body["messages"] if m["role"] != "system"]
