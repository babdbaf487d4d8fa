"""Attack: a path granted inside a caller's ceiling is swapped to lead outside it (a directory
removed or renamed and a symlink put in its place, once or in a loop, one level up or two),
then asked for. The daemon resolves and pins each path itself and holds what it pinned to the
ceiling the request carries (the roots a front granted, pinned when granted), and again once
the container's mounts are made. Target: nothing outside a ceiling is ever mounted, and each
refusal is a clear 4xx naming the path and the roots.

Through the fronts (sandboxd mcp, a project, serve runs, batch tasks):
tests/security/test_path_ceiling_fronts.py and tests/security/test_mcp_attacks.py.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from logos.ceiling import CeilingRoot, pin_root
from sandboxd.backend import ExecRequest, Mount, OutsideCeilingError, SandboxSpec
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import LABEL_SESSION
from tests.support.parts import SANDBOX_IMAGE
from tests.support.path_swaps import Swap, swapping
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = pytest.mark.docker

RACE_TRIES = 32
EXPECTED_REFUSALS = ("path_outside_ceiling", "path_changed", "mount_changed", "path_unusable")
"""Outside the ceiling; changed while checked, or between the check and the mount; gone."""


@dataclass(frozen=True)
class Place:
    """granted/sub (the real thing) inside the root `granted`; outside/ beside it."""

    granted: Path
    sub: Path
    outside: Path

    def ceiling(self, read_only: bool = False) -> list[dict[str, Any]]:
        return wire_ceiling(pin_root(str(self.granted), read_only=read_only))

    def escaped(self) -> bool:
        return (self.outside / "canary").exists()


@pytest.fixture
def place() -> Iterator[Place]:
    root = short_dir("ceil")
    granted, outside = root / "granted", root / "outside"
    (granted / "sub").mkdir(parents=True)
    (granted / "sub" / "which").write_text("real\n")
    outside.mkdir()
    (outside / "which").write_text("OUTSIDE\n")
    yield Place(granted, granted / "sub", outside)
    shutil.rmtree(root, ignore_errors=True)


def wire_ceiling(*roots: CeilingRoot) -> list[dict[str, Any]]:
    return [dataclasses.asdict(root) for root in roots]


def run(
    daemon: Daemon,
    path: Path,
    ceiling: list[dict[str, Any]] | None,
    *,
    read_only: bool = False,
    session: str = "default",
) -> httpx.Response:
    """A run that reads `path`'s `which` and leaves a canary there."""
    with daemon.client() as client:
        return client.post(
            "/v1/run",
            json={
                "command": f"cat {path}/which && echo x > {path}/canary",
                "allowed_paths": [{"path": str(path), "read_only": read_only}],
                "path_ceiling": ceiling,
                "session": session,
                "timeout_s": 30,
            },
        )


def refusal(response: httpx.Response, status: int = 403) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == "path_outside_ceiling", error
    message: str = error["message"]
    return message


def _rm_and_link(place: Place) -> tuple[Path, Path]:
    shutil.rmtree(place.sub)
    place.sub.symlink_to("../outside")
    return place.sub, place.outside


def _rename_and_link(place: Place) -> tuple[Path, Path]:
    place.sub.rename(place.granted / "moved")
    place.sub.symlink_to(place.outside)
    return place.sub, place.outside


def _two_levels_deep(place: Place) -> tuple[Path, Path]:
    (place.sub / "deeper").mkdir()
    (place.outside / "deeper").mkdir()
    (place.outside / "deeper" / "which").write_text("OUTSIDE\n")
    _rm_and_link(place)
    return place.sub / "deeper", place.outside / "deeper"


@pytest.mark.parametrize("swap", [_rm_and_link, _rename_and_link, _two_levels_deep])
def test_a_path_swapped_to_lead_out_of_its_root_is_refused_naming_both(
    daemon: Daemon, place: Place, swap: Any
) -> None:
    ceiling = place.ceiling()
    asked, leads_to = swap(place)
    message = refusal(run(daemon, asked, ceiling))
    assert message.startswith(f"refused {asked} (resolves to {leads_to}): it is outside"), message
    assert f"granted to this caller ({place.granted} (read-write))" in message
    assert not (leads_to / "canary").exists()


def test_a_sessions_sandbox_serves_only_requests_whose_ceiling_admits_its_mounts(
    daemon: Daemon, place: Place
) -> None:
    """The ceiling is no part of a sandbox's identity: each request's mounts are held to its
    own, so a sandbox made under a wide ceiling is not reused under a narrower one."""
    session = "ceiling-reuse"
    first = run(daemon, place.sub, place.ceiling(), session=session)
    assert first.status_code == 200 and first.json()["stdout"] == "real\n", first.text
    (place.granted / "other").mkdir()
    elsewhere = wire_ceiling(pin_root(str(place.granted / "other"), read_only=False))
    message = refusal(run(daemon, place.sub, elsewhere, session=session))
    assert f"({place.granted / 'other'} (read-write))" in message
    message = refusal(run(daemon, place.sub, place.ceiling(read_only=True), session=session))
    assert message == (
        f"refused {place.sub} read-write: the paths granted to this caller hold it only "
        f"read-only ({place.granted} (read-only)); a caller can narrow its paths, never widen "
        "them: ask for it read-only"
    )
    again = run(daemon, place.sub, None, session=session)
    assert again.status_code == 200 and again.json()["sandbox"] == first.json()["sandbox"]


