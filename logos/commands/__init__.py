"""Commands the loop answers itself, without a shell: the seam (`family`), the run's jobs
(`job_commands`: `jobs`, `wait %1`, `kill %1`, kept in `run_jobs`) and the memory notes (`memory`:
remember, recall, forget; stored by `memory_store`).

Imports the runners' protocol and the shared vocabulary; no agent, provider or front.
"""

__all__ = ["family", "job_commands", "memory", "memory_store", "run_jobs"]
