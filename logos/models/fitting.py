"""Which local model a machine runs well: the default is the largest of a short list that,
here, decodes at `MIN_TOKENS_PER_S` or more, gives a first answer within `FIRST_ANSWER_S`
and fits in half the memory.

A newcomer with no key judges logos by its first answer: a larger model answers better, but
one that takes two minutes to answer loses them before it does. Decoding a token on a CPU
reads every weight once and reading a prompt computes over every weight, so both scale with
the cores (up to what the memory bus carries) and inversely with the weights; llama.cpp's GPU
backends (Metal on Apple silicon) are many times faster. A first answer is mostly prompt
reading (logos's compact prompt, its worked examples, a listing and the start of a README),
so a model can decode fast enough and still answer too late. The figures behind the estimate,
measured on an idle 2-core x86 machine (`python -m bench.model_probe FILE` for the decoding
rate; `logos --gguf FILE "what does this repository do? answer in three bullet points"` on
this repository for the first answer, `bench/` family `firstquestion` for its medians):

* Qwen2.5-Coder-0.5B-Instruct Q4_K_M: 24 tokens/s, a first answer in 34 s.
* Qwen2.5-Coder-1.5B-Instruct Q4_K_M: 12 tokens/s, a first answer in 82 s: on two cores it
  decodes fast enough but answers too late.
* On Metal, llama.cpp's published figures for models of this size are well above 100
  tokens/s on Apple-silicon Macs: an estimate from published sources.

`logos models` lists them; `local_model = "NAME"` in the config file pins one.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Literal

from logos.models.hub_file import DEFAULT_MODEL, HubFile

MIN_TOKENS_PER_S = 10.0
"""Slower than this, an answer of a few paragraphs takes most of a minute to write."""
FIRST_ANSWER_S = 60.0
"""Slower than this to the first question's answer, a newcomer gives up."""
_REFERENCE_CORES = 2
"""The cores of the machine `LocalModelOption`'s figures were measured on."""
_MAX_USEFUL_CORES = 8
"""Beyond about this many cores, a laptop's memory bus, not its cores, bounds decoding."""
_METAL_SPEEDUP = 6.0
"""Apple silicon's GPU against the two reference cores: the 0.5B model decodes at about 150
tokens/s there, an estimate from llama.cpp's published figures."""
_MEMORY_SHARE = 0.5
"""At most this share of the machine's memory for the model and its context: the user's
other programs keep the rest."""
_CONTEXT_BYTES = 512 * 2**20
"""Room for an 8192-token context and llama.cpp's buffers beside the weights."""


@dataclass(frozen=True)
class LocalModelOption:
    name: str
    """What the config file's `local_model` names it."""
    file: HubFile
    size_bytes: int
    """The GGUF file's size, as fetched."""
    tokens_per_s: float
    """Decoding rate on `_REFERENCE_CORES` idle cores, measured."""
    first_answer_s: float
    """Wall time of the README's first question on this repository on `_REFERENCE_CORES`
    idle cores, from the model's load to the answer, measured."""
    why: str


