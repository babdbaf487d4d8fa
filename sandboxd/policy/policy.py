"""The daemon's policy, built once from its config: what a request may have. Its paths are
checked here; its env keys (sandboxd.policy.env), its hosts (sandboxd.policy.hosts), its image,
network and Unix sockets through it.

Every requested path is resolved with all its symlinks before any check, and the resolved
path is what gets mounted, so a symlink cannot smuggle a refused place in under another name.
The resolved path is then pinned (sandboxd.policy.pinned): its identity is what the container
must show, so a symlink swapped in after the check is caught before any command runs.

A front that narrows its caller's paths sends the roots it granted, pinned when granted (the
caller's ceiling, logos.ceiling): each pinned mount must then lie within one of them, found by
walking up from the pinned descriptor (sandboxd.policy.ceiling_check), whatever its name
led to before.

The places never mountable (sandboxd.policy.places) include the system directories (/usr,
/etc, /var/lib, ...) and the roots that hold them (/home, /var, /opt, ...), read-only as much
as read-write, unless the config's allowed_system_paths names them. Each mount point under a
read-only path is granted read-only too (sandboxd.policy.mount_table), so read-only holds all
the way down.

WHY this is defense in depth and not the security boundary: commands run as the caller's
uid:gid with no capabilities, so a mount never lets them touch a file the caller could not
touch anyway. The policy stops an agent from reaching credentials, the engine socket or the
daemon's own state by accident or by prompt injection.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from logos.ceiling import CeilingError, PathCeiling, os_reason
from sandboxd.policy.ceiling_check import ceiling_refusal
from sandboxd.policy.env import filter_env
from sandboxd.policy.errors import PolicyError
from sandboxd.policy.hosts import check_hosts
from sandboxd.policy.mount_table import (
    is_inside,
    mount_entries,
    other_names,
    printable,
    read_mountinfo,
    uncovered_mount_points,
)
from sandboxd.policy.pinned import FileIdentity, PathChangedError, PinnedPath, pin
from sandboxd.policy.places import ENGINE_SOCKETS, Refused, home_rules, refusal, refused_places

_PIN_ATTEMPTS = 3
"""A path that keeps changing while it is checked is refused after this many tries."""


@dataclass(frozen=True)
class GrantedPath:
    """A mount the policy accepted: `path` is fully resolved, `identity` is what it named."""

    path: str
    read_only: bool
    identity: FileIdentity


class PathGrant:
    """The paths one request may mount, each pinned (held open) until `close()`.

    WHY hold them: while a descriptor is open, the inode it names cannot be freed and its
    number reused, so the identity the container must show stays unique until it is checked.
    """

    def __init__(self, paths: tuple[GrantedPath, ...], pins: Sequence[PinnedPath]) -> None:
        self.paths = paths
        self._pins = list(pins)

    def close(self) -> None:
        for pinned in self._pins:
            pinned.close()
        self._pins.clear()

    def __enter__(self) -> PathGrant:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Policy:
    """The daemon's rules, built once from the config; checks are synchronous.

    The path checks touch the filesystem (a network filesystem may hang), so the daemon runs
    them on threads of their own; the other checks are cheap and run anywhere.
    """

    def __init__(
        self,
        *,
        image: str,
        allowed_images: Iterable[str] = (),
        allowed_roots: Iterable[Path] = (),
        allowed_system_paths: Iterable[Path] = (),
        extra_denies: Iterable[Path] = (),
        allow_network: bool = False,
        allow_unix_sockets: bool = False,
        allow_private_hosts: bool = False,
        allow_env_keys: Iterable[str] = (),
        daemon_home: Path | None = None,
        daemon_paths: Iterable[tuple[Path, str]] = (),
        engine_sockets: Iterable[Path] = ENGINE_SOCKETS,
    ) -> None:
        self.image = image
        self._allowed_images = frozenset((image, *allowed_images))
        self._allowed_roots = tuple(_resolved_forms_unique(allowed_roots))
        self._allowed_system_paths = tuple(_resolved_forms_unique(allowed_system_paths))
        self._allow_network = allow_network
        self._allow_unix_sockets = allow_unix_sockets
        self._allow_private_hosts = allow_private_hosts
        self._allow_env_keys = tuple(allow_env_keys)
        self._refused = refused_places(
            engine_sockets=engine_sockets,
            daemon_paths=daemon_paths,
            extra_denies=extra_denies,
            daemon_home=daemon_home,
        )

    def grant_paths(
        self,
        requested: Sequence[tuple[str, bool]],
        *,
        caller_home: Path | None,
        ceiling: PathCeiling | None = None,
    ) -> PathGrant:
        """Resolve, pin and check each (path, read_only); the order is kept (the first is the
        default workdir). With a `ceiling` (the roots a front granted its caller), each pinned
        mount must lie within it too, the read-only ones beneath included. Raises PolicyError
        naming the rule that refused a path."""
        extra = home_rules(caller_home) if caller_home is not None else ()
        granted: dict[str, GrantedPath] = {}
        pins: list[PinnedPath] = []
        try:
            for raw, read_only in requested:
                pinned = self._check_path(raw, extra)
                pins.append(pinned)
                if ceiling is not None:
                    _hold_to_ceiling(raw, pinned, read_only, ceiling)
                earlier = granted.get(pinned.path)
                if earlier is not None and earlier.read_only != read_only:
                    raise PolicyError(
                        "conflicting_mounts",
                        f"{raw} is requested both read-only and read-write (as {pinned.path}): "
                        "ask for it once",
                        status=400,
                    )
                granted[pinned.path] = GrantedPath(pinned.path, read_only, pinned.identity)
            grants = tuple(granted.values())
            mountinfo = _mount_table() if grants else ""
            self._check_mounted_beneath(grants, mountinfo, extra)
            read_only = any(g.read_only and g.identity.kind == "directory" for g in grants)
            below = _read_only_submounts(grants, mountinfo) if read_only else []
            for point, pinned in below:
                pins.append(pinned)
                if ceiling is not None:
                    _hold_to_ceiling(point, pinned, True, ceiling)
                granted[point] = GrantedPath(point, True, pinned.identity)
        except BaseException:
            for pinned in pins:
                pinned.close()
            raise
        return PathGrant(tuple(granted.values()), pins)

    def check_workdir(self, workdir: str | None, mounts: Sequence[GrantedPath]) -> str | None:
        """The resolved workdir, which must be a directory inside one of the mounts."""
        if workdir is None:
            return None
        _check_form(workdir, what="workdir")
        try:
            resolved = _realpath(workdir)
        except OSError as exc:
            raise PolicyError(
                "invalid_workdir",
                f"workdir {workdir} cannot be used: {_os_reason(exc)}; pass an existing "
                "directory inside one of the allowed paths",
                status=400,
            ) from None
        if not resolved.is_dir():
            raise PolicyError(
                "invalid_workdir", f"workdir {workdir} is not a directory", status=400
            )
        if not any(resolved.is_relative_to(m.path) for m in mounts):
            shown = _shown(workdir, resolved)
            raise PolicyError(
                "workdir_refused",
                f"refused workdir {shown}: it is not inside any allowed path; add its "
                "directory to allowed_paths or omit workdir",
            )
        return str(resolved)

    def filter_env(self, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """(the env to pass, the sorted secret-looking keys withheld), see
        sandboxd.policy.env. Malformed: PolicyError."""
        return filter_env(env, self._allow_env_keys)

    def check_network(self, network: bool) -> None:
        if network and not self._allow_network:
            raise PolicyError(
                "network_refused",
                "network access is off for every sandbox: set allow_network = true in the "
                "daemon's config to let requests ask for it",
            )

    def check_hosts(self, entries: Sequence[str], *, network: bool) -> tuple[str, ...]:
        """The allowlist's entries, normalised (see sandboxd.policy.hosts)."""
        return check_hosts(entries, network=network, allow_private_hosts=self._allow_private_hosts)

    def check_unix_sockets(self, unix_sockets: bool) -> None:
        if unix_sockets and not self._allow_unix_sockets:
            raise PolicyError(
                "unix_sockets_refused",
                "Unix sockets are denied in every sandbox (its commands could reach host "
                "sockets under their mounts): set allow_unix_sockets = true in the daemon's "
                "config to let requests ask for them",
            )

    def check_image(self, image: str | None) -> str:
        """The image to use: the default when None; others only from allowed_images."""
        if image is None or image == self.image:
            return self.image
        if image not in self._allowed_images:
            raise PolicyError(
                "image_refused",
                f"image {image!r} is not allowed: use the default image {self.image!r} or add "
                "it to allowed_images in the daemon's config",
            )
        return image

    def _check_path(self, raw: str, extra: Sequence[Refused]) -> PinnedPath:
        """The resolved path, pinned, once it passed every rule; PolicyError otherwise."""
        _check_form(raw, what="path")
        lexical = "/" + os.path.normpath(raw).lstrip("/")
        if lexical == "/proc" or lexical.startswith("/proc/"):
            # WHY before resolution: /proc/<pid>/root and friends are magic links whose
            # realpath does not say where they really lead.
            raise PolicyError(
                "path_refused",
                f"refused {raw}: paths under /proc are never mountable (its magic links escape "
                "symlink resolution)",
            )
        pinned = self._pin(raw)
        try:
            self._check_pinned(raw, pinned, extra)
        except BaseException:
            pinned.close()
            raise
        return pinned

    def _pin(self, raw: str) -> PinnedPath:
        """Resolve `raw` and pin the result, trying again when it changes underfoot."""
        changed = ""
        for _ in range(_PIN_ATTEMPTS):
            try:
                named = os.stat(raw)
                pinned = pin(str(_realpath(raw)))
            except PathChangedError as exc:
                changed = str(exc)
                continue
            except OSError as exc:
                if exc.errno == errno.EINVAL:
                    # WHY a change: realpath met a symlink that was gone by its readlink.
                    changed = "a symlink on its way was swapped while it was resolved"
                    continue
                raise PolicyError(
                    "path_unusable",
                    f"refused {raw}: {_os_reason(exc)}; pass an existing file or directory",
                ) from None
            if (named.st_dev, named.st_ino) == (pinned.identity.device, pinned.identity.inode):
                return pinned
            pinned.close()
            changed = "it does not lead to the same file as its resolved path (a magic link?)"
        raise PolicyError(
            "path_changed",
            f"refused {raw}: what it names changed while it was checked ({changed}): pass the "
            "real path, and retry once nothing renames it or its parent directories",
            status=409,
        )

    def _check_pinned(self, raw: str, pinned: PinnedPath, extra: Sequence[Refused]) -> None:
        resolved = Path(pinned.path)
        shown = _shown(raw, resolved)
        if printable(pinned.path) != pinned.path:
            raise PolicyError(
                "path_refused",
                f"refused {raw} (resolves to {printable(pinned.path)}): its name is not UTF-8, "
                "which the engine's API cannot carry: rename it",
            )
        reason = self._rules_refusal(resolved, extra)
        if reason is not None:
            raise PolicyError("path_refused", f"refused {shown}: {reason}")
        if pinned.identity.kind == "other":
            raise PolicyError(
                "path_refused",
                f"refused {shown}: only regular files and directories are mountable "
                "(not sockets, devices or pipes)",
            )
        reason = self._roots_refusal(resolved)
        if reason is not None:
            raise PolicyError("path_refused", f"refused {shown}: {reason}")

    def _rules_refusal(self, resolved: Path, extra: Sequence[Refused]) -> str | None:
        """Why a refused-place rule refuses `resolved`, or None."""
        exempt = any(resolved.is_relative_to(p) for p in self._allowed_system_paths)
        reasons = [
            (rule.system, order, reason)
            for order, rule in enumerate((*self._refused, *extra))
            if not (rule.system and exempt) and (reason := refusal(resolved, rule)) is not None
        ]
        if not reasons:
            return None
        # WHY a rule the config cannot lift first: it is the one that decides.
        reason = min(reasons)[2]
        if all(system for system, _, _ in reasons):
            # WHY only then: the exception is offered only where it would be enough.
            reason += (
                f"; to mount it deliberately, list {resolved} in allowed_system_paths in the "
                "daemon's config"
            )
        return reason

    def _roots_refusal(self, resolved: Path) -> str | None:
        if self._allowed_roots and not any(resolved.is_relative_to(r) for r in self._allowed_roots):
            roots = ", ".join(str(r) for r in self._allowed_roots)
            return f"it is outside the config's allowed_roots ({roots})"
        return None

    def _check_mounted_beneath(
        self, grants: Sequence[GrantedPath], mountinfo: str, extra: Sequence[Refused]
    ) -> None:
        """Refuse a grant at or beneath which the host mounted a place the rules refuse (a bind
        of the engine's socket, of /etc, of a home): the engine would bring it along.

        WHY by the mount table: the rules look at names, and a bind mount shows one place
        under another name; the table says which directory of which file system it shows."""
        entries = mount_entries(mountinfo)
        for entry in entries:
            holder = next((g.path for g in grants if is_inside(entry.point, g.path)), None)
            if holder is None:
                continue
            for name in other_names(entry, entries):
                reason = self._rules_refusal(Path(name), extra) or self._roots_refusal(Path(name))
                if reason is not None:
                    shown = (
                        "it is a mount that shows"
                        if entry.point == holder
                        else f"the mount point {printable(entry.point)} inside it shows"
                    )
                    raise PolicyError(
                        "path_refused", f"refused {holder}: {shown} {printable(name)}: {reason}"
                    )


