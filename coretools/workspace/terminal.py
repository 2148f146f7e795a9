"""The screen of a background command that runs in a pseudo-terminal, as a person would see it.

A program in a terminal writes escape sequences: colours, cursor moves, lines redrawn in place (progress
bars, prompts that erase what was typed). The model must read what they draw, not the sequences, so the
bytes go through a real terminal emulator (`pyte`) on a screen of fixed size (the job's, see
`background.TERMINAL_SIZE`), and only its text comes out, in two parts:

* a line that scrolls off the top of the screen is final: it is handed to `on_line` (the job's log, which
  is the scrollback, bounded by the log cap);
* the lines still on the screen are the live part (`screen_text`), handed over too when the program ends
  (`flush`).

Both are text as `strip_ansi` leaves it: a control the emulator drew as a character (a C1 control, a bidi
override) does not reach the model.

A program that asks the terminal where its cursor is, or what it is, gets the answer a terminal would give
(`answer`), so a line editor that asks does not wait forever. `waiting_for_input` tells a prompt from a
program at work: the cursor rests after text on its line, as after `Name: ` or `>>> `.

A program's output is untrusted input to the emulator: a sequence it cannot parse (`ESC [` and 5,000
digits overflows Python's integer conversion) is dropped, as a terminal drops what it does not understand,
and parsing goes on with the next byte (`_Stream`); anything else the emulator raises loses the rest of that
chunk only, and is counted (`faults`) so the job can say so. The job's thread never dies of it.

pyte (and its character-width tables) takes a few tenths of a second to import: only a job that runs in a
terminal imports this module.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

import pyte

from coretools.sandbox import strip_ansi


_NOT_ASCII = re.compile(r"[^\x20-\x7e]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


@functools.lru_cache(maxsize=4096)
def _drawable(char: str) -> bool:
    """Whether pyte draws `char`: it takes a cell or more, or combines with the one before."""
    width = pyte.screens.wcwidth(char)
    return width > 0 or (width == 0 and unicodedata.combining(char) != 0)


class _Screen(pyte.Screen):
    """A pyte screen that hands each line scrolling off its top to `scrolled`, and a program's queries'
    answers to `answer`."""

    def __init__(self, columns: int, rows: int, scrolled: Callable[[str], None],
                 answer: Callable[[str], None]) -> None:  # fmt: skip
        super().__init__(columns, rows)
        self._scrolled, self._answer = scrolled, answer

    def index(self) -> None:
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0:
            self._scrolled(self.line_text(0))
        super().index()

    def draw(self, data: str) -> None:
        """pyte stops drawing a piece of text at its first character that has no width and does not
        combine (a zero-width space, a bidi control), and the rest of the piece is lost, which hides it from
        the model: such a character is left out instead, a bidi control drawn by name (`<U+202E>`)."""
        if data.isascii():
            super().draw(data)
            return
        start = 0
        for found in _NOT_ASCII.finditer(data):
            char = found.group()
            if _drawable(char):
                continue
            super().draw(data[start : found.start()])
            if _BIDI.match(char):
                super().draw(f"<U+{ord(char):04X}>")
            start = found.end()
        super().draw(data[start:])

    def line_text(self, y: int) -> str:
        line = self.buffer[y]
        return "".join(line[x].data for x in range(self.columns)).rstrip()

    def write_process_input(self, data: str) -> None:
        self._answer(data)


class _Stream(pyte.ByteStream):
    """A pyte stream that drops a sequence its parser raises on, and parses on from the next byte."""

    def _send_to_parser(self, data: str) -> bool | None:
        try:
            return super()._send_to_parser(data)
        except Exception:  # noqa: BLE001 - pyte has reset its parser; what a program writes cannot stop it
            return False


class Terminal:
    """One pseudo-terminal's screen. Not thread-safe: its job's thread feeds it, readers take its lock."""

    def __init__(self, on_line: Callable[[str], None], answer: Callable[[bytes], None], *, rows: int,
                 columns: int) -> None:  # fmt: skip
        self.rows, self.columns = rows, columns
        self._on_line = on_line
        self._screen = _Screen(columns, rows, lambda line: on_line(strip_ansi(line)),
                               lambda text: answer(text.encode()))
        self._stream = _Stream(self._screen)
        self.faults = 0  # chunks of output the emulator failed on, the rest of each lost

    def feed(self, data: bytes) -> None:
        try:
            self._stream.feed(data)
        except Exception:  # noqa: BLE001 - a fresh stream takes the next chunk
            self.faults += 1
            self._stream = _Stream(self._screen)

    def screen_lines(self) -> list[str]:
        """The screen's lines down to the last one with text."""
        lines = [strip_ansi(self._screen.line_text(y)) for y in range(self.rows)]
        last = max((y for y, line in enumerate(lines) if line), default=-1)
        return lines[: last + 1]

    def screen_text(self) -> str:
        return "\n".join(self.screen_lines())

    @property
    def cursor_row(self) -> int:
        """The cursor's line: the lines above it are written, the program may still change it and below."""
        return self._screen.cursor.y

    def waiting_for_input(self) -> bool:
        """The cursor rests right after text on its line: a prompt, as far as the screen can tell."""
        cursor = self._screen.cursor
        before = self._screen.line_text(cursor.y)[: cursor.x]
        return bool(before.strip()) and len(self._screen.line_text(cursor.y)) <= cursor.x

    def flush(self) -> None:
        """Hand the lines still on the screen to `on_line` (the program ended) and clear it."""
        for line in self.screen_lines():
            self._on_line(line)
        self._screen.reset()
