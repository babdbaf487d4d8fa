"""GGUF models from the Hugging Face Hub (`logos.models.hf_hub`), fetched through the real
huggingface_hub from a real HTTP server that answers as the Hub does
(tests/support/hub_server.py): no test reaches the real Hub."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from logos.cli.download_progress import PlainDownloadProgress
from logos.models.hf_hub import Hub
from logos.models.hub_file import DEFAULT_MODEL, HubError, HubFile, RemoteFile
from tests.support.hub_server import HubServer, ServedFile, gguf_bytes
from tests.support.parts import require

pytestmark = pytest.mark.timeout(60)

REPO = "tiny/tiny-GGUF"
SIZE = 24_000_000
PIECE = 10 * 1024 * 1024
"""huggingface_hub writes a download in pieces of 10 MiB: a cut keeps whole pieces only."""
CUT = 12_000_000


@pytest.fixture
def hub(tmp_path: Path, hub_server: HubServer) -> Hub:
    return Hub(
        endpoint=hub_server.endpoint,
        cache_dir=tmp_path / "hf" / "hub",
        offline=False,
        verified_record=tmp_path / "cache" / "logos" / "verified-models.json",
    )


@pytest.fixture
def served(hub_server: HubServer) -> ServedFile:
    return hub_server.add(REPO, "tiny-q4_k_m.gguf", gguf_bytes(SIZE))


def file_of(served: ServedFile, revision: str | None = None) -> HubFile:
    return HubFile(served.repo_id, served.filename, revision)


class Recorder:
    """A DownloadProgress that writes what it hears, through the plain reporter."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.plain = PlainDownloadProgress(self.stream)
        self.advanced = 0

    def start(self, remote: RemoteFile, already: int) -> None:
        self.plain.start(remote, already)

    def advance(self, nbytes: int) -> None:
        self.advanced += nbytes
        self.plain.advance(nbytes)

    def end(self, completed: bool) -> None:
        self.plain.end(completed)

    @property
    def lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()


def files_in(directory: Path) -> list[Path]:
    """Every file and link under `directory` but huggingface_hub's lock files."""
    return sorted(
        path
        for path in directory.rglob("*")
        if ".locks" not in path.parts and (path.is_file() or path.is_symlink())
    )


# Names -------------------------------------------------------------------------------------


def test_a_spec_reads_back_as_written() -> None:
    plain = HubFile.parse("hf:Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/q4/model.gguf")
    assert plain == HubFile("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q4/model.gguf")
    pinned = HubFile.parse("hf:owner/repo/model.gguf@refs/pr/1")
    assert pinned.revision == "refs/pr/1"
    for spec in (str(DEFAULT_MODEL), str(plain), str(pinned)):
        assert str(HubFile.parse(spec)) == spec


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("Qwen/repo/model.gguf", "does not name a model on the Hub"),
        ("hf:repo/model.gguf", "needs an owner, a repository and a file"),
        ("hf:owner/repo/model.safetensors", "is not a .gguf file"),
        ("hf:owner/repo/../model.gguf", "is not the path of a file"),
        ("hf:owner/re po/model.gguf", "is not a repository name"),
        ("hf:owner/repo/model.gguf@", "is not a revision"),
    ],
)
def test_a_bad_spec_shows_the_form_with_an_example(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape("hf:OWNER/REPO/FILE.gguf")) as raised:
        HubFile.parse(spec)
    assert says in str(raised.value)
    assert str(DEFAULT_MODEL) in str(raised.value)


# Fetching ----------------------------------------------------------------------------------