def _hold_to_ceiling(raw: str, pinned: PinnedPath, read_only: bool, ceiling: PathCeiling) -> None:
    """Refuse `pinned` unless it lies within `ceiling` with at least the access asked."""
    try:
        refused = ceiling_refusal(raw, pinned, read_only=read_only, ceiling=ceiling)
    except PathChangedError as exc:
        raise PolicyError(
            "path_changed",
            f"refused {raw}: what it names changed while it was checked ({exc}): retry once "
            "nothing renames it or its parent directories",
            status=409,
        ) from None
    except (OSError, CeilingError) as exc:
        why = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
        raise PolicyError(
            "path_outside_ceiling",
            f"refused {raw}: it cannot be placed within the paths granted to this caller "
            f"({why}); ask for a path inside one of them",
        ) from None
    if refused is not None:
        raise PolicyError("path_outside_ceiling", refused)


MAX_SUBMOUNTS = 256
"""Most mount points one request's read-only grants may hold (each is one more bind)."""


def _mount_table() -> str:
    try:
        return read_mountinfo()
    except OSError as exc:
        raise PolicyError(
            "mount_table_unreadable",
            f"the daemon cannot read its mount table ({_os_reason(exc)}), so it cannot make "
            "read-only grants read-only all the way down: run it where /proc is mounted",
            status=503,
        ) from None


