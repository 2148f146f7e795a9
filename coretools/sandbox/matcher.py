"""The in-process back-end of the pattern engine: every pattern tree (`coretools.sandbox.patterns`) runs on
RE2, whose matching time is linear in the length of the path whatever the pattern, and which holds no
lock a second caller could wait on for long.

Paths are given to RE2 as UTF-8 with lone surrogates (the undecodable bytes of a file name, kept by
`surrogateescape`) passed through as three-byte sequences; RE2 takes each as one character, as Python's
`str` does. Case-insensitive patterns are written out with the character sets Python's `re` would accept
(`coretools.sandbox.casefold`): the same characters Python's `re` pairs.

A glob with an extglob negation `!(...)` runs on `SegmentGlob`: an automaton over the path's segments
(`**` may take any number of them) whose steps are RE2 matches of one segment, the negated part matched
then excluded.

`globmatch` (a path) and `name_matches` (a bare name) are the cached ways the tools match Gemini globs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from coretools.sandbox import casefold
from coretools.sandbox.patterns.gitignore import parse_gitignore
from coretools.sandbox.patterns.glob import parse_globs
from coretools.sandbox.patterns.tree import (
    GLOBSTAR,
    Alt,
    Chars,
    DirMark,
    End,
    Exclude,
    Glob,
    IgnoreLine,
    Node,
    PatternError,
    Repeat,
    Seq,
    Text,
    has_exclude,
)

MAX_MEM = 64 << 20  # RE2's memory budget per compiled pattern


@functools.lru_cache(maxsize=1)
def _re2():
    """RE2's compiled-pattern class, its options and anchors (imported on first use: ~3 MB)."""
    import re2
    from re2 import _re2

    options = re2.Options()
    options.max_mem = MAX_MEM
    return _re2, options, _re2.RE2.Anchor


def encode(path: str) -> bytes:
    return path.encode("utf-8", "surrogatepass")


# -- regex text -----------------------------------------------------------------------------------------


def regex(node: Node, fold: bool, capture: bool = True) -> str:
    """RE2 syntax for a tree; `fold`: case-insensitive (Python's pairs); `capture`: the gitignore directory
    mark as the group `d` (else a plain group)."""
    if isinstance(node, Text):
        return "".join(_char(ord(ch), fold) for ch in node.text)
    if isinstance(node, Chars):
        return _class(node.ranges, node.negated, fold)
    if isinstance(node, Seq):
        return "".join(regex(item, fold, capture) for item in node.items)
    if isinstance(node, Alt):
        return "(?:" + "|".join(regex(item, fold, capture) for item in node.items) + ")"
    if isinstance(node, Repeat):
        body = "(?:" + regex(node.item, fold, capture) + ")"
        if (node.min, node.max) == (0, None):
            return body + "*"
        if (node.min, node.max) == (1, None):
            return body + "+"
        if (node.min, node.max) == (0, 1):
            return body + "?"
        return body + "{%d,%s}" % (node.min, "" if node.max is None else node.max)
    if isinstance(node, DirMark):
        return ("(?P<d>" if capture else "(?:") + regex(node.item, fold, capture) + ")"
    if isinstance(node, End):
        return r"\n?\z" if node.newline else r"\z"
    raise PatternError("an extglob negation !(...) cannot be part of a whole-path expression")


def _escape(code: int) -> str:
    ch = chr(code)
    return ch if ch.isascii() and ch.isalnum() else "\\x{%x}" % code


def _char(code: int, fold: bool) -> str:
    if not fold:
        return _escape(code)
    same = casefold.equivalents(code)
    return _escape(code) if len(same) == 1 else "[" + "".join(map(_escape, same)) + "]"


def _class(ranges: tuple[tuple[int, int], ...], negated: bool, fold: bool) -> str:
    ranges = casefold.fold_ranges(ranges) if fold else casefold.merge(list(ranges))
    if not ranges:
        return r"[\x{0}-\x{10ffff}]" if negated else r"[^\x{0}-\x{10ffff}]"
    body = "".join(_escape(lo) if lo == hi else f"{_escape(lo)}-{_escape(hi)}" for lo, hi in ranges)
    return ("[^" if negated else "[") + body + "]"


def compile_regex(text: str, source: str):
    """An RE2 program for `text`; PatternError (naming `source`) if RE2 refuses it (too large)."""
    re2mod, options, _ = _re2()
    program = re2mod.RE2(text.encode("ascii"), options)
    if not program.ok():
        raise PatternError(
            f"The pattern '{source[:200]}' is too large to match ({program.error()}); use a shorter pattern."
        )
    return program


