"""What a run or a project changed in the paths it may write: the one place the server's
runs and the projects' agents ask.

A `ChangeTracker` snapshots each writable path (through git where it lies in a work tree,
else file by file), numbers the snapshots, and compares two of them into a `ChangeList`
kept under a scope and key (a run's turn, a project's reply or turn); a file of a list is
diffed on request. `ChangeTrackers` holds a server's trackers, their snapshots in a private
directory emptied as the server starts and stops: the lists are published in the event
logs and outlive the server, the diffs do not.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
from pydantic import BaseModel

from logos.agent.config import Callbacks
from logos.agent.steps import StepMessage
from logos.callback import invoke_callback
from logos.jsonl import make_private_dir
from logos.serve.filechanges.git_tree import GitSnapshot, GitTree, find_repository
from logos.serve.filechanges.limits import LIMITS, ChangeLimits
from logos.serve.filechanges.plain_tree import BlobStore, FilesSnapshot, FilesTree
from logos.serve.filechanges.wire import (
    ChangedFile,
    ChangeList,
    ChangeScope,
    FileDiff,
    FilesChanged,
)

KEPT_FINISHED = 32
"""Finished runs whose snapshots are kept for diffs (the oldest go first)."""
_OWNER = re.compile(r"[^a-zA-Z0-9_-]")

Tree = GitTree | FilesTree
Snapshot = GitSnapshot | FilesSnapshot


class DiffUnavailable(Exception):
    """No diff can be given: the message says why, in the page's words."""


def writable_roots(paths: Sequence[tuple[str, bool]]) -> list[str]:
    """The resolved paths of `(path, read_only)` that may be written, none inside another."""
    roots = sorted({os.path.realpath(path) for path, read_only in paths if not read_only})
    kept: list[str] = []
    for root in roots:
        if not any(root == outer or root.startswith(outer.rstrip("/") + "/") for outer in kept):
            kept.append(root)
    return kept


class ChangeTracker:
    """Snapshots of some roots, numbered; lists of what changed between two of them."""

    def __init__(
        self, directory: Path, roots: Sequence[str], limits: ChangeLimits = LIMITS
    ) -> None:
        self._directory = directory
        self._limits = limits
        make_private_dir(directory)
        store = BlobStore(directory / "contents", limits.max_store_bytes)
        self._trees: list[Tree] = []
        for number, root in enumerate(roots):
            repository = find_repository(root)
            if repository is not None:
                self._trees.append(GitTree(root, repository, directory / f"git-{number}", limits))
            else:
                self._trees.append(FilesTree(root, store, limits))
        self._snapshots: OrderedDict[int, list[Snapshot]] = OrderedDict()
        self._next = 0
        self.first: int | None = None
        self.latest: int | None = None
        self._lists: dict[tuple[ChangeScope, str], tuple[int, int, ChangeList]] = {}
        self._lock = anyio.Lock()

    @property
    def roots(self) -> list[str]:
        return [tree.root for tree in self._trees]

    async def mark(self) -> int:
        """Snapshot every root now (in a worker thread); the snapshot's number, that of the
        latest when nothing changed since."""
        async with self._lock:
            return await anyio.to_thread.run_sync(self._mark)

    def _mark(self) -> int:
        previous = self._snapshots.get(self.latest) if self.latest is not None else None
        taken: list[Snapshot] = []
        for at, tree in enumerate(self._trees):
            if isinstance(tree, GitTree):
                taken.append(tree.take())
            else:
                before = previous[at] if previous is not None else None
                taken.append(tree.take(before if isinstance(before, FilesSnapshot) else None))
        if previous is not None and taken == previous and self.latest is not None:
            return self.latest
        number = self._next
        self._next += 1
        self._snapshots[number] = taken
        if self.first is None:
            self.first = number
        self.latest = number
        while len(self._snapshots) > self._limits.max_snapshots:
            oldest = next(n for n in self._snapshots if n != self.first)
            del self._snapshots[oldest]
        return number

    async def span(self, scope: ChangeScope, key: str, before: int, after: int) -> ChangeList:
        """What changed from snapshot `before` to `after`, kept as (scope, key)."""
        listed = await anyio.to_thread.run_sync(self._compare, scope, key, before, after)
        self._lists[(scope, key)] = (before, after, listed)
        return listed

    def _compare(self, scope: ChangeScope, key: str, before: int, after: int) -> ChangeList:
        old, new = self._snapshots.get(before), self._snapshots.get(after)
        if old is None or new is None:
            return ChangeList(scope=scope, key=key, notes=["the snapshots are no longer kept"])
        files: list[ChangedFile] = []
        notes: list[str] = []
        for tree, was, now in zip(self._trees, old, new, strict=True):
            found, said = _compare(tree, was, now)
            files.extend(found)
            notes.extend(note for note in said if note not in notes)
        most = self._limits.max_listed
        if len(files) > most:
            notes.append(f"{len(files):,} files changed: the first {most} are listed")
        return ChangeList(
            scope=scope, key=key, files=files[:most], notes=notes, truncated=len(files) > most
        )

    def listed(self, scope: ChangeScope, key: str) -> ChangeList | None:
        kept = self._lists.get((scope, key))
        return kept[2] if kept is not None else None

    def lists(self, scope: ChangeScope) -> list[ChangeList]:
        return [listed for (kind, _), (_, _, listed) in self._lists.items() if kind == scope]

    async def diff(self, scope: ChangeScope, key: str, root: str, path: str) -> FileDiff:
        """The diff of one file of the list (scope, key); DiffUnavailable says why not."""
        kept = self._lists.get((scope, key))
        if kept is None:
            raise DiffUnavailable(f"no list of changed files for {scope} {key!r} is kept")
        before, after, listed = kept
        changed = next((f for f in listed.files if (f.root, f.path) == (root, path)), None)
        if changed is None:
            raise DiffUnavailable(f"{path!r} is not among the files that {scope} changed")
        old, new = self._snapshots.get(before), self._snapshots.get(after)
        if old is None or new is None:
            raise DiffUnavailable(
                f"only the latest {self._limits.max_snapshots} snapshots are kept: this {scope}'s "
                "are gone (its list of files stays)"
            )
        at = self.roots.index(root)
        return await anyio.to_thread.run_sync(_diff, self._trees[at], old[at], new[at], changed)

    def remove(self) -> None:
        shutil.rmtree(self._directory, ignore_errors=True)


