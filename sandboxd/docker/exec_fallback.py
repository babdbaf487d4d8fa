"""The fallback for images without python3: one `docker exec` per command.

Slower than the supervisor (an exec costs ~60 ms) but needs only /bin/sh, setsid and sleep
in the image (busybox has them). docker-py's exec has no timeout and no kill, so the command
is wrapped to kill its own process group at the deadline inside the container, and the host
keeps a backstop: past the deadline it kills the exec's processes through /proc (works when
the daemon sees the host's pids and may signal them), else the caller removes the container.
The wrapper finds its tools in a fixed PATH; the command's env (the non-interactive one under
the request's) is set in the command's own shell only.

Each exec holds a worker thread for as long as its command runs: the backend gives them an
engine client and threads of their own (sandboxd.docker.engine), apart from container starts.

Differences from the supervisor, by design of a fallback: the timeout is a SIGKILL without
a SIGTERM grace, a cut output is not saved inside the container, OOM kills are not told apart
from other SIGKILLs.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import docker.errors
from docker.utils.socket import read as read_socket

from logos.result import Result
from logos.runners.capture import OutputCapture
from sandboxd.docker.engine import api_error_text

_NO_WORKDIR_MARKER = "sandboxd: no such working directory"
_NO_WORKDIR_STATUS = 127
_TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
"""Where the wrapper looks for `setsid` and `sleep`: never a PATH the request chose."""
# WHY the request's env reaches only the command: the exec's environment is the wrapper's
# too, and a request's PATH would choose the `setsid` and `sleep` that enforce its timeout.
# Arguments: $1 working directory, $2 seconds until SIGKILL, $3 the command, then the
# request's env as NAME=VALUE, exported in the command's own shell right before it runs.
# The watchdog is killed by pid first (it may not have called setsid yet), then by group
# (its sleep).
_WRAPPER = f"""setsid=$(PATH={_TOOL_PATH}; command -v setsid) \
  && sleep=$(PATH={_TOOL_PATH}; command -v sleep) \
  || {{ echo "sandboxd: the image has no setsid or sleep in {_TOOL_PATH}" >&2; exit 127; }}
cd -- "$1" 2>/dev/null \
  || {{ echo "{_NO_WORKDIR_MARKER}" >&2; exit {_NO_WORKDIR_STATUS}; }}
seconds=$2
script=$3
shift 3
"$setsid" /bin/sh -c 'if [ "$#" -gt 0 ]; then export "$@"; fi; exec /bin/sh -c "$0"' \
  "$script" "$@" </dev/null &
command=$!
"$setsid" /bin/sh -c '"$1" "$2" && kill -s KILL -- "-$3"' watchdog "$sleep" "$seconds" \
  "$command" </dev/null >/dev/null 2>&1 &
watchdog=$!
wait "$command"
status=$?
kill -s KILL "$watchdog" 2>/dev/null
kill -s KILL -- "-$watchdog" 2>/dev/null
exit "$status"
"""
_FIRST_EXIT_CHECK_S = 0.05
_MAX_EXIT_CHECK_S = 1.0
LINGER_S = 1.0
"""Once the engine says the command exited, how long the stream may take to end. WHY this
long: a busy engine reports the exit before it has forwarded the command's last output (at
20 ms, a loaded machine lost whole outputs); a stream held open by a background process
(`sleep 1000 & echo hi`) waits this long, which a fallback can afford."""
BACKSTOP_MARGIN_S = 5.0
"""Past the deadline, how long the in-container watchdog gets before the host steps in."""
_EXIT_CODE_WAIT_S = 2.0


class SandboxGoneError(Exception):
    """The container cannot run commands any more; the message says why."""


@dataclass(frozen=True)
class ExecCall:
    container_id: str
    command: str
    user: str
    cwd: str
    env: Mapping[str, str]
    """Set for the command only (ExecRequest.command_env), on top of the container's own."""
    timeout_s: float
    max_output_bytes: int


