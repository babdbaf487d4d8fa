"""Facts an answer names that no output showed: a language, a framework, a test command."""

from __future__ import annotations

import pytest

from logos.protocol.facts import unshown_facts

PACKAGE_JSON = "cat package.json\n" + (
    '{"name": "shortener", "scripts": {"test": "jest"}, "dependencies": {"express": "^4"}}'
)


@pytest.mark.parametrize(
    ("answer", "shown", "unshown"),
    [
        ("JavaScript with React.", "package.json\nserver.js\n", ["React"]),
        ("Node.js with Express; run npm test (jest).", PACKAGE_JSON, []),
        ("Run npm test.", "package.json\nserver.js\n", ["npm test"]),
        ("It is written in Python with Flask.", "app.py\nrequirements.txt\nflask==3\n", []),
        ("It is written in Python.", "Cargo.toml\nsrc/\n", ["Python"]),
        ("Run cargo test.", "Cargo.toml\nsrc/\n", []),
        ("Run make test.", "test: ringbuf_test\n\t./ringbuf_test\n", []),
        ("Run make test.", "CC = cc\nringbuf: ringbuf.c\n", ["make test"]),
        ("It is written in Go.", "go.mod\nmain.go\n", []),
        ("Go to the src directory and read main.rs.", "src/main.rs\n", []),
        ("It uses Java.", "JavaScript app\nindex.js", ["Java"]),
    ],
)
def test_a_fact_is_shown_by_its_name_or_by_the_files_that_mark_it(
    answer: str, shown: str, unshown: list[str]
) -> None:
    assert unshown_facts(answer, shown) == unshown
