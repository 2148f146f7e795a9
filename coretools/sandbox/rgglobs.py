"""The ripgrep back-end of the pattern engine: our patterns as ripgrep arguments. ripgrep matches globs
with its own linear-time engine (globset), so what is handed to it needs no guarding here; what it must
get right is the meaning.

* `reroot`: gitignore lines written for a directory, rewritten for a search of one of its subdirectories
  (rg reads `--ignore-file`s relative to its working directory).
* `include_flags`: search_file_content's `include` as rg flags.
* `name_glob`: a plain file name pattern (text and `*`) as a globset glob that accepts exactly the names
  our case-insensitive matching accepts (letters become classes of Python's case pairs).
* `name_filter`: the name part of a glob as such `--glob`s, with the test of rg's raw paths that decides
  where they only approximate it (glob's fast walk, `walker.find_files`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from coretools.sandbox import casefold
from coretools.sandbox.matcher import GlobSet, NodeMatcher
from coretools.sandbox.patterns.gitignore import gitignore_segment
from coretools.sandbox.patterns.tree import PatternError


def strip_trailing_spaces(body: str) -> str:
    while body.endswith(" ") and not body.endswith("\\ "):
        body = body[:-1]
    return body


def reroot(lines: list[str], tail: list[str]) -> list[str]:
    """Rewrite gitignore lines written for directory D so they mean the same for paths below D/<tail>.

    A pattern that matches a directory also matches everything below it. A pattern that matches the
    search directory or one of its ancestors thus matches everything in it and becomes `*`; an anchored
    pattern is consumed component by component (`**` may take any number of them) and what is left is
    anchored at the search directory.
    """
    if not tail:
        return list(lines)
    out: list[str] = []
    for line in lines:
        neg = line.startswith("!")
        body = strip_trailing_spaces(line[1:] if neg else line)
        dir_only = body.endswith("/") and not body.endswith("\\/")
        core = body.rstrip("/")
        if not core:
            continue
        if core.startswith("/"):
            segs = core[1:].split("/")
        elif "/" in core:
            segs = core.split("/")
        else:
            segs = ["**", core]
        segs = [s for s in segs if s != ""] or ["**"]
        residuals = list(dict.fromkeys(tuple(r) for r in _consume(tuple(segs), tuple(tail))))
        if () in residuals or ("**",) in residuals:
            residuals = [()]  # matches everything below the search directory
        for residual in residuals:
            pattern = "/" + "/".join(residual) + ("/" if dir_only else "") if residual else "*"
            out.append(("!" if neg else "") + pattern)
    return out


def _consume(segs: tuple[str, ...], comps: tuple[str, ...]) -> list[tuple[str, ...]]:
    if not comps:
        return [segs]
    if not segs:
        return [()]  # the pattern matched an ancestor: everything below it matches
    head = segs[0]
    if head == "**":
        rest = segs[1:]
        found = _consume(rest, comps) if rest else [()]
        return found + _consume(segs, comps[1:])
    if segment_matcher(head, False)(comps[0]):
        return _consume(segs[1:], comps[1:])
    return []


@functools.lru_cache(maxsize=1024)
def segment_matcher(seg: str, fold: bool):
    """A test of one path component against one segment of a gitignore pattern (never true when git would
    discard the pattern)."""
    try:
        return NodeMatcher(gitignore_segment(seg), fold, seg)
    except PatternError:
        return lambda name: False


def include_flags(include: str) -> tuple[list[str], bool]:
    """rg flags for an `include` glob, and whether they can override ignore rules. A glob without a slash
    matches file names, which an rg file type does too, and types (unlike `--glob`, whose matches beat
    every ignore rule) only narrow what the ignore rules let through."""
    if "/" in include or ":" in include or include.startswith("!"):
        return ["--glob", include], True
    return ["--type-add", f"coretoolsinclude:{include}", "--type", "coretoolsinclude"], False


def name_glob(text: str, case_sensitive: bool) -> str:
    """A name made of plain characters (letters, digits, `._- `) and `*` as a globset glob; ignoring case,
    each letter stands for every character Python's matching pairs it with: a class such as `[aA]`, or an
    alternation such as `{s,S,ſ}` where one of them is not ASCII (globset's classes match single bytes)."""
    out = []
    for ch in text:
        same = [chr(c) for c in casefold.equivalents(ord(ch))] if not case_sensitive and ch != "*" else [ch]
        if len(same) == 1:
            out.append(ch)
        elif all(c.isascii() for c in same):
            out.append("[" + "".join(same) + "]")
        else:
            out.append("{" + ",".join(same) + "}")
    return "".join(out)


class RawPathTest:
    """A test of rg's raw paths (`./a/b.py`, relative to the walked directory) by a glob (the whole path) or
    by the name part of one (its last component): `search(raw)` is true-ish when it matches."""

    def __init__(self, pattern: str, case_sensitive: bool, whole: bool, top: bool) -> None:
        self._test = GlobSet.of([pattern], not case_sensitive, paths=whole, negate=False)
        self._whole, self._top = whole, top

    def search(self, raw: bytes) -> bool | None:
        rel = raw[2:].decode("utf-8", "surrogateescape")
        if self._top and "/" in rel:
            return None
        return self._test(rel if self._whole else rel.rpartition("/")[2]) or None


@dataclass(frozen=True)
class NameFilter:
    """A test of rg's raw paths (`./a/b.py`) that accepts every path a glob matches; `exact`: only those.
    `globs`: file-name globs for rg (globset syntax: text, `*` and classes of a letter's case pairs such as
    `[sSſ]`; braces expanded) that together accept at least the names `regex` does; `top`: only files
    directly in the walked directory can match."""

    regex: RawPathTest
    exact: bool
    globs: tuple[str, ...] = ("*",)
    top: bool = False
    names: tuple[str, ...] = ()  # the name part of the pattern, braces expanded (text and `*`)
    globs_exact: bool = False  # `globs` (with `top`: at depth 1) accept exactly the paths `regex` does


_PLAIN = r"[A-Za-z0-9._\- ]"
# `*` may not stand inside a `{a,b}` list: `*{*,x}` expands to a globstar.
_NAME_GLOB = re.compile(rf"[A-Za-z0-9._\- *]*(?:\{{{_PLAIN}+(?:,{_PLAIN}+)+\}}[A-Za-z0-9._\- *]*)*")


def name_filter(pattern: str, case_sensitive: bool) -> NameFilter | None:
    """A `NameFilter` for a glob relative to the walked directory (as `globmatch` reads it), or None. Only a
    last component made of plain ASCII characters, `*` and flat `{a,b}` lists of plain words qualifies; it is
    exact for `**/<name>` and for a top-level `<name>`, and a superset (the file name only) otherwise."""
    if pattern.startswith("**/") and "/" not in pattern[3:]:
        name, exact, top = pattern[3:], True, False
    elif "/" not in pattern:
        name, exact, top = pattern, True, True
    else:
        name, exact, top = pattern.rpartition("/")[2], False, False
    if not name or "**" in name or _NAME_GLOB.fullmatch(name) is None or name.strip("*") == "":
        return None
    expanded, cut = [""], False
    for token in re.findall(r"\{[^{}]*\}|.", name):
        alts = token[1:-1].split(",") if len(token) > 1 else [token]
        if len(expanded) * len(alts) <= 64:
            expanded = [done + alt for done in expanded for alt in alts]
        else:  # too many: `*` stands for what came so far (a superset)
            expanded, cut = ["*"], True
    names = tuple(dict.fromkeys(re.sub(r"\*+", "*", n) for n in expanded))  # (globset refuses `**` in a name)
    globs = tuple(dict.fromkeys(name_glob(n, case_sensitive) for n in names))
    test = RawPathTest(pattern if exact else name, case_sensitive, whole=exact, top=top)
    return NameFilter(test, exact, globs, top=top, names=names, globs_exact=exact and not cut)