def run_exec(api: Any, call: ExecCall, cancelled: threading.Event) -> Result:
    """Run one command with `docker exec` (blocking: run it on the worker pool).

    Raises SandboxGoneError when the container is not running or a wedged command could
    only be stopped by removing it.
    """
    started = time.monotonic()
    try:
        exec_id = api.exec_create(
            call.container_id,
            [
                "/bin/sh",
                "-c",
                _WRAPPER,
                "sandboxd-exec",
                call.cwd,
                f"{call.timeout_s:.3f}",
                call.command,
                *(f"{name}={value}" for name, value in call.env.items()),
            ],
            user=call.user,
            workdir="/",
        )["Id"]
        sock = api.exec_start(exec_id, socket=True)
    except docker.errors.NotFound as exc:
        raise SandboxGoneError(f"its container is gone ({api_error_text(exc)})") from exc
    except docker.errors.APIError as exc:
        if exc.status_code == 409:
            raise SandboxGoneError(f"its container stopped ({api_error_text(exc)})") from exc
        raise
    stdout, stderr = OutputCapture(call.max_output_bytes), OutputCapture(call.max_output_bytes)
    try:
        stop = _pump(api, exec_id, sock, (stdout, stderr), started + call.timeout_s, cancelled)
    finally:
        sock.close()
    if stop is not None and not _kill_exec_processes(api, exec_id):
        raise SandboxGoneError(
            f"a command ({stop}) could not be stopped from the host; the container was removed"
        )
    out, err = stdout.finish(), stderr.finish()
    duration = time.monotonic() - started
    status = _exit_code(api, exec_id)
    if status == _NO_WORKDIR_STATUS and err.text.strip() == _NO_WORKDIR_MARKER:
        return Result(
            command=call.command,
            error=f"working directory {call.cwd} does not exist inside the sandbox: "
            "choose a mounted path (or a directory a previous command created)",
            duration_s=duration,
        )
    timed_out = duration >= call.timeout_s and status == 128 + signal.SIGKILL
    return Result(
        command=call.command,
        stdout=out.text,
        stderr=err.text,
        exit_code=None if timed_out else status,
        signal=int(signal.SIGKILL) if timed_out else None,
        timed_out=timed_out,
        duration_s=duration,
        stdout_dropped_bytes=out.dropped_bytes,
        stderr_dropped_bytes=err.dropped_bytes,
        error="cancelled by the caller" if cancelled.is_set() else None,
    )


def _pump(
    api: Any,
    exec_id: str,
    sock: Any,
    captures: tuple[OutputCapture, OutputCapture],
    deadline: float,
    cancelled: threading.Event,
) -> str | None:
    """Demultiplex the exec's stream into the captures until it ends.

    Returns None when the command ended, else why the host must stop it. The stream stays
    open while a background process holds the command's stdout (`sleep 1000 & echo hi`), so
    a quiet stream makes us ask the engine whether the command itself has exited.
    """
    pending = bytearray()
    next_check = time.monotonic() + _FIRST_EXIT_CHECK_S
    check_every = _FIRST_EXIT_CHECK_S
    exited_at: float | None = None
    while True:
        if cancelled.is_set():
            return "cancelled by the caller"
        now = time.monotonic()
        if now >= deadline + BACKSTOP_MARGIN_S:
            return "it outlived its timeout"
        if exited_at is not None and now >= exited_at + LINGER_S:
            return None
        wait = max(min(next_check, deadline + BACKSTOP_MARGIN_S) - now, 0.0)
        if exited_at is not None:
            wait = min(wait, exited_at + LINGER_S - now)
        readable, _, _ = select.select([sock], [], [], min(wait, 0.1))
        if readable:
            data = read_socket(sock, 65536)
            if not data:
                return None
            pending += data
            _split_frames(pending, captures)
            continue
        if exited_at is None and time.monotonic() >= next_check:
            if not api.exec_inspect(exec_id)["Running"]:
                exited_at = time.monotonic()
            check_every = min(check_every * 2, _MAX_EXIT_CHECK_S)
            next_check = time.monotonic() + check_every


def _split_frames(pending: bytearray, captures: tuple[OutputCapture, OutputCapture]) -> None:
    """Docker's multiplexed stream: 8-byte headers (stream id, 3 zero bytes, big-endian size)."""
    while len(pending) >= 8:
        size = int.from_bytes(pending[4:8], "big")
        if len(pending) < 8 + size:
            return
        stream = pending[0]
        payload = bytes(pending[8 : 8 + size])
        del pending[: 8 + size]
        captures[1 if stream == 2 else 0].write(payload)


def _exit_code(api: Any, exec_id: str) -> int | None:
    """The exec's exit status; the engine may report it a moment after the stream ended."""
    give_up = time.monotonic() + _EXIT_CODE_WAIT_S
    while True:
        info = api.exec_inspect(exec_id)
        if not info["Running"] or time.monotonic() >= give_up:
            code = info.get("ExitCode")
            return int(code) if code is not None and not info["Running"] else None
        time.sleep(0.01)


def _kill_exec_processes(api: Any, exec_id: str) -> bool:
    """SIGKILL the exec's process tree and the sessions it made, from the host.

    True when nothing of it is left running.
    """
    pid = int(api.exec_inspect(exec_id).get("Pid") or 0)
    if pid <= 0:
        return not api.exec_inspect(exec_id)["Running"]
    parents: dict[int, int] = {}
    sessions: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat_fields(int(entry))
            if stat is not None:
                parents[int(entry)], sessions[int(entry)] = stat
    tree = {pid}
    grew = True
    while grew:
        children = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= children
        grew = bool(children)
    # Sessions the wrapper's setsid made (led by one of its processes): their background
    # jobs may have been re-parented away from the tree. The wrapper's own session is not
    # ours to judge, it may be the container runtime's.
    led_sessions = {sessions[member] for member in tree if sessions.get(member) == member}
    victims = tree | {member for member, sid in sessions.items() if sid in led_sessions}
    victims -= {1, os.getpid()}
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:
            return False
    deadline = time.monotonic() + _EXIT_CODE_WAIT_S
    while api.exec_inspect(exec_id)["Running"]:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _stat_fields(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[3])
    except (OSError, IndexError, ValueError):
        return None
