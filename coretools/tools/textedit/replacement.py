"""One replacement of old_string by new_string in a file's text, as replace makes it and edit_file makes each
of its edits: the literal search (any line break matching the file's), and when that fails the near-miss
cascade (`nearmiss`), with the count held to what the caller expects, a repeated edit answered "already
applied", and the result within the edit limit. The text keeps its line endings throughout.

The syntax check of a recovered edit is the caller's (`breaks_message` words its refusal): replace judges
its one edit, edit_file the file once all its edits are made.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from coretools.errors import ErrorKind, ToolError
from coretools.tools.base import check_cancelled
from coretools.tools.textedit.codec import Codec, Newlines, to_lf, with_newline
from coretools.tools.textedit.nearmiss import Recovery, around, closer_to_new, recover, replayed
from coretools.tools.textedit.indent import AmbiguousIndentation
from coretools.tools.textedit.plan import edit_limit, too_big
from coretools.tools.textedit.similar import similar_lines


@dataclass(frozen=True)
class Wording:
    """How a tool's refusals name its own parameters: how to replace every occurrence found (`{found}`:
    their number), and how to split an edit that is too big."""

    every: str
    split: str


@dataclass
class Replacement:
    """The text once replaced: its replacements as (old start, old end, new start, new end), how many,
    the file's size in bytes after it, and the near-miss recovery that placed them (None: literal)."""

    new: str
    raw: list[tuple[int, int, int, int]]
    count: int
    size: int
    recovery: Recovery | None = None
    located: tuple[str, str] | None = None  # how and where a recovery placed it, and its lines (`breaks_message`)


def replace_text(path: str, text: str, codec: Codec, breaks: Newlines, old_string: str, new_string: str,
                 expected: int | None, size: int, wording: Wording) -> Replacement:
    """Replace `old_string` by `new_string` in `text` (the file's decoded text, `size` bytes in `codec`):
    exactly `expected` occurrences, or every one (at least one) when None. Refused with a ToolError saying
    why and what is nearest when old_string is not there nor near, when the count differs, when the edit
    is applied already, when it changes nothing, or when the result is over the edit limit."""
    _refuse_too_many(path, _count(text, old_string, breaks))
    matches, newline_at = _find(text, old_string, breaks)
    if not matches:
        return _recovered(path, text, codec, breaks, old_string, new_string, expected, wording)
    new_lf = to_lf(new_string)
    old_lf = to_lf(old_string)
    if old_lf in new_lf:
        text_lf = to_lf(text) if breaks.crlf else text
        _refuse_applied(path, text_lf, around(text_lf, old_lf, new_lf),
                        "old_string is in the file only inside new_string, which is there already")
    expected = len(matches) if expected is None else expected
    _check_count(path, text, [s for s, _ in matches[:10]], len(matches), expected, "", wording)
    size = _edited_size(size, codec, old_lf, new_lf, matches, newline_at)
    if size > edit_limit():
        raise too_big(path, size, f"replacing {plural(expected, 'occurrence')} of old_string with new_string",
                      wording.split)
    new, raw = _substitute(text, matches, lambda s, e: with_newline(new_lf, newline_at(s, e)))
    new, raw = _keep_final_newline(text, new, raw, breaks.dominant or "\n")
    if new == text:
        raise ToolError(
            f"No changes to apply. The new content is identical to the current content in file: {path}. "
            "Nothing was changed.",
            ErrorKind.EDIT_NO_CHANGE,
        )
    return Replacement(new, raw, len(matches), size)


_SHOWN = 8  # lines of a refused near miss shown

_HOW = {
    "lines": "matched line by line ignoring whitespace",
    "unescaped": "matched once unescaped",
    "tokens": "matched ignoring whitespace between tokens",
    "fuzzy": "matched fuzzily",
}


