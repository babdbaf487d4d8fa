"""The in-container supervisor: runs one sandbox's commands without a `docker exec` each.

It is the container's first process (PID 1: the engine's init is not used, so no process in
the container is one a command could trace or read, sandboxd.docker.seccomp) and the reaper of
the orphans its commands leave. It talks to the backend through two FIFOs in its read-only
control directory, `in` (requests) and `out` (replies), opened once before any command runs and
unlinked by the backend right after: the container's profile refuses Unix sockets to every
process, this one included. It is not dumpable, so no command (the same uid) can read its
memory or its descriptors through /proc. Before any command can run, it reports what it sees at
each mount root (device, inode, type: the backend destroys the container if that is not what
its policy checked) and whether Unix sockets are refused. Then it says hello, with the secret a
later daemon needs to reach it again (see "Outliving the daemon"), and serves requests:

    <- {"hello": "sandboxd-supervisor", "protocol": 8, "mounts": [...], "secret": ..., ...}
    -> {"op": "run", "id": 7, "command": "ls", "env": {}, "cwd": "/w", "timeout_s": 30.0,
        "max_output_bytes": 32768, "max_saved_output_bytes": 67108864,
        "background_after_s": null}
    -> {"op": "cancel", "id": 7}
    <- {"id": 7, "phase": "end", "exit_code": 0, "stdout_bytes": 3, "stderr_bytes": 0, ...}
       + b"hi\n"

A run with `"live": true` also gets, while its command runs, "live" replies: what it printed
since the last one, every logos.runners.live.FLUSH_S, bounded as that module bounds it (the
newest bytes of each stream, what was cut counted in `*_skipped_bytes`; `last` once its
limit is reached). They stop when the command ends or goes on as a job; its "end" or
"background" reply carries its output as usual:

    <- {"id": 7, "phase": "live", "stdout_bytes": 6, "stdout_skipped_bytes": 0, ...}
       + b"50%...\n"

A reply is a JSON line followed by its stdout and stderr as raw UTF-8 (their lengths are in the
line): output full of control characters would grow up to six times as JSON strings.

Egress: a sandbox with an allowlist has a forwarder thread (sandboxd.inside.egress_forwarder) that
listens on 127.0.0.1:PORT; for each connection it asks the backend for a FIFO pair:

    <- {"egress": 3}
    -> {"op": "egress", "id": 3, "ready": true}     (FIFOs egress-3-up and egress-3-down)

Jobs: a command with `background_after_s` still running then gets a "background" reply (its
output so far; its copies now keep its whole output) and goes on; its "end" reply comes later
with no output, which stays here for "peek" requests until the backend says "forget":

    <- {"id": 7, "phase": "background", "duration_s": 30.0, "stdout_file": ..., ...} + output
    -> {"op": "peek", "id": 7, "since_background": true}
    <- {"id": 7, "phase": "output", "running": true, ...} + its output (so far)
    -> {"op": "kill", "id": 7}
    <- {"id": 7, "phase": "end", "signal": 15, "stdout_bytes": 0, "stderr_bytes": 0, ...}
    -> {"op": "forget", "id": 7}

Outliving the daemon: when the backend hangs up (its daemon stopped, or was killed), the
commands it waited for are killed (nobody can hear their end), and jobs go on, their output
captured as before. With `orphan_ttl_s` in its settings, the supervisor then waits that long
for a daemon to reach it again: one that knows its secret makes a new FIFO pair in the
control directory's REJOIN_DIR under the names the secret gives (`rejoin_names`). That
directory is mode 0311: no process in the sandbox can list it, and none can write to the
read-only mount; the secret never leaves this process but in the first hello, before any
command runs, and the daemon keeps it 0600 in its state directory. The new channel's hello
proves the secret (`rejoin_proof`), reports the mounts again and the jobs it holds (running,
or ended with their end), and the highest request id it saw (new ones come after it):

    <- {"hello": "sandboxd-supervisor", "protocol": 8, "rejoined": true, "proof": ...,
        "jobs": [{"id": 7, "started_at": ..., "end": {...}}, ...], "last_id": 9, ...}

No daemon by then (or no `orphan_ttl_s`): every command and job is killed and it exits
(ORPHANED_EXIT after a wait), which stops the container: nothing lingers on a machine whose
daemon never comes back.

As PID 1 it cannot be ended from inside: the kernel delivers a process of its PID namespace
no signal PID 1 has no handler for, and it has none but SIGCHLD's (which only wakes its
reaper), so `kill -TERM 1`, `kill -INT 1` and a pidfd's signal are dropped. Only SIGKILL from
outside (the container's removal) ends it, or its wait for a daemon running out.

Each command is `bash -c` in a new session (its own process group), stdin /dev/null, the
container's environment plus the request's env (the backend sends the non-interactive one,
logos.options.NONINTERACTIVE_ENV, under the caller's), output captured head+tail with
bounded memory and saved under /tmp/logos-output-<uid>/ when cut. A timeout or a cancel
sends SIGTERM to the whole group, then SIGKILL after a short grace.

Background jobs outlive their command (a server started with `&` stays up for the session's
next commands); if one holds the command's stdout, the reply comes as soon as the shell
exits and the job's later writes get SIGPIPE. Only when the container runs out of processes
(a fork bomb) are finished commands' leftovers killed, to make room for the next command.

Standard library only, and Python 3.8 syntax: it runs on whatever python3 the image has.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for the type checker only: see load_command_modules(), load_live_modules()
    import contextlib
    import subprocess
    import threading
    from collections.abc import Callable
    from typing import Any

    from logos.runners.capture import (
        CapturedOutput,
        OutputCapture,
        private_output_dir,
        read_process_output,
    )
    from logos.runners.live import FLUSH_S, LiveOutput, LivePiece

PROTOCOL = 8
HELLO = "sandboxd-supervisor"
SETTINGS_FILE = "sandbox.json"
"""Next to this script: the mount roots to report ({"mounts": [...]}), the egress
forwarder's port when the sandbox has an allowlist ({"egress_port": ...}), and how long to
wait for a daemon once its own is gone ({"orphan_ttl_s": ...}; none: not at all)."""
REJOIN_DIR = "rejoin"
"""In the control directory (mode 0311): where a daemon that knows the sandbox's secret makes
a new channel's FIFOs, under the names `rejoin_names` gives."""
REJOIN_POLL_S = 0.05
"""While waiting for a daemon: how often it looks for a new channel's FIFOs."""
_SECRET_BYTES = 32
IN_FIFO = "in"
"""In the control directory: the backend's requests."""
OUT_FIFO = "out"
"""In the control directory: the replies, and the forwarder's requests for connections."""
KILL_GRACE_S = 1.0
"""Between SIGTERM and SIGKILL when a command times out or is cancelled."""
LINGER_S = 0.02
"""How long to keep reading after the shell exited while a background process holds the
pipes (`sleep 1000 & echo hi`): what the shell wrote is already in the pipe by then."""
MAX_WAIT_S = 0.25
"""Longest sleep of a command's read loop, so that a cancel's SIGKILL escalation is timely."""
_EXIT_POLL_S = 0.01
"""How often the read loop looks for the shell's exit where the kernel has no pidfd."""
_SAVED_OUTPUT_DIR_IN = "/tmp"
"""Where the caller's private directory for saved outputs goes: the container's own /tmp (the
captures create and check it)."""
_SPAWN_ATTEMPTS = 5
_OUT_OF_PROCESSES = (
    "the sandbox is out of processes (its pids limit is reached by running commands): "
    "wait for them or cancel them, then retry"
)
_MAX_ARG_BYTES = 128 * 1024
"""Linux's MAX_ARG_STRLEN: the most one argv or environment string may hold."""
NO_PYTHON_EXIT = 3
"""Exit status that tells the backend to fall back to `docker exec` for this image."""
ORPHANED_EXIT = 5
"""Exit status once no daemon reached it within `orphan_ttl_s` of its own going away."""
_DAEMON_GONE = "the sandbox daemon went away while it ran (whether it finished is unknown)"
"""Why a command nobody waits for any more was stopped."""
MAX_KEPT_OUTPUTS = 256
"""Ended jobs whose output is kept for peeks; past this, the oldest is forgotten (the backend
forgets each once its daemon drops the job)."""
_RECEIVE_BYTES = 64 * 1024
_REAP_INTERVAL_S = 1.0
"""As PID 1, how often orphans are looked for when no SIGCHLD says so sooner."""


