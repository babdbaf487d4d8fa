"""How a run is configured, and the callbacks through which it reports progress."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from logos.agent.replies import ReplyPolicy
from logos.agent.steps import StepMessage
from logos.approvals.policy import CommandPolicy, check_command
from logos.commands.family import CommandFamily
from logos.mcp.servers import McpServer
from logos.options import ExecOptions
from logos.options.declarations import DEFAULT_MAX_STEPS
from logos.protocol.prompt import PromptStyle
from logos.providers.base import Provider
from logos.providers.pricing import Price
from logos.result import JobEnd, Result
from logos.runners.base import Runner
from logos.runners.live import LivePiece
from logos.runners.local import LocalRunner

_DEFAULT_MAX_HALLUCINATIONS = 3


@dataclass(frozen=True)
class Config:
    """Everything `run()` needs besides the conversation itself."""

    provider: Provider
    """The model to talk to (`OpenAIProvider`, `AnthropicProvider`, or your own)."""
    model: str | None = None
    """The model's name for price and context-window look-ups; the provider's by default."""
    system_prompt: str | None = None
    """None renders `build_system_prompt()` for this machine and the working directory."""
    runner: Runner = field(default_factory=LocalRunner)
    """Where commands run: local bash by default, or a sandbox's (`SandboxRunner()`)."""
    exec_options: ExecOptions = field(default_factory=ExecOptions)
    """Timeout, output limits, allowed paths and environment for every command."""
    policy: CommandPolicy = check_command
    """Decides which commands may run; a refusal goes back to the model as its result."""
    loop_commands: Sequence[CommandFamily] = ()
    """Commands the loop answers itself (`logos.commands.family`), asked before the policy;
    the jobs' own (`jobs`, `wait %1`, `kill %1`) are added when commands go on as jobs
    (`exec_options.background_after_s` on a `logos.runners.job_runner.JobRunner`)."""
    mcp_servers: Sequence[McpServer] = ()
    """MCP servers whose tools the model may call (`mcp SERVER TOOL {...}`), started for the
    run and stopped after it (`logos.mcp.tools`; needs the `mcp` extra)."""
    replies: ReplyPolicy = field(default_factory=ReplyPolicy)
    """How the model is asked for its replies and which checks read them
    (`logos.agent.replies`): the defaults keep a frontier model's prompt and behaviour;
    `SMALL_MODEL` bundles what small local models need (worked examples, grammars, plain
    answers, greedy sampling, a reply cap, the check-back)."""
    max_concurrency: int = 8
    """Commands of one reply that may run at the same time."""
    max_steps: int = DEFAULT_MAX_STEPS
    """Model turns before the run stops with `max_steps`."""
    max_tokens: int | None = None
    """Output token limit for each model turn; None: the reply policy's, else the
    provider's default."""
    max_total_tokens: int | None = None
    """Input + output tokens over the whole run before it stops with `max_tokens_budget`."""
    max_wall_s: float | None = None
    """Wall-clock seconds before the run stops with `max_wall_time`."""
    max_cost_usd: float | None = None
    """Spend before the run stops with `max_cost` (needs a known cost)."""
    max_hallucinations: int = _DEFAULT_MAX_HALLUCINATIONS
    """Fake tool calls (or commands in code fences, or made-up results) in a row before the
    run stops with `hallucination_limit`."""
    temperature: float | None = None
    """Sampling temperature; None: the reply policy's, else the provider's default."""
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    """Extra JSON fields for every request, merged into the provider's request body; a
    None value removes a field logos would send (e.g. `stream_options`)."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """Prices for models missing from the built-in table (model-name prefix → price)."""
    context_window: int | None = None
    """Tokens the model can read; the provider's or the built-in table's when None."""

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.max_hallucinations < 1:
            raise ValueError("max_hallucinations must be at least 1")
        if self.replies.grammars is not None and "grammar" in self.provider_options:
            raise ValueError(
                "two grammars are set: `replies.grammars` and provider_options['grammar']; keep one"
            )
        for name in ("max_wall_s", "max_cost_usd", "max_total_tokens", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive when set, got {value}")

    @property
    def model_name(self) -> str:
        return self.model or self.provider.model

    @property
    def reply_temperature(self) -> float | None:
        """The temperature each request is sent with: this config's, else the policy's."""
        return self.replies.temperature if self.temperature is None else self.temperature

    @property
    def reply_max_tokens(self) -> int | None:
        """The output token limit of each reply: this config's, else the policy's."""
        return self.replies.max_tokens if self.max_tokens is None else self.max_tokens


@dataclass(frozen=True)
class RunLimits:
    """A run's limits, as a front end resolved them (flags, a request, a task)."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_cost_usd: float | None = None
    max_wall_s: float | None = None
    max_tokens: int | None = None
    max_total_tokens: int | None = None

    def applied_to(self, config: Config) -> Config:
        """`config` with these limits: each field is the `Config` field of the same name."""
        return replace(config, **asdict(self))


@dataclass(frozen=True)
class ReplySettings:
    """A run's replies, as a front end resolved them (flags, its config file): the reply
    policy (`logos.agent.replies`), and the extra JSON fields every request carries."""

    policy: ReplyPolicy = field(default_factory=ReplyPolicy)
    provider_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prompt_style(self) -> PromptStyle:
        return self.policy.prompt_style

    def apply(self, config: Config) -> Config:
        """`config` with these settings (the system prompt is the front's to render in
        `prompt_style`)."""
        return replace(config, replies=self.policy, provider_options=self.provider_options)


@dataclass(frozen=True)
class Callbacks:
    """Progress reports from a run; each is optional and may be sync or async."""

    on_delta: Callable[[str], Awaitable[None] | None] | None = None
    """Prose as the model writes it (command blocks are not shown here)."""
    on_reasoning_delta: Callable[[str], Awaitable[None] | None] | None = None
    on_command_start: Callable[[int, str], Awaitable[None] | None] | None = None
    """A block closed in the stream and its command started (index within the reply)."""
    on_command_result: Callable[[int, Result], Awaitable[None] | None] | None = None
    on_command_output: Callable[[int, LivePiece], Awaitable[None] | None] | None = None
    """What a running command printed lately, for watchers (`logos.runners.live`): only
    from runners that can tell, only while it runs, bounded; its result holds what counts."""
    on_step_end: Callable[[StepMessage], Awaitable[None] | None] | None = None
    """A `StepMessage` was added (assistant turn or result envelope): persist it here."""
    on_job_end: Callable[[JobEnd, bool], Awaitable[None] | None] | None = None
    """A job ended: its end, and whether the model is shown it (False: the run stopped it
    as the run ended). A job's start is a command result with `Result.job` set."""
    on_retry: Callable[[str, int], Awaitable[None] | None] | None = None
    """A provider request is being retried: (reason, attempt)."""
