"""How a run asks its model for replies and which checks read them: one setting, `ReplyPolicy`.

Every model's turns go through the same loop core (`logos.agent.loop`) and the same checks of
the protocol (`logos.agent.checks`). What differs between models is this policy: the default
keeps what a model behind OpenAI's or Anthropic's API needs (the full prompt, its own
sampling, the protocol's checks); `SMALL_MODEL` bundles what makes a small local model
succeed, each part measured on the small-task suite (`bench/small_model.py`) and the
first-question suite (`bench/first_question.py`): the compact prompt and its worked examples,
the llama.cpp grammars (`logos.protocol.grammar`), greedy sampling, a cap on each reply, the
check-back, and answers asked again from the commands' outputs and held to what the task asks.
The fronts turn `SMALL_MODEL` on for a model served by llama.cpp
(`logos.settings.resolution.replies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from logos.agent.checks.answer_form import AnswerForms
from logos.agent.checks.asked_file import AskedFiles
from logos.agent.checks.base import ReplyCheck
from logos.agent.checks.check_back import CheckBack
from logos.agent.checks.cuts import Cuts
from logos.agent.checks.empty_answers import EmptyAnswers
from logos.agent.checks.fake_actions import FakeActions
from logos.agent.checks.first_look import FirstLook
from logos.agent.checks.grounded_facts import GroundedFacts
from logos.agent.checks.interruptions import Interruptions
from logos.agent.checks.plain_answers import PlainAnswers
from logos.agent.checks.project_commands import ProjectCommands
from logos.agent.checks.project_description import ProjectDescription
from logos.agent.checks.repeated_replies import RepeatedReplies
from logos.agent.checks.running_jobs import RunningJobs
from logos.agent.checks.task_files import TaskFiles
from logos.agent.checks.worked_out import WorkedOut
from logos.protocol.grammar import ReplyGrammars
from logos.protocol.prompt import PromptStyle
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES, WorkedExamples
from logos.providers.base import Message

LOCAL_TEMPERATURE = 0.0
"""Sampling temperature for a small model unless one is set: on the small-task suite a 0.5B
model did 20-21 of 30 tasks greedily against 13-20 at 0.3, and no worse on retries."""
LOCAL_MAX_TOKENS = 1024
"""Output tokens per reply for a small model unless set: a small model that loops (a hundred
blocks in one reply, a number that never ends) is cut off within seconds."""
_DEFAULT_REPEATED_FAILURE_NOTE = 3


@dataclass(frozen=True)
class ReplyPolicy:
    """How a run asks for its replies and checks them; the defaults are a frontier model's."""

    prompt_style: PromptStyle = "full"
    """The system prompt's style (`logos.protocol.prompt`), which the front renders; a
    `Config.system_prompt` left None is rendered in it."""
    examples: Sequence[Message] | WorkedExamples = ()
    """Turns sent before the conversation, after the system prompt, to show the protocol
    once; or worked examples fitted to the task (`logos.protocol.worked_examples`, whose
    plain answers also see the examples marked for it). Never part of the steps a run
    returns."""
    grammars: ReplyGrammars | None = None
    """llama.cpp grammars for the replies, one per kind of turn (`logos.protocol.grammar`),
    sent as each request's `grammar`. Only for a server that takes a grammar (llama.cpp)."""
    temperature: float | None = None
    """Sampling temperature unless `Config.temperature` is set; None: the provider's."""
    max_tokens: int | None = None
    """Output tokens per reply unless `Config.max_tokens` is set; None: the provider's."""
    check_back: bool = False
    """Before taking an answer from a conversation that has run no command yet (its history
    included), ask the model once whether the task needs one (`logos.agent.checks.check_back`):
    small models answer questions about this machine from guesses."""
    plain_answers: bool = False
    """Answers as a small model needs them asked: once commands ran, the final answer is
    asked from a plain view of the task and the commands' outputs
    (`logos.protocol.plain_answer`), with the answer grammar, and cleared of protocol debris
    (`logos.protocol.debris`); the model's own answer stays in the steps
    (`logos.agent.checks.plain_answers`). With them come the checks that hold an answer to
    the task and the outputs: a first look that missed its README reads the manifest the
    listing shows (`first_look`), the files the task asks for are written before it ends
    (`task_files`), an answer names no language, framework or command no output showed
    (`grounded_facts`), an answer to what the project does gives what its manifest says
    (`project_description`), a how-to answer names the project's own command
    (`project_commands`), a number the task asks for is worked out by a command before it is
    answered (`worked_out`), and the answer keeps the form the task asks for
    (`answer_form`)."""
    repeated_failure_note: int | None = _DEFAULT_REPEATED_FAILURE_NOTE
    """After the same command fails the same way this many times in a row, a note under its
    block tells the model to try something else (`logos.protocol.repeated_failure`); None:
    never."""

    def __post_init__(self) -> None:
        if self.repeated_failure_note is not None and self.repeated_failure_note < 2:
            raise ValueError(
                "repeated_failure_note must be at least 2 (a failure repeats from its second "
                f"time) or None, got {self.repeated_failure_note}"
            )

    def checks(self, max_hallucinations: int) -> list[ReplyCheck]:
        """This policy's checks, fresh for one run, in the order they read a reply: those
        of every reply, then those of an answer. Plain answers bring the checks that hold a
        small model's reply to the task and the outputs."""
        replies: list[ReplyCheck] = [
            Interruptions(),
            Cuts(),
            FakeActions(max_hallucinations),
            RepeatedReplies(forced=self.grammars is not None),
        ]
        answers: list[ReplyCheck] = [EmptyAnswers(), RunningJobs()]
        if self.plain_answers:
            replies.append(FirstLook())
            answers += [AskedFiles(), TaskFiles(), WorkedOut(), PlainAnswers()]
        if self.check_back:
            answers.append(CheckBack())
        if self.plain_answers:
            answers += [GroundedFacts(), ProjectDescription(), ProjectCommands(), AnswerForms()]
        return [*replies, *answers]


SMALL_MODEL = ReplyPolicy(
    prompt_style="compact",
    examples=SMALL_MODEL_EXAMPLES,
    grammars=ReplyGrammars(),
    temperature=LOCAL_TEMPERATURE,
    max_tokens=LOCAL_MAX_TOKENS,
    check_back=True,
    plain_answers=True,
)
"""What makes a small local model succeed (module docstring)."""