class Command:
    """One running request: its process group, its output and how it is being stopped."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        stdout: OutputCapture,
        stderr: OutputCapture,
        request: dict[str, Any],
        generation: int,
        oom_kills_before: int,
    ) -> None:
        self.proc = proc
        self.stdout = stdout
        self.stderr = stderr
        self.generation = generation
        """The channel it came on (see Supervisor.generation): a command that is no job
        answers only there."""
        self.oom_kills_before = oom_kills_before
        """The container's OOM-kill count before it started: one more at its end, and its
        SIGKILL was the OOM killer's."""
        self.started_at = time.time()
        self.timeout_s = float(request["timeout_s"])
        self.max_output_bytes = int(request["max_output_bytes"])
        self.end: dict[str, Any] | None = None
        """A job's end reply (without output) once it ended, for a daemon that rejoins."""
        self.output_lock = threading.Lock()
        """Held while output is written, and while a peek reads it from another thread."""
        self.shown: tuple[int, int] | None = None
        """Bytes of stdout and stderr its "background" reply showed; None: not a job."""
        self.ended: tuple[CapturedOutput, CapturedOutput] | None = None
        """A job's whole output once it ended (its copies closed), for peeks."""
        self.stop_reason: str | None = None
        self.term_sent_at: float | None = None
        self.killed = False
        self._lock = threading.Lock()

    def stop(self, reason: str) -> None:
        """SIGTERM the command's whole session now; `escalate` sends SIGKILL after the grace."""
        with self._lock:
            if self.term_sent_at is not None:
                return
            self.stop_reason = reason
            self.term_sent_at = time.monotonic()
        _signal_session(self.proc.pid, signal.SIGTERM)

    def escalate(self, now: float) -> None:
        with self._lock:
            due = self.term_sent_at is not None and now >= self.term_sent_at + KILL_GRACE_S
            if not due or self.killed:
                return
            self.killed = True
        _signal_session(self.proc.pid, signal.SIGKILL)

    def next_escalation(self) -> float | None:
        if self.term_sent_at is None or self.killed:
            return None
        return self.term_sent_at + KILL_GRACE_S

    def output(self, since_background: bool) -> tuple[CapturedOutput, CapturedOutput]:
        """Its output so far (or its whole output once ended), without what its background
        reply showed when `since_background`."""
        with self.output_lock:
            skip_out, skip_err = self.shown if since_background and self.shown else (0, 0)
            if self.ended is None:
                return self.stdout.snapshot(skip_out), self.stderr.snapshot(skip_err)
            whole_out, whole_err = self.ended
            return (
                _with_copy(self.stdout.snapshot(skip_out), whole_out),
                _with_copy(self.stderr.snapshot(skip_err), whole_err),
            )


