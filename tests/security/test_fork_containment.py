"""Attack: a session being forked, with processes it left running, against the fork's copy.

Issue "Containment 5". Two breaks, on a real daemon as root, callers uid 1000:

1. The source wrote into a fork's read-write host directory: the daemon checked the source's
   tar archive with Python's tarfile and rewrote it keeping each member's PAX headers, so a
   PAX `path` of `tmp//W/X\\0/../../tmp/cover` was checked as `tmp/cover` and extracted by
   the fork's GNU tar as `tmp//W/X` (up to the NUL), inside the fork's granted directory.
2. "Every other process is stopped" did not hold: the copy stopped the source's processes
   with one SIGSTOP, and a process whose POSIX timer sent it SIGCONT every 2 ms ran on, and
   opened the copy's FIFO in the control directory.

And weak spots: a hostile tree stalled or bloated the whole daemon (a PAX header of digits,
a huge header, 100,000 members, a sparse member expanded per fork).

The copy now runs in a copier container that mounts no host path, with the source frozen by
the cgroup freezer, and the daemon reads nothing the source wrote (sandboxd.docker.fork).
Each attack here runs as a process left behind in the source, planted by the session's own
commands; what is checked is what the attacker, the forks and the host see.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.sampling import PeakOf, rss_bytes
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = [pytest.mark.docker]

ATTACKER = r"""
import ctypes, io, os, signal, sys, tarfile, time

mode, grants = sys.argv[1], sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)


class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_char * 48)]


class TimeSpec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def continue_every_2_ms():
    '''A POSIX timer that sends this process SIGCONT every 2 ms: a stopped process runs again.'''
    event = SigEvent(None, signal.SIGCONT, 0)  # SIGEV_SIGNAL
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer)) == 0  # MONOTONIC
    every = (TimeSpec * 2)(TimeSpec(0, 2_000_000), TimeSpec(0, 2_000_000))
    assert libc.timer_settime(timer, 0, every, None) == 0


def aimed(grant, inside, cover):
    '''A name a checker that trusts tarfile's names sees as tmp/`cover` and GNU tar (which
    reads it up to the NUL) as `inside` the grant, through `//`.'''
    relative = grant.strip("/")
    climb = "../" * (len(relative.split("/")) + len(inside.split("/")))
    return f"{relative.replace('/', '//', 1)}/{inside}\0/{climb}tmp/{cover}"


def crafted(grant, variant):
    '''A tar archive (no end blocks: a genuine one may follow) whose members are aimed at
    `grant`.'''
    stream = io.BytesIO()
    if variant == "pax-path":
        archive = tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT)
        members = [(aimed(grant, "readme.txt", "cover-a"), b"overwritten\n", 0o644),
                   (aimed(grant, ".git/hooks/post-checkout", "cover-b"),
                    b"#!/bin/sh\necho owned\n", 0o755),
                   (aimed(grant, "planted", "cover-c"), b"planted\n", 0o644)]
        for path, data, mode_bits in members:
            info = tarfile.TarInfo("tmp/cover")
            info.pax_headers = {"path": path}
            info.size, info.mode, info.mtime = len(data), mode_bits, time.time()
            archive.addfile(info, io.BytesIO(data))
    elif variant == "pax-linkpath":  # a link out (its target cut at a NUL), then through it
        archive = tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT)
        link = tarfile.TarInfo("tmp/link")
        link.type, link.mtime = tarfile.SYMTYPE, time.time()
        link.pax_headers = {"path": "tmp/way-out", "linkpath": f"{grant}/\0/tmp"}
        archive.addfile(link)
        info = tarfile.TarInfo("tmp/cover")
        info.pax_headers = {"path": aimed("/tmp/way-out", "planted", "cover-l")}
        info.size, info.mode, info.mtime = 8, 0o644, time.time()
        archive.addfile(info, io.BytesIO(b"planted\n"))
    elif variant == "pax-global":
        archive = tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT,
                               pax_headers={"path": aimed(grant, "planted", "cover-g")})
        info = tarfile.TarInfo("tmp/cover-g")
        info.size, info.mode, info.mtime = 8, 0o644, time.time()
        archive.addfile(info, io.BytesIO(b"planted\n"))
    else:  # gnu-longname, with the NUL and control characters
        archive = tarfile.open(fileobj=stream, mode="w", format=tarfile.GNU_FORMAT)
        doubled = grant.strip("/").replace("/", "//", 1)
        info = tarfile.TarInfo(f"{doubled}/planted\0{'x' * 120}\n\x1b/" + "y" * 50)
        info.size, info.mode, info.mtime = 8, 0o644, time.time()
        archive.addfile(info, io.BytesIO(b"planted\n"))
    return stream.getvalue()


