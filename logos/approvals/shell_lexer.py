"""A shell lexer: the simple commands of a command line, and the scripts they run again.

The text is split the way a POSIX shell splits it (quotes, escapes, `;` `&&` `||` `|` `&`,
newlines, subshells, `$(…)`, backticks, `<(…)`, heredocs, comments), never with a step
that can raise: an unbalanced quote simply runs to the end of the text. Substitutions add
their own commands. Quoted text is one word. Text that a shell will execute is returned as
a script of its own (`embedded_scripts`): `bash -c '…'` (any shell, any flags), `eval …`,
`su`/`runuser`/`flock`/`script -c …`, `env -S …`, `watch …`, `ssh host …`, `parallel …`,
heredocs and here-strings fed to a shell, and what is piped into a shell. Heredocs fed to
anything else are data. Command names reached only through expansion (`$SED`) cannot be
seen.

It serves command policies (`logos.approvals.policy`), which are guard rails, not a security
boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_NESTING = 32
"""Shells, substitutions and quotes nested deeper than this raise `TooDeep`."""

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
_BLANKS = " \t"
_WORD_END = " \t\n;&|()<>"
_PLAIN_WORD = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
_PLAIN_DOUBLE_QUOTED = re.compile(r"[^\"\\$`]+")
_PLAIN_HEREDOC = re.compile(r"[^\\$`]+")
_PLAIN_PARAMETER = re.compile(r"[^{}\\'\"$`]+")
_CONTROL_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|()]")
_REDIRECTION = re.compile(r"<<<|<<-|<<|<>|<&|<|>>|>\||>&|>|&>>|&>")


class TooDeep(Exception):
    """Nesting beyond `MAX_NESTING`: a caller refuses rather than recurse without bound."""


@dataclass(eq=False)
class SimpleCommand:
    """One command of a command line: its words with quotes removed, and its input."""

    words: list[str] = field(default_factory=list)
    stdin_texts: list[str] = field(default_factory=list)
    """Heredoc bodies and here-strings: a script when the command is a shell."""
    piped_from: SimpleCommand | None = None
    redirections: list[tuple[str, str]] = field(default_factory=list)
    """Each redirection's operator and target word (`(">", "out.txt")`, `(">&", "1")`)."""


@dataclass(frozen=True)
class LexedScript:
    """A command line's simple commands, and whether the lexer read all of it as a shell
    would: an unclosed quote, substitution, `${…}` or heredoc runs to the end of the text,
    where a shell would refuse it or read more."""

    commands: list[SimpleCommand]
    complete: bool


def simple_commands(script: str, nesting: int = 0) -> list[SimpleCommand]:
    """The simple commands of `script`, those of its substitutions included; `nesting` is
    how deep `script` already sits in other scripts. Raises TooDeep."""
    return lex_script(script, nesting).commands


def lex_script(script: str, nesting: int = 0) -> LexedScript:
    """`simple_commands`, and whether every quote and substitution was closed."""
    commands: list[SimpleCommand] = []
    unclosed: list[str] = []
    _Lexer(script, nesting, commands, unclosed).run()
    return LexedScript(commands, complete=not unclosed)


@dataclass(frozen=True)
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    expands: bool
    """Unquoted delimiter: `$(…)` and backticks in the body run."""
    command: SimpleCommand


class _Lexer:
    """Splits shell text into simple commands; substitutions add their own commands."""

    def __init__(
        self, text: str, nesting: int, commands: list[SimpleCommand], unclosed: list[str]
    ) -> None:
        if nesting > MAX_NESTING:
            raise TooDeep
        self.text = text
        self.pos = 0
        self.nesting = nesting
        self.commands = commands
        self.unclosed = unclosed
        """What ran to the end of the text unclosed (shared with the nested lexers)."""
        self.heredocs: list[_Heredoc] = []

    def run(self) -> None:
        self._script(inside_parens=False)

    def _script(self, inside_parens: bool) -> None:
        text, end = self.text, len(self.text)
        current = SimpleCommand()
        open_parens = 0
        closed = not inside_parens
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
                closed = True
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
        if not closed:
            self.unclosed.append("$(")
        self._end_command(current, piped=False)

    def _end_command(self, command: SimpleCommand, piped: bool) -> SimpleCommand:
        if command.words:
            self.commands.append(command)
        return SimpleCommand(piped_from=command if piped else None)

    def _redirection(self, command: SimpleCommand) -> None:
        match = _REDIRECTION.match(self.text, self.pos)
        assert match is not None  # called only at "<", ">" or "&>"
        operator = match.group()
        self.pos = match.end()
        while self.pos < len(self.text) and self.text[self.pos] in _BLANKS:
            self.pos += 1
        if self.pos >= len(self.text) or self.text[self.pos] in _WORD_END:
            return  # no target: a syntax error the shell reports itself
        target, quoted = self._word()
        command.redirections.append((operator, target))
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
                self.unclosed.append(f"<<{heredoc.delimiter}")
            else:
                body = self.text[self.pos : match.start()]
                self.pos = min(match.end() + 1, len(self.text))
            heredoc.command.stdin_texts.append(body)
            if heredoc.expands:
                _Lexer(body, self.nesting + 1, self.commands, self.unclosed)._quoted(
                    terminator=None
                )

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
                if closing < 0:
                    closing = end
                    self.unclosed.append("'")
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
                return "".join(parts)
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
        if terminator is not None:
            self.unclosed.append(terminator)
        return "".join(parts)

    def _ansi_c_quoted(self) -> str:
        """`$'…'`: backslash escapes, including `\\'`, end at an unescaped quote."""
        self.pos += 2
        return self._unescaped_until("'", opening="$'", escapable=None)

    def _unescaped_until(
        self, close: str, *, opening: str, escapable: tuple[str, ...] | None
    ) -> str:
        """The text from here to an unescaped `close`, less the backslashes that escape
        (before any character when `escapable` is None, else only before those in it).

        Reading ends past `close`; when the text ends first, `opening` is noted as unclosed.
        """
        text, end = self.text, len(self.text)
        parts: list[str] = []
        while self.pos < end and text[self.pos] != close:
            following = text[self.pos + 1 : self.pos + 2]
            if text[self.pos] == "\\" and (escapable is None or following in escapable):
                parts.append(following)
                self.pos += 2
            else:
                parts.append(text[self.pos])
                self.pos += 1
        if self.pos >= end:
            self.unclosed.append(opening)
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
        if self.nesting > MAX_NESTING:
            raise TooDeep
        self._script(inside_parens=True)
        self.nesting -= 1

    def _parameter(self) -> None:
        """`${…}`: skipped, but substitutions inside it (`${x:-$(cmd)}`) are commands."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise TooDeep
        text, end = self.text, len(self.text)
        while self.pos < end:
            char = text[self.pos]
            if char == "}":
                self.pos += 1
                self.nesting -= 1
                return
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
        self.unclosed.append("${")
        self.nesting -= 1

    def _backticks(self) -> None:
        """Old-style substitution: unescape its text and lex it as a script of its own."""
        self.pos += 1
        script = self._unescaped_until("`", opening="`", escapable=("\\", "`", "$"))
        _Lexer(script, self.nesting + 1, self.commands, self.unclosed).run()


def embedded_scripts(command: SimpleCommand) -> list[str]:
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