class Program:
    """A regex in RE2 syntax searched in UTF-8 text (`search`: is there a match anywhere)."""

    def __init__(self, text: str) -> None:
        re2mod, options, anchor = _re2()
        self._program = re2mod.RE2(text.encode("utf-8", "surrogatepass"), options)
        if not self._program.ok():
            raise ValueError(self._program.error())
        self._anywhere = anchor.UNANCHORED

    def search(self, data: bytes) -> bool:
        return self._program.Match(self._anywhere, data, 0, len(data))[0][0] >= 0


def compile_program(text: str) -> Program:
    """A search program for a caller's regex; ValueError with RE2's message if it is not one."""
    return Program(text)


# -- matchers -------------------------------------------------------------------------------------------


class NodeMatcher:
    """A tree without `Exclude` matched against a whole string (or, `prefix`, its start)."""

    def __init__(self, node: Node, fold: bool = False, source: str = "", prefix: bool = False) -> None:
        _, _, anchor = _re2()
        self._anchor = anchor.ANCHOR_START if prefix else anchor.ANCHOR_BOTH
        self._program = compile_regex(regex(node, fold, capture=False), source)

    def __call__(self, text: str) -> bool:
        data = encode(text)
        return self._program.Match(self._anchor, data, 0, len(data))[0][0] >= 0

    def match_bytes(self, data: bytes) -> bool:
        return self._program.Match(self._anchor, data, 0, len(data))[0][0] >= 0


class SegmentGlob:
    """A glob with an extglob negation, matched segment by segment: the set of places the pattern could be
    at is carried along the path's segments (no backtracking), `**` staying or moving on, every other
    segment pattern tested against one path segment."""

    def __init__(self, glob: Glob, fold: bool) -> None:
        segs = list(glob.segments)
        if len(segs) > 1 and segs[-1] == GLOBSTAR:
            segs[-1:] = [_ANY_SEGMENT, GLOBSTAR]  # a trailing `/**` takes at least one segment
        self._segs = [s if s in (GLOBSTAR, _ANY_SEGMENT) else _SegmentTest(s, fold, glob.source) for s in segs]

    def __call__(self, path: str) -> bool:
        segs = self._segs
        states = self._closure({0})
        for part in path.split("/"):
            moved = set()
            for at in states:
                if at == len(segs):
                    continue
                seg = segs[at]
                if seg == GLOBSTAR:
                    moved.add(at)
                elif seg == _ANY_SEGMENT or seg(part):
                    moved.add(at + 1)
            states = self._closure(moved)
            if not states:
                return False
        return len(segs) in states

    def _closure(self, states: set[int]) -> set[int]:
        out = set(states)
        for at in sorted(states):
            while at < len(self._segs) and self._segs[at] == GLOBSTAR:
                at += 1
                out.add(at)
        return out


_ANY_SEGMENT = "*"


class _SegmentTest:
    """One segment pattern; `A!(P)B`: a split into a part A matches, a part P does not, a part B does."""

    def __init__(self, node: Node, fold: bool, source: str) -> None:
        items = list(node.items) if isinstance(node, Seq) else [node]
        cut = next((k for k, item in enumerate(items) if isinstance(item, Exclude)), None)
        if cut is None:
            self._whole = NodeMatcher(node, fold, source)
            return
        self._whole = None
        head, tail = items[:cut], items[cut + 1 :]
        self._head = NodeMatcher(Seq(tuple(head)), fold, source) if head else None
        self._tail = NodeMatcher(Seq(tuple(tail)), fold, source) if tail else None
        self._inner = NodeMatcher(items[cut].item, fold, source)  # type: ignore[union-attr]
        self._seen: dict[str, bool] = {}  # (paths share directory names)

    def __call__(self, part: str) -> bool:
        if self._whole is not None:
            return self._whole(part)
        hit = self._seen.get(part)
        if hit is None:
            if len(self._seen) >= 4096:
                self._seen.clear()
            hit = self._seen[part] = self._split(part)
        return hit

    def _split(self, part: str) -> bool:
        """Is there a split head + middle + tail of `part` that the head and tail match and the negated
        pattern does not match in the middle? (A name has at most 255 bytes: the splits are few.)"""
        n = len(part)
        starts = [i for i in range(n + 1) if self._head(part[:i])] if self._head is not None else [0]
        if not starts:
            return False
        ends = [j for j in range(n + 1) if self._tail(part[j:])] if self._tail is not None else [n]
        return any(not self._inner(part[i:j]) for i in starts for j in ends if j >= i)


