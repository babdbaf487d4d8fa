"""Attack: a session's commands write into the host directory a fork of it is granted.

Issue 33, finding 2 (SandboxEscapeBench's "poisoned copy" shape: the source of a copy is
under the attacker's control). A fork used to be filled from one `tar` in the source
session's sandbox, as the session's uid: a process the session's commands left behind found
that tar (or the shell that started it) in /proc and wrote an archive of its own into the
copy's stream through /proc/<pid>/fd/N, before the genuine one, its members aimed at the
read-write host directory granted to the fork only, with names an exclusion list may not
match: `./tmp/...`, `tmp//...`, `tmp/./...`, and a relative symlink followed by a member
through it that overwrites a host file. The copy is now made outside the source, which is
frozen meanwhile (sandboxd.docker.fork): the attacker, still left behind, must find nothing
to write into, and the forks must get the genuine files.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import httpx
import pytest

from tests.support.sandboxd_harness import Daemon, run_with_paths, short_dir

pytestmark = pytest.mark.docker

PLANTED = ["dot-slash", "double-slash", "dot-segment", "hop"]

ATTACKER = """
import io, os, sys, tarfile, time


def member(name, data=b"", link=None):
    info = tarfile.TarInfo(name)
    info.mtime, info.mode = time.time(), 0o644
    if link:
        info.type, info.linkname = tarfile.SYMTYPE, link
    else:
        info.size = len(data)
    return info, io.BytesIO(data)


stream = io.BytesIO()
archive = tarfile.open(fileobj=stream, mode="w", format=tarfile.GNU_FORMAT)
for n, target in enumerate(sys.argv[1:]):
    top, leaf = target.strip("/").split("/", 1)
    for info, data in [
        member(f"./{top}/{leaf}/dot-slash", b"planted\\n"),
        member(f"{top}//{leaf}/double-slash", b"planted\\n"),
        member(f"{top}/./{leaf}/dot-segment", b"planted\\n"),
        member(f"{top}/hop{n}", link=leaf),
        member(f"{top}/hop{n}/kept.txt", b"overwritten\\n"),
    ]:
        archive.addfile(info, data)
crafted = stream.getvalue()  # no end-of-archive blocks: the genuine archive follows ours
poisoned = set()
open("/tmp/watching", "w").close()
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                env = dict(v.split(b"=", 1) for v in environ.read().split(b"\\0") if b"=" in v)
            if b"SANDBOXD_PIPE_FD" not in env:  # the copy's shell and its tar have it
                continue
            pipe = f"/proc/{entry}/fd/{env[b'SANDBOXD_PIPE_FD'].decode()}"
            which = os.readlink(pipe)
            if not which.startswith("pipe:") or which in poisoned:
                continue
            copy = os.open(pipe, os.O_WRONLY)
        except (OSError, ValueError):
            continue
        poisoned.add(which)
        os.write(copy, crafted)
        os.close(copy)
"""


ATTEMPTS = 3
"""Forks of one poisoned session, each with a host directory of its own: the attacker races
each copy's tar on a shared machine, and one try may come too late."""


def _files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir()}


def test_a_sources_process_cannot_write_into_a_forks_read_write_directory(
    daemon: Daemon,
) -> None:
    """The source is granted one read-only path; each fork another, read-write, holding a
    file. Whatever the source's processes write into the copies, the forks' host directories
    are untouched; each fork is refused with a 4xx naming a member, or gets the genuine files."""
    granted = short_dir("fro")
    (granted / "notes.txt").write_text("read-only\n")
    theirs = [short_dir("frw") for _ in range(ATTEMPTS)]
    for directory in theirs:
        (directory / "kept.txt").write_text("host\n")
    leave_behind = (
        "echo genuine > /tmp/genuine.txt && "
        f"setsid python3 -c {shlex.quote(ATTACKER)} {shlex.join(map(str, theirs))} "
        "</dev/null >/dev/null 2>&1 & while [ ! -e /tmp/watching ]; do sleep 0.05; done"
    )
    source = run_with_paths(
        daemon, leave_behind, [(granted, True)], session="poisoned-source", timeout_s=30
    )
    assert source.status_code == 200 and source.json()["exit_code"] == 0, source.text
    with daemon.client() as client:
        for attempt, directory in enumerate(theirs):
            _fork_leaves_its_directory_alone(client, f"poisoned-fork-{attempt}", directory)


def _fork_leaves_its_directory_alone(client: httpx.Client, into: str, directory: Path) -> None:
    sandbox = {"allowed_paths": [{"path": str(directory), "read_only": False}]}
    fork = client.post(
        "/v1/sessions/poisoned-source/fork", json={"into": [into], "sandbox": sandbox}
    )
    assert _files(directory) == {"kept.txt": b"host\n"}, (
        f"the copy into {into} wrote into its host directory: {_files(directory)}"
    )
    if fork.status_code != 200:
        assert 400 <= fork.status_code < 500, fork.text
        message = fork.json()["error"]["message"]
        assert any(name in message for name in PLANTED), message
        return
    seen = client.post("/v1/run", json={"command": "ls -A /tmp", "session": into, **sandbox})
    listing = seen.json()["stdout"].split()
    assert "genuine.txt" in listing and not any("hop" in name for name in listing), listing
