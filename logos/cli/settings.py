"""Settings resolution: flags first, then a resumed run's record, then the config file,
then the environment, then the defaults.

A front end states what its user asked for as `Flags` (the `logos` command from its
arguments, a server from its request) and gets back the provider, the runner, the approval
mode, the command options, the limits and the system prompt.

The config file is TOML (`~/.config/logos/config.toml`, under `$XDG_CONFIG_HOME` when set,
or `--config FILE`). Every key is optional and an unknown key is an error naming the key
and the file: a misspelt setting must never be silently ignored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from logos.access.names import is_loopback
from logos.agent.config import DEFAULT_MAX_STEPS, Limits, ReplySettings
from logos.agent.replies import SMALL_MODEL, ReplyPolicy
from logos.approvals.approval import ApprovalMode
from logos.approvals.rules import ApprovalRules, RulesError, load_rules, read_toml
from logos.cli.errors import CliError
from logos.cli.runners import (
    DEFAULT_SANDBOX_KIND,
    RunnerSpec,
    allowed_paths,
    system_prompt_for,
)
from logos.commands.memory_store import (
    DEFAULT_PROMPT_CHARS,
    MEMORY_HEADING,
    MemoryStore,
    memory_prompt,
)
from logos.errors import describe_invalid
from logos.models.fitting import UnknownLocalModel, default_for_this_machine
from logos.models.hub import HubFile
from logos.options import DEFAULT_TIMEOUT_S, ExecOptions
from logos.protocol.grammar import GRAMMARS, LOGOS_GRAMMAR_NAME
from logos.protocol.prompt import PromptStyle
from logos.providers import Provider, RetryPolicy
from logos.providers.http_provider import normalize_base_url
from logos.providers.registry import (
    LOCAL_SERVER_KIND,
    PROVIDER_KINDS,
    ProviderKind,
    ProviderName,
    provider_kind,
)
from logos.records.trajectory import Trajectory
from logos.runners.sandboxes import SandboxSettings
from logos.serve.settings import ServeSettings

_MODEL_LIST_TIMEOUT_S = 10.0
DEFAULT_BACKGROUND_AFTER_S = 30.0
"""A run's commands still running after this long go on as jobs (the model keeps working)."""
_MODELS_SHOWN = 10
DEFAULT_CONTEXT_SIZE = 8192
"""Tokens of context for a `--gguf` model: the system prompt and a few results fit."""
T = TypeVar("T")
NO_GRAMMAR = "none"


def _known_grammar(name: str) -> str:
    if name != NO_GRAMMAR and name not in GRAMMARS:
        raise ValueError(f"unknown grammar {name!r}: choose {', '.join([*GRAMMARS, NO_GRAMMAR])}")
    return name


GrammarName = Annotated[str, AfterValidator(_known_grammar)]
"""A grammar's name in `logos.protocol.grammar.GRAMMARS`, or "none"."""
SandboxName = Annotated[str, Field(min_length=1)]
"""A sandbox kind's name (`logos.runners.sandboxes`); an unknown one is refused when it is used."""

HUB_SCHEME = "hf:"
NO_PROVIDER_MESSAGE = (
    "no model provider is configured: set "
    + " or ".join(f"{kind.api_key_env} ({kind.label})" for kind in PROVIDER_KINDS.values())
    + f"; or point --base-url (or {LOCAL_SERVER_KIND.base_url_env}) at an "
    f"{LOCAL_SERVER_KIND.label}-compatible server such as llama.cpp, Ollama or vLLM, e.g. "
    "--base-url http://127.0.0.1:8080/v1; or run a local GGUF model offline with --gguf PATH"
)


