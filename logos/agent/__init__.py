"""The agent loop: a run's turns (`loop`), its settings (`config`, `replies`), how it runs a
reply's blocks (`execute`) and keeps a long run in the context window (`context`), and what
it returns (`steps`).

May import the protocol, the runners' protocol, the providers, the commands the loop answers
itself and the approvals; never a front (`cli`, `serve`, `batch`).
"""

__all__ = ["config", "context", "execute", "loop", "replies", "steps"]
