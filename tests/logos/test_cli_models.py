"""`logos models` through the real command, against a real HTTP server that answers as the
Hugging Face Hub does (tests/support/hub_server.py); and how a download shows and is asked
for on a terminal."""

from __future__ import annotations

import io
import json
import re
import signal
from pathlib import Path

import pytest
from rich.console import Console

from logos.cli.download_progress import (
    PlainDownloadProgress,
    TerminalDownloadProgress,
    ask_to_download,
    download_progress,
)
from logos.models.fitting import LOCAL_MODELS, Machine, default_for_this_machine
from logos.models.hub_file import HubFile, RemoteFile, megabytes
from tests.support.cli_harness import Home, logos, running_logos
from tests.support.hub_server import HubServer, gguf_bytes, hub_env
from tests.support.processes import interrupt, wait_for

pytestmark = pytest.mark.timeout(60)

DEFAULT_MODEL = default_for_this_machine().option.file
"""The default model here: the 0.5B on a 2-core machine, the 1.5B on a larger one."""
REPO = "tiny/tiny-GGUF"
SIZE = 24_000_000
PIECE = 10 * 1024 * 1024
"""huggingface_hub writes a download in pieces of 10 MiB: an interruption keeps whole pieces."""


def test_pull_list_and_rm(home: Home, hub_server: HubServer) -> None:
    served = hub_server.add(REPO, "tiny-q4_k_m.gguf", gguf_bytes(SIZE))
    env = hub_env(home, hub_server)

    pulled = logos(["models", "pull", served.spec], home, env)
    assert pulled.returncode == 0, pulled.stderr
    path = Path(pulled.stdout.strip())
    assert path.read_bytes() == served.content
    assert path.is_relative_to(home.root / "hf" / "hub")
    started, ended = pulled.stderr.splitlines()
    assert started == f"logos: downloading {served.spec} (24.0 MB) from {hub_server.endpoint}"
    assert re.fullmatch(
        rf"logos: downloaded {re.escape(served.spec)} \(24\.0 MB\) in \d+\.\d s "
        r"\(\d+\.\d MB/s\)",
        ended,
    ), ended

    listed = logos(["models"], home, env)
    assert listed.stdout.startswith(f"{served.spec}\t24.0 MB\t{path}\n\n")
    assert logos(["models", "list"], home, env).stdout == listed.stdout
    for arguments in (["models", "--json"], ["models", "list", "--json"]):
        (entry,) = json.loads(logos(arguments, home, env).stdout)
        assert entry == {
            "spec": served.spec,
            "repo_id": REPO,
            "filename": "tiny-q4_k_m.gguf",
            "revision": None,
            "commit": served.commit,
            "size": SIZE,
            "path": str(path),
            "default": False,
        }

    before = len(hub_server.requests)
    offline = logos(
        ["models", "pull", served.spec], home, hub_env(home, hub_server, HF_HUB_OFFLINE="1")
    )
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout == pulled.stdout
    assert offline.stderr == f"logos: {served.spec} is in the cache already\n"
    assert len(hub_server.requests) == before

    removed = logos(["models", "rm", served.spec], home, env)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == f"removed {served.spec}: 24.0 MB freed\n"
    assert not path.exists()
    again = logos(["models", "rm", served.spec], home, env)
    assert again.returncode == 2
    assert again.stderr == (
        f"logos: {served.spec} is not in the cache ({home.root / 'hf' / 'hub'}): "
        "logos models list shows the models there\n"
    )
    empty = logos(["models"], home, env)
    assert empty.stdout.startswith(
        f"no models in {home.root / 'hf' / 'hub'} yet: logos models pull fetches the "
        f"default one, {DEFAULT_MODEL}\n\n"
    )


def test_pull_without_a_spec_fetches_the_default_model_which_list_marks(
    home: Home, hub_server: HubServer
) -> None:
    served = hub_server.add(DEFAULT_MODEL.repo_id, DEFAULT_MODEL.filename, gguf_bytes(4096))
    env = hub_env(home, hub_server)
    pulled = logos(["models", "pull"], home, env)
    assert pulled.returncode == 0, pulled.stderr
    assert Path(pulled.stdout.strip()).read_bytes() == served.content
    listed = logos(["models"], home, env).stdout.splitlines()
    assert listed[0].startswith(str(DEFAULT_MODEL)) and listed[0].endswith("\tdefault")
    (entry,) = json.loads(logos(["models", "--json"], home, env).stdout)
    assert entry["spec"] == str(DEFAULT_MODEL) and entry["default"] is True


def test_the_list_shows_the_models_the_default_is_chosen_from_and_a_setting_pins_one(
    home: Home, hub_server: HubServer
) -> None:
    env = hub_env(home, hub_server)
    listed = logos(["models"], home, env)
    assert listed.returncode == 0, listed.stderr
    here = default_for_this_machine()
    assert f"chosen for this machine ({Machine.this_one().describe()}):" in listed.stdout
    for option in LOCAL_MODELS:
        line = next(x for x in listed.stdout.splitlines() if x.startswith(option.name + "\t"))
        assert f"\t{option.file}\t{megabytes(option.size_bytes)}\tabout " in line
        assert line.endswith(f"\tdefault: {here.why}") == (option == here.option)
    # Pinned in the config file: pulled without a spec, marked in the list.
    larger = LOCAL_MODELS[-1]
    served = hub_server.add(larger.file.repo_id, larger.file.filename, gguf_bytes(4096))
    home.config_file.parent.mkdir(parents=True, exist_ok=True)
    home.config_file.write_text(f'local_model = "{larger.name}"\n')
    pulled = logos(["models", "pull"], home, env)
    assert pulled.returncode == 0, pulled.stderr
    assert Path(pulled.stdout.strip()).read_bytes() == served.content
    pinned = logos(["models"], home, env).stdout
    assert pinned.splitlines()[0].endswith("\tdefault")
    assert "default: local_model = 'qwen2.5-coder-1.5b' in the config file" in pinned
    home.config_file.write_text('local_model = "qwen-7b"\n')
    wrong = logos(["models"], home, env)
    assert wrong.returncode == 2
    assert "unknown local model 'qwen-7b': choose one of qwen2.5-coder-0.5b" in wrong.stderr


