"""The first-question suite: what people ask first about a repository they have just cloned.

Eight repositories of different kinds, each built by the suite in a fresh directory with a
short git history (this repository is cloned as it is): a web app, a CLI tool, a library, a
data script, a project with no README, a monorepo, a Rust crate, and logos itself. The
questions are the first ones people ask (what does it do, which language and framework,
how do I run its tests, where is X defined, what changed last); each has a check on the
answer: facts it must state (every group, any of its spellings) and facts it must not
invent (a framework it does not use, the worked example's made-up project). Whether a
command really ran is the family's to check (`bench.first_question`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIRST_QUESTION = "what does this repository do? answer in three bullet points"
"""The README's first command's question, word for word."""
EXAMPLE_FACTS = ("tides", "harbour")
"""The compact prompt's worked example's made-up project: in an answer, it was copied."""


@dataclass(frozen=True)
class Commit:
    message: str
    files: Mapping[str, str]


@dataclass(frozen=True)
class Repository:
    name: str
    kind: str
    commits: Sequence[Commit] = ()
    """Applied in order, each a commit; none: this repository, cloned."""

    def lay_out(self, workspace: Path) -> None:
        if not self.commits:
            _git(REPO, "clone", "--quiet", str(REPO), str(workspace))
            return
        _git(workspace, "init", "--quiet", "--initial-branch=main")
        for number, commit in enumerate(self.commits):
            for name, content in commit.files.items():
                path = workspace / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
            _git(workspace, "add", "--all")
            date = f"2025-03-{number + 1:02d}T10:00:00Z"
            _git(workspace, "commit", "--quiet", "-m", commit.message, date=date)


def _git(cwd: Path, *args: str, date: str | None = None) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Dana Reyes",
        "GIT_AUTHOR_EMAIL": "dana@example.org",
        "GIT_COMMITTER_NAME": "Dana Reyes",
        "GIT_COMMITTER_EMAIL": "dana@example.org",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    if date is not None:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


Facts = Sequence[Sequence[str]]
"""Groups of regular expressions: every group must match, by any one of its members."""


_DENIAL = re.compile(r"\b(?:not|no|never|none|neither|nor)\b|n't\b", re.IGNORECASE)
_SENTENCE_START = re.compile(r"[.!?\n]\s*")


def _affirms(pattern: str, answer: str) -> bool:
    """Whether `pattern` matches `answer` with no denial between its sentence's start and it."""
    for match in re.finditer(pattern, answer, re.IGNORECASE):
        starts = [m.end() for m in _SENTENCE_START.finditer(answer, 0, match.start())]
        if not _DENIAL.search(answer, starts[-1] if starts else 0, match.start()):
            return True
    return False


@dataclass(frozen=True)
class Question:
    id: str
    repository: Repository
    kind: str
    """what, stack, tests, where, changed: the rows by kind."""
    prompt: str
    must: Facts
    must_not: Sequence[str] = ()
    """Facts the answer must not state (matched as regular expressions, any case)."""
    reference: str = ""
    """A right answer, as a person would give it: the suite's own test checks that it
    passes (no check is one nothing can pass)."""
    held_out: bool = False
    """Written after the small-model defaults were tuned on the others, with none of the
    worked examples written from it: the figure on these says whether the defaults carry
    over."""

    def lay_out(self, workspace: Path) -> None:
        self.repository.lay_out(workspace)

    def invented(self, answer: str) -> list[str]:
        """The facts it must not state that the answer states."""
        wrong = [*self.must_not, *EXAMPLE_FACTS]
        return [w for w in wrong if re.search(w, answer, re.IGNORECASE)]

    def states(self, answer: str) -> bool:
        """Every group of `must` matched where the sentence does not deny it before the match:
        "The project does not perform any conversion between Celsius and Fahrenheit" names
        the facts and states the opposite (seen with the default model)."""
        return all(any(_affirms(p, answer) for p in group) for group in self.must)

    def check(self, _workspace: Path, answer: str) -> bool:
        """Right: every fact it must state, and nothing it must not."""
        return self.states(answer) and not self.invented(answer)


