"""logos: a stateless agent loop whose model acts through `<cmd>` blocks."""

from logos.capture import CapturedOutput, OutputCapture
from logos.options import AllowedPath, ExecOptions
from logos.result import Result
from logos.runner import Runner

__all__ = [
    "AllowedPath",
    "CapturedOutput",
    "ExecOptions",
    "OutputCapture",
    "Result",
    "Runner",
]
