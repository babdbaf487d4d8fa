"""Model providers: one streaming interface over the OpenAI and Anthropic wire formats."""

from logos.providers.anthropic import AnthropicProvider
from logos.providers.base import (
    Finish,
    FinishReason,
    Message,
    ModelRequest,
    OnRetry,
    Provider,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.providers.openai import OpenAIProvider
from logos.providers.retry import RetryPolicy

__all__ = [
    "AnthropicProvider",
    "Finish",
    "FinishReason",
    "Message",
    "ModelRequest",
    "OnRetry",
    "OpenAIProvider",
    "Provider",
    "ReasoningDelta",
    "ReasoningSignature",
    "RedactedReasoning",
    "RetryPolicy",
    "StreamEvent",
    "TextDelta",
    "Usage",
    "UsageReport",
    "base",
    "choice",
    "http_provider",
    "pricing",
    "registry",
]