def _recovered(path: str, text: str, codec: Codec, breaks: Newlines, old_string: str, new_string: str,
               expected: int | None, wording: Wording) -> Replacement:
    """The replacement of an old_string that is not literally in the file: the near-miss cascade decides
    where (or refuses, the file untouched); its replacements take the file's line endings."""
    text_lf = to_lf(text) if breaks.crlf else text
    old_lf, new_lf = to_lf(old_string), to_lf(new_string)
    _refuse_replay(path, text_lf, old_lf, new_lf, expected)
    try:
        found = recover(text_lf, old_lf, new_lf, check=check_cancelled)
    except AmbiguousIndentation as exc:
        raise ToolError(
            f"Cannot apply the edit to {path}: old_string is not literally in the file; it matched ignoring "
            "indentation, but old_string and new_string are indented differently and new_string fits two "
            f"readings: the lines you kept from old_string would go to {exc} (the first line you kept, at "
            "the first place). Nothing was changed. Send old_string exactly as the file has it (read_file), or "
            "new_string in the file's own indentation.",
            ErrorKind.EDIT_NO_OCCURRENCE_FOUND,
        ) from None
    if not found.count:
        _refuse_applied(path, text_lf, replayed(text_lf, old_lf, new_lf, check_cancelled, deletions=True)[:1],
                        "old_string is not in the file, nor anything near it, and new_string (which deletes part of "
                        "it) is there")
        raise ToolError(_no_match_message(path, text, old_string, found.nearest), ErrorKind.EDIT_NO_OCCURRENCE_FOUND)
    expected = found.count if expected is None else expected
    _check_count(path, text_lf, [s for s, _ in found.spans[:10]], found.count, expected, found.strategy, wording)
    if found.strategy == "fuzzy":
        done = [span for span in found.spans if closer_to_new(text_lf, old_lf, new_lf, span)]
        _refuse_applied(path, text_lf, done, "old_string is not in the file; the closest text to it is closer "
                        "still to new_string")
    if breaks.crlf:
        ends = iter(_original_indices(text, [i for span in found.spans for i in span]))
        matches = list(zip(ends, ends))
    else:
        matches = found.spans
    newline_at = _newline_rule(text, breaks)
    reps = {s: with_newline(rep, newline_at(s, e)) for (s, e), rep in zip(matches, found.replacements)}
    new, raw = _substitute(text, matches, lambda s, e: reps[s])
    new, raw = _keep_final_newline(text, new, raw, breaks.dominant or "\n")
    if new == text:
        raise ToolError(
            f"No changes to apply. The new content is identical to the current content in file: {path} "
            f"(old_string {_HOW[found.strategy]}). Nothing was changed.",
            ErrorKind.EDIT_NO_CHANGE,
        )
    size = len(codec.bom) + encoded_len(new, codec)
    if size > edit_limit():
        raise too_big(path, size, f"replacing {plural(expected, 'occurrence')} of old_string with new_string",
                      wording.split)
    return Replacement(new, raw, found.count, size, found, _located(text_lf, found))


def _refuse_replay(path: str, text: str, old: str, new: str, expected: int | None) -> None:
    """Refuse, before any near-miss strategy runs, an edit that is already applied: old_string is not in the
    file and new_string is, as often as the edit asks (`expected`; None: any number). A repeated call would
    otherwise have a near-miss strategy edit whatever else resembles old_string, such as a sibling function."""
    spans = replayed(text, old, new, check=check_cancelled)
    if spans and (expected is None or len(spans) == expected):
        _refuse_applied(path, text, spans, "old_string is not in the file and new_string is already there")


def _refuse_applied(path: str, text: str, spans: list[tuple[int, int]], why: str) -> None:
    """The answer to an edit that is applied already (`spans`: where new_string stands; none: go on)."""
    if not spans:
        return
    where = ", ".join(_line_range(text, s, e) for s, e in spans[:10]) + (", ..." if len(spans) > 10 else "")
    raise ToolError(
        f"Already applied at lines {where} of {path}: {why}, so this edit looks like a repeated call. Nothing "
        "was changed. If you meant to change another place, read the file (read_file) and send that place's "
        "exact text as old_string.",
        ErrorKind.EDIT_NO_CHANGE,
    )


