"""The small-task suite: one- and two-step shell tasks a small local model should get done.

Each task lays out a few files in a fresh directory, asks for something a shell answers or
does in one or two commands (counting, finding, creating, copying, summing, editing a file
without `sed -i`), and judges the outcome from what the agent left behind: its final
answer, the directory, or both. The numbers and names are chosen so that a guess is
unlikely to be right (17 lines, not 10); a right guess is still told apart from a done
task by the family (`bench.small_model`), which also asks that a command really ran.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

Check = Callable[[Path, str], bool]
"""Whether the task is done: the workspace after the run, and the final answer."""


@dataclass(frozen=True)
class SmallTask:
    id: str
    kind: str
    """count, find, create, copy, sum, edit or two-step: the suite's rows by kind."""
    prompt: str
    files: Mapping[str, str]
    check: Check
    expected: str
    """What a right outcome looks like, in words (for the report of a wrong one)."""
    solution: str
    """A bash command that does the task: its output, as an answer, passes the check (the
    suite's own test runs it, so that no check is one nothing can pass)."""
    dirs: tuple[str, ...] = field(default=())
    held_out: bool = False
    """Written after the small-model defaults were tuned on the others: the figure on these
    says whether the defaults carry over to tasks they were not shaped on."""

    def lay_out(self, workspace: Path) -> None:
        for directory in self.dirs:
            (workspace / directory).mkdir(parents=True, exist_ok=True)
        for name, content in self.files.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
MAX_NUMBERS = 4
"""A number answer may hold a few numbers ("4 of the 8 lines"), not a list of them: a
model that prints 1 to 100 has not answered 17."""


def _word(word: str) -> re.Pattern[str]:
    """`word` standing alone; a number may not be part of a decimal either (17 in 1.17)."""
    before = r"(?<![\w.])" if _NUMBER.fullmatch(word) else r"(?<!\w)"
    return re.compile(rf"{before}{re.escape(word)}(?![\w]|\.\d)", re.IGNORECASE)


def says(word: str, *, unlike: tuple[str, ...] = ()) -> Check:
    """The answer holds `word` as a word of its own (42 is not in 420), in any case ("Carol"
    names carol), and none of `unlike`, the wrong candidates (a list of every file names the
    right one too); a number among at most `MAX_NUMBERS` numbers."""
    wanted, wrong = _word(word), [_word(other) for other in unlike]
    numeric = _NUMBER.fullmatch(word) is not None

    def check(_workspace: Path, answer: str) -> bool:
        if not wanted.search(answer) or any(p.search(answer) for p in wrong):
            return False
        return not numeric or len(_NUMBER.findall(answer)) <= MAX_NUMBERS

    return check


def is_exactly(value: str, *alternatives: str) -> Check:
    """The answer is `value` (or one of `alternatives`) and nothing else, in any case, give or
    take quotes, backticks, bold and a final full stop: the bare value a task asked for."""
    wanted = {v.lower() for v in (value, *alternatives)}

    def check(_workspace: Path, answer: str) -> bool:
        bare = answer.strip().strip("`*\"'").strip()
        return bare.removesuffix(".").strip("`*\"'").strip().lower() in wanted

    return check


def file_is(name: str, content: str) -> Check:
    """`name` holds `content`, give or take whitespace at the ends of lines and the file."""

    def check(workspace: Path, _answer: str) -> bool:
        return _normalized(_read(workspace / name)) == _normalized(content)

    return check


def file_holds(name: str, *parts: str) -> Check:
    def check(workspace: Path, _answer: str) -> bool:
        text = _read(workspace / name)
        return text is not None and all(part in text for part in parts)

    return check


def json_file_is(name: str, value: object) -> Check:
    def check(workspace: Path, _answer: str) -> bool:
        text = _read(workspace / name)
        try:
            return text is not None and json.loads(text) == value
        except ValueError:
            return False

    return check


