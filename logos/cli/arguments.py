"""The `logos` command's arguments: the commands, their options, and the flags they give.

logos [OPTIONS] "TASK"          run a task (same as `logos run`)
logos resume FILE ["FOLLOW-UP"] continue a recorded run
logos show FILE                 read a recorded run
logos exec < message            run one message's <cmd> blocks, print the <result>
logos doctor                    check the provider, the runner and the sandbox
logos memory {list,show,set,forget}  the memory notes new runs start with
logos models [{list,pull,rm}]   GGUF models from the Hugging Face Hub, in its cache
logos serve                     runs as a service over HTTP (`pip install 'logos[serve]'`)
logos batch TASKS.jsonl --out DIR   run many tasks, each judged by its check
logos project {create,agent,send,follow,…}  several agents in one chat, on a logos serve
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from logos.approvals.approval import APPROVAL_MODES, ApprovalMode
from logos.cli.project_command import SERVERS_SANDBOX, add_project_options
from logos.options.declarations import (
    ALLOW,
    ALLOW_HOST,
    APPROVAL_RULES,
    APPROVE,
    BACKGROUND_AFTER,
    BASE_URL,
    CHECK_BACK,
    CONFIG,
    CONTEXT_SIZE,
    DEFAULT_SANDBOX_KIND,
    FIRST_BLOCK,
    GGUF,
    GRAMMAR,
    IMAGE,
    MAX_COST,
    MAX_STEPS,
    MAX_TIME,
    MAX_TOKENS,
    MAX_TOTAL_TOKENS,
    MCP,
    MODEL,
    NETWORK,
    PROMPT_STYLE,
    PROVIDER,
    SANDBOX,
    SANDBOX_TOKEN_FILE,
    SOCKET,
    TEMPERATURE,
    THREADS,
    TIMEOUT,
    TRAJECTORY,
    YES,
)
from logos.options.option import add_flag, parse_positive, parse_whole
from logos.providers.registry import PROVIDER_KINDS
from logos.runners.sandboxes import installed_kinds
from logos.settings.config_file import CHOICES
from logos.settings.serve_table import DEFAULT_PORT
from logos.version import logos_version

_ABOUT: dict[str, tuple[str, str]] = {
    "run": (
        "run a task (the default command)",
        "Run TASK to its end and print the model's answer. The answer goes to "
        "stdout (when stdout is a terminal, all prose streams there); commands, their "
        "output and a summary go to stderr. Every step is saved to a trajectory file.",
    ),
    "resume": (
        "continue a recorded run",
        "Continue the conversation of a trajectory file, appending to it. The "
        "provider, model, sandbox and working directory are the run's unless options say "
        "otherwise.",
    ),
    "show": (
        "show a recorded run",
        "Print a trajectory for reading: prompts, the model's prose, commands "
        "with the tail of their output, decisions, and how each run ended.",
    ),
    "exec": (
        "run the <cmd> blocks of a message read from stdin",
        "Read an assistant message from stdin, run its <cmd> blocks concurrently "
        "and print the <result> envelope the model reads next. Exit 0 when every block "
        "succeeded, 1 when any failed, 2 on a usage or setup error. Running locally needs "
        "--yes (stdin holds the message, so nothing can be confirmed).",
    ),
    "doctor": (
        "check the provider, the runner and the sandbox",
        "Send the model a one-token request, run `true` where commands would "
        "run, and with --sandbox check the sandbox daemon's health. Prints ok or FAIL with "
        "the fix for each; exits 1 when any check fails.",
    ),
    "memory": (
        "list, show, set or forget the memory notes new runs start with",
        "Memory notes are short notes by key (trimmed, lower-case) that every "
        "new run finds in its system prompt. They live in $XDG_STATE_HOME/logos/memory.json "
        "(~/.local/state/logos without XDG_STATE_HOME), private to you.",
    ),
    "models": (
        "list, download or remove the GGUF models logos runs offline",
        "GGUF models from the Hugging Face Hub, written hf:OWNER/REPO/FILE.gguf "
        "(add @REVISION for another branch, tag or commit), kept in huggingface_hub's cache "
        "($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub); HF_ENDPOINT, "
        "HF_HUB_OFFLINE and HF_TOKEN apply. Without an action: list.",
    ),
    "serve": (
        "serve runs over HTTP: live events, approvals, sessions, memory, a web page",
        "Start the logos server (needs pip install 'logos[serve]'). Every "
        "request needs the bearer token it creates on first start (its path is printed); "
        "the printed URL opens the page with the token. Settings come from the config "
        "file, its [serve] table and these options.",
    ),
    "batch": (
        "run many tasks, each in a fresh workspace and judged by its check",
        "Run every task of TASKS.jsonl (one JSON object per line: id, prompt, "
        "workspace, and optional setup, check, max_steps, max_time, max_cost, image) in a "
        "fresh copy of its workspace, then its check there: exit 0 is success. Results, "
        "trajectories and a summary go to --out; running it again skips the tasks done. "
        "Exit 0 when every task passed, 1 when any did not (or a line was bad), 2 on an "
        "error, 130 on Ctrl-C (running tasks are recorded as canceled and run next time).",
    ),
    "view": (
        "open a saved run (a trajectory) or a batch's results.jsonl in the web page",
        "Serve the page on 127.0.0.1 with this one file (needs pip install "
        "'logos[serve]'): a trajectory in the run viewer, a batch's results as its report. "
        "Open the printed URL; Ctrl-C stops it.",
    ),
    "project": (
        "several agents in one chat, on a running logos serve",
        "Make projects, add agents, send messages and follow the chat of a "
        "running `logos serve`: the one named by --url or $LOGOS_SERVE_URL, else the one of "
        "yours that recorded where it listens (any port or socket), with its token.",
    ),
    "mcp": (
        "serve a `task` tool over MCP (stdio): another agent hands logos whole tasks",
        "An MCP server on stdin/stdout (needs pip install 'logos[mcp]') whose "
        "`task` tool runs a logos agent on a task with the model, runner and limits given "
        "here; a call can only lower the limits. Steps are reported as MCP progress, and "
        "cancelling a call stops its run. Commands that need approval are put to the person "
        "through the client (MCP elicitation) and refused where the client cannot ask. "
        "Each run is saved to a trajectory file and audited like `logos run`'s. With --http, "
        "it serves streamable HTTP on loopback behind a bearer token instead.",
    ),
}
"""Each command's help line and description, in the order `logos --help` lists them."""
COMMANDS = tuple(_ABOUT)
_RUN_APPROVAL_DEFAULT = "confirm for local bash on a terminal, auto in the sandbox"
DEFAULT_FOLLOW_UP = "Continue."
_SANDBOX_OPTION = SANDBOX.flag_names[0]