def breaks_message(path: str, located: tuple[str, str], error: str) -> str:
    """The refusal of a recovered edit whose result has a syntax error the file does not have: where the
    near miss was found (`Replacement.located`), what is wrong, and the lines as they are."""
    where, shown = located
    return (
        f"Cannot apply the edit to {path}: old_string is not literally in the file; it {where}, but the edited "
        f"file would have a syntax error it does not have now: {error}. Nothing was changed. Check new_string's "
        "indentation and brackets, or copy the exact lines into old_string:\n" + shown
    )


def _located(text: str, found: Recovery) -> tuple[str, str]:
    """How and where the cascade placed a near miss in `text` (LF), and its first lines, numbered."""
    (start, end), more = found.spans[0], len(found.spans) - 1
    first = _line_numbers(text, [start])[0]
    last = first + text.count("\n", start, max(start, end - 1))
    where = f"lines {first}-{last}" + (f" (and {plural(more, 'other place')})" if more else "")
    rows = text.split("\n", min(last, first + _SHOWN - 1))[first - 1 : min(last, first + _SHOWN - 1)]
    shown = "\n".join(f"{first + k:>6}| {row[:200]}" for k, row in enumerate(rows))
    if last - first + 1 > _SHOWN:
        shown += f"\n{'':>6}  ... ({last - first + 1 - _SHOWN} more lines)"
    return f"{_HOW[found.strategy]} at {where}", shown


def _line_range(text: str, start: int, end: int) -> str:
    first = _line_numbers(text, [start])[0]
    return f"{first}-{first + text.count(chr(10), start, max(start, end - 1))}"


