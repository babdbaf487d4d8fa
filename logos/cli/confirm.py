"""The terminal side of approval: `--approve confirm` asks before each command runs."""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol

import anyio
from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from logos.approvals.approval import ApprovalDecision

_READ_CHUNK = 4096


class PromptSurface(Protocol):
    """The terminal display, which must stand still while a question is open."""

    def prompting(self) -> AbstractContextManager[Console]:
        """Pause live output (hold streamed prose), and give the console to ask on."""
        ...


class ConfirmApprover:
    """Asks at the terminal: yes, no (with a reason for the model), always, or edit.

    One question at a time: blocks that close together wait their turn. Answers are read
    from `input_fd` (a terminal) without blocking the event loop, so Ctrl-C and the
    spinners keep working. `edit` opens $VISUAL or $EDITOR when set (a command may span
    many lines), else reads a replacement line.
    """

    def __init__(self, surface: PromptSurface, input_fd: int, environ: Mapping[str, str]) -> None:
        self._surface = surface
        self._input_fd = input_fd
        self._editor = environ.get("VISUAL") or environ.get("EDITOR") or None
        self._lock = anyio.Lock()
        self._always = False

    async def decide(self, command: str) -> ApprovalDecision:
        async with self._lock:
            if self._always:
                return ApprovalDecision("auto", command, reason="always, as answered earlier")
            with self._surface.prompting() as console:
                return await self._ask_about(console, command)

    async def _ask_about(self, console: Console, command: str) -> ApprovalDecision:
        console.print(
            Panel(
                Syntax(command, "bash", word_wrap=True, background_color="default"),
                title="run this command?",
                title_align="left",
                border_style="yellow",
            )
        )
        while True:
            answer = await self._ask(
                console, "[y]es  [n]o  [a]lways for this run  [e]dit  > ", style="bold"
            )
            if answer is None:
                return ApprovalDecision("no", command, reason="no answer (the input was closed)")
            choice = answer.strip().lower()
            if choice in ("y", "yes"):
                return ApprovalDecision("yes", command)
            if choice in ("n", "no"):
                reason = await self._ask(console, "why not? (sent to the model; Enter to skip) > ")
                return ApprovalDecision("no", command, reason=(reason or "").strip() or None)
            if choice in ("a", "always"):
                self._always = True
                return ApprovalDecision("always", command)
            if choice in ("e", "edit"):
                edited = await self._edit(console, command)
                if edited is not None and edited != command.strip():
                    console.print(Text("will run instead:", style="yellow"))
                    console.print(
                        Syntax(edited, "bash", word_wrap=True, background_color="default")
                    )
                    return ApprovalDecision("edit", command, edited_command=edited)
                console.print(Text("the command is unchanged", style="dim"))
                continue
            console.print(Text("answer y, n, a or e (Ctrl-C stops the run)", style="dim"))

    async def _ask(self, console: Console, question: str, style: str = "") -> str | None:
        console.print(Text(question, style=style), end="")
        console.file.flush()
        try:
            return await read_line(self._input_fd)
        except anyio.get_cancelled_exc_class():
            console.print()  # Ctrl-C: what comes next starts on a line of its own
            raise

    async def _edit(self, console: Console, command: str) -> str | None:
        if self._editor is None:
            line = await self._ask(console, "new command (Enter keeps it) > ")
            return (line.strip() or None) if line is not None else None
        path = _write_temp_script(command)
        try:
            process = await anyio.open_process(
                [*shlex.split(self._editor), path], stdin=None, stdout=None, stderr=None
            )
            status = await process.wait()
            if status != 0:
                console.print(Text(f"the editor exited with {status}", style="red"))
                return None
            return _read_text(path).strip() or None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)


async def read_line(fd: int) -> str | None:
    """One line from `fd` (without its newline), None at end of input; cancellable."""
    data = b""
    while not data.endswith(b"\n"):
        await anyio.wait_readable(fd)
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            return data.decode(errors="replace") if data else None
        data += chunk
    return data[:-1].decode(errors="replace")


def _write_temp_script(command: str) -> str:
    fd, path = tempfile.mkstemp(prefix="logos-edit-", suffix=".sh")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(command.rstrip("\n") + "\n")
    return path


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()
