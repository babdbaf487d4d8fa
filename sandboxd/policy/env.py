"""Which env names a request may pass into a sandbox: valid names, single-line values, and
none that looks like it holds a secret (a token, a key, a password), unless the config's
allow_env_keys names it."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence

from sandboxd.policy.errors import PolicyError

SECRET_ENV_WORDS: frozenset[str] = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "AUTH",
        "AUTHORIZATION",
        "BEARER",
        "JWT",
        "KEY",
        "KEYS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "PWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "COOKIE",
        "COOKIES",
        "DSN",
        "PAT",
        "APIKEY",
    }
)
"""An env name holding one of these words (see `env_name_words`) is withheld.

WHY whole words: `KEY` must catch `KEY` and `AWS_ACCESS_KEY_ID` but not `KEYBOARD` or
`MONKEY_LEVEL`; `PASS` catches `SMTP_PASS` but not `PASSTHROUGH` or `BYPASS_CACHE`; `AUTH`
catches `AUTH_HEADER` but not `GIT_AUTHOR_NAME`.
"""

SECRET_ENV_FRAGMENTS: tuple[str, ...] = (
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "APIKEY",
    "PRIVATEKEY",
    "ACCESSKEY",
    "CREDENTIAL",
    "DATABASE_URL",
)
"""Withheld wherever they appear in the upper-cased name, even inside a word (`PGPASSWORD`,
`CLIENTSECRET`): none of them is part of a harmless word. `DATABASE_URL` holds a password."""

SHELL_ENV_NAMES: frozenset[str] = frozenset({"PWD"})
"""Names the shell sets itself: `PWD` alone is the working directory (`MYSQL_PWD` is a password)."""

_ENV_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""One word of a name part: an upper-case run (`API` in `APIKey`), a capitalised or
lower-case word (`Token` in `accessToken`), or digits."""
_ENV_SEPARATOR_RE = re.compile(r"[_.-]+")


def env_name_words(name: str) -> list[str]:
    """The upper-cased words of an env name: split on `_`, `-`, `.` and camelCase
    boundaries (`npm_config__authToken` is NPM, CONFIG, AUTH, TOKEN)."""
    return [
        word.upper()
        for part in _ENV_SEPARATOR_RE.split(name)
        for word in _ENV_WORD_RE.findall(part)
    ]


def looks_secret(name: str) -> bool:
    """Whether an env name looks like it holds a secret (a token, key, password, …)."""
    if name in SHELL_ENV_NAMES:
        return False
    upper = name.upper()
    if any(fragment in upper for fragment in SECRET_ENV_FRAGMENTS):
        return True
    return any(word in SECRET_ENV_WORDS or word.endswith("TOKEN") for word in env_name_words(name))


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def filter_env(
    env: Mapping[str, str], allow_env_keys: Sequence[str]
) -> tuple[dict[str, str], list[str]]:
    """(the env to pass, the sorted secret-looking keys withheld); `allow_env_keys`: names or
    fnmatch patterns passed all the same. Malformed: PolicyError."""
    passed: dict[str, str] = {}
    stripped: list[str] = []
    for name, value in env.items():
        if not _ENV_NAME_RE.fullmatch(name):
            raise PolicyError(
                "invalid_env",
                f"env name {name!r} is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)",
                status=400,
            )
        if any(c in value for c in "\x00\n\r"):
            raise PolicyError(
                "invalid_env",
                f"env value of {name} contains a NUL or line break: pass single-line values",
                status=400,
            )
        if _is_secret(name, allow_env_keys):
            stripped.append(name)
        else:
            passed[name] = value
    return passed, sorted(stripped)


def _is_secret(name: str, allow_env_keys: Sequence[str]) -> bool:
    if any(fnmatch.fnmatchcase(name, allowed) for allowed in allow_env_keys):
        return False
    return looks_secret(name)
