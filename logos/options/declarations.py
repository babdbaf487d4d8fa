"""Every option, declared once: its key, kind, default, help, the places that may set it,
and how a caller may narrow it (`logos.options.option` says what each part means).

A new option is one declaration here, plus its use: the config file, the command line's
flags and the requests that take it follow from its places.
"""

from __future__ import annotations

import functools
from typing import Any

from logos.options import DEFAULT_TIMEOUT_S
from logos.options.option import (
    COUNT,
    HOSTS,
    NAME,
    PATHS,
    POSITIVE,
    SWITCH,
    TABLE,
    TEXT,
    TEXTS,
    TOGGLE,
    WHOLE,
    ZERO_TO_TWO,
    Kind,
    Narrowing,
    Option,
    Place,
)

FILE = Place.CONFIG_FILE
FLAG = Place.COMMAND_LINE
DEFAULT_SANDBOX_KIND = "sandboxd"
"""The sandbox kind a bare `--sandbox` (or `sandbox = true`) runs commands in."""
DEFAULT_CONTEXT_SIZE = 8192
"""Tokens of context for a `--gguf` model: the system prompt and a few results fit."""
DEFAULT_BACKGROUND_AFTER_S = 30.0
"""A run's commands still running after this long go on as jobs (the model keeps working)."""
DEFAULT_MAX_STEPS = 30
DEFAULT_MAX_TIMEOUT_S = 600.0
DEFAULT_MAX_FORKS = 4
DEFAULT_PROMPT_CHARS = 4000
"""Of the memory notes, what a new run's system prompt holds."""

# The model --------------------------------------------------------------------------------------

PROVIDER = Option[str]("provider", NAME, "the API to speak (a provider kind's name)", (FILE, FLAG))
MODEL = Option[str](
    "model",
    TEXT,
    "model name, or hf:OWNER/REPO/FILE.gguf for a local one (default: the provider's; for a "
    "local server, the first model it lists)",
    (FILE, FLAG),
)
BASE_URL = Option[str](
    "base_url",
    TEXT,
    "an OpenAI-compatible server (llama.cpp, Ollama, vLLM), e.g. http://127.0.0.1:8080/v1; "
    "no key needed",
    (FILE, FLAG),
    metavar="URL",
)
API_KEY_ENV = Option[str](
    "api_key_env",
    NAME,
    "the variable holding the API key, instead of the provider's own (ANTHROPIC_API_KEY, "
    "OPENAI_API_KEY)",
    (FILE,),
)
GGUF = Option[str](
    "gguf",
    TEXT,
    "run offline on this GGUF model with llama.cpp in-process",
    (FLAG,),
    metavar="PATH",
)
CONTEXT_SIZE = Option[int](
    "context_size",
    WHOLE,
    "--gguf: context window",
    (FLAG,),
    default=DEFAULT_CONTEXT_SIZE,
    metavar="TOKENS",
)
THREADS = Option[int]("threads", WHOLE, "--gguf: CPU threads (default: auto)", (FLAG,), metavar="N")
TEMPERATURE = Option[float](
    "temperature",
    ZERO_TO_TWO,
    "sampling temperature",
    (FILE, FLAG, Place.AGENT_MODEL),
    metavar="T",
)
LOCAL_MODEL = Option[str](
    "local_model",
    NAME,
    "the default local model by name (`logos models` lists them), instead of the one chosen "
    "for this machine",
    (FILE,),
)
DOWNLOAD_MODELS = Option[bool](
    "download_models",
    SWITCH,
    "fetch a Hugging Face Hub model the run needs without asking first (as --yes does)",
    (FILE,),
)

# Where commands run --------------------------------------------------------------------------

