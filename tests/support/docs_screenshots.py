"""The screenshots the README and the docs show, taken by the page's own tests
(tests/logos/test_serve_workspace.py) in headless chromium and copied into
docs/assets/screenshots/, so that the pictures are always of the page as it is.

A picture is replaced when the new one differs from it in size or in more than
`NOISE_SHARE` of its pixels: what changes from one run to the next (a duration, a temporary
path) does not rewrite the file each time, anything that moves the page's layout does."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS_SCREENSHOTS = REPO / "docs" / "assets" / "screenshots"
DOCS_PICTURES = frozenset(
    {"project-light-1440", "project-dark-375", "project-diff-1440", "run-1440"}
)
"""The screenshots (name and window width) the docs show."""
NOISE_SHARE = 0.01


def publish(taken: Path) -> None:
    """Copy a screenshot the docs show into the docs, unless it only differs by noise."""
    if taken.stem not in DOCS_PICTURES:
        return
    shown = DOCS_SCREENSHOTS / taken.name
    if shown.exists() and _only_noise(shown, taken):
        return
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(taken, shown)


def _only_noise(shown: Path, taken: Path) -> bool:
    from PIL import Image, ImageChops

    with Image.open(shown) as old, Image.open(taken) as new:
        if old.size != new.size:
            return False
        difference = ImageChops.difference(old.convert("RGB"), new.convert("RGB")).convert("L")
        changed = sum(difference.point(lambda value: 255 if value else 0).histogram()[255:])
        return changed <= NOISE_SHARE * old.size[0] * old.size[1]
