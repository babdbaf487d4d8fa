"""Family 4: how much command time hides behind a slowly streaming model.

The loop starts each block the moment it closes in the stream. Against it runs the obvious
design, "wait for the whole reply, then parse and run its blocks" (parse_cmd_blocks +
execute_blocks), on the same scripted reply, runner and commands, interleaved.
"""

from __future__ import annotations

import statistics
import time

import logos
from bench.plan import Plan
from bench.results import Section
from bench.scripted_model import CHARS_PER_TOKEN, ScriptedModel
from logos.agent.config import Callbacks, Config
from logos.agent.execute import execute_blocks
from logos.agent.steps import StepMessage
from logos.options import ExecOptions
from logos.protocol.parse import parse_cmd_blocks
from logos.providers.base import ModelRequest, TextDelta
from logos.result import Result
from logos.runners.base import Runner

FAMILY = "overlap"
TITLE = "Command time hidden behind generation (streaming dispatch)"
BLOCKS = 3
FINAL_REPLY = "The three checks are done."
_FILLER = "The build log shows the cache was cold, so "


def slow_reply(tokens: int, command: str) -> str:
    """A reply of about `tokens` tokens with BLOCKS blocks of `command` spread through it."""
    block = f"\n<cmd>{command}</cmd>\n"
    prose_chars = max(len(_FILLER), tokens * CHARS_PER_TOKEN - BLOCKS * len(block))
    prose = (_FILLER * (prose_chars // len(_FILLER) + 1))[:prose_chars]
    # Blocks after 1/4, 2/4 and 3/4 of the prose: the last quarter streams after the last one.
    cuts = [prose.rfind(" ", 0, prose_chars * (n + 1) // (BLOCKS + 1)) + 1 for n in range(BLOCKS)]
    parts = []
    start = 0
    for cut in cuts:
        parts += [prose[start:cut], block]
        start = cut
    parts.append(prose[start:])
    return "".join(parts)


class _TurnClock:
    def __init__(self) -> None:
        self.turn_end: float | None = None
        self.results: tuple[Result, ...] = ()

    def on_step_end(self, step: StepMessage) -> None:
        if step.role == "result" and self.turn_end is None:
            self.turn_end = time.perf_counter()
            self.results = step.results


async def streaming_turn(reply: str, plan: Plan, runner: Runner) -> dict[str, float]:
    """One turn through logos.run: wall time, generation time and command times."""
    model = ScriptedModel([reply, FINAL_REPLY], tokens_per_s=plan.overlap_tokens_per_s)
    clock = _TurnClock()
    config = Config(provider=model, runner=runner, max_steps=2)
    started = time.perf_counter()
    outcome = await logos.run(
        config, [], "Run the checks.", Callbacks(on_step_end=clock.on_step_end)
    )
    _check(clock.results, f"the streaming turn ({outcome.stop_reason}, {outcome.error})")
    assert clock.turn_end is not None
    return {
        "wall_s": clock.turn_end - started,
        "generation_s": model.timings[0].duration_s,
        "commands_sum_s": sum(r.duration_s for r in clock.results),
    }


async def batch_turn(reply: str, plan: Plan, runner: Runner) -> dict[str, float]:
    """The baseline: stream the whole reply, then parse it and run its blocks concurrently."""
    model = ScriptedModel([reply], tokens_per_s=plan.overlap_tokens_per_s)
    started = time.perf_counter()
    text = "".join(
        [
            event.text
            async for event in model.stream(ModelRequest(system="", messages=()))
            if isinstance(event, TextDelta)
        ]
    )
    generated = time.perf_counter()
    results = await execute_blocks(parse_cmd_blocks(text), runner, ExecOptions())
    finished = time.perf_counter()
    _check(tuple(results), "the wait-then-run baseline")
    return {
        "wall_s": finished - started,
        "generation_s": generated - started,
        "commands_wall_s": finished - generated,
        "commands_sum_s": sum(r.duration_s for r in results),
    }


def _check(results: tuple[Result, ...], where: str) -> None:
    if len(results) != BLOCKS or not all(r.ok for r in results):
        raise RuntimeError(
            f"{where} did not run its {BLOCKS} blocks cleanly: {results}; check the runner"
        )


async def run(plan: Plan) -> Section:
    reply = slow_reply(plan.overlap_tokens, plan.overlap_command)
    streaming: list[dict[str, float]] = []
    batch: list[dict[str, float]] = []
    async with logos.LocalRunner() as runner:
        for _ in range(plan.overlap_repeats):
            streaming.append(await streaming_turn(reply, plan, runner))
            batch.append(await batch_turn(reply, plan, runner))

    def median(turns: list[dict[str, float]], key: str) -> float:
        return statistics.median(turn[key] for turn in turns)

    generation = median(streaming, "generation_s")
    wall = median(streaming, "wall_s")
    commands_sum = median(streaming, "commands_sum_s")
    baseline_wall = median(batch, "wall_s")
    commands_wall = median(batch, "commands_wall_s")
    hidden_vs_batch = baseline_wall - wall
    hidden_vs_serial = generation + commands_sum - wall
    rows = (
        ("generation (scripted stream)", f"{generation:.2f} s", ""),
        (f"commands: {BLOCKS} x `{plan.overlap_command}`, summed", f"{commands_sum:.2f} s", ""),
        ("commands run concurrently after the reply", f"{commands_wall:.2f} s", ""),
        ("turn, wait for reply then run (baseline)", f"{baseline_wall:.2f} s", ""),
        ("turn, logos streaming dispatch", f"{wall:.2f} s", ""),
        (
            "hidden vs baseline",
            f"{hidden_vs_batch:.2f} s",
            f"{100 * hidden_vs_batch / commands_wall:.0f}% of the commands' wall time",
        ),
        (
            "hidden vs generation + summed commands",
            f"{hidden_vs_serial:.2f} s",
            f"{100 * hidden_vs_serial / commands_sum:.0f}% of the summed command time",
        ),
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("per turn (median)", "seconds", "share"),
        rows=rows,
        notes=(
            f"{plan.overlap_repeats} interleaved turn(s) per design; the reply is "
            f"{plan.overlap_tokens} tokens at {plan.overlap_tokens_per_s:g} tokens/s with its "
            f"{BLOCKS} blocks after 1/4, 2/4 and 3/4 of the text; LocalRunner",
        ),
        raw={"streaming": streaming, "batch": batch, "reply": reply},
    )
