"""Family 3b: the streaming `<cmd>` parser's throughput on a long, realistic message.

The message mixes what models write: prose with `<` in it, markdown fences holding HTML,
heredocs that write code full of comparisons and tags, greps for the protocol's own tags.
It is fed in ~20-character deltas (as a provider streams it) and in one piece.
"""

from __future__ import annotations

import statistics
import time

from bench.plan import Plan
from bench.results import Section, Target, ms
from logos.protocol.parse import CLOSE_TAG, OPEN_TAG, CmdStreamParser

FAMILY = "parser"
TITLE = "Streaming parser throughput (CmdStreamParser)"
TARGET_MB_PER_S = 50.0
DELTA_CHARS = 20

_UNIT = """\
Step {i}: the failing test compares `len(items) < limit` and the fixture returns <None>,
so I will look at the loader first, then patch the comparison (a <= b, not a < b).

<cmd>grep -rn "def load_items" src/ tests/ | head -n 20</cmd>

The template renders this block, which explains the stray tag in the output:

```html
<div class="item-{i}"><span>{{{{ item.name }}}}</span> &lt;-- was <b>bold</b></div>
```

<cmd>cat > src/loader_{i}.py <<'EOF'
from __future__ import annotations


def load_items(rows: list[dict[str, int]], limit: int = {i}) -> list[int]:
    \"\"\"Keep rows whose score is below the limit; <0 means missing.\"\"\"
    kept = [row["score"] for row in rows if 0 <= row["score"] < limit]
    if len(kept) > limit >> 1:
        print(f"<warn> {{len(kept)}} rows kept </warn>")
    return kept
EOF
python3 -c 'import ast,sys; ast.parse(open("src/loader_{i}.py").read())' && echo ok</cmd>

Then the docs, which talk about the protocol itself:
<cmd>grep -c '<cmd>.*</cmd>' docs/protocol_{i}.md; sed -n '1,5p' docs/protocol_{i}.md</cmd>
"""
_UNMATCHED_OPEN = "<cmd>grep -rn '<cmd>' src/module_{i}.py</cmd>\n"
"""A nested `<cmd>` that never closes: the parser's end-of-message recovery path."""
_BLOCKS_PER_UNIT = 3


def realistic_message(size: int, *, unmatched_opens: bool = False) -> tuple[str, int]:
    """A message of at least `size` characters (ASCII, so bytes too) and its block count.

    `unmatched_opens` adds a `grep '<cmd>'` block to every unit (about one per kilobyte).
    """
    units: list[str] = []
    blocks = 0
    length = 0
    while length < size:
        unit = _UNIT.format(i=len(units))
        blocks += _BLOCKS_PER_UNIT
        if unmatched_opens:
            unit += _UNMATCHED_OPEN.format(i=len(units))
            blocks += 1
        units.append(unit)
        length += len(unit)
    return "".join(units), blocks


def _parse(deltas: list[str]) -> tuple[float, int]:
    """Seconds to parse the deltas (close included) and the number of blocks found."""
    parser = CmdStreamParser()
    feed = parser.feed
    started = time.perf_counter()
    for delta in deltas:
        feed(delta)
    parser.close()
    elapsed = time.perf_counter() - started
    return elapsed, len(parser.blocks)


def _share_with_angle(deltas: list[str]) -> float:
    return sum("<" in delta for delta in deltas) / len(deltas)


def _share_ending_a_tag(text: str, delta_chars: int) -> float:
    """The share of deltas in which a tag ends: the ones the parser must scan in full."""
    ends: set[int] = set()
    for tag in (OPEN_TAG, CLOSE_TAG):
        at = text.find(tag)
        while at >= 0:
            ends.add((at + len(tag) - 1) // delta_chars)
            at = text.find(tag, at + 1)
    return len(ends) / len(_deltas(text, delta_chars))


def _deltas(text: str, size: int | None) -> list[str]:
    return [text] if size is None else [text[i : i + size] for i in range(0, len(text), size)]


async def run(plan: Plan) -> Section:
    clean, clean_blocks = realistic_message(plan.parser_message_bytes)
    worst, worst_blocks = realistic_message(plan.parser_message_bytes, unmatched_opens=True)
    streamed = f"{DELTA_CHARS}-char deltas"
    worst_passes = min(3, plan.parser_repeats)
    # (label, message, blocks in it, delta size or None for one feed, passes)
    cases = [
        (streamed, clean, clean_blocks, DELTA_CHARS, plan.parser_repeats),
        ("one feed", clean, clean_blocks, None, plan.parser_repeats),
        (
            f"{streamed}, unmatched <cmd> per KB",
            worst,
            worst_blocks,
            DELTA_CHARS,
            worst_passes,
        ),
    ]
    rows: list[tuple[str, ...]] = []
    raw: dict[str, object] = {}
    problems: list[str] = []
    speeds: dict[str, float] = {}
    for label, text, expected_blocks, delta_chars, passes in cases:
        deltas = _deltas(text, delta_chars)
        size = len(text.encode())
        rates: list[float] = []
        for _ in range(passes):
            seconds, blocks = _parse(deltas)
            if blocks != expected_blocks:
                problems.append(
                    f"parser ({label}) found {blocks} blocks where the message has "
                    f"{expected_blocks}: the parser's rules changed or it has a bug"
                )
            rates.append(size / 1e6 / seconds)
        speeds[label] = statistics.median(rates)
        rows.append(
            (
                label,
                f"{size / 1e6:.2f} MB",
                f"{len(deltas)}",
                f"{speeds[label]:.1f} MB/s",
                f"{min(rates):.1f} MB/s",
                ms(size / 1e6 / speeds[label]),
            )
        )
        raw[label] = {
            "message_bytes": size,
            "blocks": expected_blocks,
            "feeds": len(deltas),
            "mb_per_s": rates,
        }
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("feeding", "message", "feeds", "median", "slowest", "per pass"),
        rows=tuple(rows),
        targets=(
            Target(
                f"parser >= {TARGET_MB_PER_S:g} MB/s ({streamed}, as streamed)",
                f"{speeds[streamed]:.1f} MB/s",
                speeds[streamed] >= TARGET_MB_PER_S,
            ),
        ),
        notes=(
            f"{100 * _share_with_angle(_deltas(clean, DELTA_CHARS)):.0f}% of the message's "
            f"{DELTA_CHARS}-char deltas hold a `<` and "
            f"{100 * _share_ending_a_tag(clean, DELTA_CHARS):.0f}% end a tag; only the latter "
            "take the parser's full scan",
            f"{plan.parser_repeats} passes per feeding ({worst_passes} for the last row); "
            "MB = 10^6 bytes; the last row is the "
            "worst case: each unmatched nested <cmd> (`grep '<cmd>'`) is recovered only at the "
            "end of the message (by close())",
        ),
        problems=tuple(problems),
        raw=raw,
    )
