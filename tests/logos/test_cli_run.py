"""`logos "TASK"` end to end: the real command in a subprocess, a real local HTTP server
streaming scripted replies in both wire formats, real bash."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import logos.cli.main as cli_main
from logos.records.events import EVENT_ADAPTER, EVENT_TYPES
from tests.support.cli_harness import (
    ANSI_ESCAPE,
    Home,
    anthropic_env,
    logos,
    openai_env,
    read_jsonl,
    run_task,
    sent_messages,
)
from tests.support.sse_server import (
    Reply,
    ScriptedServer,
    anthropic_stream,
    json_error,
    openai_stream,
)

Stream = Callable[..., Reply]
WIRES: dict[str, tuple[Stream, Callable[..., dict[str, str]]]] = {
    "openai": (openai_stream, openai_env),
    "anthropic": (anthropic_stream, anthropic_env),
}


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.timeout(60)
def test_a_task_runs_to_its_final_answer(wire: str, home: Home, sse_server: ScriptedServer) -> None:
    stream, env_for = WIRES[wire]
    sse_server.enqueue(
        stream("Let me look.\n<cmd>echo hello from bash</cmd>\n"),
        stream("The answer is 42."),
    )
    done = logos(
        ["--model", "test-model", "--yes", "find the answer"], home, env_for(home, sse_server)
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == "The answer is 42.\n"  # stdout is the answer, exactly
    assert "✓ echo hello from bash" in done.stderr
    assert "Let me look." in done.stderr  # prose streams to stderr when stdout is a file
    summary = done.stderr.strip().splitlines()[-1]
    assert summary.startswith("final answer · 2 turns") and str(home.only_run()) in summary
    assert len(sse_server.requests) == 2
    envelope = sent_messages(sse_server, 1)[-1]["content"]
    assert "$ echo hello from bash" in envelope and "hello from bash\n" in envelope


@pytest.mark.timeout(60)
def test_the_trajectory_and_audit_log_record_everything_privately(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>echo one</cmd>"), openai_stream("Done."))
    done = run_task(home, sse_server, "record me")
    assert done.returncode == 0, done.stderr

    path = home.only_run()
    assert path.name.endswith("-record-me.jsonl")
    records = read_jsonl(path)
    assert [r["type"] for r in records] == [
        "run",
        "prompt",
        "approval",
        "step",
        "step",
        "step",
        "done",
    ]
    header = records[0]
    assert header["version"] == 1 and header["provider"] == "openai" and header["model"] == "m"
    assert (
        header["cwd"] == str(home.work)
        and "Working directory: " + str(home.work) in (header["system_prompt"])
    )
    assert records[1]["content"] == "record me"
    assert records[4]["role"] == "result" and records[4]["results"][0]["stdout"] == "one\n"
    assert records[3]["usage"]["output_tokens"] > 0
    assert records[-1]["stop_reason"] == "final" and records[-1]["steps"] == 2
    audit = home.audit()
    assert [(a["action"], a["command"], a["runner"]) for a in audit] == [
        ("auto", "echo one", "local")
    ]
    assert audit[0]["trajectory"] == str(path)
    for private in (path, home.state / "audit.jsonl"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    for directory in (path.parent, home.state):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


@pytest.mark.timeout(60)
def test_json_prints_only_events_ending_with_done(
    wire: str, home: Home, sse_server: ScriptedServer
) -> None:
    stream, env_for = WIRES[wire]
    sse_server.enqueue(
        stream("Checking.\n<cmd>echo out; echo err >&2; exit 3</cmd>"), stream("It failed with 3.")
    )
    done = logos(["--model", "m", "--yes", "--json", "go"], home, env_for(home, sse_server))

    assert done.returncode == 0, done.stderr
    events = [EVENT_ADAPTER.validate_json(line) for line in done.stdout.splitlines()]
    raw = [json.loads(line) for line in done.stdout.splitlines()]
    types = [event.type for event in events]
    assert types[0] == "start" and types[-1] == "done" and types.count("done") == 1
    assert set(types) <= set(EVENT_TYPES)
    assert {"delta", "command_start", "command_result", "step_end", "approval"} <= set(types)
    assert "".join(e.text for e in events if e.type == "delta") == "Checking.\nIt failed with 3."
    result = next(r for r in raw if r["type"] == "command_result")
    assert result["turn"] == 1 and result["index"] == 0
    assert result["result"]["exit_code"] == 3 and result["result"]["stderr"] == "err\n"
    step_ends = [r for r in raw if r["type"] == "step_end"]
    assert [s["step"]["role"] for s in step_ends] == ["assistant", "result", "assistant"]
    assert step_ends[0]["step"]["usage"]["input_tokens"] == 11
    final = raw[-1]
    assert final["stop_reason"] == "final" and final["response"] == "It failed with 3."
    assert final["usage"]["input_tokens"] == 22 and final["turns"] == 2
    assert "{" not in done.stderr  # no event leaks to stderr


@pytest.mark.timeout(60)
def test_json_reports_a_setup_error_as_error_then_done(home: Home) -> None:
    done = logos(["--json", "--yes", "go"], home, home.env())
    assert done.returncode == 2
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["type"] for e in events] == ["error", "done"]
    assert "ANTHROPIC_API_KEY" in events[0]["message"] and events[1]["stop_reason"] == "error"


@pytest.mark.timeout(60)
def test_max_steps_stops_the_run_with_exit_1(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(*(openai_stream(f"<cmd>echo {i}</cmd>") for i in range(3)))
    done = run_task(home, sse_server, "--max-steps", "2", "loop forever")
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "stopped: step limit reached (--max-steps)" in done.stderr
    assert len(sse_server.requests) == 2
    assert home.run_records()[-1]["stop_reason"] == "max_steps"


@pytest.mark.timeout(60)
def test_max_cost_stops_the_run_with_exit_1(home: Home, sse_server: ScriptedServer) -> None:
    costly = {"prompt_tokens": 100_000, "completion_tokens": 10, "total_tokens": 100_010}
    sse_server.enqueue(openai_stream("<cmd>true</cmd>", usage=costly), openai_stream("never"))
    done = logos(
        ["--model", "gpt-4o", "--yes", "--max-cost", "0.01", "spend"],
        home,
        openai_env(home, sse_server),
    )
    assert done.returncode == 1, done.stderr
    assert "cost limit reached" in done.stderr and "$0.2501" in done.stderr
    assert len(sse_server.requests) == 1


@pytest.mark.timeout(60)
def test_max_time_kills_a_slow_command_and_exits_1(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("<cmd>sleep 30</cmd>"))
    done = run_task(home, sse_server, "--max-time", "1.5", "wait")
    assert done.returncode == 1, done.stderr
    assert "time limit reached (--max-time)" in done.stderr
    assert home.run_records()[-1]["stop_reason"] == "max_wall_time"


@pytest.mark.timeout(60)
def test_a_provider_error_ends_the_run_with_exit_2(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(json_error(401, "invalid api key", type="authentication_error"))
    done = run_task(home, sse_server, "go")
    assert done.returncode == 2
    assert "error:" in done.stderr and "401" in done.stderr and "OPENAI_API_KEY" in done.stderr
    assert home.run_records()[-1]["stop_reason"] == "error"


def test_without_a_provider_the_message_names_what_to_set(home: Home) -> None:
    done = logos(["--yes", "go"], home, home.env())
    assert done.returncode == 2
    for hint in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "--base-url", "--gguf"):
        assert hint in done.stderr
    assert home.runs() == []


def test_a_chosen_provider_without_its_key_names_the_variable(home: Home) -> None:
    done = logos(["--provider", "anthropic", "--yes", "go"], home, home.env(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert "ANTHROPIC_API_KEY is not set" in done.stderr


def test_local_commands_without_a_terminal_need_yes(home: Home, sse_server: ScriptedServer) -> None:
    done = logos(["--model", "m", "go"], home, openai_env(home, sse_server))
    assert done.returncode == 2
    assert "--yes" in done.stderr and "--sandbox" in done.stderr and "never-run" in done.stderr
    assert sse_server.requests == []  # refused before the model was called


def test_network_needs_the_sandbox(home: Home, sse_server: ScriptedServer) -> None:
    done = run_task(home, sse_server, "--network", "go")
    assert done.returncode == 2 and "--network only applies to the sandbox" in done.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--allow-host", "pypi.org"], "--allow-host only applies to the sandbox"),
        (["--sandbox", "temenos", "--allow-host", "pypi.org"], "temenos has no host list"),
        (["--sandbox", "--network", "--allow-host", "pypi.org"], "use one or the other"),
    ],
)
def test_allow_host_needs_the_sandbox_without_network(
    home: Home, sse_server: ScriptedServer, flags: list[str], says: str
) -> None:
    done = run_task(home, sse_server, *flags, "go")
    assert done.returncode == 2 and says in done.stderr
    assert sse_server.requests == []


@pytest.mark.timeout(60)
def test_never_run_runs_nothing_and_tells_the_model(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("<cmd>touch created-by-model</cmd>"), openai_stream("ok"))
    done = logos(
        ["--model", "m", "--approve", "never-run", "dry run"], home, openai_env(home, sse_server)
    )
    assert done.returncode == 0, done.stderr
    assert not (home.work / "created-by-model").exists()
    envelope = sent_messages(sse_server, 1)[-1]["content"]
    assert "error: not run: approval mode never-run" in envelope
    assert [a["action"] for a in home.audit()] == ["never-run"]


@pytest.mark.timeout(60)
def test_the_task_can_come_from_stdin(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("Read it."))
    task = "a task\nover two lines"
    done = logos(
        ["--model", "m", "--yes", "--no-check-back", "-"],
        home,
        openai_env(home, sse_server),
        stdin=task,
    )
    assert done.returncode == 0, done.stderr
    assert sent_messages(sse_server, 0) == [{"role": "user", "content": task}]


@pytest.mark.timeout(60)
def test_output_off_a_terminal_has_no_escape_codes(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("<cmd>ls /nonexistent</cmd>"), openai_stream("Nothing there."))
    done = run_task(home, sse_server, "look")
    assert done.returncode == 0
    assert "✗ ls /nonexistent  exit 2" in done.stderr
    assert not ANSI_ESCAPE.search(done.stdout + done.stderr)


@pytest.mark.timeout(60)
def test_the_config_file_gives_defaults_and_flags_win(
    home: Home, sse_server: ScriptedServer
) -> None:
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text('model = "from-config"\nmax_steps = 1\n')
    sse_server.enqueue(openai_stream("<cmd>true</cmd>"), openai_stream("second"))
    env = openai_env(home, sse_server)

    first = logos(["--yes", "go"], home, env)
    assert first.returncode == 1  # max_steps = 1 from the file
    assert sse_server.requests[0].json["model"] == "from-config"
    second = logos(
        ["--yes", "--no-check-back", "--model", "from-flag", "--max-steps", "2", "go"], home, env
    )
    assert second.returncode == 0, second.stderr
    assert sse_server.requests[1].json["model"] == "from-flag"


def test_model_options_and_prompt_extra_reach_every_request(
    home: Home, sse_server: ScriptedServer
) -> None:
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text(
        'temperature = 0.5\nprompt_extra = "House rule: be terse."\n'
        '[provider_options]\ngrammar = "root ::= [a-z]+"\nseed = 7\n'
    )
    sse_server.enqueue(openai_stream("<cmd>true</cmd>"), openai_stream("done"))
    env = openai_env(home, sse_server)
    done = logos(["--model", "m", "--yes", "--temperature", "0.2", "go"], home, env)
    assert done.returncode == 0, done.stderr
    for request in sse_server.requests:
        body = request.json
        assert (body["grammar"], body["seed"], body["temperature"]) == ("root ::= [a-z]+", 7, 0.2)
        assert body["messages"][0]["content"].rstrip().endswith("House rule: be terse.")


def test_an_unknown_config_key_is_named_with_its_file(home: Home) -> None:
    config = home.root / "custom.toml"
    config.write_text('modle = "typo"\n')
    done = logos(["--config", str(config), "--yes", "go"], home, home.env(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert "unknown key 'modle'" in done.stderr and str(config) in done.stderr


@pytest.mark.timeout(60)
def test_a_local_server_without_model_is_asked_for_its_models(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.models = {"object": "list", "data": [{"id": "local-a"}, {"id": "local-b"}]}
    sse_server.enqueue(openai_stream("Hi."))
    done = logos(
        ["--base-url", sse_server.base_url + "/v1", "--yes", "--no-check-back", "hi"],
        home,
        home.env(),
    )
    assert done.returncode == 0, done.stderr
    (listing,) = sse_server.model_requests
    (chat,) = sse_server.requests
    assert (listing.method, listing.path) == ("GET", "/v1/models")
    assert "authorization" not in chat.headers  # a local server needs no key
    assert chat.json["model"] == "local-a"
    assert "using 'local-a', the first of the 2 models" in done.stderr


def _only(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [record for record in records if record["type"] == kind]


@pytest.mark.timeout(60)
def test_an_explicit_trajectory_path_is_used_and_never_overwritten(
    home: Home, sse_server: ScriptedServer
) -> None:
    target = home.root / "mine.jsonl"
    sse_server.enqueue(openai_stream("First."))
    env = openai_env(home, sse_server)
    done = logos(
        ["--model", "m", "--yes", "--no-check-back", "--trajectory", str(target), "go"], home, env
    )
    assert done.returncode == 0 and _only(read_jsonl(target), "done")
    again = logos(
        ["--model", "m", "--yes", "--no-check-back", "--trajectory", str(target), "go"], home, env
    )
    assert (
        again.returncode == 2
        and "already exists" in again.stderr
        and "logos resume" in again.stderr
    )
    assert len(_only(read_jsonl(target), "prompt")) == 1


def test_version_help_and_no_arguments(home: Home) -> None:
    version = logos(["--version"], home, home.env())
    assert version.returncode == 0 and version.stdout.startswith("logos ")
    for command in ("run", "resume", "show", "exec", "doctor"):
        shown = logos([command, "--help"], home, home.env())
        assert shown.returncode == 0 and shown.stdout.startswith(f"usage: logos {command}")
    bare = logos([], home, home.env())
    assert bare.returncode == 2 and 'logos [OPTIONS] "TASK"' in bare.stderr


@pytest.mark.timeout(60)
def test_max_tokens_limits_each_turn(wire: str, home: Home, sse_server: ScriptedServer) -> None:
    stream, env_for = WIRES[wire]
    sse_server.enqueue(stream("Short."))
    done = logos(
        ["--model", "m", "--yes", "--no-check-back", "--max-tokens", "77", "go"],
        home,
        env_for(home, sse_server),
    )
    assert done.returncode == 0, done.stderr
    assert sse_server.requests[0].json["max_tokens"] == 77


@pytest.mark.parametrize(
    ("args", "variables", "named"),
    [
        (["--base-url", "ftp://example.com/v1"], {}, "--base-url"),
        ([], {"OPENAI_BASE_URL": "localhost:8080/v1"}, "OPENAI_BASE_URL"),
        (["--base-url", "http://[::1"], {}, "--base-url"),
    ],
)
def test_an_invalid_base_url_is_a_clear_error(
    home: Home, args: list[str], variables: dict[str, str], named: str
) -> None:
    for model in ([], ["--model", "m"]):
        done = logos([*args, *model, "--yes", "go"], home, home.env(**variables))
        assert done.returncode == 2, done.stderr
        assert "invalid base URL" in done.stderr and named in done.stderr
        assert "Traceback" not in done.stderr
    doctor = logos(["doctor", *args, "--model", "m"], home, home.env(**variables))
    failed = [line for line in doctor.stdout.splitlines() if line.startswith("FAIL")]
    assert doctor.returncode == 1 and len(failed) == 1
    assert failed[0].split()[1] == "model" and "invalid base URL" in failed[0]


@pytest.mark.timeout(60)
def test_max_cost_warns_when_the_price_of_the_model_is_unknown(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("Done."), openai_stream("Done."))
    env = openai_env(home, sse_server)
    unknown = logos(
        ["--model", "my-local-model", "--yes", "--no-check-back", "--max-cost", "1", "go"],
        home,
        env,
    )
    assert unknown.returncode == 0, unknown.stderr
    assert "--max-cost" in unknown.stderr and "'my-local-model'" in unknown.stderr
    known = logos(
        ["--model", "gpt-4o", "--yes", "--no-check-back", "--max-cost", "1", "go"], home, env
    )
    assert known.returncode == 0 and "--max-cost" not in known.stderr


@pytest.mark.timeout(60)
def test_json_reports_an_error_during_the_run_as_an_error_event(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(json_error(401, "invalid api key", type="authentication_error"))
    done = run_task(home, sse_server, "--json", "go")
    assert done.returncode == 2
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["type"] for e in events] == ["start", "error", "done"]
    assert "401" in events[1]["message"] and events[2]["error"] == events[1]["message"]
    assert "401" in done.stderr  # people watching the terminal see it too


def test_json_messages_on_stderr_are_not_cut_into_lines(home: Home) -> None:
    # No provider, and a Hub nobody answers at: the default model cannot be fetched.
    env = home.env(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(home.root / "hf"))
    done = logos(["--json", "--yes", "go"], home, env)
    assert done.returncode == 2
    notice, error = done.stderr.splitlines()
    assert notice.startswith("logos: no API key, base URL or --gguf: running the default")
    assert error.startswith("logos: error: cannot reach the Hugging Face Hub")
    assert error.endswith("OPENAI_API_KEY (a hosted model)")


def test_an_allow_suffix_other_than_ro_or_rw_is_named(home: Home) -> None:
    done = logos(["--yes", "--allow", ".:rx", "go"], home, home.env(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert "--allow '.:rx'" in done.stderr and ":ro or :rw" in done.stderr


def test_json_reports_a_usage_error_as_error_then_done(home: Home) -> None:
    done = logos(["--json", "--max-steps", "0", "go"], home, home.env())
    assert done.returncode == 2
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["type"] for e in events] == ["error", "done"]
    assert "--max-steps: must be at least 1, got 0" in events[0]["message"]
    assert events[1]["stop_reason"] == "error"
    assert "usage: logos run" in done.stderr and "must be at least 1" in done.stderr
    plain = logos(["--max-steps", "0", "go"], home, home.env())
    assert plain.returncode == 2 and plain.stdout == "" and "must be at least 1" in plain.stderr


@pytest.mark.timeout(60)
def test_the_hallucination_limit_stops_the_run_with_exit_1(
    home: Home, sse_server: ScriptedServer
) -> None:
    fake = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    sse_server.enqueue(*(openai_stream(fake) for _ in range(3)))
    done = run_task(home, sse_server, "list files")
    assert done.returncode == 1, done.stderr
    assert "stopped: the model kept writing fake tool calls" in done.stderr
    assert home.run_records()[-1]["stop_reason"] == "hallucination_limit"


@pytest.mark.timeout(60)
def test_json_reports_a_retry_as_a_retry_event(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        json_error(429, "slow down", headers={"retry-after-ms": "50"}), openai_stream("Fine.")
    )
    done = run_task(home, sse_server, "--no-check-back", "--json", "go")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (retry,) = [e for e in events if e["type"] == "retry"]
    assert retry["attempt"] == 1 and "429" in retry["reason"]
    assert events[-1]["type"] == "done" and events[-1]["response"] == "Fine."


@pytest.mark.timeout(60)
def test_output_off_a_terminal_is_utf8_whatever_the_locale(
    home: Home, sse_server: ScriptedServer
) -> None:
    answer = "Ünïcødé → 漢字 ✓"
    sse_server.enqueue(openai_stream(answer), openai_stream(answer))
    env = openai_env(home, sse_server, PYTHONIOENCODING="ascii")
    done = subprocess.run(
        [sys.executable, "-m", "logos", "--model", "m", "--yes", "--no-check-back", "--json", "go"],
        capture_output=True,
        env=env,
        cwd=home.work,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    assert events[-1]["response"] == answer
    plain = subprocess.run(
        [sys.executable, "-m", "logos", "--model", "m", "--yes", "--no-check-back", "go"],
        capture_output=True,
        env=env,
        cwd=home.work,
        timeout=60,
    )
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.decode("utf-8") == answer + "\n"


@pytest.mark.timeout(60)
def test_timeout_limits_each_command(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("<cmd>sleep 30</cmd>"), openai_stream("It hung."))
    env = openai_env(home, sse_server)
    done = logos(["--model", "m", "--yes", "--timeout", "0.5", "wait"], home, env)
    assert done.returncode == 0, done.stderr
    assert "✗ sleep 30  timed out after" in done.stderr
    assert "timed out" in sent_messages(sse_server, 1)[-1]["content"]


@pytest.mark.timeout(60)
def test_max_total_tokens_stops_the_run_with_exit_1(home: Home, sse_server: ScriptedServer) -> None:
    used = {"prompt_tokens": 900, "completion_tokens": 200, "total_tokens": 1100}
    sse_server.enqueue(openai_stream("<cmd>true</cmd>", usage=used), openai_stream("never"))
    env = openai_env(home, sse_server)
    done = logos(["--model", "m", "--yes", "--max-total-tokens", "1000", "go"], home, env)
    assert done.returncode == 1, done.stderr
    assert "token budget spent (--max-total-tokens)" in done.stderr
    assert len(sse_server.requests) == 1


@pytest.mark.timeout(60)
def test_allow_without_the_sandbox_sets_the_working_directory(
    home: Home, sse_server: ScriptedServer
) -> None:
    project = home.root / "project"
    project.mkdir()
    sse_server.enqueue(openai_stream("<cmd>pwd</cmd>"), openai_stream("Here."))
    env = openai_env(home, sse_server)
    done = logos(["--model", "m", "--yes", "--allow", f"{project}:rw", "where"], home, env)
    assert done.returncode == 0, done.stderr
    assert "without --sandbox, commands can reach the whole machine" in done.stderr
    assert f"<stdout>\n{project}\n</stdout>" in sent_messages(sse_server, 1)[-1]["content"]
    assert home.run_records()[0]["cwd"] == str(project)


def test_a_bug_in_logos_exits_2_with_the_traceback_and_a_report_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken_show(args: object, flags: object) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setitem(cli_main._COMMANDS, "show", broken_show)
    assert cli_main.main(["show", "anything.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "ZeroDivisionError: a bug" in err and "internal error: this is a bug in logos" in err