class GlobSet:
    """Gemini globs (`patterns.parse_globs`): a path matches when an including glob matches it and no
    excluding (`!pattern`) one does. Globs without extglob negation share one RE2 program."""

    def __init__(self, globs: Sequence[Glob], fold: bool) -> None:
        self.include = _Union([g for g in globs if not g.negative], fold)
        self.exclude = _Union([g for g in globs if g.negative], fold)

    @classmethod
    def of(cls, patterns: Sequence[str], fold: bool, *, paths: bool = True, negate: bool = True) -> GlobSet:
        return cls([g for p in patterns for g in parse_globs(p, paths=paths, negate=negate)], fold)

    def __call__(self, path: str) -> bool:
        return self.include(path) and not self.exclude(path)


class _Union:
    def __init__(self, globs: list[Glob], fold: bool) -> None:
        plain = [g for g in globs if not any(s != GLOBSTAR and has_exclude(s) for s in g.segments)]
        self._tests: list = [SegmentGlob(g, fold) for g in globs if g not in plain]
        if plain:
            source = plain[0].source
            text = "|".join("(?:" + regex(g.node(), fold, capture=False) + ")" for g in dict.fromkeys(plain))
            _, _, anchor = _re2()
            program, both = compile_regex(text, source), anchor.ANCHOR_BOTH

            def whole(path: str) -> bool:
                data = encode(path)
                return program.Match(both, data, 0, len(data))[0][0] >= 0

            self._tests.insert(0, whole)

    def __call__(self, path: str) -> bool:
        return any(test(path) for test in self._tests)


class RuleSet:
    """The lines of one ignore file, judged as git does (`check`): of the lines that match a path, the last
    one that matches the path itself decides; a line that matched only through a directory above the path
    (or the path as a directory, probed with a trailing `/`) decides only when no line matches otherwise.
    A line matches from the start of the path; a prefix suffices (`foo` hides everything below `foo/`)."""

    def __init__(self, lines: Sequence[IgnoreLine]) -> None:
        re2mod, options, anchor = _re2()
        self._start = anchor.ANCHOR_START
        self.lines = list(lines)
        self._programs = []
        self._marked = []
        self._set = re2mod.Set(anchor.ANCHOR_START, options)
        for line in self.lines:
            self._programs.append(compile_regex(regex(line.node, False), line.source))
            self._marked.append(_has_mark(line.node))
            self._set.Add(regex(line.node, False, capture=False).encode("ascii"))
        self._set.Compile()
        every = "|".join("(?:" + regex(line.node, False, capture=False) + ")" for line in self.lines)
        self._any = compile_regex(every or _class((), False, False), "ignore rules")

    @classmethod
    def from_lines(cls, lines: Sequence[str]) -> RuleSet:
        return cls([parsed for parsed in map(parse_gitignore, lines) if parsed is not None])

    def __len__(self) -> int:
        return len(self.lines)

    def check(self, path: str) -> bool | None:
        """True: hidden; False: brought back (a `!` line); None: no line matches."""
        data = encode(path)
        if self._any.Match(self._start, data, 0, len(data))[0][0] < 0:
            return None
        hits = self._set.Match(data) or range(len(self.lines))  # (an empty answer: RE2's DFA gave up)
        verdict: bool | None = None
        for index in sorted(hits, reverse=True):
            if not self._marked[index]:
                return self.lines[index].include
            spans = self._programs[index].Match(self._start, data, 0, len(data))
            if spans[0][0] < 0:
                continue
            if spans[1][0] < 0:  # matched without the directory mark
                return self.lines[index].include
            if verdict is None:
                verdict = self.lines[index].include
        return verdict


def _has_mark(node: Node) -> bool:
    if isinstance(node, DirMark):
        return True
    if isinstance(node, (Seq, Alt)):
        return any(map(_has_mark, node.items))
    if isinstance(node, Repeat):
        return _has_mark(node.item)
    return False


def globmatch(rel: str, patterns: str | list[str], case_sensitive: bool = False) -> bool:
    """Glob matching of a relative path: `**` (globstar), braces, extglob, dot files, `!` negation (the
    pattern engine, `coretools.sandbox`: linear in the path's length)."""
    key = patterns if isinstance(patterns, str) else tuple(patterns)
    return _matcher(key, case_sensitive)(rel)


@functools.lru_cache(maxsize=256)
def _matcher(patterns: str | tuple[str, ...], case_sensitive: bool) -> Callable[[str], bool]:
    return GlobSet.of([patterns] if isinstance(patterns, str) else patterns, not case_sensitive)


def name_matches(name: str, patterns: list[str]) -> bool:
    """Match a bare file name against glob patterns (braces and extglob, dot files included)."""
    return _name_matcher(tuple(patterns))(name)


@functools.lru_cache(maxsize=256)
def _name_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    return GlobSet.of(patterns, False, paths=False, negate=False)
