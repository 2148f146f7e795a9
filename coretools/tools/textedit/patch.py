"""The patch format of the Codex CLI's apply_patch, read and located: what the patch says to each file, and
where in each file every hunk lands, decided before any file changes.

The grammar (lenient as Codex's own parser is: markers may carry surrounding whitespace, the patch may come
wrapped in a shell heredoc, the first hunk of a file may omit its `@@`):

    *** Begin Patch
    *** Add File: <path>            then lines '+<text>': the new file's lines
    *** Delete File: <path>
    *** Update File: <path>         then optionally '*** Move to: <path>', then hunks:
    @@ [<a line of the file above the hunk, e.g. a def or class line>]
     <context>  -<removed>  +<added>    (an empty line is an empty context line)
    *** End of File                 optional: the hunk's old lines end the file
    *** End Patch

A hunk is found from where the previous hunk of its file ended (after its `@@` line, when it names one):
literally first, the first match winning as in Codex; then by the near-miss rules of `replace` that apply to
whole lines, in order: trailing whitespace, indentation (the added lines re-based on the file's indentation,
see `indent`, unless the removed lines are the file's as written: then only the context slipped), typographic
punctuation (dashes, quotes, odd spaces), and blank lines the patch left out (refused where added lines meet
them: they could go on either side). A near miss is never a guess between two texts: its matches in reach
must all be the same lines of the file (then the first is taken, as the literal match would be). Context lines
keep the file's own text.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from coretools.errors import ErrorKind, ToolError
from coretools.tools.textedit.indent import AmbiguousIndentation, merge_lines
from coretools.tools.textedit.similar import similar_lines

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File:", "*** Delete File:", "*** Update File:", "*** Move to:"
END_OF_FILE = "*** End of File"
MAX_PATCH_CHARS = 4 * 1024 * 1024
MAX_PATCH_FILES = 200
MAX_PATCH_HUNKS = 2000
MAX_SAME_HITS = 50  # near-miss matches compared (all the same text in the file: the first is taken)
_HEREDOC = re.compile(r"""^(?:apply_patch\s*)?<<-?\s*(['"]?)(\w+)\1\s*$""")
_RANGES = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@(?: ?(.*))?$")  # a unified diff's "@@ -1,3 +1,4 @@"
_PUNCTUATION = str.maketrans({
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
})


@dataclass
class Hunk:
    """One `@@` section of an Update File: its lines as (mark, text), mark one of ' ', '-', '+'."""

    number: int  # 1-based among its file's hunks
    line: int  # where it starts in the patch, 1-based
    header: str  # the text after `@@` ('' when none)
    ops: list[tuple[str, str]] = field(default_factory=list)
    at_end: bool = False

    @property
    def old(self) -> list[str]:
        return [text for mark, text in self.ops if mark != "+"]

    @property
    def new(self) -> list[str]:
        return [text for mark, text in self.ops if mark != "-"]

    def title(self) -> str:
        return f"hunk {self.number} (@@ {self.header})" if self.header else f"hunk {self.number} (@@)"


@dataclass
class FileOp:
    """What the patch does to one file."""

    kind: str  # "add", "delete" or "update"
    path: str
    line: int
    lines: list[str] = field(default_factory=list)  # an added file's lines
    move_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


def parse(patch: str) -> list[FileOp]:
    """The file operations of `patch`, or a ToolError naming the patch line that is wrong and why."""
    if len(patch) > MAX_PATCH_CHARS:
        raise _invalid(f"the patch is {len(patch):,} characters, more than the {MAX_PATCH_CHARS:,} one call takes; "
                       "split it into several apply_patch calls (a few files each)")
    lines = [line[:-1] if line.endswith("\r") else line for line in patch.strip().split("\n")]
    lines = _unwrapped(lines)
    if not lines or lines[0].strip() != BEGIN:
        raise _invalid(f"the first line must be '{BEGIN}'")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise _invalid(f"the last line must be '{END}' (was the patch cut short?)")
    ops: list[FileOp] = []
    i, stop = 1, len(lines) - 1
    while i < stop:
        head = lines[i].strip()
        if not head:
            i += 1
            continue
        if head.startswith(ADD):
            op = FileOp("add", _path(head, ADD, i), i + 1)
            i += 1
            while i < stop and lines[i].startswith("+"):
                op.lines.append(lines[i][1:])
                i += 1
        elif head.startswith(DELETE):
            op = FileOp("delete", _path(head, DELETE, i), i + 1)
            i += 1
        elif head.startswith(UPDATE):
            op = FileOp("update", _path(head, UPDATE, i), i + 1)
            i += 1
            if i < stop and lines[i].strip().startswith(MOVE):
                op.move_to = _path(lines[i].strip(), MOVE, i)
                i += 1
            i = _hunks(lines, i, stop, op)
        else:
            raise _invalid(f"line {i + 1}: {_short(lines[i])!r} is not a file header; each file starts with "
                           f"'{ADD} <path>', '{DELETE} <path>' or '{UPDATE} <path>'")
        ops.append(op)
        if len(ops) > MAX_PATCH_FILES:
            raise _invalid(f"the patch changes more than {MAX_PATCH_FILES} files, the most one call takes; split it")
    if not ops:
        raise _invalid("the patch changes no file")
    if sum(len(op.hunks) for op in ops) > MAX_PATCH_HUNKS:
        raise _invalid(f"the patch has more than {MAX_PATCH_HUNKS} hunks, the most one call takes; split it")
    return ops


def _unwrapped(lines: list[str]) -> list[str]:
    """The patch without a heredoc around it (`<<'EOF'` ... `EOF`), as models write it for a shell."""
    if len(lines) >= 4 and (m := _HEREDOC.match(lines[0].strip())) and lines[-1].strip() == m.group(2):
        return lines[1:-1]
    return lines


def _hunks(lines: list[str], i: int, stop: int, op: FileOp) -> int:
    """Read the hunks of an Update File from line `i`; returns the line after them."""
    while i < stop:
        line = lines[i]
        if not line.strip() and not op.hunks:
            i += 1
            continue
        if line.startswith("***") and line.strip() != END_OF_FILE:
            break
        if line.startswith("@@"):
            header = line[2:].strip()
            if (ranges := _RANGES.match(header)) is not None:
                header = (ranges.group(1) or "").strip()
            hunk, i = Hunk(len(op.hunks) + 1, i + 1, header), i + 1
        elif not op.hunks and line[:1] in (" ", "-", "+"):
            hunk = Hunk(1, i + 1, "")
        else:
            where = f"{UPDATE} {op.path}"
            raise _invalid(f"line {i + 1}: {_short(line)!r} in {where} is neither a hunk line (starting with ' ', '-' "
                           "or '+') nor an '@@' line that starts a hunk")
        while i < stop:
            line = lines[i]
            if line.strip() == END_OF_FILE:
                hunk.at_end, i = True, i + 1
                break
            if line.startswith(("@@", "***")):
                break
            if line == "":
                hunk.ops.append((" ", ""))
            elif line[0] in (" ", "-", "+"):
                hunk.ops.append((line[0], line[1:]))
            else:
                raise _invalid(f"line {i + 1}: {_short(line)!r} in {hunk.title()} of {op.path} does not start with "
                               "' ' (context), '-' (removed) or '+' (added)")
            i += 1
        while hunk.ops and hunk.ops[-1] == (" ", "") and not hunk.at_end:
            hunk.ops.pop()  # blank lines that only separate this hunk from the next header
        if not hunk.ops:
            raise _invalid(f"line {hunk.line}: {hunk.title()} of {op.path} has no lines")
        op.hunks.append(hunk)
    if not op.hunks and op.move_to is None:
        raise _invalid(f"line {op.line}: {UPDATE} {op.path} has no hunk")
    return i


def _path(head: str, marker: str, i: int) -> str:
    path = head[len(marker):].strip()
    if not path:
        raise _invalid(f"line {i + 1}: '{marker}' names no path")
    return path


def _invalid(why: str) -> ToolError:
    return ToolError(f"Invalid patch: {why}. Nothing was changed.", ErrorKind.INVALID_TOOL_PARAMS)


def _short(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[:limit] + "..."


# -- locating ----------------------------------------------------------------------------------------------


@dataclass
class Placed:
    """Where a hunk landed: the file's lines [start, start + count) become `lines`; `rule` is the near-miss
    rule that found it ('' for a literal match)."""

    start: int
    count: int
    lines: list[str]
    rule: str = ""


class _NotFound(Exception):
    """A hunk that is not in the file (or only ambiguously): the refusal's text, without the file's name
    (`apply_hunks` turns it into the ToolError)."""


def _rstrip(line: str) -> str:
    return line.rstrip()


def _strip(line: str) -> str:
    return line.strip()


def _plain(line: str) -> str:
    return line.translate(_PUNCTUATION).strip()


_RULES = (("trailing whitespace", _rstrip), ("indentation", _strip), ("typographic punctuation", _plain))


class _Doc:
    """The file's lines (LF text, without its final line break) and, made once each, their keys under each
    near-miss rule."""

    def __init__(self, text: str) -> None:
        self.text = text
        body = text[:-1] if text.endswith("\n") else text
        self.lines = body.split("\n") if body else []
        self._keyed: dict[str, list[str]] = {}
        self._filled: tuple[list[int], list[str]] | None = None

    def keyed(self, rule: str, key: Callable[[str], str]) -> list[str]:
        if rule not in self._keyed:
            self._keyed[rule] = [key(line) for line in self.lines]
        return self._keyed[rule]

    def filled(self) -> tuple[list[int], list[str]]:
        """The numbers of the lines that are not blank, and those lines without trailing whitespace."""
        if self._filled is None:
            numbers = [i for i, line in enumerate(self.lines) if line.strip()]
            self._filled = numbers, [self.lines[i].rstrip() for i in numbers]
        return self._filled


def _find(seq: list[str], pattern: list[str], start: int, stop: int) -> Iterator[int]:
    """Where `pattern` starts in `seq`, at `start` up to `stop` (exclusive), in order (each candidate found by
    `list.index` on the first line, so a miss costs one scan at C speed)."""
    first, n, i = pattern[0], len(pattern), start
    while i < stop:
        try:
            i = seq.index(first, i, stop)
        except ValueError:
            return
        if seq[i:i + n] == pattern:
            yield i
        i += 1


def apply_hunks(text: str, hunks: list[Hunk], shown: str,
                check: Callable[[], None] | None = None) -> tuple[str, list[Placed]]:
    """`text` (LF), the file `shown`, with every hunk applied, and where each landed; a ToolError names the
    first hunk that is not found and shows the nearest text. The text keeps its final line break, or its
    lack of one. `check` runs before each hunk (it may raise to cancel)."""
    try:
        return _applied(text, hunks, check)
    except _NotFound as exc:
        raise ToolError(f"Patch not applied: in {shown}, {exc}\nNothing was changed (no file of the patch).",
                        ErrorKind.EDIT_NO_OCCURRENCE_FOUND) from None


def _applied(text: str, hunks: list[Hunk], check: Callable[[], None] | None) -> tuple[str, list[Placed]]:
    doc = _Doc(text)
    final = "\n" if text.endswith("\n") else ""
    placed: list[Placed] = []
    at = 0
    for hunk in hunks:
        if check is not None:
            check()
        found = _place(doc, hunk, at)
        if placed and found.start < placed[-1].start + placed[-1].count:
            raise _NotFound(f"{hunk.title()} overlaps the hunk before it: hunks must follow the file's order.")
        placed.append(found)
        at = found.start + found.count
    out = list(doc.lines)
    for p in reversed(placed):
        out[p.start:p.start + p.count] = p.lines
    new = "\n".join(out)
    return (new + final if out or final else new), placed


def _place(doc: _Doc, hunk: Hunk, at: int) -> Placed:
    """Where `hunk` lands in the file, searching from line `at`."""
    lines, text = doc.lines, doc.text
    if hunk.header:
        anchor = _seek(doc, [hunk.header], at, False, f"{hunk.title()}: the text of its @@ line is")
        if anchor is None:
            raise _NotFound(f"{hunk.title()}: the line {_short(hunk.header)!r} named after @@ is not in the file"
                           + (f" after line {at}" if at else "") + _nearest(text, hunk.header))
        at = anchor[0] + 1
    old, new = hunk.old, hunk.new
    if not old:  # only additions: after the @@ line, or at the end of the file
        where = len(lines) if hunk.at_end or not hunk.header else at
        return Placed(where, 0, new)
    found = _seek(doc, old, at, hunk.at_end, f"{hunk.title()}: its old lines (context and '-' lines) are")
    if found is None:
        found = _without_blanks(doc, hunk, at)
        if found is not None:
            return found
        raise _NotFound(_missing(lines, hunk, at, text))
    start, rule = found
    window = lines[start:start + len(old)]
    if rule == "indentation" and not _removed_as_written(hunk, window):
        try:
            return Placed(start, len(old), merge_lines(old, new, window, text), rule)
        except AmbiguousIndentation:
            raise _NotFound(f"{hunk.title()}: its lines match lines {start + 1}-{start + len(old)} only with other "
                           "indentation, and the added lines fit two indentations equally well; send the hunk "
                           "with the file's indentation.") from None
    if rule == "indentation":
        rule = "the indentation of its context lines"
    return Placed(start, len(old), _with_context(hunk, window), rule)


def _removed_as_written(hunk: Hunk, window: list[str]) -> bool:
    """Whether the hunk's removed lines (it has some) are the file's lines as they are, trailing whitespace
    aside: then only its context lines differ in indentation, and its added lines are in the file's own."""
    pairs = zip([op for op in hunk.ops if op[0] != "+"], window)
    removed = [(text, line) for (mark, text), line in pairs if mark == "-"]
    return any(text.strip() for text, _ in removed) and all(text.rstrip() == line.rstrip() for text, line in removed)


def _with_context(hunk: Hunk, window: list[str]) -> list[str]:
    """The hunk's new lines, its context lines taken from the file (`window`, the lines its old lines matched)."""
    out, k = [], 0
    for mark, text in hunk.ops:
        if mark == "+":
            out.append(text)
            continue
        if mark == " ":
            out.append(window[k])
        k += 1
    return out


def _seek(doc: _Doc, pattern: list[str], at: int, at_end: bool, what: str) -> tuple[int, str] | None:
    """(start, rule) of `pattern` in the file from line `at`: literally, the first match (from the end first
    when `at_end`); else by each near-miss rule in turn, whose matches must all be the same text in the file
    (then the first wins, as it would literally); matches that differ are a refusal (_NotFound, starting with
    `what`), never a guess between them."""
    lines, n = doc.lines, len(pattern)
    last = len(lines) - n
    if n == 0 or last < at:
        return None
    if at_end and lines[last:] == pattern:
        return last, ""
    for i in _find(lines, pattern, at, last + 1):
        return i, ""
    for rule, key in _RULES:
        want, keyed = [key(p) for p in pattern], doc.keyed(rule, key)
        if at_end and keyed[last:] == want:
            return last, rule
        hits = list(islice(_find(keyed, want, at, last + 1), MAX_SAME_HITS + 1))
        if hits and len(hits) <= MAX_SAME_HITS and all(lines[h:h + n] == lines[hits[0]:hits[0] + n] for h in hits):
            return hits[0], rule  # one text in the file: the first, as a literal match would be
        if hits:
            starts = ", ".join(str(h + 1) for h in hits[:5])
            raise _NotFound(f"{what} not in the file as written, and ignoring {rule} they match at several "
                           f"places (from lines {starts}); add context lines, or an @@ line naming the function or "
                           "class, so the hunk fits one place only.")
    return None


def _without_blanks(doc: _Doc, hunk: Hunk, at: int) -> Placed | None:
    """The hunk placed where its non-blank old lines match the file's non-blank lines (trailing whitespace
    aside) in order, the file having blank lines the patch left out or the other way round: the first such
    place in reach when all of them are the same text in the file. The blank lines only the file has stay; a blank line only the patch has is dropped. Added
    lines where the patch left out blank lines could go on either side of them, or straddle them: refused."""
    want = [t.rstrip() for t in hunk.old if t.strip()]
    if not want:
        return None
    index, keys = doc.filled()
    n = len(want)
    hits = list(islice(_find(keys, want, bisect_left(index, at), len(keys) - n + 1), MAX_SAME_HITS + 1))
    spans = [(index[h], index[h + n - 1] + 1) for h in hits]
    texts = {tuple(doc.lines[a:b]) for a, b in spans}
    if not hits or len(hits) > MAX_SAME_HITS or len(texts) > 1:
        return None
    start, end = spans[0]
    window, out, k = doc.lines[start:end], [], 0
    for j, (mark, text) in enumerate(hunk.ops):
        if mark == "+":
            following = next((t for m, t in hunk.ops[j + 1:] if m != "+"), None)
            if k < len(window) and not window[k].strip() and (following is None or following.strip()):
                raise _NotFound(f"{hunk.title()}: its lines match lines {start + 1}-{end} only with blank lines the "
                                "patch left out, next to its added lines, which could go on either side of them; "
                                "send the hunk with the file's blank lines as context.")
            out.append(text)
        elif not text.strip():
            if k < len(window) and not window[k].strip():
                if mark == " ":
                    out.append(window[k])
                k += 1
        else:
            while not window[k].strip():
                out.append(window[k])
                k += 1
            if mark == " ":
                out.append(window[k])
            k += 1
    out.extend(window[k:])
    return Placed(start, end - start, out, "blank lines")


def _missing(lines: list[str], hunk: Hunk, at: int, text: str) -> str:
    """Why `hunk` was not placed, with what is nearest in the file."""
    old, new = hunk.old, hunk.new
    adds = any(mark == "+" and text.strip() for mark, text in hunk.ops)
    if adds and _seek_literal(lines, new, 0) is not None and _seek_literal(lines, old, 0) is None:
        start = _seek_literal(lines, new, 0) or 0
        where = f"line {start + 1}" if len(new) == 1 else f"lines {start + 1}-{start + len(new)}"
        return (f"{hunk.title()} seems applied already: the file has its new lines at {where} and not its old "
                "lines. Read the file again before patching it")
    if at and _seek_literal(lines, old, 0) is not None:
        return (f"{hunk.title()}: its lines are in the file only before line {at + 1}, where the hunk before it "
                "(or its @@ line) ended; hunks must follow the file's order.")
    return f"{hunk.title()}: its old lines (context and '-' lines) are not in the file" + _nearest(text, "\n".join(old))


def _seek_literal(lines: list[str], pattern: list[str], at: int) -> int | None:
    return next(_find(lines, pattern, at, len(lines) - len(pattern) + 1), None) if pattern else None


def _nearest(text: str, needle: str) -> str:
    found = similar_lines(text, needle)
    return ".\n" + found if found else ". Nothing in the file is close to them."