class FileSettings(BaseModel):
    """The config file's keys: defaults for the flags of the same name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: ProviderName | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    """The variable holding the API key, instead of ANTHROPIC_API_KEY / OPENAI_API_KEY."""
    sandbox: bool | SandboxName | None = None
    """true for sandboxd, or the name of a sandbox kind ("temenos")."""
    socket: str | None = None
    """The sandbox daemon's socket or address (--sandbox-addr)."""
    sandbox_token_file: str | None = None
    """A file holding the token the sandbox daemon asks for (temenos in Kubernetes)."""
    image: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    background_after: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds after which a run's command still running goes on as a job (default 30)."""
    max_steps: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0)
    max_time: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    provider_options: dict[str, Any] | None = None
    """Extra JSON fields for every model request (e.g. a llama.cpp `grammar`, a `seed`)."""
    prompt_extra: str | None = None
    """Text appended to the system prompt (house rules, project conventions)."""
    check_back: bool | None = None
    """Ask the model once whether the task needs a command when it answers before any ran
    (default true)."""
    grammar: GrammarName | None = None
    """The llama.cpp grammars for the replies, by name: "logos" or "none" (by default
    "logos" for a model served by llama.cpp, "none" for any other)."""
    first_block: bool | None = None
    """With the grammars: whether a run's first reply must hold a block (default true)."""
    prompt_style: PromptStyle | None = None
    """The system prompt: "full", or "compact" with a worked example (by default "compact"
    for a model served by llama.cpp, "full" for any other)."""
    local_model: str | None = None
    """The default local model by name (`logos models` lists them), instead of the one
    chosen for this machine (`logos.models.fitting`)."""
    download_models: bool | None = None
    """Fetch a Hugging Face Hub model the run needs without asking first (as --yes does)."""
    approval_rules: str | None = None
    """A TOML file of approval rules (`logos.approvals.rules`): which commands run unasked,
    which always ask, which never run."""
    memory_prompt_chars: int | None = Field(default=None, ge=0)
    """How much of the memory notes a new run's system prompt holds (0: none)."""
    mcp: list[str] = Field(default_factory=list)
    """MCP servers every run is given, as `--mcp` takes them (an mcpServers JSON file,
    NAME=URL, NAME=COMMAND); `--mcp` adds to them."""
    serve: ServeSettings = Field(default_factory=ServeSettings)
    """The `[serve]` table: `logos serve`'s own settings."""


