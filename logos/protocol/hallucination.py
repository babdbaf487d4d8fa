"""Spot fake tool-call syntax that a model writes instead of a `<cmd>` block.

Models trained on other agent formats sometimes emit `<tool_call>`, `<invoke name=…>`,
`<minimax:tool_call>`, `[TOOL_CALLS]`, `[INVOKE]`, special tokens such as `<|python_tag|>`,
and so on, then stop and wait for a result that never comes. Without a check the loop
would take that message as the final answer. The detector only ever sees prose (text
outside `<cmd>` blocks).

Rules:

* Matching ignores case (but for harmony's lowercase `to=functions.x`), except that our
  exact tags `<cmd>` and `</cmd>` are not markers: a stray closing tag in prose is left
  over from a block, not a different syntax.
* A marker inside an inline code span (backticks, on one line) is not reported: a model
  explaining a syntax is legitimate. Fenced code blocks are still checked, WHY: fake calls
  often come wrapped in a fence, and a false alarm costs only one corrective turn.
"""

from __future__ import annotations

import bisect
import re

_MAX_MARKER_CHARS = 80
_OWN_TAGS = frozenset({"<cmd>", "</cmd>"})

# WHY three patterns: every alternative of _MARKER starts with one of a few characters, so
# the regex engine skips ahead to them at C speed; the line-start and lowercase-only markers
# would defeat that skipping for all of them (measured: 5x slower on ordinary prose).
_MARKER = re.compile(
    r"""
    < (?:
        # XML-style call tags: <tool_call>, </tool_call>, <function_call name="x">, <bash> ...
        # also in a namespace (MiniMax's <minimax:tool_call>).
        [ \t]* /? [ \t]* (?: minimax: )?
        (?: tool_calls? | tool_use | function_calls? | execute_bash | execute_ipython
          | execute_command | bash )
        (?: [ \t] [^<>\n]* )? >
        # <function=name> (Llama / Qwen-coder style)
      | function= [^<>\n]{1,80} >
        # <invoke name="x"> / <invoke> / </invoke> (Anthropic XML style)
      | [ \t]* /? [ \t]* (?: antml: )? invoke \b [^<>\n]* >
        # Our own tag with the wrong case or spacing, which the parser treats as prose.
      | [ \t]* /? [ \t]* cmd [ \t]* >
        # Special tokens leaked as text: <|tool_call|>, <|python_tag|>, <|call|>, and
        # DeepSeek's <\uFF5Ctool\u2581calls\u2581begin\uFF5C> with fullwidth bars (U+FF5C).
      | [|\uFF5C] [ \t]* (?: tool | python | function | plugin | action ) [^|\uFF5C<>\n]{0,40}
        [|\uFF5C] >
      | \| (?: call | constrain ) \|>
    )
    # Bracket tokens: Mistral's [TOOL_CALLS], [TOOL_CALL] ... [/TOOL_CALL], and the
    # [TOOLCALL], [TOOL_USE], [FUNCTION_CALL] and [INVOKE] of other chat templates.
  | \[ /? (?: TOOL_ (?: CALLS? | REQUEST | RESULTS? | USE ) | TOOLCALLS? | FUNCTION_CALLS?
          | INVOKE ) \]
    # Bare JSON calls: {"name": "bash", "arguments": {...}}.
  | \{ [ \t]* "name" [ \t]* : [ \t]* "[^"\n]{1,64}" [ \t]* , [ \t]*
      "(?: arguments | parameters )" [ \t]* :
    """,
    re.IGNORECASE | re.VERBOSE,
)
# A fence whose info string names a call format (```tool_code, Gemini style).
_FENCE_MARKER = re.compile(
    r"^[ ]{0,3}(?:`{3,}|~{3,})[ \t]*(?:tool_code|tool_calls?|tool_use|function_call)\b",
    re.IGNORECASE | re.MULTILINE,
)
# The recipient of a call in OpenAI's harmony format, left over when its tokens are stripped.
# Case-sensitive and without a leading \b so that the search runs as a fast literal scan.
_HARMONY_RECIPIENT = re.compile(r"to=functions\.[\w.-]+")
_PATTERNS = (_MARKER, _FENCE_MARKER, _HARMONY_RECIPIENT)
_BACKTICK_RUN = re.compile(r"`+")


def _code_spans(line: str) -> list[tuple[int, int]]:
    """Inline code spans on one line: a backtick run closed by the next run of equal length."""
    runs = list(_BACKTICK_RUN.finditer(line))
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        width = len(runs[i].group())
        closer = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == width), None)
        if closer is None:
            i += 1  # an unmatched run is literal text
            continue
        spans.append((runs[i].start(), runs[closer].end()))
        i = closer + 1
    return spans


class _CodeSpanIndex:
    """Says whether a position lies in an inline code span; positions must not decrease.

    Each line's spans are computed once, so a long line full of legitimate mentions of
    tool-call syntax costs linear time, not quadratic.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._line_end = -1
        self._starts: list[int] = []
        self._ends: list[int] = []

    def contains(self, position: int) -> bool:
        if position > self._line_end:
            text = self._text
            line_start = text.rfind("\n", max(self._line_end, 0), position) + 1
            line_end = text.find("\n", position)
            self._line_end = len(text) if line_end < 0 else line_end
            spans = _code_spans(text[line_start : self._line_end])
            self._starts = [line_start + start for start, _ in spans]
            self._ends = [line_start + end for _, end in spans]
        index = bisect.bisect_right(self._starts, position) - 1
        return index >= 0 and position < self._ends[index]


def find_tool_call_hallucination(prose: str) -> str | None:
    """The first fake tool-call marker in `prose` (e.g. "<tool_call>"), else None."""
    # Each pattern's next match; only the pattern whose match was rejected searches again,
    # so prose full of legitimate mentions stays linear.
    upcoming = [pattern.search(prose) for pattern in _PATTERNS]
    code_spans = _CodeSpanIndex(prose)
    while True:
        live = [(match.start(), index) for index, match in enumerate(upcoming) if match]
        if not live:
            return None
        start, index = min(live)
        match = upcoming[index]
        assert match is not None
        marker = match.group()
        if marker not in _OWN_TAGS and not code_spans.contains(start):
            return marker.strip()[:_MAX_MARKER_CHARS]
        upcoming[index] = _PATTERNS[index].search(prose, start + 1)
