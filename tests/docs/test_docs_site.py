"""The docs site builds offline in strict mode (no broken link, anchor or reference), asks no
other host for anything (no CDN, no web font), and its reference pages hold what the code
declares: every command and flag of both parsers, every config key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from logos.cli.arguments import build_parser
from logos.settings.config_file import ConfigFileKeys
from sandboxd.cli import build_parser as sandboxd_parser
from sandboxd.server.config import DaemonConfig
from tests.support.docs_pages import REPO
from tools.docs.cli_reference import command_words

LOADED_FROM = re.compile(
    r"""<(?:script|img|link|iframe|source|video|audio)\b[^>]*?(?:src|href)\s*=\s*["'](https?://[^"']+)"""
)
"""What a browser fetches by itself: scripts, images, stylesheets and fonts, frames, media."""
CSS_URL = re.compile(r"""url\(\s*["']?(https?://[^"')]+)""")
ALLOWED_LINKS = (
    "https://huggingface.co/",
    "https://modelcontextprotocol.io",
    "https://github.com/",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    built = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(built)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    yield built


def _text(path: Path) -> str:
    return re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))


def test_no_page_loads_anything_from_another_host(site: Path) -> None:
    loaded = []
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        loaded += [f"{page.relative_to(site)}: {url}" for url in LOADED_FROM.findall(html)]
        assert 'class="mermaid"' not in html, f"{page}: a diagram would load its script"
    for sheet in site.rglob("*.css"):
        loaded += [f"{sheet.name}: {url}" for url in CSS_URL.findall(sheet.read_text())]
    assert not loaded, "\n".join(loaded)


def test_links_to_other_sites_are_only_to_what_the_pages_cite(site: Path) -> None:
    for page in site.rglob("*.html"):
        for url in re.findall(r'<a [^>]*href="(https?://[^"]+)"', page.read_text()):
            assert url.startswith((*ALLOWED_LINKS, "https://squidfunk.github.io/")), url


def test_the_cli_reference_holds_every_command_and_flag(site: Path) -> None:
    for parser, page in ((build_parser(), "logos-cli"), (sandboxd_parser(), "sandboxd-cli")):
        text = _text(site / "reference" / page / "index.html")
        for words in command_words(parser):
            assert " ".join([parser.prog, *words]) in text, words
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in text, flag


def test_the_config_references_hold_every_key(site: Path) -> None:
    for model, page in ((ConfigFileKeys, "logos-config"), (DaemonConfig, "sandboxd-config")):
        text = _text(site / "reference" / page / "index.html")
        for name in model.model_fields:
            assert re.search(rf"\b{name}\b", text), f"{page}: {name}"


def test_the_wire_references_hold_every_field(site: Path) -> None:
    from sandboxd.api import RunRequest

    text = _text(site / "reference" / "sandboxd-api" / "index.html")
    for name in RunRequest.model_fields:
        assert name in text, name
