"""Fake tool-call syntax in prose: found in any case, never inside `<cmd>`, whatever the split."""

from __future__ import annotations

import itertools

import pytest

from logos.protocol.hallucination import find_tool_call_hallucination
from logos.protocol.parse import CmdStreamParser

# (text, the marker it must report)
HALLUCINATIONS = [
    ('<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>', "<tool_call>"),
    ("Let me check.\n<TOOL_CALL>ls</TOOL_CALL>", "<TOOL_CALL>"),
    ("<tool_calls>[...]</tool_calls>", "<tool_calls>"),
    ('<function_call name="bash">ls</function_call>', '<function_call name="bash">'),
    ("<function_call>ls</function_call>", "<function_call>"),
    ("<function_calls>\n<invoke>", "<function_calls>"),
    (
        'I will run it.\n<invoke name="bash">\n<parameter name="command">ls</parameter>',
        '<invoke name="bash">',
    ),
    ("<invoke>ls</invoke>", "<invoke>"),
    ('<invoke name="run">', '<invoke name="run">'),
    ("[TOOL_CALL]ls[/TOOL_CALL]", "[TOOL_CALL]"),
    ('[TOOL_CALLS][{"name": "bash"}]', "[TOOL_CALLS]"),
    ("<function=bash>\n<parameter=command>ls</parameter>\n</function>", "<function=bash>"),
    ('<|tool_call|>{"name": "bash"}', "<|tool_call|>"),
    ('<|python_tag|>bash.call(command="ls")', "<|python_tag|>"),
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_begin|>"),
    ("<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581begin\uff5c>"),
    ("<|call|>", "<|call|>"),
    ('<|channel|>commentary to=functions.bash <|message|>{"cmd": "ls"}', "to=functions.bash"),
    ("<tool_use>\nbash ls\n</tool_use>", "<tool_use>"),
    ("<execute_bash>\nls -la\n</execute_bash>", "<execute_bash>"),
    ("<execute_ipython>print(1)</execute_ipython>", "<execute_ipython>"),
    ("<execute_command>\n<command>ls</command>", "<execute_command>"),
    ("Running:\n<bash>ls</bash>", "<bash>"),
    ("<Bash>ls</Bash>", "<Bash>"),
    ("```tool_code\nprint(default_api.run(command='ls'))\n```", "```tool_code"),
    ("  ~~~TOOL_CALL\nls\n~~~", "~~~TOOL_CALL"),
    (
        '{"name": "execute_bash", "arguments": {"command": "ls"}}',
        '{"name": "execute_bash", "arguments":',
    ),
    ("<CMD>ls</CMD>", "<CMD>"),
    ("<cmd >ls</cmd >", "<cmd >"),
    ("< cmd>ls", "< cmd>"),
    ("text `code` <tool_call> more", "<tool_call>"),
    ("unmatched ` then <tool_call>", "<tool_call>"),
]

# Formats other agent harnesses flag that logos once missed.
OTHER_FORMATS = [
    ("I ran it.\n</invoke>", "</invoke>"),
    (
        '<minimax:tool_call>\n<invoke name="bash">\n<parameter name="command">ls</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
        "<minimax:tool_call>",
    ),
    (
        '<minimax:tool_call>\n{"command": "ls"}\n</minimax:tool_call>',
        "<minimax:tool_call>",
    ),
    ("ls -la\n</minimax:tool_call>", "</minimax:tool_call>"),
    ('[FUNCTION_CALL]\n{"name": "bash"}\n[/FUNCTION_CALL]', "[FUNCTION_CALL]"),
    ("[TOOL_USE] bash ls", "[TOOL_USE]"),
    ('Running it: [INVOKE] bash(command="ls")', "[INVOKE]"),
    ('[TOOLCALL]{"cmd": "ls"}[/TOOLCALL]', "[TOOLCALL]"),
]

