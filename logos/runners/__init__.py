"""Where commands run: the `Runner` protocol (`base`) and the jobs it may keep (`job_runner`); local
bash (`local`), its processes (`process`), their process groups (`group_reaper`) and their
bounded output (`capture`, which sandboxd shares); sandbox kinds by name (`sandboxes`), the
token a sandbox daemon may ask for (`auth_token`), and a request through a daemon's restart
(`restarts`, which sandboxd shares).

Imports the shared vocabulary only: no protocol, provider, agent or front. Importing this
package imports none of its modules (sandboxd imports `capture`, `live` and `restarts` alone).
"""

__all__ = ["auth_token", "base", "capture", "job_runner", "live", "local", "restarts", "sandboxes"]
