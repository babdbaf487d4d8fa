"""The `logos` command line: parse the arguments, resolve the settings, dispatch, exit.

    logos [OPTIONS] "TASK"          run a task (same as `logos run`)
    logos resume FILE ["FOLLOW-UP"] continue a recorded run
    logos show FILE                 read a recorded run
    logos exec < message            run one message's <cmd> blocks, print the <result>
    logos doctor                    check the provider, the runner and the sandbox

Exit codes: 0 final answer, 1 stopped by a limit, 2 error or bad usage, 130 Ctrl-C; another
stop signal N gives 128 + N (143 SIGTERM, 129 a closed terminal, 141 stdout's reader left).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TextIO, TypeVar

import anyio
from rich.console import Console

from logos.approval import APPROVAL_MODES, ApprovalMode
from logos.cli.doctor import Check, check_provider, check_runner, print_checks
from logos.cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_STOPPED, CliError
from logos.cli.exec_message import ExecPlan, execute_message, read_blocks
from logos.cli.json_events import JsonEvents
from logos.cli.model import DEFAULT_CONTEXT_SIZE, GgufSpec, open_model
from logos.cli.paths import runs_dir
from logos.cli.render import HumanRenderer, make_console
from logos.cli.report import Reporter
from logos.cli.runners import (
    RunnerSpec,
    allowed_paths,
    sandbox_socket,
    sandboxd_problem,
    system_prompt_for,
)
from logos.cli.settings import (
    FileSettings,
    ProviderChoice,
    ProviderFlags,
    choose_provider,
    default_config_path,
    load_file_settings,
    resolve_model,
)
from logos.cli.show import show_trajectory
from logos.cli.streams import GuardedOutput, guarded_text
from logos.cli.task import Limits, NewTrajectory, TaskPlan, logos_version, run_task
from logos.config import DEFAULT_MAX_STEPS
from logos.envelope import command_preview, format_results
from logos.errors import RecordFileError
from logos.events import ErrorEvent, RunSummary
from logos.options import DEFAULT_TIMEOUT_S, ExecOptions
from logos.pricing import price_for
from logos.providers import RetryPolicy
from logos.providers.registry import LOCAL_SERVER_KIND, PROVIDER_KINDS
from logos.trajectory import Trajectory, load_trajectory

COMMANDS = ("run", "resume", "show", "exec", "doctor")
_RUN_APPROVAL_DEFAULT = "confirm for local bash on a terminal, auto in the sandbox"
DEFAULT_FOLLOW_UP = "Continue."
T = TypeVar("T")


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not arguments:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    if arguments[0] not in (*COMMANDS, "-h", "--help", "--version"):
        arguments = ["run", *arguments]  # `logos "TASK"` is `logos run "TASK"`
    try:
        args = parser.parse_args(arguments)
    except _UsageError as exc:
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc.message}", file=sys.stderr)
        if arguments[0] in ("run", "resume") and "--json" in arguments:
            error = ErrorEvent(message=exc.message)
            for event in (error, RunSummary(stop_reason="error", error=exc.message)):
                print(event.model_dump_json())
        return EXIT_ERROR
    try:
        code: int = args.handler(args)
    except CliError as exc:
        print(f"logos: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except RecordFileError as exc:
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
    return code


# Commands ----------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    with _run_streams() as streams:
        reporter: Reporter = (
            JsonEvents(streams.out, streams.err)
            if args.json
            else HumanRenderer(streams.out, streams.err, os.environ)
        )
        try:
            return _run_or_resume(args, reporter, streams.out_guard)
        except (CliError, RecordFileError) as exc:
            reporter.error(exc.message)
            if args.json:
                reporter.done(RunSummary(stop_reason="error", error=exc.message))
            return exc.exit_code if isinstance(exc, CliError) else EXIT_ERROR
        except KeyboardInterrupt:
            if args.json:
                reporter.done(RunSummary(stop_reason="canceled"))
            return EXIT_INTERRUPTED


def _run_or_resume(
    args: argparse.Namespace, reporter: Reporter, output: GuardedOutput | None = None
) -> int:
    environ = os.environ
    settings = load_file_settings(args.config, environ)
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

    gguf = _gguf_spec(args, recorded)
    choice = None if gguf is not None else _provider_choice(args, settings, environ, recorded)

    recorded_sandbox = None if recorded is None else recorded.header.runner == "sandbox"
    sandbox = _first_or(False, args.sandbox, recorded_sandbox, settings.sandbox)
    spec = _runner_spec(args, settings, sandbox)
    approval = _approval_mode(args.approve, args.yes, sandbox, _stdin_is_terminal())
    default_dir = os.getcwd()
    if recorded is not None and not args.allow:
        default_dir = recorded.header.cwd
        if not os.path.isdir(default_dir):
            raise CliError(
                f"the run's working directory {default_dir} no longer exists: choose one "
                "with --allow PATH:rw"
            )
    options = _exec_options(args, settings, default_dir)
    if args.allow and not sandbox:
        reporter.notice(
            "without --sandbox, commands can reach the whole machine: --allow only sets "
            "their working directory (the first path)"
        )
    extra = settings.prompt_extra or ""
    system_prompt = system_prompt_for(spec, options, extra)
    if recorded is not None:
        # WHY keep the recorded prompt when only its date differs: the conversation stays
        # as the model (and a prompt cache) saw it. Any other change (runner, directory,
        # sandbox paths, network) must reach the model.
        started = _local_date(recorded.header.started_at)
        as_recorded = system_prompt_for(spec, options, extra, started)
        if started is not None and as_recorded == recorded.header.system_prompt:
            system_prompt = recorded.header.system_prompt
    if sandbox:
        _require_sandboxd(spec)
    limits = _limits(args, settings)
    if choice is not None:
        choice, note = resolve_model(choice)
        if note:
            reporter.notice(note)
        if limits.max_cost_usd is not None and price_for(choice.model or "") is None:
            reporter.notice(
                f"--max-cost: logos does not know the price of {choice.model!r}, so the limit "
                "only applies if the server reports what each request cost"
            )

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
        else NewTrajectory(task=prompt, directory=str(runs_dir(environ)), path=args.trajectory),
        environ=environ,
        input_fd=sys.stdin.fileno() if approval == "confirm" else -1,
        temperature=_first(args.temperature, settings.temperature),
        provider_options=settings.provider_options or {},
        output=output,
    )
    if gguf is not None:
        reporter.notice(f"loading {gguf.path} with llama.cpp…")
    with open_model(choice, gguf) as model:
        return anyio.run(run_task, plan, model, reporter)


def _cmd_show(args: argparse.Namespace) -> int:
    trajectory = load_trajectory(Path(args.file))
    for warning in trajectory.warnings:
        print(f"logos: {warning}", file=sys.stderr)
    with _guarded_stdout() as out:
        show_trajectory(trajectory, make_console(out, os.environ))
    return EXIT_OK


def _cmd_exec(args: argparse.Namespace) -> int:
    settings = load_file_settings(args.config, os.environ)
    sandbox = _first_or(False, args.sandbox, settings.sandbox)
    spec = _runner_spec(args, settings, sandbox)
    if args.yes and args.approve not in (None, "auto"):
        raise CliError(f"--yes means --approve auto, which contradicts --approve {args.approve}")
    approval: ApprovalMode | None = "auto" if args.yes else args.approve
    if approval is None and not sandbox:
        raise CliError(
            "logos exec reads the message from stdin, so it cannot ask before running its "
            "commands on this machine: pass --yes to run them, --sandbox to run them in "
            "sandboxd, or --approve never-run for a dry run"
        )
    options = _exec_options(args, settings, os.getcwd())
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
        _require_sandboxd(spec)
    plan = ExecPlan(
        commands=blocks.commands,
        runner=spec,
        exec_options=options,
        approval=approval or "auto",
        environ=os.environ,
    )
    results = anyio.run(execute_message, plan)
    with _guarded_stdout() as out:
        out.write(format_results(results) + "\n")
    succeeded = blocks.unclosed is None and all(result.ok for result in results)
    return EXIT_OK if succeeded else EXIT_STOPPED


def _cmd_doctor(args: argparse.Namespace) -> int:
    with _guarded_stdout() as out:
        return _doctor(args, make_console(out, os.environ))


def _doctor(args: argparse.Namespace, console: Console) -> int:
    checks: list[Check] = []
    try:
        settings = load_file_settings(args.config, os.environ)
    except CliError as exc:
        print_checks([Check("config", "FAIL", exc.message)], console)
        return EXIT_STOPPED
    config_path = args.config or default_config_path(os.environ)
    checks.append(
        Check(
            "config",
            "ok",
            str(config_path) if config_path.exists() else f"none at {config_path} (defaults)",
        )
    )
    checks.append(_doctor_provider(args, settings))
    sandbox = _first_or(False, args.sandbox, settings.sandbox)
    spec = _runner_spec(args, settings, sandbox)
    sandbox_ok = True
    if sandbox:
        problem = sandboxd_problem(sandbox_socket(spec))
        sandbox_ok = problem is None
        checks.append(
            Check("sandboxd", "FAIL", problem)
            if problem
            else Check("sandboxd", "ok", f"healthy on {sandbox_socket(spec)}")
        )
    if sandbox_ok:
        options = _exec_options(args, settings, os.getcwd())
        checks.append(anyio.run(check_runner, spec, options))
    else:
        checks.append(Check("runner", "skip", "needs sandboxd (see above)"))
    print_checks(checks, console)
    return EXIT_OK if all(check.outcome != "FAIL" for check in checks) else EXIT_STOPPED


def _doctor_provider(args: argparse.Namespace, settings: FileSettings) -> Check:
    try:
        gguf = _gguf_spec(args, None)
        choice = None
        if gguf is None:
            choice, _ = resolve_model(_provider_choice(args, settings, os.environ, None))
        with open_model(choice, gguf, retry=RetryPolicy(max_attempts=1)) as model:
            return anyio.run(check_provider, model)
    except CliError as exc:
        return Check("provider", "FAIL", exc.message)


# Settings ------------------------------------------------------------------------------------


def _provider_choice(
    args: argparse.Namespace,
    settings: FileSettings,
    environ: Mapping[str, str],
    recorded: Trajectory | None,
) -> ProviderChoice:
    flags = ProviderFlags(args.provider, args.model, args.base_url)
    earlier = None
    if recorded is not None and recorded.header.gguf is None:
        header = recorded.header
        earlier = ProviderFlags(header.provider, header.model, header.base_url)
    return choose_provider(flags, settings, environ, earlier)


def _gguf_spec(args: argparse.Namespace, recorded: Trajectory | None) -> GgufSpec | None:
    path = args.gguf
    if path is None and recorded is not None and not (args.provider or args.base_url):
        path = recorded.header.gguf
    if path is None:
        return None
    if args.provider or args.base_url:
        raise CliError(
            "--gguf serves the model with llama.cpp in this process: leave out --provider "
            "and --base-url"
        )
    return GgufSpec(Path(path).expanduser(), args.context_size, args.threads)


def _runner_spec(args: argparse.Namespace, settings: FileSettings, sandbox: bool) -> RunnerSpec:
    if args.network and not sandbox:
        raise CliError(
            "--network only applies to the sandbox: add --sandbox (commands run locally "
            "already use this machine's network)"
        )
    return RunnerSpec(
        sandbox=sandbox,
        socket=args.socket or settings.socket,
        image=args.image or settings.image,
        network=args.network,
    )


def _approval_mode(
    approve: ApprovalMode | None, yes: bool, sandbox: bool, stdin_is_tty: bool
) -> ApprovalMode:
    if yes and approve not in (None, "auto"):
        raise CliError(f"--yes means --approve auto, which contradicts --approve {approve}")
    mode = "auto" if yes else approve
    if mode is None:
        if sandbox:
            return "auto"
        if stdin_is_tty:
            return "confirm"
        raise CliError(
            "commands would run on this machine, outside any sandbox, and stdin is not a "
            "terminal to confirm them on: pass --yes to run them without asking, --sandbox "
            "to run them in sandboxd, or --approve never-run for a dry run"
        )
    if mode == "confirm" and not stdin_is_tty:
        raise CliError(
            "--approve confirm asks on the terminal, but stdin is not one: run logos from a "
            "terminal, or choose --approve auto or never-run"
        )
    return mode


def _exec_options(
    args: argparse.Namespace, settings: FileSettings, default_dir: str
) -> ExecOptions:
    return ExecOptions(
        allowed_paths=allowed_paths(args.allow, default_dir),
        timeout_s=_first_or(DEFAULT_TIMEOUT_S, args.timeout, settings.timeout),
    )


def _limits(args: argparse.Namespace, settings: FileSettings) -> Limits:
    return Limits(
        max_steps=_first_or(DEFAULT_MAX_STEPS, args.max_steps, settings.max_steps),
        max_cost_usd=_first(args.max_cost, settings.max_cost),
        max_wall_s=_first(args.max_time, settings.max_time),
        max_tokens=_first(args.max_tokens, settings.max_tokens),
        max_total_tokens=_first(args.max_total_tokens, settings.max_total_tokens),
    )


def _require_sandboxd(spec: RunnerSpec) -> None:
    problem = sandboxd_problem(sandbox_socket(spec))
    if problem is not None:
        raise CliError(problem)


def _local_date(timestamp: str) -> dt.date | None:
    """The local calendar day of a record's UTC timestamp; None if it is not one."""
    try:
        return dt.datetime.fromisoformat(timestamp).astimezone().date()
    except ValueError:
        return None


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


