"""The command a project's own files give for what a how-to question asks (run its tests,
build it, run it, install it), read from what the run's commands printed: a Makefile's
targets, package.json's scripts, Cargo.toml, go.mod, pyproject.toml's tools.

Measured with the default 0.5B model on a C project whose Makefile has a `test:` target: it
read the Makefile and answered "execute the `test` command". A person who asks how to run the
tests wants the command to type, and the Makefile names it: `make test`. `commands_for` finds
those commands; the `project_commands` check asks the answer again, told them, when it names
none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from logos.result import Result

Purpose = Literal["test", "build", "run", "install"]


@dataclass(frozen=True)
class ProjectCommand:
    command: str
    """As a person types it: `make test`."""
    source: str
    """Where it comes from, as a note says it: "the Makefile's test target"."""

    def named_in(self, answer: str) -> bool:
        """Whether `answer` gives this command (its program and first word: `go test`
        for `go test ./...`)."""
        words = r"\s+".join(map(re.escape, self.command.split()[:2]))
        return re.search(rf"(?<![\w-]){words}(?![\w-])", answer) is not None


_HOW = re.compile(r"\bhow (?:do|can|should|would|to)\b|\b(?:what|which) command\b", re.IGNORECASE)
"""A question of how to do something, not "how many lines…"."""
_PURPOSES: tuple[tuple[Purpose, re.Pattern[str]], ...] = (
    ("test", re.compile(r"\btest(?:s|ing| suite)?\b", re.IGNORECASE)),
    ("build", re.compile(r"\b(?:build|compile)\b", re.IGNORECASE)),
    ("install", re.compile(r"\binstall\b|\bset (?:it )?up\b", re.IGNORECASE)),
    ("run", re.compile(r"\b(?:run|start|launch)\b", re.IGNORECASE)),
)
"""In this order: "how do I run the tests" asks for the tests."""


def asked_purpose(task: str) -> Purpose | None:
    """What a how-to question asks the command for; None for any other task."""
    if not _HOW.search(task):
        return None
    return next((purpose for purpose, asked in _PURPOSES if asked.search(task)), None)


def commands_for(task: str, results: Sequence[Result]) -> tuple[ProjectCommand, ...]:
    """The commands the project's files, as the run printed them, give for what `task`
    asks; none when it is not a how-to question or no file read says."""
    purpose = asked_purpose(task)
    if purpose is None:
        return ()
    found: list[ProjectCommand] = []
    for name, printed in files_printed(results, _READERS):
        found += [c for c in _READERS[name](printed, purpose) if c not in found]
    return tuple(found)


def files_printed(results: Sequence[Result], names: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Each of `names` that a command of `results` names (as a whole file name), with what
    that command printed, when it succeeded and printed something: the project's files the
    run read, in the order it read them."""
    for result in results:
        if not (result.ok and result.stdout.strip()):
            continue
        for name in names:
            if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", result.command):
                yield name, result.stdout


def _makefile(text: str, purpose: Purpose) -> list[ProjectCommand]:
    targets = {
        name
        for match in re.finditer(r"^([A-Za-z0-9_][\w.\- ]*?)\s*::?(?!=)", text, re.MULTILINE)
        for name in match.group(1).split()
    }
    wanted = {
        "test": ("test", "tests", "check"),
        "build": ("build", "all"),
        "run": ("run", "start", "serve"),
        "install": ("install",),
    }[purpose]
    return [
        ProjectCommand(
            "make" if target == "all" else f"make {target}", f"the Makefile's {target} target"
        )
        for target in wanted
        if target in targets
    ]


def _package_json(text: str, purpose: Purpose) -> list[ProjectCommand]:
    if purpose == "install":
        return [ProjectCommand("npm install", "package.json")]
    block = re.search(r'"scripts"\s*:\s*\{([^}]*)\}', text)
    scripts = set(re.findall(r'"([^"]+)"\s*:', block.group(1))) if block else set()
    wanted = {"test": ("test",), "build": ("build",), "run": ("start", "dev", "serve")}[purpose]
    return [
        ProjectCommand(
            f"npm {script}" if script in ("test", "start") else f"npm run {script}",
            f"package.json's {script} script",
        )
        for script in wanted
        if script in scripts
    ]


@dataclass(frozen=True)
class _Toolchain:
    """A manifest whose toolchain has one command for each purpose (Cargo.toml, go.mod)."""

    marked: str
    """What in the file shows it is the project's own manifest."""
    commands: dict[Purpose, str]
    source: str

    def __call__(self, text: str, purpose: Purpose) -> list[ProjectCommand]:
        if not re.search(self.marked, text, re.MULTILINE):
            return []
        return [ProjectCommand(self.commands[purpose], self.source)]


_CARGO = _Toolchain(
    r"^\[package\]",
    {
        "test": "cargo test",
        "build": "cargo build",
        "run": "cargo run",
        "install": "cargo install --path .",
    },
    "Cargo.toml (a Rust crate)",
)
_GO = _Toolchain(
    r"^module\s+\S",
    {
        "test": "go test ./...",
        "build": "go build ./...",
        "run": "go run .",
        "install": "go install .",
    },
    "go.mod (a Go module)",
)


def _python_project(text: str, purpose: Purpose) -> list[ProjectCommand]:
    if purpose == "test":
        found = []
        if re.search(r"\[tool\.tox\b|\[tox\b", text):
            found.append(ProjectCommand("tox", "its tox settings"))
        if re.search(r"\bpytest\b", text):
            found.append(ProjectCommand("pytest", "its pytest settings"))
        return found
    if purpose == "install" and re.search(r"^\[(?:project|build-system|metadata)\]", text, re.M):
        return [ProjectCommand("pip install .", "its Python package settings")]
    if purpose == "run":
        scripts = re.search(r"^\[project\.scripts\]\n((?:[^\[\n].*\n?)*)", text, re.MULTILINE)
        names = re.findall(r"^\s*([\w.-]+)\s*=", scripts.group(1), re.M) if scripts else []
        return [ProjectCommand(name, "the command pyproject.toml installs") for name in names]
    return []


_READERS: dict[str, Callable[[str, Purpose], list[ProjectCommand]]] = {
    "Makefile": _makefile,
    "makefile": _makefile,
    "GNUmakefile": _makefile,
    "package.json": _package_json,
    "Cargo.toml": _CARGO,
    "go.mod": _GO,
    "pyproject.toml": _python_project,
    "setup.cfg": _python_project,
    "tox.ini": _python_project,
    "pytest.ini": _python_project,
}
"""The files that name a project's commands, and how each is read."""
