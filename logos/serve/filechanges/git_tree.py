"""Snapshots of a directory inside a git work tree, as git trees written to a private
object store; compared and diffed by git.

The user's repository is never written and its configuration never read: every git
command runs with a private GIT_DIR (its own config, its own objects, its own index), the
work tree as GIT_WORK_TREE and the repository's objects as an alternate, so a file git
already knows costs nothing to snapshot. WHY not the repository's own config: a sandboxed
command can write `.git/config` (it may write the work tree), and settings such as
`core.fsmonitor` or a filter driver would make the server run a command of its choosing,
outside the sandbox. The first snapshot starts from a copy of the repository's index, so
only new and changed files are hashed; every file the snapshot hashes is counted and
bounded first (`ChangeLimits`).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from logos.serve.filechanges.limits import ChangeLimits, size_text
from logos.serve.filechanges.wire import ChangedFile, ChangeStatus, FileDiff

_GIT_SETTINGS = (
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.quotePath=false",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.hooksPath=/dev/null",
    "gc.auto=0",
    "maintenance.auto=false",
    "diff.renames=true",
)
"""Set on every command line (they outrank any file): nothing runs but git itself."""
_MAX_GIT_OUTPUT = 16 * 1024 * 1024
"""Bytes of one git command's output read (a listing of every file of a huge change)."""
_STATUS: dict[str, ChangeStatus] = {"A": "added", "D": "removed", "R": "renamed"}
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass(frozen=True)
class Repository:
    top: str
    """The work tree's top directory."""
    git_dir: str
    objects: str
    """Its object store (resolved), used as an alternate: read, never written."""


@dataclass(frozen=True)
class GitSnapshot:
    tree: str | None
    """None: this snapshot failed (its notes say why)."""
    notes: tuple[str, ...] = ()


class GitError(Exception):
    pass


