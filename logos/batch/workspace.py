"""A task's fresh workspace: its directory copied, or its repository cloned, for one run.

Every run of a task starts from the same files, whatever an earlier run did to them. A copy
keeps symbolic links as links (never the files they point to): a link to `~/.ssh` in a task's
directory must not bring the keys into a workspace a sandbox can read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio

from logos.batch.tasks import CopyWorkspace, GitWorkspace
from logos.errors import MessageError
from logos.options import NONINTERACTIVE_ENV

_GIT_TIMEOUT_S = 600.0
"""A clone of a large repository over a slow link; a hung one must still end."""
_GIT_ERROR_CHARS = 2000


class WorkspaceError(MessageError):
    """The workspace could not be made; the message says why and what to do."""


async def make_workspace(source: CopyWorkspace | GitWorkspace, directory: Path) -> None:
    """Fill the new directory `directory` (removed first if an earlier run left it)."""
    await anyio.to_thread.run_sync(remove_workspace, directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, CopyWorkspace):
        await anyio.to_thread.run_sync(_copy, Path(source.directory), directory)
    else:
        await _clone(source, directory)


def remove_workspace(directory: Path) -> None:
    """Delete a workspace, including files a command made read-only."""
    if directory.is_symlink() or directory.is_file():
        directory.unlink()
    elif directory.exists():
        shutil.rmtree(directory, onerror=_make_writable_and_retry)


def _copy(source: Path, directory: Path) -> None:
    if not source.is_dir():
        raise WorkspaceError(
            f"the workspace to copy, {source}, is not a directory: fix the task's "
            '"workspace": {"copy": DIR}'
        )
    try:
        shutil.copytree(source, directory, symlinks=True)
    except (OSError, shutil.Error) as exc:
        raise WorkspaceError(f"cannot copy {source} to {directory}: {exc}") from None


async def _clone(source: GitWorkspace, directory: Path) -> None:
    await _git("clone", "--quiet", "--", source.git, str(directory))
    if source.rev is not None:
        await _git("-C", str(directory), "checkout", "--quiet", "--detach", source.rev)


async def _git(*arguments: str) -> None:
    # WHY the non-interactive environment: a clone that asks for a password must fail, not
    # wait for an answer nobody will type.
    env = {**os.environ, **NONINTERACTIVE_ENV}
    try:
        with anyio.fail_after(_GIT_TIMEOUT_S):
            done = await anyio.run_process(["git", *arguments], env=env, check=False)
    except FileNotFoundError:
        raise WorkspaceError("git is not installed: install it to clone workspaces") from None
    except TimeoutError:
        raise WorkspaceError(
            f"git {arguments[0]} took more than {_GIT_TIMEOUT_S:g} s: check the repository's "
            "address and the network"
        ) from None
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()[-_GIT_ERROR_CHARS:]
        raise WorkspaceError(
            f"git {' '.join(arguments)} failed (exit {done.returncode}): {stderr or 'no output'}"
        )


def _make_writable_and_retry(function: object, path: str, exc_info: object) -> None:
    parent = os.path.dirname(path)
    os.chmod(parent, 0o700)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
    if callable(function):
        function(path)