def _first(*values: T | None) -> T | None:
    """The first value that is set: flags come before the config file."""
    return next((value for value in values if value is not None), None)


def _first_or(default: T, *values: T | None) -> T:
    found = _first(*values)
    return default if found is None else found


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


# Parser --------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _non_negative_float(text: str) -> float:
    value = _float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


class _UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """Raises on a usage error (argparse would exit), so that `--json` can report it too."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="logos",
        usage='logos [OPTIONS] "TASK"\n       logos {run,resume,show,exec,doctor} ...',
        description="Give a model a task; it works on it through shell commands, which logos "
        "runs (locally after your confirmation, or in the sandboxd Docker sandbox) until it "
        "answers. `logos TASK` is short for `logos run TASK`.",
        epilog="Exit codes: 0 the model answered, 1 a limit stopped the run, 2 an error or "
        "bad usage, 130 interrupted (Ctrl-C), 128 + N stopped by signal N (143 SIGTERM, 129 "
        "a closed terminal, 141 stdout's reader left). See `logos run --help` for the options.",
    )
    parser.add_argument("--version", action="version", version=f"logos {logos_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        prog="logos run",
        help="run a task (the default command)",
        description="Run TASK to its end and print the model's answer. The answer goes to "
        "stdout (when stdout is a terminal, all prose streams there); commands, their "
        "output and a summary go to stderr. Every step is saved to a trajectory file.",
    )
    run.add_argument("task", nargs="?", metavar="TASK", help="what to do; - reads it from stdin")
    _model_options(run)
    _runner_options(run)
    _approval_options(run, APPROVAL_MODES, _RUN_APPROVAL_DEFAULT)
    _limit_options(run)
    _output_options(run, trajectory=True)
    run.set_defaults(handler=_cmd_run)

    resume = commands.add_parser(
        "resume",
        prog="logos resume",
        help="continue a recorded run",
        description="Continue the conversation of a trajectory file, appending to it. The "
        "provider, model, sandbox and working directory are the run's unless options say "
        "otherwise.",
    )
    resume.add_argument("file", metavar="FILE", help="the run's .jsonl trajectory")
    resume.add_argument(
        "follow_up",
        nargs="?",
        metavar="FOLLOW-UP",
        help=f'what to say next (default: "{DEFAULT_FOLLOW_UP}"); - reads it from stdin',
    )
    _model_options(resume)
    _runner_options(resume)
    _approval_options(resume, APPROVAL_MODES, _RUN_APPROVAL_DEFAULT)
    _limit_options(resume)
    _output_options(resume, trajectory=False)
    resume.set_defaults(handler=_cmd_run)

    show = commands.add_parser(
        "show",
        prog="logos show",
        help="show a recorded run",
        description="Print a trajectory for reading: prompts, the model's prose, commands "
        "with the tail of their output, decisions, and how each run ended.",
    )
    show.add_argument("file", metavar="FILE", help="the run's .jsonl trajectory")
    show.set_defaults(handler=_cmd_show)

    exec_ = commands.add_parser(
        "exec",
        prog="logos exec",
        help="run the <cmd> blocks of a message read from stdin",
        description="Read an assistant message from stdin, run its <cmd> blocks concurrently "
        "and print the <result> envelope the model reads next. Exit 0 when every block "
        "succeeded, 1 when any failed, 2 on a usage or setup error. Running locally needs "
        "--yes (stdin holds the message, so nothing can be confirmed).",
    )
    _config_option(exec_)
    _runner_options(exec_)
    _approval_options(exec_, ("auto", "never-run"), "auto in the sandbox; local runs need --yes")
    exec_.set_defaults(handler=_cmd_exec)

    doctor = commands.add_parser(
        "doctor",
        prog="logos doctor",
        help="check the provider, the runner and the sandbox",
        description="Send the model a one-token request, run `true` where commands would "
        "run, and with --sandbox check sandboxd's health. Prints ok or FAIL with the fix for "
        "each; exits 1 when any check fails.",
    )
    _model_options(doctor)
    _runner_options(doctor)
    doctor.set_defaults(handler=_cmd_doctor)
    return parser


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="TOML file of defaults for these options (default: "
        "$XDG_CONFIG_HOME/logos/config.toml or ~/.config/logos/config.toml); flags win",
    )


def _model_options(parser: argparse.ArgumentParser) -> None:
    kinds = PROVIDER_KINDS.values()
    detected_from = [env for kind in kinds for env in (kind.api_key_env, kind.base_url_env)]
    group = parser.add_argument_group(
        "model",
        f"Detected from {', '.join(detected_from[:-1])} or {detected_from[-1]} when not given.",
    )
    group.add_argument("--provider", choices=list(PROVIDER_KINDS), help="the API to speak")
    group.add_argument(
        "--model",
        help=f"model name (default: {' or '.join(kind.default_model for kind in kinds)}; for "
        "a local server, the first model it lists)",
    )
    group.add_argument(
        "--base-url",
        metavar="URL",
        help=f"an {LOCAL_SERVER_KIND.label}-compatible server (llama.cpp, Ollama, vLLM), e.g. "
        "http://127.0.0.1:8080/v1; no key needed",
    )
    group.add_argument(
        "--gguf",
        metavar="PATH",
        help="run offline on this GGUF model with llama.cpp in-process "
        "(pip install 'logos[local]')",
    )
    group.add_argument(
        "--context-size",
        type=_positive_int,
        default=DEFAULT_CONTEXT_SIZE,
        metavar="TOKENS",
        help=f"--gguf: context window (default {DEFAULT_CONTEXT_SIZE})",
    )
    group.add_argument(
        "--threads", type=_positive_int, metavar="N", help="--gguf: CPU threads (default: auto)"
    )
    group.add_argument(
        "--temperature", type=_non_negative_float, metavar="T", help="sampling temperature"
    )
    _config_option(parser)


def _runner_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where commands run")
    group.add_argument(
        "--sandbox",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run commands in the sandboxd Docker sandbox (default: local bash)",
    )
    group.add_argument(
        "--socket",
        metavar="PATH",
        help="sandboxd's socket (default: $SANDBOXD_SOCKET, $XDG_RUNTIME_DIR/sandboxd.sock, "
        "~/.sandboxd/daemon.sock)",
    )
    group.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PATH[:ro|:rw]",
        help="a directory commands may use, read-only unless :rw; repeatable; the first is "
        "the working directory (default: the current directory, read-write). Only the "
        "sandbox enforces it",
    )
    group.add_argument("--network", action="store_true", help="allow network access in the sandbox")
    group.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="SECONDS",
        help=f"per command (default {DEFAULT_TIMEOUT_S:g})",
    )
    group.add_argument("--image", help="sandbox image (one the daemon allows)")


_MODE_HELP = {
    "auto": "auto: run every command",
    "confirm": "confirm: ask for each (yes / no with a reason / always / edit)",
    "never-run": "never-run: run nothing, a dry run",
}


def _approval_options(
    parser: argparse.ArgumentParser, modes: Sequence[ApprovalMode], default: str
) -> None:
    group = parser.add_argument_group("approval")
    group.add_argument(
        "--approve",
        choices=modes,
        help="; ".join(_MODE_HELP[mode] for mode in modes) + f" (default: {default})",
    )
    group.add_argument("-y", "--yes", action="store_true", help="same as --approve auto")


def _limit_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("limits (exit 1 when one stops the run)")
    group.add_argument(
        "--max-steps",
        type=_positive_int,
        metavar="N",
        help=f"model turns (default {DEFAULT_MAX_STEPS})",
    )
    group.add_argument("--max-cost", type=_positive_float, metavar="USD", help="spend in USD")
    group.add_argument(
        "--max-time", type=_positive_float, metavar="SECONDS", help="wall-clock time"
    )
    group.add_argument(
        "--max-tokens", type=_positive_int, metavar="N", help="output tokens per model turn"
    )
    group.add_argument(
        "--max-total-tokens",
        type=_positive_int,
        metavar="N",
        help="input + output tokens over the whole run",
    )


def _output_options(parser: argparse.ArgumentParser, *, trajectory: bool) -> None:
    group = parser.add_argument_group("output")
    group.add_argument(
        "--json",
        action="store_true",
        help="print one JSON event per line on stdout (and nothing else)",
    )
    if trajectory:
        group.add_argument(
            "--trajectory",
            metavar="PATH",
            help="where to save the run (default: $XDG_STATE_HOME/logos/runs/"
            "<time>-<task>.jsonl, under ~/.local/state without XDG_STATE_HOME)",
        )