PASTEBIN = Repository(
    "pastebin",
    "web app",
    (
        Commit(
            "Start a Flask pastebin",
            {
                "README.md": "# pastebin\n\nA small web app to share text snippets: paste "
                "text, get a short link to it.\nBuilt with Flask; snippets are kept in "
                "SQLite.\n\n## Run it\n\n    pip install -r requirements.txt\n    flask "
                "--app pastebin run\n\n## Tests\n\n    pytest\n",
                "requirements.txt": "flask==3.0.3\npytest==8.2.0\n",
                "pastebin/__init__.py": "from flask import Flask\n\nfrom pastebin.store "
                "import Store\n\napp = Flask(__name__)\nstore = Store('snippets.db')\n\n\n"
                "@app.post('/paste')\ndef paste():\n    from flask import request\n\n    key = "
                "store.add(request.get_data(as_text=True))\n    return {'url': f'/s/{key}'}"
                "\n\n\n@app.get('/s/<key>')\ndef show(key):\n    return store.get(key)\n",
                "pastebin/store.py": "import secrets\nimport sqlite3\n\n\nclass Store:\n    "
                "def __init__(self, path):\n        self.db = sqlite3.connect(path)\n        "
                "self.db.execute('create table if not exists s (k text, v text)')\n\n    "
                "def add(self, text):\n        key = secrets.token_urlsafe(6)\n        "
                "self.db.execute('insert into s values (?, ?)', (key, text))\n        "
                "return key\n\n    def get(self, key):\n        row = self.db.execute("
                "'select v from s where k = ?', (key,)).fetchone()\n        return row[0] "
                "if row else ''\n",
                "tests/test_paste.py": "from pastebin import app\n\n\ndef test_paste():\n    "
                "client = app.test_client()\n    url = client.post('/paste', data='hi')"
                ".json['url']\n    assert client.get(url).text == 'hi'\n",
            },
        ),
        Commit(
            "Expire snippets after seven days",
            {
                "pastebin/expiry.py": "DAYS = 7\n\n\ndef expired(age_days):\n    return "
                "age_days > DAYS\n"
            },
        ),
    ),
)

WORDCOUNT = Repository(
    "wordfreq",
    "Rust CLI",
    (
        Commit(
            "Count word frequencies from stdin",
            {
                "README.md": "# wordfreq\n\nReads text on standard input and prints the ten "
                "most frequent words with their counts.\n\n    cargo run --release < book.txt"
                "\n\nRun the tests with `cargo test`.\n",
                "Cargo.toml": '[package]\nname = "wordfreq"\nversion = "0.2.0"\nedition = '
                '"2021"\n\n[dependencies]\n',
                "src/main.rs": "use std::collections::HashMap;\nuse std::io::Read;\n\nmod "
                "count;\n\nfn main() {\n    let mut text = String::new();\n    std::io::"
                "stdin().read_to_string(&mut text).unwrap();\n    for (word, n) in count::"
                'top(&text, 10) {\n        println!("{n:>6} {word}");\n    }\n}\n',
                "src/count.rs": "use std::collections::HashMap;\n\npub fn top(text: &str, n: "
                "usize) -> Vec<(String, usize)> {\n    let mut counts: HashMap<String, usize> "
                "= HashMap::new();\n    for word in text.split_whitespace() {\n        *counts"
                ".entry(word.to_lowercase()).or_default() += 1;\n    }\n    let mut all: Vec<_>"
                " = counts.into_iter().collect();\n    all.sort_by(|a, b| b.1.cmp(&a.1));\n    "
                "all.truncate(n);\n    all\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn "
                'counts_words() {\n        assert_eq!(super::top("a b a", 1)[0].1, 2);\n    '
                "}\n}\n",
            },
        ),
        Commit(
            "Ignore punctuation around words",
            {
                "src/words.rs": "pub fn clean(word: &str) -> &str {\n    word.trim_matches(|c: "
                "char| !c.is_alphanumeric())\n}\n"
            },
        ),
    ),
)

