"""The policy's refusal: what a request may not have, the status it is answered with, and
why."""

from __future__ import annotations


class PolicyError(Exception):
    """A request the policy refuses: 403 for a refusal, 400 for a malformed value."""

    def __init__(self, code: str, message: str, *, status: int = 403) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
