"""Building the sandbox image (`sandboxd build-image`).

Synchronous on purpose: its one caller is a CLI command that streams the build's output to
the terminal, and docker-py's build stream is blocking anyway.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors

from sandboxd.backend import BackendError
from sandboxd.docker.engine import Engine, api_error_text

_DEFAULT_TAG = "logos-sandbox:latest"
_OFFLINE_HINT = (
    "if no registry is reachable, build from a local Debian image with --base IMAGE "
    "(scripts/setup-docker makes one with debootstrap)"
)


class ImageBuildError(BackendError):
    """The sandbox image could not be built; the message has the builder's error."""

    code = "image_build_failed"


def dockerfile_path() -> Path:
    """The sandbox Dockerfile: shipped inside the package, else the source checkout's."""
    here = Path(__file__).resolve().parent.parent  # the sandboxd package
    for candidate in (here / "Dockerfile", here.parent / "Dockerfile"):
        if candidate.is_file():
            return candidate
    raise ImageBuildError(
        f"the sandbox Dockerfile is missing (looked in {here} and {here.parent}): "
        "reinstall logos, or build from a source checkout with `docker build -t "
        f"{_DEFAULT_TAG} .`"
    )


def build_image(
    *,
    tag: str = _DEFAULT_TAG,
    base: str | None = None,
    dockerfile: Path | None = None,
    docker_base_url: str | None = None,
    on_output: Callable[[str], None] = lambda text: None,
) -> str:
    """Build the sandbox image, streaming the builder's output to `on_output`; returns its id.

    `base` is the Dockerfile's BASE build argument (default debian:bookworm-slim). Raises
    ImageBuildError, or EngineUnavailableError when the engine cannot be reached.
    """
    source = dockerfile or dockerfile_path()
    context = _context_with(source.read_bytes())
    engine = Engine(docker_base_url, max_workers=1)
    try:
        return engine.call_blocking(lambda api: _build(api, context, tag, base, on_output))
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"building {tag} failed: {api_error_text(exc)}") from exc
    finally:
        engine.close()


def _build(
    api: Any, context: io.BytesIO, tag: str, base: str | None, on_output: Callable[[str], None]
) -> str:
    image_id: str | None = None
    for chunk in api.build(
        fileobj=context,
        custom_context=True,
        tag=tag,
        buildargs={"BASE": base} if base else None,
        rm=True,
        forcerm=True,
        decode=True,
    ):
        if "error" in chunk:
            error = str(chunk["error"]).strip()
            raise ImageBuildError(f"building {tag} failed: {error}; {_OFFLINE_HINT}")
        if "stream" in chunk:
            on_output(str(chunk["stream"]))
        elif "status" in chunk:
            on_output(f"{chunk['status']} {chunk.get('progress', '')}".rstrip() + "\n")
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = str(aux["ID"])
    return image_id or str(api.inspect_image(tag)["Id"])


def _context_with(dockerfile: bytes) -> io.BytesIO:
    """A build context holding just the Dockerfile: the image needs no other file."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(dockerfile))
    buffer.seek(0)
    return buffer
