"""Talking to the Docker engine: docker-py's blocking calls on a bounded worker pool.

Every call runs in a worker thread (one slow engine call never blocks the event loop or the
other sessions) and an unreachable engine becomes EngineUnavailableError with the fix in its
message. The client is created on first use, so a backend starts while the engine is down.

One Engine is one lane of traffic: its own client (so its own connection pool), threads and
timeout. A backend keeps separate lanes for calls that may block for long (`docker exec`
streams, held for a whole command) and calls that must not wait behind them (container
starts and removals; health, with a short timeout).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import docker
import docker.errors
import requests.exceptions
from docker.utils import kwargs_from_env

from sandboxd.backend import EngineUnavailableError

T = TypeVar("T")

_DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"
_API_TIMEOUT_S = 60
PROBE_TIMEOUT_S = 5
"""A health check says the engine is slow within this, rather than hang with it."""
PROBE_WORKERS = 2
_START_ENGINE_HINT = "start it (e.g. `sudo dockerd &` or `systemctl start docker`)"


class Engine:
    def __init__(
        self, base_url: str | None, max_workers: int, timeout_s: float = _API_TIMEOUT_S
    ) -> None:
        self._base_url = base_url
        self._max_workers = max_workers
        self._timeout_s = timeout_s
        self.limiter = anyio.CapacityLimiter(max_workers)
        """Shared by every blocking call of this lane."""
        self._client: Any = None
        self._client_lock = threading.Lock()

    @property
    def url(self) -> str:
        return self._base_url or os.environ.get("DOCKER_HOST") or _DEFAULT_DOCKER_URL

    async def call(self, fn: Callable[[Any], T]) -> T:
        """Run `fn(api_client)` on the worker pool.

        Cancellation waits for the call to finish: a container being created is then known
        and can be removed.
        """
        return await anyio.to_thread.run_sync(self.call_blocking, fn, limiter=self.limiter)

    def call_blocking(self, fn: Callable[[Any], T]) -> T:
        """For code that already runs on a worker thread."""
        api = self.api()
        try:
            return fn(api)
        except docker.errors.APIError:
            raise
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            raise self.unavailable(exc) from exc
        except docker.errors.DockerException as exc:
            raise self.unavailable(exc) from exc

    def api(self) -> Any:
        """The docker-py APIClient, created on first use; raises EngineUnavailableError."""
        with self._client_lock:
            if self._client is None:
                options = kwargs_from_env()
                if self._base_url is not None:
                    options["base_url"] = self._base_url
                try:
                    self._client = docker.APIClient(
                        **options,
                        version="auto",
                        timeout=self._timeout_s,
                        max_pool_size=self._max_workers,
                    )
                except docker.errors.DockerException as exc:
                    raise self.unavailable(exc) from exc
            return self._client

    def unavailable(self, cause: BaseException) -> EngineUnavailableError:
        return EngineUnavailableError(
            f"Docker engine unreachable at {self.url}: {_START_ENGINE_HINT} ({_short(cause)})"
        )

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def api_error_text(exc: docker.errors.APIError) -> str:
    """The engine's own explanation, without docker-py's HTTP framing."""
    explanation = exc.explanation
    if isinstance(explanation, bytes):
        explanation = explanation.decode(errors="replace")
    return str(explanation or exc).strip()


def _short(cause: BaseException) -> str:
    text = str(cause).strip() or type(cause).__name__
    return text if len(text) <= 300 else text[:300] + "…"
