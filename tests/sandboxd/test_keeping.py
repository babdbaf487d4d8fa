"""What a daemon keeps across its restarts, without an engine: which containers it takes over
or leaves, its records on disk, its state directory's lock and id, the jobs it keeps, and
the policy a sandbox it takes over is held to."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxd.backend import Limits, Mount, SandboxSpec
from sandboxd.docker.container import Layout
from sandboxd.docker.ownership import (
    KEPT_STOPPED_GRACE_S,
    LABEL_OWNER,
    LABEL_OWNER_PROCESS,
    LABEL_STATE,
    OwnerProcess,
    disposition,
    engine_time,
    kept_elsewhere,
)
from sandboxd.docker.records import RecordStore, SandboxRecord
from sandboxd.docker.scratch import ScratchVolume
from sandboxd.policy.policy import Policy
from sandboxd.server.spec_check import spec_check
from sandboxd.server.state_dir import StateDirError, claim_state_dir
from sandboxd.sessions.job_store import JobRecord, JobStore

IMAGE = "logos-sandbox:latest"


def test_a_daemon_takes_over_its_own_kept_sandboxes_and_leaves_other_daemons_running_ones() -> None:
    me = OwnerProcess.current()
    gone = OwnerProcess(me.boot_id, me.pid_namespace, me.pid, me.start_ticks + 1)

    def found(labels: dict[str, str], state: str, state_id: str | None = "mine") -> str:
        return disposition(labels, state, me, instance="me", state_id=state_id)

    assert found({LABEL_OWNER: "me", LABEL_STATE: "mine"}, "running") == "ours"
    assert found({LABEL_OWNER: "before", LABEL_STATE: "mine"}, "running") == "kept"
    assert found({LABEL_OWNER: "before", LABEL_STATE: "mine"}, "exited") == "kept"
    for state in ("running", "paused"):  # another state directory's: its daemon comes back
        assert found({LABEL_OWNER: "x", LABEL_STATE: "theirs"}, state) == "leave"
        assert found({LABEL_OWNER: "x", LABEL_STATE: "mine"}, state, None) == "leave"
    assert found({LABEL_OWNER: "x", LABEL_STATE: "theirs"}, "exited") == "sweep"  # stop unknown
    # Stopped lately: left to its own daemon for a while, which tells its session why.
    now = time.time()
    stopped = {LABEL_OWNER: "x", LABEL_STATE: "theirs"}
    assert kept_elsewhere(stopped, "exited", "mine") and not kept_elsewhere(
        stopped, "running", "mine"
    )
    assert not kept_elsewhere(stopped, "exited", "theirs")
    lately = disposition(
        stopped, "exited", me, instance="me", state_id="mine", now=now, stopped_at=now - 5
    )
    assert lately == "leave"
    long_ago = now - KEPT_STOPPED_GRACE_S - 1
    assert (
        disposition(
            stopped, "exited", me, instance="me", state_id="mine", now=now, stopped_at=long_ago
        )
        == "sweep"
    )
    assert engine_time("0001-01-01T00:00:00Z") is None
    assert engine_time("2026-11-29T06:01:02.123456789Z") == pytest.approx(1795932062.123456)
    # Not kept: the owner process decides (a killed daemon's that kept nothing is swept).
    assert found({LABEL_OWNER: "x", LABEL_OWNER_PROCESS: gone.label}, "running") == "sweep"
    assert found({LABEL_OWNER: "x", LABEL_OWNER_PROCESS: me.label}, "running") == "leave"


def _record(name: str, mount: Mount) -> SandboxRecord:
    spec = SandboxSpec(IMAGE, (mount,), False, 1000, 1000, allowed_hosts=("pypi.org",))
    return SandboxRecord.of(
        name=name,
        container_id="c" * 64,
        session="u1000-s1",
        spec=spec,
        control_dir="0123abcd",
        layout=Layout("/home/sandbox", True, True, True),
        volumes=(ScratchVolume("/tmp", f"{name}.tmp.00", 1024**2, "mode=1777"),),
        supervised=True,
        secret="ab" * 32,
        created_at=1.0,
        filling=False,
    )


def test_records_come_back_whole_and_an_unreadable_one_is_set_aside(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    record = _record("sandboxd-s1-0123abcd", Mount.of(str(tmp_path)))
    store.save(record)
    path = tmp_path / "sandboxes" / "sandboxd-s1-0123abcd.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    (tmp_path / "sandboxes" / "broken.json").write_text('{"format": 1, "name": ')
    (loaded,) = store.load()
    assert loaded == record and loaded.spec() == record.spec()
    assert (tmp_path / "sandboxes" / "broken.unreadable").exists()
    store.remove(record.name)
    store.remove(record.name)  # twice: nothing to remove
    assert store.load() == []


def test_one_daemon_at_a_time_uses_a_state_directory_and_its_id_stays(tmp_path: Path) -> None:
    held = claim_state_dir(tmp_path)
    try:
        assert len(held.id) == 16
        with pytest.raises(
            StateDirError, match=f"another sandboxd uses .* \\(pid {os.getpid()}\\)"
        ):
            claim_state_dir(tmp_path)
        # Another process, too (the lock is the kernel's, not this process's).
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; "
                "from sandboxd.server.state_dir import claim_state_dir, StateDirError\n"
                "try: claim_state_dir(Path(sys.argv[1]))\n"
                "except StateDirError as exc: print(exc)",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "another sandboxd uses the state directory" in other.stdout, other
    finally:
        held.release()
    again = claim_state_dir(tmp_path)
    assert again.id == held.id
    again.release()


def test_jobs_are_kept_and_no_id_is_given_twice(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    record = JobRecord(
        id="7",
        uid=1000,
        session="s1",
        command="sleep 60",
        caller_id=None,
        started_at=1.0,
        timeout_s=120.0,
        max_output_bytes=4096,
        stdout_file=None,
        stderr_file=None,
        sandbox="sandboxd-s1-0123abcd",
        number=3,
    )
    store.save(record)
    store.save_last_id(9)
    assert store.load() == ([record], 9)
    store.remove("7")
    assert store.load() == ([], 9)


def test_a_sandbox_taken_over_is_held_to_the_policy_of_the_daemon_that_takes_it(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    mount = Mount.of(str(work), read_only=False)
    spec = SandboxSpec(IMAGE, (mount,), False, os.getuid(), os.getgid())
    allowing = Policy(image=IMAGE, allowed_roots=[tmp_path])
    assert spec_check(allowing, Limits())(spec) is None
    denying = Policy(image=IMAGE, allowed_roots=[tmp_path], extra_denies=[work])
    assert str(work) in (spec_check(denying, Limits())(spec) or "")
    other_image = Policy(image="another:latest")
    assert "image" in (spec_check(other_image, Limits())(spec) or "")
    assert "limits" in (spec_check(allowing, Limits(pids=64))(spec) or "")
    work.rename(tmp_path / "moved")
    work.mkdir()  # the same name, another directory
    why = spec_check(allowing, Limits())(spec)
    assert why is not None and "no longer what it was" in why, why
