"""`logos project …`: a front for a running `logos serve`'s projects, in the terminal.

    logos project create NAME [--goal …] [--path DIR[:ro]]…   make a project, print its id
    logos project list                                        projects, agents and spend
    logos project agent PROJECT NAME [--captain] [--sandbox]  add an agent
    logos project send PROJECT "TEXT"                         send a message, follow its turn
    logos project follow PROJECT                              print the chat, then follow it
    logos project approve PROJECT ID [--deny] [--always]      answer a command's approval
    logos project guard PROJECT continue|stop|pick [AGENT]    answer a guard
    logos project stop PROJECT [--all]                        stop the turn (or the project)
    logos project resume PROJECT                              go on with a paused project

It speaks the server's HTTP API at --url, else $LOGOS_SERVE_URL, else where a running
`logos serve` recorded it listens (`logos.cli.serve_address`), with the token that server
keeps. PROJECT is an id or a name.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import httpx

from logos.access.token_file import TokenFileError, read_token_file
from logos.cli.errors import EXIT_OK, CliError
from logos.cli.project_chat import ChatPrinter
from logos.cli.serve_address import URL_ENV, ServerChoice, choose_server, unreachable
from logos.options.declarations import DEFAULT_SANDBOX_KIND
from logos.runners.sandboxes import installed_kinds
from logos.tls import tls_for, tls_problem

SERVERS_SANDBOX = ""
"""`logos project agent --sandbox` with no kind: the server's own sandbox, whichever it is."""
_TURN_ENDS = ("answered", "held", "stopped", "failed", "budget", "interrupted", "no-agent")


def add_project_options(project: argparse.ArgumentParser) -> None:
    project.add_argument(
        "--url",
        help=f"the server, or the path of its Unix socket (default: ${URL_ENV}, else where a "
        "running `logos serve` of yours recorded it listens, else its default address)",
    )
    project.add_argument(
        "--token-file", help="default: the token of the server `logos serve` recorded"
    )
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
    agent.add_argument(
        "--sandbox",
        nargs="?",
        const=SERVERS_SANDBOX,
        metavar="KIND",
        help="run its commands in the server's sandbox (of the kind its config's `sandbox` "
        f"names, {DEFAULT_SANDBOX_KIND} by default); KIND, if given, must be that one",
    )
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
    resume = actions.add_parser("resume", help="go on with a paused project (its queued messages)")
    resume.add_argument("project")


def project_command(args: argparse.Namespace, environ: Mapping[str, str], out: IO[str]) -> int:
    choice = choose_server(args.url, args.token_file, environ)
    with _client(choice, args) as client:
        try:
            return _ACTIONS[args.project_action](args, _Server(client, choice), out)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            problem = tls_problem(choice.url, exc)
            if problem is not None:
                raise CliError(f"cannot reach logos serve at {choice.url}: {problem}") from None
            raise CliError(unreachable(choice, _reason(exc))) from None
        except httpx.TransportError as exc:
            raise CliError(
                f"the connection to logos serve at {choice.url} broke ({_reason(exc)}): it may "
                "have stopped; see its output, and start it again with `logos serve`"
            ) from None


def _create_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
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
    made = server.ok(client.post("/v1/projects", json=body))
    print(made["id"], file=out)
    return EXIT_OK


def _list_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    for project in server.ok(client.get("/v1/projects"))["projects"]:
        spent = project["spent"]["tokens"]
        print(
            f"{project['id']}  {project['name']}  {project['status']}  {spent} tokens",
            file=out,
        )
        for agent in project["agents"]:
            kind = f"{agent['role']}, {agent['runner']}"
            print(
                f"  {agent['name']} ({kind}): {agent['status']}, {agent['spent']['tokens']} tokens",
                file=out,
            )
    return EXIT_OK


def _agent_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    if args.sandbox:
        _check_sandbox_kind(args.sandbox, server.choice)
    project_id = server.project_id(args.project)
    runner: dict[str, Any] = {"kind": "local" if args.sandbox is None else "sandbox"}
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
    made = server.ok(client.post(f"/v1/projects/{project_id}/agents", json=body))
    print(
        f"{made['name']}: {made['role']}, {made['runner']}, approval {made['approval']}",
        file=out,
    )
    return EXIT_OK


