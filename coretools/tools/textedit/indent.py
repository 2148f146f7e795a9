"""Re-indentation of a replacement found by a near-miss match: the caller's `new_string` is written in the
caller's indentation (shifted, or tabs for spaces); what lands in the file takes the file's.

The rule is an offset in columns between the caller's indentation and the file's, learnt from the lines the
match paired up, with the width of a tab learnt from those pairs too (4 when they do not tell). new_string
is not always in old_string's indentation: `frame` re-bases it on the matched block's own when it was sent
in the file's indentation or one of its own, so it is shifted once, never twice, and refuses to guess
between two readings (`AmbiguousIndentation`). Lines of `new_string` the caller kept from `old_string` are
not re-rendered at all: they are copied from the file, so its exact indentation, trailing whitespace and
blank lines survive.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence

DEFAULT_TAB = 4
MAX_MERGE_LINES = 5000  # beyond this many lines a side, every line of new_string is re-rendered (no diff)


class AmbiguousIndentation(ValueError):
    """new_string's indentation fits two readings that put the lines it kept from old_string at different
    columns: nothing is guessed."""

    def __init__(self, chosen: int, other: int) -> None:
        super().__init__(f"column {chosen} or column {other}")
        self.columns = (chosen, other)


def split_indent(line: str) -> tuple[str, str]:
    """(leading spaces and tabs, the rest)."""
    rest = line.lstrip(" \t")
    return line[: len(line) - len(rest)], rest


class Reindenter:
    """Maps an indentation written by the caller to the file's, learnt from (caller, file) indentation pairs
    of lines the match paired up (blank lines excluded)."""

    def __init__(self, pairs: Sequence[tuple[str, str]], file_tabs: bool) -> None:
        self.file_tabs = file_tabs
        self.tab = _tab_width(pairs)
        exact: dict[str, str] = {}
        clash: set[str] = set()
        for caller, real in pairs:
            if exact.setdefault(caller, real) != real:
                clash.add(caller)
        self.exact = {k: v for k, v in exact.items() if k not in clash}
        deltas = Counter(self.cols(real) - self.cols(caller) for caller, real in pairs)
        first = self.cols(pairs[0][1]) - self.cols(pairs[0][0]) if pairs else 0
        top = max(deltas.values(), default=0)
        self.delta = first if deltas.get(first) == top else min(d for d, n in deltas.items() if n == top)

    def cols(self, indent: str) -> int:
        return indent.count("\t") * self.tab + indent.count(" ")

    def __call__(self, indent: str, shift: int | None = None) -> str:
        """The file's indentation for `indent`, written in old_string's frame (`shift` None: the learnt
        mapping), or in a frame `shift` columns off the file's."""
        if shift is None and indent in self.exact:
            return self.exact[indent]
        cols = max(0, self.cols(indent) + (self.delta if shift is None else shift))
        return self.render(cols)

    def render(self, cols: int) -> str:
        if self.file_tabs:
            return "\t" * (cols // self.tab) + " " * (cols % self.tab)
        return " " * cols

    @property
    def shifted(self) -> bool:
        """Whether any paired line's indentation differs between the caller and the file."""
        return any(caller != real for caller, real in self.exact.items()) or self.delta != 0


def _tab_width(pairs: Sequence[tuple[str, str]]) -> int:
    """The columns a tab stands for, solved from two pairs whose tab counts differ by different amounts on
    the two sides: with t tabs and s spaces, caller and file agree up to a constant offset, so
    (dt_p - dt_q) * tab == ds_p - ds_q. The common case (one side all tabs, the other all spaces) needs two
    indentation levels to tell; failing that, DEFAULT_TAB."""
    seen: list[tuple[int, int]] = []
    for caller, real in pairs:
        dt = caller.count("\t") - real.count("\t")
        ds = real.count(" ") - caller.count(" ")
        for pdt, pds in seen:
            if dt != pdt and (ds - pds) % (dt - pdt) == 0 and 0 < (ds - pds) // (dt - pdt) <= 16:
                return (ds - pds) // (dt - pdt)
        if len(seen) < 8 and (dt, ds) not in seen:
            seen.append((dt, ds))
    return DEFAULT_TAB


def file_uses_tabs(window: Sequence[str], text: str) -> bool:
    """Whether the file indents with tabs: as the matched lines do, or, if they are not indented, as most
    of the file does."""
    for line in window:
        if line[:1] == "\t":
            return True
        if line[:1] == " " and line.strip():
            return False
    return text.count("\n\t") > text.count("\n ")


def merge_lines(caller_old: Sequence[str], caller_new: Sequence[str], window: Sequence[str], text: str) -> list[str]:
    """The lines to write for `caller_new`, given that `caller_old` matched the file's lines `window`
    (paired line for line): lines the caller kept from old_string are the file's own lines, the others are
    re-indented to the file's indentation (see `frame`), lose trailing whitespace if the file's lines have
    none, and blank lines look like the file's blank lines."""
    pairs = [(split_indent(c)[0], split_indent(f)[0]) for c, f in zip(caller_old, window) if c.strip() and f.strip()]
    reindent = Reindenter(pairs, file_uses_tabs(window, text))
    blanks = Counter(line for line in window if not line.strip())
    blank = blanks.most_common(1)[0][0] if blanks else ""
    strip_trailing = not any(line.strip() and line != line.rstrip() for line in window)
    big = len(caller_old) > MAX_MERGE_LINES or len(caller_new) > MAX_MERGE_LINES
    shift = None if big else frame(caller_old, caller_new, window, reindent)

    def render(line: str) -> str:
        if not line.strip():
            return blank
        indent, rest = split_indent(line)
        return reindent(indent, shift) + (rest.rstrip() if strip_trailing else rest)

    if big:
        return [render(line) for line in caller_new]
    if shift is not None:
        out = [render(line) for line in caller_new]
        for i, j in _anchors(caller_old, caller_new):
            if not caller_new[j].strip() or _cols_of(out[j], reindent) == _cols_of(window[i], reindent):
                out[j] = window[i]
        return out
    out: list[str] = []
    ops = difflib.SequenceMatcher(None, list(caller_old), list(caller_new), autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            out.extend(window[i1:i2])
        else:
            out.extend(render(line) for line in caller_new[j1:j2])
    return out


def frame(caller_old: Sequence[str], caller_new: Sequence[str], window: Sequence[str],
          reindent: Reindenter) -> int | None:
    """Which indentation `caller_new` is written in: None when it is old_string's (the learnt mapping applies),
    else the columns to add to it. Models often send old_string dedented while new_string already has the
    file's indentation, or the other way round, or each off by its own amount; shifting new_string by
    old_string's offset regardless puts it too deep or too shallow.

    The candidates: old_string's frame; the file's own (no shift); new_string re-based so that its first line
    lands where the matched block's first line is (when the two first lines are the same line of code), or
    so that its least indented line lands at the block's base. Each is scored by how many lines new_string
    kept from old_string (the same text, ignoring indentation) it puts at the file's indentation of that
    line, then by whether new_string's base lands on the block's base; a candidate other than old_string's
    frame must beat it, and may not put any line shallower than the block's base.

    One reading is never chosen silently over another that puts more of the kept lines where they are in the
    file: a block whose first line was deleted and whose other lines moved by one step (unwrapped, in
    old_string's frame) looks just like the same lines sent in a frame of their own. That raises
    `AmbiguousIndentation`."""
    anchors = [(i, j) for i, j in _anchors(caller_old, caller_new) if caller_new[j].strip()]
    new_indents = [split_indent(line)[0] for line in caller_new if line.strip()]
    window_indents = [split_indent(line)[0] for line in window if line.strip()]
    if not new_indents or not window_indents:
        return None
    cols = reindent.cols
    base = min(map(cols, window_indents))
    new_base = min(map(cols, new_indents))

    def score(shift: int | None) -> tuple[int, bool]:
        kept = sum(1 for i, j in anchors
                   if cols(reindent(split_indent(caller_new[j])[0], shift)) == cols(split_indent(window[i])[0]))
        return kept, min(cols(reindent(ind, shift)) for ind in new_indents) == base

    best, best_score = None, score(None)
    candidates = [0, base - new_base]
    first_old = next((line for line in caller_old if line.strip()), "")
    first_new = next((line for line in caller_new if line.strip()), "")
    first_file = next((line for line in window if line.strip()), "")
    if first_old.strip() == first_new.strip():
        candidates.insert(1, cols(split_indent(first_file)[0]) - cols(split_indent(first_new)[0]))
    for shift in candidates:
        if new_base + shift < base:
            continue
        got = score(shift)
        if got > best_score:
            best, best_score = shift, got
    offsets = Counter(cols(split_indent(window[i])[0]) - cols(split_indent(caller_new[j])[0]) for i, j in anchors)
    if offsets:
        other = offsets.most_common(1)[0][0]
        if new_base + other >= base and score(other)[0] > best_score[0]:
            first = split_indent(caller_new[anchors[0][1]])[0]
            raise AmbiguousIndentation(cols(reindent(first, best)), cols(reindent(first, other)))
    return best


def _cols_of(line: str, reindent: Reindenter) -> int:
    return reindent.cols(split_indent(line)[0])


def _anchors(caller_old: Sequence[str], caller_new: Sequence[str]) -> list[tuple[int, int]]:
    """(i, j): line j of new_string is line i of old_string kept, ignoring indentation."""
    a = [line.strip() for line in caller_old]
    b = [line.strip() for line in caller_new]
    out = []
    for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        out.extend((block.a + d, block.b + d) for d in range(block.size))
    return out


def indentation_differs(caller_old: Sequence[str], window: Sequence[str]) -> bool:
    return any(split_indent(c)[0] != split_indent(f)[0] for c, f in zip(caller_old, window) if c.strip())
