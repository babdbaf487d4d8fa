"""Settings resolution: flags first, then a resumed run's record, then the config file,
then the environment, then the defaults.

A front states what its user asked for as `Flags` (the `logos` command from its
arguments) and gets back the runner, the approval mode, the command options, the limits,
the replies and the system prompt; the model is `logos.settings.model_choice`'s. A setting
that cannot work is a SettingsError saying which and what to do.
"""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import TypeVar, cast

from logos.agent.config import ReplySettings, RunLimits
from logos.agent.replies import SMALL_MODEL, ReplyPolicy
from logos.approvals.approval import ApprovalMode
from logos.approvals.rules import ApprovalRules, RulesError, load_rules
from logos.commands.memory_store import MEMORY_HEADING, MemoryStore, memory_prompt
from logos.errors import SettingsError
from logos.options import DEFAULT_TIMEOUT_S, ExecOptions
from logos.options.declarations import (
    ALLOW,
    ALLOW_HOST,
    APPROVAL_RULES,
    APPROVE,
    BACKGROUND_AFTER,
    CHECK_BACK,
    CONFIG,
    DEFAULT_BACKGROUND_AFTER_S,
    DEFAULT_MAX_STEPS,
    DEFAULT_PROMPT_CHARS,
    DEFAULT_SANDBOX_KIND,
    FIRST_BLOCK,
    GRAMMAR,
    IMAGE,
    LOGOS_GRAMMAR,
    MAX_COST,
    MAX_STEPS,
    MAX_TIME,
    MAX_TOKENS,
    MAX_TOTAL_TOKENS,
    MEMORY_PROMPT_CHARS,
    NETWORK,
    NO_GRAMMAR,
    PROMPT_EXTRA,
    PROMPT_STYLE,
    PROVIDER_OPTIONS,
    SANDBOX_TOKEN_FILE,
    SOCKET,
    TEMPERATURE,
    TIMEOUT,
    YES,
    options_at,
)
from logos.options.narrowing import hosts_with_network
from logos.options.option import Place, Values
from logos.protocol.grammar import GRAMMARS
from logos.protocol.prompt import PromptStyle
from logos.providers.choice import ProviderChoice
from logos.providers.registry import LOCAL_SERVER_KIND
from logos.records.trajectory import Trajectory
from logos.runners.sandboxes import SandboxSettings
from logos.settings.runners import RunnerSpec, allowed_paths, system_prompt_for

T = TypeVar("T")


class Flags(Values):
    """What the user asked for, by option; None (or empty) is not asked, and falls back to
    the config file and the defaults."""

    @classmethod
    def parsed(cls, args: argparse.Namespace) -> Flags:
        """The flags in `args`; those a command does not take read None."""
        return cls({o.key: getattr(args, o.key, None) for o in options_at(Place.COMMAND_LINE)})


def config_path(flags: Values) -> Path | None:
    """The config file `--config` names, if it does."""
    named = flags[CONFIG]
    return None if named is None else Path(named)


def sandbox_choice(*asked: str | bool | None) -> str | None:
    """The sandbox kind the first choice that is set names (True: the default kind); None
    for local bash (False, or nothing set)."""
    choice = first(*asked)
    if isinstance(choice, str):
        return choice or None
    return DEFAULT_SANDBOX_KIND if choice else None


def runner_spec(flags: Values, config: Values, sandbox: str | None) -> RunnerSpec:
    if flags[NETWORK] and not sandbox:
        raise SettingsError(
            "--network only applies to the sandbox: add --sandbox (commands run locally "
            "already use this machine's network)"
        )
    hosts = tuple(flags[ALLOW_HOST] or ())
    if hosts and sandbox != DEFAULT_SANDBOX_KIND:
        raise SettingsError(
            "--allow-host only applies to the sandbox, whose proxy enforces it: add --sandbox "
            "(commands run locally use this machine's network; temenos has no host list)"
        )
    if flags[NETWORK] and hosts:
        raise SettingsError(hosts_with_network("--allow-host", "--network"))
    if flags[SANDBOX_TOKEN_FILE] and not sandbox:
        raise SettingsError(
            "--sandbox-token-file is for a sandbox daemon that asks for a token: add "
            "--sandbox temenos"
        )
    asked = SandboxSettings(
        socket=flags[SOCKET] or config[SOCKET],
        image=flags[IMAGE] or config[IMAGE],
        network=bool(flags[NETWORK]),
        allowed_hosts=hosts,
        auth_token_file=flags[SANDBOX_TOKEN_FILE] or config[SANDBOX_TOKEN_FILE],
    )
    return RunnerSpec(sandbox, asked)


