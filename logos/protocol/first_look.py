"""Where a first look at a repository finds its facts: the README, else the manifest the
listing shows (`logos.protocol.facts.MANIFESTS`).

Measured with the default 0.5B model on a repository with no README: its first look ran `ls`
and `head -n 40 README.md`, which failed, and it answered from the listing alone ("a web
application", "JavaScript with React") instead of reading `package.json`, which names the
framework. `next_look` finds what to read instead: after a look that failed for a missing
README or manifest, the README or manifest a listing shows that no command read yet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from logos.protocol.facts import MANIFESTS
from logos.result import Result

READMES = ("README.md", "README", "README.rst", "README.txt", "readme.md")
LOOKED_AT = (*READMES, *MANIFESTS)
"""What a first look reads, in the order it is best read."""
_LISTING = re.compile(r"(?:^|&&|;|\|)\s*(?:ls|find|tree)\b")
_MISSING = re.compile(r"No such file or directory|cannot open|cannot access")


def next_look(results: Sequence[Result]) -> tuple[str, str] | None:
    """After a look that failed for a file that is not there: (that file, the file to read
    instead); None when no look failed so, or the listings show nothing unread to read."""
    missed = _missed(results)
    look = unread_look(results)
    return None if missed is None or look is None else (missed, look)


def unread_look(results: Sequence[Result]) -> str | None:
    """The README or manifest the listings among `results` show that no command read yet,
    the likeliest first."""
    listed = _listed(results)
    read = " ".join(result.command for result in results)
    for name in LOOKED_AT:
        if name in listed and not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w])", read):
            return name
    return None


def _missed(results: Sequence[Result]) -> str | None:
    """A README or manifest a command looked for and did not find."""
    for result in results:
        if result.ok or not _MISSING.search(result.stderr):
            continue
        for name in LOOKED_AT:
            if name in result.command and name in result.stderr:
                return name
    return None


def _listed(results: Sequence[Result]) -> set[str]:
    """The READMEs and manifests that the listings among `results` show."""
    listed = set()
    for result in results:
        if not (result.ok and _LISTING.search(result.command)):
            continue
        for line in result.stdout.splitlines():
            for word in line.split():
                name = word.rstrip("/*").removeprefix("./")
                if name in LOOKED_AT:
                    listed.add(name)
    return listed
