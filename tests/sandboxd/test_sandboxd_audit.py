"""The audit log on a real file: bounded lines that keep what was cut, rotation by size."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from sandboxd.server.audit import (
    AUDIT_LINE_MAX_BYTES,
    COMMAND_HEAD_BYTES,
    TEXT_HEAD_BYTES,
    AuditLog,
    AuditMount,
    AuditRecord,
    audit_line,
)

HUGE = 1024 * 1024


def _record(**note: object) -> AuditRecord:
    facts: dict[str, object] = {
        "time": "2026-01-01T00:00:00.000Z",
        "peer_uid": 1000,
        "peer_gid": 1000,
        "peer_pid": 4242,
        "method": "POST",
        "path": "/v1/run",
        "status": 403,
        "duration_s": 0.001,
    }
    return AuditRecord.model_validate({**facts, **note})


def test_a_record_with_every_field_at_its_worst_stays_under_the_line_bound() -> None:
    control = "\x01" * HUGE  # six bytes of JSON each
    worst = _record(
        method=control,
        path=control,
        session=control,
        command=control,
        image=control,
        mounts=[AuditMount(path=control, read_only=False, device=1, inode=2, kind="directory")]
        * 10_000,
        network=True,
        stripped_env_keys=[control] * 10_000,
        sandbox=control,
        exit_code=-(2**62),
        signal=2**62,
        timed_out=True,
        error=control,
    )
    line = audit_line(worst)
    assert len(line) <= AUDIT_LINE_MAX_BYTES, len(line)
    parsed = json.loads(line)
    assert parsed["command_bytes"] == parsed["error_bytes"] == HUGE
    assert parsed["mounts_count"] == parsed["stripped_env_keys_count"] == 10_000
    assert parsed["mounts"] and parsed["stripped_env_keys"]


def test_cut_texts_keep_their_head_on_a_character_boundary() -> None:
    command = "é" * HUGE  # two bytes of UTF-8 each
    parsed = json.loads(audit_line(_record(command=command, path="/v1/" + "p" * 5000)))
    assert parsed["command"] == "é" * (COMMAND_HEAD_BYTES // 2)
    assert parsed["command_bytes"] == 2 * HUGE
    assert parsed["path"] == ("/v1/" + "p" * 5000)[:TEXT_HEAD_BYTES]
    assert parsed["path_bytes"] == 5004


def test_short_records_are_written_whole_without_length_fields() -> None:
    record = _record(
        command="echo hi",
        mounts=[AuditMount(path="/w", read_only=True, device=1, inode=2, kind="directory")],
    )
    parsed = json.loads(audit_line(record))
    assert parsed == json.loads(record.model_dump_json())


def test_the_log_rotates_before_it_would_pass_its_size(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    max_bytes = 2 * AUDIT_LINE_MAX_BYTES
    log = AuditLog(path, max_bytes=max_bytes, backups=2)
    try:
        for index in range(200):
            log.write(_record(command=f"echo {index} " + "x" * 2000))
    finally:
        log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.log", "audit.log.1", "audit.log.2"]
    for name in names:
        info = (tmp_path / name).stat()
        assert info.st_size <= max_bytes
        assert stat.S_IMODE(info.st_mode) == 0o600
    newest = json.loads(path.read_text().splitlines()[-1])
    assert newest["command"].startswith("echo 199 ")
    oldest_kept = json.loads((tmp_path / "audit.log.2").read_text().splitlines()[0])
    assert oldest_kept["command"] > "echo 1"  # the first lines are gone with audit.log.3


def test_without_backups_the_log_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path, max_bytes=2 * AUDIT_LINE_MAX_BYTES, backups=0)
    try:
        for index in range(100):
            log.write(_record(command=f"echo {index} " + "x" * 2000))
    finally:
        log.close()
    assert [p.name for p in tmp_path.iterdir()] == ["audit.log"]
    assert path.stat().st_size <= 2 * AUDIT_LINE_MAX_BYTES


def test_a_symlink_at_the_log_name_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    path = tmp_path / "audit.log"
    os.symlink(target, path)
    with pytest.raises(OSError, match="cannot open the audit log"):
        AuditLog(path)
    assert target.read_text() == "keep\n"