def _check_count(path: str, text: str, starts: list[int], found: int, expected: int, strategy: str,
                 wording: Wording) -> None:
    """Refuse unless exactly `expected` occurrences were found (by the literal search, or by the near-miss
    `strategy` that decided: a looser one is never tried after it)."""
    if found == expected:
        return
    lines = _line_numbers(text, starts)
    where = ", ".join(map(str, lines)) + (", ..." if found > 10 else "")
    how = f" ({_HOW[strategy]}, as it is not literally in the file)" if strategy else ""
    raise ToolError(
        f"Failed to edit, expected {plural(expected, 'occurrence')} but found {found} for old_string{how} "
        f"in file: {path}. Nothing was changed. The occurrences start on line(s) {where}. To replace all of "
        f"them, {wording.every.format(found=found)}; to change only one, include more surrounding "
        "lines in old_string so that it matches exactly once.",
        ErrorKind.EDIT_EXPECTED_OCCURRENCE_MISMATCH,
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _edited_size(file_bytes: int, codec: Codec, old_lf: str, new_lf: str, matches, newline_at) -> int:
    """The file's size in bytes once each match is replaced, counted before anything is built.

    A match is `old_lf` with a "\\r" before some of its line breaks, and a replacement is `new_lf` with a
    "\\r" before each of its line breaks where the file uses CRLF there."""
    cr = len("\r".encode(codec.encoding))
    old_bytes = encoded_len(old_lf, codec)
    new_bytes = encoded_len(new_lf, codec)
    new_breaks = new_lf.count("\n")
    size = file_bytes
    for s, e in matches:
        size -= old_bytes + (e - s - len(old_lf)) * cr
        size += new_bytes + (new_breaks * cr if newline_at(s, e) == "\r\n" else 0)
    return size


def encoded_len(text: str, codec: Codec, chunk: int = 1 << 20) -> int:
    """Bytes of `text` in `codec`, measured a piece at a time so that a huge text is never encoded whole (a
    lone surrogate counts as the bytes it would take; writing it is refused later, with its own error)."""
    if text.isascii() and codec.encoding == "utf-8":
        return len(text)
    return sum(len(text[i : i + chunk].encode(codec.encoding, "surrogatepass")) for i in range(0, len(text), chunk))


def _find_all(text: str, needle: str) -> list[tuple[int, int]]:
    out = []
    pos = text.find(needle)
    while pos >= 0:
        out.append((pos, pos + len(needle)))
        pos = text.find(needle, pos + len(needle))
    return out


MAX_REPLACEMENTS = 1_000_000
"""Occurrences one call replaces at most. Each is held as a pair of offsets (~135 bytes) until the result is
measured: without a bound, a one-character old_string in a file of that character is one pair per byte,
gigabytes for a large file; with it, at most ~135 MB, and a 10 MB file of short lines still has every line
edited in one call."""


def _count(text: str, old_string: str, breaks: Newlines) -> int:
    """How many times `_find` would find `old_string`, counted in C without keeping any of them."""
    old_lf = to_lf(old_string)
    if not breaks.crlf:
        return text.count(old_lf)
    if not breaks.mixed:
        return text.count(old_lf.replace("\n", "\r\n"))
    return text.replace("\r\n", "\n").count(old_lf)


def _refuse_too_many(path: str, count: int) -> None:
    if count > MAX_REPLACEMENTS:
        raise ToolError(
            f"Failed to edit {path}: old_string occurs {count:,} times, and one edit replaces at most "
            f"{MAX_REPLACEMENTS:,} occurrences. Nothing was changed. Make old_string longer so that it names "
            "fewer places, or rewrite the file with write_file.",
            ErrorKind.EDIT_EXPECTED_OCCURRENCE_MISMATCH,
        )


def _find(text: str, old_string: str, breaks: Newlines):
    """Non-overlapping occurrences of `old_string` in `text`, any line break in `old_string` matching the file's
    (LF, CRLF, or either in a mixed file); and, per occurrence, the line break its replacement should use."""
    old_lf = to_lf(old_string)
    newline_at = _newline_rule(text, breaks)
    if not breaks.crlf:
        return _find_all(text, old_lf), newline_at
    if not breaks.mixed:
        return _find_all(text, old_lf.replace("\n", "\r\n")), newline_at
    return _find_either_break(text, old_lf), newline_at


def _newline_rule(text: str, breaks: Newlines):
    """The line break a replacement of text[s:e] uses: the file's, or in a mixed file the first one inside
    the replaced text (the dominant one if it has none)."""
    if not breaks.crlf:
        return lambda s, e: "\n"
    if not breaks.mixed:
        return lambda s, e: "\r\n"
    dominant = breaks.dominant or "\n"

    def newline_at(s: int, e: int) -> str:
        first = text.find("\n", s, e)
        if first < 0:
            return dominant
        return "\r\n" if first > s and text[first - 1] == "\r" else "\n"

    return newline_at


def _find_either_break(text: str, old_lf: str) -> list[tuple[int, int]]:
    """Occurrences of `old_lf` in a text with both kinds of line break, each "\\n" of `old_lf` matching "\\n" or
    "\\r\\n": searched for in the text with its CRLFs made LF, then mapped back. Linear: a regular expression
    with an optional "\\r" per line would take time proportional to the text times `old_lf`, holding the
    interpreter all along."""
    if old_lf.endswith("\r") or "\r\n" in old_lf:
        return _find_with_cr_before_break(text, old_lf)
    spans = _find_all(text.replace("\r\n", "\n"), old_lf)
    ends = iter(_original_indices(text, [i for span in spans for i in span]))
    return list(zip(ends, ends))


def _original_indices(text: str, positions: list[int]) -> list[int]:
    """Map increasing indices of `text.replace("\\r\\n", "\\n")` to indices of `text` (a CRLF's "\\n" maps to
    its "\\r"). Each step counts the CRLFs of a stretch of `text` it has not counted before: linear overall."""
    out: list[int] = []
    o = p = 0  # an index of `text` and the index of the same character in the LF-only text
    for target in positions:
        while p < target:
            end = o + (target - p)
            pairs = text.count("\r\n", o, end)  # each of these is two characters for one
            p += end - o - pairs
            o = end + (1 if text[end - 1] == "\r" and text.startswith("\n", end) else 0)
        out.append(o)
    return out


MAX_CR_SEARCH_WORK = 20_000_000


def _find_with_cr_before_break(text: str, old_lf: str) -> list[tuple[int, int]]:
    """`old_lf` has a lone "\\r" at its end or before one of its line breaks, which may be the first half of one
    of the file's CRLFs (and is gone once they are made LF): matched with a regular expression, whose cost (up
    to the text times `old_lf`) is refused past a bound."""
    if len(text) * len(old_lf) > MAX_CR_SEARCH_WORK:
        raise ToolError(
            "old_string has a carriage return (\\r) at its end or before a line break, and this file mixes CRLF "
            "and LF line endings: such a search is too costly in a file this large. Nothing was changed. Leave "
            "the lone \\r out of old_string (end it at the end of a line, or include the line break itself).",
            ErrorKind.INVALID_TOOL_PARAMS,
        )
    pattern = re.compile("\r?\n".join(re.escape(part) for part in old_lf.split("\n")))
    return [m.span() for m in pattern.finditer(text)]


def _substitute(text: str, matches: list[tuple[int, int]], replacement) -> tuple[str, list[tuple[int, int, int, int]]]:
    pieces: list[str] = []
    raw: list[tuple[int, int, int, int]] = []
    pos = npos = 0
    for s, e in matches:
        pieces.append(text[pos:s])
        npos += s - pos
        rep = replacement(s, e)
        pieces.append(rep)
        raw.append((s, e, npos, npos + len(rep)))
        npos += len(rep)
        pos = e
    pieces.append(text[pos:])
    return "".join(pieces), raw


def _keep_final_newline(old: str, new: str, raw: list, newline: str) -> tuple[str, list]:
    """A file that ended without a line break does not gain one, and one that had it does not lose it, when the
    last replacement reaches the end of the file."""
    if not old or not new or not raw or raw[-1][1] != len(old):
        return new, raw
    s, e, ns, ne = raw[-1]
    if old.endswith("\n") and not new.endswith("\n"):
        return new + newline, [*raw[:-1], (s, e, ns, ne + len(newline))]
    if not old.endswith("\n") and new.endswith("\n"):
        cut = 2 if new.endswith("\r\n") else 1
        if ne - ns >= cut:
            return new[:-cut], [*raw[:-1], (s, e, ns, ne - cut)]
        return new[:-cut], [*raw[:-1], (s - cut, e, ns - cut, ne - cut)]
    return new, raw


def _line_numbers(text: str, positions: list[int]) -> list[int]:
    out, line, last = [], 1, 0
    for pos in positions:
        line += text.count("\n", last, pos)
        last = pos
        out.append(line)
    return out


def _no_match_message(path: str, text: str, old_string: str, nearest: str = "") -> str:
    parts = [(
        f"Failed to edit, 0 occurrences found for old_string in {path}. No edits made: the exact text in old_string "
        "was not found, nor anything near enough to it to edit safely (ignoring indentation and other whitespace, "
        "over-escaping, or a few differing characters in one clearly closest place). Check the text with "
        "read_file and copy it exactly."
    )]
    if nearest:
        parts.append(nearest)
        return "\n".join(parts)
    similar = similar_lines(text, old_string, check=check_cancelled)
    if similar:
        parts.append(similar)
        parts.append("Copy the exact text from these lines into old_string (without the line numbers).")
    else:
        parts.append("Nothing in the file resembles it; use read_file to see the current content.")
    return "\n".join(parts)