def missing(*names: str) -> Check:
    return lambda workspace, _answer: not any((workspace / n).exists() for n in names)


def is_dir(name: str) -> Check:
    return lambda workspace, _answer: (workspace / name).is_dir()


def all_of(*checks: Check) -> Check:
    return lambda workspace, answer: all(check(workspace, answer) for check in checks)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _normalized(text: str | None) -> str | None:
    if text is None:
        return None
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _lines(count: int, make: Callable[[int], str]) -> str:
    return "".join(make(i) + "\n" for i in range(1, count + 1))


_NOTES = _lines(17, lambda i: f"note {i}: remember to water the plants on day {i * 3}")
_NUMBERS = "\n".join(str(n) for n in (12, 7, 31, 4, 18, 9, 26)) + "\n"  # sum 107
_LOG = "".join(
    f"2026-03-0{day} 10:0{i}:00 {level} {message}\n"
    for day, (i, level, message) in enumerate(
        [
            (1, "INFO", "service started"),
            (2, "ERROR", "disk quota exceeded"),
            (3, "INFO", "request served"),
            (4, "ERROR", "connection reset"),
            (5, "WARN", "slow response"),
            (6, "ERROR", "timeout talking to db"),
            (7, "INFO", "request served"),
            (8, "ERROR", "disk quota exceeded"),
        ],
        start=1,
    )
)  # 4 ERROR lines
_CSV = "item,quantity\napples,14\npears,23\nplums,8\ncherries,41\n"  # 86
_USERS = "root:0\nalice:1001\nbob:1002\ncarol:1003\ndave:1004\n"
_SRC = {
    "src/dates.py": "import datetime\n\n\ndef parse_date(text):\n"
    "    return datetime.date.fromisoformat(text)\n",
    "src/money.py": "def format_price(cents):\n    return f'{cents / 100:.2f}'\n",
    "src/names.py": "def title_case(name):\n    return name.title()\n",
    "src/app.py": "from dates import parse_date\n\n\ndef main():\n"
    "    print(parse_date('2026-01-02'))\n",
}
_POEM = "the quick brown fox\njumps over the lazy dog\nand runs far away\n"  # 13 words

