"""The `<cmd>` protocol: find the model's commands in its text, whole or while it streams.

One state machine (`CmdStreamParser`) implements every rule below; `parse_cmd_blocks` and
`strip_cmd_blocks` feed it the whole text at once. So however a stream is cut into deltas,
it yields exactly the blocks and prose that the batch functions give for the full text.

Rules:

* Tags are exactly `<cmd>` and `</cmd>`: lowercase, no spaces, no attributes. `<CMD>` or
  `<cmd >` are prose (the hallucination detector flags them).
* A `</cmd>` outside any block is prose.
* Nesting is depth counting: inside a block each further `<cmd>` opens a level and each
  `</cmd>` closes one; the block ends when the depth is back to zero, and the nested tags are
  part of the command. WHY: a heredoc that writes text about the protocol itself, e.g.
  `cat > doc.md <<'EOF'` … `Use <cmd>ls</cmd>` … `EOF`, must stay one command.
* Recovery at the end of a message: if the text ends inside a block whose content holds a
  `</cmd>`, a nested `<cmd>` was never closed (typically `grep -rn '<cmd>' src`). The block
  is then re-read as ending at its first `</cmd>` and the rest of the text is parsed again
  (in one linear pass, however many such blocks the message holds).
  Nothing inside an open block has been emitted yet, so this stays identical in both modes;
  the price is that such commands are only reported by `close()`. A message cut off by the
  token limit must not have a half-written command run, so `close(truncated=True)` skips
  the recovery and reports the block as unclosed.
* Known limitation: an unmatched `</cmd>` inside a block ends it early, e.g. in
  `grep '</cmd>' f`. The command then fails visibly (`grep '` has an open quote) and the
  model can spell the tag differently (`'<''/cmd>'`).
* A block that holds only whitespace is not a command: it is dropped, takes no index and
  leaves no trace in the prose.
* An unclosed block at the end is not a command; the stream parser reports it as
  `UnclosedBlock` and the prose ends where it opened.
* Markdown code fences get no special treatment: `<cmd>` inside a fence in prose is a real
  block. WHY: models also wrap real commands in fences, and a fence-aware rule would make a
  fence typed inside a command (a heredoc writing markdown) change what counts as a tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

OPEN_TAG = "<cmd>"
CLOSE_TAG = "</cmd>"

_TAG = re.compile(r"</?cmd>")
# Both tags end with this, and a tag's only `<` is its first character: one `str.find`
# for it, then a look at the one or two characters before, finds either tag.
_TAG_END = "cmd>"
_OPEN_TAG_LEN = len(OPEN_TAG)
_TAG_END_LEN = len(_TAG_END)
_BLANK_LINE_RUN = re.compile(r"\n(?:[^\S\n]*\n)+")
# Proper prefixes of a tag that may end a chunk: held back until the next delta decides.
# Outside a block only `<cmd>` matters: a `</cmd>` there is prose.
_OPEN_PREFIXES = tuple(OPEN_TAG[:n] for n in range(1, len(OPEN_TAG)))
_ANY_TAG_PREFIXES = _OPEN_PREFIXES + tuple(CLOSE_TAG[:n] for n in range(2, len(CLOSE_TAG)))


@dataclass(frozen=True, slots=True, init=False)
class ProseDelta:
    """Text outside any block, safe to show the user now."""

    text: str

    def __init__(self, text: str) -> None:
        # WHY: one of these is made per streamed delta; setting the slot directly costs a
        # third less than the frozen dataclass __init__ (object.__setattr__).
        _set_prose_text(self, text)


_set_prose_text = ProseDelta.__dict__["text"].__set__
_new_instance = object.__new__


@dataclass(frozen=True, slots=True, init=False)
class CommandBlock:
    """A complete block: `index` counts commands in the message from 0; `command` is trimmed."""

    index: int
    command: str

    def __init__(self, index: int, command: str) -> None:
        # WHY: as for ProseDelta; with a block every kilobyte or so it is a few % of a stream.
        _set_block_index(self, index)
        _set_block_command(self, command)


_set_block_index = CommandBlock.__dict__["index"].__set__
_set_block_command = CommandBlock.__dict__["command"].__set__


@dataclass(frozen=True)
class UnclosedBlock:
    """The message ended inside a block (only from `close()`); `partial_text` is trimmed."""

    index: int
    partial_text: str


Event: TypeAlias = ProseDelta | CommandBlock | UnclosedBlock


def tidy_prose(raw_prose: str) -> str:
    """Collapse runs of blank lines (left behind by removed blocks) and trim the ends."""
    return _BLANK_LINE_RUN.sub("\n\n", raw_prose).strip()


class CmdStreamParser:
    """Incremental parser for one assistant message; see the module docstring for the rules.

    Work per delta is proportional to its length: it is searched with `str.find` and only
    a possible partial tag (at most five characters) is carried over to the next delta.
    """

    __slots__ = (
        "_block_parts",
        "_blocks",
        "_closed",
        "_depth",
        "_held",
        "_prose_cache",
        "_prose_parts",
    )

    def __init__(self) -> None:
        self._held = ""
        self._depth = 0
        self._block_parts: list[str] = []
        self._prose_parts: list[str] = []
        self._blocks: list[str] = []
        self._closed = False
        self._prose_cache: tuple[int, str] = (0, "")

    @property
    def in_block(self) -> bool:
        """True while inside an open block (and after `close()` if the message ended in one)."""
        return self._depth > 0

    @property
    def blocks(self) -> list[str]:
        """The commands completed so far, in order."""
        return list(self._blocks)

    @property
    def raw_prose(self) -> str:
        """All prose emitted so far, exactly the concatenated `ProseDelta` texts."""
        return "".join(self._prose_parts)

    @property
    def prose(self) -> str:
        """The prose so far, tidied; after `close()` it equals `strip_cmd_blocks(full_text)`."""
        count, text = self._prose_cache
        if count != len(self._prose_parts):
            text = tidy_prose(self.raw_prose)
            self._prose_cache = (len(self._prose_parts), text)
        return text

    def feed(self, delta: str) -> list[Event]:
        """Consume the next piece of the message and return what it completed."""
        if self._closed:
            raise RuntimeError(
                "CmdStreamParser.feed() after close(): use a new parser for each message"
            )
        if self._held:
            delta = self._held + delta
            self._held = ""
        # WHY: most deltas, even most of those with a `<`, hold no complete tag. They are
        # taken whole, less a partial tag at their end, after a substring test or two:
        # the general scan costs several times more and is left to deltas that need it.
        # Inside a block any tag matters (a nested open, the close); outside, only an open.
        if "<" in delta:
            if self._depth:
                tag, partial_tags = _TAG_END, _ANY_TAG_PREFIXES
            else:
                tag, partial_tags = OPEN_TAG, _OPEN_PREFIXES
            if tag in delta:
                events: list[Event] = []
                self._scan(delta, events)
                return events
            if delta.endswith(partial_tags):
                cut = delta.rfind("<")
                self._held = delta[cut:]
                delta = delta[:cut]
        if self._depth:
            self._block_parts.append(delta)
            return []
        if not delta:
            return []
        self._prose_parts.append(delta)
        # WHY not ProseDelta(delta): this is the commonest event, and skipping the Python
        # __init__ call makes a prose delta about a tenth cheaper end to end.
        event = _new_instance(ProseDelta)
        _set_prose_text(event, delta)
        return [event]

    def close(self, *, truncated: bool = False) -> list[Event]:
        """End the message: flush held-back text and report a block left open.

        Pass `truncated=True` when the message was cut off (e.g. by the token limit): an
        open block is then always reported as unclosed, never recovered and run.
        """
        if self._closed:
            raise RuntimeError("CmdStreamParser.close() called twice: use a new parser")
        self._closed = True
        events: list[Event] = []
        held, self._held = self._held, ""
        if not self._depth:
            if held:
                self._emit_prose(held, events)
            return events
        self._block_parts.append(held)
        content = "".join(self._block_parts)
        self._block_parts = []
        if truncated:
            events.append(UnclosedBlock(len(self._blocks), content.strip()))
        else:
            self._recover(content, events)
        return events

    def _scan(self, text: str, events: list[Event]) -> None:
        """Run the state machine over `text`: a delta that may hold a tag, or a whole message.

        Held-back text is already prepended. Work is linear in `len(text)`: `str.find` from
        tag to tag, and each character is handed to the prose or to the block at most once.
        """
        depth = self._depth
        start = 0  # first character not yet assigned to prose or to the open block
        search = 0  # where the next tag may begin (past the nested tags inside a block)
        while True:
            if not depth:
                found = text.find(OPEN_TAG, search)
                if found < 0:
                    break
                if found > start:
                    prose = text[start:found]
                    self._prose_parts.append(prose)
                    events.append(ProseDelta(prose))
                depth = 1
                start = search = found + _OPEN_TAG_LEN
                continue
            end = text.find(_TAG_END, search + 1)
            if end < 0:
                break
            search = end + _TAG_END_LEN
            if text[end - 1] == "<":
                depth += 1
            # (`end >= 2`: at 1, text[end - 2] would wrap around to the last character)
            elif text[end - 1] == "/" and end >= 2 and text[end - 2] == "<":
                depth -= 1
                if not depth:
                    parts = self._block_parts
                    parts.append(text[start : end - 2])
                    self._finish_block("".join(parts), events)
                    parts.clear()
                    start = search
        self._depth = depth
        # Hold back a suffix that may still grow into a tag. It cannot overlap the last tag
        # found: that ends with `>`, which no tag prefix holds.
        stop = len(text)
        if text.endswith(_ANY_TAG_PREFIXES if depth else _OPEN_PREFIXES):
            stop = text.rfind("<")
            self._held = text[stop:]
        if stop > start:
            if depth:
                self._block_parts.append(text[start:stop])
            else:
                prose = text[start:stop]
                self._prose_parts.append(prose)
                events.append(ProseDelta(prose))

    def _recover(self, content: str, events: list[Event]) -> None:
        """End a message that stops inside a block, given the block's `content`.

        The rule (module docstring): the block ends at its first `</cmd>` and the rest is
        parsed again from depth zero, where another block that never closes may begin,
        and so on. WHY not re-run the scan on the rest each time: with one such block per
        kilobyte that is quadratic, seconds for a megabyte. Pairing every `<cmd>` with its
        `</cmd>` up front (a stack) and walking the tags once gives the same in linear time.
        """
        starts: list[int] = []  # where each tag begins, in order
        opens: list[bool] = []  # whether it is a `<cmd>`
        partner: list[int] = []  # for a `<cmd>`: the index of the `</cmd>` closing it, or -1
        unpaired: list[int] = []
        for match in _TAG.finditer(content):
            is_open = match.end() - match.start() == len(OPEN_TAG)
            if is_open:
                unpaired.append(len(starts))
            elif unpaired:
                partner[unpaired.pop()] = len(starts)
            starts.append(match.start())
            opens.append(is_open)
            partner.append(-1)
        count = len(starts)
        tag = 0  # the next tag to look at: it only moves forward
        block_start = 0  # where the text of the block that never closed begins
        while True:
            while tag < count and opens[tag]:
                tag += 1
            if tag == count:
                events.append(UnclosedBlock(len(self._blocks), content[block_start:].strip()))
                return
            self._finish_block(content[block_start : starts[tag]], events)
            prose_start = starts[tag] + len(CLOSE_TAG)
            tag += 1
            while True:  # at depth zero: a `</cmd>` is prose, a block that closes is a command
                while tag < count and not opens[tag]:
                    tag += 1
                if tag == count:
                    self._depth = 0
                    self._flush_prose(content, prose_start, events)
                    return
                if starts[tag] > prose_start:
                    self._emit_prose(content[prose_start : starts[tag]], events)
                block_start = starts[tag] + len(OPEN_TAG)
                closing = partner[tag]
                if closing < 0:
                    tag += 1
                    break
                self._finish_block(content[block_start : starts[closing]], events)
                prose_start = starts[closing] + len(CLOSE_TAG)
                tag = closing + 1

    def _flush_prose(self, text: str, start: int, events: list[Event]) -> None:
        """Emit `text[start:]` as the message's last prose, as a stream would have cut it."""
        # WHY split off a trailing open-tag prefix: that is how the same prose arrives when
        # no recovery is needed (the prefix is held back, then flushed by `close()`).
        stop = len(text)
        if text.endswith(_OPEN_PREFIXES, start):
            stop = text.rfind("<")
        if stop > start:
            self._emit_prose(text[start:stop], events)
        if stop < len(text):
            self._emit_prose(text[stop:], events)

    def _emit_prose(self, text: str, events: list[Event]) -> None:
        self._prose_parts.append(text)
        events.append(ProseDelta(text))

    def _finish_block(self, content: str, events: list[Event]) -> None:
        command = content.strip()
        if command:
            events.append(CommandBlock(len(self._blocks), command))
            self._blocks.append(command)


def _parse_whole(text: str) -> CmdStreamParser:
    parser = CmdStreamParser()
    parser.feed(text)
    parser.close()
    return parser


def parse_cmd_blocks(text: str) -> list[str]:
    """The trimmed commands of every complete `<cmd>` block in `text`, in order."""
    return _parse_whole(text).blocks


def strip_cmd_blocks(text: str) -> str:
    """The prose of `text`: blocks removed (an unclosed one to the end), blank runs collapsed."""
    return _parse_whole(text).prose
