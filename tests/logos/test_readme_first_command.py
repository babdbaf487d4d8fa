"""The README's first command, exactly as written there, on a fresh virtualenv: it installs
logos, fetches the default model (from a real HTTP server that answers as the Hugging Face
Hub does, serving the default model's own file), runs it with llama.cpp in process, runs a
command and answers. On a terminal, as a newcomer types it: the download is asked for once
and each command is confirmed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from logos.models.fitting import default_for_this_machine
from tests.support.cli_harness import REPO, Home, PtySession, make_home
from tests.support.docs_session import copy_of_the_repository
from tests.support.hub_server import HubServer
from tests.support.llama import find_default_gguf
from tests.support.parts import require

pytestmark = [pytest.mark.slow, pytest.mark.llama, pytest.mark.timeout(1500)]

DOWNLOAD_QUESTION = r"\[Y/n\]"
CONFIRM_QUESTION = r"\[y\]es\s+\[n\]o\s+\[a\]lways"


def readme_first_command() -> str:
    """The first ```sh block of the README: the one command that installs and runs a task."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```sh\n(.+?)\n```", text, re.DOTALL)
    assert match is not None, "the README has no ```sh block"
    command = match.group(1).strip()
    assert command.startswith("pip install . && logos "), command
    return command


def test_the_readme_first_command_installs_fetches_runs_a_command_and_answers(
    tmp_path: Path,
) -> None:
    gguf = find_default_gguf()
    require(
        gguf is not None and gguf.is_file(),
        "no copy of the default model: run scripts/fetch-model qwen2.5-coder-0.5b",
    )
    assert gguf is not None
    repository = copy_of_the_repository(tmp_path / "logos")
    venv = tmp_path / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    home: Home = make_home(tmp_path)
    with HubServer() as hub:
        # Served under the name of the default for this machine (the 1.5B's on a larger one).
        default = default_for_this_machine().option.file
        hub.add(default.repo_id, default.filename, gguf.read_bytes())
        environment = home.env(
            HF_HOME=str(home.root / "hf"),
            HF_ENDPOINT=hub.endpoint,
            VIRTUAL_ENV=str(venv),
            PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        environment.pop("PYTHONPATH", None)  # the fresh install, not this checkout
        # WHY bash -c: the command is a shell line (`&&`), typed in the repository's root.
        session = PtySession.of(
            ["bash", "-c", f"cd {repository} && {readme_first_command()}"], home, environment
        )
        try:
            session.expect(DOWNLOAD_QUESTION, timeout=900)  # after pip has installed logos
            session.send("y\n")
            session.expect(CONFIRM_QUESTION, timeout=300)
            session.send("a\n")  # always, for this run
            status = session.wait(timeout=600)
        finally:
            session.close()
        assert hub.file_requests("GET"), "the model was not fetched from the Hub"
    assert status in (0, 1), session.output[-3000:]
    (run,) = home.runs()
    records = [json.loads(line) for line in run.read_text().splitlines()]
    results = [r for record in records if record.get("role") == "result" for r in record["results"]]
    assert any(result["error"] is None for result in results), "no command ran"
    done = records[-1]
    assert done["type"] == "done", done
    answers = [
        record["content"]
        for record in records
        if record.get("role") == "assistant" and "<cmd>" not in record["content"]
    ]
    assert done["stop_reason"] == "final" and answers and answers[-1].strip(), done
