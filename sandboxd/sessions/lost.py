"""Sessions whose sandbox is gone without their caller closing it, and why.

WHY: a session's sandbox holds what its commands made outside the allowed paths (/tmp,
$HOME) and its jobs. When it is lost (its container removed or stopped behind the daemon's
back, the engine restarted, the host rebooted, the daemon's policy no longer allowing it
after a restart), the session's next start is refused with the reason, never answered with
an empty sandbox under the old name; a caller that asks for a fresh one gets it with the
reason to pass on. Closing the session forgets it too.

Kept in `<state_dir>/lost-sessions.json` (0600, replaced whole) by a daemon that keeps its
sandboxes across restarts, so the next daemon still knows; at most MAX_LOST, each for KEPT_S.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from logos.errors import RecordFileError
from logos.jsonl import replace_private_file

LOST_FILE = "lost-sessions.json"
_MAX_LOST = 4096
"""Sessions remembered at most (the oldest forgotten first)."""
_KEPT_S = 7 * 86400.0
"""How long a lost session is remembered."""

logger = logging.getLogger(__name__)


class LostSandbox(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str
    at: float
    """Unix time it was found lost."""
    sandbox: str = ""
    """The lost sandbox's name (its jobs name it)."""


_TABLE = TypeAdapter(dict[str, LostSandbox])


class LostSessions:
    """The lost sessions of one backend, by the backend's session id."""

    def __init__(self, path: Path | None = None) -> None:
        """`path`: where they are kept (None: in memory only)."""
        self._path = path
        self._lost: dict[str, LostSandbox] = {}
        if path is not None:
            try:
                self._lost = _TABLE.validate_json(path.read_bytes())
            except FileNotFoundError:
                pass
            except (OSError, ValidationError) as exc:
                logger.warning("cannot read %s (%s): lost sessions forgotten", path, exc)

    def get(self, session: str) -> LostSandbox | None:
        return self._lost.get(session)

    def by_sandbox(self) -> dict[str, str]:
        """Why each lost sandbox known here was lost, by its name."""
        return {lost.sandbox: lost.reason for lost in self._lost.values() if lost.sandbox}

    async def mark(self, session: str, reason: str, sandbox: str = "") -> None:
        self._lost.pop(session, None)
        self._lost[session] = LostSandbox(reason=reason, at=time.time(), sandbox=sandbox)
        too_old = time.time() - _KEPT_S
        for stale in [s for s, lost in self._lost.items() if lost.at < too_old]:
            del self._lost[stale]
        while len(self._lost) > _MAX_LOST:
            del self._lost[next(iter(self._lost))]
        await self._save()

    async def clear(self, session: str) -> LostSandbox | None:
        """Forget it (its caller has been told, or closed it); what was known."""
        lost = self._lost.pop(session, None)
        if lost is not None:
            await self._save()
        return lost

    async def _save(self) -> None:
        if self._path is None:
            return
        text = _TABLE.dump_json(self._lost).decode()
        path = self._path
        try:
            await anyio.to_thread.run_sync(replace_private_file, path, text)
        except (OSError, RecordFileError) as exc:
            logger.warning("cannot keep the lost sessions in %s: %s", path, exc)