def with_command(arguments: Sequence[str]) -> list[str]:
    """The arguments with their command first: `logos "TASK"` is `logos run "TASK"`, and
    each `--sandbox` with its kind spelled out (see `_sandbox_kinds_spelled_out`)."""
    bare = SERVERS_SANDBOX if arguments[:1] == ["project"] else DEFAULT_SANDBOX_KIND
    arguments = _sandbox_kinds_spelled_out(arguments, bare)
    if arguments and arguments[0] not in (*COMMANDS, "-h", "--help", "--version"):
        return ["run", *arguments]
    return arguments


def _sandbox_kinds_spelled_out(arguments: Sequence[str], bare: str) -> list[str]:
    """`--sandbox KIND` when KIND is an installed sandbox kind, else `--sandbox=BARE` (the
    default kind; for `logos project agent`, the server's own).

    WHY: `--sandbox` takes an optional kind, and argparse would take whatever follows it as
    one, so `logos --sandbox "fix the test"` would ask for a kind called "fix the test".
    """
    spelled: list[str] = []
    kinds: set[str] | None = None
    for index, argument in enumerate(arguments):
        if argument == "--":
            return [*spelled, *arguments[index:]]
        if argument == _SANDBOX_OPTION:
            following = arguments[index + 1] if index + 1 < len(arguments) else None
            if kinds is None:
                kinds = installed_kinds()
            if following not in kinds:
                argument = f"{_SANDBOX_OPTION}={bare}"
        spelled.append(argument)
    return spelled


class UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """Raises on a usage error (argparse would exit), so that `--json` can report it too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def _command(commands: argparse._SubParsersAction[_Parser], name: str) -> _Parser:
    """A command's parser, with its help line and description from `_ABOUT`."""
    help_line, description = _ABOUT[name]
    return commands.add_parser(name, help=help_line, description=description)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="logos",
        usage=f'logos [OPTIONS] "TASK"\n       logos {{{",".join(COMMANDS)}}} ...',
        description="Give a model a task; it works on it through shell commands, which logos "
        "runs (locally after your confirmation, or in the sandboxd Docker sandbox) until it "
        "answers. `logos TASK` is short for `logos run TASK`.",
        epilog="Exit codes: 0 the model answered, 1 a limit stopped the run, 2 an error or "
        "bad usage, 130 interrupted (Ctrl-C), 128 + N stopped by signal N (143 SIGTERM, 129 "
        "a closed terminal, 141 stdout's reader left). See `logos run --help` for the options.",
    )
    parser.add_argument("--version", action="version", version=f"logos {logos_version()}")
    # WHY prog: argparse would start each command's usage with the whole usage above.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", prog="logos")

    run = _command(commands, "run")
    run.add_argument("task", nargs="?", metavar="TASK", help="what to do; - reads it from stdin")
    _task_options(run, trajectory=True)

    resume = _command(commands, "resume")
    resume.add_argument("file", metavar="FILE", help="the run's .jsonl trajectory")
    resume.add_argument(
        "follow_up",
        nargs="?",
        metavar="FOLLOW-UP",
        help=f'what to say next (default: "{DEFAULT_FOLLOW_UP}"); - reads it from stdin',
    )
    _task_options(resume, trajectory=False)

    show = _command(commands, "show")
    show.add_argument("file", metavar="FILE", help="the run's .jsonl trajectory")

    exec_ = _command(commands, "exec")
    _config_option(exec_)
    _runner_options(exec_)
    _approval_options(exec_, ("auto", "never-run"), "auto in the sandbox; local runs need --yes")

    doctor = _command(commands, "doctor")
    _model_options(doctor)
    _runner_options(doctor)

    _memory_command(commands)
    _models_command(commands)

    _serve_command(commands)
    _batch_command(commands)
    _view_command(commands)
    add_project_options(_command(commands, "project"))
    _mcp_command(commands)
    return parser


def _memory_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    memory = _command(commands, "memory")
    actions = memory.add_subparsers(dest="memory_action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every note, the most recent first")
    show_note = actions.add_parser("show", help="one note's text")
    show_note.add_argument("key", metavar="KEY")
    set_note = actions.add_parser("set", help="save a note (replacing one of the same key)")
    set_note.add_argument("key", metavar="KEY")
    set_note.add_argument("text", metavar="TEXT", help="the note; - reads it from stdin")
    forget = actions.add_parser("forget", help="remove a note")
    forget.add_argument("key", metavar="KEY")


