"""logos: a stateless agent loop whose model acts through `<cmd>` blocks.

Data flows one way: model text → blocks (`parse`) → runner (`LocalRunner`, or a sandbox's
runner such as `sandboxd.client.runner.SandboxRunner`) → results (`Result`) → envelope
(`format_results`) → model (`run`).
"""

from logos.agent.config import Callbacks, Config
from logos.agent.execute import BlockExecutor, execute_blocks, execute_blocks_sync
from logos.agent.loop import run, run_sync
from logos.agent.steps import RunResult, StepMessage, StopReason, steps_to_messages
from logos.approvals.policy import CommandPolicy, allow_all, chain_policies, check_command
from logos.errors import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    LocalModelError,
    LogosError,
    NotFoundError,
    PermissionDeniedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    RetriesExhaustedError,
    ServerError,
    StreamInterruptedError,
)
from logos.models.llama_server import LocalModelServer
from logos.options import AllowedPath, ExecOptions
from logos.protocol.envelope import format_results
from logos.protocol.hallucination import find_tool_call_hallucination
from logos.protocol.parse import (
    CmdStreamParser,
    CommandBlock,
    ProseDelta,
    UnclosedBlock,
    parse_cmd_blocks,
    strip_cmd_blocks,
)
from logos.protocol.prompt import build_system_prompt
from logos.providers import (
    AnthropicProvider,
    Message,
    ModelRequest,
    OpenAIProvider,
    Provider,
    RetryPolicy,
    Usage,
)
from logos.providers.pricing import Price, context_window_for, estimate_cost
from logos.result import Result
from logos.runners.base import Runner
from logos.runners.capture import CapturedOutput, OutputCapture
from logos.runners.local import LocalRunner

__all__ = [
    "AllowedPath",
    "AnthropicProvider",
    "AuthenticationError",
    "BadRequestError",
    "BlockExecutor",
    "Callbacks",
    "CapturedOutput",
    "CmdStreamParser",
    "CommandBlock",
    "CommandPolicy",
    "Config",
    "ContextWindowExceededError",
    "ExecOptions",
    "LocalModelError",
    "LocalModelServer",
    "LocalRunner",
    "LogosError",
    "Message",
    "ModelRequest",
    "NotFoundError",
    "OpenAIProvider",
    "OutputCapture",
    "PermissionDeniedError",
    "Price",
    "ProseDelta",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimitError",
    "Result",
    "RetriesExhaustedError",
    "RetryPolicy",
    "RunResult",
    "Runner",
    "ServerError",
    "StepMessage",
    "StopReason",
    "StreamInterruptedError",
    "UnclosedBlock",
    "Usage",
    "allow_all",
    "build_system_prompt",
    "chain_policies",
    "check_command",
    "context_window_for",
    "estimate_cost",
    "execute_blocks",
    "execute_blocks_sync",
    "find_tool_call_hallucination",
    "format_results",
    "parse_cmd_blocks",
    "run",
    "run_sync",
    "steps_to_messages",
    "strip_cmd_blocks",
]
