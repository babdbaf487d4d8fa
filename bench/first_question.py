"""Family: the first questions people ask about a repository, with the default local model
(`bench.repo_questions`).

Each try is what a newcomer gets: the real `logos` command in its own process with its
defaults (plus `--yes`), against llama.cpp's own server loaded with the default model, in a
fresh copy of the repository. A try is **done** when its answer states the facts it must
and none it must not **and** a command really ran; an answer stating a fact the check rules
out counts as **invented**, and one holding protocol debris (`logos.protocol.debris`) as
**debris**.

Rows, on the same server:

* `logos` with its defaults, `first_question_tries` times per question;
* mini-swe-agent once per question in each of its configurations (`bench.mini_small`);
* the same model asked once with the repository's README pasted in (no README: the
  question alone): no command runs, so its "done" is its right answers, the floor any
  agent should beat;
* `logos` with its defaults once per question on each other model found
  (`Plan.first_question_other_models`; the 1.5B the default is chosen against), reported
  without a target.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import anyio

from bench.plan import Plan
from bench.repo_questions import FIRST_QUESTION, LOGOS, QUESTIONS, Question
from bench.results import Section, Series, SeriesGroup, Target
from bench.small_model import (
    CONTEXT,
    DONE,
    MAIN_MODEL,
    MINI_CONFIGS,
    MODELS,
    MODELS_DIR,
    Endpoint,
    SmallModel,
    TryOutcome,
    asked_once,
    in_rounds,
    run_logos_try,
    run_mini_try,
)
from logos.errors import LocalModelError
from logos.models.llama_server import LocalModelServer
from logos.protocol.debris import find_debris

FAMILY = "firstquestion"
TITLE = "first questions about a repository, default local model (bench/repo_questions.py)"
TARGET_DONE = 0.90
TARGET_WALL_S = 60.0
MINI_TIME_S = 120.0
"""mini-swe-agent's time limit per question: a small model that loops there is stopped."""
README_CHARS = 8000
"""Of the README pasted into the baseline's question: the start of a long one."""
PASTED_SYSTEM = "You are a helpful assistant."


@dataclass(frozen=True)
class Answered:
    """One try, judged."""

    outcome: TryOutcome
    invented: tuple[str, ...]
    debris: tuple[str, ...]

    @property
    def done(self) -> bool:
        return self.outcome.outcome == DONE


@dataclass
class Row:
    label: str
    tries: list[Answered] = field(default_factory=list)
    needs_command: bool = True

    def counts(self, answered: Answered) -> bool:
        """Done; for a row that runs no command, right."""
        return answered.done if self.needs_command else _right(answered)

    @property
    def done(self) -> int:
        return sum(self.counts(t) for t in self.tries)

    def by_kind(self, kind: str) -> str:
        of_kind = [t for t in self.tries if t.outcome.kind == kind]
        return f"{kind} {sum(self.counts(t) for t in of_kind)}/{len(of_kind)}"

    @property
    def share(self) -> float:
        return self.done / len(self.tries) if self.tries else math.nan

    def median(self, attribute: str) -> float:
        values = [float(getattr(t.outcome, attribute)) for t in self.tries]
        return statistics.median(values) if values else math.nan

    def cells(self) -> tuple[str, ...]:
        return (
            self.label,
            f"{self.done}/{len(self.tries)}",
            f"{self.share:.0%}",
            str(sum(1 for t in self.tries if t.invented)),
            str(sum(1 for t in self.tries if t.debris)),
            f"{self.median('wall_s'):.1f} s",
            f"{self.median('turns'):.0f}",
        )


LOGOS_LABEL = "logos (defaults)"


def _is_baseline(row: Row) -> bool:
    """A row logos must be ahead of: another agent, or the model asked without one."""
    return not row.label.startswith(LOGOS_LABEL)


def _right(answered: Answered) -> bool:
    return answered.outcome.outcome in (DONE, "right guess")


def judge(question: Question, outcome: TryOutcome) -> Answered:
    return Answered(
        outcome,
        tuple(question.invented(outcome.answer)),
        tuple(d.kind for d in find_debris(outcome.answer)),
    )


def ask_with_readme(question: Question, endpoint: Endpoint) -> TryOutcome:
    """The floor: one request, the README (if any) pasted above the question."""
    with tempfile.TemporaryDirectory(prefix=f"first-pasted-{question.id}-") as scratch:
        workspace = Path(scratch) / "work"
        workspace.mkdir()
        question.lay_out(workspace)
        readme = workspace / "README.md"
        if readme.is_file():
            text = readme.read_text(encoding="utf-8")[:README_CHARS]
            content = f"This is the repository's README.md:\n\n{text}\n\n{question.prompt}"
        else:
            content = f"The repository has no README.\n\n{question.prompt}"
        return asked_once(question, endpoint, workspace, content, timeout_s=300.0)


def run_row(
    label: str,
    tries: int,
    questions: Sequence[Question],
    one_try: Callable[[Question], TryOutcome],
    *,
    needs_command: bool = True,
) -> Row:
    return Row(
        label,
        in_rounds(label, tries, questions, lambda q: judge(q, one_try(q)), _status),
        needs_command=needs_command,
    )


def _status(answered: Answered) -> str:
    status = "done" if answered.done else answered.outcome.outcome
    return f"{status} invented {list(answered.invented)}" if answered.invented else status


async def run(plan: Plan) -> Section:
    return await anyio.to_thread.run_sync(_run_sync, plan)


