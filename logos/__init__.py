"""logos: a stateless agent loop whose model acts through `<cmd>` blocks.

Data flows one way: model text → blocks (`parse`) → runner (`LocalRunner`, or a sandbox's
runner such as `sandboxd.client.runner.SandboxRunner`) → results (`Result`) → envelope
(`format_results`) → model (`run`).

The names below load on first use (PEP 562), so that a program importing one part of
logos, such as `logos.options` or the `logos` command, does not pay for all of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names, for type checkers; `name as name` marks a re-export
    from logos.agent.config import (
        Callbacks as Callbacks,
        Config as Config,
    )
    from logos.agent.execute import (
        BlockExecutor as BlockExecutor,
        execute_blocks as execute_blocks,
        execute_blocks_sync as execute_blocks_sync,
    )
    from logos.agent.loop import (
        run as run,
        run_sync as run_sync,
    )
    from logos.agent.steps import (
        RunResult as RunResult,
        StepMessage as StepMessage,
        StopReason as StopReason,
        steps_to_messages as steps_to_messages,
    )
    from logos.approvals.policy import (
        CommandPolicy as CommandPolicy,
        allow_all as allow_all,
        chain_policies as chain_policies,
        check_command as check_command,
    )
    from logos.errors import (
        AuthenticationError as AuthenticationError,
        BadRequestError as BadRequestError,
        ContextWindowExceededError as ContextWindowExceededError,
        LocalModelError as LocalModelError,
        LogosError as LogosError,
        NotFoundError as NotFoundError,
        PermissionDeniedError as PermissionDeniedError,
        ProviderConnectionError as ProviderConnectionError,
        ProviderError as ProviderError,
        RateLimitError as RateLimitError,
        RetriesExhaustedError as RetriesExhaustedError,
        ServerError as ServerError,
        StreamInterruptedError as StreamInterruptedError,
    )
    from logos.models.llama_server import (
        LocalModelServer as LocalModelServer,
    )
    from logos.options import (
        AllowedPath as AllowedPath,
        ExecOptions as ExecOptions,
    )
    from logos.protocol.envelope import (
        format_results as format_results,
    )
    from logos.protocol.hallucination import (
        find_tool_call_hallucination as find_tool_call_hallucination,
    )
    from logos.protocol.parse import (
        CmdStreamParser as CmdStreamParser,
        CommandBlock as CommandBlock,
        ProseDelta as ProseDelta,
        UnclosedBlock as UnclosedBlock,
        parse_cmd_blocks as parse_cmd_blocks,
        strip_cmd_blocks as strip_cmd_blocks,
    )
    from logos.protocol.prompt import (
        build_system_prompt as build_system_prompt,
    )
    from logos.providers import (
        AnthropicProvider as AnthropicProvider,
        Message as Message,
        ModelRequest as ModelRequest,
        OpenAIProvider as OpenAIProvider,
        Provider as Provider,
        RetryPolicy as RetryPolicy,
        Usage as Usage,
    )
    from logos.providers.pricing import (
        Price as Price,
        context_window_for as context_window_for,
        estimate_cost as estimate_cost,
    )
    from logos.result import (
        Result as Result,
    )
    from logos.runners.base import (
        Runner as Runner,
    )
    from logos.runners.capture import (
        CapturedOutput as CapturedOutput,
        OutputCapture as OutputCapture,
    )
    from logos.runners.local import (
        LocalRunner as LocalRunner,
    )

# Where each public name lives: its module, imported on the name's first use.
_HOMES: dict[str, str] = {
    "allow_all": "logos.approvals.policy",
    "AllowedPath": "logos.options",
    "AnthropicProvider": "logos.providers",
    "AuthenticationError": "logos.errors",
    "BadRequestError": "logos.errors",
    "BlockExecutor": "logos.agent.execute",
    "build_system_prompt": "logos.protocol.prompt",
    "Callbacks": "logos.agent.config",
    "CapturedOutput": "logos.runners.capture",
    "chain_policies": "logos.approvals.policy",
    "check_command": "logos.approvals.policy",
    "CmdStreamParser": "logos.protocol.parse",
    "CommandBlock": "logos.protocol.parse",
    "CommandPolicy": "logos.approvals.policy",
    "Config": "logos.agent.config",
    "context_window_for": "logos.providers.pricing",
    "ContextWindowExceededError": "logos.errors",
    "estimate_cost": "logos.providers.pricing",
    "ExecOptions": "logos.options",
    "execute_blocks": "logos.agent.execute",
    "execute_blocks_sync": "logos.agent.execute",
    "find_tool_call_hallucination": "logos.protocol.hallucination",
    "format_results": "logos.protocol.envelope",
    "LocalModelError": "logos.errors",
    "LocalModelServer": "logos.models.llama_server",
    "LocalRunner": "logos.runners.local",
    "LogosError": "logos.errors",
    "Message": "logos.providers",
    "ModelRequest": "logos.providers",
    "NotFoundError": "logos.errors",
    "OpenAIProvider": "logos.providers",
    "OutputCapture": "logos.runners.capture",
    "parse_cmd_blocks": "logos.protocol.parse",
    "PermissionDeniedError": "logos.errors",
    "Price": "logos.providers.pricing",
    "ProseDelta": "logos.protocol.parse",
    "Provider": "logos.providers",
    "ProviderConnectionError": "logos.errors",
    "ProviderError": "logos.errors",
    "RateLimitError": "logos.errors",
    "Result": "logos.result",
    "RetriesExhaustedError": "logos.errors",
    "RetryPolicy": "logos.providers",
    "run": "logos.agent.loop",
    "run_sync": "logos.agent.loop",
    "Runner": "logos.runners.base",
    "RunResult": "logos.agent.steps",
    "ServerError": "logos.errors",
    "StepMessage": "logos.agent.steps",
    "steps_to_messages": "logos.agent.steps",
    "StopReason": "logos.agent.steps",
    "StreamInterruptedError": "logos.errors",
    "strip_cmd_blocks": "logos.protocol.parse",
    "UnclosedBlock": "logos.protocol.parse",
    "Usage": "logos.providers",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'logos' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next use is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