def _output_fields(out: CapturedOutput, err: CapturedOutput) -> dict[str, Any]:
    """A reply's output: each stream's text, the bytes cut from it and its saved copy."""
    return {
        "stdout": out.text,
        "stderr": err.text,
        "stdout_dropped_bytes": out.dropped_bytes,
        "stderr_dropped_bytes": err.dropped_bytes,
        "stdout_file": out.saved_path,
        "stderr_file": err.saved_path,
    }


def _reply_payload(reply: dict[str, Any]) -> tuple[bytes, bytes]:
    """A reply's stdout and stderr as raw UTF-8, taken out of it; their lengths put in it."""
    out = str(reply.pop("stdout", "")).encode("utf-8", "replace")
    err = str(reply.pop("stderr", "")).encode("utf-8", "replace")
    reply["stdout_bytes"], reply["stderr_bytes"] = len(out), len(err)
    return out, err


def _job_entry(request_id: int, command: Command) -> dict[str, Any]:
    """A job as a rejoined channel's hello lists it: when it started, its bounds, and its
    "end" reply (with no output) once it ended."""
    entry: dict[str, Any] = {
        "id": request_id,
        "started_at": command.started_at,
        "timeout_s": command.timeout_s,
        "max_output_bytes": command.max_output_bytes,
    }
    if command.end is not None:
        entry["end"] = command.end
    return entry


def _with_copy(output: CapturedOutput, ended: CapturedOutput) -> CapturedOutput:
    """`output`, naming the copy its stream's end reported (its file is closed since)."""
    return CapturedOutput(
        output.text, output.total_bytes, output.dropped_bytes, ended.saved_path, ended.saved_bytes
    )


