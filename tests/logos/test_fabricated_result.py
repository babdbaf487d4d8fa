"""A `<result>` the model made up, in a reply without blocks: what counts and what does not."""

from __future__ import annotations

import pytest

from logos.protocol.fabricated_result import find_fabricated_result

MADE_UP = [
    ("<result>hello.txt created</result>", 0),
    ('Done.\n<result>\n<block index="1">\n(no output)\n</block>\n</result>', 6),
    ("I ran it:\n\n   \t<result>60</result>", 15),
    ("```python\nprint('<result>')\n```\n<result>ok</result>", 32),  # after the fence
    ("Before\r\n<result>ok</result>", 8),
]

NOT_MADE_UP = [
    "The sum is 60.",
    "logos answers with a <result> envelope, one <block> per command.",
    "`<result>` holds the outputs.",
    '```\n<result>\n<block index="1">\n$ ls\n</block>\n</result>\n```',
    "~~~xml\n  <result>ok</result>\n~~~",
    "```\nan example that never closes\n<result>",
    "<results>are plural here</results>",
    "<RESULT>is not the tag</RESULT>",
]


@pytest.mark.parametrize(("text", "offset"), MADE_UP)
def test_a_result_tag_starting_a_line_of_prose_is_made_up(text: str, offset: int) -> None:
    assert find_fabricated_result(text) == offset
    assert text[offset:].startswith("<result>")


@pytest.mark.parametrize("text", NOT_MADE_UP)
def test_mentions_and_examples_of_the_tag_are_not(text: str) -> None:
    assert find_fabricated_result(text) is None
