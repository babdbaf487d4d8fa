"""What a project says it does, in its manifest's description, read from what the run's
commands printed: pyproject.toml, setup.cfg, package.json, Cargo.toml.

Measured with the default 0.5B model on repositories with no README: it read Cargo.toml,
whose description is "Converts temperatures between Celsius and Fahrenheit", and answered
"The project does not perform any conversion between Celsius and Fahrenheit"; it read
pyproject.toml ("Prints a random quote from a local collection") and answered that the
repository is "a command-line tool named quotecli" with "a README.md file". A person who asks
what a project does wants what its authors wrote. `described` finds that sentence;
`Description.affirmed_in` says whether an answer gives it; the `project_description` check
asks the answer again, told it, when it does not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from logos.protocol.project_commands import files_printed
from logos.result import Result

_WHAT_IT_DOES = re.compile(
    r"\bwhat (?:does|is) (?:this|the) (?:project|repository|repo|library|crate|package|"
    r"tool|program|code(?:base)?)(?:\s+(?:do|for|about))?\s*(?:[?.!]|$)",
    re.IGNORECASE | re.MULTILINE,
)
""""what does this repository do?", "what is this project for?"; not "what is this project
written in?" nor "what is the project's license?"."""
_MAX_CHARS = 300
"""Of a description told back: a manifest's line, not a file pasted into one."""
_DESCRIPTIONS = {
    "pyproject.toml": r'^description\s*=\s*"((?:[^"\\]|\\.)+)"',
    "setup.cfg": r"^description\s*=\s*(.+)$",
    "package.json": r'"description"\s*:\s*"((?:[^"\\]|\\.)+)"',
    "Cargo.toml": r'^description\s*=\s*"((?:[^"\\]|\\.)+)"',
}
"""The manifests that hold a one-line description, and where in each."""
_WORD = re.compile(r"[a-z][a-z0-9]+")
_MINOR = frozenset(
    _WORD.findall(
        "a about an and are as at be between by for from in into is it its of on or over than "
        "that the this to with your you small simple tiny"
    )
)
"""Words a description shares with any answer."""
_DENIAL = re.compile(r"\b(?:not|no|never|none|neither|nor)\b|n't\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_STEM = 5
"""Letters two words share to count as one: "converts" and "conversion"."""


@dataclass(frozen=True)
class Description:
    text: str
    source: str
    """The manifest it was read from: "Cargo.toml"."""

    def affirmed_in(self, answer: str) -> bool:
        """Whether `answer` gives at least half of the description's words (by their
        first letters), none of them in a sentence that denies it before them."""
        wanted = {word[:_STEM] for word in _WORD.findall(self.text.lower())} - {
            word[:_STEM] for word in _MINOR
        }
        if not wanted:
            return True
        given = {word[:_STEM] for word in _WORD.findall(_undenied(answer).lower())}
        return 2 * len(wanted & given) >= len(wanted)


def asks_what_it_does(task: str) -> bool:
    return _WHAT_IT_DOES.search(task) is not None


def described(task: str, results: Sequence[Result]) -> Description | None:
    """The description a manifest the run printed gives, when `task` asks what the project
    does; None for any other task, or when no manifest read holds one."""
    if not asks_what_it_does(task):
        return None
    for name, printed in files_printed(results, _DESCRIPTIONS):
        found = re.search(_DESCRIPTIONS[name], printed, re.MULTILINE)
        text = found.group(1).strip() if found else ""
        if text:
            cut = text if len(text) <= _MAX_CHARS else text[:_MAX_CHARS] + "…"
            return Description(cut, name)
    return None


def _undenied(answer: str) -> str:
    """`answer` without the words a sentence's denial comes before: "does not convert
    temperatures" gives neither "convert" nor "temperatures"."""
    kept: list[str] = []
    start = 0
    for end in [m.end() for m in _SENTENCE_END.finditer(answer)] + [len(answer)]:
        sentence = answer[start:end]
        denial = _DENIAL.search(sentence)
        kept.append(sentence[: denial.start()] if denial else sentence)
        start = end
    return " ".join(kept)
