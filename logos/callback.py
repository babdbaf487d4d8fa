"""Callbacks may be plain functions or coroutine functions: one way to call either."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable


async def invoke_callback(
    callback: Callable[..., Awaitable[None] | None] | None, *args: object
) -> None:
    """Call `callback(*args)` and await what it returns when that is awaitable; None is no
    callback at all."""
    if callback is None:
        return
    outcome = callback(*args)
    if inspect.isawaitable(outcome):
        await outcome