def _compare(tree: Tree, old: Snapshot, new: Snapshot) -> tuple[list[ChangedFile], list[str]]:
    if isinstance(tree, GitTree):
        assert isinstance(old, GitSnapshot) and isinstance(new, GitSnapshot)
        return tree.compare(old, new)
    assert isinstance(old, FilesSnapshot) and isinstance(new, FilesSnapshot)
    return tree.compare(old, new)


def _diff(tree: Tree, old: Snapshot, new: Snapshot, changed: ChangedFile) -> FileDiff:
    if isinstance(tree, GitTree):
        assert isinstance(old, GitSnapshot) and isinstance(new, GitSnapshot)
        return tree.diff(old, new, changed)
    assert isinstance(old, FilesSnapshot) and isinstance(new, FilesSnapshot)
    return tree.diff(old, new, changed)


class TurnChanges:
    """The glue of one run or one project turn: snapshot at the start, after each step, and
    publish what each step changed (a `files_changed` event) when it changed anything."""

    def __init__(self, tracker: ChangeTracker, publish: Callable[[BaseModel], object]) -> None:
        self.tracker = tracker
        self._publish = publish
        self.start: int | None = None
        self._last: int | None = None

    async def begin(self) -> None:
        try:
            self.start = self._last = await self.tracker.mark()
        except Exception as exc:  # WHY: as in `step`
            notes = [f"what changed cannot be followed: {exc}"]
            self._publish(FilesChanged(scope="turn", key="", notes=notes))

    async def step(
        self, scope: ChangeScope, key: str, message: str | None = None, since: int | None = None
    ) -> ChangeList | None:
        """Snapshot now; publish what changed since `since` (default: the last snapshot)."""
        try:
            now = await self.tracker.mark()
            before = since if since is not None else self._last
            self._last = now
            if before is None or before == now:
                return None
            listed = await self.tracker.span(scope, key, before, now)
        except Exception as exc:  # WHY: a snapshot that fails must never end a run or a turn
            listed = ChangeList(scope=scope, key=key, notes=[f"what changed is unknown: {exc}"])
        if listed.files or listed.notes:
            self._publish(FilesChanged(**listed.model_dump(), message=message))
        return listed


def after_each_turn(changes: TurnChanges) -> Callable[[Callbacks], Callbacks]:
    """A loop's callbacks that, once a turn's results are recorded (before the model is
    called again), publish what that turn's commands changed, numbered as its events are."""

    def watching(callbacks: Callbacks) -> Callbacks:
        turns = 0
        recorded = callbacks.on_step_end

        async def on_step_end(step: StepMessage) -> None:
            nonlocal turns
            await invoke_callback(recorded, step)
            if step.role == "assistant":
                turns += 1
            else:
                await changes.step("turn", str(turns))

        return dataclasses.replace(callbacks, on_step_end=on_step_end)

    return watching


class ChangeTrackers:
    """A server's trackers: one per live run and per project, and those of the latest
    finished runs (`kept_finished`)."""

    def __init__(self, base: Path, *, kept_finished: int = KEPT_FINISHED) -> None:
        _remove_left_behind(base)
        self._directory = base / f"{os.getpid()}-{secrets.token_hex(4)}"
        make_private_dir(self._directory)
        self._kept_finished = kept_finished
        self._live: dict[str, ChangeTracker] = {}
        self._finished: OrderedDict[str, ChangeTracker] = OrderedDict()

    def open(self, owner: str, roots: Sequence[str]) -> ChangeTracker:
        tracker = ChangeTracker(self._directory / _OWNER.sub("_", owner), roots)
        self._live[owner] = tracker
        return tracker

    def get(self, owner: str) -> ChangeTracker | None:
        return self._live.get(owner) or self._finished.get(owner)

    def finish(self, owner: str) -> None:
        """The owner ended: its snapshots stay among the latest `kept_finished`."""
        tracker = self._live.pop(owner, None)
        if tracker is None:
            return
        self._finished[owner] = tracker
        while len(self._finished) > self._kept_finished:
            _, oldest = self._finished.popitem(last=False)
            oldest.remove()

    def remove(self, owner: str) -> None:
        tracker = self._live.pop(owner, None) or self._finished.pop(owner, None)
        if tracker is not None:
            tracker.remove()

    def close(self) -> None:
        shutil.rmtree(self._directory, ignore_errors=True)


def _remove_left_behind(base: Path) -> None:
    """The snapshots of servers that are gone (killed before they could remove them):
    their diffs cannot be asked for any more."""
    try:
        entries = list(base.iterdir())
    except OSError:
        return
    for entry in entries:
        pid = entry.name.partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