def _read_only_submounts(
    grants: Sequence[GrantedPath], mountinfo: str
) -> list[tuple[str, PinnedPath]]:
    """Each mount point beneath a read-only grant, pinned, to be bound read-only on top.

    WHY: the engine binds a grant recursively and (before API 1.44) can only make its top
    mount read-only, so a file system mounted beneath would stay writable. Raises
    PolicyError naming a mount point that cannot be pinned, or when there are too many.
    """
    below = uncovered_mount_points([(g.path, g.read_only) for g in grants], mountinfo)
    if len(below) > MAX_SUBMOUNTS:
        raise PolicyError(
            "too_many_submounts",
            f"refused {below[0][1]}: the read-only paths of this request hold {len(below)} "
            f"mount points, each to be mounted read-only too, and at most "
            f"{MAX_SUBMOUNTS} can be: grant directories that hold fewer",
            status=422,
        )
    found: list[tuple[str, PinnedPath]] = []
    try:
        for point, holder in below:
            found.append((point, _pin_submount(holder, point)))
    except BaseException:
        for _, pinned in found:
            pinned.close()
        raise
    return found


def _pin_submount(granted: str, point: str) -> PinnedPath:
    if printable(point) != point:
        raise PolicyError(
            "submount_refused",
            f"refused {granted}: the mount point {printable(point)} inside it has a name "
            "that is not UTF-8, which the engine's API cannot carry, so it cannot be mounted "
            "read-only: rename it, or grant a directory that does not hold it",
        )
    try:
        return pin(point)
    except (PathChangedError, OSError) as exc:
        why = str(exc) if isinstance(exc, PathChangedError) else _os_reason(exc)
        raise PolicyError(
            "submount_refused",
            f"refused {granted}: the mount point {point} inside it cannot be mounted "
            f"read-only ({why}), so it would be writable in the sandbox: unmount it, or "
            "grant a directory that does not hold it",
            status=409 if isinstance(exc, PathChangedError) else 403,
        ) from None


