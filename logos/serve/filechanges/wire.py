"""What changed, as it crosses the wire: the files a turn, a reply, a run or a project
changed in its writable paths, and one file's diff (pydantic: they are published in event
logs and answered over HTTP)."""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

ChangeStatus: TypeAlias = Literal["added", "modified", "removed", "renamed"]
ChangeScope: TypeAlias = Literal["turn", "run", "reply", "project"]
SnapshotKind: TypeAlias = Literal["git", "files"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ChangedFile(_Wire):
    root: str
    """The writable path it lies in (as granted, resolved)."""
    path: str
    """Relative to `root`."""
    status: ChangeStatus
    old_path: str | None = None
    """Where a renamed file was."""
    binary: bool = False
    added: int | None = None
    """Lines added and removed; None when not counted (binary, too large, not kept)."""
    removed: int | None = None


class ChangeList(_Wire):
    scope: ChangeScope
    key: str
    """Which one: a run's turn number, a reply's or a turn's message id; "" for a whole run
    or project."""
    files: list[ChangedFile] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    """What a bound left out, or why a snapshot failed: said, never silent."""
    truncated: bool = False
    """More files changed than a list holds (`MAX_LISTED`)."""


class FilesChanged(ChangeList):
    """The event published when a turn, a reply or a run changed files."""

    type: Literal["files_changed"] = "files_changed"
    message: str | None = None
    """The project message it belongs to (a reply's id, or the person's message of a turn)."""


class FileDiff(_Wire):
    root: str
    path: str
    old_path: str | None = None
    status: ChangeStatus
    kind: SnapshotKind
    """From git (the work directory is a repository) or from the snapshot of the files."""
    binary: bool = False
    diff: str = ""
    """A unified diff; empty for a binary file or one whose content was not kept."""
    truncated: bool = False
    note: str = ""
    """Why there is no diff, or what was cut."""

    @classmethod
    def of(
        cls,
        changed: ChangedFile,
        kind: SnapshotKind,
        *,
        binary: bool = False,
        diff: str = "",
        truncated: bool = False,
        note: str = "",
    ) -> FileDiff:
        return cls(
            root=changed.root,
            path=changed.path,
            old_path=changed.old_path,
            status=changed.status,
            kind=kind,
            binary=binary,
            diff=diff,
            truncated=truncated,
            note=note,
        )
