"""The ripgrep back-end of the pattern engine: our patterns as ripgrep arguments. ripgrep matches globs
with its own linear-time engine (globset), so what is handed to it needs no guarding here; what it must
get right is the meaning.

* `reroot`: gitignore lines written for a directory, rewritten for a search of one of its subdirectories
  (rg reads `--ignore-file`s relative to its working directory).
* `include_flags`: search_file_content's `include` as rg flags.
* `name_glob`: a plain file name pattern (text and `*`) as a globset glob that accepts exactly the names
  our case-insensitive matching accepts (letters become classes of Python's case pairs).
"""

from __future__ import annotations

import functools

from coretools.sandbox import casefold
from coretools.sandbox.matcher import NodeMatcher
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