def test_a_bad_spec_or_a_missing_file_is_an_error(home: Home, hub_server: HubServer) -> None:
    hub_server.add(REPO, "tiny.gguf", gguf_bytes(4096))
    env = hub_env(home, hub_server)
    bad = logos(["models", "pull", "tiny/tiny-GGUF/tiny.gguf"], home, env)
    assert bad.returncode == 2
    assert "does not name a model on the Hub: write hf:OWNER/REPO/FILE.gguf" in bad.stderr
    missing = logos(["models", "pull", f"hf:{REPO}/other.gguf"], home, env)
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"logos: {REPO} has no file other.gguf at main")
    offline = logos(
        ["models", "pull", f"hf:{REPO}/tiny.gguf"],
        home,
        hub_env(home, hub_server, HF_HUB_OFFLINE="1"),
    )
    assert offline.returncode == 2
    assert "HF_HUB_OFFLINE=1 forbids fetching it" in offline.stderr


def test_ctrl_c_keeps_the_partial_download_and_the_next_pull_resumes_it(
    home: Home, hub_server: HubServer
) -> None:
    served = hub_server.add(REPO, "tiny.gguf", gguf_bytes(SIZE))
    # WHY this slow: Ctrl-C must come before the download ends, on a machine busy enough to
    # hold this test back for seconds between seeing the first bytes and sending it.
    hub_server.faults.bytes_per_second = 2_000_000
    env = hub_env(home, hub_server)
    repo = home.root / "hf" / "hub" / "models--tiny--tiny-GGUF"
    partial = repo / "blobs" / f"{served.sha256}.incomplete"
    with running_logos(["models", "pull", served.spec], home, env) as proc:
        assert wait_for(lambda: partial.exists() and partial.stat().st_size > 0, timeout=30)
        _, stderr = interrupt(proc, signal.SIGINT, timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "logos: interrupted: run the same command again to resume"
    kept = partial.stat().st_size
    assert 0 < kept < SIZE and kept % PIECE == 0
    assert not (repo / "snapshots").exists()

    hub_server.faults.bytes_per_second = None
    resumed = logos(["models", "pull", served.spec], home, env)
    assert resumed.returncode == 0, resumed.stderr
    assert Path(resumed.stdout.strip()).read_bytes() == served.content
    assert hub_server.file_requests("GET")[-1].range == f"bytes={kept}-"
    assert resumed.stderr.splitlines()[0].endswith(f", resuming at {kept / 1e6:.1f} MB")
    assert not partial.exists()


# The display and the question --------------------------------------------------------------

REMOTE = RemoteFile(
    HubFile("tiny/tiny-GGUF", "tiny.gguf"),
    size=SIZE,
    sha256="0" * 64,
    commit="1" * 40,
    endpoint="https://huggingface.co",
)


@pytest.mark.parametrize(
    ("typed", "answer"),
    [
        ("\n", True),
        ("y\n", True),
        ("YES\n", True),
        ("n\n", False),
        ("", False),
        ("what\nn\n", False),
    ],
)
def test_the_question_before_a_download(typed: str, answer: bool) -> None:
    stderr = io.StringIO()
    assert ask_to_download(REMOTE, Path("/cache/hub"), io.StringIO(typed), stderr) is answer
    question = (
        "logos: hf:tiny/tiny-GGUF/tiny.gguf is 24.0 MB; download it from "
        "https://huggingface.co into /cache/hub? [Y/n] "
    )
    assert stderr.getvalue().startswith(question)
    if typed.startswith("what"):
        assert "answer y or n" in stderr.getvalue()


def test_off_a_terminal_the_progress_is_two_plain_lines() -> None:
    assert isinstance(download_progress(io.StringIO(), {}), PlainDownloadProgress)
    times = iter([10.0, 14.0])
    stream = io.StringIO()
    progress = PlainDownloadProgress(stream, clock=lambda: next(times))
    progress.start(REMOTE, 4_000_000)
    progress.advance(20_000_000)
    progress.end(True)
    assert stream.getvalue() == (
        "logos: downloading hf:tiny/tiny-GGUF/tiny.gguf (24.0 MB) from https://huggingface.co"
        ", resuming at 4.0 MB\n"
        "logos: downloaded hf:tiny/tiny-GGUF/tiny.gguf (24.0 MB) in 4.0 s (5.0 MB/s)\n"
    )


def test_on_a_terminal_the_progress_is_a_bar_with_size_and_speed() -> None:
    stream = io.StringIO()
    progress = TerminalDownloadProgress(Console(file=stream, force_terminal=True, width=100))
    progress.start(REMOTE, 0)
    progress.advance(SIZE)
    progress.end(True)
    shown = stream.getvalue()
    assert "logos: downloading hf:tiny/tiny-GGUF/tiny.gguf from https://huggingface.co" in shown
    assert "tiny.gguf" in shown and "24.0/24.0 MB" in shown