def _serve_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    serve = _command(commands, "serve")
    _model_options(serve)
    add_flag(serve.add_argument_group("what its sandboxed runs may see, at most"), ALLOW)
    listen = serve.add_argument_group("where to listen")
    listen.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    listen.add_argument(
        "--port", type=_port, help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    listen.add_argument(
        "--socket",
        dest="listen_socket",
        metavar="PATH",
        help="serve on this Unix socket (created 0600) instead",
    )
    _switch(
        listen,
        "--allow-remote",
        help_text="allow an address other than loopback: anyone who can reach it and has the "
        "token runs commands on this machine",
    )


def _mcp_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    mcp = _command(commands, "mcp")
    _agent_options(mcp, "confirm through the client for local bash, auto in the sandbox")
    serving = mcp.add_argument_group("serving over HTTP instead of stdio")
    serving.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8766); needs a token",
    )
    serving.add_argument(
        "--token-file",
        metavar="FILE",
        help="the bearer token clients must send, read from FILE (created with a fresh token, "
        "mode 0600, if missing); default: $LOGOS_MCP_TOKEN",
    )
    _repeatable(
        serving,
        "--allow-origin",
        "ORIGIN",
        "a browser Origin allowed to call (default: none); repeatable",
    )


def _view_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    view = _command(commands, "view")
    view.add_argument("file", metavar="FILE", help="a trajectory .jsonl, or results.jsonl")
    view.add_argument("--port", type=_port, default=0, help="TCP port (default: a free one)")
    _switch(view, "--open", help_text="open the page in a browser too")


def _models_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    models = _command(commands, "models")
    _switch(models, "--json", help_text="list: print a JSON list")
    actions = models.add_subparsers(dest="models_action", metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="the models in the cache: spec, size and path; the default one is marked; then "
        "the models the default is chosen from, with their sizes and speed here",
    )
    # WHY SUPPRESS: a default here would overwrite `logos models --json list`'s flag.
    listing.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print a JSON list"
    )
    pull = actions.add_parser(
        "pull",
        help="download a model into the cache (resumes a cut download), then print its path",
    )
    pull.add_argument(
        "spec", nargs="?", metavar="SPEC", help="default: the default model for this machine"
    )
    remove = actions.add_parser("rm", help="remove a model from the cache")
    remove.add_argument("spec", metavar="SPEC", help="as logos models list shows it")


