"""`logos serve`: agent runs as a service over HTTP.

Runs start detached from the request that asked for them, stream their typed events
(`logos.records.events`) to any number of clients as server-sent events with replay, wait for
approvals given out of band, and are saved as sessions (trajectories) that later runs
continue. Projects (`logos.serve.projects`) put several agents in one chat. Starlette and
uvicorn are an optional extra (`pip install 'logos[serve]'`): only `logos.serve.app`,
`logos.serve.http`, `logos.serve.projects.routes` and `logos.serve.server` import them.
"""

__all__ = ["projects", "server", "setup", "view"]