def asked_approval(flags: Values) -> ApprovalMode | None:
    """The approval mode the flags ask for (`--yes` is `--approve auto`), if any."""
    approve = cast("ApprovalMode | None", flags[APPROVE])
    if flags[YES] and approve not in (None, "auto"):
        raise SettingsError(f"--yes means --approve auto, which contradicts --approve {approve}")
    return "auto" if flags[YES] else approve


def approval_mode(flags: Values, sandbox: bool, stdin_is_tty: bool) -> ApprovalMode:
    """How a run's commands are approved: as asked, else auto in the sandbox and confirm
    on a terminal; refused where nobody could confirm a local command."""
    mode = asked_approval(flags)
    if mode is None:
        if sandbox:
            return "auto"
        if stdin_is_tty:
            return "confirm"
        raise SettingsError(
            "commands would run on this machine, outside any sandbox, and stdin is not a "
            "terminal to confirm them on: pass --yes to run them without asking, --sandbox "
            "to run them in sandboxd, or --approve never-run for a dry run"
        )
    if mode == "confirm" and not stdin_is_tty:
        raise SettingsError(
            "--approve confirm asks on the terminal, but stdin is not one: run logos from a "
            "terminal, or choose --approve auto or never-run"
        )
    return mode


def approval_rules(flags: Values, config: Values) -> ApprovalRules | None:
    """The approval rules file the flags or the config file name, loaded and checked."""
    path = first(flags[APPROVAL_RULES], config[APPROVAL_RULES])
    if path is None:
        return None
    try:
        return load_rules(Path(path).expanduser())
    except RulesError as exc:
        raise SettingsError(str(exc)) from None


def command_timeout(flags: Values, config: Values) -> float:
    return first_or(DEFAULT_TIMEOUT_S, flags[TIMEOUT], config[TIMEOUT])


def exec_options(
    flags: Values, config: Values, default_dir: str, *, jobs: bool = True
) -> ExecOptions:
    """The options of every command; `jobs`: whether a slow one may go on as a job (not
    when nothing would be there to hear of its end, as in `logos exec`)."""
    background_after = first_or(
        DEFAULT_BACKGROUND_AFTER_S, flags[BACKGROUND_AFTER], config[BACKGROUND_AFTER]
    )
    return ExecOptions(
        allowed_paths=allowed_paths(flags[ALLOW] or (), default_dir),
        allowed_hosts=tuple(flags[ALLOW_HOST] or ()),
        timeout_s=command_timeout(flags, config),
        background_after_s=background_after if jobs else None,
    )


def _served_by_llama_cpp(choice: ProviderChoice | None) -> bool:
    """Whether the model is llama.cpp's: a local GGUF (`choice` None) or a llama.cpp server."""
    return choice is None or choice.llama_cpp


def limits(flags: Values, config: Values) -> RunLimits:
    """The run's limits; a reply's output tokens left unset are the reply policy's
    (`logos.agent.replies`)."""
    return RunLimits(
        max_steps=first_or(DEFAULT_MAX_STEPS, flags[MAX_STEPS], config[MAX_STEPS]),
        max_cost_usd=first(flags[MAX_COST], config[MAX_COST]),
        max_wall_s=first(flags[MAX_TIME], config[MAX_TIME]),
        max_tokens=first(flags[MAX_TOKENS], config[MAX_TOKENS]),
        max_total_tokens=first(flags[MAX_TOTAL_TOKENS], config[MAX_TOTAL_TOKENS]),
    )