SANDBOX = Option[Any](
    "sandbox",
    Kind[Any](bool | NAME.annotation, "true, false or a sandbox kind's name", action="optional"),
    f"run commands in a sandbox: {DEFAULT_SANDBOX_KIND} (the default: Docker containers of "
    "`sandboxd serve`) or temenos (a temenos daemon, or anything speaking its API); default: "
    "local bash",
    (FILE, FLAG),
    metavar="KIND",
    negation=(
        "--no-sandbox",
        "run commands with local bash (when the config file or a resumed run says otherwise)",
    ),
    const=DEFAULT_SANDBOX_KIND,
)
SOCKET = Option[str](
    "socket",
    TEXT,
    "the sandbox daemon's address. sandboxd: its socket (default: $SANDBOXD_SOCKET, "
    "/run/user/UID/sandboxd.sock, ~/.sandboxd/daemon.sock). temenos: a socket path (starting "
    "with / or .), http://host:port or host:port (default: $TEMENOS_LISTEN_ADDR, "
    "$TEMENOS_SOCKET_PATH, ~/.temenos/daemon.sock)",
    (FILE, FLAG),
    flags=("--sandbox-addr", "--socket"),
    metavar="ADDR",
)
SANDBOX_TOKEN_FILE = Option[str](
    "sandbox_token_file",
    TEXT,
    "temenos: a file holding the token the daemon asks for (in Kubernetes, the service "
    "account's token), read again when it changes",
    (FILE, FLAG),
    metavar="PATH",
)
ALLOW = Option[list[str]](
    "allow",
    PATHS,
    "a host directory commands may use, read-only unless asked read-write (:rw); the first "
    "is the working directory (logos: the current directory, read-write, when none is "
    "given). Only a sandbox enforces it",
    (
        FLAG,
        Place.SERVE_RUNNER,
        Place.PROJECT,
        Place.AGENT_RUNNER,
        Place.SANDBOXD_LAUNCH,
        Place.SANDBOXD_RUN,
    ),
    field="allowed_paths",
    renamed={Place.SANDBOXD_RUN: "paths"},
    narrowing=Narrowing.INSIDE,
    metavar="PATH[:ro|:rw]",
)
NETWORK = Option[bool](
    "network",
    SWITCH,
    "network access in the sandbox (the sandbox's own config must allow it)",
    (FLAG, Place.SERVE_RUNNER, Place.AGENT_RUNNER, Place.SANDBOXD_LAUNCH),
    narrowing=Narrowing.OFF,
)
ALLOW_HOST = Option[list[str]](
    "allow_host",
    HOSTS,
    "with network off, a host commands may reach over HTTP(S) through the sandbox's proxy "
    "(pypi.org, *.example.org, api.example.org:8443)",
    (
        FLAG,
        Place.SERVE_RUNNER,
        Place.PROJECT,
        Place.AGENT_RUNNER,
        Place.SANDBOXD_LAUNCH,
        Place.SANDBOXD_RUN,
    ),
    field="allowed_hosts",
    renamed={Place.SANDBOXD_RUN: "hosts"},
    narrowing=Narrowing.SUBSET,
    metavar="HOST",
)
TIMEOUT = Option[float](
    "timeout",
    POSITIVE,
    "a command's time limit in seconds",
    (FILE, FLAG, Place.SERVE_LIMITS, Place.SANDBOXD_LAUNCH, Place.SANDBOXD_RUN),
    default=DEFAULT_TIMEOUT_S,
    field="timeout_s",
    narrowing=Narrowing.LOWER,
    metavar="SECONDS",
)
MAX_TIMEOUT = Option[float](
    "max_timeout",
    POSITIVE,
    "the longest time limit a client may ask for a command",
    (Place.SANDBOXD_LAUNCH,),
    default=DEFAULT_MAX_TIMEOUT_S,
    metavar="SECONDS",
)
BACKGROUND_AFTER = Option[float](
    "background_after",
    POSITIVE,
    "a command still running after this many seconds goes on as a job while the model "
    "keeps working; not in `logos exec`, nor when a timeout ends it first",
    (FILE, FLAG, Place.SANDBOXD_LAUNCH),
    default=DEFAULT_BACKGROUND_AFTER_S,
    metavar="SECONDS",
)
IMAGE = Option[str](
    "image", NAME, "sandbox image (one the daemon allows)", (FILE, FLAG, Place.SANDBOXD_LAUNCH)
)
ENV = Option[Any](
    "env",
    Kind[Any](dict[str, str], "a table of variables", action="append"),
    "a variable set for every command, which clients cannot change: NAME=VALUE "
    "(a table in the config file)",
    (Place.SANDBOXD_LAUNCH,),
    metavar="NAME=VALUE",
)
MAX_FORKS = Option[int](
    "max_forks",
    COUNT,
    "forks one client may hold, 0 for no fork tool",
    (Place.SANDBOXD_LAUNCH,),
    default=DEFAULT_MAX_FORKS,
)

# Approval ----------------------------------------------------------------------------------------

APPROVE = Option[str]("approve", NAME, "how commands are approved", (FLAG,))
YES = Option[bool]("yes", SWITCH, "same as --approve auto", (FLAG,), flags=("-y", "--yes"))
APPROVAL_RULES = Option[str](
    "approval_rules",
    TEXT,
    "a TOML file of rules by program and arguments: which commands run unasked, which always "
    "ask, which never run (config key approval_rules)",
    (FILE, FLAG),
    metavar="FILE",
)

# Limits (a run that meets one stops) -----------------------------------------------------------

MAX_STEPS = Option[int](
    "max_steps",
    WHOLE,
    "model turns",
    (FILE, FLAG, Place.SERVE_LIMITS, Place.AGENT_MODEL, Place.TASK_TOOL),
    default=DEFAULT_MAX_STEPS,
    narrowing=Narrowing.LOWER,
    metavar="N",
)
MAX_COST = Option[float](
    "max_cost",
    POSITIVE,
    "spend in USD",
    (FILE, FLAG, Place.SERVE_LIMITS, Place.TASK_TOOL),
    field="max_cost_usd",
    narrowing=Narrowing.LOWER,
    metavar="USD",
)
MAX_TIME = Option[float](
    "max_time",
    POSITIVE,
    "wall-clock time in seconds",
    (FILE, FLAG, Place.SERVE_LIMITS, Place.TASK_TOOL),
    field="max_wall_s",
    narrowing=Narrowing.LOWER,
    metavar="SECONDS",
)
MAX_TOKENS = Option[int](
    "max_tokens",
    WHOLE,
    "output tokens per model turn",
    (FILE, FLAG, Place.SERVE_LIMITS, Place.AGENT_MODEL),
    narrowing=Narrowing.LOWER,
    metavar="N",
)
MAX_TOTAL_TOKENS = Option[int](
    "max_total_tokens",
    WHOLE,
    "input + output tokens over the whole run",
    (FILE, FLAG, Place.SERVE_LIMITS),
    narrowing=Narrowing.LOWER,
    metavar="N",
)

