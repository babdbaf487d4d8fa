"""`--gguf`: fully offline on a local model, llama.cpp in the command's own process."""

from __future__ import annotations

import pytest

from tests.support.cli_harness import Home, logos
from tests.support.llama import find_test_gguf
from tests.support.parts import require


@pytest.mark.llama
@pytest.mark.timeout(300)
def test_a_short_run_on_a_local_gguf_model(xllamacpp_installed: None, home: Home) -> None:
    gguf = find_test_gguf()
    require(gguf is not None and gguf.is_file(), "no test model: run scripts/fetch-model")
    assert gguf is not None
    args = ["--gguf", str(gguf), "--threads", "1", "--context-size", "4096"]
    args += ["--max-steps", "2", "--max-tokens", "64", "--yes", "List the files here."]
    done = logos(args, home, home.env(), timeout=280)

    assert done.returncode in (0, 1), done.stderr  # the model is weak: any normal ending
    records = home.run_records()
    header, done_record = records[0], records[-1]
    assert header["gguf"] == str(gguf) and header["base_url"] is None
    assert done_record["type"] == "done" and done_record["stop_reason"] != "error"
    assistant = [r for r in records if r["type"] == "step" and r["role"] == "assistant"]
    assert len(assistant) >= 1 and assistant[0]["usage"]["output_tokens"] > 0


def test_a_missing_gguf_file_is_a_clear_error(xllamacpp_installed: None, home: Home) -> None:
    done = logos(["--gguf", str(home.root / "absent.gguf"), "--yes", "hi"], home, home.env())
    assert done.returncode == 2
    assert "GGUF model file not found" in done.stderr and home.runs() == []


def test_gguf_runs_its_own_server(home: Home) -> None:
    done = logos(["--gguf", "m.gguf", "--base-url", "http://x/v1", "--yes", "hi"], home, home.env())
    assert done.returncode == 2 and "leave out --provider and --base-url" in done.stderr
