"""The places never mountable, and why: the root, the host's system directories and the
roots holding them, the engine's storage and sockets, the shared socket directories, the
daemon's own files, homes and the credentials in them.

A refused place is refused as itself, for anything inside it, and for any directory that
contains it (mounting /home/u would expose /home/u/.ssh; mounting /var/run would expose the
Docker socket). Home directories are the exception to "inside": a project under the home is
fine, the home itself (and anything containing it) is not.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sandboxd.policy.mount_table import is_inside

ENGINE_SOCKETS: tuple[Path, ...] = (
    Path("/var/run/docker.sock"),
    Path("/run/docker.sock"),
    Path("/run/containerd/containerd.sock"),
    Path("/var/run/containerd/containerd.sock"),
    Path("/run/podman/podman.sock"),
)
"""Container engine sockets: whoever can reach one is root on the host."""

SYSTEM_DIRS: tuple[str, ...] = (
    *("/proc", "/sys", "/dev", "/run", "/var/run"),
    *("/etc", "/boot"),
    *("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/snap", "/nix"),
    *("/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail", "/var/backups"),
)
"""The host's own software, configuration, kernel interfaces and service state: never
mountable, nor anything in them, nor a directory holding them (unless the config's
allowed_system_paths names it). WHY read-only too: a read-only /etc still shows the host's
secrets (shadow, keys); a read-write /usr/lib lets a command running as root change what
every host program loads."""
SYSTEM_ROOTS: tuple[str, ...] = ("/home", "/root", "/opt", "/srv", "/var", "/mnt", "/media")
"""Roots that hold system or other users' things next to projects: never mountable as a
whole (nor a directory holding them), while a directory inside them (a user's project under
/home or root's /root, a site under /srv) stays mountable; credentials inside a home stay
refused by the home rules."""
ENGINE_STORAGE: tuple[str, ...] = ("/var/lib/docker", "/var/lib/containerd")
SHARED_SOCKET_DIRS: tuple[str, ...] = ("/tmp", "/var/tmp")
"""Never mount roots: other programs keep their sockets there (X11, tmux, ssh agents, IDEs).
A directory inside them stays mountable. (/dev/shm and /run/user/* are under /dev and /run.)"""

CREDENTIAL_DIRS: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".gcloud",
    ".config",
    ".docker",
    ".kube",
    ".netrc",
    ".password-store",
    ".local/share/keyrings",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".pgpass",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".mozilla",
    ".pki",
)
"""Relative to a home directory: never mountable, nor anything in them."""


@dataclass(frozen=True)
class Refused:
    """A refused place. Always refused as itself; `inside`: so is anything under it;
    `contains`: so is any directory above it."""

    path: Path
    label: str
    inside: bool = True
    contains: bool = True
    system: bool = False
    """A system directory rule: the config's allowed_system_paths may lift it."""


def refused_places(
    *,
    engine_sockets: Iterable[Path],
    daemon_paths: Iterable[tuple[Path, str]],
    extra_denies: Iterable[Path],
    daemon_home: Path | None,
) -> tuple[Refused, ...]:
    """The daemon's rules: the fixed places, the engine's sockets, the daemon's own paths
    (each with its label), the config's extra_denies, and the daemon user's home."""
    refused = [Refused(Path("/"), "the root directory", inside=False, contains=False)]
    refused += [Refused(Path(p), f"the system directory {p}", system=True) for p in SYSTEM_DIRS]
    refused += [
        Refused(Path(p), f"the system directory {p}", inside=False, system=True)
        for p in SYSTEM_ROOTS
    ]
    refused += [Refused(Path(p), f"the container engine's storage {p}") for p in ENGINE_STORAGE]
    refused += [
        Refused(
            Path(p),
            f"the shared directory {p} (other programs' sockets live there; mount a "
            "directory inside it)",
            inside=False,
        )
        for p in SHARED_SOCKET_DIRS
    ]
    refused += [Refused(p, f"the container engine socket {p}") for p in engine_sockets]
    refused += [Refused(p, label) for p, label in daemon_paths]
    refused += [Refused(p, f"{p} (denied by the config's extra_denies)") for p in extra_denies]
    if daemon_home is not None:
        refused += _home_rules(daemon_home)
    return tuple(_with_resolved_forms(refused))


@lru_cache(maxsize=256)
def home_of(uid: int) -> Path | None:
    """The home directory of `uid` from the user database (None for an unknown uid).

    Cached: the lookup may go to a directory service, and homes do not move while the
    daemon runs."""
    try:
        return Path(pwd.getpwuid(uid).pw_dir)
    except KeyError:
        return None


def refusal(resolved: Path, rule: Refused) -> str | None:
    """Why `rule` refuses `resolved` (as itself, inside it, containing it), or None."""
    if resolved == rule.path:
        return f"{rule.label} is never mountable"
    if rule.inside and is_inside(str(resolved), str(rule.path)):
        return f"it is inside {rule.label}, which is never mountable"
    if rule.contains and is_inside(str(rule.path), str(resolved)):
        return (
            f"it contains {rule.label}, which is never mountable; mount a directory that "
            "does not contain it"
        )
    return None


def _home_rules(home: Path) -> list[Refused]:
    rules = [
        Refused(
            home,
            f"the home directory {home} (it holds credentials; mount a project inside it)",
            inside=False,
        )
    ]
    rules += [Refused(home / name, f"the credential location ~/{name}") for name in CREDENTIAL_DIRS]
    return rules


@lru_cache(maxsize=64)
def home_rules(home: Path) -> tuple[Refused, ...]:
    """The rules of a caller's home: the home itself and the credentials in it (cached: a
    caller's home does not move)."""
    return tuple(_with_resolved_forms(_home_rules(home)))


def _with_resolved_forms(rules: Iterable[Refused]) -> Iterable[Refused]:
    """Each rule as written and, when a symlink is involved, as resolved (e.g. /var/run → /run,
    or a ~/.ssh that is a symlink to a directory elsewhere)."""
    seen: set[tuple[Path, bool, bool]] = set()
    for rule in rules:
        literal = Path(os.path.normpath(rule.path))
        for path in (literal, literal.resolve()):
            key = (path, rule.inside, rule.contains)
            if key not in seen:
                seen.add(key)
                yield dataclasses.replace(rule, path=path)
