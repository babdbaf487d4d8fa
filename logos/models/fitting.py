"""Which local model a machine runs well: the default is the largest of a short list that
decodes at `MIN_TOKENS_PER_S` or more here and fits in its memory.

A newcomer with no key judges logos by its first answer: a larger model answers better, but
one that writes three tokens a second loses them before it does. Decoding a token on a CPU
reads every weight once, so its rate scales with the cores that read them (up to what the
memory bus carries) and inversely with the weights; llama.cpp's GPU backends (Metal on
Apple silicon) are many times faster. The figures behind the estimate:

* Qwen2.5-Coder-0.5B-Instruct Q4_K_M: 25 tokens/s on an idle 2-core x86 machine, measured
  (`bench/`, family `localmodel`).
* Qwen2.5-Coder-1.5B-Instruct Q4_K_M: not measured here (its file cannot be fetched on the
  machine this was written on); it reads about three times the weights per token, so about
  8 tokens/s on those two cores by the same measure: an estimate from its size.
* On Metal, llama.cpp's published figures for models of this size are well above 10
  tokens/s on any Apple-silicon Mac: an estimate from published sources.

`logos models` lists them; `local_model = "NAME"` in the config file pins one.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Literal

from logos.models.hub import DEFAULT_MODEL, HubFile

MIN_TOKENS_PER_S = 10.0
"""Slower than this, a first answer takes minutes: the model is not offered by default."""
CPU_TOKENS_PER_S_PER_CORE = 12.5
"""The 0.5B model's decoding rate per core (25 tokens/s measured on 2 cores)."""
MAX_USEFUL_CORES = 8
"""Beyond about this many cores, a laptop's memory bus, not its cores, bounds decoding."""
METAL_TOKENS_PER_S = 150.0
"""The 0.5B model on Apple silicon's GPU: an estimate from llama.cpp's published figures."""
MEMORY_SHARE = 0.5
"""At most this share of the machine's memory for the model and its context: the user's
other programs keep the rest."""
CONTEXT_BYTES = 512 * 2**20
"""Room for an 8192-token context and llama.cpp's buffers beside the weights."""

Source = Literal["measured", "estimated from size", "published"]


@dataclass(frozen=True)
class LocalModelOption:
    name: str
    """What the config file's `local_model` names it."""
    file: HubFile
    size_bytes: int
    """The GGUF file's size: the 0.5B's as fetched, the 1.5B's about what the Hub lists
    (1.12 GB, published)."""
    decode_cost: float
    """Weights read per token, relative to the smallest model's."""
    why: str


SMALLEST = LocalModelOption(
    "qwen2.5-coder-0.5b",
    DEFAULT_MODEL,
    491_400_064,
    1.0,
    "runs anywhere: 25 tokens/s on two CPU cores (measured); follows the protocol on short "
    "tasks and first questions",
)
LARGER = LocalModelOption(
    "qwen2.5-coder-1.5b",
    HubFile("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    1_120_000_000,
    3.0,
    "the same family, three times the weights: better answers where four or more cores (or "
    "a GPU) decode it at 10 tokens/s or more",
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


@dataclass(frozen=True)
class Fit:
    option: LocalModelOption
    tokens_per_s: float
    """Estimated decoding rate here."""
    fits_memory: bool

    @property
    def fast_enough(self) -> bool:
        return self.fits_memory and self.tokens_per_s >= MIN_TOKENS_PER_S


def estimate(option: LocalModelOption, machine: Machine) -> Fit:
    if machine.gpu == "metal":
        rate = METAL_TOKENS_PER_S / option.decode_cost
    else:
        rate = CPU_TOKENS_PER_S_PER_CORE * min(machine.cores, MAX_USEFUL_CORES) / option.decode_cost
    budget = machine.memory_bytes * MEMORY_SHARE
    return Fit(option, rate, option.size_bytes + CONTEXT_BYTES <= budget)


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
        option = local_model_option(pinned)
        return Choice(option, f"local_model = {pinned!r} in the config file", fits)
    fast = [fit for fit in fits if fit.fast_enough]
    chosen = fast[-1] if fast else fits[0]
    rate = f"about {chosen.tokens_per_s:.0f} tokens/s estimated on {machine.describe()}"
    slower = [fit for fit in fits if fit.option.decode_cost > chosen.option.decode_cost]
    if slower:
        other = slower[0]
        reason = (
            "would not fit in half the memory"
            if not other.fits_memory
            else f"would decode at about {other.tokens_per_s:.0f} tokens/s, under the bar of "
            f"{MIN_TOKENS_PER_S:.0f}"
        )
        why = f"{rate}; {other.option.name} {reason}"
    else:
        why = f"the largest model of the list, {rate}"
    return Choice(chosen.option, why, fits)


def default_for_this_machine(pinned: str | None = None) -> Choice:
    return choose_local_model(Machine.this_one(), pinned)


def local_model_option(name: str) -> LocalModelOption:
    for option in LOCAL_MODELS:
        if option.name == name:
            return option
    known = ", ".join(option.name for option in LOCAL_MODELS)
    raise UnknownLocalModel(f"unknown local model {name!r}: choose one of {known}")