def ticking(log):
    '''A line per pass: when this process ran (CLOCK_MONOTONIC is the host's).'''
    log.write(f"{time.monotonic():.6f}\n")


if mode == "timer":
    continue_every_2_ms()
variants = ["pax-path", "pax-linkpath", "pax-global", "gnu-longname"]
archives = [crafted(grant, variants[n % 4]) for n, grant in enumerate(grants)]
known = set(os.listdir("/.sandboxd"))
seen = open("/tmp/attacker/seen", "w", buffering=1)
log = open(f"/tmp/attacker/ticks-{os.getpid()}", "w", buffering=1)
if mode == "pair":  # a second process continues this one whenever it can
    me = os.getpid()
    if os.fork() == 0:
        log = open(f"/tmp/attacker/ticks-{os.getpid()}", "w", buffering=1)
        while True:
            os.kill(me, signal.SIGCONT)
            ticking(log)
            time.sleep(0.001)
open("/tmp/attacker/ready", "w").close()
written = set()
while True:
    if mode == "forking":  # a new process every pass: none may run while frozen
        child = os.fork()
        if child == 0:
            ticking(open(f"/tmp/attacker/ticks-{os.getpid()}", "w", buffering=1))
            os._exit(0)
        os.waitpid(child, 0)
    ticking(log)
    for entry in set(os.listdir("/.sandboxd")) - known:
        seen.write(f"{entry!r}\n")
        known.add(entry)
        if entry.startswith("fork-") and archives:
            try:  # the copy's FIFO: write an archive of ours into the copy
                fifo = os.open(f"/.sandboxd/{entry}", os.O_WRONLY | os.O_NONBLOCK)
                os.write(fifo, archives.pop(0))
                os.close(fifo)
            except OSError as exc:
                seen.write(f"{exc!r}\n")
    time.sleep(0.001)
"""

PLANT = r"""
import os, sys

grants = sys.argv[1:]
os.makedirs("/tmp/planted/.git/hooks")
names = ["new\nline", "esc\x1b[31m", "trailing ", " leading", "...", "-rf", "back\\slash",
         "x" * 255, "tmp", "cover", "\t", "?*[", os.fsdecode(b"latin-\xe9")]
for name in names:
    with open(os.path.join("/tmp/planted", name), "wb") as planted:
        planted.write(os.fsencode(name))
with open("/tmp/planted/.git/hooks/post-checkout", "w") as hook:
    hook.write("#!/bin/sh\necho owned\n")
os.chmod("/tmp/planted/.git/hooks/post-checkout", 0o755)
os.link("/tmp/planted/cover", "/tmp/planted/cover-again")
links = {"root": "/", "proc-root": "/proc/1/root", "control": "/.sandboxd",
         "copier-from": "/from/0", "copier-into": "/into/0/0", "copier-other": "/into/0/1"}
for n, grant in enumerate(grants):
    links[f"grant-{n}"] = grant
    links[f"grant-{n}-file"] = f"{grant}/readme.txt"
    links[f"grant-{n}-up"] = "../" * 8 + grant.strip("/")
    links[f"grant-{n}-slashes"] = "/" + grant.replace("/", "//") + "//"
    # Where a fork mounts the grant (or what a path under /tmp would name): its own entries.
    os.makedirs(f"/tmp{grant}/.git/hooks", exist_ok=True)
    with open(f"/tmp{grant}/readme.txt", "w") as shadow:
        shadow.write("from the session\n")
    if grant.startswith("/tmp/"):
        os.makedirs(f"{grant}/.git/hooks", exist_ok=True)
        with open(f"{grant}/readme.txt", "w") as shadow:
            shadow.write("from the session\n")
