"""A llama.cpp grammar that keeps a small model's replies well-formed.

llama.cpp's server (and so `--gguf`) takes a GBNF grammar in each request's `grammar` field
and samples only tokens that keep the reply inside it. The `logos` grammar allows what a
reply should be — free prose and well-formed `<cmd>` blocks — and none of the slips small
models make:

* no tag-like `<` in prose: no made-up `<result>`, no `<tool_call>`, `<invoke>`,
  `<function=…>` or `<|…|>` token, no stray `</cmd>` (a `<` followed by a space, a digit or
  `=` stays possible: `a < b`, `x <= 3`);
* no bracket token such as `[TOOL_CALLS]` or `[/INVOKE]` (a `[` may not be followed by a
  capital letter or `/`);
* no shell code fence (```` ```bash ````, `sh`, `shell`, `zsh`, `console`): commands go in
  blocks, where they run;
* every block is closed, holds a command, and holds no other `<cmd>` or `</cmd>`.

The text right after a `<`, a `[` or a backtick run is checked with it, so none of them can
smuggle a tag past these rules.

A reply may start with a `<think>…</think>` section, for models that think in tags.
It is off by default: OpenAI's and Anthropic's APIs refuse the field, and it also rules out
an answer that quotes an HTML tag. Use it as `Config(provider_options={"grammar":
GRAMMARS["logos"]})`, or `--grammar` on the command line.
"""

from __future__ import annotations

from collections.abc import Mapping

LOGOS_GRAMMAR = r"""
root     ::= thinking? item+ ticks?
thinking ::= "<think>" thought "</think>" [ \t\n]*
thought  ::= ( [^<] | "<" [^/] )*
item     ::= block | prose | code
block    ::= "<cmd>" command "</cmd>"
command  ::= ( [^<] | "<" [^/c] | "<c" [^m] | "<cm" [^d] | "<cmd" [^>]
             | "</" [^c] | "</c" [^m] | "</cm" [^d] | "</cmd" [^>] )+
prose    ::= [^<`\x5B] | "<" [^a-zA-Z/!?|<`\x5B] | "\x5B" [^A-Z/<`\x5B]
code     ::= "`" [^`<\x5B] | "``" [^`<\x5B] | "```" info
info     ::= ( [^bszc`<\x5B] | "b" [^a<\x5B] | "ba" [^s<\x5B] | "bas" [^h<\x5B]
             | "s" [^h<\x5B] | "z" [^s<\x5B] | "zs" [^h<\x5B] | "c" [^o<\x5B]
             | "co" [^n<\x5B] | "con" [^s<\x5B] | "cons" [^o<\x5B] | "conso" [^l<\x5B]
             | "consol" [^e<\x5B] )
ticks    ::= "`" | "``" | "```"
"""
"""Free prose and well-formed `<cmd>` blocks, nothing tag-like besides (module docstring)."""

LOGOS_GRAMMAR_NAME = "logos"
GRAMMARS: Mapping[str, str] = {LOGOS_GRAMMAR_NAME: LOGOS_GRAMMAR}
"""The grammars a front end offers by name (the config file's `grammar = "logos"`)."""
