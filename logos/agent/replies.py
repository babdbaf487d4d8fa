"""How a front end asks the model to reply: sampling, grammars, the prompt's style.

The command, the server and a batch resolve these once (`logos.cli.settings.replies`) and
apply them to the run's `Config` the same way. Two sets of defaults come out: models behind
OpenAI's or Anthropic's API keep the full prompt and their own sampling; a model served by
llama.cpp (`--gguf`, or a llama.cpp server behind `--base-url`) gets what makes small local
models succeed, measured on the small-task suite (`bench/small_model.py`): the compact prompt
and its worked example, the grammars of `logos.protocol.grammar` (a first reply that acts,
well-formed replies, an answer after a repeated reply), greedy sampling and a cap on each
reply's length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logos.agent.config import Config
from logos.protocol.grammar import ReplyGrammars
from logos.protocol.prompt import PromptStyle
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES

LOCAL_TEMPERATURE = 0.0
"""Sampling temperature for a llama.cpp model unless one is set: on the small-task suite a
0.5B model did 20-21 of 30 tasks greedily against 13-20 at 0.3, and no worse on retries."""
LOCAL_MAX_TOKENS = 1024
"""Output tokens per reply for a llama.cpp model unless set: a small model that loops
(a hundred blocks in one reply, a number that never ends) is cut off within seconds."""


@dataclass(frozen=True)
class ReplySettings:
    temperature: float | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    """Extra JSON fields for every request (`Config.provider_options`)."""
    check_back: bool = True
    grammars: ReplyGrammars | None = None
    prompt_style: PromptStyle = "full"
    """The system prompt's style; `compact` also sends its worked example."""

    def apply(self, config: Config) -> Config:
        """`config` with these settings (the system prompt is the front end's to render in
        `prompt_style`)."""
        return dataclasses.replace(
            config,
            temperature=self.temperature,
            provider_options=self.provider_options,
            check_back=self.check_back,
            grammars=self.grammars,
            example=SMALL_MODEL_EXAMPLES if self.prompt_style == "compact" else (),
            plain_answers=self.prompt_style == "compact",
        )