def _batch_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    batch = _command(commands, "batch")
    batch.add_argument("tasks", metavar="TASKS.jsonl", help="the task file")
    batch.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="where results.jsonl, summary.json and the trajectories go (created if missing)",
    )
    where = batch.add_argument_group("where tasks run")
    spread = where.add_mutually_exclusive_group()
    spread.add_argument(
        "--workers",
        type=parse_whole,
        default=1,
        metavar="N",
        help="tasks at once on this machine (default 1; at most the sandbox's session cap)",
    )
    spread.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the tasks on a Ray cluster (host:port, or auto); pip install 'logos[ray]'",
    )
    where.add_argument(
        "--prepare",
        metavar="CMD",
        help="run CMD once in a sandbox session of its own before the tasks (install what "
        "they all need); each task's session then starts from a copy of its /tmp and $HOME",
    )
    where.add_argument(
        "--cpus-per-task",
        type=parse_positive,
        default=1.0,
        metavar="N",
        help="--ray: CPUs Ray reserves for each task (default 1)",
    )
    where.add_argument(
        "--memory-per-task",
        type=parse_positive,
        metavar="GIB",
        help="--ray: memory Ray reserves for each task, in GiB (default: none)",
    )
    _model_options(batch)
    _runner_options(batch, allow=False, jobs=False)
    add_flag(
        batch.add_argument_group("approval"),
        YES,
        help="run the commands with local bash, unasked (without --sandbox, this is required)",
    )
    _limit_options(batch)
    _reply_options(batch)
    output = batch.add_argument_group("output")
    _switch(
        output,
        "--retry-failed",
        help_text="run the tasks that failed or hit an error in earlier runs again",
    )
    _switch(
        output,
        "--keep-workspaces",
        help_text="keep each task's workspace under DIR/workspaces (default: removed after it)",
    )
    _switch(
        output,
        "--json",
        help_text="print one JSON event per line on stdout: batch_start, task_end, batch_done",
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def _task_options(parser: argparse.ArgumentParser, *, trajectory: bool) -> None:
    """The options of a task's run: `run` and `resume`."""
    _agent_options(parser, _RUN_APPROVAL_DEFAULT)
    _output_options(parser, trajectory=trajectory)


def _agent_options(parser: argparse.ArgumentParser, approval_default: str) -> None:
    """The options of an agent's run: `run`, `resume` and the runs `logos mcp` starts."""
    _model_options(parser)
    _runner_options(parser)
    _mcp_option(parser)
    _approval_options(parser, APPROVAL_MODES, approval_default)
    _limit_options(parser)
    _reply_options(parser)


def _repeatable(
    container: argparse._ActionsContainer, flag: str, metavar: str, help_text: str
) -> None:
    """An option given once per value, collected into a list (empty when not given)."""
    container.add_argument(flag, action="append", default=[], metavar=metavar, help=help_text)


def _switch(container: argparse._ActionsContainer, *flags: str, help_text: str) -> None:
    """An option that turns something on (False when not given)."""
    container.add_argument(*flags, action="store_true", help=help_text)


def _mcp_option(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, MCP)


def _config_option(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, CONFIG)


def _model_options(parser: argparse.ArgumentParser) -> None:
    kinds = PROVIDER_KINDS.values()
    detected_from = [env for kind in kinds for env in (kind.api_key_env, kind.base_url_env)]
    group = parser.add_argument_group(
        "model",
        f"Detected from {', '.join(detected_from[:-1])} or {detected_from[-1]} when not given.",
    )
    add_flag(group, PROVIDER, choices=CHOICES[PROVIDER.key])
    for option in (MODEL, BASE_URL, GGUF, CONTEXT_SIZE, THREADS, TEMPERATURE):
        add_flag(group, option)
    _config_option(parser)


def _runner_options(
    parser: argparse.ArgumentParser, *, allow: bool = True, jobs: bool = True
) -> None:
    group = parser.add_argument_group("where commands run")
    for option in (SANDBOX, SOCKET, SANDBOX_TOKEN_FILE):
        add_flag(group, option)
    if allow:
        add_flag(group, ALLOW)
    for option in (NETWORK, ALLOW_HOST, TIMEOUT):
        add_flag(group, option)
    if jobs:
        add_flag(group, BACKGROUND_AFTER)
    add_flag(group, IMAGE)


_MODE_HELP = {
    "auto": "auto: run every command",
    "confirm": "confirm: ask for each (yes / no with a reason / always / edit)",
    "never-run": "never-run: run nothing, a dry run",
}


def _approval_options(
    parser: argparse.ArgumentParser, modes: Sequence[ApprovalMode], default: str
) -> None:
    group = parser.add_argument_group("approval")
    shown = "; ".join(_MODE_HELP[mode] for mode in modes) + f" (default: {default})"
    add_flag(group, APPROVE, help=shown, choices=modes)
    add_flag(group, YES)
    add_flag(group, APPROVAL_RULES)


def _limit_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("limits (exit 1 when one stops the run)")
    for option in (MAX_STEPS, MAX_COST, MAX_TIME, MAX_TOKENS, MAX_TOTAL_TOKENS):
        add_flag(group, option)


def _reply_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "the model's replies", "Catching and preventing the slips of small local models."
    )
    for option in (CHECK_BACK, GRAMMAR, FIRST_BLOCK):
        add_flag(group, option)
    add_flag(group, PROMPT_STYLE, choices=CHOICES[PROMPT_STYLE.key])


def _output_options(parser: argparse.ArgumentParser, *, trajectory: bool) -> None:
    group = parser.add_argument_group("output")
    _switch(group, "--json", help_text="print one JSON event per line on stdout (and nothing else)")
    if trajectory:
        add_flag(group, TRAJECTORY)
