"""sandboxd's wire models: strict requests, results carried whole, temenos's shapes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from pydantic import TypeAdapter, ValidationError

from logos.result import Result
from sandboxd.api import (
    RunRequest,
    RunResponse,
    TemenosRunRequest,
    TemenosRunResponse,
    is_valid_session_id,
)


def test_the_response_model_has_every_field_of_result() -> None:
    result_fields = {f.name for f in dataclasses.fields(Result)}
    response_fields = {f.name for f in dataclasses.fields(RunResponse)}
    assert response_fields - result_fields == {"sandbox", "stripped_env_keys", "notice"}
    assert result_fields <= response_fields


def test_the_response_json_is_results_fields_then_where_it_ran() -> None:
    wire = RunResponse.from_result(Result(command="ls"), sandbox="s", stripped_env_keys=[])
    answer = json.loads(TypeAdapter(RunResponse).dump_json(wire))
    assert list(answer) == [f.name for f in dataclasses.fields(Result)] + [
        "sandbox",
        "stripped_env_keys",
        "notice",
    ]


def test_a_response_from_a_newer_daemon_keeps_working() -> None:
    answer = b'{"command": "ls", "exit_code": 0, "sandbox": "s", "added_later": 1}'
    assert RunResponse.from_json(answer).to_result() == Result(command="ls", exit_code=0)


def test_a_result_survives_the_round_trip() -> None:
    result = Result(
        command="yes | head",
        stdout="y\n",
        stderr="e",
        exit_code=None,
        signal=9,
        timed_out=True,
        duration_s=1.25,
        stdout_dropped_bytes=10,
        stderr_dropped_bytes=2,
        error="boom",
        oom_killed=True,
        stdout_file="/tmp/logos-output/1.out",
        stderr_file="/tmp/logos-output/1.err",
    )
    wire = RunResponse.from_result(result, sandbox="sandboxd-x", stripped_env_keys=["A_TOKEN"])
    back = RunResponse.from_json(TypeAdapter(RunResponse).dump_json(wire))
    assert back.to_result() == result
    assert (back.sandbox, back.stripped_env_keys) == ("sandboxd-x", ["A_TOKEN"])


def test_unknown_request_fields_are_refused_by_name() -> None:
    with pytest.raises(ValidationError) as caught:
        RunRequest.model_validate_json('{"command": "true", "timeout": 5}')
    assert caught.value.errors()[0]["type"] == "extra_forbidden"
    assert caught.value.errors()[0]["loc"] == ("timeout",)


@pytest.mark.parametrize(
    "body",
    [
        {"command": ""},
        {"command": "a\x00b"},
        {"command": "true", "timeout_s": 0},
        {"command": "true", "session": "has space"},
        {"command": "true", "session": "x" * 65},
        {"command": "true", "max_output_bytes": 10},
        {"command": "true", "network": "yes"},
        {"command": "true", "env": {"A": 1}},
        {"command": "true", "allowed_paths": [{"path": "/x", "mode": "ro"}]},
    ],
)
def test_malformed_requests_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RunRequest.model_validate_json(json.dumps(body))


def test_request_defaults() -> None:
    request = RunRequest.model_validate({"command": "ls"})
    assert request.session == "default" and request.network is False
    assert request.timeout_s is None and request.allowed_paths == ()


def test_session_ids() -> None:
    assert is_valid_session_id("run-1.a_b")
    assert not is_valid_session_id("../etc") and not is_valid_session_id("")


def test_temenos_request_shape_and_session_from_caller_id() -> None:
    request = TemenosRunRequest.model_validate_json(
        json.dumps(
            {
                "command": "ls",
                "env": {"A": "1"},
                "allowed_paths": [{"path": "/w", "read_only": False}],
                "network": False,
                "timeout": 30,
                "caller_id": "lenos-42",
                "auth_token": "jwt",
            }
        )
    )
    assert request.session_id() == "lenos-42"
    odd = TemenosRunRequest.model_validate({"command": "ls", "caller_id": "agent:42/x"})
    assert is_valid_session_id(odd.session_id())
    assert odd.session_id() == TemenosRunRequest(command="ls", caller_id="agent:42/x").session_id()
    assert TemenosRunRequest(command="ls").session_id() == "default"


def test_temenos_response_omits_empty_stripped_keys() -> None:
    answer = TemenosRunResponse(stdout="o", stderr="", exit_code=-1)
    assert answer.model_dump(exclude_none=True) == {"stdout": "o", "stderr": "", "exit_code": -1}


def test_importing_the_wire_models_and_client_does_not_import_docker() -> None:
    code = (
        "import sys, sandboxd.api, sandboxd.paths, sandboxd.client.connection, "
        "sandboxd.client.runner; "
        "print('docker' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
