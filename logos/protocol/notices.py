"""What the loop tells the model when a reply went wrong, and the notes it adds under blocks.

Small models copy what they read. So every text here must be harmless if copied into a
reply: its only `<cmd>` tags form complete blocks of a command that needs no file and
changes nothing (`<cmd>ls</cmd>`), it names the tag in words ("a block") rather than
writing a lone `<cmd>` that would open one, and it shows no placeholder command (a
`cat > f` would create `f`). `tests/test_harmless_examples.py` checks every text here
and the system prompt against a list of harmless commands.
"""

from __future__ import annotations

from collections.abc import Sequence

from logos.protocol.project_commands import ProjectCommand
from logos.protocol.project_description import Description
from logos.providers.base import FinishReason
from logos.result import JobInfo

_EXAMPLE = "<cmd>ls</cmd>"
_NAMES_SAID = 10
"""The names a command printed said again beside the task, at most."""

CHECK_BACK_NOTICE = (
    "No command has run yet in this conversation. If the task needs facts from this machine "
    f"or changes to it, run a command now, in a block such as {_EXAMPLE}. Otherwise, give "
    "your answer again, with no block."
)
"""Sent once when a run that has run no command gets an answer (`ReplyPolicy.check_back`)."""

FABRICATED_RESULT_NOTICE = (
    "You wrote a <result> yourself; it was discarded. Results come only from this harness, "
    "after your reply. To run a command, write it in a block such as "
    f"{_EXAMPLE}, then stop and wait for its result."
)
"""Sent when the model wrote a result of its own, with or without a real block before it."""

CUT_AFTER_BLOCKS_NOTICE = (
    "Your reply was cut off at the output token limit after these blocks; anything you "
    "meant to write after them is lost. Continue from the results."
)

INTERRUPTED_NOTICE = (
    "Your previous reply was interrupted by a connection error; the complete blocks in it "
    "ran (results above, if any). Continue from where you stopped."
)


def not_run_notice(found: str, repeat: int) -> str:
    """The answer to a reply that holds `found` (e.g. "'<tool_call>'") instead of a block;
    sterner when it happens again."""
    if repeat <= 1:
        return (
            f"Your reply contains {found}, which this harness does not run: nothing was "
            f"executed. To run a command, write it in a block such as {_EXAMPLE}. To finish, "
            "reply without any block."
        )
    return (
        f"Again {found} was not executed, and the run stops if it happens once more. "
        f"The ONLY way to run a command is a block such as {_EXAMPLE}: no JSON, no tool-call "
        "tags, no code fence."
    )


def unclosed_block_notice(completed: int) -> str:
    ran = f" The {completed} complete block(s) before it ran; see above." if completed else ""
    return (
        "Your reply was cut off at the output token limit inside an unclosed block, which "
        f"was NOT run.{ran} Continue from there: send that command again in a shorter form. "
        "Write a long file in parts: a first heredoc creates it, further ones append to it "
        "(>>)."
    )


def empty_reply_notice(finish: FinishReason | None) -> str:
    if finish == "length":
        return (
            "Your reply was cut off at the output token limit before you wrote anything. "
            f"Think less before you act: run one command (a block such as {_EXAMPLE}), or "
            "answer briefly."
        )
    return (
        f"Your reply was empty. Run a command in a block such as {_EXAMPLE}, or reply with "
        "your final answer (a reply without any block)."
    )


MKDIR_PARENTS_NOTE = (
    "mkdir makes one directory, in a directory that exists already; with its -p option it "
    "makes the missing parent directories too."
)
"""Under a block whose mkdir stopped at a missing parent (`logos.protocol.pitfalls`)."""

SUM_IS_A_CHECKSUM_NOTE = (
    "sum does not add numbers: it prints a checksum of its input and its size in blocks. To "
    "add numbers up, use awk, adding each line's number into a variable and printing it at "
    "the END."
)
"""Under a block that ran the sum command (`logos.protocol.pitfalls`)."""


WC_NAMES_THE_FILE_NOTE = (
    "wc names the file it counted after the count, so the file written holds both. To "
    "write the count alone, give wc the file on its standard input."
)
"""Under a block that wrote a wc count of a named file into a file (`logos.protocol.pitfalls`)."""


