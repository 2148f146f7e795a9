"""What search_file_content searches and what it keeps of the results, shared by both engines: the targets,
the request, the lines one file contributes (matches, and context around them), the collector of every
file's, and how one line is shown (whole, or as excerpts around its matches when it is very long).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coretools.sandbox import IgnoreOptions

if TYPE_CHECKING:
    from coretools.sandbox import Workspace

SEARCH_OPTIONS = IgnoreOptions(git=True, gemini=True, defaults=True)
NO_IGNORE = IgnoreOptions(git=False, gemini=False, defaults=False)

LINE_CHARS = 2000  # a line up to this long is shown whole
EXCERPT_BYTES = 500  # one excerpt of a longer line (bytes, so at most this many characters)
MAX_EXCERPTS = 4  # excerpts shown per line; further matches on it are counted
MAX_CONTEXT = 1000  # context lines asked for on either side are capped at this


@dataclass
class Target:
    """One opened place to search: a directory (walked) or a single file."""

    index: int  # order among the targets (multi-root searches)
    root: int
    rel: str
    path: str  # absolute, as shown
    fd: int  # the gateway's descriptor for it (kept open while searching)
    is_dir: bool
    display_prefix: str  # prepended to paths relative to the target when showing them


@dataclass
class Request:
    pattern: str
    include: str | None  # normalised: a leading `./` removed
    cap: int  # matching lines kept in all (files, with `names_only`)
    timeout: float
    allow_protected: bool
    ignore: IgnoreOptions = SEARCH_OPTIONS
    case_sensitive: bool = False
    fixed_strings: bool = False
    before: int = 0
    after: int = 0
    exclude: str | None = None
    per_file: int | None = None  # matching lines kept per file
    names_only: bool = False
    text_chars: int = 50_000  # characters of matches and names the answer may hold (from the result budget)

    @property
    def file_limit(self) -> int:
        """Matching lines worth keeping the text of, in one file."""
        if self.names_only:
            return 0
        return min(self.cap, self.per_file) if self.per_file else self.cap


@dataclass
class Job:
    """One search as an engine receives it: where, what, where to put results, and how to report."""

    ws: Workspace
    targets: list[Target]
    req: Request
    out: Collector
    check: Callable[[], None]  # raises when the call was cancelled
    progress: Callable[[Collector], None]


class FileLines:
    """The lines one file contributes: every match counted, the first `limit` kept with their text, and the
    lines within `before`/`after` of a kept one as context. Lines come in order; a line that is not kept
    (no match, a match past the limit, an excluded one) may still be context. Only the last `before`
    candidates wait for a match to follow, so memory stays bounded by what is shown.

    An engine may `defer` a kept match: it holds the engine's record of the line instead of its text, to be
    checked and shown only if the collector still keeps the line at the end (`Collector.confirmed`)."""

    def __init__(self, limit: int, before: int = 0, after: int = 0) -> None:
        self.limit, self.before, self.after = limit, before, after
        self.count = 0
        self.lines: list = []  # (number, text), or a deferred record
        self.deferred = 0
        self.context: dict[int, str] = {}
        self._waiting: deque[tuple[int, Callable[[], str]]] = deque(maxlen=before or 1)
        self._last: int | None = None

    @property
    def wants_text(self) -> bool:
        return len(self.lines) < self.limit

    @property
    def wants_context(self) -> bool:
        return bool(self.before or self.after) and (self.wants_text or self._last is not None)

    def match(self, number: int, text: Callable[[], str], keep: bool = True) -> None:
        self.count += 1
        if not (keep and self.wants_text):
            self.other(number, text)
            return
        self.lines.append((number, text()))
        self._last = number
        for waiting, shown in self._waiting:
            if waiting >= number - self.before:
                self.context[waiting] = shown()
        self._waiting.clear()

    def defer(self, records: list) -> None:
        """Matches known by the engine's `records` only (no context is asked for): counted, and kept as far
        as `limit` allows."""
        self.count += len(records)
        room = self.limit - len(self.lines)
        if room > 0:
            kept = records[:room]
            self.lines += kept
            self.deferred += len(kept)

    def other(self, number: int, text: Callable[[], str]) -> None:
        """A line that is not a kept match: context if it is near one."""
        if self._last is not None and number <= self._last + self.after:
            self.context[number] = text()
        elif self.before and self.wants_text:
            self._waiting.append((number, text))


class Collector:
    """Counts every match, keeps the first `cap` matching lines in (target, path, line) order (with
    `names_only`, the first `cap` files)."""

    def __init__(self, cap: int, names_only: bool = False) -> None:
        self.cap = cap
        self.names_only = names_only
        self.total_matches = 0
        self.total_files = 0
        self.kept: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self.context: dict[tuple[int, str], dict[int, str]] = {}
        self.counts: dict[tuple[int, str], int] = {}  # matches in each kept file
        self._order: list[tuple[int, str]] = []  # the keys of `kept`, sorted
        self.stored = 0
        self.stopped: str | None = None
        self.unverified_files = 0  # files rg reported that the gateway's copy did not (wholly) confirm
        self.skipped: list[str] = []  # what a bound left out of the search, each said as a phrase
        self.skipped_files = 0  # of them, files ripgrep could not search within its memory bound
        self.pending = 0  # matches seen in the file being read, not committed yet (for progress reports)

    def could_keep(self, key: tuple[int, str]) -> bool:
        return self.stored < self.cap or key < self._order[-1]

    def commit(self, key: tuple[int, str], found: FileLines) -> None:
        if found.count <= 0:
            return
        self.total_matches += found.count
        self.total_files += 1
        if not (found.lines or self.names_only) or not self.could_keep(key):
            return
        self.kept[key] = found.lines if found.deferred else sorted(found.lines)
        self.counts[key] = found.count
        if found.context:
            self.context[key] = found.context
        bisect.insort(self._order, key)
        self.stored += len(found.lines) or 1
        while self.stored > self.cap:
            self._drop_last(self.stored - self.cap)

    def count(self, matches: int) -> None:
        """A file none of whose lines could be kept when it was committed (`could_keep` False): its count."""
        if matches > 0:
            self.total_matches += matches
            self.total_files += 1

    def confirmed(self, key: tuple[int, str], lines: list[tuple[int, str]], failed: int) -> None:
        """`key`'s kept lines once its deferred ones are checked: `lines`, in order, without the `failed` ones
        that did not confirm. A file with such a line counts only its confirmed lines."""
        if not failed:
            self.kept[key] = lines
            return
        self.stored -= failed
        self.total_matches -= self.counts[key] - len(lines)
        if lines:
            self.kept[key] = lines
            self.counts[key] = len(lines)
            return
        self.total_files -= 1
        del self.kept[key], self.counts[key]
        self.context.pop(key, None)
        self._order.remove(key)

    def _drop_last(self, excess: int) -> None:
        """Drop up to `excess` of the lines (or the name) of the last file kept, the file once none is left."""
        last = self._order[-1]
        lines = self.kept[last]
        if lines and not self.names_only and excess < len(lines):
            del lines[-excess:]
            self.stored -= excess
            return
        self.stored -= len(lines) if lines and not self.names_only else 1
        del self.kept[last]
        self.counts.pop(last, None)
        self.context.pop(last, None)
        self._order.pop()

    def groups(self) -> list[tuple[str, list[tuple[int, str]]]]:
        return [(path, self.kept[(index, path)]) for index, path in self._order]

    def keys(self) -> list[tuple[int, str]]:
        return list(self._order)


# -- one line as shown --------------------------------------------------------------------------------------


def show_line(data: bytes, spans: Callable[[bytes], list[tuple[int, int]]] | None = None) -> str:
    """A line (UTF-8 bytes, its end of line included or not) as shown: whole and right-trimmed up to
    `LINE_CHARS` characters; longer (minified files), as excerpts of at most `EXCERPT_BYTES` centred on the
    matches `spans(line)` finds (the start of the line when it finds none), the omitted parts marked with
    their length."""
    data = data.rstrip(b"\r\n")
    if len(data) <= LINE_CHARS:
        return data.decode("utf-8", "surrogateescape").rstrip()
    text = data.decode("utf-8", "surrogateescape").rstrip()
    if len(text) <= LINE_CHARS:
        return text
    data = data.rstrip()
    return excerpts(data, spans(data) if spans is not None else [])


def excerpts(data: bytes, spans: list[tuple[int, int]]) -> str:
    """`data` shown as at most `MAX_EXCERPTS` windows around the byte ranges `spans` (sorted, not
    overlapping), each at most `EXCERPT_BYTES` and cut only between characters, with `…[N chars]…` where
    text is left out and the number of matches no window shows."""
    size = len(data)
    windows: list[tuple[int, int]] = []
    rest = 0
    for start, end in spans:
        floor = windows[-1][1] if windows else 0
        if end <= floor:
            continue  # shown by the window before
        if len(windows) == MAX_EXCERPTS:
            rest += 1
            continue
        windows.append(_window(data, max(start, floor), end, floor))
    if not windows:
        windows.append((0, _char_start(data, min(size, EXCERPT_BYTES))))
    out: list[str] = []
    pos = 0
    for start, end in windows:
        if start > pos:
            out.append(_omitted(data[pos:start]))
        out.append(data[start:end].decode("utf-8", "surrogateescape"))
        pos = end
    if pos < size:
        out.append(_omitted(data[pos:], rest))
    return "".join(out)


def _window(data: bytes, start: int, end: int, floor: int) -> tuple[int, int]:
    """At most `EXCERPT_BYTES` around the match `start:end`, centred on it, from `floor` on."""
    width = EXCERPT_BYTES
    if end - start >= width:
        lo, hi = start, start + width
    else:
        lo = max(floor, start - (width - (end - start)) // 2)
        hi = min(len(data), lo + width)
        lo = max(floor, hi - width)
    lo = _char_end(data, lo)
    hi = _char_start(data, hi)
    return lo, max(lo, hi)


def _char_start(data: bytes, pos: int) -> int:
    """`pos`, moved back to the start of the UTF-8 character it falls in (a character has at most three
    continuation bytes; a longer run is invalid bytes, each shown on its own)."""
    for _ in range(3):
        if not (0 < pos < len(data) and 0x80 <= data[pos] < 0xC0):
            break
        pos -= 1
    return pos


def _char_end(data: bytes, pos: int) -> int:
    """`pos`, moved on past the rest of the UTF-8 character it falls in."""
    for _ in range(3):
        if not (0 < pos < len(data) and 0x80 <= data[pos] < 0xC0):
            break
        pos += 1
    return pos


def _omitted(part: bytes, matches: int = 0) -> str:
    chars = len(part.decode("utf-8", "surrogateescape"))
    more = f"; {matches} more match{'es' if matches != 1 else ''} on this line" if matches else ""
    return f"…[{chars:,} chars{more}]…"

