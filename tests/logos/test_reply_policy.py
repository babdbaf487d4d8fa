"""The reply policy: one setting for how a model is asked and which checks read its replies;
the default keeps a frontier model's, `SMALL_MODEL` bundles the small-model ones."""

from __future__ import annotations

import pytest

from logos.agent.checks.answer_form import AnswerForms
from logos.agent.checks.asked_file import AskedFiles
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
from logos.agent.replies import LOCAL_MAX_TOKENS, LOCAL_TEMPERATURE, SMALL_MODEL, ReplyPolicy
from logos.protocol.grammar import ReplyGrammars
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES
from tests.support.scripted import ScriptedProvider, config_for

PROTOCOL = [Interruptions, Cuts, FakeActions, RepeatedReplies, EmptyAnswers, RunningJobs]
"""Every run's checks, in order."""


def kinds(policy: ReplyPolicy) -> list[type]:
    return [type(check) for check in policy.checks(max_hallucinations=3)]


def test_a_frontier_model_gets_the_protocol_checks_only_and_its_own_sampling() -> None:
    policy = ReplyPolicy()
    assert kinds(policy) == PROTOCOL
    assert (policy.prompt_style, policy.examples, policy.grammars) == ("full", (), None)
    assert (policy.temperature, policy.max_tokens) == (None, None)


def test_the_small_model_policy_bundles_its_parts() -> None:
    with_first_look = [*PROTOCOL[:4], FirstLook, *PROTOCOL[4:]]
    assert kinds(SMALL_MODEL) == [
        *with_first_look,
        AskedFiles,
        TaskFiles,
        WorkedOut,
        PlainAnswers,
        CheckBack,
        GroundedFacts,
        ProjectDescription,
        ProjectCommands,
        AnswerForms,
    ]
    assert SMALL_MODEL.prompt_style == "compact" and SMALL_MODEL.examples is SMALL_MODEL_EXAMPLES
    assert SMALL_MODEL.grammars == ReplyGrammars()
    assert (SMALL_MODEL.temperature, SMALL_MODEL.max_tokens) == (
        LOCAL_TEMPERATURE,
        LOCAL_MAX_TOKENS,
    )


def test_each_run_gets_checks_of_its_own() -> None:
    first, second = SMALL_MODEL.checks(3), SMALL_MODEL.checks(3)
    assert all(a is not b for a, b in zip(first, second, strict=True))


def test_a_config_s_own_sampling_and_cap_win_over_the_policy_s() -> None:
    provider = ScriptedProvider([])
    small = config_for(provider, replies=SMALL_MODEL)
    assert (small.reply_temperature, small.reply_max_tokens) == (0.0, LOCAL_MAX_TOKENS)
    own = config_for(provider, replies=SMALL_MODEL, temperature=0.7, max_tokens=64)
    assert (own.reply_temperature, own.reply_max_tokens) == (0.7, 64)


def test_a_repeated_failure_note_needs_a_repetition() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        ReplyPolicy(repeated_failure_note=1)
