"""Command policies: decide, before a command runs, whether the model may run it.

A policy takes the command text and returns None (allowed) or the message the model gets
instead of a result. The default refuses in-place file edits (`sed -i`, `perl -i`, `ruby -i`,
`gawk -i inplace`): they change files invisibly to review and cannot be undone, while the
harness wants every edit where it can see it (a heredoc, or a new file moved into place).

This is a guard rail against a habit of cooperative models, not a security boundary; the
sandbox is the boundary. Its design follows from that:

* The command is lexed the way a POSIX shell splits it (`logos.approvals.shell_lexer`), so quoted
  text is one word: `echo "sed -i"` and `git commit -m "use sed -i"` pass, while text that a
  shell will execute (`bash -c '…'`, `eval …`, heredocs fed to a shell…) is checked again as
  a script. Writing a file whose text mentions `sed -i` is exactly the recommended way to
  edit. Command names reached only through expansion (`$SED -i`) cannot be seen and pass.
* Any word, in any position of a simple command, whose file name is `sed`/`gsed`, `perl`,
  `ruby` or `gawk`/`awk` starts an option check. WHY any position: the same rule then covers
  `sudo -u x sed -i`, `env A=1 sed -i`, `xargs -0 sed -i`, `find … -exec sed -i {} +`,
  `timeout 5 sed -i`, `busybox sed -i` and wrappers nobody listed. A false alarm (e.g. the
  unquoted `echo sed -i`) costs the model one rewrite; a miss edits a file unseen.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import TypeAlias

from logos.approvals.shell_lexer import MAX_NESTING, TooDeep, embedded_scripts, simple_commands
from logos.protocol.task_files import written_over

CommandPolicy: TypeAlias = Callable[[str], str | None]
"""Returns None to allow the command, or the message the model gets instead of a result."""

_SED_NAMES = frozenset({"sed", "gsed"})
_AWK_NAMES = frozenset({"gawk", "awk"})
_PERL_NAME = re.compile(r"perl(?:5(?:\.\d+)*)?")
_RUBY_NAME = re.compile(r"ruby(?:\d+(?:\.\d+)*)?")
# GNU sed options whose value may be the next word.
_SED_LONG_WITH_VALUE = ("expression", "file", "line-length")
# gawk options whose value is the next word.
_AWK_OPTIONS_WITH_VALUE = frozenset(
    {
        "-f",
        "-v",
        "-F",
        "-e",
        "-E",
        "-l",
        "--file",
        "--assign",
        "--field-separator",
        "--source",
        "--exec",
        "--load",
    }
)

_OCTAL_NUMBER = re.compile(r"[0-7]+")
_HEX_NUMBER = re.compile(r"x[0-9a-fA-F]*")


def allow_all(command: str) -> None:
    """A policy that allows every command."""


def chain_policies(*policies: CommandPolicy) -> CommandPolicy:
    """One policy made of several: the first refusal wins."""

    def chained(command: str) -> str | None:
        for policy in policies:
            refusal = policy(command)
            if refusal is not None:
                return refusal
        return None

    return chained


def check_command(command: str) -> str | None:
    """The default policy: refuse in-place file edits, wherever they hide in the command."""
    try:
        edit = _find_in_place_edit(command, 0)
    except TooDeep:
        return (
            f"Refused: this command nests shells, substitutions or quotes more than "
            f"{MAX_NESTING} levels deep, too deep to check for in-place edits "
            "(sed -i, perl -i). The command was not run. Split it into simpler commands."
        )
    if edit is None:
        return None
    instead = _sed_without_in_place(command)
    what_to_do = (
        f"Run this instead, which does the same through a new file: <cmd>{instead}</cmd>"
        if instead is not None
        else "Instead, write the changed text to a new file and move that over the old one "
        "(sed without -i, then mv), or write the whole file with a heredoc."
    )
    return (
        f"Refused: `{edit}` edits a file in place, invisible to review and impossible to "
        f"undo; the command was not run. {what_to_do}"
    )


def _sed_without_in_place(command: str) -> str | None:
    """`sed -i SCRIPT FILE` as `sed SCRIPT FILE > FILE.new && mv FILE.new FILE`, when the
    command is exactly that (one plain `-i`, one script, one file); else None.

    WHY: a small model told to "write a new file and move it" rarely manages; one that is
    handed the very command copies it, and the edit is still visible in the conversation."""
    try:
        commands = simple_commands(command)
    except TooDeep:
        return None
    if len(commands) != 1:
        return None
    only = commands[0]
    if only.redirections or only.piped_from is not None or only.stdin_texts:
        return None
    words = only.words
    if len(words) != 4 or words[0] not in _SED_NAMES or words[1] != "-i":
        return None
    script, target = words[2], words[3]
    if target.startswith("-") or script.startswith("-"):
        return None
    return written_over(f"{words[0]} {shlex.quote(script)} {shlex.quote(target)}", target)


def _find_in_place_edit(script: str, nesting: int) -> str | None:
    """The first in-place edit in `script` as "tool flag" (e.g. "sed -i.bak"), else None."""
    for command in simple_commands(script, nesting):
        edit = _in_place_edit_in_words(command.words)
        if edit is not None:
            return edit
        for embedded in embedded_scripts(command):
            edit = _find_in_place_edit(embedded, nesting + 1)
            if edit is not None:
                return edit
    return None


def _in_place_edit_in_words(words: list[str]) -> str | None:
    for index, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        if name in _SED_NAMES:
            flag = _sed_in_place_flag(words[index + 1 :])
        elif _PERL_NAME.fullmatch(name):
            flag = _switch_in_place_flag(
                words[index + 1 :], takes_value="eEIMmFxdDC", next_word="eEI"
            )
        elif _RUBY_NAME.fullmatch(name):
            flag = _switch_in_place_flag(
                words[index + 1 :], takes_value="eErICEFKTWx", next_word="eErICE"
            )
        elif name in _AWK_NAMES:
            flag = _awk_in_place_flag(words[index + 1 :])
        else:
            continue
        if flag is not None:
            return f"{name} {flag}"
    return None


def _sed_in_place_flag(arguments: list[str]) -> str | None:
    """GNU sed takes options anywhere among its operands, so every argument is checked."""
    skip_next = False
    for argument in arguments:
        if skip_next:
            skip_next = False
        elif argument in ("--", ";", "+"):  # `;` and `+` end a `find -exec` command
            return None
        elif argument.startswith("--"):
            name, has_value, _ = argument[2:].partition("=")
            if name and "in-place".startswith(name):
                return argument
            skip_next = not has_value and any(
                option.startswith(name) for option in _SED_LONG_WITH_VALUE
            )
        elif argument.startswith("-") and len(argument) > 1:
            for position, letter in enumerate(argument[1:], start=1):
                if letter == "i":
                    return argument
                if letter in "efl":
                    skip_next = position == len(argument) - 1
                    break
    return None


def _switch_in_place_flag(arguments: list[str], takes_value: str, next_word: str) -> str | None:
    """Perl and Ruby switches: bundled letters, read up to the first non-switch argument.

    Letters in `takes_value` take the rest of their word as value (or, for those in
    `next_word`, the next word when nothing follows them); `-0` and `-l` take digits.
    """
    skip_next = False
    for argument in arguments:
        if skip_next:
            skip_next = False
            continue
        if argument == "--" or not argument.startswith("-") or argument == "-":
            return None
        if argument.startswith("--"):
            continue
        position = 1
        while position < len(argument):
            letter = argument[position]
            if letter == "i":
                return argument
            if letter in takes_value:
                skip_next = position == len(argument) - 1 and letter in next_word
                break
            position += 1
            if letter in "0l":
                digits = _HEX_NUMBER if argument.startswith("0x", position - 1) else _OCTAL_NUMBER
                match = digits.match(argument, position)
                position = match.end() if match else position
    return None


def _awk_in_place_flag(arguments: list[str]) -> str | None:
    """gawk's in-place mode is an extension loaded with `-i inplace` / `--include=inplace`."""
    skip_next = False
    for index, argument in enumerate(arguments):
        if skip_next:
            skip_next = False
            continue
        if argument in ("--", "-") or not argument.startswith("-"):
            return None
        following = arguments[index + 1] if index + 1 < len(arguments) else ""
        if argument.startswith(("-i", "--include")):
            attached = argument.partition("=")[2] if argument.startswith("--") else argument[2:]
            value = attached or following
            if value.rsplit("/", 1)[-1] in ("inplace", "inplace.awk"):
                return argument if attached else f"{argument} {value}"
            skip_next = not attached
        else:
            skip_next = argument in _AWK_OPTIONS_WITH_VALUE
    return None
