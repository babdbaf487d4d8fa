"""GGUF models from the Hugging Face Hub: named `hf:OWNER/REPO/FILE.gguf[@REVISION]`, fetched
once into huggingface_hub's cache, verified, and found there again without the network.

The cache is huggingface_hub's own (`HF_HOME`, `HF_HUB_CACHE`: `models--OWNER--REPO/` with
`blobs/`, `refs/` and `snapshots/`), so a model logos fetched is one `hf` and
`hf_hub_download` find, and the reverse; the endpoint (`HF_ENDPOINT`), the offline switch
(`HF_HUB_OFFLINE`) and the token (`HF_TOKEN`, else the one `hf auth login` saved) are
huggingface_hub's too.

WHY not `hf_hub_download`: in huggingface_hub 2.4 it writes into a file name unique to the
process and deletes it on any failure, so a cut connection that outlasts its retries, or a
Ctrl-C, loses everything fetched so far; it checks the size but not the sha256; and a disk
too small is only a warning. `Hub.fetch` keeps the partial file at `blobs/<sha256>.incomplete`
(where huggingface_hub's cache scan reports interrupted downloads), continues it with a
`Range` request through huggingface_hub's own `http_get` (its session, headers, retries and
offline switch), checks the free space first, and hashes the result before it becomes the
file a snapshot names.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx2
from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, scan_cache_dir
from huggingface_hub.errors import (
    CacheNotFound,
    FileMetadataError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import (
    REGEX_COMMIT_HASH,
    REGEX_SHA256,
    http_get,
    repo_folder_name,
)
from huggingface_hub.utils import WeakFileLock, build_hf_headers
from pydantic import BaseModel, ValidationError

from logos.errors import RecordFileError
from logos.jsonl import replace_private_file
from logos.models.hub_file import (
    CachedModel,
    Confirm,
    DownloadProgress,
    HubError,
    HubFile,
    RemoteFile,
    megabytes,
)
from logos.version import logos_version

_GGUF_MAGIC = b"GGUF"
_MAIN = "main"
_OTHER_MODELS = (
    "or run on another model: --gguf PATH (a GGUF file you have), --base-url URL (a local "
    "OpenAI-compatible server) or ANTHROPIC_API_KEY / OPENAI_API_KEY (a hosted model)"
)


class _Verified(BaseModel):
    sha256: str
    size: int
    mtime_ns: int


class _VerifiedRecord(BaseModel):
    """The blobs whose sha256 logos checked, by absolute path, with the size and modification
    time they had then: a blob that has not changed since is not hashed again."""

    blobs: dict[str, _Verified] = {}


@dataclass(frozen=True)
class Hub:
    """Where models come from and where they are kept; `Hub.from_environment()` reads both
    as huggingface_hub does. `token` None lets huggingface_hub find one (`HF_TOKEN`, then
    the one `hf auth login` saved). `verified_record` is logos's own: the blobs already
    verified (see `_VerifiedRecord`)."""

    endpoint: str
    cache_dir: Path
    offline: bool
    verified_record: Path
    token: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Hub:
        """huggingface_hub's endpoint, cache and offline switch; the record goes in
        `$XDG_CACHE_HOME/logos` (else `~/.cache/logos`).

        WHY huggingface_hub's constants rather than the variables: it reads them once, when
        it is imported, and every request it sends follows those; reading the variables
        again here could disagree with it.
        """
        cache_home = environ.get("XDG_CACHE_HOME")
        base = Path(cache_home) if cache_home else Path.home() / ".cache"
        return cls(
            endpoint=constants.ENDPOINT,
            cache_dir=Path(constants.HF_HUB_CACHE),
            offline=constants.is_offline_mode(),
            verified_record=base / "logos" / "verified-models.json",
        )

    # What the Hub says ------------------------------------------------------------------

    def describe(self, file: HubFile) -> RemoteFile:
        """The file's size, sha256 and commit: one HEAD request."""
        if self.offline:
            raise HubError(
                f"HF_HUB_OFFLINE=1, so logos may not ask {self.endpoint} about {file}: "
                "unset HF_HUB_OFFLINE"
            )
        url = hf_hub_url(
            file.repo_id, file.filename, revision=file.revision, endpoint=self.endpoint
        )
        try:
            metadata = get_hf_file_metadata(
                url,
                token=self.token,
                library_name="logos",
                library_version=logos_version(),
                endpoint=self.endpoint,
            )
        except HfHubHTTPError as exc:
            raise self._refusal(exc, file) from None
        except FileMetadataError as exc:
            raise HubError(
                f"{self.endpoint} does not answer as the Hugging Face Hub does ({exc}): "
                "check HF_ENDPOINT"
            ) from None
        except (httpx2.HTTPError, OfflineModeIsEnabled) as exc:
            raise self._unreachable(file, exc) from None
        sha256, size, commit = metadata.etag, metadata.size, metadata.commit_hash
        if sha256 is None or not REGEX_SHA256.fullmatch(sha256):
            raise HubError(
                f"the Hub gives no sha256 for {file} (it is not stored with Git LFS), so logos "
                "cannot verify it: download it yourself and run it with --gguf PATH"
            )
        if size is None or commit is None:
            raise HubError(
                f"{self.endpoint} did not say how large {file} is or which commit holds it: "
                "check that HF_ENDPOINT is a Hugging Face Hub"
            )
        return RemoteFile(file, size, sha256, commit, self.endpoint)

    # The cache ---------------------------------------------------------------------------

    def cached(self, file: HubFile) -> Path | None:
        """The file's verified path in the cache, or None; never uses the network.

        A file changed since it was verified is hashed again; a wrong one is removed (the
        next `fetch` fetches it again).
        """
        commit = self._commit_of(file)
        if commit is None:
            return None
        pointer = self._snapshot_path(file, commit)
        blob = self._blob_of(file.repo_id, pointer)
        if blob is None:
            return None
        if self._is_verified(blob, blob.name):
            return pointer
        self._drop_blob(file.repo_id, blob)
        return None

    def fetch(
        self, file: HubFile, progress: DownloadProgress, confirm: Confirm | None = None
    ) -> Path:
        """The file's path in the cache, downloaded first unless it is there already.

        The download is checked against the free space before it starts, resumes a partial
        file left by a cut or a Ctrl-C (KeyboardInterrupt goes through, the partial file
        stays), and is hashed before it is linked where the model is looked for: a wrong
        sha256 is fetched once more, then refused. `confirm` is asked first, only when
        bytes are to be downloaded.
        """
        found = self.cached(file)
        if found is not None:
            return found
        if self.offline:
            raise HubError(
                f"{file} is not in the cache ({self.cache_dir}) and HF_HUB_OFFLINE=1 forbids "
                f"fetching it: unset HF_HUB_OFFLINE to fetch it once; {_OTHER_MODELS}"
            )
        remote = self.describe(file)
        blob = self._repo_dir(file.repo_id) / "blobs" / remote.sha256
        with self._locked(remote):
            if not (blob.is_file() and self._is_verified(blob, remote.sha256)):
                try:
                    self._download(remote, blob, progress, confirm)
                except HubError:
                    _remove_empty_dirs(self._repo_dir(file.repo_id))
                    raise
            return self._link(remote, blob)

    def models(self) -> list[CachedModel]:
        """The GGUF files in the cache, by spec; no hashing, no network."""
        try:
            scan = scan_cache_dir(self.cache_dir)
        except CacheNotFound:
            return []
        found = []
        for repo in scan.repos:
            if repo.repo_type != "model":
                continue
            for revision in repo.revisions:
                name = _revision_name(revision.refs, revision.commit_hash)
                for cached in revision.files:
                    filename = cached.file_path.relative_to(revision.snapshot_path).as_posix()
                    try:
                        model = HubFile(repo.repo_id, filename, name)
                    except ValueError:  # not a .gguf file
                        continue
                    found.append(
                        CachedModel(
                            model, revision.commit_hash, cached.size_on_disk, cached.file_path
                        )
                    )
        return sorted(found, key=lambda model: str(model.file))

    def remove(self, file: HubFile) -> int:
        """Remove the file `models()` lists under this spec; the bytes freed (0 when another
        revision still holds the same content). Other files and repositories stay."""
        commit = self._commit_of(file)
        pointer = None if commit is None else self._snapshot_path(file, commit)
        if pointer is None or not os.path.lexists(pointer):
            raise HubError(
                f"{file} is not in the cache ({self.cache_dir}): logos models list shows "
                "the models there"
            )
        blob = self._blob_of(file.repo_id, pointer)
        repo_dir = self._repo_dir(file.repo_id)
        # A snapshot's file that is no link holds the content itself (a cache made where
        # links cannot be).
        freed = 0 if pointer.is_symlink() else _size_of(pointer)
        _unlink_snapshot_file(repo_dir, pointer)
        if blob is not None and not _links_to(repo_dir, blob):
            freed = self._drop_blob(file.repo_id, blob)
        _remove_empty_dirs(repo_dir)
        return freed

    # Where things are ---------------------------------------------------------------------

    def _repo_dir(self, repo_id: str) -> Path:
        return self.cache_dir / repo_folder_name(repo_id=repo_id, repo_type="model")

    def _snapshot_path(self, file: HubFile, commit: str) -> Path:
        return self._repo_dir(file.repo_id) / "snapshots" / commit / file.filename

    def _commit_of(self, file: HubFile) -> str | None:
        """The commit the cache knows `file.revision` by: the revision itself when it is a
        commit, else what `refs/` recorded."""
        revision = file.revision or _MAIN
        if REGEX_COMMIT_HASH.fullmatch(revision):
            return revision
        try:
            commit = (self._repo_dir(file.repo_id) / "refs" / revision).read_text().strip()
        except OSError:
            return None
        return commit if REGEX_COMMIT_HASH.fullmatch(commit) else None

    def _blob_of(self, repo_id: str, pointer: Path) -> Path | None:
        """The blob a snapshot's file links to, when it is one of this repository's blobs
        named by its sha256 (the only kind logos can verify without the network)."""
        if not pointer.is_symlink():
            return None
        blob = Path(os.path.abspath(pointer.parent / os.readlink(pointer)))
        blobs = Path(os.path.abspath(self._repo_dir(repo_id) / "blobs"))
        if blob.parent != blobs or not REGEX_SHA256.fullmatch(blob.name) or not blob.is_file():
            return None
        return blob

    # Downloading --------------------------------------------------------------------------

    @contextmanager
    def _locked(self, remote: RemoteFile) -> Iterator[None]:
        """The lock huggingface_hub takes for the same blob: one download of it at a time,
        whichever program downloads it."""
        repo_folder = repo_folder_name(repo_id=remote.file.repo_id, repo_type="model")
        lock_path = self.cache_dir / ".locks" / repo_folder / f"{remote.sha256}.lock"
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._unwritable(exc) from None
        with WeakFileLock(lock_path):
            yield

    def _download(
        self, remote: RemoteFile, blob: Path, progress: DownloadProgress, confirm: Confirm | None
    ) -> None:
        partial = blob.with_name(blob.name + ".incomplete")
        already = _size_of(partial)
        if already > remote.size:
            partial.unlink()
            already = 0
        self._check_space(remote, already)
        if confirm is not None and not confirm(remote):
            raise HubError(
                f"not downloading {remote.file} ({megabytes(remote.size)}): pass --yes to "
                f"download it without asking; {_OTHER_MODELS}"
            )
        for attempt in range(2):
            self._transfer(remote, partial, progress)
            digest = _sha256_of(partial)
            if digest == remote.sha256:
                break
            partial.unlink()
            if attempt:
                raise HubError(
                    f"{remote.file} arrived twice with the wrong sha256: the Hub says "
                    f"{remote.sha256}, the download gave {digest}; nothing was kept. Something "
                    f"between here and {remote.endpoint} changes the file (a proxy?): try "
                    f"again later or from another network; {_OTHER_MODELS}"
                )
        if not _starts_like_gguf(partial):
            partial.unlink()
            raise HubError(
                f"{remote.file} is not a GGUF file (it does not start with {_GGUF_MAGIC!r}), so "
                "it was removed: name a .gguf file that holds a model"
            )
        os.replace(partial, blob)
        self._remember(blob, remote.sha256)

    def _check_space(self, remote: RemoteFile, already: int) -> None:
        """WHY before the first byte: a disk that fills up in the middle leaves a partial
        file taking the very space the user needs to fix it."""
        needed = remote.size - already
        free = shutil.disk_usage(_existing_ancestor(self.cache_dir)).free
        if needed > free:
            raise HubError(
                f"{remote.file} needs {megabytes(needed)} more in {self.cache_dir}, and "
                f"{megabytes(free)} are free there: free some space (logos models rm SPEC "
                "removes a model), or set HF_HOME to a directory on a disk with room"
            )

    def _transfer(self, remote: RemoteFile, partial: Path, progress: DownloadProgress) -> None:
        try:
            partial.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._unwritable(exc) from None
        bar = _ProgressBar(progress, remote)
        completed = False
        try:
            # WHY append: the bytes a cut download left are kept, and http_get asks the
            # server for the rest (`Range: bytes=N-`).
            with partial.open("ab") as sink:
                http_get(
                    remote.url,
                    sink,
                    resume_size=sink.tell(),
                    headers=self._headers(),
                    expected_size=remote.size,
                    displayed_filename=remote.file.filename,
                    # WHY an instance: http_get makes its bar by calling this with tqdm's
                    # keywords, and a callable that is not a tqdm class is called as it is.
                    tqdm_class=cast(Any, bar),
                )
            completed = True
        except HfHubHTTPError as exc:
            if exc.response.status_code < 500:  # the file is gone, or no longer ours to read
                raise self._refusal(exc, remote.file) from None
            raise self._cut(remote, partial, str(exc).splitlines()[0]) from None
        except httpx2.HTTPError as exc:
            raise self._cut(remote, partial, str(exc) or type(exc).__name__) from None
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise HubError(
                    f"the disk holding {self.cache_dir} is full, {megabytes(_size_of(partial))} "
                    f"into {remote.file}: free some space or set HF_HOME to a disk with room, "
                    "then run the same command again to resume"
                ) from None
            raise self._cut(remote, partial, str(exc).splitlines()[0]) from None
        finally:
            bar.end(completed)

    def _link(self, remote: RemoteFile, blob: Path) -> Path:
        """Name the verified blob where huggingface_hub looks: the snapshot's file (a relative
        link, as huggingface_hub makes them) and, for a branch or a tag, its ref."""
        repo_dir = self._repo_dir(remote.file.repo_id)
        pointer = self._snapshot_path(remote.file, remote.commit)
        try:
            pointer.parent.mkdir(parents=True, exist_ok=True)
            if self._blob_of(remote.file.repo_id, pointer) != blob:
                temporary = pointer.with_name(f".{pointer.name}.{secrets.token_hex(4)}")
                os.symlink(os.path.relpath(blob, pointer.parent), temporary)
                os.replace(temporary, pointer)
            revision = remote.file.revision or _MAIN
            if revision != remote.commit:
                _replace_text(repo_dir / "refs" / revision, remote.commit)
        except OSError as exc:
            raise self._unwritable(exc) from None
        return pointer

    def _headers(self) -> dict[str, str]:
        return build_hf_headers(
            token=self.token, library_name="logos", library_version=logos_version()
        )

    # Verified blobs --------------------------------------------------------------------------

    def _is_verified(self, blob: Path, sha256: str) -> bool:
        """Whether the blob is the GGUF file with this sha256: from the record when the blob
        has not changed since, else by hashing it (then recorded)."""
        try:
            stat = blob.stat()
        except OSError:
            return False
        seen = _Verified(sha256=sha256, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
        if self._read_record().blobs.get(_key(blob)) == seen:
            return True
        if _sha256_of(blob) != sha256 or not _starts_like_gguf(blob):
            return False
        self._remember(blob, sha256)
        return True

    def _remember(self, blob: Path, sha256: str) -> None:
        stat = blob.stat()
        self._update_record(
            _key(blob), _Verified(sha256=sha256, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
        )

    def _drop_blob(self, repo_id: str, blob: Path) -> int:
        """Remove a blob and every snapshot file linking to it; its size."""
        repo_dir = self._repo_dir(repo_id)
        for pointer in _links_to(repo_dir, blob):
            _unlink_snapshot_file(repo_dir, pointer)
        size = _size_of(blob)
        blob.unlink(missing_ok=True)
        self._update_record(_key(blob), None)
        _remove_empty_dirs(repo_dir)
        return size

    def _read_record(self) -> _VerifiedRecord:
        try:
            return _VerifiedRecord.model_validate_json(self.verified_record.read_bytes())
        except (OSError, ValidationError):
            return _VerifiedRecord()  # a lost record only costs hashing again

    def _update_record(self, key: str, entry: _Verified | None) -> None:
        blobs = {
            path: seen
            for path, seen in self._read_record().blobs.items()
            if path != key and os.path.exists(path)
        }
        if entry is not None:
            blobs[key] = entry
        # WHY errors are ignored: the record only spares a later run from hashing again;
        # a read-only home must not stop a model from running.
        with suppress(OSError, RecordFileError):
            replace_private_file(
                self.verified_record, _VerifiedRecord(blobs=blobs).model_dump_json(indent=1)
            )

    # Messages -------------------------------------------------------------------------------

    def _refusal(self, exc: HfHubHTTPError, file: HubFile) -> HubError:
        page = f"{self.endpoint}/{file.repo_id}"
        revision = file.revision or _MAIN
        if isinstance(exc, GatedRepoError):
            return HubError(
                f"{file.repo_id} is gated: accept its conditions at {page}, then set HF_TOKEN "
                "to a token of that account (or run hf auth login)"
            )
        if isinstance(exc, RepositoryNotFoundError):
            return HubError(
                f"there is no repository {file.repo_id} at {self.endpoint} (or it is private and "
                f"no token opens it): check OWNER/REPO in {file}, or set HF_TOKEN"
            )
        if isinstance(exc, RevisionNotFoundError):
            return HubError(
                f"{file.repo_id} has no revision {revision!r}: name a branch, a tag or a commit "
                f"it has, or leave out @REVISION for {_MAIN}"
            )
        if isinstance(exc, RemoteEntryNotFoundError):
            return HubError(
                f"{file.repo_id} has no file {file.filename} at {revision}: its files are "
                f"listed at {page}/tree/{revision}"
            )
        status = exc.response.status_code
        if status in (401, 403):
            return HubError(
                f"{self.endpoint} refused {file} (HTTP {status}): check HF_TOKEN, or unset it "
                "for a public model"
            )
        return HubError(
            f"{self.endpoint} answered HTTP {status} about {file}: try again later; {_OTHER_MODELS}"
        )

    def _unreachable(self, file: HubFile, exc: Exception) -> HubError:
        return HubError(
            f"cannot reach the Hugging Face Hub at {self.endpoint} "
            f"({str(exc) or type(exc).__name__}) to fetch {file}, which is not in the cache "
            "yet: check the network, or set "
            f"HF_ENDPOINT to a mirror you can reach (HF_HUB_OFFLINE=1 uses the cache only); "
            f"{_OTHER_MODELS}"
        )

    def _cut(self, remote: RemoteFile, partial: Path, cause: str) -> HubError:
        return HubError(
            f"the download of {remote.file} stopped at {megabytes(_size_of(partial))} of "
            f"{megabytes(remote.size)} ({cause}): run the same command again to resume it "
            "from there"
        )

    def _unwritable(self, exc: OSError) -> HubError:
        return HubError(
            f"cannot write to the model cache {self.cache_dir} ({exc.strerror or exc}): make it "
            "writable, or set HF_HOME to a directory you can write"
        )


class _ProgressBar:
    """What `http_get` takes for its progress bar, passing on to a `DownloadProgress`.

    http_get calls it with tqdm's keywords (`initial` is where the download resumes),
    enters it, calls `update(n)` for each piece written, and leaves it.
    """

    def __init__(self, progress: DownloadProgress, remote: RemoteFile) -> None:
        self._progress = progress
        self._remote = remote
        self._started = False

    def __call__(self, *, initial: int = 0, **_: object) -> _ProgressBar:
        self._started = True
        self._progress.start(self._remote, initial)
        return self

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def update(self, n: float | None = 1) -> None:
        self._progress.advance(int(n or 0))

    def end(self, completed: bool) -> None:
        if self._started:
            self._progress.end(completed)


def _revision_name(refs: frozenset[str], commit: str) -> str | None:
    if _MAIN in refs:
        return None
    return min(refs) if refs else commit


def _key(blob: Path) -> str:
    return os.path.abspath(blob)


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _starts_like_gguf(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(_GGUF_MAGIC)) == _GGUF_MAGIC


def _existing_ancestor(path: Path) -> Path:
    """The directory itself, or the nearest parent that exists (the cache may not yet)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _links_to(repo_dir: Path, blob: Path) -> list[Path]:
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return []
    return [
        link
        for link in snapshots.rglob("*")
        if link.is_symlink()
        and Path(os.path.abspath(link.parent / os.readlink(link))) == Path(os.path.abspath(blob))
    ]


def _unlink_snapshot_file(repo_dir: Path, pointer: Path) -> None:
    """Remove a snapshot's file; a snapshot left empty goes too, with the refs naming it
    (huggingface_hub's cache scan calls a ref to a missing snapshot corrupt)."""
    pointer.unlink(missing_ok=True)
    snapshots = repo_dir / "snapshots"
    directory = pointer.parent
    while directory != snapshots and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent
    refs = repo_dir / "refs"
    if not refs.is_dir():
        return
    for ref in [path for path in refs.rglob("*") if path.is_file()]:
        with suppress(OSError):
            if not (snapshots / ref.read_text().strip()).is_dir():
                ref.unlink()


def _remove_empty_dirs(repo_dir: Path) -> None:
    """Remove the repository's empty folders, deepest first, and the repository's own when
    nothing is left: a failed download leaves nothing behind but the lock."""
    if not repo_dir.is_dir():
        return
    for directory in sorted(
        (path for path in repo_dir.rglob("*") if path.is_dir() and not path.is_symlink()),
        key=lambda path: len(path.parts),
        reverse=True,
    ):
        with suppress(OSError):
            directory.rmdir()
    with suppress(OSError):
        repo_dir.rmdir()


def _replace_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    temporary.write_text(text)
    os.replace(temporary, path)