class Supervisor:
    def __init__(
        self,
        reading: int,
        writing: int,
        shell: str,
        output_dir: str,
        control_dir: str,
        *,
        secret: str,
        orphan_ttl_s: float = 0.0,
        report: Callable[[], dict[str, Any]] = dict,
    ) -> None:
        """`secret`: what a daemon must know to reach it again once the backend hung up,
        for up to `orphan_ttl_s` (0: it does not wait); `report`: what a rejoined channel's
        hello says of the mounts, Unix sockets and egress, looked at again then."""
        self._reading = reading
        self._writing = writing
        self._shell = shell
        self._output_dir = output_dir
        self._control_dir = control_dir
        self._secret = secret
        self._orphan_ttl_s = orphan_ttl_s
        self._report = report
        self._send_lock = threading.Lock()
        """Held while anything is written to the channel, and while it changes."""
        self._connected = True
        self.generation = 0
        """The channel's number: each daemon that rejoins gets the next one."""
        self._running: dict[int, Command] = {}
        self._kept: dict[int, Command] = {}
        """Ended jobs, whose output stays here for peeks until the backend forgets them."""
        self._running_lock = threading.Lock()
        self._starting: dict[int, str | None] = {}
        """Commands whose thread has not started their process yet, with the reason to stop
        them once it has (a cancel or a hang-up that came first), else None."""
        self._leftover_groups: set[int] = set()
        """Process groups of finished commands that still had members (background jobs)."""
        self._last_id = 0
        """The highest request id seen: a rejoined daemon numbers its requests after it."""
        self._last_active = time.time()
        """Unix time a request last came or a command last ended."""
        self._egress_asked: set[int] = set()
        """The forwarder's requests the backend has not answered yet."""
        self.spawned = Spawned()
        self.on_egress_ready: Callable[[int, bool], None] | None = None
        """The egress forwarder's, for the backend's answers to its requests."""

    def serve(self) -> int:
        """Serve requests until the backend hangs up; then wait up to orphan_ttl_s for a
        daemon to rejoin, and serve it. Once none came, kill everything still running; the
        exit status to end with."""
        while True:
            self._serve_channel()
            self._host_gone()
            if self._orphan_ttl_s <= 0:
                self._kill_all("the backend hung up")
                return 0
            channel = _await_daemon(self._control_dir, self._secret, self._orphan_ttl_s)
            if channel is None:
                self._kill_all(
                    f"no sandbox daemon came back within {self._orphan_ttl_s:g} s of its going away"
                )
                return ORPHANED_EXIT
            self._rejoin(*channel)

    def _serve_channel(self) -> None:
        pending = bytearray()
        while True:
            try:
                data = os.read(self._reading, _RECEIVE_BYTES)
            except OSError:
                return
            if not data:
                return
            pending += data
            while (end := pending.find(b"\n")) >= 0:
                line = bytes(pending[: end + 1])
                del pending[: end + 1]
                self.dispatch(line)

    def _host_gone(self) -> None:
        """The backend hung up: commands that are no job are stopped (their caller's answer
        went with the backend), the forwarder's waiting connections refused; jobs go on."""
        with self._send_lock:
            self._connected = False
            asked, self._egress_asked = self._egress_asked, set()
        with self._running_lock:
            commands = list(self._running.values())
            for request_id in self._starting:
                self._starting[request_id] = _DAEMON_GONE
        for command in commands:
            with command.output_lock:  # WHY: it may be going on as a job right now
                if command.shown is None:
                    command.stop(_DAEMON_GONE)
        if self.on_egress_ready is not None:
            for number in asked:
                self.on_egress_ready(number, False)

    def _kill_all(self, reason: str) -> None:
        with self._running_lock:
            commands = list(self._running.values())
            for request_id in self._starting:
                self._starting[request_id] = reason
        for command in commands:
            command.stop(reason)
        time.sleep(KILL_GRACE_S if commands else 0)
        for command in commands:
            _signal_session(command.proc.pid, signal.SIGKILL)

    def _rejoin(self, reading: int, writing: int) -> None:
        """Serve a new daemon from now on: its hello says which jobs this sandbox holds (each
        running or with its end), atomically with any end that has yet to be sent."""
        with self._send_lock:
            for fd in (self._reading, self._writing):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._reading, self._writing = reading, writing
            self.generation += 1
            with self._running_lock:
                held = [*self._running.items(), *self._kept.items()]
                jobs = [_job_entry(rid, command) for rid, command in held if command.shown]
            hello = {
                "hello": HELLO,
                "protocol": PROTOCOL,
                "pid": os.getpid(),
                "shell": self._shell,
                **self._report(),
                "rejoined": True,
                "proof": rejoin_proof(self._secret),
                "jobs": jobs,
                "last_id": self._last_id,
                "last_active": self._last_active,
            }
            self._connected = True
            self._write(json.dumps(hello, ensure_ascii=False).encode("utf-8") + b"\n")

    def ask_egress(self, number: int) -> None:
        """The forwarder's request for connection `number`'s FIFOs; refused at once while no
        backend is there to make them."""
        with self._send_lock:
            if self._connected:
                self._egress_asked.add(number)
                self._write(json.dumps({"egress": number}).encode() + b"\n")
                return
        if self.on_egress_ready is not None:
            self.on_egress_ready(number, False)

    def dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
            op = message["op"]
            request_id = int(message["id"])
        except (ValueError, KeyError, TypeError) as exc:
            print(f"sandboxd supervisor: ignoring malformed request: {exc}", file=sys.stderr)
            return
        if op == "run":
            with self._running_lock:
                self._starting[request_id] = None
                self._last_id = max(self._last_id, request_id)
                self._last_active = time.time()
            args = (request_id, message, self.generation)
            for attempt in range(_SPAWN_ATTEMPTS):
                worker = threading.Thread(target=self._run, args=args, daemon=True)
                try:
                    worker.start()
                    return
                except RuntimeError:  # no thread: the container is at its pids limit
                    self._make_room(attempt)
            with self._running_lock:
                self._starting.pop(request_id, None)
            self.send_reply({"id": request_id, "error": _OUT_OF_PROCESSES})
        elif op in ("cancel", "kill"):
            with self._running_lock:
                command = self._running.get(request_id)
                if request_id in self._starting:
                    # WHY: the cancel can come before the command's thread has started its
                    # process (the caller went away at once); it must not run on unseen.
                    self._starting[request_id] = "cancelled by the caller"
            if command is not None:
                # A job killed on request ended as asked: its signal says it all.
                command.stop("cancelled by the caller" if op == "cancel" else "killed")
        elif op == "peek":
            self._peek(request_id, bool(message.get("since_background")))
        elif op == "forget":
            with self._running_lock:
                self._kept.pop(request_id, None)
        elif op == "egress" and self.on_egress_ready is not None:
            with self._send_lock:
                self._egress_asked.discard(request_id)
            self.on_egress_ready(request_id, bool(message.get("ready")))

    def _peek(self, request_id: int, since_background: bool) -> None:
        with self._running_lock:
            command = self._running.get(request_id) or self._kept.get(request_id)
            running = request_id in self._running
        if command is None:
            self.send_reply(
                {"id": request_id, "phase": "output", "error": f"no command {request_id} here"}
            )
            return
        out, err = command.output(since_background)
        self.send_reply(
            {
                "id": request_id,
                "phase": "output",
                "running": running,
                **_output_fields(out, err),
            }
        )

    def _make_room(self, attempt: int) -> None:
        """The container hit its pids limit: kill what finished commands left running.

        WHY: background jobs normally outlive their command (a server started with `&`
        stays up), but once they exhaust the pids limit (a fork bomb) nothing else could
        ever run again in this container, not even `kill`.
        """
        with self._running_lock:
            doomed = self._leftover_groups - {c.proc.pid for c in self._running.values()}
            self._leftover_groups.clear()
        for group in doomed:
            _signal_session(group, signal.SIGKILL)
        time.sleep(0.05 * (attempt + 1))  # PID 1 reaps them, which frees their pids

    def send(self, message: dict[str, Any], *payload: bytes, generation: int | None = None) -> None:
        """Send a line and what follows it, unless no backend is there (or, for `generation`,
        the channel it was for is gone): nobody would read it."""
        data = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        with self._send_lock:
            if generation in (None, self.generation) and self._connected:
                self._write(data, *payload)

    def _write(self, *parts: bytes) -> None:
        """Write to the channel (under the send lock). A failed write means the backend is
        gone: serve() sees the channel end."""
        with contextlib.suppress(OSError):
            for part in parts:
                view = memoryview(part)
                while view:
                    view = view[os.write(self._writing, view) :]

    def send_reply(self, reply: dict[str, Any], generation: int | None = None) -> None:
        """A command's reply: its JSON line, then stdout and stderr as raw UTF-8."""
        out, err = _reply_payload(reply)
        self.send(reply, out, err, generation=generation)

    def _run(self, request_id: int, request: dict[str, Any], generation: int) -> None:
        command: Command | None = None
        try:
            reply, command = self._execute(request_id, request, generation)
        except Exception as exc:  # a reply must come back whatever happens
            reply = {"error": f"sandboxd supervisor failed: {type(exc).__name__}: {exc}"}
        finally:
            with self._running_lock:
                self._starting.pop(request_id, None)
                self._last_active = time.time()
        reply["id"] = request_id
        reply["phase"] = "end"
        out, err = _reply_payload(reply)
        line = json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n"
        with self._send_lock:
            # WHY under the send lock: a daemon that rejoins meanwhile hears of a job's end
            # either in its hello or as this reply, never both, never neither.
            job = command is not None and command.shown is not None
            if job and command is not None:
                command.end = reply
            if self._connected and (job or generation == self.generation):
                self._write(line, out, err)
        if command is not None and command.next_escalation() is not None:
            # The shell died of SIGTERM; background processes that ignore it get SIGKILL
            # after the grace, without holding the reply back.
            _finish_kill(command)

    def _execute(
        self, request_id: int, request: dict[str, Any], generation: int
    ) -> tuple[dict[str, Any], Command | None]:
        """The reply, and the command when one ran."""
        started = time.monotonic()
        command_text = str(request["command"])
        cwd = str(request["cwd"])
        if not os.path.isdir(cwd):
            return {
                "error": f"working directory {cwd} does not exist inside the sandbox: "
                "choose a mounted path (or a directory a previous command created)"
            }, None
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in dict(request.get("env") or {}).items()})
        limit = int(request["max_output_bytes"])
        save_limit = int(request.get("max_saved_output_bytes") or 0)
        saved = f"{self._output_dir}/cmd-{request_id}"
        stdout = OutputCapture(limit, f"{saved}.stdout", save_limit)
        stderr = OutputCapture(limit, f"{saved}.stderr", save_limit)
        proc = None
        # WHY before the spawn: a command that fills its memory at once can be killed before
        # `_follow` runs, and a count read there would already hold its kill.
        oom_kills_before = _read_oom_kills()
        try:
            for attempt in range(_SPAWN_ATTEMPTS):
                try:
                    with self.spawned.lock:
                        proc = subprocess.Popen(
                            [self._shell, "-c", command_text],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            cwd=cwd,
                            env=env,
                            start_new_session=True,
                        )
                        self.spawned.pids.add(proc.pid)
                    break
                except BlockingIOError:  # EAGAIN from fork: the pids limit
                    self._make_room(attempt)
                except OSError as exc:
                    if exc.errno == errno.E2BIG:
                        return {"error": too_big(command_text, env)}, None
                    return {"error": f"could not start {self._shell} in {cwd}: {exc}"}, None
            if proc is None:
                return {"error": _OUT_OF_PROCESSES}, None
            command = Command(proc, stdout, stderr, request, generation, oom_kills_before)
            return self._follow(request_id, request, command, started), command
        finally:
            if proc is not None:
                self.spawned.pids.discard(proc.pid)

    def _follow(
        self,
        request_id: int,
        request: dict[str, Any],
        command: Command,
        started: float,
    ) -> dict[str, Any]:
        """Pump a started command's output until it ends (or goes on as a job): its reply."""
        proc, stdout, stderr = command.proc, command.stdout, command.stderr
        after = request.get("background_after_s")
        background_at = None if after is None else started + float(after)
        _prefer_as_oom_victim(proc.pid)
        live = None
        if request.get("live"):
            _load_live_modules()
            live = LiveOutput()
        with self._running_lock:
            self._running[request_id] = command
            stop_reason = self._starting.pop(request_id, None)
        if stop_reason is not None:
            command.stop(stop_reason)
        try:
            pump(
                command,
                deadline=started + float(request["timeout_s"]),
                background_at=background_at,
                on_background=lambda: self._background(request_id, command, started),
                live=live,
                on_live=lambda pieces: self._send_live(request_id, command, pieces),
            )
        finally:
            with self._running_lock:
                self._running.pop(request_id, None)
                if command.shown is not None:
                    # WHY in the same hold: a daemon that rejoins must find the job in one
                    # of the two, whatever the moment.
                    self._keep(request_id, command)
                if _group_exists(proc.pid):
                    self._leftover_groups.add(proc.pid)
        with command.output_lock:
            skip_out, skip_err = command.shown or (0, 0)
            out, err = stdout.finish(skip_out), stderr.finish(skip_err)
        if command.shown is not None:
            # A job: its output stays here for peeks, its end goes without it.
            command.ended = (out, err)
        status = proc.returncode
        exit_code = status if status >= 0 else None
        sig = -status if status < 0 else None
        killed_by_kill = sig == signal.SIGKILL or exit_code == 128 + signal.SIGKILL
        reply: dict[str, Any] = {
            **_output_fields(out, err),
            "exit_code": exit_code,
            "signal": sig,
            "timed_out": command.stop_reason == "timeout",
            "duration_s": time.monotonic() - started,
            "oom_killed": killed_by_kill and _read_oom_kills() > command.oom_kills_before,
            "error": None
            if command.stop_reason in (None, "timeout", "killed")
            else command.stop_reason,
        }
        if command.shown is not None:
            reply["stdout"] = reply["stderr"] = ""  # a job's end goes without its output
        return reply

    def _background(self, request_id: int, command: Command, started: float) -> None:
        """The command is still running at its threshold: it goes on as a job. Called by
        its pump, on its thread, with its output lock held."""
        command.stdout.save_whole()
        command.stderr.save_whole()
        out, err = command.stdout.snapshot(), command.stderr.snapshot()
        command.shown = (out.total_bytes, err.total_bytes)
        self.send_reply(
            {
                "id": request_id,
                "phase": "background",
                "duration_s": time.monotonic() - started,
                **_output_fields(out, err),
            },
            generation=command.generation,
        )

    def _send_live(self, request_id: int, command: Command, pieces: list[LivePiece]) -> None:
        """What the command printed lately, to whoever watches it (see the docstring)."""
        reply: dict[str, Any] = {"id": request_id, "phase": "live"}
        for piece in pieces:
            reply[piece.stream] = piece.text
            reply[f"{piece.stream}_skipped_bytes"] = piece.skipped_bytes
            reply["last"] = reply.get("last", False) or piece.last
        self.send_reply(reply, generation=command.generation)

    def _keep(self, request_id: int, command: Command) -> None:
        """Keep an ended job's output for peeks (under the running lock)."""
        self._kept[request_id] = command
        while len(self._kept) > MAX_KEPT_OUTPUTS:
            del self._kept[next(iter(self._kept))]


