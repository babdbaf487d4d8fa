"""A fork's copier: copies a session's scratch places into its forks', inside a container of
its own that sees nothing else (sandboxd.docker.fork starts it).

It is the one-shot container's only process, with the sandbox's hardening and the session's
uid:gid, and it mounts no host path: each scratch place of the (frozen) source read-only under
/from, each fork's read-write under /into. What it copies, from each place's entries down:

- regular files, their bytes (holes stay holes: only the data a file holds is written), mode
  bits without setuid, setgid and sticky, and times; a file with several names in the place
  stays one file with several names;
- directories, their mode bits without setgid, and times (set once their entries are in);
- symbolic links as links: their targets are text, never followed;
- nothing else: FIFOs, sockets and devices are left out (counted), and so is each name of
  `skip` at a place's top (where the source or the forks mount a host path).

Every name is opened from the descriptor of the directory it is in, never followed if it is
a symlink (O_NOFOLLOW), and checked to be the entry that was listed, so no name the source
wrote can lead the copy anywhere but where it is listed, and what it writes is only what
the forks' own commands could have written. The walk keeps its own stack and one directory's
descriptors at a time (see Copier): no depth meets a recursion limit, a path length limit or
the limit on open files.

Usage: python3 -I -S -B copier.py PLAN, PLAN a JSON object:
    {"places": [{"source": "/from/0", "targets": ["/into/0/0", "/into/1/0"],
                 "skip": ["work"], "name": "/tmp"}, ...], "workers": 2}
`workers` (at most MAX_WORKERS): threads that send a large piece of a file to the forks at
once (the kernel copies, so they run in parallel).
It prints one JSON line on success ({"files": ..., "bytes": ..., "left_out": ...}); on a
failure, one line saying what could not be copied and why on stderr, and exits 1.

Standard library only, and Python 3.8 syntax: it runs on the python3 of an image.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Executor
    from typing import Any

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_MODE_BITS = 0o777
"""What a copied file keeps of its mode: no setuid, setgid or sticky bit."""
_DIRECTORY_MODE_BITS = 0o1777
"""What a copied directory keeps: its sticky bit too, no setuid or setgid."""
_SEND_BYTES = 0x7FFFF000
"""The most one sendfile moves (Linux's own cap)."""
_PARALLEL_BYTES = 1 << 20
"""A piece of a file at least this large goes to the forks in parallel (when the plan gives
the copier more than one worker)."""
_MAX_WORKERS = 8
RESERVED_FILES = 64
"""Descriptors kept free of the links' (below) for the walk and the file being copied."""
_MAX_SHOWN = 200
"""Characters of a path a message shows."""
FAILED_EXIT = 1
USAGE_EXIT = 2


class CopyFailed(Exception):
    """What could not be copied, and why: the message a fork's caller gets."""


class _Linked:
    """A file with several names, copied once: where each fork got its first name (the
    directory's descriptor in each fork)."""

    def __init__(self, directories: list[int], name: str, left: int) -> None:
        self.directories = directories
        self.name = name
        self.left = left

    def close(self) -> None:
        for fd in self.directories:
            _close(fd)


class _Level:
    """A directory being copied: its entries still to copy, what its descriptors (at the
    source, then in each fork) must be when the walk comes back up to it, and its own
    metadata to set once its entries are in (None: a place's top)."""

    def __init__(self, name: str, fds: list[int], info: os.stat_result | None, fresh: bool) -> None:
        self.name = name
        self.info = info
        self.fresh = fresh
        """Made by this copy in every fork: no entry of theirs to replace."""
        self.entries = iter(sorted(os.listdir(fds[0])))
        self.identities = [_identity(fd) for fd in fds]


class Copier:
    """Walks a place depth first, its own stack of _Level, holding the descriptors of one
    directory at a time (at the source and in each fork): it opens a child from them, and
    its parent again with "..", checked to be the one it left. So no depth costs more than
    its names, whatever the limit on open files."""

    def __init__(self, pool: Executor | None = None, open_files: int = 1024) -> None:
        """`pool`: threads that write a large piece of a file into the forks at once;
        `open_files`: the descriptors this process may hold."""
        self._pool = pool
        self._open_files = open_files
        self.files = 0
        self.bytes = 0
        self.left_out = 0
        self._linked: dict[tuple[int, int], _Linked] = {}
        self._levels: list[_Level] = []
        self._fds: list[int] = []
        """The current directory's: the source's, then each fork's."""

    def copy_place(self, source: str, targets: list[str], skip: list[str], name: str) -> None:
        """Copy the entries of `source` into every one of `targets` (all directories this
        process opens itself), but those named in `skip`."""
        fds = []
        try:
            for path in (source, *targets):
                fds.append(_open_directory(path, None, name))
            self._fds = fds
            self._levels = [_Level(name, fds, None, fresh=False)]
            self._walk(frozenset(skip))
        finally:
            for fd in self._fds or fds:
                _close(fd)
            self._fds = []
            self._levels = []
            for linked in self._linked.values():
                linked.close()
            self._linked = {}

    def _walk(self, skip: frozenset[str]) -> None:
        levels = self._levels
        while levels:
            level = levels[-1]
            name = next(level.entries, None)
            if name is None:
                try:
                    self._leave(level)
                except OSError as exc:
                    raise self._failed("", "could not be copied", exc) from None
                continue
            if len(levels) == 1 and name in skip:
                continue
            try:
                info = os.stat(name, dir_fd=self._fds[0], follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self._failed(name, "cannot be read", exc) from None
            kind = stat.S_IFMT(info.st_mode)
            try:
                if kind == stat.S_IFDIR:
                    self._enter(name, info, level.fresh)
                elif kind == stat.S_IFREG:
                    self._copy_file(name, info, level.fresh)
                elif kind == stat.S_IFLNK:
                    self._copy_symlink(name, info, level.fresh)
                else:
                    self.left_out += 1
            except CopyFailed:
                raise
            except OSError as exc:
                raise self._failed(name, "could not be copied", exc) from None

    def _enter(self, name: str, info: os.stat_result, fresh: bool) -> None:
        """Make `name` in every fork (`fresh`: in directories this copy made), and go down
        into it."""
        opened = [os.open(name, _DIRECTORY, dir_fd=self._fds[0])]
        made_everywhere = True
        try:
            _same_entry(opened[0], info, name)
            for parent in self._fds[1:]:
                try:
                    os.mkdir(name, 0o700, dir_fd=parent)
                except FileExistsError:
                    if fresh:
                        raise
                    made_everywhere = _remove_unless_directory(parent, name) and made_everywhere
                opened.append(os.open(name, _DIRECTORY, dir_fd=parent))
            level = _Level(name, opened, info, fresh=made_everywhere)
        except BaseException:
            for fd in opened:
                _close(fd)
            raise
        for fd in self._fds:
            _close(fd)
        self._fds = opened
        self._levels.append(level)

    def _leave(self, level: _Level) -> None:
        """Its entries are in: set its metadata in every fork, and go back up."""
        if level.info is None:  # a place's top: copy_place closes it
            self._levels.pop()
            return
        for fd in self._fds[1:]:
            os.chmod(fd, stat.S_IMODE(level.info.st_mode) & _DIRECTORY_MODE_BITS)
            os.utime(fd, ns=(level.info.st_atime_ns, level.info.st_mtime_ns))
        up: list[int] = []
        try:
            for fd in self._fds:
                up.append(os.open("..", _DIRECTORY, dir_fd=fd))
            if [_identity(fd) for fd in up] != self._levels[-2].identities:
                raise CopyFailed(f"{_shown(level.name)} was moved while it was copied")
        except BaseException:
            for fd in up:
                _close(fd)
            raise
        for fd in self._fds:
            _close(fd)
        self._fds = up
        self._levels.pop()

    def _copy_file(self, name: str, info: os.stat_result, fresh: bool) -> None:
        source_dir, target_dirs = self._fds[0], self._fds[1:]
        key = (info.st_dev, info.st_ino)
        linked = self._linked.get(key)
        if linked is not None:
            for index, parent in enumerate(target_dirs):
                if not fresh:
                    _unlink_if_there(parent, name)
                os.link(
                    linked.name,
                    name,
                    src_dir_fd=linked.directories[index],
                    dst_dir_fd=parent,
                    follow_symlinks=False,
                )
            linked.left -= 1
            if linked.left <= 0:
                linked.close()
                del self._linked[key]
            return
        source = os.open(name, READ, dir_fd=source_dir)
        outputs: list[int] = []
        try:
            _same_entry(source, info, name)
            for parent in target_dirs:
                if not fresh:
                    _unlink_if_there(parent, name)
                # Its mode at once (the umask is 0): a new file's descriptor writes whatever
                # its mode says.
                outputs.append(
                    os.open(name, _CREATE, info.st_mode & _FILE_MODE_BITS, dir_fd=parent)
                )
            if info.st_size:
                holes = info.st_blocks * 512 < info.st_size
                self.bytes += _copy_bytes(source, outputs, info.st_size, holes, self._pool)
            for output in outputs:
                os.utime(output, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            for fd in (source, *outputs):
                _close(fd)
        self.files += 1
        if info.st_nlink > 1 and self._may_remember(len(target_dirs)):
            directories = [os.dup(fd) for fd in target_dirs]
            self._linked[key] = _Linked(directories, name, info.st_nlink - 1)

    def _may_remember(self, forks: int) -> bool:
        """Whether one more file with several names fits in the open files left (each
        holds a descriptor per fork); past that, its further names are copied as files."""
        held = (len(self._linked) + 1) * max(forks, 1)
        return held + RESERVED_FILES + 4 * (forks + 1) <= self._open_files

    def _copy_symlink(self, name: str, info: os.stat_result, fresh: bool) -> None:
        target = os.readlink(name, dir_fd=self._fds[0])
        for parent in self._fds[1:]:
            if not fresh:
                _unlink_if_there(parent, name)
            os.symlink(target, name, dir_fd=parent)
            os.utime(
                name,
                ns=(info.st_atime_ns, info.st_mtime_ns),
                dir_fd=parent,
                follow_symlinks=False,
            )

    def _failed(self, name: str, what: str, exc: OSError) -> CopyFailed:
        where = _shown("/".join([level.name for level in self._levels] + [name]).rstrip("/"))
        if exc.errno == errno.ENOSPC:
            return CopyFailed(
                f"{where} could not be copied: a fork's {self._levels[0].name} is full (forks "
                "have the session's sizes; a file with holes is copied with them)"
            )
        return CopyFailed(f"{where} {what}: {exc.strerror or exc}")


def _identity(fd: int) -> tuple[int, int]:
    opened = os.fstat(fd)
    return opened.st_dev, opened.st_ino


def _open_directory(path: str, parent: int | None, shown: str) -> int:
    try:
        return os.open(path, _DIRECTORY, dir_fd=parent)
    except OSError as exc:
        raise CopyFailed(f"{shown} cannot be opened: {exc.strerror or exc}") from None


def _same_entry(fd: int, listed: os.stat_result, name: str) -> None:
    """The entry opened is the one listed (the source is frozen: this only fails on a
    filesystem that changed under the copy)."""
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino, stat.S_IFMT(opened.st_mode)) != (
        listed.st_dev,
        listed.st_ino,
        stat.S_IFMT(listed.st_mode),
    ):
        raise CopyFailed(f"{_shown(name)} changed while it was copied")


def _remove_unless_directory(parent: int, name: str) -> bool:
    """A fork's entry of that name (one its own start made) becomes a directory: kept if it
    is one, removed if it is anything else; whether the directory is a new one."""
    info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        return False
    os.unlink(name, dir_fd=parent)
    os.mkdir(name, 0o700, dir_fd=parent)
    return True


def _unlink_if_there(parent: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        raise CopyFailed(f"{_shown(name)} is a directory in a fork and a file in the session")
    os.unlink(name, dir_fd=parent)


def _copy_bytes(
    source: int, outputs: list[int], size: int, holes: bool, pool: Executor | None = None
) -> int:
    """The data of `source` into every one of `outputs`, holes left as holes (`holes`: it
    may have some, it has fewer blocks than bytes); the bytes read. With `pool`, a large
    piece goes to the outputs at once, one thread each."""
    copied = 0
    offset = 0
    while offset < size:
        start, end = offset, size
        if holes:
            try:
                start = os.lseek(source, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nothing but a hole from here
                    break
                start = offset  # no SEEK_DATA here: all of it is data
            try:
                end = min(os.lseek(source, start, os.SEEK_HOLE), size)
            except OSError:
                end = size
        if pool is not None and len(outputs) > 1 and end - start >= _PARALLEL_BYTES:
            for sending in [pool.submit(_send, source, o, start, end) for o in outputs]:
                sending.result()
        else:
            for output in outputs:
                _send(source, output, start, end)
        copied += end - start
        offset = end
    if holes:  # a hole at the end: writing did not reach the size
        for output in outputs:
            os.ftruncate(output, size)
    return copied


def _send(source: int, output: int, start: int, end: int) -> None:
    """Bytes `start` to `end` of `source` at the same place in `output` (in the kernel)."""
    os.lseek(output, start, os.SEEK_SET)  # where sendfile writes
    position = start
    while position < end:
        sent = os.sendfile(output, source, position, min(end - position, _SEND_BYTES))
        if sent == 0:
            raise CopyFailed("a file shrank while it was copied")
        position += sent


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _shown(path: str) -> str:
    text = ascii(path)[1:-1]  # control characters and other bytes escaped, no quotes
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: copier.py PLAN", file=sys.stderr)
        return USAGE_EXIT
    try:
        plan: dict[str, Any] = dict(json.loads(argv[1]))
        places: list[dict[str, Any]] = list(plan["places"])
    except (ValueError, KeyError, TypeError) as exc:
        print(f"the copy's plan is malformed: {exc}", file=sys.stderr)
        return USAGE_EXIT
    workers = min(int(plan.get("workers", 1)), _MAX_WORKERS)
    pool = None
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor  # only then: it takes a while

        pool = ThreadPoolExecutor(workers)
    os.umask(0)  # modes are the source's (less setuid and setgid), not cut by a umask
    copier = Copier(pool, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    try:
        for place in places:
            copier.copy_place(
                str(place["source"]),
                [str(target) for target in place["targets"]],
                [str(name) for name in place.get("skip", [])],
                str(place.get("name", place["source"])),
            )
    except CopyFailed as exc:
        print(str(exc), file=sys.stderr)
        return FAILED_EXIT
    finally:
        if pool is not None:
            pool.shutdown()
    print(json.dumps({"files": copier.files, "bytes": copier.bytes, "left_out": copier.left_out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
