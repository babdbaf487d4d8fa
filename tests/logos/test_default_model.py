"""No key, no base URL, no --gguf: the `logos` command fetches the default model from the Hub
(a real HTTP server that answers as the Hub does, serving the tests' small GGUF under the
default model's name), then runs it in process with llama.cpp; and every way that can fail
says what to do. `logos doctor` says which model a run would use and why."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from logos.models.fitting import Machine, default_for_this_machine
from tests.support.cli_harness import Home, PtySession, logos, make_home
from tests.support.hub_server import HubServer, ServedFile, gguf_bytes, hub_env

TASK = "How many files are in this directory?"
DEFAULT_MODEL = default_for_this_machine().option.file
"""The default model here: the 0.5B on a 2-core machine, the 1.5B on a larger one."""


@pytest.fixture(scope="module")
def test_gguf(gguf: Path) -> bytes:
    return gguf.read_bytes()


def serve_default(hub_server: HubServer, content: bytes) -> ServedFile:
    return hub_server.add(DEFAULT_MODEL.repo_id, DEFAULT_MODEL.filename, content)


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def ran_a_command(events: list[dict[str, Any]]) -> bool:
    results = [e["result"] for e in events if e["type"] == "command_result"]
    return any(result["error"] is None for result in results)


@pytest.mark.llama
@pytest.mark.timeout(600)
def test_the_default_model_is_fetched_once_with_progress_then_runs_offline(
    home: Home, hub_server: HubServer, test_gguf: bytes
) -> None:
    served = serve_default(hub_server, test_gguf)
    args = ["--yes", "--json", "--max-steps", "3", "--threads", "1", TASK]
    first = logos(args, home, hub_env(home, hub_server), timeout=280)
    assert first.returncode in (0, 1), first.stderr  # an answer, or a limit: the run ran
    events = events_of(first.stdout)
    assert events[-1]["type"] == "done" and ran_a_command(events)
    assert f"running the default local model {DEFAULT_MODEL}" in first.stderr
    # Two plain lines (stderr is no terminal): what, from where, how large; then how fast.
    size = f"{served.size / 1e6:.1f} MB"
    assert f"logos: downloading {DEFAULT_MODEL} ({size}) from {hub_server.endpoint}" in first.stderr
    assert re.search(
        rf"logos: downloaded {re.escape(str(DEFAULT_MODEL))} \({size}\) in ", first.stderr
    )
    assert len(hub_server.file_requests("GET")) == 1
    header = json.loads(home.only_run().read_text().splitlines()[0])
    assert header["gguf"].startswith(str(home.root / "hf"))

    before = len(hub_server.requests)
    offline = hub_env(home, hub_server, HF_HUB_OFFLINE="1")
    second = logos(args, home, offline, timeout=280)
    assert second.returncode in (0, 1), second.stderr
    assert ran_a_command(events_of(second.stdout))
    assert "downloading" not in second.stderr
    assert len(hub_server.requests) == before  # not one request: the cache alone


def test_on_a_terminal_the_size_is_said_and_asked_once_and_no_stops_before_any_byte(
    home: Home, hub_server: HubServer
) -> None:
    served = serve_default(hub_server, gguf_bytes(3_000_000))
    session = PtySession([TASK], home, hub_env(home, hub_server))
    try:
        session.expect(
            rf"{re.escape(str(DEFAULT_MODEL))} is {served.size / 1e6:.1f} MB; download it "
            rf"from {re.escape(hub_server.endpoint)} into .*\? \[Y/n\]"
        )
        session.send("n\n")
        session.expect(r"(?s)not downloading .* pass\s+--yes")
        assert session.wait() == 2
    finally:
        session.close()
    assert hub_server.file_requests("GET") == []
    assert not any((home.root / "hf").rglob("*.gguf"))


@pytest.mark.parametrize(
    ("endpoint_of", "extra_args", "expected"),
    [
        (  # nothing listens there
            lambda hub_server: "http://127.0.0.1:9",
            [],
            r"cannot reach the Hugging Face Hub at http://127\.0\.0\.1:9 .*--gguf PATH.*"
            r"--base-url URL.*ANTHROPIC_API_KEY / OPENAI_API_KEY",
        ),
        (
            lambda hub_server: hub_server.endpoint,
            ["--model", "hf:nobody/nothing-GGUF/model.gguf"],
            r"there is no repository nobody/nothing-GGUF at ",
        ),
        (
            lambda hub_server: hub_server.endpoint,
            ["--model", "hf:nobody/nothing-GGUF/model.bin"],
            r"'model\.bin' is not a \.gguf file; logos runs GGUF models: a model on the Hub is "
            r"written hf:OWNER/REPO/FILE\.gguf",
        ),
        (
            lambda hub_server: hub_server.endpoint,
            ["--model", "hf:a/b/c.gguf", "--base-url", "http://127.0.0.1:9/v1"],
            r"hf:a/b/c\.gguf runs with llama\.cpp in this process: leave out --provider and "
            r"--base-url",
        ),
    ],
    ids=["unreachable", "missing-repo", "not-gguf", "hf-with-base-url"],
)
def test_each_fault_is_a_clear_message_and_leaves_nothing(
    home: Home, hub_server: HubServer, endpoint_of: Any, extra_args: list[str], expected: str
) -> None:
    env = home.env(HF_HOME=str(home.root / "hf"), HF_ENDPOINT=endpoint_of(hub_server))
    done = logos(["--yes", *extra_args, TASK], home, env)
    assert done.returncode == 2
    assert re.search(expected, done.stderr, re.DOTALL), done.stderr
    assert not any((home.root / "hf").rglob("*.gguf")) and home.runs() == []


def test_offline_with_nothing_cached_names_the_other_ways(
    home: Home, hub_server: HubServer
) -> None:
    serve_default(hub_server, gguf_bytes(1_000_000))
    done = logos(["--yes", TASK], home, hub_env(home, hub_server, HF_HUB_OFFLINE="1"))
    assert done.returncode == 2
    assert "HF_HUB_OFFLINE=1 forbids fetching it" in done.stderr and "--gguf PATH" in done.stderr
    assert hub_server.requests == []


def test_a_cut_download_is_resumed_by_the_next_run(home: Home, hub_server: HubServer) -> None:
    served = serve_default(hub_server, gguf_bytes(24_000_000))
    # The connection breaks, and stays broken for the retries within the run.
    hub_server.faults.cut_after = 12 * 1024 * 1024
    hub_server.faults.status_after_cut = 503
    cut = logos(["--approve", "never-run", TASK], home, hub_env(home, hub_server))
    assert cut.returncode == 2 and "run the same command again to resume it" in cut.stderr
    hub_server.faults.cut_after = hub_server.faults.status_after_cut = None
    # The same command again: it resumes where the cut left off (here the model itself is
    # not a model llama.cpp can load, which is what it says next).
    again = logos(["--approve", "never-run", TASK], home, hub_env(home, hub_server))
    ranges = [request.range for request in hub_server.file_requests("GET")]
    assert ranges[0] is None and ranges[-1] is not None and ranges[-1].startswith("bytes=")
    assert int(ranges[-1].removeprefix("bytes=").rstrip("-")) >= 10 * 1024 * 1024
    assert "resuming at" in again.stderr
    cached = list((home.root / "hf").rglob(DEFAULT_MODEL.filename))
    assert len(cached) == 1 and cached[0].read_bytes() == served.content


def test_doctor_says_which_model_a_run_would_use_and_why(
    tmp_path: Path, hub_server: HubServer
) -> None:
    cases = [
        ({}, [], rf"the default local model {re.escape(str(DEFAULT_MODEL))}, not downloaded yet"),
        (
            {},
            [],
            rf"this one because about \d+ tokens/s and a first answer in about \d+ s estimated on "
            rf"{re.escape(Machine.this_one().describe())}",
        ),
        (
            {"OPENAI_API_KEY": "k"},
            [],
            r"OpenAI gpt-\S+ at https://api\.openai\.com/v1 "
            r"\(OPENAI_API_KEY is set\)",
        ),
        ({}, ["--gguf", "/nowhere/m.gguf"], r"/nowhere/m\.gguf with llama\.cpp in this process"),
        ({}, ["--model", "hf:o/r/f.gguf"], r"hf:o/r/f\.gguf \(--model or the config file\)"),
    ]
    for number, (variables, args, expected) in enumerate(cases):
        (tmp_path / str(number)).mkdir()
        home = make_home(tmp_path / str(number))
        done = logos(["doctor", *args], home, hub_env(home, hub_server, **variables))
        assert re.search(expected, " ".join(done.stdout.split())), done.stdout
    assert hub_server.file_requests("GET") == []  # the doctor downloads nothing