SMALLEST = LocalModelOption(
    "qwen2.5-coder-0.5b",
    DEFAULT_MODEL,
    491_400_064,
    24.0,
    34.0,
    "runs anywhere: 24 tokens/s and a first answer in 34 s on two CPU cores (measured); "
    "follows the protocol on short tasks and first questions",
)
LARGER = LocalModelOption(
    "qwen2.5-coder-1.5b",
    HubFile("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    1_117_320_768,
    12.0,
    82.0,
    "the same family, three times the weights: better answers where three or more cores (or "
    "a GPU) answer a first question within a minute",
)
LOCAL_MODELS: tuple[LocalModelOption, ...] = (SMALLEST, LARGER)
"""The instruct models logos chooses from, smallest first."""


@dataclass(frozen=True)
class Machine:
    """What decides a model's speed here."""

    cores: int
    memory_bytes: int
    gpu: Literal["metal"] | None = None
    """A GPU llama.cpp uses in this package's builds: Metal on Apple silicon."""

    @classmethod
    def this_one(cls) -> Machine:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        apple_silicon = platform.system() == "Darwin" and platform.machine() == "arm64"
        return cls(cores or os.cpu_count() or 1, memory, "metal" if apple_silicon else None)

    def describe(self) -> str:
        gpu = "Metal GPU" if self.gpu else "no GPU llama.cpp uses"
        return f"{self.cores} cores, {self.memory_bytes / 2**30:.1f} GiB memory, {gpu}"

    @property
    def speedup(self) -> float:
        """How much faster than the reference machine this one runs a model."""
        if self.gpu == "metal":
            return _METAL_SPEEDUP
        return min(self.cores, _MAX_USEFUL_CORES) / _REFERENCE_CORES


@dataclass(frozen=True)
class Fit:
    option: LocalModelOption
    tokens_per_s: float
    """Estimated decoding rate here."""
    first_answer_s: float
    """Estimated wall time to the first question's answer here."""
    fits_memory: bool

    @property
    def fast_enough(self) -> bool:
        return not self.shortfall()

    def shortfall(self) -> str:
        """What rules this model out here, in a phrase; empty when nothing does."""
        if not self.fits_memory:
            return "would not fit in half the memory"
        if self.tokens_per_s < MIN_TOKENS_PER_S:
            return (
                f"would decode at about {self.tokens_per_s:.0f} tokens/s, under the bar of "
                f"{MIN_TOKENS_PER_S:.0f}"
            )
        if self.first_answer_s > FIRST_ANSWER_S:
            return (
                f"would take about {self.first_answer_s:.0f} s to a first answer, over the bar "
                f"of {FIRST_ANSWER_S:.0f}"
            )
        return ""


def estimate(option: LocalModelOption, machine: Machine) -> Fit:
    speedup = machine.speedup
    budget = machine.memory_bytes * _MEMORY_SHARE
    return Fit(
        option,
        option.tokens_per_s * speedup,
        option.first_answer_s / speedup,
        option.size_bytes + _CONTEXT_BYTES <= budget,
    )


@dataclass(frozen=True)
class Choice:
    option: LocalModelOption
    why: str
    fits: tuple[Fit, ...]


class UnknownLocalModel(ValueError):
    pass


def choose_local_model(machine: Machine, pinned: str | None = None) -> Choice:
    """The largest model of `LOCAL_MODELS` that runs fast enough here (the smallest when
    none does), or the one `pinned` names; `why` says which and why in a sentence."""
    fits = tuple(estimate(option, machine) for option in LOCAL_MODELS)
    if pinned is not None:
        option = _local_model_option(pinned)
        return Choice(option, f"local_model = {pinned!r} in the config file", fits)
    fast = [fit for fit in fits if fit.fast_enough]
    chosen = fast[-1] if fast else fits[0]
    speed = (
        f"about {chosen.tokens_per_s:.0f} tokens/s and a first answer in about "
        f"{chosen.first_answer_s:.0f} s estimated on {machine.describe()}"
    )
    larger = [fit for fit in fits if fit.option.size_bytes > chosen.option.size_bytes]
    if larger:
        why = f"{speed}; {larger[0].option.name} {larger[0].shortfall()}"
    else:
        why = f"the largest model of the list, {speed}"
    return Choice(chosen.option, why, fits)


def default_for_this_machine(pinned: str | None = None) -> Choice:
    return choose_local_model(Machine.this_one(), pinned)


def _local_model_option(name: str) -> LocalModelOption:
    for option in LOCAL_MODELS:
        if option.name == name:
            return option
    known = ", ".join(option.name for option in LOCAL_MODELS)
    raise UnknownLocalModel(f"unknown local model {name!r}: choose one of {known}")
