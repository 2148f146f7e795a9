"""The Gemini glob dialect: glob's `pattern`, read_many_files' paths, include and exclude, and (matched
against a name) list_directory's `ignore`. See the package's docstring for the syntax. Also what a glob's
text says before it is parsed: whether it has magic, its literal leading directories, an escaped form."""

from __future__ import annotations

from coretools.sandbox.patterns.braces import expand_braces
from coretools.sandbox.patterns.tree import (
    ANY,
    GLOBSTAR,
    NOT_SLASH,
    NOTHING,
    SLASH,
    Chars,
    Exclude,
    Glob,
    Node,
    PatternError,
    Repeat,
    Text,
    alt,
    seq,
    shortened,
    star,
)

_POSIX = {
    "alnum": ((48, 57), (65, 90), (97, 122)),
    "alpha": ((65, 90), (97, 122)),
    "ascii": ((0, 127),),
    "blank": ((9, 9), (32, 32)),
    "cntrl": ((0, 31), (127, 127)),
    "digit": ((48, 57),),
    "graph": ((33, 126),),
    "lower": ((97, 122),),
    "print": ((32, 126),),
    "punct": ((33, 47), (58, 64), (91, 96), (123, 126)),
    "space": ((9, 13), (32, 32)),
    "upper": ((65, 90),),
    "word": ((48, 57), (65, 90), (95, 95), (97, 122)),
    "xdigit": ((48, 57), (65, 70), (97, 102)),
}
_EXT = "@*+?!"


def parse_globs(pattern: str, *, paths: bool = True, negate: bool = True) -> list[Glob]:
    """A Gemini glob (braces expanded) as one `Glob` per expansion."""
    return [parse_glob(p, paths=paths, negate=negate, source=pattern) for p in expand_braces(pattern)]


def parse_glob(pattern: str, *, paths: bool = True, negate: bool = True, source: str | None = None) -> Glob:
    """One brace-free Gemini glob. `negate`: a leading `!` (not `!(`) makes it an exclusion. `paths`: it
    is matched against paths (`**` segments span directories, `/` separates segments); else against a
    name (list_directory's `ignore`), where `**` is `*` and `/` an ordinary character."""
    source = pattern if source is None else source
    negative = negate and pattern.startswith("!") and not pattern.startswith("!(")
    body = pattern[1:] if negative else pattern
    if not paths:
        return Glob(source, (_Segment(body, source, paths=False).parse(),), negative)
    if (len(body) - len(body.rstrip("\\"))) % 2:  # a lone backslash at the end stands for nothing
        body = body[:-1]
    segments: list[Node | str] = []
    for raw in _split_segments(body):
        if raw in ("**", "***"):
            if not segments or segments[-1] != GLOBSTAR:
                segments.append(GLOBSTAR)
            continue
        segments.append(_Segment(raw, source).parse())
    return Glob(source, tuple(segments), negative)


def _split_segments(body: str) -> list[str]:
    """The pattern's segments: split at each `/` outside extglob groups and escapes; runs of `/` are one."""
    out, cur, depth, i = [], [], 0, 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch in _EXT and body[i + 1 : i + 2] == "(":
            depth += 1
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch == ")" and depth:
            depth -= 1
        if ch == "/" and not depth:
            if cur or not out:
                out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


