"""The `logos` command: parse the arguments (`arguments`), resolve the settings
(`logos.settings`), dispatch to the command, exit.

Each command's own module is imported when that command runs, so that a `logos` start pays
only for what it runs.

Exit codes: 0 final answer, 1 stopped by a limit, 2 error or bad usage, 130 Ctrl-C; another
stop signal N gives 128 + N (143 SIGTERM, 129 a closed terminal, 141 stdout's reader left).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

import anyio

from logos.cli.arguments import DEFAULT_FOLLOW_UP, UsageError, build_parser, with_command
from logos.cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_STOPPED, CliError
from logos.cli.exec_message import ExecPlan, execute_message, read_blocks
from logos.cli.json_events import JsonEvents
from logos.cli.model import OpenModel, local_gguf, open_model
from logos.cli.paths import memory_path, runs_dir
from logos.cli.render import HumanRenderer, make_console
from logos.cli.report import Reporter
from logos.cli.streams import GuardedOutput, guarded_text
from logos.cli.task import NewTrajectory, TaskPlan, run_task
from logos.commands.memory import memory_commands
from logos.commands.memory_store import MemoryStore
from logos.errors import RecordFileError, SettingsError
from logos.mcp.servers import McpConfigError, McpServer, parse_mcp_option
from logos.options.declarations import (
    ALLOW,
    DOWNLOAD_MODELS,
    LOCAL_MODEL,
    MCP,
    SANDBOX,
    TRAJECTORY,
    YES,
)
from logos.options.option import Values
from logos.protocol.envelope import command_preview, format_results
from logos.providers.choice import ProviderChoice
from logos.providers.pricing import price_for
from logos.records.events import RunEvents, RunSummary
from logos.records.trajectory import Trajectory, load_trajectory
from logos.settings import model_choice, resolution
from logos.settings.config_file import load_config_file
from logos.settings.model_choice import HubModelSpec, LocalModel
from logos.settings.resolution import Flags, config_path
from logos.settings.runners import RunnerSpec, sandbox_problem


def main(argv: Sequence[str] | None = None) -> int:
    arguments = with_command(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not arguments:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        args = parser.parse_args(arguments)
    except UsageError as exc:
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc.message}", file=sys.stderr)
        if arguments[0] in ("run", "resume") and "--json" in arguments:
            events = RunEvents(lambda event: print(event.model_dump_json()))
            events.done(RunSummary(stop_reason="error", error=exc.message))
        return EXIT_ERROR
    try:
        return _COMMANDS[args.command](args, Flags.parsed(args))
    except CliError as exc:
        print(f"logos: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except (SettingsError, RecordFileError) as exc:
        print(f"logos: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception:  # a bug: exit 2 (an error), never 1, which would read "a limit stopped it"
        traceback.print_exc()
        print(
            "logos: internal error: this is a bug in logos; please report it with the "
            "traceback above",
            file=sys.stderr,
        )
        return EXIT_ERROR


# Commands ----------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace, flags: Flags) -> int:
    with _run_streams() as streams:
        reporter: Reporter = (
            JsonEvents(streams.out, streams.err)
            if args.json
            else HumanRenderer(streams.out, streams.err, os.environ)
        )
        try:
            return _run_or_resume(args, flags, reporter, streams.out_guard)
        except (CliError, SettingsError, RecordFileError) as exc:
            reporter.error(exc.message)
            if args.json:
                reporter.done(RunSummary(stop_reason="error", error=exc.message))
            return exc.exit_code if isinstance(exc, CliError) else EXIT_ERROR
        except KeyboardInterrupt:
            if args.json:
                reporter.done(RunSummary(stop_reason="canceled"))
            return EXIT_INTERRUPTED


def _run_or_resume(
    args: argparse.Namespace, flags: Flags, reporter: Reporter, output: GuardedOutput | None
) -> int:
    recorded: Trajectory | None = None
    if args.command == "resume":
        recorded = load_trajectory(Path(args.file))
        for warning in recorded.warnings:
            reporter.notice(warning)
        prompt = _read_text_argument(args.follow_up or DEFAULT_FOLLOW_UP, "follow-up")
    else:
        if args.task is None:
            raise CliError('give a task: logos "TASK" (or - to read it from stdin)')
        prompt = _read_text_argument(args.task, "task")
    prepared = _prepare_task(flags, reporter, prompt, recorded, terminal=_stdin_is_terminal())
    plan = replace(prepared.plan, output=output)
    with _open_model(prepared, flags, reporter, plain=args.json) as model:
        return anyio.run(run_task, plan, model, reporter)


@dataclass(frozen=True)
class _PreparedTask:
    """A task's plan, and the model it needs (a provider, or a local GGUF to serve)."""

    plan: TaskPlan
    choice: ProviderChoice | None
    local: LocalModel | None


