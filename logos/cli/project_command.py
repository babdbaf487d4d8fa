"""`logos project …`: a front for a running `logos serve`'s projects, in the terminal.

    logos project create NAME [--goal …] [--path DIR[:ro]]…   make a project, print its id
    logos project list                                        projects, agents and spend
    logos project agent PROJECT NAME [--captain] [--sandbox]  add an agent
    logos project send PROJECT "TEXT"                         send a message, follow its turn
    logos project follow PROJECT                              print the chat, then follow it
    logos project approve PROJECT ID [--deny] [--always]      answer a command's approval
    logos project guard PROJECT continue|stop|pick [AGENT]    answer a guard
    logos project stop PROJECT [--all]                        stop the turn (or the project)

It speaks the server's HTTP API with the token `logos serve` wrote (its state directory),
at --url (default: the server's default address). PROJECT is an id or a name.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from logos.access.token_file import TokenFileError, read_token_file
from logos.cli.errors import EXIT_OK, CliError
from logos.cli.paths import serve_dir
from logos.cli.project_chat import ChatPrinter
from logos.serve.settings import DEFAULT_PORT

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
TURN_ENDS = ("answered", "held", "stopped", "failed", "budget", "interrupted", "no-agent")


def add_project_options(project: argparse.ArgumentParser) -> None:
    project.add_argument(
        "--url",
        help=f"the server, or the path of its Unix socket (default $LOGOS_SERVE_URL, else "
        f"{DEFAULT_URL})",
    )
    project.add_argument("--token-file", help="default: the token `logos serve` wrote")
    actions = project.add_subparsers(dest="project_action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="make a project and print its id")
    create.add_argument("name")
    create.add_argument("--goal", default="")
    create.add_argument("--description", default="")
    create.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="DIR[:ro]",
        help="a directory its agents may use, at most (repeat; :ro for read-only)",
    )
    create.add_argument(
        "--host", action="append", default=[], help="a host sandboxed agents may reach"
    )
    create.add_argument(
        "--double-texting", choices=("queue", "inject", "interrupt"), default="queue"
    )
    create.add_argument("--max-tokens", type=int, help="the project's token budget")
    create.add_argument("--turn-max-tokens", type=int, help="each user turn's token budget")
    actions.add_parser("list", help="projects, their agents and what they spent")
    agent = actions.add_parser("agent", help="add an agent to a project")
    agent.add_argument("project")
    agent.add_argument("name")
    agent.add_argument("--captain", action="store_true", help="the captain (one per project)")
    agent.add_argument("--sandbox", action="store_true", help="run its commands in the sandbox")
    agent.add_argument("--path", action="append", default=[], metavar="DIR[:ro]")
    agent.add_argument("--approval", choices=("auto", "confirm", "never-run"))
    agent.add_argument(
        "--grant",
        action="store_true",
        help="let it reach beyond the project's paths and hosts (recorded)",
    )
    send = actions.add_parser("send", help="send a message and follow the chat until its turn ends")
    send.add_argument("project")
    send.add_argument("text")
    send.add_argument("--no-follow", action="store_true", help="send, print its id, and return")
    follow = actions.add_parser("follow", help="print the chat, then follow it (Ctrl-C ends)")
    follow.add_argument("project")
    follow.add_argument("--after", type=int, default=0, help="start after this event id")
    approve = actions.add_parser("approve", help="approve (or deny) a command that waits")
    approve.add_argument("project")
    approve.add_argument("approval")
    approve.add_argument("--deny", action="store_true")
    approve.add_argument("--reason")
    approve.add_argument("--always", action="store_true", help="allow commands like it from now on")
    guard = actions.add_parser("guard", help="answer a guard that holds a handoff")
    guard.add_argument("project")
    guard.add_argument("action", choices=("continue", "stop", "pick"))
    guard.add_argument("agent", nargs="?", help="with pick: who goes on")
    stop = actions.add_parser("stop", help="stop the running turn")
    stop.add_argument("project")
    stop.add_argument("--all", action="store_true", help="stop the whole project (it pauses)")


def project_command(args: argparse.Namespace, environ: Mapping[str, str], out: IO[str]) -> int:
    with _client(args, environ) as client:
        action = args.project_action
        if action == "create":
            body: dict[str, Any] = {
                "name": args.name,
                "goal": args.goal,
                "description": args.description,
                "allowed_paths": [_path(text) for text in args.path],
                "allowed_hosts": args.host,
                "double_texting": args.double_texting,
                "budget": {
                    key: value
                    for key, value in (
                        ("max_tokens", args.max_tokens),
                        ("turn_max_tokens", args.turn_max_tokens),
                    )
                    if value is not None
                },
            }
            made = _ok(client.post("/v1/projects", json=body))
            print(made["id"], file=out)
        elif action == "list":
            for project in _ok(client.get("/v1/projects"))["projects"]:
                spent = project["spent"]["tokens"]
                print(
                    f"{project['id']}  {project['name']}  {project['status']}  {spent} tokens",
                    file=out,
                )
                for agent in project["agents"]:
                    kind = f"{agent['role']}, {agent['runner']}"
                    print(
                        f"  {agent['name']} ({kind}): {agent['status']}, "
                        f"{agent['spent']['tokens']} tokens",
                        file=out,
                    )
        elif action == "agent":
            project_id = _project_id(client, args.project)
            runner: dict[str, Any] = {"kind": "sandbox" if args.sandbox else "local"}
            if args.path:
                runner["allowed_paths"] = [_path(text) for text in args.path]
            body = {
                "name": args.name,
                "role": "captain" if args.captain else "talon",
                "runner": runner,
                "grant": args.grant,
            }
            if args.approval:
                body["approval"] = args.approval
            made = _ok(client.post(f"/v1/projects/{project_id}/agents", json=body))
            print(
                f"{made['name']}: {made['role']}, {made['runner']}, approval {made['approval']}",
                file=out,
            )
        elif action == "send":
            project_id = _project_id(client, args.project)
            after = _ok(client.get(f"/v1/projects/{project_id}"))["events"]
            sent = _ok(client.post(f"/v1/projects/{project_id}/messages", json={"text": args.text}))
            if args.no_follow:
                print(sent["message"], file=out)
            else:
                return _follow(client, project_id, after, out, until_turn_of=sent["message"])
        elif action == "follow":
            return _follow(client, _project_id(client, args.project), args.after, out, None)
        elif action == "approve":
            project_id = _project_id(client, args.project)
            body = {"approve": not args.deny, "reason": args.reason, "always": args.always}
            decided = _ok(
                client.post(f"/v1/projects/{project_id}/approvals/{args.approval}", json=body)
            )
            print(f"{'denied' if args.deny else 'approved'} ({decided['agent']})", file=out)
        elif action == "guard":
            project_id = _project_id(client, args.project)
            body = {"action": args.action, "agent": args.agent}
            after = _ok(client.get(f"/v1/projects/{project_id}"))["events"]
            _ok(client.post(f"/v1/projects/{project_id}/guard", json=body))
            if args.action != "stop":
                return _follow(client, project_id, after, out, until_turn_of=None, one_turn=True)
        elif action == "stop":
            project_id = _project_id(client, args.project)
            scope = "project" if args.all else "turn"
            stopped = _ok(client.post(f"/v1/projects/{project_id}/stop", json={"scope": scope}))
            print("stopping" if stopped["stopped"] else "no turn was running", file=out)
    return EXIT_OK


def _follow(
    client: httpx.Client,
    project_id: str,
    after: int,
    out: IO[str],
    until_turn_of: str | None,
    *,
    one_turn: bool = False,
) -> int:
    """Print the chat from event `after`: with `until_turn_of`, until that message's turn
    ends; with `one_turn`, until the next turn ends; else as long as the server streams.
    A stream that ends first is resumed with Last-Event-ID."""
    printer = ChatPrinter(out)
    waiting = until_turn_of is not None or one_turn
    while True:
        for event_id, kind, data in _events(client, project_id, after):
            after = event_id or after
            printer.show(kind, data)
            if (
                kind == "turn"
                and data.get("state") in TURN_ENDS
                and (one_turn or data.get("message") == until_turn_of)
                and waiting
            ):
                return EXIT_OK
        if not waiting:
            return EXIT_OK


def _events(
    client: httpx.Client, project_id: str, after: int
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    headers = {"last-event-id": str(after)} if after else {}
    with client.stream(
        "GET",
        f"/v1/projects/{project_id}/events",
        headers=headers,
        timeout=httpx.Timeout(10, read=None),
    ) as response:
        if response.status_code != 200:
            response.read()
            _ok(response)
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
                continue
            if "data" in fields and "event" in fields:
                yield int(fields.get("id", "0")), fields["event"], json.loads(fields["data"])
            fields = {}


def _client(args: argparse.Namespace, environ: Mapping[str, str]) -> httpx.Client:
    url = args.url or environ.get("LOGOS_SERVE_URL") or DEFAULT_URL
    token_file = Path(args.token_file) if args.token_file else serve_dir(environ) / "token"
    try:
        token = read_token_file(token_file)
    except TokenFileError as exc:
        raise CliError(str(exc)) from None
    headers = {"authorization": f"Bearer {token}"}
    if url.startswith(("unix:", "/", "~")):  # the socket of `logos serve --socket PATH`
        transport = httpx.HTTPTransport(uds=os.path.expanduser(url.removeprefix("unix:")))
        return httpx.Client(
            base_url="http://localhost", headers=headers, timeout=30, transport=transport
        )
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            error = response.text[:500]
        raise CliError(f"the server said {response.status_code}: {error}")
    return response.json()


def _project_id(client: httpx.Client, given: str) -> str:
    projects = _ok(client.get("/v1/projects"))["projects"]
    for project in projects:
        if given in (project["id"], project["name"]):
            return str(project["id"])
    names = ", ".join(p["name"] for p in projects) or "none yet"
    raise CliError(f"no project {given!r} on this server (projects: {names}): logos project list")


def _path(text: str) -> dict[str, Any]:
    read_only = text.endswith(":ro")
    path = text[:-3] if read_only else text.removesuffix(":rw")
    return {"path": os.path.abspath(os.path.expanduser(path)), "read_only": read_only}
