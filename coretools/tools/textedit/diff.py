"""Changes as spans of the old and new text, and what is rendered from them: the unified diff (shown to the
user who confirms an edit) and the compact numbered diff (the result the model reads). Working from spans, even a 50 MB file is diffed without splitting it into lines.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from bisect import bisect_right
from itertools import accumulate, islice
from dataclasses import dataclass

DIFF_CONTEXT = 3
MAX_DIFF_LINES = 400
# The result of an edit: at most this many diff lines and characters, and characters shown of one line.
MAX_COMPACT_LINES = 200
MAX_COMPACT_CHARS = 12000
MAX_SHOWN_LINE = 400


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
    return list(accumulate(map(len, lines), initial=0))


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


def compact_diff(old: str, new: str, spans: list[Span], context: int = DIFF_CONTEXT,
                 max_lines: int = MAX_COMPACT_LINES, max_chars: int = MAX_COMPACT_CHARS) -> Rendered:
    """The change as the model sees it: hunk headers, then each line marked ` `, `-` or `+` and numbered with
    its line in the new file (a removed line has no number), `|`, and the text. Lines are rendered lazily and
    stop at `max_lines` lines or `max_chars` characters, with a last line saying how many were left out."""
    groups = _groups(spans, context, "old")
    if not groups:
        return Rendered("")
    width = len(str(max(1, _last_new_line(new, groups[-1], context))))
    return _bounded(_hunks(old, new, groups, context, width), max_lines, max_chars, _total(old, groups, context))


def refined(old: str, new: str, spans: list[Span], max_lines: int = 2_000) -> list[Span]:
    """The spans with the lines they leave equal taken out (a replaced block whose first line stayed the same
    shows that line as context, not as removed and added again). Spans over `max_lines` stay whole."""
    out: list[Span] = []
    for span in spans:
        if span.old_count + span.new_count > max_lines:
            out.append(span)
            continue
        a = old[span.os:span.oe].splitlines(keepends=True)
        b = new[span.ns:span.ne].splitlines(keepends=True)
        a_off, b_off = _offsets(a), _offsets(b)
        if set(a).isdisjoint(b):  # no line left equal: what the matcher would say, without it
            if a or b:
                out.append(Span(span.os, span.os + a_off[-1], span.ns, span.ns + b_off[-1], span.old_line,
                                span.new_line, len(a), len(b)))
            continue
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag != "equal":
                out.append(Span(span.os + a_off[i1], span.os + a_off[i2], span.ns + b_off[j1], span.ns + b_off[j2],
                                span.old_line + i1, span.new_line + j1, i2 - i1, j2 - j1))
    return out


def numbered(text: str, max_lines: int = MAX_COMPACT_LINES, max_chars: int = MAX_COMPACT_CHARS) -> Rendered:
    """A whole (new) text, each line numbered, within the same bounds as `compact_diff`."""
    total = _line_count(text, 0, len(text))
    width = len(str(max(1, total)))
    return _bounded(_marked(text, 0, len(text), "", 1, width), max_lines, max_chars, total)


def _hunks(old: str, new: str, groups: list[list[Span]], context: int, width: int) -> Iterator[str]:
    for group in groups:
        first, last = group[0], group[-1]
        start, lead = _back(old, first.os, context)
        end, trail = _forward(old, last.oe, context)
        old_n = new_n = lead + trail
        for i, span in enumerate(group):
            between = old.count("\n", group[i - 1].oe, span.os) if i else 0
            old_n += between + span.old_count
            new_n += between + span.new_count
        o_start = first.old_line - lead + (1 if old_n else 0)
        n_start = first.new_line - lead + (1 if new_n else 0)
        yield f"@@ -{o_start},{old_n} +{n_start},{new_n} @@"
        number = first.new_line - lead + 1
        yield from _marked(old, start, first.os, " ", number, width)
        for i, span in enumerate(group):
            if i:
                gap_start = group[i - 1].oe
                yield from _marked(old, gap_start, span.os, " ", span.new_line - old.count("\n", gap_start,
                                                                                            span.os) + 1, width)
            yield from _marked(old, span.os, span.oe, "-", 0, width)
            yield from _marked(new, span.ns, span.ne, "+", span.new_line + 1, width)
        tail_number = last.new_line + last.new_count + 1
        yield from _marked(old, last.oe, end, " ", tail_number, width)


def _marked(text: str, a: int, b: int, mark: str, number: int, width: int) -> Iterator[str]:
    """The lines of text[a:b], each `mark`, number (blank when 0), `|`, text; long lines cut short."""
    if a >= b:
        return
    segment = text[a:b]
    lines = segment.split("\n")
    if segment.endswith("\n"):
        lines.pop()
    if "\r" not in segment and max(map(len, lines)) <= MAX_SHOWN_LINE:  # the usual case, one pass in C each
        if number:
            yield from [f"{mark}{str(n).rjust(width)}|{line}" for n, line in enumerate(lines, number)]
        else:
            blank = mark + " " * width + "|"
            yield from [blank + line for line in lines]
        if not segment.endswith("\n") and b == len(text):
            yield "\\ No newline at end of file"
        return
    yield from _marked_lines(text, a, b, mark, number, width)


def _marked_lines(text: str, a: int, b: int, mark: str, number: int, width: int) -> Iterator[str]:
    """`_marked`, line by line: long lines are cut short and a line's final carriage return is not shown."""
    pos = a
    while pos < b:
        nxt = text.find("\n", pos, b)
        stop = b if nxt < 0 else nxt
        line = text[pos:min(stop, pos + MAX_SHOWN_LINE + 1)]
        if line.endswith("\r") and stop - pos <= MAX_SHOWN_LINE + 1:
            line = line[:-1]
        if stop - pos > MAX_SHOWN_LINE:
            line = line[:MAX_SHOWN_LINE] + f"[... {stop - pos - MAX_SHOWN_LINE} more characters]"
        yield f"{mark}{(str(number) if number else '').rjust(width)}|{line}"
        if nxt < 0:
            if b == len(text):
                yield "\\ No newline at end of file"
            return
        number = number + 1 if number else 0
        pos = nxt + 1


def _last_new_line(new: str, group: list[Span], context: int) -> int:
    last = group[-1]
    return last.new_line + last.new_count + context


def _total(old: str, groups: list[list[Span]], context: int) -> int:
    """How many lines `_hunks` yields, without rendering them (end-of-file markers aside)."""
    total = 0
    for group in groups:
        start, _ = _back(old, group[0].os, context)
        end, _ = _forward(old, group[-1].oe, context)
        total += 1 + _line_count(old, start, end) + sum(span.new_count for span in group)
    return total


def _bounded(lines: Iterator[str], max_lines: int, max_chars: int, total: int) -> Rendered:
    """The first lines that fit in `max_lines` lines and `max_chars` characters (each line counted with its
    line break), then, if any were left out, a line saying how many. At most `max_lines` + 1 lines are
    rendered; the sums run in C."""
    out = list(islice(lines, max_lines))
    ends = list(accumulate(map((1).__add__, map(len, out))))  # where each line ends, its line break counted
    fit = bisect_right(ends, max_chars + 1)  # the lines that fit, the last one's line break not counted
    if fit < len(out) or next(lines, None) is not None:
        del out[fit:]
        left = max(total - len(out), 1)
        out.append(f"[... {left} more lines not shown; read_file shows the file as it is now ...]")
        return Rendered("\n".join(out), left)
    return Rendered("\n".join(out))