@pytest.mark.parametrize("how", ["exchange", "rename"])
@pytest.mark.timeout(300)
def test_a_swap_in_a_loop_never_mounts_what_lies_outside(
    daemon: Daemon, place: Place, how: Swap
) -> None:
    """The host swaps granted/sub and a symlink to outside/ over and over while four callers
    ask for granted/sub within the ceiling `granted`: each request is checked, whether its
    session's sandbox runs already or starts (and mounts) now."""
    link = place.granted / "link"
    link.symlink_to(place.outside)
    ceiling = place.ceiling()

    def one(index: int) -> httpx.Response:
        return run(daemon, place.sub, ceiling, session=f"ceiling-{how}-{index % 4}")

    for warm in range(2):
        # Two of the four sessions have their sandbox already: a request there is checked
        # all the same; the other two start theirs during the race.
        assert one(warm).status_code == 200
    tally: dict[str, int] = {"ran": 0, "did not start": 0}
    sent = 0
    with swapping(place.sub, link, how), ThreadPoolExecutor(4) as pool:
        # WHY until both were seen (within a bound): which state a request meets is luck.
        while sent < RACE_TRIES or (sent < 3 * RACE_TRIES and not _both_seen(tally)):
            for response in pool.map(one, range(sent, sent + 8)):
                _count(response, tally)
            sent += 8
    print(f"\n[ceiling, {how} loop] {sent} requests: {tally}")
    assert not place.escaped(), tally
    assert _both_seen(tally), f"the real directory, or the swap, was never met: {tally}"


def _count(response: httpx.Response, tally: dict[str, int]) -> None:
    """How one request of a race ended: ran on the real directory, did not start (the engine
    found the name gone), or refused (by code); an escape fails the test."""
    if response.status_code == 200:
        body = response.json()
        assert "OUTSIDE" not in body["stdout"], body
        if body["error"] is not None:
            assert "could not start a sandbox container" in body["error"], body
            tally["did not start"] += 1
        else:
            assert body["stdout"] == "real\n", body
            tally["ran"] += 1
        return
    assert response.status_code in (403, 409), response.text
    code = response.json()["error"]["code"]
    assert code in EXPECTED_REFUSALS, response.text
    tally[code] = tally.get(code, 0) + 1


def _both_seen(tally: dict[str, int]) -> bool:
    """The real directory ran, and the swap was met (a refusal)."""
    return tally["ran"] > 0 and any(tally.get(code) for code in EXPECTED_REFUSALS)


def test_a_forks_sandbox_is_held_to_its_ceiling(daemon: Daemon, place: Place) -> None:
    with daemon.client() as client:
        response = client.post(
            "/v1/sessions/ceiling-fork/fork",
            json={
                "into": ["ceiling-fork-1"],
                "sandbox": {
                    "allowed_paths": [{"path": str(place.outside), "read_only": True}],
                    "path_ceiling": place.ceiling(),
                },
            },
        )
    assert f"refused {place.outside}: it is outside" in refusal(response)


def test_a_ceiling_is_bounded_and_checked_as_it_comes(daemon: Daemon, place: Place) -> None:
    too_many = place.ceiling() * 65
    response = run(daemon, place.sub, too_many)
    assert response.status_code == 422 and response.json()["error"]["code"] == "too_many_roots"
    assert "at most 64 (max_allowed_paths" in response.json()["error"]["message"]
    bad = [{**place.ceiling()[0], "inode": "12"}]
    response = run(daemon, place.sub, bad)
    assert response.status_code == 422, response.text
    assert "path_ceiling.0.inode" in response.json()["error"]["message"]


def test_a_mount_moved_out_of_its_ceiling_before_the_mount_destroys_the_container(
    docker_client: Any,
) -> None:
    """The post-mount check itself, without a race: the spec's ceiling does not hold the
    mount (as if it had been moved out between the policy's check and the mount)."""
    root = short_dir("ceil")
    (root / "granted").mkdir()
    (root / "moved").mkdir()
    mount = Mount.of(str(root / "moved"), read_only=False)
    granted = (pin_root(str(root / "granted"), read_only=False),)
    moved = SandboxSpec(SANDBOX_IMAGE, (mount,), False, 1000, 1000, path_ceiling=granted)
    held = dataclasses.replace(moved, path_ceiling=(pin_root(str(root), read_only=False),))

    async def attempt() -> None:
        async with DockerBackend(image=SANDBOX_IMAGE, state_dir=short_dir("st")) as backend:
            with pytest.raises(OutsideCeilingError, match=f"refused {root / 'moved'}: it is"):
                await backend.run("moved-out", moved, ExecRequest("echo ran"))
            assert await backend.list_sessions() == []
            ran = await backend.run("held", held, ExecRequest("echo ran"))
            assert ran.result.stdout == "ran\n"

    anyio.run(attempt)
    left = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_SESSION}=moved-out"}, ignore_removed=True
    )
    assert left == []
