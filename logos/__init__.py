"""logos: a stateless agent loop whose model acts through `<cmd>` blocks."""

from logos.capture import CapturedOutput, OutputCapture
from logos.envelope import format_results
from logos.local_runner import LocalRunner
from logos.options import AllowedPath, ExecOptions
from logos.prompt import build_system_prompt
from logos.result import Result
from logos.runner import Runner

__all__ = [
    "AllowedPath",
    "CapturedOutput",
    "ExecOptions",
    "LocalRunner",
    "OutputCapture",
    "Result",
    "Runner",
    "build_system_prompt",
    "format_results",
]
