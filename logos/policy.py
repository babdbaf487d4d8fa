"""Command policies: decide, before a command runs, whether the model may run it.

A policy takes the command text and returns None (allowed) or the message the model gets
instead of a result. The default refuses in-place file edits (`sed -i`, `perl -i`, `ruby -i`,
`gawk -i inplace`): they change files invisibly to review and cannot be undone, while the
harness wants every edit where it can see it (a heredoc, or a new file moved into place).

This is a guard rail against a habit of cooperative models, not a security boundary; the
sandbox is the boundary. Its design follows from that:

* The command is lexed the way a POSIX shell splits it (quotes, escapes, `;` `&&` `||` `|`
  `&`, newlines, subshells, `$(…)`, backticks, `<(…)`, heredocs, comments), never with a
  step that can raise: an unbalanced quote simply runs to the end of the text.
* Any word, in any position of a simple command, whose file name is `sed`/`gsed`, `perl`,
  `ruby` or `gawk`/`awk` starts an option check. WHY any position: the same rule then covers
  `sudo -u x sed -i`, `env A=1 sed -i`, `xargs -0 sed -i`, `find … -exec sed -i {} +`,
  `timeout 5 sed -i`, `busybox sed -i` and wrappers nobody listed. A false alarm (e.g. the
  unquoted `echo sed -i`) costs the model one rewrite; a miss edits a file unseen.
* Quoted text is one word, so `echo "sed -i"` and `git commit -m "use sed -i"` pass, while
  text that a shell will execute is checked again as a script: `bash -c '…'` (any shell,
  any flags), `eval …`, `su`/`runuser`/`flock`/`script -c …`, `env -S …`, `watch …`,
  `ssh host …`, `parallel …`, heredocs and here-strings fed to a shell, and what is piped into
  a shell. Heredocs fed to anything else are data: writing a file whose text mentions
  `sed -i` is exactly the recommended way to edit.
* Command names reached only through expansion (`$SED -i`) cannot be seen and pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

CommandPolicy: TypeAlias = Callable[[str], str | None]
"""Returns None to allow the command, or the message the model gets instead of a result."""

_MAX_NESTING = 32

_SED_NAMES = frozenset({"sed", "gsed"})
_AWK_NAMES = frozenset({"gawk", "awk"})
_PERL_NAME = re.compile(r"perl(?:5(?:\.\d+)*)?")
_RUBY_NAME = re.compile(r"ruby(?:\d+(?:\.\d+)*)?")
_SHELL_NAMES = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"})
# Commands that run the rest of their arguments as a shell command line.
_ARGUMENT_RUNNERS = frozenset({"eval", "watch", "ssh", "parallel"})
# Commands that run the value of one option as a shell command line.
_OPTION_RUNNERS: dict[str, tuple[str, str]] = {
    "su": ("-c", "--command"),
    "runuser": ("-c", "--command"),
    "flock": ("-c", "--command"),
    "script": ("-c", "--command"),
    "env": ("-S", "--split-string"),
}
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
_BLANKS = " \t"
_WORD_END = " \t\n;&|()<>"
_PLAIN_WORD = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
_PLAIN_DOUBLE_QUOTED = re.compile(r"[^\"\\$`]+")
_PLAIN_HEREDOC = re.compile(r"[^\\$`]+")
_PLAIN_PARAMETER = re.compile(r"[^{}\\'\"$`]+")
_CONTROL_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|()]")
_REDIRECTION = re.compile(r"<<<|<<-|<<|<>|<&|<|>>|>\||>&|>|&>>|&>")


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
    except _TooDeep:
        return (
            f"Refused: this command nests shells, substitutions or quotes more than "
            f"{_MAX_NESTING} levels deep, too deep to check for in-place edits "
            "(sed -i, perl -i). The command was not run. Split it into simpler commands."
        )
    if edit is None:
        return None
    return (
        f"Refused: `{edit}` edits a file in place. In-place edits are invisible to review "
        "and cannot be undone, and this harness wants every edit where it can see it. "
        "The command was not run. Instead, write the whole file with a heredoc "
        "(cat > path <<'EOF' … EOF), or write a new file and move it over the old one "
        "(sed 's/old/new/' f > f.new && mv f.new f), or use a short Python script that "
        "reads, changes and writes the file."
    )


class _TooDeep(Exception):
    """Nesting beyond `_MAX_NESTING`: refuse rather than recurse without bound."""


@dataclass(eq=False)
class _SimpleCommand:
    words: list[str] = field(default_factory=list)
    stdin_texts: list[str] = field(default_factory=list)
    """Heredoc bodies and here-strings: a script when the command is a shell."""
    piped_from: _SimpleCommand | None = None


@dataclass(frozen=True)
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    expands: bool
    """Unquoted delimiter: `$(…)` and backticks in the body run."""
    command: _SimpleCommand


class _Lexer:
    """Splits shell text into simple commands; substitutions add their own commands."""

    def __init__(self, text: str, nesting: int, commands: list[_SimpleCommand]) -> None:
        if nesting > _MAX_NESTING:
            raise _TooDeep
        self.text = text
        self.pos = 0
        self.nesting = nesting
        self.commands = commands
        self.heredocs: list[_Heredoc] = []

    def run(self) -> None:
        self._script(inside_parens=False)

    def _script(self, inside_parens: bool) -> None:
        text, end = self.text, len(self.text)
        current = _SimpleCommand()
        open_parens = 0
        while self.pos < end:
            char = text[self.pos]
            if char == "\n":
                self.pos += 1
                current = self._end_command(current, piped=False)
                self._read_heredoc_bodies()
            elif char in _BLANKS:
                self.pos += 1
            elif text.startswith("\\\n", self.pos):
                self.pos += 2
            elif char == "#":
                newline = text.find("\n", self.pos)
                self.pos = end if newline < 0 else newline
            elif char == ")" and inside_parens and open_parens == 0:
                self.pos += 1
                break
            elif text.startswith(("<(", ">("), self.pos):
                current.words.append(self._word()[0])
            elif char in "<>" or text.startswith("&>", self.pos):
                self._redirection(current)
            elif char in ";&|()":
                match = _CONTROL_OPERATOR.match(text, self.pos)
                assert match is not None  # every character of ";&|()" starts an operator
                operator = match.group()
                self.pos = match.end()
                if operator == "(":
                    open_parens += 1
                elif operator == ")":
                    open_parens = max(0, open_parens - 1)
                current = self._end_command(current, piped=operator in ("|", "|&"))
            else:
                word, quoted = self._word()
                at_redirection = self.pos < end and text[self.pos] in "<>"
                is_fd = word.isdigit() or (word.startswith("{") and word.endswith("}"))
                if not (at_redirection and is_fd and not quoted):
                    current.words.append(word)
        self._end_command(current, piped=False)

    def _end_command(self, command: _SimpleCommand, piped: bool) -> _SimpleCommand:
        if command.words:
            self.commands.append(command)
        return _SimpleCommand(piped_from=command if piped else None)

    def _redirection(self, command: _SimpleCommand) -> None:
        match = _REDIRECTION.match(self.text, self.pos)
        assert match is not None  # called only at "<", ">" or "&>"
        operator = match.group()
        self.pos = match.end()
        while self.pos < len(self.text) and self.text[self.pos] in _BLANKS:
            self.pos += 1
        if self.pos >= len(self.text) or self.text[self.pos] in _WORD_END:
            return  # no target: a syntax error the shell reports itself
        target, quoted = self._word()
        if operator in ("<<", "<<-"):
            self.heredocs.append(_Heredoc(target, operator == "<<-", not quoted, command))
        elif operator == "<<<":
            command.stdin_texts.append(target)

    def _read_heredoc_bodies(self) -> None:
        """Consume the bodies of the heredocs opened on the line that just ended."""
        heredocs, self.heredocs = self.heredocs, []
        for heredoc in heredocs:
            indent = r"\t*" if heredoc.strip_tabs else ""
            closing = re.compile(rf"^{indent}{re.escape(heredoc.delimiter)}$", re.MULTILINE)
            match = closing.search(self.text, self.pos)
            if match is None:
                body = self.text[self.pos :]
                self.pos = len(self.text)
            else:
                body = self.text[self.pos : match.start()]
                self.pos = min(match.end() + 1, len(self.text))
            heredoc.command.stdin_texts.append(body)
            if heredoc.expands:
                _Lexer(body, self.nesting + 1, self.commands)._quoted(terminator=None)

    def _word(self) -> tuple[str, bool]:
        """One word with quotes removed, and whether any part of it was quoted."""
        text, end = self.text, len(self.text)
        parts: list[str] = []
        quoted = False
        if text.startswith(("<(", ">("), self.pos):
            start = self.pos
            self.pos += 2
            self._substitution()
            parts.append(text[start : self.pos])
        while self.pos < end:
            char = text[self.pos]
            if char in _WORD_END:
                break
            quoted = quoted or char in "'\"\\"
            if char == "'":
                closing = text.find("'", self.pos + 1)
                closing = end if closing < 0 else closing
                parts.append(text[self.pos + 1 : closing])
                self.pos = closing + 1
            elif char == '"':
                self.pos += 1
                parts.append(self._quoted(terminator='"'))
            elif char == "\\":
                escaped = text[self.pos + 1 : self.pos + 2]
                parts.append("" if escaped == "\n" else escaped)
                self.pos += 2
            elif text.startswith("$'", self.pos):
                quoted = True
                parts.append(self._ansi_c_quoted())
            elif char in "$`":
                parts.append(self._expansion())
            else:
                match = _PLAIN_WORD.match(text, self.pos)
                assert match is not None  # every other character is a plain word character
                parts.append(match.group())
                self.pos = match.end()
        return "".join(parts), quoted

    def _quoted(self, terminator: str | None) -> str:
        """Double-quoted text (or an expanding heredoc body when `terminator` is None)."""
        text, end = self.text, len(self.text)
        plain = _PLAIN_DOUBLE_QUOTED if terminator else _PLAIN_HEREDOC
        parts: list[str] = []
        while self.pos < end:
            char = text[self.pos]
            if char == terminator:
                self.pos += 1
                break
            if char == "\\":
                escaped = text[self.pos + 1 : self.pos + 2]
                if escaped != "\n":
                    parts.append(escaped if escaped in '$`"\\' else "\\" + escaped)
                self.pos += 2
            elif char in "$`":
                parts.append(self._expansion())
            else:
                match = plain.match(text, self.pos)
                assert match is not None  # the characters handled above end plain runs
                parts.append(match.group())
                self.pos = match.end()
        return "".join(parts)

    def _ansi_c_quoted(self) -> str:
        """`$'…'`: backslash escapes, including `\\'`, end at an unescaped quote."""
        text, end = self.text, len(self.text)
        self.pos += 2
        parts: list[str] = []
        while self.pos < end and text[self.pos] != "'":
            if text[self.pos] == "\\":
                parts.append(text[self.pos + 1 : self.pos + 2])
                self.pos += 2
            else:
                parts.append(text[self.pos])
                self.pos += 1
        self.pos += 1
        return "".join(parts)

    def _expansion(self) -> str:
        """`$(…)`, `$((…))`, `${…}`, backticks or a lone `$`; returns the source text."""
        text = self.text
        start = self.pos
        if text.startswith("$(", start):
            self.pos += 2
            self._substitution()
        elif text.startswith("${", start):
            self.pos += 2
            self._parameter()
        elif text[start] == "`":
            self._backticks()
        else:
            self.pos += 1
        return text[start : self.pos]

    def _substitution(self) -> None:
        """The script of `$(…)` or `<(…)`, read up to its closing parenthesis."""
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise _TooDeep
        self._script(inside_parens=True)
        self.nesting -= 1

    def _parameter(self) -> None:
        """`${…}`: skipped, but substitutions inside it (`${x:-$(cmd)}`) are commands."""
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise _TooDeep
        text, end = self.text, len(self.text)
        while self.pos < end:
            char = text[self.pos]
            if char == "}":
                self.pos += 1
                break
            if char == "\\":
                self.pos += 2
            elif char == "'":
                closing = text.find("'", self.pos + 1)
                self.pos = end if closing < 0 else closing + 1
            elif char == '"':
                self.pos += 1
                self._quoted(terminator='"')
            elif char in "$`":
                self._expansion()
            elif char == "{":
                self.pos += 1
                self._parameter()
            else:
                match = _PLAIN_PARAMETER.match(text, self.pos)
                assert match is not None  # the characters handled above end plain runs
                self.pos = match.end()
        self.nesting -= 1

    def _backticks(self) -> None:
        """Old-style substitution: unescape its text and lex it as a script of its own."""
        text, end = self.text, len(self.text)
        self.pos += 1
        parts: list[str] = []
        while self.pos < end and text[self.pos] != "`":
            if text[self.pos] == "\\" and text[self.pos + 1 : self.pos + 2] in ("\\", "`", "$"):
                parts.append(text[self.pos + 1])
                self.pos += 2
            else:
                parts.append(text[self.pos])
                self.pos += 1
        self.pos += 1
        _Lexer("".join(parts), self.nesting + 1, self.commands).run()


def _find_in_place_edit(script: str, nesting: int) -> str | None:
    """The first in-place edit in `script` as "tool flag" (e.g. "sed -i.bak"), else None."""
    commands: list[_SimpleCommand] = []
    _Lexer(script, nesting, commands).run()
    for command in commands:
        edit = _in_place_edit_in_words(command.words)
        if edit is not None:
            return edit
        for embedded in _embedded_scripts(command):
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


def _embedded_scripts(command: _SimpleCommand) -> list[str]:
    """Texts that this command hands to a shell to run."""
    scripts: list[str] = []
    words = command.words
    for index, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        if name in _SHELL_NAMES:
            script = _shell_command_string(words[index + 1 :])
            if script is not None:
                scripts.append(script)
            else:
                scripts.extend(command.stdin_texts)
                source = command.piped_from
                if source is not None:
                    scripts.append(" ".join(source.words[1:]))
                    scripts.extend(source.stdin_texts)
        elif name in _ARGUMENT_RUNNERS:
            scripts.append(" ".join(words[index + 1 :]))
        elif name in _OPTION_RUNNERS:
            script = _option_value(words[index + 1 :], *_OPTION_RUNNERS[name])
            if script is not None:
                scripts.append(script)
    # WHY dedupe: `bash bash <<EOF` must not check (and nest into) the same body twice.
    return list(dict.fromkeys(scripts))


def _shell_command_string(arguments: list[str]) -> str | None:
    """The script of `sh -c SCRIPT` (flags like `-euxc`, `-o pipefail` allowed), else None."""
    has_c = False
    options_done = False
    skip_next = False
    for argument in arguments:
        if skip_next:
            skip_next = False
        elif options_done or not argument.startswith(("-", "+")):
            return argument if has_c else None
        elif argument in ("--", "-"):
            options_done = True
        elif argument.startswith("--"):
            skip_next = argument in ("--rcfile", "--init-file")
        else:
            has_c = has_c or (argument[0] == "-" and "c" in argument)
            skip_next = argument[-1] in "oO"
    return None


def _option_value(arguments: list[str], short: str, long: str) -> str | None:
    for index, argument in enumerate(arguments):
        if argument in (short, long):
            return arguments[index + 1] if index + 1 < len(arguments) else None
        if argument.startswith(long + "="):
            return argument[len(long) + 1 :]
        if argument.startswith(short) and not argument.startswith("--"):
            return argument[len(short) :]
    return None
