"""Changes as spans of the old and new text, and what is rendered from them: the unified diff and the snippet
of the new text. Working from spans, even a 50 MB file is diffed without splitting it into lines.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

DIFF_CONTEXT = 3
SNIPPET_CONTEXT = 5
MAX_DIFF_LINES = 400
MAX_SNIPPET_LINES = 400


@dataclass
class Span:
    """A changed region, aligned to whole lines: old[os:oe] became new[ns:ne]; text between spans is equal."""

    os: int
    oe: int
    ns: int
    ne: int
    old_line: int = 0  # 0-based line index of `os` in old
    new_line: int = 0
    old_count: int = 0  # lines in old[os:oe]
    new_count: int = 0


def _line_count(text: str, a: int, b: int) -> int:
    if b <= a:
        return 0
    return text.count("\n", a, b) + (0 if text[b - 1] == "\n" else 1)


def _at_line_start(text: str, pos: int) -> bool:
    return pos == 0 or text[pos - 1] == "\n"


def align(old: str, new: str, raw: list[tuple[int, int, int, int]]) -> list[Span]:
    """Turn exact changes (old[s:e] -> new[ns:ne], in order, equal text between them) into whole-line spans,
    merging changes that share a line, and number their lines."""
    spans: list[Span] = []
    for s, e, ns, ne in raw:
        ls = old.rfind("\n", 0, s) + 1
        nls = ls + (ns - s)
        if _at_line_start(old, e) and _at_line_start(new, ne):
            tail = 0
        else:
            nxt = old.find("\n", e)
            tail = (len(old) if nxt < 0 else nxt + 1) - e
        span = Span(ls, e + tail, nls, ne + tail)
        if spans and span.os <= spans[-1].oe:
            spans[-1].oe, spans[-1].ne = span.oe, span.ne
        else:
            spans.append(span)
    line, pos, delta = 0, 0, 0
    for span in spans:
        line += old.count("\n", pos, span.os)
        span.old_line, span.new_line = line, line + delta
        span.old_count = _line_count(old, span.os, span.oe)
        span.new_count = _line_count(new, span.ns, span.ne)
        line += old.count("\n", span.os, span.oe)
        pos = span.oe
        delta += span.new_count - span.old_count
    return spans


def whole_file_spans(old: str, new: str, max_lines: int = 20000) -> list[Span]:
    """Spans for two whole texts (write_file): common leading and trailing lines are skipped; the middle is
    diffed line by line when it is small enough, else reported as one changed block."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a_mid, b_mid = a[head:len(a) - tail], b[head:len(b) - tail]
    if not a_mid and not b_mid:
        return []
    if len(a_mid) + len(b_mid) <= max_lines:
        ops = [op[1:] for op in difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False).get_opcodes()
               if op[0] != "equal"]
    else:
        ops = [(0, len(a_mid), 0, len(b_mid))]
    a_off = _offsets(a)
    b_off = _offsets(b)
    raw = [(a_off[head + i1], a_off[head + i2], b_off[head + j1], b_off[head + j2]) for i1, i2, j1, j2 in ops]
    return align(old, new, raw)


def _offsets(lines: list[str]) -> list[int]:
    out = [0]
    for line in lines:
        out.append(out[-1] + len(line))
    return out


def _back(text: str, pos: int, lines: int) -> tuple[int, int]:
    """Start of the line `lines` lines before the line starting at `pos`, and how many lines that is."""
    count = 0
    while count < lines and pos > 0:
        pos = text.rfind("\n", 0, pos - 1) + 1
        count += 1
    return pos, count


def _forward(text: str, pos: int, lines: int) -> tuple[int, int]:
    count = 0
    while count < lines and pos < len(text):
        nxt = text.find("\n", pos)
        pos = len(text) if nxt < 0 else nxt + 1
        count += 1
    return pos, count


def _groups(spans: list[Span], context: int, side: str) -> list[list[Span]]:
    groups: list[list[Span]] = []
    for span in spans:
        if groups:
            last = groups[-1][-1]
            if side == "old":
                gap = span.old_line - (last.old_line + last.old_count)
            else:
                gap = span.new_line - (last.new_line + last.new_count)
            if gap <= 2 * context:
                groups[-1].append(span)
                continue
        groups.append([span])
    return groups


def _lines(text: str, a: int, b: int) -> list[str]:
    """Display lines of text[a:b] (line breaks removed); a last line without a break is marked."""
    chunk = text[a:b]
    if not chunk:
        return []
    out = [line[:-1] if line.endswith("\r") else line for line in chunk.split("\n")]
    if chunk.endswith("\n"):
        out.pop()
    else:
        out[-1] += "\n\\ No newline at end of file"
    return out


@dataclass
class Rendered:
    text: str
    truncated: int = 0  # lines left out


def _capped(lines: list[str], limit: int, what: str) -> Rendered:
    if len(lines) <= limit:
        return Rendered("\n".join(lines))
    left = len(lines) - limit
    return Rendered("\n".join(lines[:limit]) + f"\n[... {what} truncated: {left} more lines not shown ...]", left)


def unified_diff(old: str, new: str, spans: list[Span], old_label: str, new_label: str,
                 context: int = DIFF_CONTEXT, limit: int = MAX_DIFF_LINES) -> Rendered:
    out = [f"--- {old_label}", f"+++ {new_label}"]
    for group in _groups(spans, context, "old"):
        first, last = group[0], group[-1]
        start, lead = _back(old, first.os, context)
        end, trail = _forward(old, last.oe, context)
        body: list[str] = [" " + line for line in _lines(old, start, first.os)]
        old_n = new_n = lead + trail
        for i, span in enumerate(group):
            if i:
                between = _lines(old, group[i - 1].oe, span.os)
                body += [" " + line for line in between]
                old_n += len(between)
                new_n += len(between)
            body += ["-" + line for line in _lines(old, span.os, span.oe)]
            body += ["+" + line for line in _lines(new, span.ns, span.ne)]
            old_n += span.old_count
            new_n += span.new_count
        body += [" " + line for line in _lines(old, last.oe, end)]
        o_start = first.old_line - lead + (1 if old_n else 0)
        n_start = first.new_line - lead + (1 if new_n else 0)
        out.append(f"@@ -{o_start},{old_n} +{n_start},{new_n} @@")
        out += body
    return _capped(out, limit, "diff")


def snippet(new: str, spans: list[Span], context: int = SNIPPET_CONTEXT, limit: int = MAX_SNIPPET_LINES) -> Rendered:
    """The changed regions of the new text with `context` lines around them; gaps shown as `...`."""
    if not spans:
        return _capped(_plain_lines(new, 0, len(new)), limit, "content")
    out: list[str] = []
    end = 0
    for group in _groups(spans, context, "new"):
        start, _ = _back(new, group[0].ns, context)
        if start > 0:
            out.append("...")
        end, _ = _forward(new, group[-1].ne, context)
        out += _plain_lines(new, start, end)
    if end < len(new):
        out.append("...")
    return _capped(out, limit, "snippet")


def _plain_lines(text: str, a: int, b: int) -> list[str]:
    return [line.replace("\n\\ No newline at end of file", "") for line in _lines(text, a, b)]