def _prepare_task(
    flags: Flags,
    reporter: Reporter,
    prompt: str,
    recorded: Trajectory | None,
    *,
    terminal: bool,
) -> _PreparedTask:
    """Resolve and check everything a task's run needs, before any model is opened;
    `terminal`: a person can be asked about commands (at a terminal, or through an MCP
    client)."""
    environ = os.environ
    config = load_config_file(config_path(flags), environ)
    mcp_servers = _mcp_servers(flags, config)
    chosen = model_choice.choose_model(flags, config, environ, recorded)
    local, choice = chosen.local, chosen.provider
    if chosen.note:
        reporter.notice(chosen.note)

    recorded_sandbox = None if recorded is None else recorded.header.sandbox_kind()
    sandbox = resolution.sandbox_choice(flags[SANDBOX], recorded_sandbox, config[SANDBOX])
    spec = resolution.runner_spec(flags, config, sandbox)
    approval = resolution.approval_mode(flags, sandbox is not None, terminal)
    options = resolution.exec_options(flags, config, _default_dir(flags, recorded))
    if flags[ALLOW] and not sandbox:
        reporter.notice(
            "without --sandbox, commands can reach the whole machine: --allow only sets "
            "their working directory (the first path)"
        )
    rules = resolution.approval_rules(flags, config)
    if sandbox:
        _require_sandbox(spec)
    replies = resolution.replies(flags, config, choice)
    memory = MemoryStore(memory_path(environ))
    system_prompt = resolution.system_prompt(
        spec, options, config, recorded, memory, replies.prompt_style
    )
    limits = resolution.limits(flags, config)
    if choice is not None and limits.max_cost_usd is not None:
        _notice_unknown_price(choice, reporter)

    # WHY: a rule's "confirm" verdict asks on the terminal in any mode, when there is one.
    can_ask_rules = rules is not None and approval != "never-run" and terminal
    plan = TaskPlan(
        prompt=prompt,
        history=recorded.history() if recorded is not None else (),
        runner=spec,
        exec_options=options,
        system_prompt=system_prompt,
        approval=approval,
        limits=limits,
        trajectory=recorded
        if recorded is not None
        else NewTrajectory(task=prompt, directory=str(runs_dir(environ)), path=flags[TRAJECTORY]),
        environ=environ,
        input_fd=sys.stdin.fileno() if approval == "confirm" or can_ask_rules else -1,
        rules=rules,
        replies=replies,
        loop_commands=memory_commands(memory),
        mcp_servers=mcp_servers,
    )
    return _PreparedTask(plan, choice, local)


def _default_dir(flags: Flags, recorded: Trajectory | None) -> str:
    """Where commands start without --allow: a resumed run's directory, else this one."""
    allowed = flags[ALLOW]
    if recorded is None or allowed:
        return os.getcwd()
    directory = recorded.header.cwd
    if not os.path.isdir(directory):
        raise CliError(
            f"the run's working directory {directory} no longer exists: choose one "
            "with --allow PATH:rw"
        )
    return directory


def _notice_unknown_price(choice: ProviderChoice, reporter: Reporter) -> None:
    if price_for(choice.model or "") is None:
        reporter.notice(
            f"--max-cost: logos does not know the price of {choice.model!r}, so the limit "
            "only applies if the server reports what each request cost"
        )


def _open_model(
    prepared: _PreparedTask, flags: Flags, reporter: Reporter, *, plain: bool
) -> contextlib.AbstractContextManager[OpenModel]:
    """The prepared task's model, opened (a local one downloaded first, if need be)."""
    gguf = None
    local = prepared.local
    if local is not None:
        if isinstance(local, HubModelSpec) and local.default:
            reporter.notice(
                f"no API key, base URL or --gguf: running the default local model {local.file} "
                "(logos doctor says how to choose another)"
            )
        # WHY here, after every other setting was checked: a typo must not cost a download.
        gguf = local_gguf(
            local,
            ask=_stdin_is_terminal() and sys.stderr.isatty() and not _accepts_downloads(flags),
            plain=plain,
        )
        reporter.notice(f"loading {gguf.path} with llama.cpp…")
    return open_model(prepared.choice, gguf)