for name, target in links.items():
    os.symlink(target, os.path.join("/tmp/planted", name))
"""

LISTING = r"""
import json, os, sys

found = []
for top, dirs, files in os.walk(sys.argv[1]):
    for name in sorted(dirs + files):
        path = os.path.join(top, name)
        info = os.lstat(path)
        link = os.readlink(path) if os.path.islink(path) else None
        data = None
        if not link and os.path.isfile(path):
            with open(path, "rb") as file:
                data = file.read().hex()
        found.append([repr(path), oct(info.st_mode), link, data])
print(json.dumps(sorted(found)))
"""


def run(client: httpx.Client, session: str, command: str, **fields: Any) -> dict[str, Any]:
    answer = client.post("/v1/run", json={"session": session, "command": command, **fields})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert body["error"] is None and body["exit_code"] == 0, body
    return body


def python(script: str, *args: str) -> str:
    return shlex.join(["python3", "-c", script, *args])


def leave_attacker(
    client: httpx.Client, session: str, mode: str, grants: list[str], **fields: Any
) -> str:
    """Start the attacker in `session` (`fields`: its commands' settings), left running; the
    session's container."""
    started = run(
        client,
        session,
        "mkdir -p /tmp/attacker && "
        f"setsid {python(ATTACKER, mode, *grants)} </dev/null >/tmp/attacker/out 2>&1 & "
        "while [ ! -e /tmp/attacker/ready ]; do sleep 0.02; done",
        timeout_s=30,
        **fields,
    )
    return str(started["sandbox"])


class FrozenWatch:
    """Samples the kernel's freezer state of a container's cgroup from a thread, every
    millisecond: the intervals it was frozen throughout, from the end of the first read that
    found it frozen to the start of the last (each read saw the state of an instant between
    its start and its end)."""

    def __init__(self, docker_client: Any, container: str) -> None:
        pid = docker_client.api.inspect_container(container)["State"]["Pid"]
        self._state = freezer_state_file(int(pid))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)
        self.frozen: list[tuple[float, float]] = []

    def __enter__(self) -> FrozenWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        since: float | None = None
        last_began = 0.0
        while not self._stop.is_set():
            began = time.monotonic()
            frozen = is_frozen(self._state)
            ended = time.monotonic()
            if frozen:
                since = ended if since is None else since
                last_began = began
            elif since is not None:
                if last_began > since:
                    self.frozen.append((since, last_began))
                since = None
            time.sleep(0.001)


def freezer_state_file(pid: int) -> Path:
    """Where the kernel says whether the cgroup of `pid` is frozen: cgroup v1's freezer
    state, or v2's events."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            return Path("/sys/fs/cgroup/freezer", path.lstrip("/"), "freezer.state")
    unified = next(line.split("::", 1)[1] for line in lines if line.startswith("0::"))
    return Path("/sys/fs/cgroup", unified.lstrip("/"), "cgroup.events")


def is_frozen(state: Path) -> bool:
    text = state.read_text()
    if state.name == "freezer.state":
        return text.strip() == "FROZEN"
    return "frozen 1" in text.splitlines()


TICKS_WHEN = r"""
import glob, json, sys

frozen, done = json.loads(sys.argv[1]), float(sys.argv[2])
ticks = [float(line) for path in glob.glob("/tmp/attacker/ticks-*") for line in open(path)]
inside = [t for t in ticks for start, end in frozen if start < t < end]
print(json.dumps({"inside": inside[:5], "after": sum(t > done for t in ticks)}))
"""


def snapshot(directory: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under `directory`: mode, mtime (ns), content digest (files)."""
    found = {}
    for path in [directory, *sorted(directory.rglob("*"))]:
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        found[str(path.relative_to(directory))] = (info.st_mode, info.st_mtime_ns, digest)
    return found


