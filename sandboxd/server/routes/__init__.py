"""The daemon's routes, by family: `runs` (runs and sessions), `jobs`, `forks`, `temenos`
(temenos's API) and `health` (health and gc), dispatched by sandboxd.server.app.

What their handlers share is written once: `common` (the daemon's parts, a request's body,
session and caller, the refusals) and `execution` (a sandbox placed under the policy, a
command run in it).
"""

__all__ = ["common", "forks", "health", "jobs", "runs", "temenos"]
