"""The worked examples a small model sees before its task: the general ones, then the one of
the task's kind.

A 0.5B model follows an example it sees as real turns far more often than the same example
told in prose (`logos.protocol.prompt`), and it copies the example's first look whatever it
was asked. Measured with the default model, greedy:

* shown one example ("which language?": `ls`, the start of the README), it asked for
  "what does this library do?" `pip install tidepy` (a package named after the example's
  project), for "what does this tool do?" `python setup.py`; shown a second general example
  ("what is this repository?") after it, it looked with `ls` and the README on every one of
  nine such questions, and still answered "how many lines…" with `wc -l`;
* shown only a first look, it answered "where is slugify defined?" from a listing, "what
  changed last?" with a commit hash, and "how do I run the tests?" by running `pytest` twenty
  times in a Rust crate. So a task of one of those kinds gets an example of its kind last:
  search for the name, ask git for the last commit's message and files, read how the project
  says to run its tests. With the general examples before it, it put the task's own name in
  the search (`"main"`) where, alone, it copied the example's (`"high_tide"`).

On a repository with no README, it ran `head -n 40 README.md`, which failed, and answered
from the listing alone ("JavaScript with React" for an Express project): so the example of
how to run the tests has no README, and its first look reads the manifest
(`pyproject.toml`); the loop hands over the README or manifest a listing shows when a look
misses its file (`logos.protocol.first_look`). Not a general example: shown a general first
look that read `pyproject.toml`, the model read `head -n 40 notes.txt` where it had counted
the lines with `wc -l`.

Every example lives in one made-up project (a tide-table tool for a harbour), unlike any real
one, so that an answer copying its facts is plainly wrong; every command it shows reads and
changes nothing, so that a copy does no harm (`tests/logos/test_harmless_examples.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from logos.protocol.envelope import format_results
from logos.protocol.plain_answer import plain_answer_view
from logos.providers.base import Message
from logos.result import Result

EXAMPLE_DIR = "/home/user/tides"
"""Where the made-up project lies, as an answer's plain view names it."""


@dataclass(frozen=True)
class WorkedExample:
    """One question, the first look that grounds its answer, and an answer taken from it."""

    task: str
    looks: tuple[Result, ...]
    """The first look: the commands of the one acting reply, with their outputs."""
    answer: str
    cues: tuple[str, ...] = ()
    """Regular expressions (any case), one of which in a task makes this its kind's example."""
    shown_when_answering: bool = False
    """Also shown, as a plain view and its answer, before the run's own plain view when the
    final answer is asked (`logos.protocol.plain_answer`). Measured: from `git log`'s
    output alone the default model named a file or the hash, not the commit's message, in
    two tries of three; shown this example's view and answer first, it named the message in
    three of three. For the other kinds it copied the example's facts instead."""

    def fits(self, task: str) -> bool:
        return any(re.search(cue, task, re.IGNORECASE) for cue in self.cues)

    def turns(self) -> tuple[Message, ...]:
        """The task, the acting reply, its results as the harness renders them, the answer."""
        blocks = "\n".join(f"<cmd>{look.command}</cmd>" for look in self.looks)
        return (
            Message(role="user", content=self.task),
            Message(role="assistant", content=blocks),
            Message(role="user", content=format_results(list(self.looks))),
            Message(role="assistant", content=self.answer),
        )

    def answering_turns(self) -> tuple[Message, ...]:
        """The plain view of this example's outputs and its answer."""
        view = plain_answer_view(self.task, self.looks, EXAMPLE_DIR)
        return (*view, Message(role="assistant", content=self.answer))


@dataclass(frozen=True)
class WorkedExamples:
    """The examples every task sees first, and those of a kind, tried in order."""

    general: tuple[WorkedExample, ...]
    kinds: tuple[WorkedExample, ...]

    def for_task(self, task: str) -> tuple[WorkedExample, ...]:
        """The general examples, then the first of a kind whose cues the task matches."""
        kind = next((example for example in self.kinds if example.fits(task)), None)
        return self.general if kind is None else (*self.general, kind)

    def turns(self, task: str) -> tuple[Message, ...]:
        """What is sent before the conversation (`ReplyPolicy.examples`)."""
        return tuple(m for example in self.for_task(task) for m in example.turns())

    def answering_turns(self, task: str) -> tuple[Message, ...]:
        """What is sent before the run's own plain view when its answer is asked."""
        return tuple(
            m
            for example in self.for_task(task)
            if example.shown_when_answering
            for m in example.answering_turns()
        )


def _look(command: str, stdout: str) -> Result:
    return Result(command=command, stdout=stdout, exit_code=0)


LISTING = _look("ls", "README.md\nsetup.py\ntides/\n")
_README_START = (
    "# tides\n\nA Python tool that prints the times of high and low tide for a harbour.\n"
)
README = _look("head -n 40 README.md", _README_START)

LANGUAGE = WorkedExample(
    task="Which language is this project written in?",
    looks=(LISTING, README),
    answer="Python: the directory holds setup.py, and README.md says so.",
)
WHAT_IT_IS = WorkedExample(
    task="What is this repository?",
    looks=(LISTING, README),
    answer="A Python tool that prints the times of high and low tide for a harbour: README.md "
    "says so.",
)

DEFINITION = WorkedExample(
    task="Where is the function high_tide defined?",
    looks=(
        _look(
            'grep -rn --exclude-dir=.git "high_tide" .',
            "./tides/times.py:8:def high_tide(harbour, day):\n"
            "./tides/cli.py:3:from tides.times import high_tide\n"
            "./tides/cli.py:12:    print(high_tide(args.harbour, args.day))\n",
        ),
    ),
    answer="In tides/times.py, line 8: def high_tide(harbour, day). tides/cli.py only "
    "imports and calls it.",
    cues=(r"\bdefin", r"\bwhere (is|are)\b", r"\bdeclared\b", r"\bimplemented\b"),
)
"""Search the files for the name; the definition is the line that defines it."""

LAST_CHANGE = WorkedExample(
    task="What changed in the last commit?",
    looks=(
        _look(
            "git log -1 --stat --format=%s",
            "Add neap tides to the table\n\n tides/neap.py | 24 ++++++++++++++++++++++++\n"
            " 1 file changed, 24 insertions(+)\n",
        ),
    ),
    answer='The last commit, "Add neap tides to the table", added tides/neap.py.',
    cues=(r"\bchanged\b", r"\bcommits?\b", r"\brecent(ly)?\b", r"\blatest\b", r"\bhistory\b"),
    shown_when_answering=True,
)
"""Ask git for the last commit's message and files, not its hash."""

HOW_TO = WorkedExample(
    task="How do I run the tests of this project?",
    looks=(
        _look("ls", "pyproject.toml\ntides/\n"),
        _look(
            "head -n 40 pyproject.toml",
            '[project]\nname = "tides"\nrequires-python = ">=3.10"\n\n[tool.tox]\n'
            'env_list = ["tides"]\n',
        ),
    ),
    answer="Run tox -e tides: there is no README, and pyproject.toml sets up tox.",
    cues=(
        r"\btests?\b",
        r"\bhow (do|can|should) (i|we|you) (run|build|install|start)\b",
        r"\bhow to (run|build|install|start)\b",
    ),
)
"""Read how the project says to do it, in the manifest when there is no README; do not run
anything to find out."""

SMALL_MODEL_EXAMPLES = WorkedExamples(
    general=(LANGUAGE, WHAT_IT_IS), kinds=(DEFINITION, LAST_CHANGE, HOW_TO)
)
"""The compact prompt's examples (`logos.agent.replies`)."""
