"""Spot a `<result>` that the model wrote itself instead of waiting for the harness's.

Results come only from the harness, after a reply. A model that writes one has made it up:
after a real block it is imagining the block's output (the loop stops reading there, while
the reply streams); with no block at all it is pretending that it acted
(`<result>hello.txt created</result>`), and taken as the final answer that would end the run
on a lie.

What counts in a reply without a block, found here: a `<result>` tag that starts a line
(after spaces or tabs at most), outside Markdown code fences. WHY so narrow: an answer may
well talk about the protocol — "logos sends back a <result> envelope", `` `<result>` ``, or
an example envelope in a fence — and only a tag that begins a line of prose reads as the
model writing the envelope itself.
"""

from __future__ import annotations

import re

from logos.protocol.code_fences import code_fences

RESULT_TAG = "<result>"
_AT_LINE_START = re.compile(r"[ \t]*" + re.escape(RESULT_TAG))


def find_fabricated_result(text: str) -> int | None:
    """Where the first made-up `<result>` of a reply without blocks starts in `text` (the
    offset of its tag), else None."""
    if RESULT_TAG not in text:
        return None
    lines = text.split("\n")
    fenced = {
        number
        for fence in code_fences(lines)
        for number in range(fence.opening_line, fence.closing_line + 1)
    }
    offset = 0
    for number, line in enumerate(lines):
        tag = _AT_LINE_START.match(line)
        if tag is not None and number not in fenced:
            return offset + tag.end() - len(RESULT_TAG)
        offset += len(line) + 1
    return None
