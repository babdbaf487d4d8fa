"""`logos batch`: many tasks, each in a fresh workspace, judged by its check command.

`tasks` reads the task file, `workspace` makes each run's files, `execution` runs one task
(setup, the agent, the check), `local_pool` runs many at once in this process and
`ray_pool` across a Ray cluster, `results` and `summary` write down what happened, `display`
shows it, and `driver` ties them together for a front end.
"""

__all__ = ["display", "driver", "ray_pool", "settings", "summary", "tasks"]
