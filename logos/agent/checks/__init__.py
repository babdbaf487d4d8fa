"""The checks a model's reply goes through before the loop answers it.

The loop (`logos.agent.loop`) reads each turn into a `Reply` (`reply`): what it held, be it
blocks, an unclosed block, a cut, an interruption, fake tool calls, a fenced command, a
made-up result, an empty answer or an answer. Then a run's checks (`base.ReplyCheck`, listed
by its `logos.agent.replies.ReplyPolicy`) read it in turn; each is a small object in a
module of its own that may add a notice for the model, ask again at once, or end the run
(`base.AskAgain`, `base.EndRun`). A reply with blocks or notices is answered with its
results and the notices; an answer that no check objects to ends the run.

Every run's checks: `interruptions`, `cuts`, `fake_actions`, `repeated_replies`,
`empty_answers`, `running_jobs`. A policy may add `check_back`, and the small-model one those
that hold an answer to the task and the outputs: `first_look`, `asked_file`, `task_files`,
`worked_out`, `plain_answers`, `grounded_facts`, `project_description`, `project_commands`,
`answer_form`.
"""

__all__ = [
    "answer_form",
    "asked_file",
    "base",
    "check_back",
    "cuts",
    "empty_answers",
    "fake_actions",
    "first_look",
    "grounded_facts",
    "interruptions",
    "plain_answers",
    "project_commands",
    "project_description",
    "repeated_replies",
    "reply",
    "running_jobs",
    "task_files",
    "worked_out",
]
