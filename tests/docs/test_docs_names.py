"""No drift: every module, file, entry point, command and flag that the README, the docs and
the package docstrings name exists (`logos/agent/loop.py`, `logos.agent.loop.run`,
`scripts/test`, the console scripts, `logos serve --port`, `--allow-host`)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from logos.cli.arguments import UsageError, build_parser, with_command
from sandboxd.cli import build_parser as sandboxd_parser
from tests.support.docs_pages import REPO, pages
from tools.docs.cli_reference import command_words

PATH = re.compile(
    r"(?<![\w./~-])((?:logos|sandboxd|tests|scripts|tools|bench|examples|prompts|docs)/[\w./*-]*\w)"
)
DOTTED = re.compile(r"(?<![\w./-])((?:logos|sandboxd)(?:\.\w+)+)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"^(--?[a-z][\w-]*)(?:[ =].*)?$")
OTHER_TOOLS_FLAGS = frozenset(
    {
        "--no-deps",  # pip's
        "--transport",  # claude mcp add's
        "--header",  # claude mcp add's
        "--node-ip-address",  # ray start's
        "--strict",  # mkdocs build's
        "-p",  # mkdir's
        "-c",  # python's and bash's
    }
)
"""Flags the docs name that belong to other programs."""
MADE_WHEN_RUN = ("bench/out/",)
"""Where a run writes (gitignored): named by the docs, absent from a clone."""
FILE_SUFFIXES = frozenset({"md", "py", "toml", "json", "jsonl", "sock", "log", "txt", "png"})
ENTRY_POINT_GROUPS = frozenset({"logos.sandboxes"})
"""Names of entry-point groups (pyproject.toml), not modules."""


def _docstrings() -> Iterator[tuple[str, str]]:
    """Each package's docstring (its `__init__.py`), with where it is."""
    for package in ("logos", "sandboxd"):
        for init in sorted((REPO / package).rglob("__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            if doc:
                yield str(init.relative_to(REPO)), doc


def _texts() -> list[tuple[str, str]]:
    found = [(str(page.relative_to(REPO)), page.read_text(encoding="utf-8")) for page in pages()]
    return found + list(_docstrings())


TEXTS = _texts()


def _exists(path: str) -> bool:
    if path.startswith(MADE_WHEN_RUN):
        return True
    return any(REPO.glob(path.rstrip("/.")))


def test_every_file_and_directory_named_exists() -> None:
    missing = [
        f"{where}: {path}"
        for where, text in TEXTS
        for path in PATH.findall(text)
        if not _exists(path)
    ]
    assert not missing, "\n".join(missing)


def _resolves(dotted: str) -> bool:
    """A module, or an attribute of one (a class, a function, a constant)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            continue
        target: object = importlib.import_module(module)
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def test_every_module_and_name_mentioned_exists() -> None:
    missing = sorted(
        {
            f"{where}: {dotted}"
            for where, text in TEXTS
            for dotted in DOTTED.findall(text)
            if dotted not in ENTRY_POINT_GROUPS
            and dotted.rsplit(".", 1)[-1] not in FILE_SUFFIXES
            and not _resolves(dotted.rstrip("."))
        }
    )
    assert not missing, "\n".join(missing)


def test_every_console_script_and_script_named_exists() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"logos", "sandboxd"}
    for where, text in TEXTS:
        for script in re.findall(r"\./scripts/([\w-]+)", text):
            assert (REPO / "scripts" / script).is_file(), f"{where}: ./scripts/{script}"


def _all_flags() -> set[str]:
    flags: set[str] = set()
    for parser in (build_parser(), sandboxd_parser()):
        for words in command_words(parser):
            sub = parser
            for word in words:
                sub = next(
                    action.choices[word]
                    for action in sub._actions
                    if getattr(action, "choices", None) and word in action.choices
                )
            for action in sub._actions:
                flags.update(action.option_strings)
    return flags


def _parses(program: str, words: list[str]) -> str | None:
    """None when `program WORDS` parses, else why not."""
    said = io.StringIO()
    try:
        if program == "logos":
            build_parser().parse_args(with_command(words))
        else:
            with contextlib.redirect_stderr(said):
                sandboxd_parser().parse_args(words)
    except UsageError as exc:
        return exc.message
    except SystemExit:
        return said.getvalue().strip().splitlines()[-1]
    return None


@pytest.mark.parametrize("where,text", TEXTS, ids=[where for where, _ in TEXTS])
def test_every_command_and_flag_in_inline_code_exists(where: str, text: str) -> None:
    flags = _all_flags()
    problems = []
    for span in CODE_SPAN.findall(text):
        flag = FLAG.match(span)
        if flag is not None:
            if flag.group(1) not in flags and flag.group(1) not in OTHER_TOOLS_FLAGS:
                problems.append(f"`{span}`: no command takes {flag.group(1)}")
            continue
        program = span.split(" ", 1)[0]
        if program not in ("logos", "sandboxd") or " " not in span:
            continue
        cleaned = re.sub(r"\[[^]]*\]|…|\.\.\.|\s[<>]\s*\S+", "", span)
        try:
            words = shlex.split(cleaned)[1:]
        except ValueError:
            continue
        if words and words[0] in ("serve", "mcp") and words[-1:] == ["&"]:
            words = words[:-1]
        if not words or (
            not re.fullmatch(r"[a-z][\w-]*", words[0]) and not words[0].startswith("-")
        ):
            continue  # prose that starts with the program's name ("logos runs …")
        if words[0] in ("--help", "-h", "--version") or (
            len(words) == 1 and _is_command(program, words)
        ):
            continue  # a command named, not a command line
        why = _parses(program, words)
        if why is not None and _mentions_known_flags(why, words, flags):
            continue  # a flag named without its value, or a line cut short with …
        if why is not None and _is_command(program, words):
            problems.append(f"`{span}`: {why}")
    assert not problems, f"{where}:\n" + "\n".join(problems)


def _mentions_known_flags(why: str, words: list[str], flags: set[str]) -> bool:
    incomplete = "expected one argument" in why or "arguments are required" in why
    return incomplete and all(word in flags for word in words if word.startswith("-"))


def _is_command(program: str, words: list[str]) -> bool:
    """Whether inline words are a command line (a subcommand or a flag first) rather than a
    name in prose."""
    commands = {words[0] for words in command_words(build_parser()) if words}
    commands |= {words[0] for words in command_words(sandboxd_parser()) if words}
    return words[0].startswith("-") or words[0] in commands


def test_the_docs_screenshots_are_the_ones_the_page_tests_take() -> None:
    from tests.support.docs_screenshots import DOCS_PICTURES, DOCS_SCREENSHOTS

    named = {
        Path(name).stem
        for _, text in TEXTS
        for name in re.findall(r"assets/screenshots/([\w-]+\.png)", text)
    }
    assert named <= DOCS_PICTURES, named - DOCS_PICTURES
    for name in named:
        assert (DOCS_SCREENSHOTS / f"{name}.png").is_file(), name
