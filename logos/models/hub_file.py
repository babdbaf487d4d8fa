"""How a GGUF model on the Hugging Face Hub is named (`hf:OWNER/REPO/FILE.gguf[@REVISION]`)
and described, apart from `logos.models.hf_hub`, which fetches it.

WHY apart: every `logos` start reads these names (the default model, `--model hf:...`), and
only a download or a cache listing needs huggingface_hub's client, which costs a start a
tenth of a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from logos.errors import MessageError

_SCHEME = "hf:"
_FORM = "hf:OWNER/REPO/FILE.gguf or hf:OWNER/REPO/FILE.gguf@REVISION"


class HubError(MessageError):
    """A model could not be found, fetched or verified; the message says why and what to do."""


def _problem_with(repo_id: str, filename: str, revision: str | None) -> str | None:
    if repo_id.count("/") != 1:
        return f"{repo_id!r} is not OWNER/REPO"
    if not _is_relative_path(filename):
        return f"{filename!r} is not the path of a file in the repository"
    if not filename.lower().endswith(".gguf"):
        return f"{filename!r} is not a .gguf file; logos runs GGUF models"
    if revision is not None and not _is_relative_path(revision):
        return f"{revision!r} is not a revision (a branch, a tag or a commit)"
    return None


def _name_problem(repo_id: str) -> str | None:
    """The Hub's own rule for a repository's name, checked where a person wrote it.

    WHY not in `HubFile.__post_init__`: huggingface_hub's check loads its HTTP stack, a
    twentieth of a second that every `logos` start would pay for the names logos itself
    writes (the default model); a name a person writes comes through `HubFile.parse`."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return f"{repo_id!r} is not a repository name (letters, digits, -, _ and .)"
    return None


def _not_a_model(problem: str) -> ValueError:
    return ValueError(f"{problem}: a model on the Hub is written {_FORM}, e.g. {DEFAULT_MODEL}")


def _is_relative_path(text: str) -> bool:
    return "\\" not in text and all(part not in ("", ".", "..") for part in text.split("/"))


@dataclass(frozen=True)
class HubFile:
    """One GGUF file of a model repository on the Hub; `revision` None is `main`.

    `HubFile.parse("hf:OWNER/REPO/FILE.gguf@REVISION")` reads the written form, which
    `str()` gives back. FILE may sit in folders of the repository (`hf:o/r/q4/m.gguf`).
    """

    repo_id: str
    filename: str
    revision: str | None = None

    def __post_init__(self) -> None:
        problem = _problem_with(self.repo_id, self.filename, self.revision)
        if problem is not None:
            raise _not_a_model(problem)

    @classmethod
    def parse(cls, spec: str) -> HubFile:
        """The file `spec` names; ValueError (showing the form, with an example) if none."""
        if not spec.startswith(_SCHEME):
            raise ValueError(
                f"{spec!r} does not name a model on the Hub: write {_FORM}, e.g. {DEFAULT_MODEL}"
            )
        path, at, revision = spec[len(_SCHEME) :].rpartition("@")
        if not at:
            path, revision = revision, ""
        pieces = path.split("/", 2)
        if len(pieces) < 3:
            raise ValueError(
                f"{spec!r} needs an owner, a repository and a file: write {_FORM}, "
                f"e.g. {DEFAULT_MODEL}"
            )
        owner, repo, filename = pieces
        problem = _name_problem(f"{owner}/{repo}")
        if problem:
            raise _not_a_model(problem)
        return cls(f"{owner}/{repo}", filename, revision if at else None)

    def __str__(self) -> str:
        at = f"@{self.revision}" if self.revision is not None else ""
        return f"{_SCHEME}{self.repo_id}/{self.filename}{at}"


DEFAULT_MODEL = HubFile(
    "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
)
"""The smallest model logos runs when it is given no other, small enough to fetch and run
anywhere: the default where no larger one runs fast enough (`logos.models.fitting`)."""


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub says of a file: its size, its sha256 (the Git LFS object id) and the
    commit its revision names now, at `endpoint`."""

    file: HubFile
    size: int
    sha256: str
    commit: str
    endpoint: str

    @property
    def url(self) -> str:
        """The file at that very commit, so a branch that moves meanwhile cannot mix two
        versions into one download."""
        from huggingface_hub import hf_hub_url

        return hf_hub_url(
            self.file.repo_id, self.file.filename, revision=self.commit, endpoint=self.endpoint
        )


@dataclass(frozen=True)
class CachedModel:
    """A GGUF file in the cache. `file.revision` is how the cache names its commit: None for
    `main`, else another branch or tag, else the commit itself."""

    file: HubFile
    commit: str
    size: int
    path: Path


class DownloadProgress(Protocol):
    """How `Hub.fetch` reports a download, once per attempt: `start` when the Hub starts
    sending, `advance` for each piece written, then `end`, whether it completed or not."""

    def start(self, remote: RemoteFile, already: int) -> None:
        """`already`: bytes an earlier, cut download had fetched; the download resumes there."""

    def advance(self, nbytes: int) -> None:
        """Negative when the server ignored a Range request and the file starts over."""

    def end(self, completed: bool) -> None: ...


Confirm = Callable[[RemoteFile], bool]
"""Asked before a download starts (never for a cached file): True to go ahead."""


def megabytes(size: int) -> str:
    """A size as people read it, in decimal megabytes as the Hub shows them."""
    return f"{size / 1e6:.1f} MB"
