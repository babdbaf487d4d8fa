"""The mkdocs hooks (mkdocs.yml names this file): each `<!-- reference: KIND TARGET -->` line
of a page becomes the reference that KIND writes from TARGET, a `module:attribute`:

- `cli logos.cli.arguments:build_parser`: a command, from the function that builds its parser;
- `config logos.settings.config_file:ConfigFileKeys`: the keys of a TOML file, from its model;
- `wire sandboxd.api:RunRequest`: a JSON body's fields, from its wire model.

An unknown kind or a target that does not import fails the build, naming the page.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

# WHY: mkdocs loads this file by its path, so the repository's root (where `tools` lives) is
# not on sys.path unless it is put there.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.pages import Page  # noqa: E402

from tools.docs.cli_reference import parser_reference  # noqa: E402
from tools.docs.model_reference import config_reference, wire_reference  # noqa: E402

DIRECTIVE = re.compile(r"^<!-- reference: (\w+) ([\w.]+):(\w+) -->$", re.MULTILINE)
"""`<!-- reference: KIND MODULE:ATTRIBUTE -->`, alone on its line."""


def resolve(module: str, attribute: str) -> Any:
    """The object a directive names."""
    return getattr(importlib.import_module(module), attribute)


def expand(markdown: str, where: str) -> str:
    """The page with each directive replaced by what it names."""
    seen_models: set[type] = set()

    def replace(match: re.Match[str]) -> str:
        kind, module, attribute = match.groups()
        try:
            target = resolve(module, attribute)
        except (ImportError, AttributeError) as exc:
            raise PluginError(f"{where}: {match.group(0)} names nothing: {exc}") from exc
        if kind == "cli":
            return parser_reference(target())
        if kind == "config":
            return config_reference(target)
        if kind == "wire":
            return wire_reference(target, seen_models)
        raise PluginError(f"{where}: {match.group(0)}: unknown kind {kind!r} (cli, config, wire)")

    return DIRECTIVE.sub(replace, markdown)


def on_page_markdown(markdown: str, *, page: Page, **_: Any) -> str:
    """mkdocs's hook: the page's Markdown before it is rendered."""
    return expand(markdown, page.file.src_uri)