SLUGKIT = Repository(
    "slugkit",
    "library",
    (
        Commit(
            "Add slugify",
            {
                "README.md": "# slugkit\n\nA tiny Python library that turns titles into URL "
                "slugs.\n\n```python\nfrom slugkit import slugify\nslugify('Hello, World!')  "
                "# 'hello-world'\n```\n",
                "pyproject.toml": '[project]\nname = "slugkit"\nversion = "1.4.0"\n'
                'requires-python = ">=3.9"\n',
                "src/slugkit/__init__.py": "from slugkit.text import slugify\n\n__all__ = "
                "['slugify']\n",
                "src/slugkit/text.py": "import re\nimport unicodedata\n\n\ndef slugify(title: "
                "str, separator: str = '-') -> str:\n    ascii_title = unicodedata.normalize("
                "'NFKD', title).encode('ascii', 'ignore').decode()\n    words = re.findall("
                "r'[a-z0-9]+', ascii_title.lower())\n    return separator.join(words)\n",
                "src/slugkit/limits.py": "MAX_LENGTH = 80\n",
                "tests/test_text.py": "from slugkit import slugify\n\n\ndef test_slugify():\n"
                "    assert slugify('Hello, World!') == 'hello-world'\n",
            },
        ),
    ),
)

SALES = Repository(
    "sales-report",
    "data script",
    (
        Commit(
            "Monthly sales report",
            {
                "README.md": "# sales-report\n\nA script that reads `data/sales.csv` and "
                "prints the total revenue per region for each month.\n\n    python report.py"
                " data/sales.csv\n",
                "report.py": "import csv\nimport sys\nfrom collections import defaultdict\n\n"
                "\ndef totals(path):\n    sums = defaultdict(float)\n    with open(path) as "
                "f:\n        for row in csv.DictReader(f):\n            sums[(row['month'], "
                "row['region'])] += float(row['revenue'])\n    return sums\n\n\nif __name__ == "
                "'__main__':\n    for (month, region), total in sorted(totals(sys.argv[1])."
                "items()):\n        print(month, region, f'{total:.2f}')\n",
                "data/sales.csv": "month,region,revenue\n2025-01,north,1200.50\n2025-01,"
                "south,980.00\n2025-02,north,1410.25\n",
            },
        ),
    ),
)

NO_README = Repository(
    "shortener",
    "no README",
    (
        Commit(
            "Express link shortener",
            {
                "package.json": '{\n  "name": "shortener",\n  "version": "0.3.1",\n  '
                '"main": "server.js",\n  "scripts": {\n    "start": "node server.js",\n    '
                '"test": "jest"\n  },\n  "dependencies": {\n    "express": "^4.19.2"\n  },\n'
                '  "devDependencies": {\n    "jest": "^29.7.0"\n  }\n}\n',
                "server.js": "const express = require('express');\nconst app = express();\n"
                "const links = new Map();\n\napp.get('/:code', (req, res) => {\n  const url = "
                "links.get(req.params.code);\n  url ? res.redirect(url) : res.sendStatus(404);"
                "\n});\n\napp.listen(3000);\n",
                "server.test.js": "test('placeholder', () => expect(1).toBe(1));\n",
            },
        ),
    ),
)

MONOREPO = Repository(
    "shop",
    "monorepo",
    (
        Commit(
            "Two packages: api and web",
            {
                "README.md": "# shop\n\nOne repository, two packages:\n\n- `packages/api`: "
                "the HTTP API (Python, FastAPI)\n- `packages/web`: the storefront (TypeScript,"
                " React)\n",
                "packages/api/pyproject.toml": '[project]\nname = "shop-api"\ndependencies = '
                '["fastapi"]\n',
                "packages/api/shop_api/main.py": "from fastapi import FastAPI\n\napp = "
                "FastAPI()\n\n\n@app.get('/products')\ndef products():\n    return []\n",
                "packages/web/package.json": '{\n  "name": "shop-web",\n  "dependencies": {'
                '"react": "^18.3.1"}\n}\n',
                "packages/web/src/App.tsx": "export function App() {\n  return <h1>Shop</h1>;\n}\n",
            },
        ),
        Commit(
            "web: show the product list",
            {
                "packages/web/src/Products.tsx": "export function Products() {\n  return <ul />;"
                "\n}\n"
            },
        ),
    ),
)

