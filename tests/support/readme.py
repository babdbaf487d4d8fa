"""The commands of the README and the docs, read out of them, so that a test runs them as
written and breaks when they change; and the environment a newcomer (or an editor) runs them
in: only a PATH where `logos` and `sandboxd` are this checkout's, a HOME of the test's,
nothing else."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import signal
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from sandboxd.paths import default_state_dir, user_runtime_dir
from tests.support.docs_pages import blocks, pages
from tests.support.mcp_servers import inspector
from tests.support.processes import log_text, start_logged, stop_server, wait_started
from tests.support.sandboxd_harness import containers_of, remove_kept

REPO = Path(__file__).resolve().parents[2]
SHELL_SYNTAX = frozenset({"|", "||", "&", "&&", ";"})
REDIRECTIONS = frozenset({"<", ">", ">>", "2>", "2>&1"})


@dataclass(frozen=True)
class CodeBlock:
    heading: str
    """The last Markdown heading above the block."""
    language: str
    text: str


def code_blocks() -> list[CodeBlock]:
    """Every fenced block of the README and the docs, in order (tests/support/docs_pages)."""
    return [
        CodeBlock(found.heading, found.language, found.text)
        for page in pages()
        for found in blocks(page)
    ]


def block(heading: str, language: str) -> str:
    """The first block of `language` under the heading that starts with `heading`."""
    for found in code_blocks():
        if found.heading.startswith(heading) and found.language == language:
            return found.text
    raise AssertionError(f"the README and the docs have no ```{language} block under {heading!r}")


def shell_lines(text: str) -> list[str]:
    """A shell block's command lines: continuations joined, comments and blank lines gone."""
    joined = re.sub(r"\\\n\s*", "", text)
    lines = []
    for line in joined.splitlines():
        words = shlex.shlex(line, posix=True, punctuation_chars=False)
        words.whitespace_split = True
        words.commenters = "#"
        if list(words):
            lines.append(line.split("  #")[0].rstrip())
    return lines


