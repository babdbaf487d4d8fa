"""The `<result>` envelope: what the model reads about the commands it asked for.

One `<block>` per command, in the order the model wrote them. Every way a command can end
is said in words — exit code, timeout, signal, out-of-memory kill, runner error, cut
output and where the full output was saved — so the model never has to guess. A command
that went on as a job says so, with its output so far; the end of each job that ended since
the last envelope follows the blocks, as a `<job>` entry.

Near the model's context window, old envelopes are sent again with their outputs elided
(`elide_outputs`): the same blocks, commands and statuses, each stdout/stderr body replaced
by its size, so the model still knows what it ran.

    <result>
    <block index="1">
    $ ls
    <stdout>
    README.md
    </stdout>
    </block>
    </result>
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence

from logos.result import JobEnd, JobStarted, Result

_COMMAND_PREVIEW_CHARS = 120


def format_results(
    results: Sequence[Result],
    *,
    elide_output: bool = False,
    notes: Mapping[int, str] | None = None,
    job_ends: Sequence[JobEnd] = (),
) -> str:
    """Render results as the envelope the model reads next; `elide_output` replaces each
    stdout/stderr body by its size; `notes` (by position in `results`) end their blocks;
    `job_ends` follow the blocks."""
    notes = notes or {}
    entries = [
        _format_result(index, result, elide_output=elide_output, note=notes.get(index - 1))
        for index, result in enumerate(results, start=1)
    ]
    entries += [_format_job_end(end, elide_output=elide_output) for end in job_ends]
    return "<result>\n" + "\n".join(entries) + "\n</result>"


def elide_outputs(
    content: str,
    results: Sequence[Result],
    notes: Mapping[int, str] | None = None,
    job_ends: Sequence[JobEnd] = (),
) -> str | None:
    """`content` (the envelope of `results` with `notes` and `job_ends`, maybe followed by
    notices) with the outputs elided; None when `content` is not that envelope (nothing in
    it, or it was rendered by another version of logos) or when there is no output to
    elide."""
    if not (results or job_ends):
        return None
    envelope = format_results(results, notes=notes, job_ends=job_ends)
    elided = format_results(results, elide_output=True, notes=notes, job_ends=job_ends)
    if elided == envelope or not content.startswith(envelope):
        return None
    return elided + content[len(envelope) :]


def _format_result(
    index: int, result: Result, *, elide_output: bool = False, note: str | None = None
) -> str:
    lines = [f'<block index="{index}">', f"$ {command_preview(result.command)}"]
    status = _describe_status(result)
    if status:
        lines.append(status)
    for name, text, dropped, saved_file in (
        ("stdout", result.stdout, result.stdout_dropped_bytes, result.stdout_file),
        ("stderr", result.stderr, result.stderr_dropped_bytes, result.stderr_file),
    ):
        lines += _stream(name, text, dropped, saved_file, elide_output)
    if result.error is None and not result.stdout and not result.stderr:
        lines.append("(no output so far)" if result.job else "(no output)")
    if note:
        lines.append(f"note: {note}")
    lines.append("</block>")
    return "\n".join(lines)


def _format_job_end(end: JobEnd, *, elide_output: bool = False) -> str:
    """A job's end: how and when it ended, the output after its output so far, its files."""
    result = end.result
    lines = [f'<job id="{end.id}">', f"$ {command_preview(result.command)}"]
    status = _describe_status(result)
    took = _seconds(result.duration_s)
    if result.timed_out:
        lines.append(f"job {end.id} {status}")
    elif status:
        lines.append(f"job {end.id} ended after {took}: {status}")
    else:
        lines.append(f"job {end.id} ended after {took}")
    lines += _stream("stdout", result.stdout, result.stdout_dropped_bytes, None, elide_output)
    lines += _stream("stderr", result.stderr, result.stderr_dropped_bytes, None, elide_output)
    if not result.stdout and not result.stderr:
        lines.append("(no further output)")
    where = _files(result.stdout_file, result.stderr_file)
    if where:
        lines.append(f"note: its whole output is in {where}.")
    lines.append("</job>")
    return "\n".join(lines)


def command_preview(command: str) -> str:
    """The command's first line, shortened: enough for the model to tell blocks apart."""
    lines = command.strip().splitlines() or [""]
    first = lines[0]
    more = len(lines) > 1
    if len(first) > _COMMAND_PREVIEW_CHARS:
        first, more = first[: _COMMAND_PREVIEW_CHARS - 1], True
    return first + (" …" if more else "")


def _describe_status(result: Result) -> str | None:
    """How the command ended, in words; None for a plain success."""
    if result.job is not None:
        return _went_on(result.job, result.duration_s)
    if result.error is not None:
        return f"error: {result.error}"
    if result.timed_out:
        killed = f" ({result.signal_name})" if result.signal_name else ""
        return (
            f"timed out after {_seconds(result.duration_s)}: the command and everything it "
            f"started were killed{killed}; output so far is below"
        )
    if result.oom_killed:
        return "killed by the out-of-memory killer (SIGKILL): it used more memory than allowed"
    if result.signal is not None:
        return f"killed by {result.signal_name}"
    if result.exit_code:
        return f"exit code {result.exit_code}{_exit_hint(result.exit_code)}"
    return None


def _went_on(job: JobStarted, after_s: float) -> str:
    where = _files(job.stdout_file, job.stderr_file)
    rest = f"; the rest goes to {where}" if where else ""
    return (
        f"still running after {_seconds(after_s)}, so it goes on as job {job.id}: its end comes "
        f"in a later result (`wait %{job.id}` waits for it, `kill %{job.id}` stops it). Its "
        f"output so far is below{rest}."
    )


def _files(stdout_file: str | None, stderr_file: str | None) -> str:
    """Where a job's output goes, in words: "F (stdout) and G (stderr)"; "" for nowhere."""
    streams = (("stdout", stdout_file), ("stderr", stderr_file))
    return " and ".join(f"{path} ({name})" for name, path in streams if path)


def _stream(name: str, text: str, dropped: int, saved_file: str | None, elide: bool) -> list[str]:
    if not text:
        return []
    body = text if text.endswith("\n") else text + "\n"
    if elide:
        size = len(body.encode("utf-8", errors="replace"))
        body = f"[output elided to save context: {size} bytes; run the command again if needed]\n"
    lines = [f"<{name}>", body + f"</{name}>"]
    if dropped:
        where = (
            f" The {name} was saved to {saved_file}: read parts of it with a further "
            "command (grep, head, tail, sed -n)."
            if saved_file
            else ""
        )
        lines.append(f"note: {name} was cut: {dropped} bytes omitted from the middle.{where}")
    return lines


def _exit_hint(code: int) -> str:
    if code in (126, 127):
        return " (command not executable or not found)" if code == 126 else " (command not found)"
    if 128 < code < 160:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            return ""
        return f" (a process it ran was killed by {name})"
    return ""


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