# The model's replies --------------------------------------------------------------------------

CHECK_BACK = Option[bool](
    "check_back",
    TOGGLE,
    "when the model answers before any command ran, ask it once whether the task needs one; "
    "its answer given again stands (default: on)",
    (FILE, FLAG),
)
NO_GRAMMAR = "none"
LOGOS_GRAMMAR = "logos"
GRAMMAR = Option[str](
    "grammar",
    Kind[str](str, "a grammar's name", action="toggle", on=LOGOS_GRAMMAR, off=NO_GRAMMAR),
    "constrain the replies with the logos llama.cpp grammars: prose and well-formed <cmd> "
    "blocks, no made-up <result>, tool-call syntax or shell code fence; a first reply that "
    "runs a command; an answer after a repeated command (default: on when llama.cpp serves "
    f'the model, --gguf or a llama.cpp --base-url; off otherwise; in the config file "'
    f'{LOGOS_GRAMMAR}" or "{NO_GRAMMAR}")',
    (FILE, FLAG),
)
FIRST_BLOCK = Option[bool](
    "first_block",
    TOGGLE,
    "with the grammars: the first reply must run a command (default: on); --no-first-block "
    "lets it answer at once",
    (FILE, FLAG),
)
PROMPT_STYLE = Option[str](
    "prompt_style",
    NAME,
    "the system prompt: full, or compact with one worked example for small models (default: "
    "compact when llama.cpp serves the model, full otherwise)",
    (FILE, FLAG),
)
PROVIDER_OPTIONS = Option[dict[str, Any]](
    "provider_options",
    TABLE,
    "extra JSON fields for every model request (e.g. a llama.cpp `grammar`, a `seed`)",
    (FILE,),
)
PROMPT_EXTRA = Option[str](
    "prompt_extra", TEXT, "text appended to the system prompt (house rules)", (FILE,)
)
MEMORY_PROMPT_CHARS = Option[int](
    "memory_prompt_chars",
    COUNT,
    "how much of the memory notes a new run's system prompt holds, 0 for none",
    (FILE,),
    default=DEFAULT_PROMPT_CHARS,
)

# What a run is given, and where it is kept ----------------------------------------------------

MCP = Option[list[str]](
    "mcp",
    TEXTS,
    "MCP servers whose tools the model may call (`mcp NAME TOOL {...}`, approved like "
    "commands): a JSON file of mcpServers (as Claude Code, Cursor and VS Code write them), "
    "NAME=URL (streamable HTTP) or NAME='COMMAND ARGS' (stdio); the config file's come first",
    (FILE, FLAG),
    metavar="SERVER",
)
TRAJECTORY = Option[str](
    "trajectory",
    TEXT,
    "where to save the run (default: $XDG_STATE_HOME/logos/runs/<time>-<task>.jsonl, under "
    "~/.local/state without XDG_STATE_HOME)",
    (FLAG,),
    metavar="PATH",
)
CONFIG = Option[str](
    "config",
    TEXT,
    "TOML file of defaults for these options (default: $XDG_CONFIG_HOME/logos/config.toml or "
    "~/.config/logos/config.toml); flags win",
    (FLAG,),
    metavar="FILE",
)

OPTIONS: tuple[Option[Any], ...] = (
    PROVIDER,
    MODEL,
    BASE_URL,
    API_KEY_ENV,
    GGUF,
    CONTEXT_SIZE,
    THREADS,
    TEMPERATURE,
    LOCAL_MODEL,
    DOWNLOAD_MODELS,
    SANDBOX,
    SOCKET,
    SANDBOX_TOKEN_FILE,
    ALLOW,
    NETWORK,
    ALLOW_HOST,
    TIMEOUT,
    MAX_TIMEOUT,
    BACKGROUND_AFTER,
    IMAGE,
    ENV,
    MAX_FORKS,
    APPROVE,
    YES,
    APPROVAL_RULES,
    MAX_STEPS,
    MAX_COST,
    MAX_TIME,
    MAX_TOKENS,
    MAX_TOTAL_TOKENS,
    CHECK_BACK,
    GRAMMAR,
    FIRST_BLOCK,
    PROMPT_STYLE,
    PROVIDER_OPTIONS,
    PROMPT_EXTRA,
    MEMORY_PROMPT_CHARS,
    MCP,
    TRAJECTORY,
    CONFIG,
)
"""Every option, in the order `--help` and a refusal list them."""


@functools.cache
def options_at(place: Place) -> tuple[Option[Any], ...]:
    """The options `place` may set."""
    return tuple(option for option in OPTIONS if place in option.places)