def simple_commands(line: str) -> Iterator[list[str]]:
    """The words of each simple command of a shell line: split at pipes, `&&`, `&` and `;`,
    without redirections and leading NAME=VALUE assignments; `[...]` optional parts kept."""
    line = _without_substitutions(line)
    lexer = shlex.shlex(line.replace("[", "").replace("]", ""), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    skip_next = False
    for word in [*lexer, ";"]:
        if skip_next:
            skip_next = False
        elif word in REDIRECTIONS:
            skip_next = True
        elif word in SHELL_SYNTAX:
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words.pop(0)
            if words:
                yield words
            words = []
        else:
            words.append(word)


def _without_substitutions(line: str) -> str:
    """The line with each command substitution `$(…)`, however nested, as one word."""
    while (start := line.find("$(")) != -1:
        depth, end = 0, start + 1
        for end in range(start + 1, len(line)):
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            if depth == 0:
                break
        line = line[:start] + "OUTPUT" + line[end + 1 :]
    return line


def readme_commands(program: str) -> list[list[str]]:
    """Every command of `program` the shell blocks of the README and the docs show (also after
    `claude mcp add NAME --`), and those their MCP client configurations launch (JSON, TOML)."""
    found = []
    for code in code_blocks():
        if code.language == "sh":
            for line in shell_lines(code.text):
                for words in simple_commands(line):
                    if words[:3] == ["claude", "mcp", "add"] and "--" in words:
                        words = words[words.index("--") + 1 :]
                    if words[0] == program:
                        found.append(words)
        elif code.language in ("json", "toml"):
            found.extend(
                [server["command"], *server["args"]]
                for server in mcp_client_servers(code).values()
                if server.get("command") == program
            )
    return found


def mcp_client_servers(code: CodeBlock) -> dict[str, dict[str, Any]]:
    """The servers an MCP client configuration of the README names (Cursor's and Claude
    Code's `mcpServers`, VS Code's `servers`, Codex's `mcp_servers`); {} for another block."""
    try:
        parsed = json.loads(code.text) if code.language == "json" else tomllib.loads(code.text)
    except (ValueError, tomllib.TOMLDecodeError):
        return {}
    for key in ("mcpServers", "servers", "mcp_servers"):
        if isinstance(parsed.get(key), dict):
            servers: dict[str, dict[str, Any]] = parsed[key]
            return servers
    return {}


def cursor_config() -> dict[str, dict[str, Any]]:
    """The `mcpServers` the docs give Cursor and Claude Code's `.mcp.json`."""
    for code in code_blocks():
        if code.heading == "Tell the editor how to start them" and code.language == "json":
            servers = mcp_client_servers(code)
            if "sandboxd" in servers and "url" not in servers["sandboxd"]:
                return servers
    raise AssertionError("the docs have no mcpServers block for Cursor")


def command_bin(directory: Path) -> Path:
    """A directory holding `logos` and `sandboxd`: this checkout's, run by this Python, as an
    installed package's scripts are."""
    directory.mkdir(exist_ok=True)
    for program in ("logos", "sandboxd"):
        script = directory / program
        python, checkout = shlex.quote(sys.executable), shlex.quote(str(REPO))
        script.write_text(f'#!/bin/sh\nPYTHONPATH={checkout} exec {python} -m {program} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return directory


def newcomer_env(bin_dir: Path, home: Path, **more: str) -> dict[str, str]:
    """What an editor (or a fresh login) gives a command: PATH (`bin_dir` first), HOME, the
    locale; no XDG_RUNTIME_DIR, XDG_STATE_HOME or config, no provider key. `more` adds
    variables."""
    path = os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}
    for passed in ("HF_ENDPOINT", "HF_HOME"):  # WHY: no test reaches the real Hub (conftest)
        env[passed] = os.environ[passed]
    return {**env, **more}


def private_default_socket(home: Path) -> Path:
    """sandboxd's default socket for a user whose HOME is `home`; skips on a machine with a
    user runtime directory (/run/user/UID), where the default is the real user's socket and a
    test's daemon would take it."""
    runtime_dir = user_runtime_dir()
    if runtime_dir is not None:
        pytest.skip(
            f"sandboxd's default socket here is in {runtime_dir}: a daemon started there would "
            "be this user's, not the test's"
        )
    return home / ".sandboxd" / "daemon.sock"


def readme_line(heading: str, starts_with: str, language: str = "sh") -> str:
    """The command line of a block under `heading` that starts with `starts_with`."""
    for code in code_blocks():
        if code.heading.startswith(heading) and code.language == language:
            for line in shell_lines(code.text):
                if line.startswith(starts_with):
                    return line
    raise AssertionError(f"the docs show no `{starts_with}…` under {heading!r}")


def run_line(line: str, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A README line run to its end by bash, as a user types it, stdin closed."""
    return subprocess.run(
        ["bash", "-c", line],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@contextlib.contextmanager
def serving_line(
    line: str,
    env: Mapping[str, str],
    cwd: Path,
    ready: Callable[[str], bool],
    what: str,
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A README line that serves (`sandboxd serve`, `logos serve`), started by bash in the
    background (exec'd: the shell becomes the server), its output in a log; yields once
    `ready(output)`, stopped with SIGTERM after."""
    name = re.sub(r"[^\w.]+", "-", what)[:40]
    log = cwd / f"{name}-{time.monotonic_ns()}.log"
    proc = start_logged(["bash", "-c", f"exec {line}"], log=log, cwd=cwd, env=env)
    try:
        wait_started(proc, what, lambda: log_text(log), lambda: ready(log_text(log)), 60)
        yield proc, log
    finally:
        if proc.poll() is None:
            stop_server(proc, what, lambda: log_text(log), signal.SIGTERM, 60)


@contextlib.contextmanager
def readme_daemon(docker_client: Any, env: Mapping[str, str], cwd: Path) -> Iterator[None]:
    """The docs' `sandboxd serve`, as written, in `env`: it must listen on the default
    socket clients look at without XDG_RUNTIME_DIR (under HOME here); its containers are
    removed after, whatever happens."""
    socket_path = private_default_socket(Path(env["HOME"]))
    line = readme_line("Build the image and start the daemon", "sandboxd serve").rstrip(" &")
    with serving_line(line, env, cwd, lambda out: "serving on" in out, "sandboxd serve") as (
        proc,
        log,
    ):
        served = re.findall(r"serving on (\S+)", log_text(log))[0]
        assert served == str(socket_path), (
            f"the README's `sandboxd serve` listens on {served}, not on {socket_path}, where "
            "its clients look in an editor's environment"
        )
        try:
            yield
        finally:
            pid = proc.pid
            if proc.poll() is None:
                stop_server(proc, "sandboxd serve", lambda: "", signal.SIGTERM, 60)
            for container in containers_of(docker_client, pid):
                with contextlib.suppress(Exception):
                    container.remove(force=True)
            remove_kept(docker_client, default_state_dir(env))


def read_until(proc: subprocess.Popen[str], pattern: str, timeout: float = 60) -> str:
    """What `proc` printed on stdout up to (and with) the first line matching `pattern`."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern + r".*\n", seen)
        if found:
            return seen[: found.end()]
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s; printed:\n{seen}")


README_PROJECT = "/home/me/project"
"""The project directory the docs' MCP client configurations name."""


def editor_entry(name: str, project: Path, *more_args: str) -> dict[str, Any]:
    """The README's Cursor entry of server `name`, for `project` (and `more_args` after its
    own), as an editor reads it."""
    entry = dict(cursor_config()[name])
    args = [arg.replace(README_PROJECT, str(project)) for arg in entry["args"]]
    assert args != entry["args"], f"the README's {name} entry names no {README_PROJECT}"
    return {**entry, "args": [*args, *more_args]}


def editor_launch(
    entry: Mapping[str, Any], env: Mapping[str, str], cwd: Path
) -> StdioServerParameters:
    """What an editor starts for `entry`: its command and args, in the editor's environment
    (the MCP SDK adds only its own defaults: HOME, LOGNAME, PATH, SHELL, TERM, USER)."""
    return StdioServerParameters(
        command=entry["command"], args=list(entry["args"]), env=dict(env), cwd=cwd
    )


def inspect_entry(
    entry: Mapping[str, Any], env: Mapping[str, str], cwd: Path, *method: str
) -> subprocess.CompletedProcess[str]:
    """The MCP Inspector's CLI on `entry`, read from an mcpServers file as an editor reads its
    config (`--config FILE --server NAME`); the Inspector (and so the server, which gets the
    Inspector's default environment) runs in `env`."""
    config = cwd / f"mcp-{time.monotonic_ns()}.json"
    config.write_text(json.dumps({"mcpServers": {"server": dict(entry)}}))
    return subprocess.run(
        [inspector(), "--cli", "--config", str(config), "--server", "server", *method],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(env),
    )