@pytest.fixture
def grants() -> Iterator[list[Path]]:
    """Read-write directories granted to forks only, as a workspace looks: a readme and a
    git hooks directory; under /tmp and outside it."""
    outside = [Path(tempfile.mkdtemp(prefix="frw", dir="/var/tmp")) for _ in range(2)]
    made = [short_dir("frw"), short_dir("frw"), *outside]
    for grant in made:
        (grant / ".git" / "hooks").mkdir(parents=True)
        (grant / "readme.txt").write_text("the host's\n")
    yield made
    for grant in made:
        shutil.rmtree(grant, ignore_errors=True)


def test_a_process_left_in_the_source_cannot_write_into_a_forks_granted_directory(
    daemon: Daemon, docker_client: Any, grants: list[Path]
) -> None:
    """Finding 1, each variant into a fork of its own: the source is granted one read-only
    path; its attacker (SIGCONT every 2 ms) writes crafted archives (a PAX path, a PAX
    linkpath and a member through the link, a global PAX header, a GNU long name, with NULs,
    `//`, trailing slashes and control characters) into whatever copy stream it finds, and
    its commands planted names, symlinks out (to the grants, with `//` and trailing slashes,
    the copier's own paths, /proc/1/root) and entries where the forks mount their grants.
    Each fork's granted directory gets no write; each fork gets the session's tree as it
    is."""
    read_only = short_dir("fro")
    before = {grant: snapshot(grant) for grant in grants}
    with daemon.client() as client:
        session = "containment-source"
        ro = [{"path": str(read_only), "read_only": True}]
        run(client, session, python(PLANT, *map(str, grants)), allowed_paths=ro)
        leave_attacker(client, session, "timer", [str(g) for g in grants], allowed_paths=ro)
        source_tree = run(client, session, python(LISTING, "/tmp/planted"), allowed_paths=ro)
        answers = []
        for n, grant in enumerate(grants):
            sandbox = {"allowed_paths": [{"path": str(grant), "read_only": False}]}
            fork = client.post(
                f"/v1/sessions/{session}/fork",
                json={"into": [f"containment-{n}"], "sandbox": sandbox},
            )
            answers.append((n, grant, sandbox, fork))
        for grant in grants:
            assert snapshot(grant) == before[grant], f"the copy wrote into {grant}"
        for n, grant, sandbox, fork in answers:
            assert fork.status_code == 200, fork.text
            seen = run(client, f"containment-{n}", python(LISTING, "/tmp/planted"), **sandbox)
            assert seen["stdout"] == source_tree["stdout"]
            mounted = run(client, f"containment-{n}", f"cat {grant}/readme.txt", **sandbox)
            assert mounted["stdout"] == "the host's\n"
        seen = run(client, session, "cat /tmp/attacker/seen", allowed_paths=ro)
        assert seen["stdout"] == ""
        for n in range(len(grants)):
            client.delete(f"/v1/sessions/containment-{n}")
        client.delete(f"/v1/sessions/{session}")


@pytest.mark.parametrize("mode", ["timer", "pair", "forking"])
def test_no_process_of_the_source_runs_while_it_is_copied(
    daemon: Daemon, docker_client: Any, mode: str
) -> None:
    """Finding 2: a process continued by its own timer every 2 ms, one continued by a
    second process, one that forks a new process every pass: each logs when it ran. While
    the source is seen frozen, none ran; the attacker saw nothing of the copy appear in the
    control directory; and it runs again once the fork is done."""
    with daemon.client() as client:
        session = f"frozen-{mode}"
        container = leave_attacker(client, session, mode, [])
        # Enough to copy for the freeze to last (a second or so): the watch samples it.
        run(client, session, "head -c 150000000 /dev/urandom > /tmp/bulk")
        forks = [f"{session}-fork-1", f"{session}-fork-2"]
        with FrozenWatch(docker_client, container) as watch:
            fork = client.post(f"/v1/sessions/{session}/fork", json={"into": forks})
            done = time.monotonic()
        assert fork.status_code == 200, fork.text
        seen = run(client, session, "cat /tmp/attacker/seen")["stdout"]
        assert seen == "", f"the attacker ran while the copy was taken, and saw: {seen}"
        assert watch.frozen, "the source was never seen frozen while it was copied"
        time.sleep(0.3)
        when = python(TICKS_WHEN, json.dumps(watch.frozen), str(done))
        ticks = json.loads(run(client, session, when)["stdout"])
        assert ticks["inside"] == [], f"ran while frozen {watch.frozen}: {ticks['inside']}"
        assert ticks["after"], "the attacker did not run again after the fork"
        for into in forks:
            client.delete(f"/v1/sessions/{into}")
        client.delete(f"/v1/sessions/{session}")


