"""Who decides whether a command runs: the approval wrapper around a runner (`approval`), the
rules by program and arguments (`rules`), the audit log of every decision (`audit`), and the
command policy that refuses in-place edits (`policy`, with the shell lexer it reads commands
with, `shell_lexer`).

Imports the runners' protocol and the shared vocabulary; no agent, provider or front.
"""

__all__ = ["approval", "audit", "policy", "rules", "shell_lexer"]
