"""llama.cpp grammars that keep a small model's replies well-formed, one per kind of turn.

llama.cpp's server (and so `--gguf`) takes a GBNF grammar in each request's `grammar` field
and samples only tokens that keep the reply inside it. A small model slips in ways no
corrective message fixes for long: it answers before looking, writes commands in a shell
fence, makes up a `<result>`, or runs the same command again and again. So the loop picks
one of three grammars for each turn (`ReplyGrammars`):

* **act** (a conversation's first reply, and the next after a reply whose commands all
  failed or were refused): one or two blocks, with no prose before, between or after
  them. The model looks before it answers, and cannot guess: the default model, allowed a
  few lines first, wrote its made-up answer there and a third block of nonsense.
* **reply** (every other turn): free prose and well-formed `<cmd>` blocks, and none of the
  slips: no tag-like `<` in prose (no made-up `<result>`, not even as `< result>`, no
  `<tool_call>`, `<invoke>`, `<function=…>` or `<|…|>` token, no stray `</cmd>`, no tag
  bent out of shape such as `<3cmd>`, `<->` or `<=>`; `x < 3` and `x <= 3` stay
  possible); no bracket token such as `[TOOL_CALLS]`; no shell code fence (```` ```bash ````,
  `sh`, `shell`, `zsh`, `console`); every block closed, holding a command and no other
  `<cmd>` or `</cmd>`.
* **answer** (after the model ran the very commands of its previous reply and got the very
  same output, `logos.protocol.repetition`, or once commands ran and the model answered,
  when `ReplyPolicy.plain_answers`): prose only, starting with neither a `<` nor a space.
  Running them a third time cannot tell it anything new, so it answers from what it has.

The text right after a `<`, a `[` or a backtick run is checked with it, so none of them can
smuggle a tag past these rules. A free reply may start with a `<think>…</think>` section
(with no `<` inside), for models that think in tags; an acting reply and an answer may not:
the default model, denied a `<cmd>` in its answer, opened a `<think>` instead and wrote
the tag there.

OpenAI's and Anthropic's APIs refuse the field, and the grammars rule out an answer that
quotes an HTML tag, so they are for llama.cpp only: the `logos` command uses them whenever
the model is served by llama.cpp, and `--no-grammar` turns them off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

_SHARED = r"""
thinking ::= "<think>" thought "</think>" [ \t\n]*
thought  ::= ( [^<] | lt )*
block    ::= "<cmd>" command "</cmd>"
command  ::= ( [^<] | "<" [^/c] | "<c" [^m] | "<cm" [^d] | "<cmd" [^>]
             | "</" [^c] | "</c" [^m] | "</cm" [^d] | "</cmd" [^>] )+
prose    ::= [^<`\x5B] | lt | "\x5B" [^A-Z/<`\x5B]
lt       ::= "<" "="? " "+ [-0-9]
code     ::= "`" [^`<\x5B] | "``" [^`<\x5B] | "```" info
info     ::= ( [^bszc`<\x5B] | "b" [^a<\x5B] | "ba" [^s<\x5B] | "bas" [^h<\x5B]
             | "s" [^h<\x5B] | "z" [^s<\x5B] | "zs" [^h<\x5B] | "c" [^o<\x5B]
             | "co" [^n<\x5B] | "con" [^s<\x5B] | "cons" [^o<\x5B] | "conso" [^l<\x5B]
             | "consol" [^e<\x5B] )
ticks    ::= "`" | "``" | "```"
"""

LOGOS_GRAMMAR = (
    r"""
root     ::= thinking? item+ ticks?
item     ::= block | prose | code
"""
    + _SHARED
)
"""Free prose and well-formed `<cmd>` blocks, nothing tag-like besides (module docstring)."""

ACT_MAX_BLOCKS = 2
"""At most this many blocks in an acting reply: a small model can write hundreds."""

ACT_GRAMMAR = (
    rf"""
root     ::= block ( [ \t\n]* block ){{0,{ACT_MAX_BLOCKS - 1}}}
"""
    + _SHARED
)
"""A few lines of plain prose, then one or more blocks, then the end of the reply."""

ANSWER_GRAMMAR = (
    r"""
root     ::= answer ticks?
answer   ::= ( [^<`\x5B \t\n] | code ) ( prose | code )*
"""
    + _SHARED
)
"""Prose only: no block (the reply is the final answer)."""

Turn = Literal["act", "reply", "answer"]


@dataclass(frozen=True)
class ReplyGrammars:
    """The grammar of each kind of turn (module docstring); None leaves that turn free."""

    reply: str = LOGOS_GRAMMAR
    act: str | None = ACT_GRAMMAR
    """For a conversation's replies until one holds a block; None: `reply`'s."""
    answer: str | None = ANSWER_GRAMMAR
    """After the model repeated its previous reply's commands to the same output; None:
    `reply`'s."""

    def for_turn(self, turn: Turn) -> str:
        if turn == "act" and self.act is not None:
            return self.act
        if turn == "answer" and self.answer is not None:
            return self.answer
        return self.reply


_LOGOS_GRAMMAR_NAME = "logos"
GRAMMARS: Mapping[str, ReplyGrammars] = {_LOGOS_GRAMMAR_NAME: ReplyGrammars()}
"""The grammars a front end offers by name (the config file's `grammar = "logos"`)."""