def test_the_first_fetch_downloads_and_verifies_and_the_next_needs_no_network(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    progress = Recorder()
    path = hub.fetch(file_of(served), progress)

    assert path.read_bytes() == served.content
    assert path == hub.cache_dir / "models--tiny--tiny-GGUF" / "snapshots" / served.commit / (
        served.filename
    )
    assert path.is_symlink() and path.resolve().name == served.sha256
    assert (path.parents[2] / "refs" / "main").read_text() == served.commit
    start, end = progress.lines
    assert start == (f"logos: downloading {served.spec} (24.0 MB) from {hub_server.endpoint}"), (
        progress.lines
    )
    assert end.startswith(f"logos: downloaded {served.spec} (24.0 MB) in ")
    assert end.endswith(" MB/s)")
    assert progress.advanced == SIZE
    assert [(r.method, r.range) for r in hub_server.file_requests()] == [
        ("HEAD", None),
        ("GET", None),
    ]
    assert hub.verified_record.stat().st_mode & 0o777 == 0o600

    offline = dataclasses.replace(hub, offline=True)
    before = len(hub_server.requests)
    again = Recorder()
    assert offline.fetch(file_of(served), again) == path
    assert offline.cached(file_of(served)) == path
    assert len(hub_server.requests) == before
    assert again.lines == []


def test_a_verified_file_is_not_hashed_again_until_it_changes(hub: Hub, served: ServedFile) -> None:
    path = hub.fetch(file_of(served), Recorder())
    blob = path.resolve()
    recorded = blob.stat()
    damaged = bytearray(served.content)
    damaged[SIZE // 2] ^= 0xFF
    blob.write_bytes(bytes(damaged))
    # The same size and time as recorded: taken on the record's word, not hashed.
    os.utime(blob, ns=(recorded.st_atime_ns, recorded.st_mtime_ns))
    assert hub.cached(file_of(served)) == path
    # Touched since: hashed again, found wrong, removed, and fetched again.
    os.utime(blob, ns=(recorded.st_atime_ns, recorded.st_mtime_ns + 1_000_000_000))
    assert hub.cached(file_of(served)) is None
    assert not os.path.lexists(path) and not blob.exists()
    assert hub.fetch(file_of(served), Recorder()).read_bytes() == served.content


def test_a_cut_connection_resumes_with_a_range_request(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    hub_server.faults.cut_after = CUT
    path = hub.fetch(file_of(served), Recorder())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == served.sha256
    assert [r.range for r in hub_server.file_requests("GET")] == [None, f"bytes={PIECE}-"]


def test_a_download_cut_for_good_resumes_in_the_next_run(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    hub_server.faults.cut_after = CUT
    hub_server.faults.status_after_cut = 503
    with pytest.raises(HubError) as raised:
        hub.fetch(file_of(served), Recorder())
    assert raised.value.message.startswith(
        f"the download of {served.spec} stopped at 10.5 MB of 24.0 MB"
    )
    assert "run the same command again to resume" in raised.value.message
    assert hub.cached(file_of(served)) is None
    blobs = hub.cache_dir / "models--tiny--tiny-GGUF" / "blobs"
    assert [p.name for p in files_in(hub.cache_dir)] == [f"{served.sha256}.incomplete"]
    assert (blobs / f"{served.sha256}.incomplete").stat().st_size == PIECE

    hub_server.faults.status_after_cut = None
    progress = Recorder()
    path = hub.fetch(file_of(served), progress)
    assert path.read_bytes() == served.content
    assert hub_server.file_requests("GET")[-1].range == f"bytes={PIECE}-"
    assert progress.lines[0].endswith(", resuming at 10.5 MB")
    assert progress.advanced == SIZE - PIECE


def test_a_corrupted_download_is_fetched_again(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    hub_server.faults.corrupt = "once"
    progress = Recorder()
    path = hub.fetch(file_of(served), progress)
    assert path.read_bytes() == served.content
    assert [r.range for r in hub_server.file_requests("GET")] == [None, None]
    assert len(progress.lines) == 4  # two downloads, each started and ended


def test_a_file_corrupted_every_time_is_refused_and_nothing_is_kept(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    hub_server.faults.corrupt = "always"
    with pytest.raises(HubError) as raised:
        hub.fetch(file_of(served), Recorder())
    damaged = bytearray(served.content)
    damaged[SIZE // 2] ^= 0xFF
    wrong = hashlib.sha256(damaged).hexdigest()
    assert f"the Hub says {served.sha256}, the download gave {wrong}" in raised.value.message
    assert len(hub_server.file_requests("GET")) == 2
    assert files_in(hub.cache_dir) == []
    assert not (hub.cache_dir / "models--tiny--tiny-GGUF").exists()


def test_a_file_that_is_not_gguf_is_removed(hub: Hub, hub_server: HubServer) -> None:
    served = hub_server.add(REPO, "notes.gguf", b"<html>not a model</html>" * 1000)
    with pytest.raises(HubError, match=r"is not a GGUF file .* so it was removed"):
        hub.fetch(file_of(served), Recorder())
    assert files_in(hub.cache_dir) == []


@pytest.mark.parametrize(
    ("repo_id", "filename", "revision", "says"),
    [
        ("nobody/nothing", "x.gguf", None, "there is no repository nobody/nothing at "),
        (REPO, "missing.gguf", None, f"{REPO} has no file missing.gguf at main: its files"),
        (REPO, "tiny-q4_k_m.gguf", "v9", f"{REPO} has no revision 'v9': name a branch"),
        ("gated/model-GGUF", "m.gguf", None, "gated/model-GGUF is gated: accept its conditions"),
    ],
)
def test_what_the_hub_does_not_have_is_named(
    hub: Hub,
    hub_server: HubServer,
    served: ServedFile,
    repo_id: str,
    filename: str,
    revision: str | None,
    says: str,
) -> None:
    hub_server.add("gated/model-GGUF", "m.gguf", gguf_bytes(1000))
    hub_server.gated.add("gated/model-GGUF")
    with pytest.raises(HubError) as raised:
        hub.fetch(HubFile(repo_id, filename, revision), Recorder())
    assert raised.value.message.startswith(says), raised.value.message
    assert hub_server.file_requests("GET") == []
    assert files_in(hub.cache_dir) == []


def test_offline_with_nothing_cached_says_what_else_to_run(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    offline = dataclasses.replace(hub, offline=True)
    with pytest.raises(HubError) as raised:
        offline.fetch(file_of(served), Recorder())
    message = raised.value.message
    assert message.startswith(f"{served.spec} is not in the cache ({hub.cache_dir})")
    for named in ("HF_HUB_OFFLINE", "--gguf PATH", "--base-url URL", "ANTHROPIC_API_KEY"):
        assert named in message
    assert hub_server.requests == []


def test_an_unreachable_hub_says_what_else_to_run(hub: Hub, served: ServedFile) -> None:
    nowhere = dataclasses.replace(hub, endpoint="http://127.0.0.1:9")
    with pytest.raises(HubError) as raised:
        nowhere.fetch(file_of(served), Recorder())
    message = raised.value.message
    assert message.startswith("cannot reach the Hugging Face Hub at http://127.0.0.1:9 (")
    for named in ("HF_ENDPOINT", "HF_HUB_OFFLINE=1", "--gguf PATH", "OPENAI_API_KEY"):
        assert named in message


def test_a_declined_download_sends_no_get_and_a_cached_file_asks_nothing(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    asked: list[RemoteFile] = []

    def decline(remote: RemoteFile) -> bool:
        asked.append(remote)
        return False

    with pytest.raises(HubError, match=r"^not downloading .* \(24\.0 MB\): pass --yes"):
        hub.fetch(file_of(served), Recorder(), confirm=decline)
    assert [(r.size, r.sha256, r.commit) for r in asked] == [(SIZE, served.sha256, served.commit)]
    assert hub_server.file_requests("GET") == []
    path = hub.fetch(file_of(served), Recorder(), confirm=lambda remote: True)
    assert hub.fetch(file_of(served), Recorder(), confirm=decline) == path
    assert len(asked) == 1


def test_not_enough_disk_is_refused_before_any_download(
    hub: Hub, hub_server: HubServer, served: ServedFile, tmp_path: Path
) -> None:
    require(os.geteuid() == 0, "mounting a small tmpfs needs root")
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True
    )
    require(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        tight = dataclasses.replace(hub, cache_dir=small / "hub")
        with pytest.raises(HubError) as raised:
            tight.fetch(file_of(served), Recorder())
        message = raised.value.message
        assert message.startswith(f"{served.spec} needs 24.0 MB more in {small / 'hub'}, and ")
        assert "MB are free there" in message and "HF_HOME" in message
        assert [r.method for r in hub_server.file_requests()] == ["HEAD"]
        assert files_in(small) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_the_blob_goes_to_the_cdn_without_the_token(tmp_path: Path, hub: Hub) -> None:
    with HubServer(redirect=True) as cdn_server:
        served = cdn_server.add(REPO, "tiny.gguf", gguf_bytes(SIZE))
        hub = dataclasses.replace(hub, endpoint=cdn_server.endpoint, token="hf_test_token")
        assert hub.fetch(file_of(served), Recorder()).read_bytes() == served.content
        requests = cdn_server.file_requests()
    assert [(r.method, r.path.split("/")[1], r.authorized) for r in requests] == [
        ("HEAD", "tiny", True),
        ("GET", "tiny", True),
        ("GET", "blobs", False),
    ]


# The cache ---------------------------------------------------------------------------------


def test_models_are_listed_and_removed_one_by_one(
    hub: Hub, hub_server: HubServer, served: ServedFile
) -> None:
    other = hub_server.add(REPO, "tiny-q8_0.gguf", gguf_bytes(SIZE + 1), commit=served.commit)
    elsewhere = hub_server.add("someone/else-GGUF", "else.gguf", gguf_bytes(1000))
    tagged = hub_server.add(REPO, "tiny-q4_k_m.gguf", served.content, refs=("v1",))
    for file in (file_of(served), file_of(other), file_of(elsewhere), file_of(tagged, "v1")):
        hub.fetch(file, Recorder())

    listed = [(str(m.file), m.commit, m.size) for m in hub.models()]
    assert listed == [
        ("hf:someone/else-GGUF/else.gguf", elsewhere.commit, 1000),
        (served.spec, served.commit, SIZE),
        (f"{served.spec}@v1", tagged.commit, SIZE),
        (f"{other.spec}", served.commit, SIZE + 1),
    ]
    assert all(m.path.read_bytes()[:4] == b"GGUF" for m in hub.models())

    # The same content is still held by v1: nothing freed yet.
    assert hub.remove(file_of(served)) == 0
    assert hub.remove(file_of(tagged, "v1")) == SIZE
    assert hub.remove(file_of(other)) == SIZE + 1
    assert [str(m.file) for m in hub.models()] == ["hf:someone/else-GGUF/else.gguf"]
    assert not (hub.cache_dir / "models--tiny--tiny-GGUF").exists()
    with pytest.raises(HubError, match=r"is not in the cache .*: logos models list shows"):
        hub.remove(file_of(other))
    assert hub.cached(file_of(elsewhere)) is not None