HOSTILE_TREES = {
    "100,000 files": (
        "import os\nos.mkdir('/tmp/many')\n"
        "for i in range(100_000):\n"
        "    os.close(os.open(f'/tmp/many/f{i}', os.O_CREAT | os.O_WRONLY))",
        "ls -f /tmp/many | wc -l",
        "100002\n",
    ),
    "a nest 5,000 deep": (
        "import os\nlevel = os.open('/tmp', os.O_RDONLY)\n"
        "for _ in range(5000):\n"
        "    os.mkdir('d', dir_fd=level)\n"
        "    deeper = os.open('d', os.O_RDONLY, dir_fd=level)\n"
        "    os.close(level)\n    level = deeper\n"
        "os.close(os.open('bottom', os.O_CREAT | os.O_WRONLY, dir_fd=level))",
        "python3 -c \"import os\nfd = os.open('/tmp', os.O_RDONLY)\nn = 0\n"
        "while 'd' in os.listdir(fd):\n"
        "    deeper = os.open('d', os.O_RDONLY, dir_fd=fd); os.close(fd); fd = deeper; n += 1\n"
        "print(n, 'bottom' in os.listdir(fd))\"",
        "5000 True\n",
    ),
    "a sparse 1 GiB file": (
        "f = open('/tmp/sparse', 'wb')\nf.truncate(1024**3)\nf.seek(512 * 1024**2)\n"
        "f.write(b'middle')\nf.close()",
        "stat -c '%s %b' /tmp/sparse; dd if=/tmp/sparse bs=1 skip=536870912 count=6 2>/dev/null",
        None,
    ),
    "huge names": (
        "import os\nos.mkdir('/tmp/names')\n"
        "for i in range(2000):\n"
        "    open(f'/tmp/names/{i:04d}' + 'n' * 251, 'w').write('x')",
        "ls /tmp/names | awk '{ n += length($0) } END { print NR, n }'",
        "2000 510000\n",
    ),
}


@pytest.mark.parametrize("tree", HOSTILE_TREES)
def test_a_hostile_tree_costs_the_copier_not_the_daemon(
    daemon: Daemon, docker_client: Any, tree: str
) -> None:
    """While a session holding a hostile tree is forked into two, another caller's
    /v1/health answers within 1 s every time and the daemon's resident memory stays under
    400 MB; the forks get the tree."""
    make, check, expected = HOSTILE_TREES[tree]
    session = f"hostile-{hashlib.sha256(tree.encode()).hexdigest()[:8]}"
    with daemon.client() as client, daemon.client() as other:
        run(client, session, python(make), timeout_s=120)
        source_seen = run(client, session, check)["stdout"]
        if expected is not None:
            assert source_seen == expected

        def health_ms() -> int:
            began = time.monotonic()
            assert other.get("/v1/health").status_code == 200
            return int((time.monotonic() - began) * 1000)

        forks = [f"{session}-1", f"{session}-2"]
        with (
            PeakOf(health_ms, interval_s=0.1) as latency,
            PeakOf(lambda: rss_bytes(daemon.proc.pid), interval_s=0.02) as memory,
        ):
            fork = client.post(f"/v1/sessions/{session}/fork", json={"into": forks})
        assert fork.status_code == 200, fork.text
        assert latency.peak < 1000, f"/v1/health took {latency.peak} ms"
        assert memory.peak < 400 * 1024**2, f"the daemon's RSS reached {memory.peak} bytes"
        for into in forks:
            seen = run(client, into, check)["stdout"]
            assert seen == source_seen
            client.delete(f"/v1/sessions/{into}")
        if tree == "a sparse 1 GiB file":
            size, blocks, middle = source_seen.split()
            assert (size, middle) == (str(1024**3), "middle") and int(blocks) < 64, source_seen
        client.delete(f"/v1/sessions/{session}")
