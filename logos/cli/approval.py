"""Approval: who decides whether each of the model's commands runs.

Modes: `auto` runs everything, `confirm` asks the user at the terminal, `never-run` runs
nothing (a dry run). Approval is a Runner wrapper (`ApprovalRunner`), so the loop does not
know it exists: a declined command simply comes back as a `Result` with `error` set.

What the model sees for each decision:

* yes / always / auto: the command's real result.
* no: `Result.error` = "the user declined to run this command: <reason>".
* never-run: `Result.error` = "not run: approval mode never-run".
* edit: the edited command runs; `Result.command` is the edited text (so the `$` line of
  the envelope shows what really ran) and stderr starts with `EDITED_NOTE`, because an
  edit inside a multi-line command would not show in the envelope's first-line preview.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeAlias

import anyio
from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from logos.callback import invoke_callback
from logos.cli.paths import utc_now
from logos.options import ExecOptions
from logos.result import Result
from logos.runner import Runner

ApprovalMode: TypeAlias = Literal["auto", "confirm", "never-run"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("auto", "confirm", "never-run")
ApprovalAction: TypeAlias = Literal["auto", "yes", "no", "always", "edit", "never-run"]

NEVER_RUN_ERROR = "not run: approval mode never-run"
DECLINED_ERROR = "the user declined to run this command"
EDITED_NOTE = "[logos: the user edited this command before it ran; the $ line shows what ran]\n"
_READ_CHUNK = 4096


@dataclass(frozen=True)
class ApprovalDecision:
    """One decision about one command, as the audit log and the trajectory record it."""

    action: ApprovalAction
    command: str
    """What the model asked to run."""
    edited_command: str | None = None
    """What ran instead, after an `edit`."""
    reason: str | None = None
    time: str = field(default_factory=utc_now)
    """UTC, ISO 8601."""


class Approver(Protocol):
    async def decide(self, command: str) -> ApprovalDecision: ...


OnDecision = Callable[[ApprovalDecision], Awaitable[None] | None]


class ApprovalRunner(Runner):
    """Asks `approver` about each command, then runs it on `inner` or explains why not.

    `on_decision` sees every decision first (the audit log and the trajectory use it).
    """

    def __init__(
        self, inner: Runner, approver: Approver, on_decision: OnDecision | None = None
    ) -> None:
        self.inner = inner
        self._approver = approver
        self._on_decision = on_decision

    async def run(self, command: str, options: ExecOptions) -> Result:
        decision = await self._approver.decide(command)
        await invoke_callback(self._on_decision, decision)
        if decision.action == "never-run":
            return Result(command=command, error=NEVER_RUN_ERROR)
        if decision.action == "no":
            return Result(command=command, error=declined_error(decision.reason))
        if decision.action == "edit" and decision.edited_command is not None:
            result = await self.inner.run(decision.edited_command, options)
            return replace(
                result, command=decision.edited_command, stderr=EDITED_NOTE + result.stderr
            )
        return await self.inner.run(command, options)

    async def aclose(self) -> None:
        """Close the inner runner (kills leftover background jobs, ends a sandbox session)."""
        await self.inner.aclose()


def declined_error(reason: str | None) -> str:
    reason = (reason or "").strip()
    return f"{DECLINED_ERROR}: {reason}" if reason else f"{DECLINED_ERROR} (no reason given)"


class AutoApprover:
    """Runs everything (the sandbox default, or `--yes`)."""

    async def decide(self, command: str) -> ApprovalDecision:
        return ApprovalDecision("auto", command)


class NeverRunApprover:
    """Runs nothing: a dry run that shows what the model would do."""

    async def decide(self, command: str) -> ApprovalDecision:
        return ApprovalDecision("never-run", command)


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