def _run_sync(plan: Plan) -> Section:
    questions = QUESTIONS[: plan.first_question_count] if plan.first_question_count else QUESTIONS
    path = MODELS_DIR / MAIN_MODEL.file
    if not path.is_file():
        problem = f"model {MAIN_MODEL.name} is not in {MODELS_DIR}: run scripts/fetch-model"
        return _section([], questions, [problem])
    rows: list[Row] = []
    problems: list[str] = []
    try:
        with LocalModelServer(path, n_ctx=CONTEXT) as server:
            endpoint = Endpoint(server.openai_base_url, server.api_key)
            rows.append(
                run_row(
                    LOGOS_LABEL,
                    plan.first_question_tries,
                    questions,
                    partial(run_logos_try, endpoint=endpoint),
                )
            )
            if plan.first_question_baselines:
                for config in MINI_CONFIGS:
                    rows.append(
                        run_row(
                            f"mini-swe-agent ({config})",
                            1,
                            questions,
                            partial(
                                run_mini_try,
                                endpoint=endpoint,
                                config=config,
                                time_limit_s=MINI_TIME_S,
                            ),
                        )
                    )
                rows.append(
                    run_row(
                        "same model, README pasted, asked once",
                        1,
                        questions,
                        partial(ask_with_readme, endpoint=endpoint),
                        needs_command=False,
                    )
                )
    except LocalModelError as exc:
        problems.append(f"{MAIN_MODEL.label} could not be served: {exc}")
    for model in _other_models(plan, problems):
        try:
            with LocalModelServer(MODELS_DIR / model.file, n_ctx=CONTEXT) as server:
                endpoint = Endpoint(server.openai_base_url, server.api_key)
                rows.append(
                    run_row(
                        f"{LOGOS_LABEL}, {model.label}",
                        1,
                        questions,
                        partial(run_logos_try, endpoint=endpoint),
                    )
                )
        except LocalModelError as exc:
            problems.append(f"{model.label} could not be served: {exc}")
    return _section(rows, questions, problems)


def _other_models(plan: Plan, problems: list[str]) -> list[SmallModel]:
    """The other models to ask, of those fetched; a missing one is a problem to report."""
    found = []
    for name in plan.first_question_other_models:
        model = next((m for m in MODELS if m.name == name), None)
        if model is not None and (MODELS_DIR / model.file).is_file():
            found.append(model)
        else:
            problems.append(f"model {name} is not in {MODELS_DIR}: run scripts/fetch-model {name}")
    return found


def _section(
    rows: Sequence[Row], questions: Sequence[Question], problems: Sequence[str]
) -> Section:
    targets = []
    main = next((row for row in rows if row.label == LOGOS_LABEL), None)
    if main is not None and len(questions) == len(QUESTIONS):
        targets.append(
            Target(
                f"{MAIN_MODEL.label}: >= {TARGET_DONE:.0%} of the first questions done",
                f"{main.share:.0%} ({main.done}/{len(main.tries)})",
                main.share >= TARGET_DONE,
            )
        )
        debris = sum(1 for t in main.tries if t.debris)
        targets.append(Target("no answer with protocol debris", str(debris), debris == 0))
        invented = sum(1 for t in main.tries if t.invented)
        targets.append(Target("no answer with an invented fact", str(invented), invented == 0))
        for other in (row for row in rows if _is_baseline(row)):
            targets.append(
                Target(
                    f"logos ahead of {other.label}",
                    f"{main.share:.0%} vs {other.share:.0%}",
                    main.share > other.share,
                )
            )
    first = [t for t in (main.tries if main else []) if t.outcome.task == f"{LOGOS.name}-what"]
    if first:
        right = sum(t.done for t in first)
        slowest = max(t.outcome.wall_s for t in first)
        targets.append(
            Target(
                f"README's first question on this repository: right each time, under "
                f"{TARGET_WALL_S:.0f} s",
                f"{right}/{len(first)}, slowest {slowest:.1f} s (model already loaded)",
                right == len(first) and slowest < TARGET_WALL_S,
            )
        )
    kinds = sorted({q.kind for q in questions})
    held_out = {q.id for q in questions if q.held_out}
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("agent", "done", "share", "invented", "debris", "median wall", "turns"),
        rows=tuple(row.cells() for row in rows),
        groups=(
            SeriesGroup(
                "first questions: wall time per try",
                tuple(
                    Series(row.label, tuple(t.outcome.wall_s for t in row.tries)) for row in rows
                ),
            ),
        )
        if rows
        else (),
        targets=tuple(targets),
        notes=(
            f"{len(questions)} questions on {len({q.repository.name for q in questions})} "
            f"repositories built by the suite (kinds: {', '.join(kinds)}); the first is "
            f"the README's: {FIRST_QUESTION!r} on a clone of this repository",
            "done = the answer states every fact it must and none it must not, AND a "
            "command ran (the README-pasted row runs none: its done is its right answers); "
            "invented = answers stating a fact ruled out (a framework not used, the worked "
            "example's made-up project); debris = answers with protocol debris",
            "done by kind: "
            + "; ".join(
                f"{row.label}: " + ", ".join(row.by_kind(kind) for kind in kinds) for row in rows
            ),
            f"held out ({len(held_out)} questions on repositories with no README, written "
            "after the defaults were tuned on the others): "
            + "; ".join(
                f"{row.label} {sum(row.counts(t) for t in row.tries if t.outcome.task in held_out)}"
                f"/{sum(1 for t in row.tries if t.outcome.task in held_out)}"
                for row in rows
            ),
        ),
        problems=tuple(problems),
        raw={
            "rows": [
                {
                    "label": row.label,
                    "tries": [
                        {**asdict(t.outcome), "invented": t.invented, "debris": t.debris}
                        for t in row.tries
                    ],
                }
                for row in rows
            ]
        },
    )