def read_a_directory_note(directories: Sequence[str]) -> str:
    """Under a block that gave a directory to a command that reads files
    (`logos.protocol.pitfalls`)."""
    named = " and ".join(directories)
    return (
        f"{named} is a directory, not a file: commands that read files cannot read it. To "
        "see the files it holds with their sizes, largest first, list it with ls -lS."
    )


def run_instead(instead: str) -> str:
    """After a pitfall note: the model's own command as it meant it (`logos.protocol.pitfalls`)."""
    return f"Run this instead, which does what the command was meant to: <cmd>{instead}</cmd>"


def repeated_failure_note(times: int) -> str:
    """The note under a block whose command failed the same way `times` times in a row."""
    return (
        f"this command failed the same way {times} times in a row; running it again will "
        "not change that. Try something else: read the error above, check what the command "
        "expects, or take another approach."
    )


def repeated_reply_notice(forced: bool, task: str) -> str:
    """Sent when the model ran its previous reply's commands again, to the same output
    (`logos.protocol.repetition`); `forced`: the next reply is held to an answer by a grammar, so
    the notice asks the task again (a small model copies any other words into its answer)."""
    if forced:
        return answer_notice(task)
    return (
        "You ran the same command again and got the same output; running it a third time "
        "will not change it. Answer from that output, or run a different command."
    )


def answer_notice(task: str) -> str:
    """Sent before an answer the loop asks for (`ReplyPolicy.plain_answers`): the task again,
    and nothing a small model could copy into its answer."""
    return f"Answer from the output above: {task.strip()}"


def answer_form_notice(task: str) -> str:
    """Sent when a final answer lacks the form its task asks for (`logos.protocol.answer_form`):
    the answer is asked once more, held to that form."""
    return (
        "Your answer does not have the form the task asks for. Answer again, from the output "
        f"above, in that form: {task.strip()}"
    )


def unworked_number_notice(instead: str | None) -> str:
    """Sent when the model answers a question that asks for a number before any command
    printed a number alone (`logos.protocol.asked_number`), with the command that works it out
    from its own last command when that is surely what it meant; the next turn must act.

    WHY no command named in words: told that wc -l counts lines and grep -c matching lines,
    the default model ran `wc -l` on nothing and `grep -c "12" numbers.txt`."""
    notice = (
        "The task asks for a number, and no command has printed it yet: a number read off a "
        "list by eye is often wrong."
    )
    if instead is not None:
        return f"{notice} Work it out with a command: <cmd>{instead}</cmd>"
    return f"{notice} Run one command that prints that number alone, then answer."


def unpicked_file_notice(asked: str, command: str) -> str:
    """Sent when the model answers which file `asked` ("holds TODO", "is the largest")
    before any command picked it out (`logos.protocol.asked_file`), with the command that
    does; the next turn must act."""
    return (
        f"The task asks which file {asked}, and no command has picked it out: a file's name "
        "does not say what it holds, and a listing read by eye gives a name, not the one "
        f"asked for. Pick it out: <cmd>{command}</cmd>"
    )


def picked_file_note(asked: str, names: Sequence[str]) -> str:
    """Said after the task when the answer is asked from the outputs, once a command that
    picks out the file that `asked` printed `names` (`logos.protocol.asked_file`).

    WHY: asked from every output, the default model named the file the search printed and
    another one a listing had shown."""
    if not names:
        return f"No file {asked}: the command that looked for it printed none."
    if len(names) == 1:
        return f"The file that {asked}, as a command printed it: {names[0]}"
    left = len(names) - _NAMES_SAID
    more = f", and {left} more" if left > 0 else ""
    shown = ", ".join(names[:_NAMES_SAID])
    plural = asked.replace("holds ", "hold ", 1)
    return f"The files that {plural}, as a command printed them: {shown}{more}"


def unwritten_file_notice(missing: str, instead: str | None) -> str:
    """Sent when the model answers before any command wrote the file its task asks for
    (`logos.protocol.task_files`), with the command that writes it the output of the run's
    own last command, when there is one."""
    notice = f"The task asks for the file {missing}, and no command has written it yet."
    if instead is None:
        return f"{notice} Write it now, in a block."
    return f"{notice} To write into it what your last command printed, run <cmd>{instead}</cmd>"