def _mcp_servers(flags: Values, config: Values) -> list[McpServer]:
    try:
        given = [*(config[MCP] or ()), *(flags[MCP] or ())]
        servers = [server for value in given for server in parse_mcp_option(value)]
    except McpConfigError as exc:
        raise CliError(str(exc)) from None
    names = [server.name for server in servers]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CliError(f"--mcp: two MCP servers are named {', '.join(twice)}; rename one")
    if servers and importlib.util.find_spec("mcp") is None:
        raise CliError("--mcp needs the MCP SDK: pip install 'logos[mcp]'")
    return servers


def _accepts_downloads(flags: Flags) -> bool:
    """--yes, or `download_models = true` in the config file."""
    if flags[YES]:
        return True
    return bool(load_config_file(config_path(flags), os.environ)[DOWNLOAD_MODELS])


def _cmd_mcp(args: argparse.Namespace, flags: Flags) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise CliError("logos mcp needs the MCP SDK: pip install 'logos[mcp]'")
    from logos.access.token_file import TokenFileError, launch_token
    from logos.cli.mcp_command import ProgressReporter, serve_tasks
    from logos.mcp.loopback_http import (
        LoopbackHttp,
        McpHttpError,
        check_loopback,
        parse_http_address,
    )

    where = None
    if args.http is not None:
        try:
            host, port = parse_http_address(args.http)
            check_loopback("logos mcp", host)
            token_file = None if args.token_file is None else Path(args.token_file)
            token = launch_token(token_file, os.environ, "LOGOS_MCP_TOKEN")
        except (ValueError, McpHttpError, TokenFileError) as exc:
            raise CliError(str(exc)) from None
        where = LoopbackHttp("logos mcp", host, port, token, tuple(args.allow_origin))
    notices = ProgressReporter(lambda line: None)
    with contextlib.ExitStack() as opened:
        try:
            # WHY terminal=True: the person is asked through the MCP client, not stdin (the wire).
            prepared = _prepare_task(flags, notices, "", None, terminal=True)
            model = opened.enter_context(_open_model(prepared, flags, notices, plain=True))
        except (CliError, SettingsError, RecordFileError) as exc:
            if where is not None:  # WHY: a person started it on a terminal, and reads this
                raise
            return _serve_launch_failure(exc.message)
        plan = replace(prepared.plan, input_fd=-1)
        runs_in = (
            f"commands in a {plan.runner.sandbox} sandbox"
            if plan.runner.sandbox
            else "commands run on this machine"
        )
        try:
            anyio.run(serve_tasks, plan, model, f"model {model.model}, {runs_in}", where)
        except McpHttpError as exc:
            raise CliError(str(exc)) from None
    return EXIT_OK


def _serve_launch_failure(reason: str) -> int:
    """`logos mcp` over stdio saying why its launch failed (see logos.mcp.launch_failure)."""
    from logos.mcp.launch_failure import serve_launch_failure
    from logos.mcp.task_server import TASK_TOOL

    anyio.run(serve_launch_failure, "logos mcp", reason, [TASK_TOOL])
    return EXIT_ERROR


