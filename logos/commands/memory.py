"""`remember`, `recall` and `forget`: how the model keeps memory notes across runs.

Commands the loop answers itself (`logos.commands.family`), so they behave the same with
local bash and in a sandbox, and the notes never pass through the sandbox's file system.
Saving and forgetting change what later runs start with, so they go through the run's
approval like a shell command (`MemoryWrites`); reading does not (`MemoryReads`).

A block is taken when its first word is one of them: a form they cannot read is answered
with the form to use, rather than left to the shell's "command not found".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

import anyio.to_thread

from logos.commands.memory_store import MemoryStore, Note, NoteError, normalize_key
from logos.errors import RecordFileError
from logos.options import ExecOptions
from logos.result import Result

_WRITES = re.compile(r"\s*(remember|forget)(?=\s|$)")
_READS = re.compile(r"\s*recall(?=\s|$)")
_REMEMBER = re.compile(r"\s*remember\s+(?P<key>[^:\n]+?)\s*:\s*(?P<text>.+?)\s*", re.DOTALL)
_ONE_KEY = re.compile(r"\s*(?P<verb>recall|forget)(?:[ \t]+(?P<key>[^\n]*?))?\s*")
_LISTED_CHARS = 100
_LISTED_NOTES = 50
"""What a bare `recall` shows: enough of the notes to know which one to recall."""


def memory_usage() -> tuple[str, ...]:
    """What the system prompt says about memory notes."""
    return (
        "Memory notes outlive this run: new runs see them in their system prompt. Keep one "
        "for a fact a later run would otherwise have to find again.",
        "`remember build command: make -j4 test` saves a note under a key (the text may "
        "span lines; the same key replaces it).",
        "`recall build command` shows a note; `recall` alone lists them.",
        "`forget build command` deletes a note.",
    )


class _MemoryFamily:
    """What both memory families share: the notes' store, and blocks taken by first word."""

    _taken: re.Pattern[str]
    """The first words of the blocks this family answers."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def matches(self, command: str) -> bool:
        return self._taken.match(command) is not None


class MemoryWrites(_MemoryFamily):
    """`remember` and `forget` (a `logos.commands.family.CommandFamily`)."""

    needs_approval = True
    """A note reaches every later run's prompt: saving one is an action, like a command."""
    _taken = _WRITES

    @property
    def usage(self) -> Sequence[str]:
        return memory_usage()

    async def run(self, command: str, options: ExecOptions) -> Result:
        remember = _REMEMBER.fullmatch(command)
        if remember is not None:
            key, text = _unquoted(remember["key"]), remember["text"]
            return await _answer(command, lambda: _saved(self._store.remember(key, text)))
        forget = _ONE_KEY.fullmatch(command)
        if forget is not None and forget["verb"] == "forget" and forget["key"]:
            key = _unquoted(forget["key"])
            return await _answer(command, lambda: _forgotten(self._store.forget(key), key))
        return _misread(command)


class MemoryReads(_MemoryFamily):
    """`recall` (a `logos.commands.family.CommandFamily`)."""

    needs_approval = False
    """Reading the user's own notes changes nothing."""
    _taken = _READS

    @property
    def usage(self) -> Sequence[str]:
        return ()  # said once, by MemoryWrites

    async def run(self, command: str, options: ExecOptions) -> Result:
        recall = _ONE_KEY.fullmatch(command)
        if recall is None:
            return _misread(command)
        if not recall["key"]:
            return await _answer(command, lambda: _listing(self._store.notes()))
        key = _unquoted(recall["key"])
        return await _answer(command, lambda: _recalled(self._store.recall(key), key))


def memory_commands(store: MemoryStore) -> tuple[MemoryWrites, MemoryReads]:
    """The memory commands of a run that keeps its notes in `store`."""
    return MemoryWrites(store), MemoryReads(store)


async def _answer(command: str, answer: Callable[[], str]) -> Result:
    """Run a store call off the event loop (it reads, locks and writes a file); a note it
    cannot keep, or a notes file it cannot use, is the command's error, in words."""
    started = time.monotonic()
    try:
        text = await anyio.to_thread.run_sync(answer)
    except (NoteError, LookupError, RecordFileError) as exc:
        return Result(command=command, error=str(exc), duration_s=time.monotonic() - started)
    return Result(command=command, stdout=text, exit_code=0, duration_s=time.monotonic() - started)


def _misread(command: str) -> Result:
    verb = command.split(maxsplit=1)[0]
    return Result(
        command=command,
        error=(
            f"`{verb}` is a memory command, and this form is not one it reads: write "
            "`remember KEY: TEXT`, `recall KEY`, `recall` or `forget KEY`, alone in its block"
        ),
    )


def _unquoted(key: str) -> str:
    """The key without the quotes a model may put around it, as it would in a shell."""
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        return key[1:-1]
    return key


def _saved(note: Note) -> str:
    return f"saved the note {note.key!r}: new runs start with it in their system prompt.\n"


def _forgotten(found: bool, key: str) -> str:
    if not found:
        raise _no_note(key)
    return f"forgot the note {normalize_key(key)!r}.\n"


def _recalled(note: Note | None, key: str) -> str:
    if note is None:
        raise _no_note(key)
    return f"{note.key} (saved {note.updated_at}):\n{note.text}\n"


def _no_note(key: str) -> LookupError:
    return LookupError(f"there is no note {normalize_key(key)!r}: `recall` lists the notes")


def _listing(notes: list[Note]) -> str:
    if not notes:
        return "no notes yet: `remember KEY: TEXT` saves one.\n"
    lines = [f"- {note.key}: {_first_words(note.text)}" for note in notes[:_LISTED_NOTES]]
    if len(notes) > _LISTED_NOTES:
        lines.append(f"({len(notes) - _LISTED_NOTES} older notes are not listed)")
    heading = "1 note" if len(notes) == 1 else f"{len(notes)} notes, the most recent first"
    return f"{heading}:\n" + "\n".join(lines) + "\n"


def _first_words(text: str) -> str:
    shown = text.splitlines()[0][:_LISTED_CHARS]
    return shown if shown == text else shown + " …"