def _send_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    project_id = server.project_id(args.project)
    after = server.ok(client.get(f"/v1/projects/{project_id}"))["events"]
    sent = server.ok(client.post(f"/v1/projects/{project_id}/messages", json={"text": args.text}))
    if not args.no_follow:
        return _follow(server, project_id, after, out, sent["message"], name=args.project)
    print(sent["message"], file=out)
    return EXIT_OK


def _follow_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    return _follow(
        server, server.project_id(args.project), args.after, out, None, name=args.project
    )


def _approve_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    project_id = server.project_id(args.project)
    body = {"approve": not args.deny, "reason": args.reason, "always": args.always}
    decided = server.ok(
        client.post(f"/v1/projects/{project_id}/approvals/{args.approval}", json=body)
    )
    print(f"{'denied' if args.deny else 'approved'} ({decided['agent']})", file=out)
    return EXIT_OK


def _guard_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    project_id = server.project_id(args.project)
    body = {"action": args.action, "agent": args.agent}
    after = server.ok(client.get(f"/v1/projects/{project_id}"))["events"]
    server.ok(client.post(f"/v1/projects/{project_id}/guard", json=body))
    if args.action != "stop":
        return _follow(server, project_id, after, out, None, one_turn=True, name=args.project)
    return EXIT_OK


def _stop_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    project_id = server.project_id(args.project)
    scope = "project" if args.all else "turn"
    stopped = server.ok(client.post(f"/v1/projects/{project_id}/stop", json={"scope": scope}))
    print("stopping" if stopped["stopped"] else "no turn was running", file=out)
    if args.all:
        again = f"logos project resume {shlex.quote(args.project)}"
        print(f"the project is paused: `{again}` goes on", file=out)
    return EXIT_OK


def _resume_action(args: argparse.Namespace, server: _Server, out: IO[str]) -> int:
    client = server.client
    project_id = server.project_id(args.project)
    server.ok(client.post(f"/v1/projects/{project_id}/resume"))
    print("resumed", file=out)
    return EXIT_OK


_ACTIONS: dict[str, Callable[[argparse.Namespace, _Server, IO[str]], int]] = {
    "create": _create_action,
    "list": _list_action,
    "agent": _agent_action,
    "send": _send_action,
    "follow": _follow_action,
    "approve": _approve_action,
    "guard": _guard_action,
    "stop": _stop_action,
    "resume": _resume_action,
}
"""Each `logos project` action: its arguments, the server, where to print; the exit code."""


def _check_sandbox_kind(kind: str, choice: ServerChoice) -> None:
    """`--sandbox KIND`: an installed kind, and the server's own when its record says which.

    WHY: a server runs its sandboxed agents in one kind, its config's; a client cannot pick
    another per agent, so asking for one must not pass silently."""
    installed = installed_kinds()
    if kind not in installed:
        raise CliError(
            f"--sandbox {kind!r}: no such sandbox kind (installed: {', '.join(sorted(installed))})"
        )
    if choice.sandbox is not None and kind != choice.sandbox:
        raise CliError(
            f"--sandbox {kind}: the server at {choice.url} runs its sandboxed agents in "
            f"{choice.sandbox} (its config's `sandbox`): drop the kind, or start `logos serve` "
            f'with sandbox = "{kind}" in its config file'
        )


def _follow(
    server: _Server,
    project_id: str,
    after: int,
    out: IO[str],
    until_turn_of: str | None,
    *,
    one_turn: bool = False,
    name: str,
) -> int:
    """Print the chat from event `after`: with `until_turn_of`, until that message's turn
    ends; with `one_turn`, until the next turn ends; else as long as the server streams.
    A stream that ends first is resumed with Last-Event-ID. `name`: the project as the
    person named it (the commands printed for them to answer with name it so)."""
    printer = ChatPrinter(out, name)
    waiting = until_turn_of is not None or one_turn
    while True:
        for event_id, kind, data in server.events(project_id, after):
            after = event_id or after
            printer.show(kind, data)
            if (
                kind == "turn"
                and data.get("state") in _TURN_ENDS
                and (one_turn or data.get("message") == until_turn_of)
                and waiting
            ):
                return EXIT_OK
        if not waiting:
            return EXIT_OK