LEGITIMATE_PROSE = [
    "The model emits a tool_call object; we parse function_call too.",
    "Use the `<tool_call>` tag only with providers that support it.",
    "Anthropic's format uses ``<invoke name=...>`` inside function calls.",
    "The bracket token `[TOOL_CALLS]` is Mistral's.",
    "if a < b and c > d then run bash",
    "HTML like <div class='x'> and <br> is fine, <b>bold</b> too.",
    "Mention of </cmd> left over from a block.",
    "Generics: List<String> and Map<K, V>.",
    "Math: x<y, 3 <bashful> is not a tag name we match.",
    "The exact tags <cmd> and </cmd> are ours, not fake ones.",
    "A fence:\n```bash\nls -la\n```\nand ```python\nprint(1)\n```",
    'The JSON {"name": "x"} alone is data.',
    "A special token like <|im_start|> is not a tool call.",
    "Email me at <someone@example.com>.",
    "Bash `<bash>` in code is fine.",
    "Anthropic closes a call with `</invoke>`; MiniMax wraps it in `<minimax:tool_call>`.",
    "Tokens such as `[INVOKE]`, `[TOOLCALL]` and `[FUNCTION_CALL]` belong to other formats.",
    "",
]


@pytest.mark.parametrize(("text", "expected"), HALLUCINATIONS)
def test_markers_are_found(text: str, expected: str) -> None:
    assert find_tool_call_hallucination(text) == expected


@pytest.mark.parametrize(("text", "expected"), OTHER_FORMATS)
def test_other_harnesses_formats_are_found(text: str, expected: str) -> None:
    assert find_tool_call_hallucination(text) == expected


def test_long_markers_are_shortened() -> None:
    found = find_tool_call_hallucination("<tool_call " + "x" * 500 + ">")
    assert found is not None
    assert found.startswith("<tool_call x")
    assert len(found) <= 80


@pytest.mark.parametrize("text", LEGITIMATE_PROSE)
def test_legitimate_prose_is_not_reported(text: str) -> None:
    assert find_tool_call_hallucination(text) is None


def test_the_first_marker_in_the_text_wins() -> None:
    text = "a `<bash>` b [TOOL_CALL] c <tool_call>"
    assert find_tool_call_hallucination(text) == "[TOOL_CALL]"


def test_a_code_span_does_not_reach_over_a_newline() -> None:
    assert find_tool_call_hallucination("`open\n<tool_call>\nclose`") == "<tool_call>"


MARKERS_IN_COMMANDS = [
    "<cmd>cat > notes.md <<'EOF'\n<tool_call>{}</tool_call>\n[TOOL_CALLS]\nEOF</cmd>",
    "<cmd>grep -rn '<invoke name=' src</cmd>",
    "<cmd>printf '<|python_tag|> <bash>ls</bash>'</cmd>",
    "<cmd>cat <<'EOF'\n```tool_code\nx\n```\nEOF</cmd>",
    "<cmd>printf '</invoke> [TOOLCALL] [INVOKE] [TOOL_USE]\\n'</cmd>",
    "<cmd>cat > call.txt <<'EOF'\n<minimax:tool_call>\n[FUNCTION_CALL]\n</minimax:tool_call>\n"
    "EOF</cmd>",
]


@pytest.mark.parametrize("block", MARKERS_IN_COMMANDS)
def test_markers_inside_cmd_blocks_are_never_reported(block: str) -> None:
    raw = f"Writing the fixture.\n{block}\nDone, see the file."
    for cut, second in itertools.combinations_with_replacement(range(len(raw) + 1), 2):
        parser = CmdStreamParser()
        for delta in (raw[:cut], raw[cut:second], raw[second:]):
            parser.feed(delta)
        parser.close()
        assert find_tool_call_hallucination(parser.prose) is None
        assert len(parser.blocks) == 1


def test_a_marker_after_a_block_is_reported_from_the_prose() -> None:
    raw = "<cmd>grep '<tool_call>' f</cmd>\nNow calling:\n<tool_call>x</tool_call>"
    parser = CmdStreamParser()
    parser.feed(raw)
    parser.close()
    assert find_tool_call_hallucination(parser.prose) == "<tool_call>"
