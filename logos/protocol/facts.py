"""Facts about a project that an answer names, and whether the commands' outputs show them.

Measured with the default 0.5B model on a repository with no README: it ran
`head -n 40 README.md`, which failed, and answered "JavaScript with React" for an Express
project whose `package.json` it never read. A language, a framework or a test command is a
fact a user acts on; one that no output showed is a guess. `unshown_facts` names those of
an answer that nothing the run printed (nor the task) shows: a framework or tool by its
name, a language by its name or by the files that mark it (`.py`, `package.json`, …), a
test command by itself or by the file that defines it (`Cargo.toml` for `cargo test`, a
Makefile's `test:` target for `make test`).

The project files that hold these facts (`MANIFESTS`) are what a first look reads when
there is no README (`logos.protocol.first_look`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MANIFESTS = (
    "package.json",
    "pyproject.toml",
    "Cargo.toml",
    "go.mod",
    "Makefile",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "pom.xml",
    "build.gradle",
    "Gemfile",
    "composer.json",
    "CMakeLists.txt",
)
"""Files that name a project's language, dependencies and commands, the likeliest first."""


@dataclass(frozen=True)
class Fact:
    name: str
    """As a notice names it."""
    stated: re.Pattern[str]
    """How an answer states it."""
    shown: re.Pattern[str]
    """What in an output shows it."""


def _fact(name: str, stated: str, shown: str = "", *, case: bool = False) -> Fact:
    flags = 0 if case else re.IGNORECASE
    evidence = shown or stated
    return Fact(name, re.compile(stated, flags), re.compile(evidence, re.IGNORECASE | re.M))


def _named(*names: str) -> tuple[Fact, ...]:
    """Frameworks and tools: shown only by their own name."""
    return tuple(_fact(name, rf"(?<![\w.-]){re.escape(name)}(?![\w-])") for name in names)


_LANGUAGES = (
    _fact(
        "Python",
        r"\bpython\b",
        r"python|\.py\b|pyproject\.toml|setup\.cfg|requirements\.txt|\bpip\b",
    ),
    _fact(
        "JavaScript",
        r"\bjavascript\b|\bnode(?:\.?js)?\b",
        r"javascript|\.[cm]?js\b|package\.json|\bnode\b|\bnpm\b",
    ),
    _fact("TypeScript", r"\btypescript\b", r"typescript|\.tsx?\b|tsconfig"),
    _fact("Rust", r"\brust\b", r"\brust|\.rs\b|cargo"),
    _fact(
        "Go",
        r"\bGo\b(?!\s+to\b)|\bgolang\b",
        r"golang|\.go\b|go\.mod|\bgo (?:build|test|run)\b",
        case=True,
    ),
    _fact("Java", r"\bjava\b(?!\s*script)", r"\bjava\b|\.java\b|pom\.xml|gradle"),
    _fact("Ruby", r"\bruby\b", r"ruby|\.rb\b|gemfile"),
    _fact("PHP", r"\bphp\b", r"php|composer\.json"),
    _fact("C++", r"\bc\+\+", r"c\+\+|\.(?:cpp|cc|hpp)\b|cmake"),
    _fact("C#", r"\bc#", r"c#|\.cs\b|\.csproj|dotnet"),
)
_FRAMEWORKS = _named(
    "React",
    "Vue",
    "Angular",
    "Svelte",
    "Next.js",
    "Express",
    "Koa",
    "Fastify",
    "NestJS",
    "Django",
    "Flask",
    "FastAPI",
    "Tornado",
    "Rails",
    "Sinatra",
    "Spring",
    "Laravel",
    "Symfony",
    "Actix",
    "Rocket",
    "Axum",
    "Gin",
    "Jest",
    "Mocha",
    "Vitest",
    "pytest",
    "tox",
)
COMMANDS = (
    _fact("npm test", r"\bnpm (?:run )?test\b", r"\bnpm (?:run )?test\b|\"test\"\s*:"),
    _fact("cargo test", r"\bcargo test\b", r"\bcargo\b|cargo\.toml"),
    _fact("go test", r"\bgo test\b", r"\bgo test\b|go\.mod|_test\.go\b"),
    _fact("make test", r"\bmake test\b", r"\bmake test\b|^test:"),
    _fact("mvn test", r"\bmvn test\b", r"\bmvn\b|pom\.xml"),
)
_FACTS = (*_LANGUAGES, *_FRAMEWORKS, *COMMANDS)


def unshown_facts(answer: str, shown: str) -> list[str]:
    """The facts `answer` states that `shown` (what the run printed, and the task) does not."""
    return [
        fact.name for fact in _FACTS if fact.stated.search(answer) and not fact.shown.search(shown)
    ]
