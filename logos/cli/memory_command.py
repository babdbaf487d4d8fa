"""`logos memory`: the user's side of the memory notes (`logos.commands.memory_store`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TextIO

from logos.cli.errors import EXIT_OK, EXIT_STOPPED, CliError
from logos.commands.memory_store import MemoryStore, NoteError, normalize_key


def memory_command(
    args: argparse.Namespace, store: MemoryStore, out: TextIO, read_text: Callable[[str], str]
) -> int:
    """Run one action; `read_text` reads TEXT (`-` means stdin). Exit 1: no such note."""
    try:
        action = args.memory_action
        if action == "list":
            _list(store, out)
        elif action == "show":
            found = store.recall(args.key)
            if found is None:
                raise _no_note(args.key, "")
            out.write(found.text + "\n")
        elif action == "set":
            saved = store.remember(args.key, read_text(args.text))
            out.write(f"saved {saved.key!r}\n")
        elif store.forget(args.key):
            out.write(f"forgot {normalize_key(args.key)!r}\n")
        else:
            raise _no_note(args.key, " to forget")
    except NoteError as exc:
        raise CliError(str(exc)) from None
    return EXIT_OK


def _list(store: MemoryStore, out: TextIO) -> None:
    notes = store.notes()
    for note in notes:
        out.write(f"{note.key}\t{note.updated_at}\t{note.text.splitlines()[0]}\n")
    if not notes:
        out.write(f"no notes yet: logos memory set KEY TEXT saves one (in {store.path})\n")


def _no_note(key: str, what: str) -> CliError:
    return CliError(
        f"no note {normalize_key(key)!r}{what}: logos memory list shows them", EXIT_STOPPED
    )