def replies(flags: Values, config: Values, choice: ProviderChoice | None) -> ReplySettings:
    """How the model is asked to reply, as the flags, then the config file, then the
    defaults say; the defaults for a model served by llama.cpp (`choice` None for a local
    GGUF) are the small-model policy (`logos.agent.replies.SMALL_MODEL`).

    The prompt's style brings its parts of that policy: the compact prompt its worked
    examples and the answers asked from the outputs, the full prompt none of them. The
    check-back stays on unless turned off: small models answer questions about this
    machine from guesses."""
    llama_cpp = _served_by_llama_cpp(choice)
    policy = SMALL_MODEL if llama_cpp else ReplyPolicy()
    options = dict(config[PROVIDER_OPTIONS] or {})
    default = LOGOS_GRAMMAR if llama_cpp and "grammar" not in options else NO_GRAMMAR
    name = first_or(default, flags[GRAMMAR], config[GRAMMAR])
    grammars = None
    if name != NO_GRAMMAR:
        if choice is not None and (
            choice.kind is not LOCAL_SERVER_KIND or choice.uses_default_server
        ):
            raise SettingsError(
                f"the {name!r} grammar is for llama.cpp: use it with --gguf or with --base-url "
                f"pointing at a llama.cpp server ({choice.kind.label}'s API refuses a grammar)"
            )
        if "grammar" in options:
            raise SettingsError(
                f"two grammars are set: the {name!r} grammar and provider_options.grammar in "
                "the config file; keep one"
            )
        grammars = GRAMMARS[name]
        if not first_or(True, flags[FIRST_BLOCK], config[FIRST_BLOCK]):
            grammars = replace(grammars, act=None)
    elif flags[FIRST_BLOCK] or config[FIRST_BLOCK]:
        raise SettingsError(
            "a first reply that must hold a block needs the logos grammars, which are off: "
            "drop --first-block (or first_block) or turn the grammars on with --grammar"
        )
    asked_style = cast("PromptStyle | None", first(flags[PROMPT_STYLE], config[PROMPT_STYLE]))
    style: PromptStyle = first_or(policy.prompt_style, asked_style)
    styled = SMALL_MODEL if style == "compact" else ReplyPolicy()
    return ReplySettings(
        replace(
            policy,
            prompt_style=style,
            examples=styled.examples,
            plain_answers=styled.plain_answers,
            temperature=first(flags[TEMPERATURE], config[TEMPERATURE], policy.temperature),
            check_back=first_or(True, flags[CHECK_BACK], config[CHECK_BACK]),
            grammars=grammars,
        ),
        provider_options=options,
    )


def system_prompt(
    spec: RunnerSpec,
    options: ExecOptions,
    config: Values,
    recorded: Trajectory | None,
    memory: MemoryStore,
    style: PromptStyle = "full",
) -> str:
    """The system prompt for this runner and these paths, with the memory notes for a new
    run; a resumed run keeps its recorded prompt when only the date (or the notes it
    started with) would differ.

    WHY: the conversation stays as the model (and a prompt cache) saw it. Any other change
    (runner, directory, sandbox paths, network) must reach the model.
    """
    extra = config[PROMPT_EXTRA] or ""
    if recorded is None:
        extra = "\n\n".join(part for part in (extra, memory_section(config, memory)) if part)
    prompt = system_prompt_for(spec, options, extra, style=style)
    if recorded is not None:
        started = _local_date(recorded.header.started_at)
        as_recorded = system_prompt_for(spec, options, extra, started, style)
        kept = recorded.header.system_prompt
        with_notes = as_recorded.rstrip("\n") + "\n\n" + MEMORY_HEADING
        if started is not None and (kept == as_recorded or kept.startswith(with_notes)):
            prompt = kept  # the notes it started with stay, as the model saw them
    return prompt


def memory_section(config: Values, memory: MemoryStore) -> str:
    """The memory notes for a new run's system prompt, within `memory_prompt_chars`."""
    limit = first_or(DEFAULT_PROMPT_CHARS, config[MEMORY_PROMPT_CHARS])
    return memory_prompt(memory.notes(), limit) if limit else ""


def first(*values: T | None) -> T | None:
    """The first value that is set: flags come before the config file."""
    return next((value for value in values if value is not None), None)


def first_or(default: T, *values: T | None) -> T:
    found = first(*values)
    return default if found is None else found


def _local_date(timestamp: str) -> dt.date | None:
    """The local calendar day of a record's UTC timestamp; None if it is not one."""
    try:
        return dt.datetime.fromisoformat(timestamp).astimezone().date()
    except ValueError:
        return None