def _realpath(raw: str) -> Path:
    """Every symlink resolved; OSError when something on the way does not exist or loops."""
    return Path(os.path.realpath(raw, strict=True))


def _check_form(raw: str, *, what: str) -> None:
    if "\x00" in raw:
        raise PolicyError("invalid_path", f"{what} {raw!r} contains a NUL character", status=400)
    if not raw.startswith("/"):
        # WHY a refusal for a mount and not for a workdir: the daemon's directory is not the
        # caller's, so a relative mount could only ever name the wrong place.
        mount = what == "path"
        raise PolicyError(
            "path_refused" if mount else "invalid_path",
            f"refused {what} {raw!r}: only absolute paths are mountable; pass a full path "
            "starting with /"
            if mount
            else f"{what} {raw!r} is not absolute: pass a full path starting with /",
            status=403 if mount else 400,
        )


def _resolved_forms_unique(paths: Iterable[Path]) -> Iterable[Path]:
    seen: set[Path] = set()
    for path in paths:
        resolved = path.resolve()
        if resolved not in seen:
            seen.add(resolved)
            yield resolved


def _shown(raw: str, resolved: Path) -> str:
    return raw if raw == str(resolved) else f"{raw} (resolves to {resolved})"


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.EACCES:
        return "the daemon is not permitted to look it up"
    return os_reason(exc)
