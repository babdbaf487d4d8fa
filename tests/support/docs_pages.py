"""The README's and the docs' Markdown, read as the docs tests see it: every fenced block with
where it is, its language and title, the marker above it, and each page's scripted model.

A block is one of:

- a **command** (```` ```sh ````, or ```` ```python ```` without a title): run as written;
- a **file** (any block with `title="PATH"`): written to PATH (`~` is the reader's home,
  anything else is relative to the directory the page's commands run in), then checked as
  what it is when it is a file logos or sandboxd reads;
- an **output** (`title="output"`, `title="output on stderr"`, either with `, exit status N`):
  what the command just above it prints on stdout (or stderr; `...` stands for any text), and
  the status it exits with (0 unless the title says);
- anything else (diagrams, examples of JSON): read, not run.

A block that must not run carries, on the line above its fence,
`<!-- docs: not run, checked by CHECK -->`, where CHECK names another way it is checked
(tests/docs/other_checks.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>.*)$")
NOT_RUN = re.compile(r"^<!-- docs: not run, checked by (?P<check>[\w-]+) -->$")
OUTPUT_TITLE = re.compile(r"^output(?P<stderr> on stderr)?(?:, exit status (?P<status>\d+))?$")
MODEL = re.compile(r"^<!-- docs-model\n(?P<script>.*?)\n-->$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """The line of its opening fence (1-based)."""
    heading: str
    """The last heading above it."""
    language: str
    title: str | None
    text: str
    not_run: str | None = None
    """The check named by its `not run` marker, if it has one."""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def is_output(self) -> bool:
        return self.title is not None and OUTPUT_TITLE.match(self.title) is not None

    @property
    def is_file(self) -> bool:
        return self.title is not None and not self.is_output

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES and self.title is None

    @property
    def is_python(self) -> bool:
        return self.language in ("python", "py") and self.title is None

    @property
    def runs(self) -> bool:
        return (self.is_shell or self.is_python or self.is_file) and self.not_run is None

    @property
    def on_stderr(self) -> bool:
        """An output block that shows stderr rather than stdout."""
        match = OUTPUT_TITLE.match(self.title or "")
        return bool(match and match.group("stderr"))

    @property
    def expected_status(self) -> int:
        """The exit status an output block says its command ends with (0 unless it says)."""
        match = OUTPUT_TITLE.match(self.title or "")
        return int(match.group("status")) if match and match.group("status") else 0


def pages() -> list[Path]:
    """The README and every page of the docs, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, in order."""
    found = []
    heading = ""
    marker: str | None = None
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif fence:
            indent, opening = fence.group("indent"), fence.group("fence")
            language, title = _info(fence.group("info"))
            end = index + 1
            while end < len(lines) and lines[end].strip() != opening:
                end += 1
            if end == len(lines):
                raise AssertionError(f"{page}:{index + 1}: a fence that never closes")
            text = "\n".join(_dedent(body, len(indent)) for body in lines[index + 1 : end])
            found.append(Block(page, index + 1, heading, language, title, text, marker))
            marker, index = None, end
        elif line.strip():
            not_run = NOT_RUN.match(line.strip())
            marker = not_run.group("check") if not_run else None
        index += 1
    return found


def _info(info: str) -> tuple[str, str | None]:
    """A fence's language and its `title="…"`."""
    language = info.strip().split(" ")[0] if info.strip() else ""
    title = re.search(r'title="([^"]*)"', info)
    return language, title.group(1) if title else None


def _dedent(line: str, indent: int) -> str:
    return line[indent:] if line[:indent].strip() == "" else line


def model_script(page: Path) -> list[dict[str, Any]]:
    """The page's `<!-- docs-model … -->` comment: the replies its scripted model gives, as a
    list of rules `{"when": TEXT, "replies": [REPLY, …]}` (YAML); [] when it has none."""
    found = MODEL.search(page.read_text(encoding="utf-8"))
    if found is None:
        return []
    rules = yaml.safe_load(found.group("script"))
    assert isinstance(rules, list), f"{page}: the docs-model comment is not a list of rules"
    for rule in rules:
        assert set(rule) == {"when", "replies"}, f"{page}: a docs-model rule is {rule!r}"
    return rules


def commands_and_outputs(page: Path) -> Iterator[tuple[Block, Block | None]]:
    """Each block that runs, with the output block that follows it (if one does)."""
    found = blocks(page)
    for index, block in enumerate(found):
        if block.is_output:
            continue
        following = found[index + 1] if index + 1 < len(found) else None
        yield block, following if following is not None and following.is_output else None