def find_repository(root: str) -> Repository | None:
    """The git work tree `root` lies in, found by reading files (no git command: the
    repository's config is not to be trusted); None when there is none, or no git."""
    if shutil.which("git") is None:
        return None
    directory = Path(root)
    for top in (directory, *directory.parents):
        dot_git = top / ".git"
        try:
            info = dot_git.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            git_dir = dot_git
        elif stat.S_ISREG(info.st_mode):
            text = dot_git.read_text(errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            git_dir = (top / text.removeprefix("gitdir:").strip()).resolve()
        else:
            return None
        if not (git_dir / "HEAD").is_file():
            return None
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        objects = (common / "objects").resolve()
        if not objects.is_dir():
            return None
        return Repository(str(top), str(git_dir), str(objects))
    return None


class GitTree:
    """Snapshots of `root`, a directory of the work tree of `repository`."""

    kind: Literal["git"] = "git"

    def __init__(
        self, root: str, repository: Repository, private: Path, limits: ChangeLimits
    ) -> None:
        self.root = root
        self._repository = repository
        self._private = private
        self._limits = limits
        self._sub = os.path.relpath(root, repository.top).replace(os.sep, "/")
        if self._sub == ".":
            self._sub = ""
        self._git_dir = private / "repository"
        self._index = private / "index"
        self._stored = 0

    # Snapshots ---------------------------------------------------------------------------

    def take(self) -> GitSnapshot:
        deadline = time.monotonic() + self._limits.max_seconds
        notes: list[str] = []
        try:
            seeded = self._prepare(deadline)
            try:
                tree = self._write(deadline, notes)
            except GitError:
                if not seeded:
                    raise
                # WHY again from nothing: the user's index may use what a copy lacks (a split
                # index, a newer format); then every file is hashed once.
                self._index.unlink(missing_ok=True)
                notes.clear()
                tree = self._write(deadline, notes)
        except GitError as exc:
            return GitSnapshot(None, (*notes, f"git could not snapshot {self.root}: {exc}"))
        if tree is None:
            return GitSnapshot(None, tuple(notes))
        return GitSnapshot(tree, tuple(notes))

    def _prepare(self, deadline: float) -> bool:
        """Make the private repository once; whether its index starts as the user's."""
        if self._git_dir.exists():
            return False
        self._private.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._run(
            ["init", "--quiet", "--bare", "--template=", str(self._git_dir)],
            deadline,
            private=False,
        )
        user_index = Path(self._repository.git_dir) / "index"
        try:
            if user_index.stat().st_size <= _MAX_GIT_OUTPUT:
                shutil.copyfile(user_index, self._index)
                os.chmod(self._index, 0o600)
                return True
        except OSError:
            pass
        return False

    def _write(self, deadline: float, notes: list[str]) -> str | None:
        limits = self._limits
        scope = [f":(top,literal){self._sub}"] if self._sub else [":/"]
        listed = self._run(
            ["ls-files", "-z", "--others", "--modified", "--exclude-standard", "--", *scope],
            deadline,
        )
        candidates = sorted(
            {name for name in listed.decode(errors="surrogateescape").split("\0") if name}
        )
        if len(candidates) > limits.max_entries:
            notes.append(
                f"more than {limits.max_entries:,} new or changed files in {self.root} (not "
                "ignored by .gitignore): too many to snapshot; ignore what need not be compared"
            )
            return None
        stand_ins: list[tuple[str, os.stat_result]] = []
        reading = 0
        for name in candidates:
            try:
                info = os.lstat(os.path.join(self._repository.top, name))
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            too_big = info.st_size > limits.max_git_file_bytes
            over = (
                reading + info.st_size > limits.max_read_bytes
                or self._stored + info.st_size > limits.max_store_bytes
            )
            if too_big or over:
                stand_ins.append((name, info))
                if over and not too_big:
                    _note_once(
                        notes,
                        f"over {size_text(limits.max_read_bytes)} to hash at once (or the "
                        "snapshots' size limit reached): the rest compared by size and time",
                    )
                continue
            reading += info.st_size
        pathspecs = scope + [f":(top,exclude,literal){name}" for name, _ in stand_ins]
        self._run(
            ["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"],
            deadline,
            stdin="\0".join(pathspecs).encode(errors="surrogateescape"),
            accept=(0, 1),  # WHY 1: a file that vanished, a nested repository with no commit
        )
        self._stored += reading
        if stand_ins:
            entries = []
            for name, info in stand_ins:
                note = (
                    f"(not snapshotted: {info.st_size:,} bytes, larger than what a snapshot "
                    f"hashes; changed {info.st_mtime_ns})\n"
                )
                digest = (
                    self._run(["hash-object", "-w", "--stdin"], deadline, stdin=note.encode())
                    .decode()
                    .strip()
                )
                entries.append(f"100644 {digest}\t{name}")
            self._run(
                ["update-index", "-z", "--add", "--index-info"],
                deadline,
                stdin="\0".join(entries).encode(errors="surrogateescape") + b"\0",
            )
        tree = self._run(["write-tree", "--missing-ok"], deadline, accept=(0, 128))
        text = tree.decode().strip()
        return text if len(text) == 40 else None

    # Comparing ---------------------------------------------------------------------------

    def compare(
        self, before: GitSnapshot, after: GitSnapshot
    ) -> tuple[list[ChangedFile], list[str]]:
        notes = list(dict.fromkeys([*before.notes, *after.notes]))
        if before.tree is None or after.tree is None:
            return [], notes
        if before.tree == after.tree:
            return [], notes
        deadline = time.monotonic() + self._limits.max_seconds
        relative = [f"--relative={self._sub}/"] if self._sub else []
        trees = [before.tree, after.tree]
        try:
            statuses = self._run(
                [
                    "diff-tree",
                    "-r",
                    "-z",
                    "-M",
                    "--name-status",
                    *relative,
                    before.tree,
                    after.tree,
                ],
                deadline,
            )
            counts = self._run(
                ["diff-tree", "-r", "-z", "-M", "--numstat", *relative, *trees],
                deadline,
            )
        except GitError as exc:
            return [], [*notes, f"git could not compare the snapshots of {self.root}: {exc}"]
        lines = _numstat(counts)
        fields = statuses.decode(errors="replace").split("\0")
        changed: list[ChangedFile] = []
        at = 0
        while at < len(fields) - 1:
            letter = fields[at][:1]
            if letter in ("R", "C"):
                old_path, path = fields[at + 1], fields[at + 2]
                at += 3
            else:
                old_path, path = None, fields[at + 1]
                at += 2
            counted = lines.get(path)
            changed.append(
                ChangedFile(
                    root=self.root,
                    path=path,
                    status=_STATUS.get(letter, "modified"),
                    old_path=old_path,
                    binary=counted is None and path in lines,
                    added=counted[0] if counted else None,
                    removed=counted[1] if counted else None,
                )
            )
        return changed, notes

    def diff(self, before: GitSnapshot, after: GitSnapshot, changed: ChangedFile) -> FileDiff:
        if before.tree is None or after.tree is None:
            return FileDiff.of(changed, self.kind, note="a snapshot failed: no diff")
        prefix = f"{self._sub}/" if self._sub else ""
        paths = [p for p in (changed.old_path, changed.path) if p]
        relative = [f"--relative={self._sub}/"] if self._sub else []
        try:
            output = self._run(
                [
                    "diff-tree",
                    "-p",
                    "-M",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-color",
                    *relative,
                    before.tree,
                    after.tree,
                    "--",
                    *(f":(top,literal){prefix}{p}" for p in paths),
                ],
                time.monotonic() + self._limits.max_seconds,
                limit=self._limits.max_diff_bytes + 1,
            )
        except GitError as exc:
            return FileDiff.of(changed, self.kind, note=f"git could not diff it: {exc}")
        text = output.decode("utf-8", errors="replace")
        if "\nBinary files " in text or text.startswith("Binary files "):
            return FileDiff.of(
                changed, self.kind, binary=True, note="a binary file: no text to compare"
            )
        cut = len(output) > self._limits.max_diff_bytes
        if cut:
            text = text[: text.rfind("\n", 0, self._limits.max_diff_bytes) + 1]
        body = text[text.find("\n--- ") + 1 :] if "\n--- " in text else text
        note = (
            f"the diff is longer than {size_text(self._limits.max_diff_bytes)}: cut there"
            if cut
            else ""
        )
        return FileDiff.of(changed, self.kind, diff=body, truncated=cut, note=note)

    # Git ---------------------------------------------------------------------------------

    def _run(
        self,
        args: list[str],
        deadline: float,
        *,
        stdin: bytes | None = None,
        accept: tuple[int, ...] = (0,),
        private: bool = True,
        limit: int = _MAX_GIT_OUTPUT,
    ) -> bytes:
        """Run git on the private repository; its output (at most `limit` bytes)."""
        settings = [item for setting in _GIT_SETTINGS for item in ("-c", setting)]
        left = deadline - time.monotonic()
        if left <= 0:
            raise GitError(f"it took longer than {self._limits.max_seconds:g} s")
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                done = subprocess.run(
                    ["git", *settings, *args],
                    input=stdin,
                    stdin=None if stdin is not None else subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=self._repository.top if private else self._private,
                    env=self._environment(private),
                    timeout=left,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise GitError(f"it took longer than {self._limits.max_seconds:g} s") from None
            except OSError as exc:
                raise GitError(str(exc)) from None
            out.seek(0)
            output = out.read(limit)
            if done.returncode not in accept:
                err.seek(0)
                said = err.read(2000).decode(errors="replace").strip().splitlines()
                raise GitError(said[-1] if said else f"git {args[0]} exited {done.returncode}")
            return output

    def _environment(self, private: bool) -> dict[str, str]:
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self._private),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
        }
        if private:
            environment |= {
                "GIT_DIR": str(self._git_dir),
                "GIT_WORK_TREE": self._repository.top,
                "GIT_INDEX_FILE": str(self._index),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": self._repository.objects,
            }
        return environment


def _numstat(output: bytes) -> dict[str, tuple[int, int] | None]:
    """path → (added, removed), None for a binary file, from `--numstat -z` output."""
    counts: dict[str, tuple[int, int] | None] = {}
    fields = output.decode(errors="replace").split("\0")
    at = 0
    while at < len(fields):
        record = fields[at]
        if not record:
            at += 1
            continue
        added, removed, path = [*record.split("\t", 2), "", ""][:3]
        if not path:  # a rename: the old and the new path follow
            path = fields[at + 2] if at + 2 < len(fields) else ""
            at += 3
        else:
            at += 1
        counts[path] = None if added == "-" else (int(added or 0), int(removed or 0))
    return counts


def _note_once(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)