CSVTOOL = Repository(
    "csvpick",
    "CLI tool",
    (
        Commit(
            "csvpick: print chosen columns of a CSV file",
            {
                "README.md": "# csvpick\n\nA command-line tool that prints chosen columns of a "
                "CSV file.\n\n    csvpick --columns name,email people.csv\n\n## Development"
                "\n\nRun the tests with `make test`.\n",
                "Makefile": "test:\n\tpython -m pytest -q tests\n",
                "csvpick/cli.py": "import argparse\nimport csv\nimport sys\n\n\ndef main() -> "
                "None:\n    parser = argparse.ArgumentParser(prog='csvpick')\n    parser."
                "add_argument('--columns', required=True)\n    parser.add_argument('file')\n"
                "    args = parser.parse_args()\n    wanted = args.columns.split(',')\n    "
                "with open(args.file) as f:\n        for row in csv.DictReader(f):\n          "
                "  print(','.join(row[c] for c in wanted))\n",
                "tests/test_cli.py": "def test_nothing():\n    assert True\n",
            },
        ),
    ),
)

QUOTES = Repository(
    "quotecli",
    "no README, Python",
    (
        Commit(
            "Print a random quote",
            {
                "pyproject.toml": '[project]\nname = "quotecli"\nversion = "0.4.0"\n'
                'description = "Prints a random quote from a local collection"\n'
                'dependencies = ["click>=8"]\n\n[project.scripts]\nquote = '
                '"quotecli.main:cli"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
                "quotecli/__init__.py": "",
                "quotecli/main.py": "import random\n\nimport click\n\nfrom quotecli.store "
                "import load\n\n\n@click.command()\ndef cli() -> None:\n    click.echo("
                "random.choice(load()))\n",
                "quotecli/store.py": "from pathlib import Path\n\n\ndef load() -> list[str]:"
                "\n    return (Path(__file__).parent / 'quotes.txt').read_text().splitlines()\n",
                "quotecli/quotes.txt": "Well begun is half done.\nStill waters run deep.\n",
                "tests/test_store.py": "from quotecli.store import load\n\n\ndef test_load():"
                "\n    assert load()\n",
            },
        ),
    ),
)

TEMPCONV = Repository(
    "tempconv",
    "no README, Rust",
    (
        Commit(
            "Convert temperatures",
            {
                "Cargo.toml": '[package]\nname = "tempconv"\nversion = "1.1.0"\nedition = '
                '"2021"\ndescription = "Converts temperatures between Celsius and Fahrenheit"'
                "\n\n[dependencies]\n",
                "src/main.rs": "mod convert;\n\nfn main() {\n    let args: Vec<String> = "
                "std::env::args().collect();\n    let value: f64 = args[1].parse().unwrap();"
                '\n    println!("{:.1}", convert::to_fahrenheit(value));\n}\n',
                "src/convert.rs": "pub fn to_fahrenheit(celsius: f64) -> f64 {\n    celsius * "
                "9.0 / 5.0 + 32.0\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn "
                "boiling() {\n        assert_eq!(super::to_fahrenheit(100.0), 212.0);\n    }"
                "\n}\n",
            },
        ),
    ),
)

PINGMON = Repository(
    "pingmon",
    "no README, Go",
    (
        Commit(
            "Check that web sites answer",
            {
                "go.mod": "module example.org/pingmon\n\ngo 1.22\n",
                "main.go": 'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n\t"os"\n)\n\n'
                "func main() {\n\tfor _, url := range os.Args[1:] {\n\t\tresp, err := "
                'http.Get(url)\n\t\tif err != nil {\n\t\t\tfmt.Println(url, "down")\n\t\t\t'
                "continue\n\t\t}\n\t\tfmt.Println(url, resp.StatusCode)\n\t}\n}\n",
                "status.go": "package main\n\nfunc up(code int) bool {\n\treturn code < 500\n}\n",
                "status_test.go": 'package main\n\nimport "testing"\n\nfunc TestUp(t '
                "*testing.T) {\n\tif !up(200) {\n\t\tt.Fatal(200)\n\t}\n}\n",
            },
        ),
    ),
)

