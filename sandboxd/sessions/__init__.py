"""Engine-agnostic bookkeeping of sandboxes and commands, shared by any backend.

`table` (a backend's sessions: start locks, idle reaping, retiring, closing), `caps` (live
containers in total and per caller), `pool` (warm sandboxes for the specs asked for lately)
and `jobs` (the daemon's jobs: commands that went on past their background threshold).

It imports the backend protocol (sandboxd.backend), the wire vocabulary (sandboxd.api) and
sizes (sandboxd.sizes), never an engine, the server or the policy.
"""

__all__ = ["caps", "job_store", "jobs", "lost", "pool", "table"]
