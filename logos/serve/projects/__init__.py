"""Projects: several agents in one chat, under `logos serve`.

A project has one captain and any number of talons, each a logos loop on a session of its
own. The person's messages and the agents' replies are one chat, numbered and saved as the
project's event log; exactly one agent answers each message (`routing`), agents hand off to
each other with directives (`directives`), each is briefed on its first message
(`briefing`) and sent what it missed since its own last turn (`context`); guards
(`guards`) and nested budgets (`budget`) stop a team that goes round in circles or spends
too much, and ask the person instead. `store` saves it all under the server's state
directory; `registry` makes, loads and changes projects; `turns` runs a project's turns,
`calls` one agent's call in them; `routes` is the HTTP API.

Pure modules (`directives`, `routing`, `context`, `guards`, `budget`, `briefing`) take text
and data and return decisions: the engine alone runs models and commands.
"""

__all__ = ["context", "registry", "routes", "routing", "turns", "wire"]