RINGBUF = Repository(
    "ringbuf",
    "no README, make",
    (
        Commit(
            "A ring buffer in C",
            {
                "Makefile": "CC = cc\nCFLAGS = -Wall -O2\n\nringbuf: ringbuf.c main.c\n\t"
                "$(CC) $(CFLAGS) -o ringbuf ringbuf.c main.c\n\ntest: ringbuf_test\n\t"
                "./ringbuf_test\n\nringbuf_test: ringbuf.c ringbuf_test.c\n\t$(CC) $(CFLAGS)"
                " -o ringbuf_test ringbuf.c ringbuf_test.c\n",
                "ringbuf.h": "typedef struct { int *items; int size, head, count; } ringbuf;\n"
                "void rb_push(ringbuf *rb, int item);\n",
                "ringbuf.c": '#include "ringbuf.h"\n\nvoid rb_push(ringbuf *rb, int item) {\n'
                "    rb->items[(rb->head + rb->count) % rb->size] = item;\n    if (rb->count "
                "< rb->size) rb->count++; else rb->head = (rb->head + 1) % rb->size;\n}\n",
                "main.c": '#include "ringbuf.h"\n\nint main(void) {\n    return 0;\n}\n',
                "ringbuf_test.c": '#include <assert.h>\n#include "ringbuf.h"\n\nint main(void)'
                " {\n    int items[2];\n    ringbuf rb = {items, 2, 0, 0};\n    rb_push(&rb,"
                " 1);\n    assert(rb.count == 1);\n    return 0;\n}\n",
            },
        ),
    ),
)

LOGOS = Repository("logos", "this repository")

_NOT_PYTHON_WEB = ("django", "fastapi", "react", "express")
QUESTIONS: tuple[Question, ...] = (
    Question(
        "logos-what",
        LOGOS,
        "what",
        FIRST_QUESTION,
        must=(("agent", r"\bloop\b"), ("command", "shell")),
        must_not=("storing (and managing )?files", "store data", "web app", "django"),
        reference="- logos is an agent loop: the model writes shell commands in blocks and "
        "logos runs them.\n- sandboxd runs those commands in Docker containers.\n- It works "
        "with hosted or local models.",
    ),
    Question(
        "logos-stack",
        LOGOS,
        "stack",
        "which programming language is this project written in?",
        must=(("python",),),
        must_not=("javascript", "typescript", r"\bgo\b", "rust", r"java\b", r"setup\.py"),
        reference="It is written in Python (pyproject.toml).",
    ),
    Question(
        "pastebin-what",
        PASTEBIN,
        "what",
        "what does this repository do?",
        must=(("paste", "snippet"),),
        must_not=_NOT_PYTHON_WEB,
        reference="It is a small web app to share text snippets: paste text, get a short link.",
    ),
    Question(
        "pastebin-stack",
        PASTEBIN,
        "stack",
        "what language and framework does this project use?",
        must=(("python",), ("flask",)),
        must_not=_NOT_PYTHON_WEB,
        reference="Python, with the Flask framework.",
    ),
    Question(
        "pastebin-changed",
        PASTEBIN,
        "changed",
        "what changed in the last commit?",
        must=(("expir", "seven days", "7 days"),),
        must_not=("django",),
        reference="The last commit made snippets expire after seven days.",
    ),
    Question(
        "wordfreq-tests",
        WORDCOUNT,
        "tests",
        "how do I run the tests of this project?",
        must=(("cargo test",),),
        must_not=("pytest", "npm test", "make test", r"\bgo test"),
        reference="Run `cargo test`.",
    ),
    Question(
        "wordfreq-changed",
        WORDCOUNT,
        "changed",
        "what was the most recent change to this repository?",
        must=(("punctuation",),),
        reference="The last commit ignores punctuation around words.",
    ),
    Question(
        "slugkit-where",
        SLUGKIT,
        "where",
        "in which file is the function slugify defined?",
        must=(("text\\.py",),),
        must_not=("limits\\.py", "slugify\\.py", "utils\\.py"),
        reference="In src/slugkit/text.py.",
    ),
    Question(
        "slugkit-what",
        SLUGKIT,
        "what",
        "what does this library do?",
        must=(("slug",),),
        must_not=_NOT_PYTHON_WEB,
        reference="It turns titles into URL slugs.",
    ),
    Question(
        "sales-what",
        SALES,
        "what",
        "what does this repository do?",
        must=(("sales", "revenue"), ("region", "month")),
        must_not=("web app", "flask", "django", "machine learning"),
        reference="It reads data/sales.csv and prints the total revenue per region for each month.",
    ),
    Question(
        "shortener-stack",
        NO_README,
        "stack",
        "what language and framework does this project use?",
        must=(("javascript", r"node(\.js)?\b"), ("express",)),
        must_not=("python", "flask", "django", "typescript", "react"),
        reference="JavaScript on Node.js, with Express.",
    ),
    Question(
        "shortener-tests",
        NO_README,
        "tests",
        "how do I run the tests of this project?",
        must=(("npm test", "npm run test", "jest"),),
        must_not=("pytest", "cargo", "make test"),
        reference="Run `npm test` (it runs jest).",
    ),
    Question(
        "shop-what",
        MONOREPO,
        "what",
        "what are the parts of this repository?",
        must=(("api",), ("web", "storefront")),
        must_not=("mobile", "android", "django", "flask"),
        reference="Two packages: packages/api, the HTTP API, and packages/web, the storefront.",
    ),
    Question(
        "shop-changed",
        MONOREPO,
        "changed",
        "what changed last in this repository?",
        must=(("product",),),
        reference="The web package now shows the product list.",
    ),
    Question(
        "csvpick-tests",
        CSVTOOL,
        "tests",
        "how do I run the tests of this project?",
        must=(("make test", "pytest"),),
        must_not=("cargo", "npm", "jest"),
        reference="Run `make test`.",
    ),
    Question(
        "csvpick-where",
        CSVTOOL,
        "where",
        "where is the main function of this tool defined?",
        must=(("cli\\.py",),),
        must_not=("main\\.py", "__main__\\.py"),
        reference="In csvpick/cli.py.",
    ),
)

