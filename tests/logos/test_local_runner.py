"""LocalRunner on real bash: timeouts, process groups, floods, encodings, environment."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from logos import AllowedPath, ExecOptions
from logos.options import NONINTERACTIVE_ENV
from logos.runners.group_reaper import KILL_GRACE_S
from logos.runners.local import LocalRunner
from tests.support.processes import processes_matching

pytestmark = pytest.mark.anyio


async def none_left(command: str) -> None:
    """After a moment for the kernel to reap, no process runs `command` any more."""
    await anyio.sleep(0.1)
    assert processes_matching(command) == []


async def test_stdout_stderr_and_exit_code() -> None:
    result = await LocalRunner().run("echo out; echo err >&2; exit 3", ExecOptions())
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert result.signal is None and not result.timed_out and result.error is None
    assert result.duration_s > 0


async def test_stdin_is_empty_and_environment_is_noninteractive() -> None:
    result = await LocalRunner().run(
        "cat; " + "; ".join(f'echo "{key}=${key}"' for key in NONINTERACTIVE_ENV),
        ExecOptions(env={"TERM": "xterm"}),
    )
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen == {**NONINTERACTIVE_ENV, "TERM": "xterm"}


async def test_env_overrides_and_inherit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGOS_TEST_PARENT", "from-parent")
    runner = LocalRunner()
    inherited = await runner.run(
        'echo "$LOGOS_TEST_PARENT $EXTRA"', ExecOptions(env={"EXTRA": "x"})
    )
    assert inherited.stdout == "from-parent x\n"
    isolated = await runner.run(
        'echo "[$LOGOS_TEST_PARENT] $EXTRA"', ExecOptions(env={"EXTRA": "y"}, inherit_env=False)
    )
    assert isolated.stdout == "[] y\n"


async def test_working_directory_rules(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    runner = LocalRunner()
    explicit = await runner.run("pwd", ExecOptions(workdir=str(second)))
    assert explicit.stdout.strip() == str(second)
    from_paths = await runner.run(
        "pwd", ExecOptions(allowed_paths=(AllowedPath(str(first)), AllowedPath(str(second))))
    )
    assert from_paths.stdout.strip() == str(first)
    default = await runner.run("pwd", ExecOptions())
    assert default.stdout.strip() == os.getcwd()
    missing = await runner.run("pwd", ExecOptions(workdir=str(tmp_path / "nope")))
    assert missing.error is not None and "does not exist" in missing.error


@pytest.mark.timeout(30)
async def test_timeout_kills_the_whole_group_including_grandchildren(marker: str) -> None:
    sleep = f"sleep {marker}"
    command = f"{sleep} & {sleep} & sleep 60"
    started = time.monotonic()
    result = await LocalRunner().run(command, ExecOptions(timeout_s=1))
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code is None
    assert result.signal is not None
    assert elapsed < 1 + KILL_GRACE_S + 1
    await none_left(sleep)


@pytest.mark.timeout(30)
async def test_timeout_escalates_to_sigkill_when_term_is_ignored(marker: str) -> None:
    sleep = f"sleep {marker}"
    command = f"trap '' TERM; {sleep} & trap '' TERM; sleep 60"
    result = await LocalRunner().run(command, ExecOptions(timeout_s=0.5))
    assert result.timed_out
    await none_left(sleep)


@pytest.mark.timeout(30)
async def test_background_grandchild_holding_stdout_does_not_block(marker: str) -> None:
    sleep = f"sleep {marker}"
    runner = LocalRunner()
    started = time.monotonic()
    result = await runner.run(f"{sleep} & echo hi", ExecOptions(timeout_s=20))
    assert result.stdout == "hi\n" and result.exit_code == 0 and not result.timed_out
    assert time.monotonic() - started < 5
    # Like a terminal, the background job lives on until the runner is closed.
    assert processes_matching(sleep)
    await runner.aclose()
    await none_left(sleep)


@pytest.mark.timeout(30)
async def test_cancellation_kills_the_process_group(marker: str) -> None:
    sleep = f"sleep {marker}"
    runner = LocalRunner()
    with anyio.move_on_after(0.5):
        await runner.run(f"{sleep} & {sleep}", ExecOptions(timeout_s=60))
        pytest.fail("the run should have been cancelled")
    await none_left(sleep)


async def test_killed_by_signal_is_reported() -> None:
    result = await LocalRunner().run("kill -KILL $$", ExecOptions())
    assert result.signal == 9 and result.signal_name == "SIGKILL"
    assert result.exit_code is None and not result.timed_out


async def test_cannot_start_is_an_error_not_an_exception() -> None:
    result = await LocalRunner(shell="/nonexistent/bash").run("true", ExecOptions())
    assert result.error is not None and "could not start" in result.error
    assert result.exit_code is None


def resident_kb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:", 1)[1].split()[0])


@pytest.mark.timeout(60)
async def test_output_flood_keeps_memory_bounded(tmp_path: Path) -> None:
    # WHY sample the resident size instead of comparing ru_maxrss: that is the peak of the
    # whole test process, so a bigger peak left by an earlier test would hide any growth.
    before_kb = peak_kb = resident_kb()
    options = ExecOptions(max_output_bytes=4096, max_saved_output_bytes=1024 * 1024)
    async with anyio.create_task_group() as sampler:

        async def sample() -> None:
            nonlocal peak_kb
            while True:
                peak_kb = max(peak_kb, resident_kb())
                await anyio.sleep(0.01)

        sampler.start_soon(sample)
        result = await LocalRunner().run("yes | head -c 2G", options)
        sampler.cancel_scope.cancel()
    grown_mb = (max(peak_kb, resident_kb()) - before_kb) / 1024
    assert result.exit_code == 0
    # 4096 bytes kept, less the half line "y\n" cut at the start of the tail.
    assert result.stdout_dropped_bytes == 2 * 1024**3 - 4096 + 2
    assert result.stdout.startswith("y\ny\n") and result.stdout.endswith("y\ny\n")
    assert "bytes omitted" in result.stdout
    assert grown_mb < 16, f"runner grew by {grown_mb:.1f} MB while capturing 2 GB"
    assert result.stdout_file is not None
    saved = Path(result.stdout_file).read_bytes()
    assert saved[: 1024**2] == b"y\n" * (512 * 1024)
    unsaved = 2 * 1024**3 - 1024**2
    note = f"\n[… {unsaved} more bytes were not saved: this copy holds only the first 1048576"
    assert saved[1024**2 :].decode() == note + " bytes …]\n"


async def test_truncation_never_splits_a_utf8_character() -> None:
    # 5000 three-byte characters; a 101-byte limit keeps a 50-byte head (16 whole
    # characters, 48 bytes) and a 51-byte tail (17 characters).
    options = ExecOptions(max_output_bytes=101)
    result = await LocalRunner().run("python3 -c \"print('€' * 5000, end='')\"", options)
    head, _, tail = result.stdout.partition("\n[… 14901 bytes omitted …]\n")
    assert (head, tail) == ("€" * 16, "€" * 17)
    assert result.stdout_dropped_bytes == 14901


async def test_binary_and_invalid_utf8_are_replaced_not_fatal() -> None:
    result = await LocalRunner().run(r"printf 'ok\xff\xfe\x00end\xc3'", ExecOptions())
    assert result.exit_code == 0
    assert result.stdout.startswith("ok") and "end" in result.stdout
    assert "\ufffd" in result.stdout


async def test_saved_outputs_go_to_one_private_directory_only_when_cut() -> None:
    runner = LocalRunner()
    small = await runner.run("echo small", ExecOptions())
    assert small.stdout_file is None
    big = await runner.run("seq 1 100000", ExecOptions(max_output_bytes=1024))
    assert big.stdout_file is not None
    directory = Path(big.stdout_file).parent
    assert directory.name == f"logos-output-{os.getuid()}"
    assert directory.stat().st_mode & 0o777 == 0o700
    assert Path(big.stdout_file).read_text().splitlines()[-1] == "100000"


async def test_saved_outputs_older_than_a_day_are_deleted_newer_ones_kept(tmp_path: Path) -> None:
    original = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        directory = tmp_path / f"logos-output-{os.getuid()}"
        directory.mkdir(mode=0o700)
        stale, fresh = directory / "1-old-0001-stdout.txt", directory / "1-new-0001-stdout.txt"
        stale.write_text("old")
        fresh.write_text("new")
        two_days_ago = time.time() - 2 * 24 * 3600
        os.utime(stale, (two_days_ago, two_days_ago))
        result = await LocalRunner().run("seq 1 100000", ExecOptions(max_output_bytes=1024))
    finally:
        tempfile.tempdir = original
    assert result.stdout_file is not None and Path(result.stdout_file).exists()
    assert not stale.exists()
    assert fresh.read_text() == "new"


async def test_a_planted_output_directory_is_not_trusted(tmp_path: Path) -> None:
    planted = tmp_path / f"logos-output-{os.getuid()}"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    original = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        result = await LocalRunner().run("seq 1 100000", ExecOptions(max_output_bytes=1024))
    finally:
        tempfile.tempdir = original
    assert result.stdout_dropped_bytes > 0 and result.stdout_file is None
    assert list(planted.iterdir()) == []


@pytest.mark.timeout(30)
async def test_cancellation_closes_and_removes_a_partly_saved_output() -> None:
    runner = LocalRunner()
    output_dir = Path(tempfile.gettempdir()) / f"logos-output-{os.getuid()}"
    open_files = len(os.listdir("/proc/self/fd"))
    with anyio.move_on_after(0.5):
        await runner.run("yes", ExecOptions(max_output_bytes=1024, timeout_s=60))
        pytest.fail("the run should have been cancelled")
    assert len(os.listdir("/proc/self/fd")) == open_files
    assert list(output_dir.glob(f"{runner._output_prefix}-*")) == []


async def test_a_command_with_a_nul_byte_is_an_error_not_an_exception() -> None:
    result = await LocalRunner().run("echo a\0b", ExecOptions())
    assert result.exit_code is None
    assert result.error is not None and "NUL" in result.error


@pytest.mark.timeout(30)
async def test_a_background_job_that_ended_is_forgotten_before_its_id_can_be_reused() -> None:
    # WHY it matters: once a group is gone its id may be given to an unrelated process
    # group, which `aclose()` must never signal.
    runner = LocalRunner()
    await runner.run("sleep 0.5 > /dev/null 2>&1 & echo started", ExecOptions())
    (group,) = runner._background.pgids
    with anyio.fail_after(20):  # until the job has ended and its zombie has been reaped
        while True:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                break
            await anyio.sleep(0.05)
    await runner.run("true", ExecOptions())
    assert runner._background.pgids == set()