def pump(
    command: Command,
    deadline: float,
    background_at: float | None = None,
    on_background: Callable[[], None] | None = None,
    live: LiveOutput | None = None,
    on_live: Callable[[list[LivePiece]], None] | None = None,
) -> None:
    """Feed the command's output into its captures until it exits, enforcing the deadline;
    at `background_at`, if it still runs, call `on_background` (once, output lock held).
    With `live`, its output also goes there, and `on_live` gets what gathered every FLUSH_S
    until it ends or goes on as a job."""
    next_flush = time.monotonic() + FLUSH_S if live is not None else None

    def tend(now: float, exited: bool) -> float | None:
        nonlocal background_at, next_flush
        if exited:
            return None
        if now >= deadline:
            command.stop("timeout")
        command.escalate(now)
        if next_flush is not None and now >= next_flush:
            next_flush = now + FLUSH_S
            if command.shown is not None:  # a job now: it is watched through peeks
                next_flush = None
            elif live is not None and on_live is not None and (pieces := live.take()):
                on_live(pieces)
        if background_at is not None and now >= background_at:
            background_at = None
            if on_background is not None:
                with command.output_lock:
                    # WHY checked under the lock: the backend hanging up stops commands
                    # that are not jobs under it, and a stopped command is no job.
                    if command.term_sent_at is None:
                        on_background()
        wake = min(
            command.next_escalation() or deadline,
            background_at or deadline,
            next_flush or deadline,
        )
        return min(max(wake - now, 0.0), MAX_WAIT_S)

    read_process_output(
        command.proc,
        command.stdout,
        command.stderr,
        tend,
        drain_s=LINGER_S,
        poll_s=_EXIT_POLL_S,
        write_lock=command.output_lock,
        on_chunk=None if live is None else live.write,
    )


