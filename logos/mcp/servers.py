"""Which MCP servers a run is given: stdio commands or streamable-HTTP URLs, from a config file
in the `mcpServers` form that Claude Code, Cursor and VS Code use, or one `--mcp` at a time."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_DEFAULT_START_TIMEOUT_S = 30.0


class McpConfigError(ValueError):
    """A server description that cannot be used; the message says what to change."""


@dataclass(frozen=True)
class McpServer:
    """One MCP server: `command` (argv, run over stdio) or `url` (streamable HTTP)."""

    name: str
    """What the model calls it by: `mcp NAME TOOL {...}`."""
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """For a command: set on top of the environment the MCP SDK passes on (PATH, HOME, ...)."""
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """For a URL: sent with each request (e.g. Authorization)."""
    start_timeout_s: float = _DEFAULT_START_TIMEOUT_S
    """How long it may take to start and list its tools."""

    def __post_init__(self) -> None:
        if NAME.fullmatch(self.name) is None:
            raise McpConfigError(f"MCP server name {self.name!r}: use 1 to 32 of A-Z a-z 0-9 _ -")
        if bool(self.command) == (self.url is not None):
            raise McpConfigError(
                f"MCP server {self.name}: give either a command (stdio) or a url (HTTP)"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise McpConfigError(f"MCP server {self.name}: url {self.url!r} must be http(s)://")
        if not 0 < self.start_timeout_s < 3600:
            raise McpConfigError(f"MCP server {self.name}: start_timeout_s must be in (0, 3600)")

    @property
    def where(self) -> str:
        return self.url if self.url is not None else shlex.join(self.command)


def load_mcp_config(path: Path) -> list[McpServer]:
    """The servers of a JSON file `{"mcpServers": {"NAME": {"command": ..., "args": [...],
    "env": {...}} | {"url": ..., "headers": {...}}}}`."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise McpConfigError(f"cannot read the MCP config {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"the MCP config {path} is not JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(
            f'the MCP config {path} needs an "mcpServers" object: {{"mcpServers": {{"NAME": '
            '{"command": "...", "args": []}}}'
        )
    return [_server(name, entry, f"{path}: {name}") for name, entry in servers.items()]


def parse_mcp_option(value: str) -> list[McpServer]:
    """`--mcp`: a config file, `NAME=URL`, or `NAME=COMMAND ARGS...`."""
    name, sep, rest = value.partition("=")
    if not sep or NAME.fullmatch(name) is None:
        path = Path(value).expanduser()
        if path.exists() or value.endswith(".json"):
            return load_mcp_config(path)
        raise McpConfigError(
            f"--mcp {value!r}: give a config file (mcpServers JSON), NAME=URL or "
            "NAME='COMMAND ARGS'"
        )
    if rest.startswith(("http://", "https://")):
        return [McpServer(name=name, url=rest)]
    try:
        argv = tuple(shlex.split(rest))
    except ValueError as exc:
        raise McpConfigError(f"--mcp {value!r}: {exc}") from None
    return [McpServer(name=name, command=argv)]


def _server(name: str, entry: Any, where: str) -> McpServer:
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: each server is an object with a command or a url")
    known = {"command", "args", "env", "cwd", "url", "headers", "type", "startTimeoutS"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise McpConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    command = entry.get("command")
    args = entry.get("args", [])
    if command is not None and (
        not isinstance(command, str)
        or not isinstance(args, list)
        or not all(isinstance(a, str) for a in args)
    ):
        raise McpConfigError(f"{where}: command is a string and args a list of strings")
    for key in ("env", "headers"):
        value = entry.get(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise McpConfigError(f"{where}: {key} is an object of strings")
    try:
        return McpServer(
            name=name,
            command=() if command is None else (command, *args),
            env=entry.get("env", {}),
            cwd=entry.get("cwd"),
            url=entry.get("url"),
            headers=entry.get("headers", {}),
            start_timeout_s=float(entry.get("startTimeoutS", _DEFAULT_START_TIMEOUT_S)),
        )
    except (TypeError, ValueError) as exc:
        raise McpConfigError(f"{where}: {exc}") from None
