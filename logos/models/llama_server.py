"""A GGUF model served by llama.cpp inside this process, reachable by both providers.

llama.cpp's own HTTP server (through the `xllamacpp` package) answers the OpenAI
chat-completions API under `/v1` and the Anthropic Messages API at the root, so the same
providers that talk to hosted models talk to a local one: no separate wire code to keep.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Self

import httpx

from logos.errors import LocalModelError
from logos.tls import tls_for

_LOOPBACK = "127.0.0.1"
_HEALTH_POLL_S = 0.1
# llama.cpp log levels: 1 shows warnings and errors, 3 everything.
_QUIET_LOG_VERBOSITY = 1
_VERBOSE_LOG_VERBOSITY = 3


class LocalModelServer:
    """Starts and stops llama.cpp's server for one GGUF file, on the loopback interface only.

    Security defaults: it listens on 127.0.0.1, requires a fresh random API key (`api_key`)
    so that other local users and web pages cannot use it, sends no CORS grant, and serves
    no web UI. `threads=None` leaves the thread count to llama.cpp; `port=None` lets the OS
    choose a free port.

    Use it as a context manager, or call `start()` and `stop()`::

        with LocalModelServer("model.gguf") as local:
            provider = OpenAIProvider(
                model=local.model_name, base_url=local.openai_base_url, api_key=local.api_key
            )
    """

    def __init__(
        self,
        gguf_path: str | os.PathLike[str],
        n_ctx: int = 4096,
        threads: int | None = None,
        port: int | None = None,
        *,
        startup_timeout_s: float = 120.0,
        verbose: bool = False,
    ) -> None:
        if n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16 tokens, got {n_ctx}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.gguf_path = Path(gguf_path).expanduser()
        self.n_ctx = n_ctx
        self.threads = threads
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.verbose = verbose
        self.api_key = secrets.token_urlsafe(24)
        # WHY Any: xllamacpp ships no type information.
        self._server: Any = None
        self._base_url: str | None = None

    @property
    def model_name(self) -> str:
        """A name for the `model` field of requests (llama.cpp serves one model whatever
        it is called); the file name without `.gguf`."""
        return self.gguf_path.stem

    @property
    def base_url(self) -> str:
        """The server root, e.g. `http://127.0.0.1:41234`: the Anthropic provider's base."""
        if self._base_url is None:
            raise RuntimeError("the local model server is not running: call start() first")
        return self._base_url

    @property
    def openai_base_url(self) -> str:
        """`base_url` + "/v1": the OpenAI-compatible provider's base."""
        return f"{self.base_url}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Loads the model and waits until the server answers `/health`."""
        if self._server is not None:
            return
        xllamacpp = _import_xllamacpp()
        if not self.gguf_path.is_file():
            raise LocalModelError(
                f"GGUF model file not found: {self.gguf_path}: give the path of a .gguf file"
            )
        params = xllamacpp.CommonParams()
        params.model.path = str(self.gguf_path)
        params.n_ctx = self.n_ctx
        params.hostnames = [_LOOPBACK]
        params.port = 0 if self.port is None else self.port
        params.use_jinja = True
        params.api_keys = [self.api_key]
        params.cors_origins = ""
        params.ui = False
        params.endpoint_slots = False
        # WHY: the start-up handshake asks the task loop for its metrics (see _serve); over
        # HTTP, /metrics needs the API key like every other endpoint but /health.
        params.endpoint_metrics = True
        params.offline = True
        params.verbosity = _VERBOSE_LOG_VERBOSITY if self.verbose else _QUIET_LOG_VERBOSITY
        if self.threads is not None:
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
        try:
            # WHY straight into the attribute: stop() frees the server by dropping the last
            # reference; a local one would live on in the traceback of a failed start.
            self._server = _serve(xllamacpp, params)
        except RuntimeError as exc:
            raise LocalModelError(
                f"llama.cpp could not serve {self.gguf_path} ({exc}): check that the file is "
                f"a GGUF model this llama.cpp supports, that n_ctx={self.n_ctx} fits in "
                "memory, and that the port is free; llama.cpp's log above says more"
            ) from exc
        try:
            self._base_url = str(self._server.listening_address).rstrip("/")
            self._wait_until_healthy()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops the server and frees the model; safe to call twice."""
        # WHY dropping the reference: xllamacpp stops the HTTP server and joins its threads
        # when the Server object is freed; it has no explicit stop method.
        self._server = None
        self._base_url = None

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last = "no answer yet"
        # WHY trust_env=False: a proxy from the environment must not carry loopback traffic.
        with httpx.Client(timeout=5.0, trust_env=False, verify=tls_for(self.base_url)) as client:
            while time.monotonic() < deadline:
                try:
                    response = client.get(f"{self.base_url}/health")
                except httpx.TransportError as exc:
                    last = str(exc) or type(exc).__name__
                else:
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                time.sleep(_HEALTH_POLL_S)
        raise LocalModelError(
            f"llama.cpp did not become healthy within {self.startup_timeout_s} s "
            f"({self.base_url}/health: {last}): raise startup_timeout_s for a large model"
        )

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _serve(xllamacpp: Any, params: Any) -> Any:
    """A started `xllamacpp.Server` whose task loop is known to run, so freeing it stops it.

    WHY the handshake: freeing the server asks its task loop to end, and a request that comes
    before the loop has started is lost: freeing it then waits forever. The constructor
    returns just before the loop starts, so the server is first asked for its metrics, which
    only the running loop answers.

    WHY a worker thread that owns the server until it is handed over: the model loads inside
    the constructor, which is where Ctrl-C lands. Raised in the caller, KeyboardInterrupt
    would free the fresh server before the handshake; instead the caller gives up its claim
    and the worker frees the server itself, once the handshake is done.
    """
    lock = threading.Lock()
    ready = threading.Event()
    handed: list[Any] = []
    """The server, or the constructor's error, for the caller."""
    abandoned = False

    def build() -> None:
        try:
            built: Any = xllamacpp.Server(params)
            built.handle_metrics()
        except Exception as exc:
            built = exc
        with lock:
            if not abandoned:
                handed.append(built)
        ready.set()
        # An abandoned server is freed as this function returns: after the handshake.

    try:
        threading.Thread(target=build, name="llama.cpp start", daemon=True).start()
        ready.wait()
    except BaseException:
        with lock:
            abandoned = True
            handed.clear()
        raise
    outcome = handed.pop()
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _import_xllamacpp() -> Any:
    try:
        import xllamacpp
    except ModuleNotFoundError as exc:
        if exc.name != "xllamacpp":
            raise _unloadable(exc) from exc
        raise LocalModelError(
            "running a local GGUF model needs the xllamacpp package (a dependency of logos), "
            "which is missing: pip install xllamacpp"
        ) from exc
    except ImportError as exc:
        raise _unloadable(exc) from exc
    return xllamacpp


def _unloadable(exc: ImportError) -> LocalModelError:
    """xllamacpp is installed but cannot load: usually a system library it links is missing."""
    hint = ""
    if "libgomp" in str(exc):
        hint = " (it needs the OpenMP runtime: e.g. apt-get install libgomp1)"
    return LocalModelError(
        f"the xllamacpp package is installed but cannot be loaded: {exc}{hint}; install the "
        "missing system library, or reinstall it with pip install --force-reinstall xllamacpp"
    )