def _finish_kill(command: Command) -> None:
    due = command.next_escalation()
    if due is not None:
        time.sleep(max(due - time.monotonic(), 0.0))
        command.escalate(time.monotonic())


def too_big(command: str, env: dict[str, str]) -> str:
    """Why Linux refused to start the shell (E2BIG), and what to do instead."""
    longest = max([len(command.encode()), *(len(f"{k}={v}".encode()) for k, v in env.items())])
    return (
        f"the command is too large to start: Linux takes at most {_MAX_ARG_BYTES // 1024} KiB "
        f"in one argument or env entry (the largest here is {longest} bytes): write long "
        "content to a file in several smaller commands, or pass it in a mounted file"
    )


def _signal_session(leader: int, sig: int) -> None:
    """Signal the command's process group and any group its session made (`set -m`, pipelines
    under job control). A process that called setsid() itself escapes; the container holds it."""
    with contextlib.suppress(OSError):
        os.killpg(leader, sig)
    for pid in _session_members(leader):
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def _group_exists(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _session_members(session: int) -> list[int]:
    """The processes of `session` outside its leader's group (state ppid pgrp session ...)."""
    return [
        pid
        for pid, fields in _process_stats()
        if len(fields) > 3 and int(fields[3]) == session and int(fields[2]) != session
    ]


def _prefer_as_oom_victim(pid: int) -> None:
    """Make the command, not the supervisor, the out-of-memory killer's choice.

    Raising a score needs no privilege; descendants inherit it.
    """
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass


def _read_oom_kills() -> int:
    """The container's OOM-kill counter (cgroup v1 memory.oom_control or v2 memory.events)."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as counters:
                for line in counters:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def report_mounts(paths: list[str]) -> list[dict[str, Any]]:
    """What this container sees at each mount root, in order: device, inode and type of the
    path itself (never following a symlink), and whether reaching it followed one."""
    seen: list[dict[str, Any]] = []
    for path in paths:
        try:
            info = os.lstat(path)
            direct = os.path.realpath(path) == path
        except OSError as exc:
            seen.append({"error": f"{type(exc).__name__}: {exc.strerror or exc}"})
            continue
        if stat.S_ISDIR(info.st_mode):
            kind = "directory"
        elif stat.S_ISREG(info.st_mode):
            kind = "file"
        else:
            kind = "other"
        seen.append({"device": info.st_dev, "inode": info.st_ino, "kind": kind, "direct": direct})
    return seen


def _unix_sockets_state() -> str:
    """ "denied" when the container's profile refuses this process a Unix socket (as it does
    every process in it), else "allowed" (the backend refuses a sandbox whose spec wanted
    them denied)."""
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except PermissionError:
        return "denied"
    except OSError as exc:
        return f"not denied: socket(AF_UNIX) failed with {exc}"
    probe.close()
    return "allowed"


class Spawned:
    """The processes this supervisor started, which their Popen reaps: as PID 1 it reaps every
    other child (orphans reparented to it), never one of these. Started and registered under
    `lock`, which the reaper holds while it reaps, so it never takes a status Popen waits for."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pids: set[int] = set()


