"""Ctrl-C in a Ray batch when the stop flag's actor is gone: every task followed gets the
grace period before Ray cancels it (the real cluster's Ctrl-C is in test_batch_ray.py; an
actor's death mid-stop cannot be timed there, so Ray's two calls are stood in for here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from logos.batch import ray_pool


class _RayError(Exception):
    pass


class _Stop:
    """The stop flag's actor handle: `stop.remote()` answers the tasks that began, or fails
    as a dead actor's call does."""

    def __init__(self, began: set[str] | None) -> None:
        self.began = began
        self.stop = SimpleNamespace(remote=self._remote)

    async def _remote(self) -> set[str]:
        if self.began is None:
            raise _RayError("the actor died")
        return self.began


async def _stopped(stop: _Stop, finishes: str) -> list[tuple[str, bool]]:
    cancelled: list[tuple[str, bool]] = []
    ray: Any = SimpleNamespace(
        exceptions=SimpleNamespace(RayError=_RayError),
        cancel=lambda generator, force=False: cancelled.append((generator, force)),
    )
    following = {"a", "b"}
    cancel = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            ray_pool._stop_when_canceled, ray, {"a": "a", "b": "b"}, stop, following, cancel
        )
        cancel.set()
        await anyio.sleep(0.02)
        following.discard(finishes)  # that task sent its result within the grace
    return cancelled


@pytest.mark.anyio
async def test_a_dead_stop_flag_gives_every_followed_task_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ray_pool, "_CANCEL_GRACE_S", 0.2)
    assert await _stopped(_Stop(began=None), finishes="a") == [("b", False), ("b", True)]


@pytest.mark.anyio
async def test_a_task_that_had_not_begun_is_cancelled_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ray_pool, "_CANCEL_GRACE_S", 0.2)
    cancelled = await _stopped(_Stop(began={"a"}), finishes="a")
    assert cancelled == [("b", False), ("b", False), ("b", True)]
