"""A real HTTP server that serves files the way the Hugging Face Hub serves them to
huggingface_hub 2.4, for tests of `logos.models.hf_hub` and `logos models`: no test reaches the
real Hub.

It answers the routes and headers huggingface_hub reads (`get_hf_file_metadata`, `http_get`,
`hf_raise_for_status` in `utils/_http.py`):

- `HEAD` and `GET /{owner}/{repo}/resolve/{revision}/{filename}`: the file at a branch, tag
  or commit, with `ETag` and `X-Linked-Etag` (its sha256, quoted), `X-Linked-Size`,
  `X-Repo-Commit`, `Content-Length` and `Accept-Ranges`; `Range: bytes=N-` gets a 206 with
  `Content-Range`. With `HubServer(redirect=True)` this route answers 302 to
  `/blobs/{sha256}` on `localhost` instead (another origin, as the Hub sends Git LFS files
  to its CDN), with the same `X-Linked-*` headers: huggingface_hub then takes the metadata
  from the redirect and drops the token on the way to the blob.
- A missing repository, revision or file: 404 with `X-Error-Code` `RepoNotFound`,
  `RevisionNotFound` or `EntryNotFound` and an `X-Error-Message`, which is how
  `hf_raise_for_status` tells them apart; a repository in `server.gated`: 401 `GatedRepo`.
- Anything else: a plain 404 (huggingface_hub asks `/api/agent-harnesses` once a day).

It never sends an `X-Xet-*` header, so huggingface_hub never tries Xet storage.

Faults, set on `server.faults` at any time: `cut_after` (the next GET's body stops after
that many bytes and the connection closes; once), `status_after_cut` (after that cut,
every GET of a file is answered with this status until the fault is cleared), `corrupt`
("once" or "always": one byte of the body changed, under the right sha256) and
`bytes_per_second` (throttled bodies). `server.requests` lists every request: method, path,
its `Range` header and whether it carried a token. The root conftest registers its
`hub_server` fixture.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit

import pytest

from tests.support.cli_harness import Home
from tests.support.local_http import LocalHTTPServer

_CHUNK = 16 * 1024
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


@dataclass(frozen=True)
class HubRequest:
    method: str
    path: str
    range: str | None
    """The `Range` header, e.g. `bytes=1048576-`."""
    authorized: bool
    """Whether it carried an `Authorization` header (a token)."""


@dataclass
class Faults:
    cut_after: int | None = None
    status_after_cut: int | None = None
    corrupt: Literal["once", "always"] | None = None
    bytes_per_second: float | None = None
    cut_done: bool = False
    """Whether the cut happened (then `status_after_cut` applies)."""


@dataclass(frozen=True)
class ServedFile:
    repo_id: str
    filename: str
    content: bytes
    commit: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def spec(self) -> str:
        """How logos names it on the command line (at `main`)."""
        return f"hf:{self.repo_id}/{self.filename}"


def gguf_bytes(size: int) -> bytes:
    """A file that looks like a GGUF model to logos: the magic bytes, then random ones."""
    return b"GGUF" + secrets.token_bytes(size - 4)


class HubServer(LocalHTTPServer):
    """The server; see the module docstring. Start and stop it with `with`."""

    def __init__(self, *, redirect: bool = False) -> None:
        super().__init__()
        self.redirect = redirect
        self.faults = Faults()
        self.gated: set[str] = set()
        """Repositories whose conditions the caller has not accepted."""
        self._refs: dict[str, dict[str, str]] = {}
        """repo_id → {branch or tag: commit}."""
        self._files: dict[tuple[str, str, str], ServedFile] = {}
        """(repo_id, commit, filename) → file."""
        self._requests: list[HubRequest] = []
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The `HF_ENDPOINT` that points huggingface_hub here."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[HubRequest]:
        with self._lock:
            return list(self._requests)

    def file_requests(self, method: str | None = None) -> list[HubRequest]:
        """The requests for files (resolve and blob routes), optionally of one method."""
        return [
            request
            for request in self.requests
            if ("/resolve/" in request.path or request.path.startswith("/blobs/"))
            and method in (None, request.method)
        ]

    def add(
        self,
        repo_id: str,
        filename: str,
        content: bytes,
        *,
        refs: tuple[str, ...] = ("main",),
        commit: str | None = None,
    ) -> ServedFile:
        """Serve `content` as `filename` at a commit (new unless given) that `refs` name."""
        served = ServedFile(repo_id, filename, content, commit or secrets.token_hex(20))
        with self._lock:
            repo_refs = self._refs.setdefault(repo_id, {})
            repo_refs.update(dict.fromkeys(refs, served.commit))
            self._files[(repo_id, served.commit, filename)] = served
        return served

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("_BoundHandler", (_Handler,), {"hub": self})

    @property
    def _port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running: use `with HubServer() as hub:`")
        return int(self._httpd.server_address[1])

    def _record(self, request: HubRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _resolve(self, repo_id: str, revision: str, filename: str) -> ServedFile | str:
        """The file, or the X-Error-Code saying what is missing."""
        with self._lock:
            refs = self._refs.get(repo_id)
            if refs is None:
                return "RepoNotFound"
            if repo_id in self.gated:
                return "GatedRepo"
            commits = {commit for (repo, commit, _) in self._files if repo == repo_id}
            commit = refs.get(revision) or (revision if revision in commits else None)
            if commit is None:
                return "RevisionNotFound"
            return self._files.get((repo_id, commit, filename)) or "EntryNotFound"

    def _blob(self, sha256: str) -> ServedFile | None:
        with self._lock:
            return next((f for f in self._files.values() if f.sha256 == sha256), None)

    def _commit_of(self, repo_id: str, revision: str) -> str | None:
        with self._lock:
            return self._refs.get(repo_id, {}).get(revision)


class _Gone(Exception):
    """The server is stopping, or the client left."""


_ERROR_MESSAGES = {
    "RepoNotFound": "Repository not found",
    "RevisionNotFound": "Invalid rev id",
    "EntryNotFound": "Entry not found",
    "GatedRepo": "Access to this model is restricted: log in and accept its conditions",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: HubServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: test output is for the tests."""

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, *, head: bool) -> None:
        path = urlsplit(self.path).path
        self.hub._record(
            HubRequest(
                self.command, path, self.headers.get("Range"), "Authorization" in self.headers
            )
        )
        try:
            if path.startswith("/blobs/"):
                served = self.hub._blob(path.removeprefix("/blobs/"))
                if served is None:
                    self._answer(404, {})
                else:
                    self._send_file(served, head=head)
                return
            parts = path.lstrip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                self._answer(404, {})
                return
            repo_id = f"{parts[0]}/{parts[1]}"
            revision, filename = unquote(parts[3]), unquote("/".join(parts[4:]))
            found = self.hub._resolve(repo_id, revision, filename)
            if isinstance(found, str):
                headers = {"X-Error-Code": found, "X-Error-Message": _ERROR_MESSAGES[found]}
                commit = self.hub._commit_of(repo_id, revision)
                if found == "EntryNotFound" and commit is not None:
                    headers["X-Repo-Commit"] = commit
                self._answer(401 if found == "GatedRepo" else 404, headers)
            elif self.hub.redirect:
                location = f"http://localhost:{self.hub._port}/blobs/{quote(found.sha256)}"
                self._answer(302, {**_metadata(found), "Location": location})
            else:
                self._send_file(found, head=head)
        except (_Gone, ConnectionError):
            self.close_connection = True

    def _answer(self, status: int, headers: dict[str, str]) -> None:
        self.send_response_only(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send_file(self, served: ServedFile, *, head: bool) -> None:
        faults = self.hub.faults
        if not head and faults.cut_done and faults.status_after_cut is not None:
            self._answer(faults.status_after_cut, {})
            return
        start, end = 0, served.size - 1
        asked = _RANGE.fullmatch(self.headers.get("Range") or "")
        if asked:
            start = int(asked.group(1))
            end = min(int(asked.group(2) or end), end)
            if start >= served.size:
                self._answer(416, {"Content-Range": f"bytes */{served.size}"})
                return
        content = served.content
        if not head and faults.corrupt is not None:
            middle = served.size // 2
            content = content[:middle] + bytes([content[middle] ^ 0xFF]) + content[middle + 1 :]
            if faults.corrupt == "once":
                faults.corrupt = None
        body = content[start : end + 1]
        self.send_response_only(206 if asked else 200)
        for name, value in _metadata(served).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{end}/{served.size}")
        self.end_headers()
        if head:
            return
        cut_after = faults.cut_after
        if cut_after is not None:
            faults.cut_after = None
            faults.cut_done = True
            self._write(body[:cut_after])
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._write(body)

    def _write(self, body: bytes) -> None:
        rate = self.hub.faults.bytes_per_second
        chunk = _CHUNK if rate is None else max(1, int(rate / 20))
        for offset in range(0, len(body), chunk):
            if self.hub._stopping.is_set():
                raise _Gone
            self.wfile.write(body[offset : offset + chunk])
            self.wfile.flush()
            if self.hub.faults.bytes_per_second is not None:
                time.sleep(chunk / self.hub.faults.bytes_per_second)


def _metadata(served: ServedFile) -> dict[str, str]:
    """The headers huggingface_hub reads a file's identity from."""
    return {
        "ETag": f'"{served.sha256}"',
        "X-Linked-Etag": f'"{served.sha256}"',
        "X-Linked-Size": str(served.size),
        "X-Repo-Commit": served.commit,
    }


@pytest.fixture
def hub_server() -> Iterator[HubServer]:
    """A running HubServer for one test."""
    with HubServer() as server:
        yield server


def hub_env(home: Home, hub: HubServer, **extra: str) -> dict[str, str]:
    """The environment of a `logos` command that fetches from `hub` into the home's own
    Hugging Face cache."""
    return home.env(HF_HOME=str(home.root / "hf"), HF_ENDPOINT=hub.endpoint, **extra)
