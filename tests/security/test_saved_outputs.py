"""Attack: make a cut output's saved copy land where another user can read it.

Saved copies live under a fixed name in a shared temp dir (`logos-output-<uid>`), so another
user can plant that name first: as a symlink to their own directory of world-readable files,
as a directory of their own, or by renaming the victim's directory away once it was checked
and putting a symlink in its place. In a sandbox, a request can mount a host directory over
the name. A copy must only ever land in a directory that is the user's own, private, and (in
a sandbox) the container's own.

The victim and the attacker are throwaway uids with no account: this needs root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.parts import require
from tests.support.sandboxd_harness import python_for_others, running_daemon_as, short_dir

VICTIM = 47_311
ATTACKER = 47_312
LINES = 5000
FLOOD = f"seq -f 'SECRET-%g' 1 {LINES}"
"""A secret output far over the 1 KiB kept below: it is cut, and its copy saved."""

VICTIM_PROGRAM = textwrap.dedent(
    """
    import json, sys
    from logos import ExecOptions, LocalRunner, execute_blocks_sync
    options = ExecOptions(max_output_bytes=1024, timeout_s=60)
    [result] = execute_blocks_sync([sys.argv[1]], LocalRunner(), options)
    print(json.dumps({"stdout": result.stdout, "stdout_file": result.stdout_file}))
    """
)

SWAPPER = textwrap.dedent(
    """
    import os, sys, time
    shared, victim_dir, loot = sys.argv[1:]
    while not os.path.exists(os.path.join(shared, "ready")):
        time.sleep(0.01)
    os.rename(victim_dir, os.path.join(shared, "moved"))
    os.symlink(loot, victim_dir)
    open(os.path.join(shared, "swapped"), "w").close()
    """
)

CLIENT = textwrap.dedent(
    """
    import json, sys, httpx
    transport = httpx.HTTPTransport(uds=sys.argv[1])
    with httpx.Client(transport=transport, base_url="http://sandboxd", timeout=120) as client:
        reply = client.post("/v1/run", json=json.loads(sys.argv[2]))
    print(json.dumps({"status": reply.status_code, **reply.json()}))
    """
)


def _python() -> tuple[str, dict[str, str]]:
    require(os.getuid() == 0, "playing two other users needs root")
    found = python_for_others()
    require(found is not None, "no Python interpreter that a non-root user may execute")
    assert found is not None
    return found


def _run_python(uid: int, script: str, *args: str, env: dict[str, str]) -> str:
    python, python_env = _python()
    done = subprocess.run(
        [python, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={**python_env, **env},
        user=uid,
        group=uid,
        extra_groups=[],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _shared_temp_dir(mode: int) -> Path:
    """A directory like /tmp (root's, open to all), with `mode`."""
    shared = short_dir("shared")
    shared.chmod(mode)
    return shared


def _loot(parent: Path) -> Path:
    """The attacker's directory, open to all so that a victim's copy could land in it."""
    loot = parent / "loot"
    loot.mkdir()
    loot.chmod(0o777)
    os.chown(loot, ATTACKER, ATTACKER)
    return loot


def _everything_under(directory: Path) -> list[Path]:
    return sorted(path for path in directory.rglob("*") if path.is_file())


def _holding_the_secret(directory: Path) -> list[Path]:
    return [path for path in _everything_under(directory) if b"SECRET-" in path.read_bytes()]


@pytest.mark.parametrize("planted", ["symlink", "directory open to all", "someone else's"])
def test_a_local_runner_saves_nothing_in_a_planted_directory(planted: str) -> None:
    shared = _shared_temp_dir(0o1777)
    loot = _loot(shared)
    # Only root could write into a directory that is someone else's and closed to others.
    victim = 0 if planted == "someone else's" else VICTIM
    name = shared / f"logos-output-{victim}"
    if planted == "symlink":
        name.symlink_to(loot)
        os.lchown(name, ATTACKER, ATTACKER)
    else:
        name.mkdir()
        name.chmod(0o777 if planted == "directory open to all" else 0o700)
        os.chown(name, ATTACKER, ATTACKER)

    reply = json.loads(_run_python(victim, VICTIM_PROGRAM, FLOOD, env={"TMPDIR": str(shared)}))

    assert _everything_under(loot) == [] and _everything_under(name) == []
    assert reply["stdout_file"] is None
    assert f"no copy was saved: {name}" in reply["stdout"]


def test_a_local_runner_checked_directory_cannot_be_swapped_for_a_symlink() -> None:
    # Not sticky, as some shared temp dirs are: another user may rename what is in it.
    shared = _shared_temp_dir(0o777)
    loot = _loot(shared)
    victim_dir = shared / f"logos-output-{VICTIM}"
    # The command signals once its runner has checked the directory, and waits for the swap
    # before writing the output that is saved.
    command = f"touch {shared}/ready; while [ ! -e {shared}/swapped ]; do sleep 0.02; done; {FLOOD}"
    python, python_env = _python()
    swapper = subprocess.Popen(
        [python, "-c", SWAPPER, str(shared), str(victim_dir), str(loot)],
        env=python_env,
        user=ATTACKER,
        group=ATTACKER,
        extra_groups=[],
    )
    try:
        reply = json.loads(
            _run_python(VICTIM, VICTIM_PROGRAM, command, env={"TMPDIR": str(shared)})
        )
        assert swapper.wait(timeout=60) == 0
    finally:
        swapper.kill()
        swapper.wait()

    assert victim_dir.is_symlink(), "the attacker's swap did not happen"
    assert _holding_the_secret(loot) == []
    assert reply["stdout_file"] is None or not reply["stdout_file"].startswith(str(victim_dir))


@pytest.fixture
def victim_daemon(docker_client: Any) -> Iterator[str]:
    """The socket of a daemon run by the victim, who is also its only caller."""
    with running_daemon_as(docker_client, VICTIM) as (daemon, _):
        yield str(daemon.socket)


def _request(socket_path: str, **request: Any) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(
        _run_python(VICTIM, CLIENT, socket_path, json.dumps(request), env={})
    )
    assert reply["status"] == 200, reply
    return reply


def _planted_host_dir(path: Path, owner: int, mode: int) -> None:
    """A host directory at `path`; the attacker's holds world-readable files named as the
    sandbox names its saved copies (cmd-<request id>.stdout)."""
    path.mkdir()
    path.chmod(mode)
    os.chown(path, owner, owner)
    if owner == ATTACKER:
        for request_id in range(1, 10):
            for stream in ("stdout", "stderr"):
                planted = path / f"cmd-{request_id}.{stream}"
                planted.touch()
                planted.chmod(0o666)
                os.chown(planted, ATTACKER, ATTACKER)


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_a_sandbox_saves_only_in_its_own_private_directory(victim_daemon: str) -> None:
    private = Path(f"/tmp/logos-output-{VICTIM}")
    former = Path("/tmp/logos-output")  # where sandboxes used to save, for all users alike
    require(
        not private.exists() and not former.exists(),
        f"{private} or {former} exists already: remove it to run this test",
    )
    project = short_dir("project")
    os.chown(project, VICTIM, VICTIM)
    flood = {"command": FLOOD, "max_output_bytes": 1024}
    try:
        # The attacker's directories, mounted over the names where copies are saved.
        _planted_host_dir(former, ATTACKER, 0o777)
        _planted_host_dir(private, ATTACKER, 0o777)
        mounts = [{"path": str(p), "read_only": False} for p in (former, private)]
        planted = _request(victim_daemon, session="planted", allowed_paths=mounts, **flood)
        assert _holding_the_secret(former) == [] and _holding_the_secret(private) == []
        assert planted["stdout_file"] is None and "no copy was saved" in planted["stdout"]

        # Even the victim's own private host directory is not the sandbox's to fill.
        shutil.rmtree(private)
        _planted_host_dir(private, VICTIM, 0o700)
        mount = [{"path": str(private), "read_only": False}]
        own = _request(victim_daemon, session="own", allowed_paths=mount, **flood)
        assert _everything_under(private) == []
        assert own["stdout_file"] is None and "mount point" in own["stdout"]

        # With nothing mounted over the name, the copy is saved inside the container.
        mount = [{"path": str(project), "read_only": False}]
        cut = _request(victim_daemon, session="clean", allowed_paths=mount, **flood)
        assert cut["stdout_file"] is not None
        assert Path(cut["stdout_file"]).parent == private
        read = _request(
            victim_daemon,
            session="clean",
            allowed_paths=mount,
            command='tail -n 1 "$SAVED"; stat -c %a "$(dirname "$SAVED")"',
            env={"SAVED": cut["stdout_file"]},
        )
        assert read["stdout"].split() == [f"SECRET-{LINES}", "700"]
        assert _everything_under(private) == [] and _everything_under(project) == []
    finally:
        shutil.rmtree(former, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