class _Segment:
    """Parser of one glob segment (or of one alternative inside an extglob group)."""

    def __init__(self, text: str, source: str, paths: bool = True) -> None:
        self.s, self.source, self.i = text, source, 0
        self.paths = paths
        self.negations = 0

    def parse(self) -> Node:
        node = self._sequence(stop=None, depth=0)
        if self.negations > 1:
            raise self._refuse("more than one !(...) in a segment")
        return node

    def _refuse(self, why: str) -> PatternError:
        return PatternError(
            f"The pattern '{shortened(self.source)}' uses extglob negation !(...) {why}, which is not supported "
            "(it is matched on one path segment, once per segment, outside other groups). Rewrite the pattern "
            "or use the 'exclude' list where there is one."
        )

    def _sequence(self, stop: str | None, depth: int) -> Node:
        s = self.s
        items: list[Node] = []
        text: list[str] = []

        def flush() -> None:
            if text:
                items.append(Text("".join(text)))
                text.clear()

        while self.i < len(s):
            ch = s[self.i]
            if stop is not None and ch in stop:
                break
            if ch == "\\":  # a lone backslash at the end stands for nothing
                text.append(s[self.i + 1 : self.i + 2])
                self.i += 2
                continue
            if ch in _EXT and self._opens_group(self.i):
                flush()
                items.append(self._group(ch, depth))
                continue
            if ch == "*":
                flush()
                self.i += 1
                while self.i < len(s) and s[self.i] == "*" and not self._opens_group(self.i):  # `**(a)`: `*`, `*(a)`
                    self.i += 1
                if not (items and items[-1] == star()):
                    items.append(star())
                continue
            if ch == "?":
                flush()
                items.append(NOT_SLASH)
                self.i += 1
                continue
            if ch == "[":
                parsed = self._class()
                if parsed is not None:
                    flush()
                    items.append(parsed)
                    continue
            if ch == "/" and self.paths:  # only inside a group: that alternative cannot match a path segment
                flush()
                items.append(NOTHING)
                self.i += 1
                continue
            text.append(ch)
            self.i += 1
        flush()
        return seq(*items)

    def _opens_group(self, i: int) -> bool:
        """Does an extglob group (`@(`, `*(`...) with its closing parenthesis start at `i`?"""
        return self.s[i + 1 : i + 2] == "(" and self._group_end(i + 1) is not None

    def _group_end(self, open_at: int) -> int | None:
        """Where the group opened at `open_at` closes (nested groups, escapes and classes skipped). Only an
        extglob opener (`@(`, `*(`...) nests: a bare `(` inside a group is literal, as in wcmatch."""
        s, depth, j, opens = self.s, 0, open_at, True
        while j < len(s):
            ch = s[j]
            if ch == "\\":
                j, opens = j + 2, False
                continue
            if ch == "[":
                end = _class_end(s, j)
                if end is not None:
                    j, opens = end + 1, False
                    continue
            if ch == "(" and opens:
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return j
            opens = ch in _EXT
            j += 1
        return None

    def _group(self, kind: str, depth: int) -> Node:
        self.i += 2
        alternatives = []
        while True:
            alternatives.append(self._sequence(stop="|)", depth=depth + 1))
            if self.i >= len(self.s) or self.s[self.i] == ")":
                self.i += 1
                break
            self.i += 1  # the `|`
        body = alt(*alternatives)
        if kind == "@":
            return body
        if kind == "?":
            return Repeat(body, 0, 1)
        if kind == "*":
            return Repeat(body, 0, None)
        if kind == "+":
            return Repeat(body, 1, None)
        if depth:
            raise self._refuse("inside another group")
        self.negations += 1
        return Exclude(body)

    def _class(self) -> Node | None:
        """`[...]` at `self.i` as a `Chars`, or None (then `[` is literal): unclosed, or a `/` inside."""
        s = self.s
        j = self.i + 1
        negated = j < len(s) and s[j] in "!^"
        if negated:
            j += 1
        ranges: list[tuple[int, int]] = []
        first = True
        removed = False
        slash = "/" if self.paths else ""
        while True:
            if j >= len(s) or (s[j] == "/" and slash):
                return None
            ch = s[j]
            if ch == "]" and not first:
                break
            if ch == "[" and s[j + 1 : j + 2] == ":":
                end = s.find(":]", j + 2)
                name = s[j + 2 : end] if end > 0 else ""
                if name in _POSIX:
                    ranges.extend(_POSIX[name])
                    j = end + 2
                    first = False
                    continue
            if ch == "\\" and j + 1 < len(s):
                ch = s[j + 1]
                j += 1
                if ch == "/" and slash:
                    return None
            lo = ord(ch)
            j += 1
            first = False
            if j + 1 < len(s) and s[j] == "-" and s[j + 1] != "]":
                hi_ch = s[j + 1]
                step = 2
                if hi_ch == "\\" and j + 2 < len(s):
                    hi_ch, step = s[j + 2], 3
                if hi_ch == "/" and slash:
                    return None
                if hi_ch == "[" and s[j + 2 : j + 3] == ":":
                    ranges.append((lo, lo))
                    ranges.append((ord("-"), ord("-")))
                    j += 1
                    continue
                j += step
                if ord(hi_ch) >= lo:
                    ranges.append((lo, ord(hi_ch)))
                else:
                    removed = True
                continue
            ranges.append((lo, lo))
        self.i = j + 1
        if not ranges and removed:
            return (NOT_SLASH if slash else ANY) if negated else NOTHING
        if negated and slash:
            ranges.append((SLASH, SLASH))
        return Chars(tuple(ranges), negated)


def _class_end(s: str, j: int) -> int | None:
    k = j + 1
    if k < len(s) and s[k] in "!^":
        k += 1
    if k < len(s) and s[k] == "]":
        k += 1
    while k < len(s):
        if s[k] == "\\":
            k += 2
            continue
        if s[k] == "]":
            return k
        if s[k] == "/":
            return None
        k += 1
    return None


def glob_escape(pattern: str) -> str:
    """`pattern` with every glob character escaped, so that it matches itself only."""
    return "".join("\\" + ch if ch in _GLOB_CHARS else ch for ch in pattern)


_GLOB_CHARS = frozenset("*?[]{}()!@+|\\")


def has_magic(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[]{}!@+()")


def split_literal_prefix(pattern: str) -> tuple[str, str]:
    """`src/app/**/*.py` -> (`src/app`, `**/*.py`): the leading components without glob magic, so a walk can
    start there instead of at the top."""
    parts = pattern.split("/")
    literal: list[str] = []
    while len(parts) > 1 and parts[0] and not has_magic(parts[0]) and parts[0] not in (".", ".."):
        literal.append(parts.pop(0))
    return "/".join(literal), "/".join(parts)
