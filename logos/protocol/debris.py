"""Clear a small model's final answer of protocol debris before anyone reads it.

A 0.5B model held to a grammar still leaves marks of the protocol in its prose: a tag the
grammar bent out of shape (`<3cmd>`, `< 1>`, `<->`), a `<think>` it opened, a block it never
closed, a `<result>` it wrote itself, or a run of the same few characters repeated until the
token limit (`<-><-><->…`, the same bullet ten times). None of it is an answer; all of it
makes a newcomer stop reading. `find_debris` names what is there, `clean_answer` removes it
and keeps the rest (the loop returns the cleaned answer; the run's steps keep what the model
wrote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINKING = re.compile(r"<think>.*?(?:</think>|$)|</think>", re.DOTALL)
_BENT_TAG = re.compile(
    r"</?[^\s<>]{0,12}>|<\s+\d+\s*>|</?\s*(?:cmd|result|block)\b[^>\n]{0,20}>?"
    r"|(?<![\w-])/?(?:cmd|result)>"
)
"""Something tag-shaped in prose: `<3cmd>`, `<->`, `< 2>`, `</cmd>`, `< result>`, `cmd>`."""
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")
_SHORT_RUN = re.compile(r"(\S.{0,39}?)\1{3,}", re.DOTALL)
"""The same 1-40 characters (not only spaces) four or more times in a row."""
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Debris:
    kind: str
    text: str


def find_debris(answer: str) -> list[Debris]:
    """What in `answer` is protocol debris, in the order of the checks."""
    found = [Debris("thinking tag", m.group()) for m in _THINKING.finditer(answer)]
    found += [Debris("bent tag", m.group()) for m in _BENT_TAG.finditer(answer)]
    found += [Debris("runaway repetition", m.group()[:80]) for m in _repetitions(answer)]
    found += [Debris("repeated line", line) for line in _repeated_lines(answer)]
    return found


def clean_answer(answer: str) -> str:
    """`answer` without its debris: tags out, repetitions kept once, repeated lines kept at
    their first place; what is left otherwise as the model wrote it."""
    text = _THINKING.sub("", answer)
    text = _SHORT_RUN.sub(_once, text)
    text = _BENT_TAG.sub(" ", text)
    text = _SHORT_RUN.sub(_once, text)
    text = _SPACES.sub(" ", text)
    lines = _without_repeated_lines(text.splitlines())
    return "\n".join(line.rstrip() for line in lines).strip()


def _once(match: re.Match[str]) -> str:
    unit = match.group(1)
    # WHY keep words: "very very very very" is a style, not a loop worth a cut; but a unit
    # without a word (`<->`, `..`, `==`) is pure debris.
    return unit if _WORDS.search(unit) else ""


def _repetitions(text: str) -> list[re.Match[str]]:
    return [m for m in _SHORT_RUN.finditer(text) if len(m.group()) >= 8]


def _key(line: str) -> str:
    return " ".join(_WORDS.findall(line.lower()))


def _repeated_lines(text: str) -> list[str]:
    seen: set[str] = set()
    repeated = []
    for line in text.splitlines():
        key = _key(line)
        if len(key) < 12:
            continue
        if key in seen:
            repeated.append(line.strip())
        seen.add(key)
    return repeated


def _without_repeated_lines(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for line in lines:
        key = _key(line)
        if len(key) >= 12 and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return kept
