"""Attack: pass a secret to a sandboxed command under an env name the filter does not recognise.

A request's env reaches every command of its sandbox, and a command may be steered by a prompt
injection into printing it. Names that look like secrets are withheld (and listed in
`stripped_env_keys`); the names here passed the old glob patterns (`*TOKEN`, `*_KEY`, …).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandboxd.policy.policy import Policy
from tests.support.sandboxd_harness import running_daemon

SECRET_NAMES = (
    # Passed the old patterns:
    "Authorization",
    "X_ACCESS_TOKEN_V2",
    "AUTH_HEADER",
    "KEY",
    "SSH_AUTH_SOCK",
    "MYSQL_PWD",
    "BEARER_TOKENS",
    "GITHUB_TOKEN_2",
    "DOCKER_CREDS",
    # Caught before, and still:
    "npm_config__authToken",
    "apiKey",
    "accessToken",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN",
    "github_token",
    "GH_PAT",
    "HF_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_APIKEY",
    "STRIPE_SECRET",
    "PGPASSWORD",
    "DB_PASSWD",
    "SMTP_PASS",
    "GPG_PASSPHRASE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SESSION_COOKIE",
    "SENTRY_DSN",
    "DATABASE_URL",
    "TEST_DATABASE_URL",
    "SSH_PRIVATE_KEY",
    "CLIENTSECRET",
    "MYAPITOKEN",
)
HARMLESS_NAMES = (
    "PATH",
    "HOME",
    "LANG",
    "TERM",
    "PWD",
    "PYTHONPATH",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "TOKENIZERS_PARALLELISM",
    "KEYBOARD",
    "KEYMAP",
    "MONKEY_LEVEL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "PASSTHROUGH",
    "COMPASS_HEADING",
    "BYPASS_CACHE",
    "PATCH_LEVEL",
    "LD_PRELOAD",
    "DISPLAY",
)


@pytest.fixture
def policy() -> Policy:
    return Policy(image="img:1")


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_secret_looking_name_is_withheld(policy: Policy, name: str) -> None:
    passed, stripped = policy.filter_env({name: "s3cret"})
    assert (passed, stripped) == ({}, [name])


@pytest.mark.parametrize("name", HARMLESS_NAMES)
def test_a_harmless_name_passes(policy: Policy, name: str) -> None:
    passed, stripped = policy.filter_env({name: "value"})
    assert (passed, stripped) == ({name: "value"}, [])


def test_allow_env_keys_still_lets_named_secrets_through() -> None:
    policy = Policy(image="img:1", allow_env_keys=("Authorization", "HF_*"))
    passed, stripped = policy.filter_env({"Authorization": "a", "HF_TOKEN": "b", "KEY": "c"})
    assert passed == {"Authorization": "a", "HF_TOKEN": "b"}
    assert stripped == ["KEY"]


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[httpx.Client]:
    with running_daemon(docker_client) as daemon, daemon.client() as client:
        yield client


@pytest.mark.docker
def test_a_sandboxed_command_never_sees_the_withheld_values(
    client: httpx.Client, tmp_path: Path
) -> None:
    withheld = ("Authorization", "X_ACCESS_TOKEN_V2", "AUTH_HEADER", "KEY")
    env = {**dict.fromkeys(withheld, "s3cret-value"), "GIT_AUTHOR_NAME": "visible"}
    response = client.post(
        "/v1/run",
        json={"command": "env", "env": env, "allowed_paths": [{"path": str(tmp_path)}]},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stripped_env_keys"] == sorted(withheld)
    assert "s3cret-value" not in body["stdout"]
    assert "GIT_AUTHOR_NAME=visible" in body["stdout"].splitlines()