TASKS: tuple[SmallTask, ...] = (
    # Counting
    SmallTask(
        "count-lines",
        "count",
        "How many lines does notes.txt have?",
        {"notes.txt": _NOTES},
        says("17"),
        "17",
        solution='echo "$(wc -l < notes.txt) lines"',
    ),
    SmallTask(
        "count-words",
        "count",
        "How many words are in poem.txt?",
        {"poem.txt": _POEM},
        says("13"),
        "13",
        solution="wc -w < poem.txt",
    ),
    SmallTask(
        "count-errors",
        "count",
        "How many lines of app.log contain ERROR?",
        {"app.log": _LOG},
        says("4"),
        "4",
        solution="grep -c ERROR app.log",
    ),
    SmallTask(
        "count-csv-files",
        "count",
        "How many .csv files are in the data directory?",
        {f"data/{name}": "a,b\n1,2\n" for name in ("jan.csv", "feb.csv", "mar.csv", "apr.csv")}
        | {"data/readme.txt": "csv exports\n", "data/notes.md": "# notes\n"},
        says("4"),
        "4",
        solution="ls data/*.csv | wc -l",
    ),
    SmallTask(
        "count-py-files",
        "count",
        "How many Python files (.py) are there under src, counting subdirectories?",
        {
            **_SRC,
            "src/util/strings.py": "X = 1\n",
            "src/util/readme.txt": "helpers\n",
        },
        says("5"),
        "5",
        solution="find src -name '*.py' | wc -l",
    ),
    # Finding
    SmallTask(
        "find-function",
        "find",
        "Which file under src defines the function parse_date?",
        _SRC,
        says("dates.py", unlike=("money.py", "names.py")),
        "src/dates.py",
        solution="grep -l 'def parse_date' src/*.py",
    ),
    SmallTask(
        "find-word",
        "find",
        "Which of the .txt files in this directory mentions the word banana?",
        {
            "shopping.txt": "milk\nbread\neggs\n",
            "fruit.txt": "apple\nbanana\ncherry\n",
            "tools.txt": "hammer\nsaw\n",
        },
        says("fruit.txt", unlike=("shopping.txt", "tools.txt")),
        "fruit.txt",
        solution="grep -l banana *.txt",
    ),
    SmallTask(
        "find-config-value",
        "find",
        "What port number is set in server.ini?",
        {"server.ini": "[server]\nhost = example.internal\nport = 8443\nworkers = 6\n"},
        says("8443"),
        "8443",
        solution="grep port server.ini",
    ),
    SmallTask(
        "find-largest",
        "find",
        "Which file in the logs directory is the largest?",
        {
            "logs/a.log": "x" * 120 + "\n",
            "logs/b.log": "y" * 5000 + "\n",
            "logs/c.log": "z" * 900 + "\n",
        },
        says("b.log", unlike=("a.log", "c.log")),
        "b.log",
        solution="ls -S logs | head -n 1",
    ),
    SmallTask(
        "find-first-line",
        "find",
        "What is the first line of readme.txt?",
        {"readme.txt": "Orchid inventory tool\nversion 3\nby the garden team\n"},
        says("Orchid inventory tool"),
        "Orchid inventory tool",
        solution="head -n 1 readme.txt",
    ),
    SmallTask(
        "find-user",
        "find",
        "users.txt lists name:id pairs. Which user has the id 1003?",
        {"users.txt": _USERS},
        says("carol", unlike=("alice", "bob", "dave", "root")),
        "carol",
        solution="grep :1003 users.txt",
    ),
    # Creating
    SmallTask(
        "create-file",
        "create",
        "Create a file named hello.txt containing the text: hello world",
        {},
        file_is("hello.txt", "hello world"),
        "hello.txt with 'hello world'",
        solution="echo 'hello world' > hello.txt",
    ),
    SmallTask(
        "create-dirs",
        "create",
        "Create the directory build/output (with its parent).",
        {},
        is_dir("build/output"),
        "the directory build/output",
        solution="mkdir -p build/output",
    ),
    SmallTask(
        "create-sequence",
        "create",
        "Create a file seq.txt with the numbers 1 to 12, one per line.",
        {},
        file_is("seq.txt", _lines(12, str)),
        "seq.txt with 1..12",
        solution="seq 12 > seq.txt",
    ),
    # Copying, moving, removing
    SmallTask(
        "copy-file",
        "copy",
        "Copy report.txt into the backup directory.",
        {"report.txt": "quarterly numbers: up 4%\n"},
        all_of(
            file_is("backup/report.txt", "quarterly numbers: up 4%"),
            file_is("report.txt", "quarterly numbers: up 4%"),
        ),
        "backup/report.txt, report.txt kept",
        solution="cp report.txt backup/",
        dirs=("backup",),
    ),
    SmallTask(
        "rename-file",
        "copy",
        "Rename draft.txt to final.txt.",
        {"draft.txt": "the plan, version 2\n"},
        all_of(file_is("final.txt", "the plan, version 2"), missing("draft.txt")),
        "final.txt, no draft.txt",
        solution="mv draft.txt final.txt",
    ),
    SmallTask(
        "remove-tmp",
        "copy",
        "Delete every .tmp file in this directory, and nothing else.",
        {"a.tmp": "1\n", "b.tmp": "2\n", "keep.txt": "keep me\n", "data.csv": "x\n"},
        all_of(missing("a.tmp", "b.tmp"), file_is("keep.txt", "keep me"), file_is("data.csv", "x")),
        "no .tmp files, the rest kept",
        solution="rm ./*.tmp",
    ),
    # Summing
    SmallTask(
        "sum-numbers",
        "sum",
        "What is the sum of the numbers in numbers.txt (one per line)?",
        {"numbers.txt": _NUMBERS},
        says("107"),
        "107",
        solution="awk '{s += $1} END {print s}' numbers.txt",
    ),
    SmallTask(
        "sum-column",
        "sum",
        "What is the total of the quantity column in stock.csv?",
        {"stock.csv": _CSV},
        says("86"),
        "86",
        solution="awk -F, 'NR > 1 {s += $2} END {print s}' stock.csv",
    ),
    SmallTask(
        "max-value",
        "sum",
        "What is the largest number in numbers.txt?",
        {"numbers.txt": _NUMBERS},
        says("31"),
        "31",
        solution="sort -n numbers.txt | tail -n 1",
    ),
    # Editing without sed -i
    SmallTask(
        "edit-replace",
        "edit",
        "In greeting.txt, replace the word world with the word moon.",
        {"greeting.txt": "hello world\nthe world is round\n"},
        file_is("greeting.txt", "hello moon\nthe moon is round"),
        "greeting.txt with moon for world",
        solution="sed 's/world/moon/g' greeting.txt > g.new && mv g.new greeting.txt",
    ),
    SmallTask(
        "edit-append",
        "edit",
        "Add a line saying 'buy stamps' at the end of todo.txt.",
        {"todo.txt": "call the plumber\npay rent\n"},
        file_is("todo.txt", "call the plumber\npay rent\nbuy stamps"),
        "todo.txt with a third line",
        solution="echo 'buy stamps' >> todo.txt",
    ),
    SmallTask(
        "edit-setting",
        "edit",
        "In settings.ini, change debug = false to debug = true.",
        {"settings.ini": "[app]\nname = shop\ndebug = false\nworkers = 2\n"},
        file_is("settings.ini", "[app]\nname = shop\ndebug = true\nworkers = 2"),
        "settings.ini with debug = true",
        solution="sed 's/debug = false/debug = true/' settings.ini > s.new "
        "&& mv s.new settings.ini",
    ),
    SmallTask(
        "edit-delete-line",
        "edit",
        "Remove the line that says DELETE ME from list.txt, keeping the other lines.",
        {"list.txt": "alpha\nbeta\nDELETE ME\ngamma\n"},
        file_is("list.txt", "alpha\nbeta\ngamma"),
        "list.txt without that line",
        solution="grep -v 'DELETE ME' list.txt > l.new && mv l.new list.txt",
    ),
    # Two steps
    SmallTask(
        "two-count-to-file",
        "two-step",
        "Count the lines of notes.txt and write that number to count.txt.",
        {"notes.txt": _NOTES},
        file_is("count.txt", "17"),
        "count.txt holding 17",
        solution="wc -l < notes.txt > count.txt",
    ),
    SmallTask(
        "two-sum-to-file",
        "two-step",
        "Add up the numbers in numbers.txt and write the total to total.txt.",
        {"numbers.txt": _NUMBERS},
        file_is("total.txt", "107"),
        "total.txt holding 107",
        solution="awk '{s += $1} END {print s}' numbers.txt > total.txt",
    ),
    SmallTask(
        "two-sort",
        "two-step",
        "Sort the names in names.txt alphabetically and save them to sorted.txt.",
        {"names.txt": "mallory\nalice\ntrent\nbob\neve\n"},
        file_is("sorted.txt", "alice\nbob\neve\nmallory\ntrent"),
        "sorted.txt, alphabetical",
        solution="sort names.txt > sorted.txt",
    ),
    SmallTask(
        "two-archive-logs",
        "two-step",
        "Create a directory named archive and move all .log files into it.",
        {"one.log": "1\n", "two.log": "2\n", "keep.txt": "stay\n"},
        all_of(
            file_is("archive/one.log", "1"),
            file_is("archive/two.log", "2"),
            missing("one.log", "two.log"),
            file_is("keep.txt", "stay"),
        ),
        "archive/ with both logs, keep.txt in place",
        solution="mkdir archive && mv ./*.log archive/",
    ),
    SmallTask(
        "two-errors-to-file",
        "two-step",
        "Write the lines of app.log that contain ERROR to errors.txt.",
        {"app.log": _LOG},
        all_of(
            file_holds("errors.txt", "disk quota", "connection reset", "timeout talking"),
            lambda workspace, _answer: "INFO" not in (_read(workspace / "errors.txt") or "INFO"),
        ),
        "errors.txt with the 4 ERROR lines only",
        solution="grep ERROR app.log > errors.txt",
    ),
    SmallTask(
        "two-find-and-copy",
        "two-step",
        "Find the file under src that defines format_price and copy it to price_backup.py.",
        _SRC,
        file_is("price_backup.py", _SRC["src/money.py"]),
        "price_backup.py, a copy of src/money.py",
        solution="cp \"$(grep -l 'def format_price' src/*.py)\" price_backup.py",
    ),
    # Held out: written after the defaults were tuned on the tasks above.
    SmallTask(
        "count-dirs",
        "count",
        "How many directories are inside the projects directory?",
        {
            "projects/alpha/readme.txt": "a\n",
            "projects/beta/readme.txt": "b\n",
            "projects/gamma/readme.txt": "c\n",
            "projects/notes.txt": "not a directory\n",
        },
        says("3"),
        "3",
        solution="find projects -mindepth 1 -maxdepth 1 -type d | wc -l",
        held_out=True,
    ),
    SmallTask(
        "count-unique",
        "count",
        "How many different colours are listed in colours.txt?",
        {"colours.txt": "red\nblue\nred\ngreen\nblue\nyellow\nred\nviolet\n"},
        says("5"),
        "5",
        solution="sort -u colours.txt | wc -l",
        held_out=True,
    ),
    SmallTask(
        "find-todo",
        "find",
        "Which file in the notes directory contains the word TODO?",
        {
            "notes/meeting.md": "we agreed on friday\n",
            "notes/plan.md": "step 1\nTODO: book the room\n",
            "notes/ideas.md": "a bigger garden\n",
        },
        says("plan.md", unlike=("meeting.md", "ideas.md")),
        "plan.md",
        solution="grep -l TODO notes/*",
        held_out=True,
    ),
    SmallTask(
        "find-line-number",
        "find",
        "On which line of ledger.txt does the word refund appear?",
        {"ledger.txt": "rent 900\ngroceries 84\nrefund 25\npower 61\nwater 19\n"},
        says("3"),
        "3",
        solution="grep -n refund ledger.txt",
        held_out=True,
    ),
    SmallTask(
        "find-extension",
        "find",
        "What is the file extension of the only file in the inbox directory?",
        {"inbox/invoice-0042.pdf": "%PDF-1.4\n"},
        says("pdf"),
        "pdf",
        solution="ls inbox",
        held_out=True,
    ),
    SmallTask(
        "create-json",
        "create",
        'Create a file config.json that contains the JSON object {"debug": true}.',
        {},
        json_file_is("config.json", {"debug": True}),
        'config.json holding {"debug": true}',
        solution="echo '{\"debug\": true}' > config.json",
        held_out=True,
    ),
    SmallTask(
        "copy-backup",
        "copy",
        "Make a copy of budget.csv named budget.csv.bak in the same directory.",
        {"budget.csv": "month,spent\njan,410\n"},
        all_of(
            file_is("budget.csv.bak", "month,spent\njan,410"),
            file_is("budget.csv", "month,spent\njan,410"),
        ),
        "budget.csv.bak, budget.csv kept",
        solution="cp budget.csv budget.csv.bak",
        held_out=True,
    ),
    SmallTask(
        "sum-two-files",
        "sum",
        "How many lines do a.txt and b.txt have together?",
        {"a.txt": _lines(9, str), "b.txt": _lines(14, str)},
        says("23"),
        "23",
        solution="cat a.txt b.txt | wc -l",
        held_out=True,
    ),
    SmallTask(
        "edit-uppercase",
        "edit",
        "Change guests.txt so that every name in it is in upper case.",
        {"guests.txt": "ada\ngrace\nlinus\n"},
        file_is("guests.txt", "ADA\nGRACE\nLINUS"),
        "guests.txt in upper case",
        solution="tr a-z A-Z < guests.txt > g.new && mv g.new guests.txt",
        held_out=True,
    ),
    SmallTask(
        "two-words-to-file",
        "two-step",
        "Count the words in story.txt and save that number in words.txt.",
        {"story.txt": "once upon a time there was a small shell\nit ran every command\n"},
        file_is("words.txt", "13"),
        "words.txt holding 13",
        solution="wc -w < story.txt > words.txt",
        held_out=True,
    ),
    # Held out: the answer's form (a bare value, a file holding only a value), written for
    # the issue of answers that lost the form the task asked for.
    SmallTask(
        "count-lines-bare",
        "count",
        "How many lines are in the file diary.txt? Answer with just the number.",
        {"diary.txt": _lines(23, lambda i: f"day {i}: rain, then sun")},
        is_exactly("23"),
        "23, alone",
        solution="wc -l < diary.txt",
        held_out=True,
    ),
    SmallTask(
        "sum-bare",
        "sum",
        "What is the sum of the numbers in prices.txt? Answer with just the number.",
        {"prices.txt": "15\n42\n8\n23\n11\n"},
        is_exactly("99"),
        "99, alone",
        solution="awk '{s += $1} END {print s}' prices.txt",
        held_out=True,
    ),
    SmallTask(
        "count-files-bare",
        "count",
        "How many .json files are in the config directory? Reply with only the number.",
        {f"config/{name}.json": "{}\n" for name in ("app", "db", "cache")}
        | {"config/notes.txt": "json files here\n"},
        is_exactly("3"),
        "3, alone",
        solution="ls config/*.json | wc -l",
        held_out=True,
    ),
    SmallTask(
        "find-file-bare",
        "find",
        "Which file in the recipes directory mentions cinnamon? Answer with just the file name.",
        {
            "recipes/bread.md": "flour, water, salt\n",
            "recipes/buns.md": "flour, sugar, cinnamon\n",
            "recipes/soup.md": "leeks, potatoes\n",
        },
        is_exactly("buns.md", "recipes/buns.md"),
        "buns.md, alone",
        solution="grep -l cinnamon recipes/* | xargs -n 1 basename",
        held_out=True,
    ),
    SmallTask(
        "find-name-bare",
        "find",
        "staff.txt lists name:room pairs. Who is in room 214? Answer with just the name.",
        {"staff.txt": "olaf:101\nmira:214\nkenji:305\nruth:118\n"},
        is_exactly("mira"),
        "mira, alone",
        solution="grep ':214$' staff.txt | cut -d: -f1",
        held_out=True,
    ),
    SmallTask(
        "max-bare",
        "sum",
        "What is the largest number in scores.txt? Answer with just the number.",
        {"scores.txt": "58\n91\n77\n64\n89\n"},
        is_exactly("91"),
        "91, alone",
        solution="sort -n scores.txt | tail -n 1",
        held_out=True,
    ),
    SmallTask(
        "words-to-file-only",
        "two-step",
        "Create a file count.txt that contains the number of words in essay.txt, and nothing else.",
        {"essay.txt": "the river was cold and the stones were smooth\nwe forded it at noon\n"},
        file_is("count.txt", "14"),
        "count.txt holding 14, alone",
        solution="wc -w < essay.txt > count.txt",
        held_out=True,
    ),
    SmallTask(
        "lines-to-file-only",
        "two-step",
        "Write the number of lines in todo.txt to lines.txt, with nothing else in it.",
        {"todo.txt": "buy milk\nfix the gate\ncall ana\npaint the shed\nreturn books\n"},
        file_is("lines.txt", "5"),
        "lines.txt holding 5, alone",
        solution="wc -l < todo.txt > lines.txt",
        held_out=True,
    ),
    # Written after the checks of a file asked for and of a number worked out
    # (`logos.protocol.asked_file`, `logos.protocol.asked_number`), in other words and on
    # other files than the tasks those were shaped on.
    SmallTask(
        "find-word-letters",
        "find",
        "Which of the files in the letters directory mentions the word invoice?",
        {
            "letters/a.txt": "dear sam, thanks for the visit\n",
            "letters/b.txt": "the invoice is attached\n",
            "letters/c.txt": "see you on friday\n",
        },
        says("b.txt", unlike=("a.txt", "c.txt")),
        "letters/b.txt",
        solution="grep -l invoice letters/*",
        held_out=True,
    ),
    SmallTask(
        "find-smallest",
        "find",
        "What is the smallest file in the data folder?",
        {"data/x.csv": "a," * 150 + "\n", "data/y.csv": "a,b\n", "data/z.csv": "a," * 45 + "\n"},
        says("y.csv", unlike=("x.csv", "z.csv")),
        "data/y.csv",
        solution="ls -Sr data | head -n 1",
        held_out=True,
    ),
    SmallTask(
        "count-md-files",
        "count",
        "How many .md files does the docs directory hold?",
        {f"docs/{name}.md": f"# {name}\n" for name in ("intro", "setup", "usage", "faq")}
        | {"docs/notes.txt": "md files\n", "docs/logo.svg": "<svg/>\n"},
        says("4"),
        "4",
        solution="ls docs/*.md | wc -l",
        held_out=True,
    ),
    SmallTask(
        "find-line-of-word",
        "find",
        "What line number is the word 'gamma' on in greek.txt?",
        {"greek.txt": "alpha 1\nbeta 2\ngamma 7\ndelta 4\n"},
        says("3", unlike=("7",)),
        "3",
        solution="grep -n gamma greek.txt | cut -d: -f1",
        held_out=True,
    ),
    SmallTask(
        "average-column",
        "sum",
        "What is the average of the score column in results.csv?",
        {"results.csv": "name,score\nann,80\nbo,95\ncy,65\n"},
        says("80"),
        "80",
        solution="awk -F, 'NR > 1 {s += $2} END {print s / (NR - 1)}' results.csv",
        held_out=True,
    ),
    SmallTask(
        "copy-found-file",
        "two-step",
        "Find the file in the src directory that contains the word TODO and copy it to "
        "todo_copy.txt.",
        {"src/a.py": "print(1)\n", "src/b.py": "# TODO: tests\n", "src/c.py": "x = 2\n"},
        file_is("todo_copy.txt", "# TODO: tests\n"),
        "todo_copy.txt, a copy of src/b.py",
        solution="cp src/b.py todo_copy.txt",
        held_out=True,
    ),
    SmallTask(
        "create-quoted",
        "create",
        'Create a file greeting.txt that contains "good morning".',
        {},
        file_is("greeting.txt", "good morning"),
        "greeting.txt holding good morning",
        solution="echo 'good morning' > greeting.txt",
        held_out=True,
    ),
    SmallTask(
        "words-in-all",
        "count",
        "How many words do poem1.txt and poem2.txt have in all?",
        {"poem1.txt": "the cat sat\n", "poem2.txt": "on a warm mat\n"},
        says("7"),
        "7",
        solution="cat poem1.txt poem2.txt | wc -w",
        held_out=True,
    ),
    SmallTask(
        "biggest-bare",
        "find",
        "Which file under logs is the biggest? Answer with just the file name.",
        {"logs/small.log": "x\n", "logs/big.log": "x" * 4000 + "\n", "logs/mid.log": "x" * 400},
        is_exactly("big.log", "logs/big.log"),
        "big.log, alone",
        solution="ls -S logs | head -n 1",
        held_out=True,
    ),
)