def default_config_path(environ: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/logos/config.toml`, else `~/.config/logos/config.toml`."""
    config_home = environ.get("XDG_CONFIG_HOME")
    base = Path(config_home) if config_home else Path.home() / ".config"
    return base / "logos" / "config.toml"


def load_file_settings(explicit: Path | None, environ: Mapping[str, str]) -> FileSettings:
    """The settings of `explicit` (which must exist), else of the default file if present."""
    path = explicit if explicit is not None else default_config_path(environ)
    if explicit is None and not path.exists():
        return FileSettings()
    data = read_toml(path, "config file", "check the --config path", CliError)
    try:
        return FileSettings.model_validate(data)
    except ValidationError as exc:
        problems = describe_invalid(exc, "key", lambda _: FileSettings.model_fields)
        raise CliError(f"config file {path}: {problems}") from None


@dataclass(frozen=True)
class ProviderFlags:
    """What the user asked for on the command line (or a resumed run recorded)."""

    provider: str | None = None
    """A name in the provider registry."""
    model: str | None = None
    base_url: str | None = None


@dataclass(frozen=True)
class ProviderChoice:
    """A resolved provider; `model` is None until `resolve_model` asks the server."""

    kind: ProviderKind
    model: str | None
    base_url: str
    api_key: str | None
    api_key_env: str
    llama_cpp: bool = False
    """The server is llama.cpp's own (found by `resolve_model`): it takes a grammar, and
    small-model defaults apply (`logos.agent.replies`)."""

    @property
    def uses_default_server(self) -> bool:
        return _same_url(self.base_url, self.kind.default_base_url)


def choose_provider(
    flags: ProviderFlags,
    settings: FileSettings,
    environ: Mapping[str, str],
    recorded: ProviderFlags | None = None,
) -> ProviderChoice:
    """Resolve the provider, base URL and API key; raises CliError saying what to set.

    `recorded` is what a resumed run used: it comes right after the flags, unless the flags
    switch to another provider kind (then the recorded model would not fit).
    """
    if recorded is not None and flags.provider in (None, recorded.provider):
        assert recorded.provider is not None  # a run header always names its provider
        kind = _known_kind(recorded.provider)
        model = flags.model or recorded.model
        base_url, source = _first_set(
            (flags.base_url, "--base-url"), (recorded.base_url, "the resumed run")
        )
    else:
        name = flags.provider or settings.provider
        kind = _detect_kind(flags, settings, environ) if name is None else _known_kind(name)
        model = flags.model or settings.model
        base_url, source = _first_set(
            (flags.base_url, "--base-url"),
            (settings.base_url, "base_url in the config file"),
            (environ.get(kind.base_url_env), kind.base_url_env),
        )
    key_env = settings.api_key_env or kind.api_key_env
    choice = ProviderChoice(
        kind=kind,
        model=model,
        base_url=_checked_base_url(base_url or kind.default_base_url, source),
        api_key=environ.get(key_env) or None,
        api_key_env=key_env,
    )
    if choice.api_key is None and choice.uses_default_server:
        raise CliError(
            f"{key_env} is not set: export {key_env}=<your {kind.label} API key>, or point "
            "--base-url at a server that needs no key"
        )
    return choice


def _known_kind(name: str) -> ProviderKind:
    try:
        return provider_kind(name)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _first_set(*candidates: tuple[str | None, str]) -> tuple[str | None, str]:
    """The first value that is set, and where it came from."""
    return next(((value, source) for value, source in candidates if value), (None, "default"))


def _checked_base_url(url: str, source: str) -> str:
    try:
        return normalize_base_url(url)
    except ValueError as exc:
        raise CliError(f"{exc} (set by {source})") from None


def _detect_kind(
    flags: ProviderFlags, settings: FileSettings, environ: Mapping[str, str]
) -> ProviderKind:
    if flags.base_url or settings.base_url:
        return LOCAL_SERVER_KIND
    for kind in PROVIDER_KINDS.values():
        if environ.get(kind.api_key_env) or environ.get(kind.base_url_env):
            return kind
    raise CliError(NO_PROVIDER_MESSAGE)


def resolve_model(choice: ProviderChoice) -> tuple[ProviderChoice, str | None]:
    """Fill in the model (the provider's default, or the first one a local server serves)
    and whether the server is llama.cpp's, which its model list says.

    Returns the choice and a note for the user when the model was picked for them.
    """
    if not choice.kind.lists_models or choice.uses_default_server:
        return replace(choice, model=choice.model or choice.kind.default_model), None
    if choice.model is not None:
        # WHY tolerate a failure here: the model is named, so the list only tells which
        # server this is; a server without one is simply not llama.cpp.
        try:
            listed = list_models(choice)
        except CliError:
            return choice, None
        return replace(choice, llama_cpp=_is_llama_cpp(listed)), None
    listed = list_models(choice)
    choice = replace(choice, llama_cpp=_is_llama_cpp(listed))
    models = [entry.id for entry in listed]
    if len(models) > 1 and choice.api_key is not None and not _is_loopback(choice.base_url):
        shown = ", ".join(models[:_MODELS_SHOWN])
        raise CliError(
            f"{choice.base_url} serves {len(models)} models ({shown}, …): choose one with --model"
        )
    note = None
    if len(models) > 1:
        note = (
            f"using {models[0]!r}, the first of the {len(models)} models {choice.base_url} "
            "serves (choose another with --model)"
        )
    return replace(choice, model=models[0]), note


def list_models(choice: ProviderChoice) -> list[ModelEntry]:
    """The models an OpenAI-compatible server lists at GET /models."""
    url = f"{choice.base_url}/models"
    headers = {"authorization": f"Bearer {choice.api_key}"} if choice.api_key else {}
    try:
        # WHY trust_env=False on loopback: a proxy from the environment must not carry it.
        with httpx.Client(
            timeout=_MODEL_LIST_TIMEOUT_S, trust_env=not _is_loopback(choice.base_url)
        ) as client:
            response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise CliError(
            f"cannot reach {url} to find out which model to use ({exc or type(exc).__name__}): "
            "is the server running at that address? Or name the model with --model"
        ) from None
    if response.status_code != 200:
        raise CliError(
            f"{url} answered HTTP {response.status_code} when asked for its models: name the "
            "model with --model"
        )
    try:
        listing = _ModelList.model_validate_json(response.content)
    except ValidationError:
        raise CliError(
            f"{url} did not answer with a model list: is --base-url the API root (e.g. "
            "http://127.0.0.1:8080/v1)? Or name the model with --model"
        ) from None
    if not listing.data:
        raise CliError(f"{url} lists no models: load one in the server, or name it with --model")
    return listing.data


class ModelEntry(BaseModel):
    id: str
    owned_by: str | None = None
    """"llamacpp" from llama.cpp's server."""


class _ModelList(BaseModel):
    data: list[ModelEntry]


def _is_llama_cpp(listed: Sequence[ModelEntry]) -> bool:
    return any(entry.owned_by == "llamacpp" for entry in listed)


def make_provider(
    choice: ProviderChoice,
    *,
    context_window: int | None = None,
    retry: RetryPolicy | None = None,
) -> Provider:
    if choice.model is None:
        raise ValueError("resolve_model() first: the provider needs a model")
    # WHY "" rather than None: None would make the provider read its default key variable,
    # which bypasses `api_key_env`; the key was resolved here already.
    key = choice.api_key or ""
    return choice.kind.factory(
        model=choice.model,
        base_url=choice.base_url,
        api_key=key,
        context_window=context_window,
        retry=retry,
    )


def _is_loopback(url: str) -> bool:
    return is_loopback(httpx.URL(url).host)


def _same_url(first: str, second: str) -> bool:
    return first.rstrip("/") == second.rstrip("/")


@dataclass(frozen=True)
class Flags:
    """What the user asked for, named as the `logos` command's options; None (or empty) is
    not asked, and falls back to the config file and the defaults."""

    config: Path | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    gguf: str | None = None
    context_size: int = DEFAULT_CONTEXT_SIZE
    threads: int | None = None
    temperature: float | None = None
    sandbox: str | bool | None = None
    """A sandbox kind's name; False for local bash (--no-sandbox)."""
    socket: str | None = None
    sandbox_token_file: str | None = None
    allow: Sequence[str] = ()
    network: bool = False
    allow_host: Sequence[str] = ()
    timeout: float | None = None
    background_after: float | None = None
    image: str | None = None
    approve: ApprovalMode | None = None
    yes: bool = False
    max_steps: int | None = None
    max_cost: float | None = None
    max_time: float | None = None
    max_tokens: int | None = None
    max_total_tokens: int | None = None
    check_back: bool | None = None
    grammar: bool | None = None
    """True for the logos grammars (`logos.protocol.grammar`), False for none; None: the default."""
    first_block: bool | None = None
    prompt_style: PromptStyle | None = None
    approval_rules: str | None = None
    trajectory: str | None = None
    mcp: Sequence[str] = ()
    """MCP servers whose tools the run may call: config files, NAME=URL, NAME=COMMAND."""


@dataclass(frozen=True)
class GgufSpec:
    path: Path
    context_size: int = DEFAULT_CONTEXT_SIZE
    threads: int | None = None


@dataclass(frozen=True)
class HubModelSpec:
    """A GGUF model on the Hugging Face Hub, fetched into the cache, then run like --gguf."""

    file: HubFile
    context_size: int = DEFAULT_CONTEXT_SIZE
    threads: int | None = None
    default: bool = False
    """Chosen because nothing else was: no key, no base URL, no --gguf, no hf: model."""
    why: str = ""
    """For the default: why this model of `logos.models.fitting.LOCAL_MODELS`."""

    def at(self, path: Path) -> GgufSpec:
        return GgufSpec(path, self.context_size, self.threads)


LocalModel = GgufSpec | HubModelSpec


def choose_provider_for(
    flags: Flags,
    settings: FileSettings,
    environ: Mapping[str, str],
    recorded: Trajectory | None,
) -> ProviderChoice:
    """`choose_provider` for these flags and, when resuming, the recorded run."""
    asked = ProviderFlags(flags.provider, flags.model, flags.base_url)
    earlier = None
    if recorded is not None and recorded.header.gguf is None:
        header = recorded.header
        earlier = ProviderFlags(header.provider, header.model, header.base_url)
    return choose_provider(asked, settings, environ, earlier)


def gguf_spec(flags: Flags, recorded: Trajectory | None) -> GgufSpec | None:
    """The local GGUF model to serve, if the flags or the resumed run name one."""
    path = flags.gguf
    if path is None and recorded is not None and not (flags.provider or flags.base_url):
        path = recorded.header.gguf
    if path is None:
        return None
    if flags.provider or flags.base_url:
        raise CliError(
            "--gguf serves the model with llama.cpp in this process: leave out --provider "
            "and --base-url"
        )
    return GgufSpec(Path(path).expanduser(), flags.context_size, flags.threads)


def local_model(
    flags: Flags,
    settings: FileSettings,
    environ: Mapping[str, str],
    recorded: Trajectory | None,
) -> LocalModel | None:
    """The model to run in this process, if any; None when a provider serves it.

    In order: an API key or a base URL (a provider: None), then a GGUF file (--gguf, or the
    resumed run's), then a Hub model named as `--model hf:OWNER/REPO/FILE.gguf`, then the
    default Hub model when nothing else is configured at all."""
    gguf = gguf_spec(flags, recorded)
    if gguf is not None:
        return gguf
    named = flags.model or (None if flags.provider else settings.model)
    if named is not None and named.startswith(HUB_SCHEME):
        if flags.provider or flags.base_url:
            raise CliError(
                f"{named} runs with llama.cpp in this process: leave out --provider and --base-url"
            )
        try:
            file = HubFile.parse(named)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        return HubModelSpec(file, flags.context_size, flags.threads)
    if recorded is not None or _provider_configured(flags, settings, environ):
        return None
    try:
        choice = default_for_this_machine(settings.local_model)
    except UnknownLocalModel as exc:
        raise CliError(f"{exc} (local_model in the config file)") from None
    return HubModelSpec(
        choice.option.file, flags.context_size, flags.threads, default=True, why=choice.why
    )


def _provider_configured(flags: Flags, settings: FileSettings, environ: Mapping[str, str]) -> bool:
    """Whether the flags, the config file or the environment name a provider, a server or
    a key: then the default local model is not what the user meant."""
    if flags.provider or settings.provider or flags.base_url or settings.base_url:
        return True
    if flags.model or settings.model:  # a model by name (not hf:) is a provider's
        return True
    if settings.api_key_env and environ.get(settings.api_key_env):
        return True
    return any(
        environ.get(kind.api_key_env) or environ.get(kind.base_url_env)
        for kind in PROVIDER_KINDS.values()
    )


def sandbox_choice(*asked: str | bool | None) -> str | None:
    """The sandbox kind the first choice that is set names (True: the default kind); None
    for local bash (False, or nothing set)."""
    choice = first(*asked)
    if isinstance(choice, str):
        return choice or None
    return DEFAULT_SANDBOX_KIND if choice else None


def runner_spec(flags: Flags, settings: FileSettings, sandbox: str | None) -> RunnerSpec:
    if flags.network and not sandbox:
        raise CliError(
            "--network only applies to the sandbox: add --sandbox (commands run locally "
            "already use this machine's network)"
        )
    if flags.allow_host and sandbox != DEFAULT_SANDBOX_KIND:
        raise CliError(
            "--allow-host only applies to the sandbox, whose proxy enforces it: add --sandbox "
            "(commands run locally use this machine's network; temenos has no host list)"
        )
    if flags.allow_host and flags.network:
        raise CliError(
            "--allow-host limits a sandbox without network to those hosts, and --network "
            "opens every host: use one or the other"
        )
    if flags.sandbox_token_file and not sandbox:
        raise CliError(
            "--sandbox-token-file is for a sandbox daemon that asks for a token: add "
            "--sandbox temenos"
        )
    asked = SandboxSettings(
        socket=flags.socket or settings.socket,
        image=flags.image or settings.image,
        network=flags.network,
        allowed_hosts=tuple(flags.allow_host),
        auth_token_file=flags.sandbox_token_file or settings.sandbox_token_file,
    )
    return RunnerSpec(sandbox, asked)


def asked_approval(flags: Flags) -> ApprovalMode | None:
    """The approval mode the flags ask for (`--yes` is `--approve auto`), if any."""
    if flags.yes and flags.approve not in (None, "auto"):
        raise CliError(f"--yes means --approve auto, which contradicts --approve {flags.approve}")
    return "auto" if flags.yes else flags.approve


def approval_mode(flags: Flags, sandbox: bool, stdin_is_tty: bool) -> ApprovalMode:
    """How a run's commands are approved: as asked, else auto in the sandbox and confirm
    on a terminal; refused where nobody could confirm a local command."""
    mode = asked_approval(flags)
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


def approval_rules(flags: Flags, settings: FileSettings) -> ApprovalRules | None:
    """The approval rules file the flags or the config file name, loaded and checked."""
    path = first(flags.approval_rules, settings.approval_rules)
    if path is None:
        return None
    try:
        return load_rules(Path(path).expanduser())
    except RulesError as exc:
        raise CliError(str(exc)) from None


def exec_options(
    flags: Flags, settings: FileSettings, default_dir: str, *, jobs: bool = True
) -> ExecOptions:
    """The options of every command; `jobs`: whether a slow one may go on as a job (not
    when nothing would be there to hear of its end, as in `logos exec`)."""
    background_after = first_or(
        DEFAULT_BACKGROUND_AFTER_S, flags.background_after, settings.background_after
    )
    return ExecOptions(
        allowed_paths=allowed_paths(flags.allow, default_dir),
        allowed_hosts=tuple(flags.allow_host),
        timeout_s=first_or(DEFAULT_TIMEOUT_S, flags.timeout, settings.timeout),
        background_after_s=background_after if jobs else None,
    )


def served_by_llama_cpp(choice: ProviderChoice | None) -> bool:
    """Whether the model is llama.cpp's: a local GGUF (`choice` None) or a llama.cpp server."""
    return choice is None or choice.llama_cpp


def limits(flags: Flags, settings: FileSettings) -> Limits:
    """The run's limits; a reply's output tokens left unset are the reply policy's
    (`logos.agent.replies`)."""
    return Limits(
        max_steps=first_or(DEFAULT_MAX_STEPS, flags.max_steps, settings.max_steps),
        max_cost_usd=first(flags.max_cost, settings.max_cost),
        max_wall_s=first(flags.max_time, settings.max_time),
        max_tokens=first(flags.max_tokens, settings.max_tokens),
        max_total_tokens=first(flags.max_total_tokens, settings.max_total_tokens),
    )


def replies(flags: Flags, settings: FileSettings, choice: ProviderChoice | None) -> ReplySettings:
    """How the model is asked to reply, as the flags, then the config file, then the
    defaults say; the defaults for a model served by llama.cpp (`choice` None for a local
    GGUF) are the small-model policy (`logos.agent.replies.SMALL_MODEL`).

    The prompt's style brings its parts of that policy: the compact prompt its worked
    examples and the answers asked from the outputs, the full prompt none of them. The
    check-back stays on unless turned off: small models answer questions about this
    machine from guesses."""
    llama_cpp = served_by_llama_cpp(choice)
    policy = SMALL_MODEL if llama_cpp else ReplyPolicy()
    options = dict(settings.provider_options or {})
    asked = None if flags.grammar is None else LOGOS_GRAMMAR_NAME if flags.grammar else NO_GRAMMAR
    default = LOGOS_GRAMMAR_NAME if llama_cpp and "grammar" not in options else NO_GRAMMAR
    name = first_or(default, asked, settings.grammar)
    grammars = None
    if name != NO_GRAMMAR:
        if choice is not None and (
            choice.kind is not LOCAL_SERVER_KIND or choice.uses_default_server
        ):
            raise CliError(
                f"the {name!r} grammar is for llama.cpp: use it with --gguf or with --base-url "
                f"pointing at a llama.cpp server ({choice.kind.label}'s API refuses a grammar)"
            )
        if "grammar" in options:
            raise CliError(
                f"two grammars are set: the {name!r} grammar and provider_options.grammar in "
                "the config file; keep one"
            )
        grammars = GRAMMARS[name]
        if not first_or(True, flags.first_block, settings.first_block):
            grammars = replace(grammars, act=None)
    elif flags.first_block or settings.first_block:
        raise CliError(
            "a first reply that must hold a block needs the logos grammars, which are off: "
            "drop --first-block (or first_block) or turn the grammars on with --grammar"
        )
    style: PromptStyle = first_or(policy.prompt_style, flags.prompt_style, settings.prompt_style)
    styled = SMALL_MODEL if style == "compact" else ReplyPolicy()
    return ReplySettings(
        replace(
            policy,
            prompt_style=style,
            examples=styled.examples,
            plain_answers=styled.plain_answers,
            temperature=first(flags.temperature, settings.temperature, policy.temperature),
            check_back=first_or(True, flags.check_back, settings.check_back),
            grammars=grammars,
        ),
        provider_options=options,
    )


def system_prompt(
    spec: RunnerSpec,
    options: ExecOptions,
    settings: FileSettings,
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
    extra = settings.prompt_extra or ""
    if recorded is None:
        extra = "\n\n".join(part for part in (extra, memory_section(settings, memory)) if part)
    prompt = system_prompt_for(spec, options, extra, style=style)
    if recorded is not None:
        started = _local_date(recorded.header.started_at)
        as_recorded = system_prompt_for(spec, options, extra, started, style)
        kept = recorded.header.system_prompt
        with_notes = as_recorded.rstrip("\n") + "\n\n" + MEMORY_HEADING
        if started is not None and (kept == as_recorded or kept.startswith(with_notes)):
            prompt = kept  # the notes it started with stay, as the model saw them
    return prompt


def memory_section(settings: FileSettings, memory: MemoryStore) -> str:
    """The memory notes for a new run's system prompt, within `memory_prompt_chars`."""
    limit = first_or(DEFAULT_PROMPT_CHARS, settings.memory_prompt_chars)
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