def _become_init(spawned: Spawned) -> None:
    """The duties of PID 1: reap orphans (on SIGCHLD, and every REAP_INTERVAL_S), and stay up
    whatever a command signals it.

    WHY no handler but SIGCHLD's (Python's own for SIGINT removed): PID 1 gets no signal from
    inside its namespace that it has no handler for, so no command can end it with one (nor
    stop it: SIGSTOP is refused it too); SIGKILL from outside, the container's removal, still
    does. A handler for SIGTERM would let `kill -TERM 1` end the sandbox's every command."""
    # WHY a wake-up pipe rather than a handler that sets an Event: a handler runs between two
    # bytecodes of the main thread, possibly inside the previous one's lock, and a second
    # SIGCHLD there waited on that lock for ever (a fork bomb's death sends hundreds).
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    for ignored in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(ignored, signal.SIG_DFL)

    def reap() -> None:
        while True:
            select.select([woken], [], [], _REAP_INTERVAL_S)
            with contextlib.suppress(OSError):
                os.read(woken, 4096)
            with spawned.lock:
                for pid in _zombie_children():
                    if pid not in spawned.pids:
                        with contextlib.suppress(OSError):
                            os.waitpid(pid, os.WNOHANG)

    threading.Thread(target=reap, name="reaper", daemon=True).start()


def _process_stats() -> list[tuple[int, list[bytes]]]:
    """Every process but this one, with the fields of its /proc stat after its command's name
    (state, parent pid, process group, session, ...)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                found.append((int(entry), stat_file.read().rsplit(b")", 1)[1].split()))
        except (OSError, IndexError):
            continue
    return found


def _container_processes() -> list[tuple[int, bytes, int]]:
    """Every process but this one: (pid, state, parent pid)."""
    return [(pid, fields[0], int(fields[1])) for pid, fields in _process_stats() if len(fields) > 1]


def _zombie_children() -> list[int]:
    me = os.getpid()
    return [pid for pid, state, parent in _container_processes() if state == b"Z" and parent == me]


def _read_settings(script: str) -> dict[str, Any]:
    """The sandbox's settings file next to `script` ({} when there is none)."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(script)), SETTINGS_FILE)) as f:
            settings = json.load(f)
    except FileNotFoundError:
        return {}
    return dict(settings)


def _make_undumpable() -> None:
    """Refuse /proc/<pid>/mem, fd, environ and root to the commands, which run as the same uid.

    WHY: the FIFOs to the backend are this process's only asset a command does not already
    have, and the container's profile does not cover /proc (ptrace attach is refused there).
    Commands regain the dumpable flag when they exec, so debuggers still work on them.
    """
    try:
        import ctypes

        pr_set_dumpable = 4
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def _pick_shell() -> str:
    return "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"


def _load_command_modules() -> None:
    """Import what only commands need: subprocess, threading, the capture and its read loop.

    WHY not at the top: the backend waits for the hello before it uses the sandbox, and these
    imports took about a third of the time from the supervisor's start to its hello. Made
    after the hello, they overlap the backend's handshake and, in a session prepared while
    the model writes, are done before the first command comes.
    """
    global contextlib, subprocess, threading
    global CapturedOutput, OutputCapture, private_output_dir, read_process_output
    import contextlib
    import subprocess
    import threading

    try:
        from logos.runners.capture import (
            CapturedOutput,
            OutputCapture,
            private_output_dir,
            read_process_output,
        )
    except ImportError:  # inside the container it is mounted next to this file
        from capture import (  # type: ignore[import-not-found,no-redef]
            CapturedOutput,
            OutputCapture,
            private_output_dir,
            read_process_output,
        )


def _load_live_modules() -> None:
    """Import what only a watched command needs (logos.runners.live), at the first one.

    WHY not with the command modules: most commands are not watched (a batch's never are),
    and the module with its `typing` took about 6 ms of CPU at every sandbox's start.
    """
    global FLUSH_S, LiveOutput, LivePiece
    try:
        from logos.runners.live import FLUSH_S, LiveOutput, LivePiece
    except ImportError:  # inside the container it is mounted next to this file
        from live import (  # type: ignore[import-not-found,no-redef]
            FLUSH_S,
            LiveOutput,
            LivePiece,
        )


