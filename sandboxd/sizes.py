"""Sizes in bytes as people write them: 536870912, "512m", "2g", "2GiB" (binary units).

Shared by the daemon's config and the container limits it declares (sandboxd.backend.Limits).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(value: object) -> int:
    """Bytes from an int or a docker-style size string ("512m", "2g", "2GiB": binary units)."""
    if isinstance(value, bool):
        raise ValueError('expected a size such as 536870912, "512m" or "2GiB"')
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])
    raise ValueError(f'{value!r} is not a size: use bytes (536870912) or "512m", "2g", "2GiB"')


Size = Annotated[int, BeforeValidator(parse_size)]
"""A pydantic field type: bytes, given as a number or a size string."""