def _reason(exc: httpx.HTTPError) -> str:
    return str(exc) or type(exc).__name__


def _client(choice: ServerChoice, args: argparse.Namespace) -> httpx.Client:
    """A client of the chosen server, with its token; the address is checked first, as it is
    the first thing a caller gave."""
    base_url, transport = _address(choice)
    try:
        token = read_token_file(choice.token_file)
    except TokenFileError as exc:
        if choice.by_default and args.token_file is None and not choice.token_file.exists():
            stale = f" ({choice.stale})" if choice.stale else ""
            raise CliError(
                f"no logos serve is running for you: none recorded where it listens{stale}, "
                f"and there is no server token at {choice.token_file}. Start one with `logos "
                f"serve`, or name one with --url URL (or ${URL_ENV}) and --token-file FILE"
            ) from None
        raise CliError(
            f"{exc} (the token of the server at {choice.url}, {choice.source}; give the token "
            "file that server printed when it started with --token-file)"
        ) from None
    headers = {"authorization": f"Bearer {token}"}
    return httpx.Client(
        base_url=base_url,
        headers=headers,
        timeout=30,
        transport=transport,
        verify=tls_for(base_url),
    )


def _address(choice: ServerChoice) -> tuple[str, httpx.HTTPTransport | None]:
    """The base URL and transport of the chosen server: its socket (`logos serve --socket
    PATH`) or its http:// address."""
    url = choice.url
    if url.startswith(("unix:", "/", "~", ".")):
        socket_path = os.path.expanduser(url.removeprefix("unix:"))
        return "http://localhost", httpx.HTTPTransport(uds=socket_path)
    reason = "it names no http:// address"
    if url.startswith(("http://", "https://")):
        try:
            httpx.URL(url)
            return url, None
        except httpx.InvalidURL as exc:
            reason = str(exc)
    raise CliError(
        f"{url!r} ({choice.source}) is not where a logos serve can listen ({reason}): give "
        "http://HOST:PORT, or the path of its Unix socket"
    )


class _Server:
    """The chosen server, through its client: answers read, refusals explained."""

    def __init__(self, client: httpx.Client, choice: ServerChoice) -> None:
        self.client = client
        self.choice = choice

    def ok(self, response: httpx.Response) -> Any:
        if response.status_code == 401:
            raise CliError(
                f"the server at {self.choice.url} ({self.choice.source}) refused the token in "
                f"{self.choice.token_file} (401): give that server's token file with "
                "--token-file"
            )
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                error = response.text[:500]
            raise CliError(f"the server said {response.status_code}: {error}")
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"what answers at {self.choice.url} ({self.choice.source}) is not logos serve "
                f"(HTTP {response.status_code}, not JSON): check --url or ${URL_ENV}"
            ) from None

    def project_id(self, given: str) -> str:
        projects = self.ok(self.client.get("/v1/projects"))["projects"]
        for project in projects:
            if given in (project["id"], project["name"]):
                return str(project["id"])
        names = ", ".join(p["name"] for p in projects) or "none yet"
        raise CliError(
            f"no project {given!r} on this server (projects: {names}): logos project list"
        )

    def events(self, project_id: str, after: int) -> Iterator[tuple[int, str, dict[str, Any]]]:
        headers = {"last-event-id": str(after)} if after else {}
        with self.client.stream(
            "GET",
            f"/v1/projects/{project_id}/events",
            headers=headers,
            timeout=httpx.Timeout(10, read=None),
        ) as response:
            if response.status_code != 200:
                response.read()
                self.ok(response)
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


def _path(text: str) -> dict[str, Any]:
    read_only = text.endswith(":ro")
    path = text[:-3] if read_only else text.removesuffix(":rw")
    return {"path": os.path.abspath(os.path.expanduser(path)), "read_only": read_only}