def _egress_forwarder_module() -> Any:
    try:
        from sandboxd.inside import egress_forwarder
    except ImportError:  # inside the container it is mounted next to this file
        import egress_forwarder  # type: ignore[import-not-found,no-redef]
    return egress_forwarder


def _open_channel(control_dir: str) -> tuple[int, int]:
    """The two FIFOs, each end opened without waiting: the backend holds the other ends."""
    reading = os.open(os.path.join(control_dir, IN_FIFO), os.O_RDONLY | os.O_NOFOLLOW)
    try:
        writing = os.open(os.path.join(control_dir, OUT_FIFO), os.O_WRONLY | os.O_NOFOLLOW)
    except BaseException:
        os.close(reading)
        raise
    return reading, writing


def rejoin_names(secret: str) -> tuple[str, str]:
    """(in, out): the FIFOs in REJOIN_DIR through which a daemon that knows `secret` reaches
    the supervisor again. One-way: knowing them tells nothing of the secret."""
    import hashlib  # WHY here: only a rejoin needs it, and the start must stay quick

    digest = hashlib.sha256(("sandboxd rejoin " + secret).encode()).hexdigest()
    return digest[:32] + ".in", digest[32:] + ".out"


def rejoin_proof(secret: str) -> str:
    """What a rejoined channel's hello carries to show it comes from this sandbox's
    supervisor: only a process that holds the secret can tell it."""
    import hashlib

    return hashlib.sha256(("sandboxd supervisor " + secret).encode()).hexdigest()


def _await_daemon(control_dir: str, secret: str, within_s: float) -> tuple[int, int] | None:
    """A new channel (reading, writing) once a daemon made its FIFOs, or None when none did
    within `within_s`."""
    names = rejoin_names(secret)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        channel = _open_rejoined(os.path.join(control_dir, REJOIN_DIR), names)
        if channel is not None:
            return channel
        time.sleep(REJOIN_POLL_S)
    return None


def _open_rejoined(directory: str, names: tuple[str, str]) -> tuple[int, int] | None:
    """Both FIFOs, opened without waiting, if the daemon made them and holds its ends (it
    renames them into place once it does); else None."""
    flags = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        reading = os.open(os.path.join(directory, names[0]), os.O_RDONLY | flags)
    except OSError:
        return None
    try:
        writing = os.open(os.path.join(directory, names[1]), os.O_WRONLY | flags)
    except OSError:  # not there yet, or nobody reads it (ENXIO)
        os.close(reading)
        return None
    ends = (reading, writing)
    if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in ends):
        for fd in ends:
            os.close(fd)
        return None
    for fd in ends:
        os.set_blocking(fd, True)
    return ends


def _say_hello(writing: int, shell: str, report: dict[str, Any]) -> None:
    """The first line on the channel: who we are, and `report` (mounts, Unix sockets)."""
    hello = {"hello": HELLO, "protocol": PROTOCOL, "pid": os.getpid(), "shell": shell}
    hello.update(report)
    line = json.dumps(hello, ensure_ascii=False).encode("utf-8") + b"\n"
    while line:
        line = line[os.write(writing, line) :]


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: supervisor.py CONTROL_DIR [SAVED_OUTPUT_DIR]", file=sys.stderr)
        return 2
    _make_undumpable()
    control_dir = argv[1]
    try:
        reading, writing = _open_channel(control_dir)
    except OSError as exc:
        print(f"sandboxd supervisor: cannot open its FIFOs: {exc}", file=sys.stderr)
        return 4
    settings = _read_settings(__file__)
    mounts = [str(path) for path in settings.get("mounts", [])]
    forwarder = None
    port = settings.get("egress_port")
    if port:
        forwarder = _egress_forwarder_module().listen(int(port))
    egress = "off" if forwarder is None else forwarder if isinstance(forwarder, str) else "ready"

    def report() -> dict[str, Any]:
        """What it sees of its mounts and Unix sockets, and whether its forwarder listens."""
        return {
            "mounts": report_mounts(mounts),
            "unix_sockets": _unix_sockets_state(),
            "egress": egress,
        }

    secret = os.urandom(_SECRET_BYTES).hex()
    shell = _pick_shell()
    try:
        # WHY now: the mounts are looked at before any command exists.
        _say_hello(writing, shell, {**report(), "secret": secret})
    except OSError:
        return 4  # the backend is gone: there is nothing to serve
    _load_command_modules()
    output_dir = argv[2] if len(argv) == 3 else private_output_dir(_SAVED_OUTPUT_DIR_IN)
    supervisor = Supervisor(
        reading,
        writing,
        shell,
        output_dir,
        control_dir,
        secret=secret,
        orphan_ttl_s=float(settings.get("orphan_ttl_s") or 0),
        report=report,
    )
    if os.getpid() == 1:
        _become_init(supervisor.spawned)
    if forwarder is not None and not isinstance(forwarder, str):
        supervisor.on_egress_ready = _egress_forwarder_module().start(
            forwarder, control_dir, supervisor.ask_egress
        )
    return supervisor.serve()


if __name__ == "__main__":
    # The image's python3 may predate the project's: say "fall back" rather than crash.
    if sys.version_info < (3, 8):  # noqa: UP036
        sys.exit(NO_PYTHON_EXIT)
    sys.exit(main(sys.argv))
