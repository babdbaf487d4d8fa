"""Whether a sandbox the daemon before made may go on under this daemon's policy.

A daemon that takes over a sandbox (sandboxd.docker.keeping) holds it to the policy it was
started with, which may not be the one the sandbox was made under: its image must still be
allowed, and its network, Unix sockets and egress hosts; each mount must still be granted
(resolved, pinned and checked as a new request's would be) with the same access, and still
name the same file (device and inode as pinned when the sandbox was made); its limits must be
this daemon's. The backend then checks that the sandbox itself still sees those files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sandboxd.backend import Limits, SandboxSpec
from sandboxd.policy.errors import PolicyError
from sandboxd.policy.places import home_of
from sandboxd.policy.policy import Policy


def spec_check(
    policy: Policy, limits: Limits, caller_home: Callable[[int], Path | None] = home_of
) -> Callable[[SandboxSpec], str | None]:
    """Why `policy` and `limits` no longer allow a sandbox of a spec, or None. Blocking (it
    resolves the host's paths): run it on a thread."""

    def check(spec: SandboxSpec) -> str | None:
        try:
            policy.check_image(spec.image)
            policy.check_network(spec.network)
            policy.check_unix_sockets(spec.unix_sockets)
            hosts = policy.check_hosts(spec.allowed_hosts, network=spec.network)
            if hosts != spec.allowed_hosts:
                return f"its allowed_hosts {list(spec.allowed_hosts)} now read {list(hosts)}"
            requested = [(mount.path, mount.read_only) for mount in spec.mounts]
            with policy.grant_paths(requested, caller_home=caller_home(spec.uid)) as grant:
                granted = {path.path: path for path in grant.paths}
                for mount in spec.mounts:
                    now = granted.get(mount.path)
                    if now is None or now.read_only != mount.read_only:
                        return f"{mount.path} is no longer granted as it was mounted"
                    if now.identity != mount.identity:
                        return (
                            f"{mount.path} is no longer what it was when the sandbox was made "
                            f"(it was {mount.identity.describe()}, it is "
                            f"{now.identity.describe()})"
                        )
        except PolicyError as refusal:
            return refusal.message
        if spec.limits != limits:
            return (
                f"its limits ({_limits(spec.limits)}) are not this daemon's ({_limits(limits)}, "
                "[limits] in its config)"
            )
        return None

    return check


def _limits(limits: Limits) -> str:
    return ", ".join(f"{name} {value}" for name, value in limits.model_dump().items())
