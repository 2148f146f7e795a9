"""Re-indentation of a replacement found by a near-miss match: the caller's `new_string` is written in the
caller's indentation (shifted, or tabs for spaces); what lands in the file takes the file's.

The rule is an offset in columns between the caller's indentation and the file's, learnt from the lines the
match paired up, with the width of a tab learnt from those pairs too (4 when they do not tell). Lines of
`new_string` the caller left as they were in `old_string` are not re-rendered at all: they are copied from the
file, so its exact indentation, trailing whitespace and blank lines survive.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence

DEFAULT_TAB = 4
MAX_MERGE_LINES = 5000  # beyond this many lines a side, every line of new_string is re-rendered (no diff)


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

    def __call__(self, indent: str) -> str:
        if indent in self.exact:
            return self.exact[indent]
        cols = max(0, self.cols(indent) + self.delta)
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
    re-indented to the file's indentation, lose trailing whitespace if the file's lines have none, and blank
    lines look like the file's blank lines."""
    pairs = [(split_indent(c)[0], split_indent(f)[0]) for c, f in zip(caller_old, window) if c.strip() and f.strip()]
    reindent = Reindenter(pairs, file_uses_tabs(window, text))
    blanks = Counter(line for line in window if not line.strip())
    blank = blanks.most_common(1)[0][0] if blanks else ""
    strip_trailing = not any(line.strip() and line != line.rstrip() for line in window)

    def render(line: str) -> str:
        if not line.strip():
            return blank
        indent, rest = split_indent(line)
        return reindent(indent) + (rest.rstrip() if strip_trailing else rest)

    if len(caller_old) > MAX_MERGE_LINES or len(caller_new) > MAX_MERGE_LINES:
        return [render(line) for line in caller_new]
    out: list[str] = []
    ops = difflib.SequenceMatcher(None, list(caller_old), list(caller_new), autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            out.extend(window[i1:i2])
        else:
            out.extend(render(line) for line in caller_new[j1:j2])
    return out


def indentation_differs(caller_old: Sequence[str], window: Sequence[str]) -> bool:
    return any(split_indent(c)[0] != split_indent(f)[0] for c, f in zip(caller_old, window) if c.strip())