def missing_look_notice(missing: str, look: str) -> str:
    """Sent after a look that did not find `missing`, when the task names `look` or a
    listing shows it, the file that holds what was looked for (`logos.protocol.first_look`).

    WHY the case said: handed `head -n 40 readme.txt`, the default model ran
    `head -n 40 README.txt`, twice."""
    if missing.lower() == look.lower():
        return (
            f"There is no {missing} here: file names differ in upper and lower case. The file "
            f"is {look}, written exactly so: <cmd>head -n 40 {look}</cmd>"
        )
    return f"There is no {missing} here. Read {look} instead: <cmd>head -n 40 {look}</cmd>"


def list_instead_notice(missing: str, directory: str) -> str:
    """Sent after a look that did not find `missing`, with nothing to read instead, when the
    task names `directory`, which a listing shows (`logos.protocol.first_look`)."""
    return (
        f"There is no {missing} here. The task is about the directory {directory}: look into "
        f"it, e.g. <cmd>ls -l {directory}</cmd>"
    )


def read_instead_notice(named: str, look: str) -> str:
    """Sent when an answer names what no output showed (`logos.protocol.facts`) and a
    listing shows a file no command read that says what the project uses."""
    return (
        f"No output so far shows {named}. Before you answer, read what the project says "
        f"about itself in {look}, in a block such as <cmd>head -n 40 {look}</cmd>"
    )


def unshown_facts_note(named: str) -> str:
    """Said when an answer is asked again because it named what no output showed."""
    return f"No output above shows {named}: answer again, and name only what the outputs show."


def project_commands_notice(commands: Sequence[ProjectCommand]) -> str:
    """Said in the conversation when a how-to question's answer names none of the commands
    the project's files give for it (`logos.protocol.project_commands`). It names where they
    are, not the commands: a later acting turn could copy one and run the project's tests."""
    sources = ", ".join(dict.fromkeys(c.source for c in commands))
    return (
        "The answer names none of the commands the project's files give for this "
        f"({sources}): it is asked again, told them."
    )


def project_commands_note(commands: Sequence[ProjectCommand]) -> str:
    """Said only in the plain answer view (`logos.protocol.plain_answer`), whose turn is held
    to prose: the commands themselves, for the answer to name. Never in the conversation
    (`project_commands_notice`)."""
    given = " or ".join(f"`{c.command}` ({c.source})" for c in commands)
    return f"The project's own files give the command for this: {given}. Answer with it."


def project_description_notice(description: Description) -> str:
    """Said in the conversation when an answer to what the project does does not give what
    its manifest says (`logos.protocol.project_description`)."""
    return (
        f"The answer does not say what {description.source} describes the project as: it is "
        "asked again, told that."
    )


def project_description_note(description: Description) -> str:
    """Said only in the plain answer view (`logos.protocol.plain_answer`): the manifest's own
    description, for the answer to give. WHY "its authors" and "in those words": told "X
    describes the project as …. Answer with what it does", the default model answered the
    same way again."""
    return (
        f'Its authors describe the project in {description.source}: "{description.text}". '
        "Say what the project does in those words."
    )


def running_jobs_notice(jobs: Sequence[JobInfo]) -> str:
    """Sent once when the model answers while jobs still run: they are stopped if it does
    it again."""
    described = "; ".join(
        f"job {job.id} (running for {job.running_s:.0f} s: {_first_line(job.command)})"
        for job in jobs
    )
    first = jobs[0].id
    return (
        f"Your reply has no block, but these jobs are still running: {described}. If you "
        "reply again without a block, that reply is your final answer and they are stopped. "
        f"To see how one ends first, wait for it in a block such as <cmd>wait %{first}</cmd>; "
        f"to stop one now, use `kill %{first}`."
    )


def _first_line(command: str) -> str:
    lines = command.strip().splitlines()
    return lines[0] + (" …" if len(lines) > 1 else "") if lines else ""
