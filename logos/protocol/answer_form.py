"""The form a task asks its answer to take, and whether an answer has it.

Measured with the default 0.5B model: asked "How many lines are in the file notes.txt? …
answer with just the number", it ran `wc -l notes.txt` (`7 notes.txt`), then, asked for the
answer from the outputs, wrote a paragraph on how to count lines, with a fenced
`$ wc -l notes.txt` and no bare number in it. A person who asks for "just the number" wants
`7`, and a script that reads the answer needs it.

The forms a task can name, read from its words (`requested_form`): a bare number ("just the
number", "only the total"), a bare name ("just the file name", "only the word"), a number
of sentences ("in one sentence"), a number of bullet points ("in three bullet points").
`AnswerForm.holds` says whether an answer has the form; `AnswerForm.instruction` is what the
plain view of the outputs adds after the task (`logos.protocol.plain_answer`); for a bare
value, `AnswerForm.grammar` holds the model's reply to it (llama.cpp).

Reduced, not asked again: when a bare value is asked and the answer states exactly one
candidate, which the commands' outputs show too ("There are 7 lines." after `7 notes.txt`),
the answer is that value: a demanding user asked for it, it is the model's own, and the
outputs confirm it. An answer with at least the bullet points asked is reduced to the
first of them (a line before them, or a bullet beyond the number, is dropped). Anything
else is asked once more (`logos.agent.checks.answer_form`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FormKind = Literal["number", "name", "sentences", "bullets"]

_COUNTS = {"one": 1, "a": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4}
_COUNT = r"(one|a single|a|single|two|three|four|[1-9])"
_NUMBER_WORDS = r"(?:number|count|total|sum|integer|figure)"
_NAME_WORDS = r"(?:file\s*name|filename|name|word|path|extension|user(?:\s*name)?)"
_ASKED: tuple[tuple[FormKind, re.Pattern[str]], ...] = (
    (
        "number",
        re.compile(
            rf"\b(?:just|only)\s+(?:the|a|one)\s+(?:single\s+)?{_NUMBER_WORDS}\b"
            rf"|\b{_NUMBER_WORDS}\s+only\b"
            rf"|\bnothing\s+(?:but|except)\s+the\s+{_NUMBER_WORDS}\b"
            r"|\b(?:answer|reply|respond)\s+with\s+(?:a|one)\s+(?:single\s+)?(?:number|integer)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "name",
        re.compile(
            rf"\b(?:just|only)\s+(?:the|its|a)\s+(?:single\s+)?{_NAME_WORDS}\b"
            rf"|\b{_NAME_WORDS}\s+only\b"
            r"|\b(?:answer|reply|respond)\s+with\s+(?:a|one)\s+(?:single\s+)?(?:word|name)\b",
            re.IGNORECASE,
        ),
    ),
    ("bullets", re.compile(rf"\b{_COUNT}\s+bullet(?:\s*points?|s)?\b", re.IGNORECASE)),
    (
        "sentences",
        re.compile(rf"\bin\s+{_COUNT}\s+(?:short\s+)?sentences?\b", re.IGNORECASE),
    ),
)

_BARE_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
NUMBER_IN_TEXT = re.compile(r"(?<![\w.\-/])-?\d+(?:\.\d+)?(?![\w\-/]|\.\d)")
_WRAPPING = "`*\"' \t\n"
_BULLET = re.compile(r"\s*(?:[-*•+]|\d+[.)])\s+\S")
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](?=[\s\"')]|$)")
_TOKEN = re.compile(r"[\w./@:+-]+")

_TEXT = r"[^\n<`\x5B]"
_GRAMMARS = {
    "number": r'root ::= "-"? [0-9]{1,15} ( "." [0-9]{1,6} )?',
    "name": r"root ::= [A-Za-z0-9_./@:+-]{1,80}",
}


@dataclass(frozen=True)
class AnswerForm:
    kind: FormKind
    count: int = 1
    """Of sentences or bullet points."""

    @property
    def instruction(self) -> str:
        """What the plain view asks after the task: short, and no answer to copy."""
        if self.kind == "number":
            return "Answer with the number alone."
        if self.kind == "name":
            return "Answer with the name alone."
        if self.kind == "bullets":
            return f"Answer in {self.count} bullet points."
        return (
            "Answer in one sentence." if self.count == 1 else f"Answer in {self.count} sentences."
        )

    @property
    def grammar(self) -> str | None:
        """A llama.cpp grammar that holds a reply to this form (None: the answer grammar)."""
        if self.kind == "bullets":
            more = f' ( "\\n- " text ){{{self.count - 1}}}' if self.count > 1 else ""
            return f'root ::= "- " text{more}\ntext ::= {_TEXT}{{1,300}}'
        return _GRAMMARS.get(self.kind)

    def holds(self, answer: str) -> bool:
        bare = _bare(answer)
        if self.kind == "number":
            return _BARE_NUMBER.fullmatch(bare) is not None
        if self.kind == "name":
            return bool(bare) and not any(c.isspace() for c in bare)
        if self.kind == "bullets":
            lines = [line for line in answer.splitlines() if line.strip()]
            return len(lines) == self.count and all(_BULLET.match(line) for line in lines)
        return 1 <= count_sentences(answer) <= self.count

    def reduced(self, answer: str, task: str, outputs: str) -> str | None:
        """The answer reduced to this form (module docstring), or None when it cannot be."""
        if self.kind == "number":
            found = {m.group() for m in NUMBER_IN_TEXT.finditer(answer)}
            shown = {m.group() for m in NUMBER_IN_TEXT.finditer(outputs)}
            return found.pop() if len(found) == 1 and found <= shown else None
        if self.kind == "name":
            return _one_name(answer, task, outputs)
        if self.kind == "bullets":
            bullets = [line.rstrip() for line in answer.splitlines() if _BULLET.match(line)]
            return "\n".join(bullets[: self.count]) if len(bullets) >= self.count else None
        return None


def requested_form(task: str) -> AnswerForm | None:
    """The form `task` asks its answer to take, if it names one."""
    for kind, pattern in _ASKED:
        match = pattern.search(task)
        if match is not None:
            counted = next((g for g in match.groups() if g), "1") if match.groups() else "1"
            count = _COUNTS.get(counted.lower(), int(counted) if counted.isdigit() else 1)
            return AnswerForm(kind, count)
    return None


def count_sentences(text: str) -> int:
    """Sentences in `text`: each end of a sentence (., ! or ? before a space or the end),
    and each non-empty line that ends without one."""
    count = 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        ends = len(_SENTENCE_END.findall(stripped))
        count += ends + (0 if stripped[-1] in ".!?" else 1)
    return count


def _bare(answer: str) -> str:
    """The answer without what wraps a bare value: quotes, backticks, bold, a final full
    stop."""
    bare = answer.strip(_WRAPPING)
    return bare[:-1].strip(_WRAPPING) if bare.endswith(".") else bare


def _one_name(answer: str, task: str, outputs: str) -> str | None:
    """The one word of the answer that an output shows and the task does not say, if one."""
    task_words = {token.lower() for token in _TOKEN.findall(task)}
    found = set()
    for token in _TOKEN.findall(answer):
        name = token.strip(".:-")
        if len(name) < 2 or name.lower() in task_words:
            continue
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", outputs):
            found.add(name)
    return found.pop() if len(found) == 1 else None
