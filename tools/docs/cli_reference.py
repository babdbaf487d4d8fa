"""A command's reference page written from its argparse parser: each (sub)command's usage,
description and options, with their help as `--help` prints it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from tools.docs.model_reference import markdown_text


def parser_reference(parser: argparse.ArgumentParser, level: int = 2) -> str:
    """The parser and every subcommand below it, each under a heading of its own."""
    return "\n".join(_sections(parser, parser.prog, level)) + "\n"


def command_words(parser: argparse.ArgumentParser) -> Iterator[tuple[str, ...]]:
    """Every command the parser takes, as its words (`()`, `("serve",)`, `("memory", "set")`)."""
    yield ()
    for name, subparser in _subcommands(parser):
        for words in command_words(subparser):
            yield (name, *words)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, subparser in action.choices.items():
                if id(subparser) not in seen:  # aliases name one parser twice
                    seen.add(id(subparser))
                    found.append((name, subparser))
    return found


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help, by name."""
    lines: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                lines[choice.dest] = choice.help or ""
    return lines


def _sections(
    parser: argparse.ArgumentParser, title: str, level: int, summary: str = ""
) -> Iterator[str]:
    yield f"{'#' * min(level, 6)} `{title}`"
    yield ""
    usage = parser.format_usage().removeprefix("usage: ").strip()
    yield "```text"
    yield usage
    yield "```"
    yield ""
    if parser.description or summary:
        yield markdown_text(parser.description or summary)
        yield ""
    formatter = parser._get_formatter()
    for group in parser._action_groups:
        rows = [_option_row(formatter, action) for action in group._group_actions]
        rows = [row for row in rows if row]
        if not rows:
            continue
        yield f"**{markdown_text(group.title or 'options')}**"
        yield ""
        if group.description:
            yield markdown_text(group.description)
            yield ""
        yield "| option | what it does |"
        yield "|---|---|"
        yield from rows
        yield ""
    if parser.epilog:
        yield markdown_text(parser.epilog)
        yield ""
    helps = _help_lines(parser)
    for name, subparser in _subcommands(parser):
        yield from _sections(subparser, f"{title} {name}", level + 1, helps.get(name, ""))


def _option_row(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
        return ""
    if isinstance(action, argparse._HelpAction):
        return ""
    if action.option_strings:
        metavar = _metavar(formatter, action)
        spelled = ", ".join(
            f"`{flag}{' ' + metavar if metavar else ''}`" for flag in action.option_strings
        )
    else:
        spelled = f"`{_metavar(formatter, action) or action.dest}`"
    help_text = formatter._expand_help(action) if action.help else ""
    return f"| {spelled} | {markdown_text(help_text) or '—'} |"


def _metavar(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    default = action.dest.upper() if action.option_strings else action.dest
    return formatter._format_args(action, default)
