"""The text protocol between the model and logos: parsing `<cmd>` blocks out of streamed text
(`parse`), the `<result>` envelope (`envelope`), the system prompt (`prompt`), the checks on
what the model wrote (`hallucination`, `fenced_command`, `code_fences`, `fabricated_result`)
and on what it ran (`repetition`, `repeated_failure`), the corrective messages (`notices`),
the llama.cpp grammars (`grammar`), and for small models the plain view a forced answer is
asked from (`plain_answer`), the cleaning of a final answer's debris (`debris`), the form a
task asks its answer to take (`answer_form`), whether an output holds the number a question
asks for (`asked_number`), where a first look finds a repository's facts
(`first_look`), the facts an answer names that no output showed (`facts`), the files a task
asks to be written (`task_files`), and the shell's well-known traps (`pitfalls`).

Pure text in, text out: imports the shared vocabulary (`logos.result`) and the providers'
message types (`logos.providers.base`) only; no runner, no provider, no front.
"""

__all__ = [
    "answer_form",
    "asked_file",
    "asked_number",
    "debris",
    "envelope",
    "fabricated_result",
    "facts",
    "fenced_command",
    "first_look",
    "grammar",
    "hallucination",
    "notices",
    "parse",
    "pitfalls",
    "plain_answer",
    "project_commands",
    "project_description",
    "prompt",
    "repeated_failure",
    "repetition",
    "task_files",
    "worked_examples",
]