_OTHER_LANGUAGES = ("python", "javascript", "typescript", "rust", r"\bjava\b", "ruby")
HELD_OUT: tuple[Question, ...] = (
    Question(
        "quotecli-what",
        QUOTES,
        "what",
        "what does this repository do?",
        must=((r"\bquotes?\b",),),
        must_not=("web app", "flask", "django", "react"),
        reference="It prints a random quote from a local collection (pyproject.toml says so).",
        held_out=True,
    ),
    Question(
        "quotecli-stack",
        QUOTES,
        "stack",
        "what language and framework does this project use?",
        must=(("python",), ("click",)),
        must_not=("flask", "django", "fastapi", "javascript", "react"),
        reference="Python, with the Click library for its command line.",
        held_out=True,
    ),
    Question(
        "tempconv-what",
        TEMPCONV,
        "what",
        "what does this project do?",
        must=(("temperature", "celsius", "fahrenheit"),),
        must_not=("web app", "python", "react"),
        reference="It converts temperatures between Celsius and Fahrenheit (Cargo.toml).",
        held_out=True,
    ),
    Question(
        "tempconv-tests",
        TEMPCONV,
        "tests",
        "how do I run the tests of this project?",
        must=(("cargo test",),),
        must_not=("pytest", "npm", "make test", r"\bgo test"),
        reference="Run `cargo test`.",
        held_out=True,
    ),
    Question(
        "pingmon-stack",
        PINGMON,
        "stack",
        "which programming language is this project written in?",
        must=((r"\bgo\b", "golang"),),
        must_not=_OTHER_LANGUAGES,
        reference="Go (go.mod, main.go).",
        held_out=True,
    ),
    Question(
        "pingmon-tests",
        PINGMON,
        "tests",
        "how do I run the tests of this project?",
        must=((r"\bgo test\b",),),
        must_not=("pytest", "npm", "cargo", "make test"),
        reference="Run `go test`.",
        held_out=True,
    ),
    Question(
        "ringbuf-tests",
        RINGBUF,
        "tests",
        "how do I run the tests of this project?",
        must=(("make test",),),
        must_not=("pytest", "npm", "cargo", r"\bgo test"),
        reference="Run `make test`: it builds ringbuf_test and runs it.",
        held_out=True,
    ),
    Question(
        "ringbuf-stack",
        RINGBUF,
        "stack",
        "which programming language is this project written in?",
        must=((r"(?-i:\bC\b)(?![+#])",),),
        must_not=(*_OTHER_LANGUAGES, r"c\+\+", "c#"),
        reference="C: the Makefile builds ringbuf.c and main.c with cc.",
        held_out=True,
    ),
)
"""Repositories with no README, of several kinds: the manifest says what the README would."""
QUESTIONS += HELD_OUT

REPOSITORIES: tuple[Repository, ...] = tuple(
    {q.repository.name: q.repository for q in QUESTIONS}.values()
)
