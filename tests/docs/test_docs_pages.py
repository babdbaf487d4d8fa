"""Every command and Python example of the README and the docs, run as written, page by page,
against the real parts: this checkout's `logos` and `sandboxd` on PATH, the real Docker engine
behind the daemon a page starts, the real servers and MCP clients; a scripted model (the
page's `<!-- docs-model … -->` rules) where a model is needed. What a page shows a command
printing is checked; a file it shows is written where it says and checked as what reads it.

A new block is run without a new test. A block that must not run says why on the line above
it, `<!-- docs: not run, checked by CHECK -->`: test_docs_not_run.py holds each CHECK."""

from __future__ import annotations

import doctest
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from logos.models.fitting import default_for_this_machine
from logos.settings.serve_table import DEFAULT_PORT
from tests.support.docs_files import check_file
from tests.support.docs_pages import REPO, Block, blocks, commands_and_outputs, pages
from tests.support.docs_session import Outcome, page_run
from tests.support.hub_server import HubServer
from tests.support.llama import find_default_gguf
from tests.support.parts import require

_OUTPUT = doctest.OutputChecker()


def _marks(page: Path) -> list[pytest.MarkDecorator]:
    """The real parts a page's blocks reach, as the suite's marks."""
    text = "\n".join(block.text for block in blocks(page) if block.runs)
    marks = [pytest.mark.timeout(900)]
    if "sandboxd" in text or "--sandbox" in text:
        marks.append(pytest.mark.docker)
    if "docs-env: local-model" in page.read_text(encoding="utf-8"):
        marks += [pytest.mark.llama, pytest.mark.slow]
    if "ray start" in text:
        marks.append(pytest.mark.ray)
    if str(DEFAULT_PORT) in text or re.search(r"^logos (serve|view)\b(?!.*--port)", text, re.M):
        marks.append(pytest.mark.default_port)
    return marks


RUNNABLE = [page for page in pages() if any(block.runs for block in blocks(page))]


@pytest.mark.parametrize(
    "page",
    [pytest.param(page, marks=_marks(page), id=str(page.relative_to(REPO))) for page in RUNNABLE],
)
def test_each_block_of_the_page_runs_as_written(page: Path, request: pytest.FixtureRequest) -> None:
    docker_client = _engine(request) if _needs(page, pytest.mark.docker.name) else None
    with page_run(page, docker_client, **_environment(page, request)) as run:
        for block, output in commands_and_outputs(page):
            if not block.runs:
                continue
            if block.is_file:
                check_file(run, block, run.write(block))
                continue
            outcome = run.run_shell(block) if block.is_shell else run.run_python(block)
            _check(block, output, outcome)


def _needs(page: Path, mark: str) -> bool:
    return any(found.name == mark for found in _marks(page))


def _engine(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("docker_client")


def _environment(page: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """What the page's reader has beyond the defaults: for a page about the default local
    model, no provider key at all, and a Hub (the tests' own) that serves that model."""
    if "docs-env: local-model" not in page.read_text(encoding="utf-8"):
        return {}
    endpoint: str = request.getfixturevalue("default_model_hub")
    return {
        "HF_ENDPOINT": endpoint,
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_BASE_URL": "",
        "OPENAI_API_KEY": "",
        "OPENAI_BASE_URL": "",
    }


@pytest.fixture(scope="module")
def default_model_hub() -> Iterator[str]:
    """A Hub (the tests' own server) that serves the default local model's file under its own
    name: a page about the first run fetches it as a newcomer's logos does."""
    gguf = find_default_gguf()
    require(
        gguf is not None and gguf.is_file(),
        "no copy of the default model: run scripts/fetch-model qwen2.5-coder-0.5b",
    )
    assert gguf is not None
    with HubServer() as hub:
        default = default_for_this_machine().option.file
        hub.add(default.repo_id, default.filename, gguf.read_bytes())
        yield hub.endpoint


def _check(block: Block, output: Block | None, outcome: Outcome) -> None:
    expected = output.expected_status if output is not None else 0
    assert outcome.status == expected, (
        f"{block.where}: the block ended with {outcome.status}, not {expected}\n"
        f"{block.text}\n" + outcome.describe()
    )
    assert "Traceback (most recent call last)" not in outcome.stderr, (
        f"{block.where}: a traceback\n" + outcome.describe()
    )
    if output is not None:
        shown = output.text + "\n"
        printed = outcome.stderr if output.on_stderr else outcome.stdout
        assert _OUTPUT.check_output(shown, printed, doctest.ELLIPSIS), (
            f"{output.where}: the page shows\n{shown}\nbut the block above printed\n{printed}"
        )


def test_the_readmes_scripted_replies_come_last() -> None:
    """A model asked about this repository reads the README's head first (`head -n 40
    README.md`): the scripted replies the docs' tests give there must not be what it reads."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    last = readme[readme.rindex("\n## ") :]
    assert "<!-- docs-model" in last and readme.rstrip().endswith("-->"), (
        "the README's docs-model comment belongs at its end, after its last section"
    )


def test_every_runnable_page_is_run() -> None:
    """A page whose blocks would all be skipped is a page whose commands nobody checks."""
    require(bool(RUNNABLE), "no docs")
    shells = [
        block
        for page in pages()
        for block in blocks(page)
        if block.language in ("bash", "shell", "console")
    ]
    assert not shells, f"write shell blocks as ```sh: {[block.where for block in shells]}"


def test_every_output_block_follows_a_command() -> None:
    for page in pages():
        found = blocks(page)
        for before, block in itertools.pairwise(found):
            if block.is_output:
                assert before.runs or before.not_run, f"{block.where}: an output of nothing"