def _cmd_show(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.show import show_trajectory

    trajectory = load_trajectory(Path(args.file))
    for warning in trajectory.warnings:
        print(f"logos: {warning}", file=sys.stderr)
    with _guarded_stdout() as out:
        show_trajectory(trajectory, make_console(out, os.environ))
    return EXIT_OK


def _cmd_exec(args: argparse.Namespace, flags: Flags) -> int:
    config = load_config_file(config_path(flags), os.environ)
    sandbox = resolution.sandbox_choice(flags[SANDBOX], config[SANDBOX])
    spec = resolution.runner_spec(flags, config, sandbox)
    approval = resolution.asked_approval(flags)
    if approval is None and not sandbox:
        raise CliError(
            "logos exec reads the message from stdin, so it cannot ask before running its "
            "commands on this machine: pass --yes to run them, --sandbox to run them in "
            "sandboxd, or --approve never-run for a dry run"
        )
    options = resolution.exec_options(flags, config, os.getcwd(), jobs=False)
    blocks = read_blocks(_read_stdin("the message"))
    if blocks.unclosed is not None:
        print(
            "logos: the message ends in an unclosed <cmd> block (was it cut off?), which "
            f"was not run: {command_preview(blocks.unclosed)}",
            file=sys.stderr,
        )
    if not blocks.commands:
        if blocks.unclosed is not None:
            return EXIT_STOPPED
        print("logos: the message has no <cmd> blocks: nothing to run", file=sys.stderr)
        return EXIT_OK
    if sandbox:
        _require_sandbox(spec)
    plan = ExecPlan(
        commands=blocks.commands,
        runner=spec,
        exec_options=options,
        approval=approval or "auto",
        environ=os.environ,
        rules=resolution.approval_rules(flags, config),
    )
    results = anyio.run(execute_message, plan)
    with _guarded_stdout() as out:
        out.write(format_results(results) + "\n")
    succeeded = blocks.unclosed is None and all(result.ok for result in results)
    return EXIT_OK if succeeded else EXIT_STOPPED


def _cmd_doctor(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.doctor import doctor

    with _guarded_stdout() as out:
        return doctor(flags, make_console(out, os.environ))


def _cmd_memory(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.memory_command import memory_command

    store = MemoryStore(memory_path(os.environ))
    with _guarded_stdout() as out:
        return memory_command(args, store, out, lambda text: _read_text_argument(text, "note"))


def _cmd_models(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.models_command import models_command
    from logos.models.hf_hub import Hub

    pinned = load_config_file(config_path(flags), os.environ)[LOCAL_MODEL]
    with _guarded_stdout() as out:
        return models_command(
            args, Hub.from_environment(os.environ), out, sys.stderr, os.environ, pinned
        )


def _cmd_serve(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.serve_command import serve_command

    return serve_command(args, flags, os.environ)


def _cmd_batch(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.batch import cmd_batch

    return cmd_batch(args, flags)


def _cmd_view(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.view_command import view_command

    return view_command(args, sys.stderr)


def _cmd_project(args: argparse.Namespace, flags: Flags) -> int:
    from logos.cli.project_command import project_command

    with _guarded_stdout() as out:
        return project_command(args, os.environ, out)


_COMMANDS: dict[str, Callable[[argparse.Namespace, Flags], int]] = {
    "mcp": _cmd_mcp,
    "run": _cmd_run,
    "resume": _cmd_run,
    "show": _cmd_show,
    "exec": _cmd_exec,
    "batch": _cmd_batch,
    "doctor": _cmd_doctor,
    "memory": _cmd_memory,
    "models": _cmd_models,
    "serve": _cmd_serve,
    "view": _cmd_view,
    "project": _cmd_project,
}


# Input and output ---------------------------------------------------------------------------------


def _require_sandbox(spec: RunnerSpec) -> None:
    problem = sandbox_problem(spec)
    if problem is not None:
        raise CliError(problem)


def _read_text_argument(value: str, what: str) -> str:
    """The argument itself, or stdin when it is `-`."""
    text = _read_stdin(f"the {what}") if value == "-" else value
    if not text.strip():
        source = "read from stdin " if value == "-" else ""
        raise CliError(f"the {what} {source}is empty: say what the model should do")
    return text.strip()


def _read_stdin(what: str) -> str:
    """All of stdin; on a terminal, first say how to end it (else it looks like a hang)."""
    if _stdin_is_terminal():
        print(f"logos: type {what}, then press Ctrl-D on a line of its own", file=sys.stderr)
    return sys.stdin.read()


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # stdin was closed
        return False


@dataclass(frozen=True)
class _RunStreams:
    out: TextIO
    err: TextIO
    out_guard: GuardedOutput


@contextlib.contextmanager
def _run_streams() -> Iterator[_RunStreams]:
    """stdout and stderr for a run: guarded (see logos.cli.streams), stdout ours alone.

    WHY: native code (llama.cpp) and stray prints write to file descriptor 1; when stdout is
    a pipe or a file (`--json`, `> answer.txt`), those bytes would corrupt it. So fd 1 is
    pointed at stderr for the duration and our output goes to a copy of the real stdout.
    """
    sys.stdout.flush()
    reserved = not sys.stdout.isatty()
    out_fd = os.dup(1) if reserved else 1
    if reserved:
        os.dup2(2, 1)
    # WHY UTF-8 off a terminal: JSON lines and answers saved to files are read as UTF-8.
    out, out_guard = guarded_text(sys.stdout, out_fd, "utf-8" if reserved else None)
    err, _ = guarded_text(sys.stderr)
    try:
        yield _RunStreams(out, err, out_guard)
    finally:
        for stream in (out, err, sys.stdout):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        if reserved:
            os.dup2(out_fd, 1)
            os.close(out_fd)


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[TextIO]:
    """stdout that a reader may close early (`logos show FILE | head`) without an error."""
    sys.stdout.flush()
    out, _ = guarded_text(sys.stdout)
    try:
        yield out
    finally:
        out.flush()
