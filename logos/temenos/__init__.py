"""The runner for a temenos daemon's API (temenos itself, or sandboxd's routes that speak it):
where the daemon listens (`address`), its JSON (`api`), the HTTP client (`client`), the
runner that keeps jobs (`runner`) and temenos as a sandbox kind (`kind`).

Imports the runners and the shared vocabulary; no agent, provider or front.
"""

__all__ = ["kind", "runner"]
