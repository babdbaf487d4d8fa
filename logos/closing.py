"""What a caller must close when done with it (a runner, a provider): `aclose()`, or
`async with`, which closes it on the way out."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self


class AsyncCloseable(Protocol):
    """Has `aclose()`; a class that subclasses it explicitly gets `async with` from here."""

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
