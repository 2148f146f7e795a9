"""Hints for a path that does not exist: the paths the caller most likely meant.

A model that mistypes a path would otherwise have to list directories to find its way. When an open fails
because the path (or a directory on it) does not exist, the error gains one line naming up to three paths
that do exist, each with how it differs from what was asked:

* the same argument read another way: without a leading `@` (Gemini CLI's `@src/main.py` file reference),
  as an absolute path that lost its leading slash, starting at a root's own name (`proj/src/x` where a root
  is `.../proj`), or under another workspace root;
* each of those resolved leniently from its deepest existing directory: a name that differs only in case
  (or Unicode normal form) or a close name, at any depth; and, when a directory on the way is missing, the
  final name found in the deepest directory that does exist.

When nothing fits, the line says which directory on the path is missing, and in a multi-root workspace it
lists the current roots (with one root, the path in the message already starts with it).

Safety: directories are listed only through `Workspace.open_dir` and every suggestion is confirmed through
`Workspace.open_node`, so a symlink that leads out of the workspace is never followed. A name that is
protected (`protected_reason`) or ignored under the default rules is never suggested, whatever
`--allow-protected` says. Cost is bounded: at most `MAX_LISTINGS` directories, each read for at most
`MAX_ENTRIES` names (no `stat` per entry, never recursive), at most `MAX_RATIOS` difflib comparisons, all
within about `DEADLINE` seconds.

The hint is computed when the message is first read. The gateway raises not-found errors for probes that
callers swallow (`exists`, a write that creates a file), and those never pay for it.

The gateway knows nothing of hints: `HintedWorkspace`, the workspace the server and the CLI give the tools,
is the gateway with its `missing` and `path_hint` hooks filled in from here.
"""

from __future__ import annotations

import difflib
import os
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

from coretools.errors import ErrorKind, PathError, ToolError
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import IgnoreOptions, IgnoreRules
from coretools.sandbox.paths import Location, protected_name, protected_reason, strip_prefix

MAX_ENTRIES = 2_000
MAX_LISTINGS = 8
MAX_RATIOS = 200
MAX_SHOWN = 3
DEADLINE = 0.25
CUTOFF = 0.8
BRANCHING = 3

DEFAULT_RULES = IgnoreOptions()

# How a suggestion differs from the request, ranked: a plain rereading of the argument first.
READING, CASE, SIMILAR, ELSEWHERE = range(4)
# Scores within a rank: a name found as asked (or up to case), one edit away, then difflib's ratio (< 1).
EXACT, ONE_EDIT = 3.0, 2.0

_scandir = os.scandir


class MissingPath(PathError):
    """A not-found error whose message gains its hint when first read (see the module docstring)."""

    def __init__(self, message: str, hint: Callable[[], str]) -> None:
        self._hint: Callable[[], str] | None = hint
        self._full: str | None = None
        super().__init__(message, ErrorKind.FILE_NOT_FOUND)

    @property
    def message(self) -> str:
        if self._full is None:
            extra = ""
            if self._hint is not None:
                try:
                    extra = self._hint()
                except Exception:  # noqa: BLE001 - a hint is never worth failing the call over
                    extra = ""
                self._hint = None  # also lets go of the workspace
            self._full = f"{self._base}\n{extra}" if extra else self._base
        return self._full

    @message.setter
    def message(self, value: str) -> None:
        self._base = value
        self._full = None

    def __str__(self) -> str:
        return self.message


def attach(ws: Workspace, loc: Location, error: ToolError) -> ToolError:
    """`error`, carrying a lazy hint when it says that `loc` was not found."""
    if type(error) is not PathError or error.kind != ErrorKind.FILE_NOT_FOUND:
        return error
    return MissingPath(error.message, lambda: hint_text(ws, loc))


class HintedWorkspace(Workspace):
    """The gateway whose not-found errors, and tools' own not-found messages, name the likely paths."""

    def missing(self, loc: Location, error: ToolError) -> ToolError:
        return attach(self, loc, error)

    def path_hint(self, loc: Location) -> str:
        text = hint_text(self, loc)
        return f"\n{text}" if text else ""


def hint_text(ws: Workspace, loc: Location) -> str:
    """The hint line(s) for `loc`, which was not found; empty when there is nothing useful to say."""
    if not 0 <= loc.root < len(ws.roots):  # a closed workspace, or a place that is not under a root
        return ""
    search = _Search(ws)
    asked = _parts(loc.rel)
    if asked is None:
        return ""
    for guess in _readings(ws, loc.root, asked):
        search.consider(guess)
    found = search.best()
    if found:
        items = [f"{shown} ({', '.join(notes)})" for shown, notes in found]
        if len(items) == 1:
            return f"Did you mean: {items[0]}?"
        return f"Did you mean one of: {', '.join(items)}?"
    return "\n".join(_fallback(search, loc.root, asked))


@dataclass(frozen=True)
class _Guess:
    """A path that may be the one meant, and how it differs from what was asked."""

    root: int
    parts: tuple[str, ...]
    notes: tuple[str, ...] = ()
    rank: int = READING
    score: float = 1.0

    def changed(self, index: int, name: str, note: str, rank: int, score: float) -> _Guess:
        parts = (*self.parts[:index], name, *self.parts[index + 1 :])
        notes = self.notes if note in self.notes else (*self.notes, note)
        return _Guess(self.root, parts, notes, max(self.rank, rank), min(self.score, score))


@dataclass
class _Search:
    """One hint's lookup: the suggestions found so far, the budget left, and what was read (each directory
    and each root's ignore rules once)."""

    ws: Workspace
    listings: int = MAX_LISTINGS
    ratios: int = MAX_RATIOS
    deadline: float = field(default_factory=lambda: time.monotonic() + DEADLINE)
    found: dict[str, _Guess] = field(default_factory=dict)
    names_cache: dict[tuple[int, str], tuple[list[tuple[str, bool | None]], bool]] = field(default_factory=dict)
    rules_cache: dict[int, IgnoreRules] = field(default_factory=dict)
    missing: tuple[int, bool] | None = None  # for the request itself: (first missing index, it is a file)

    def consider(self, guess: _Guess) -> None:
        """Record `guess` if it exists as it is; otherwise resolve it leniently."""
        if guess.notes and self._record(guess):
            return
        index, is_file = self._first_missing(guess)
        if not guess.notes and self.missing is None:
            self.missing = (index, is_file)
        self._lenient(guess, index)

    def best(self) -> list[tuple[str, tuple[str, ...]]]:
        ranked = sorted(self.found.items(), key=lambda item: (item[1].rank, -item[1].score, item[0]))
        return [(shown, guess.notes) for shown, guess in ranked[:MAX_SHOWN]]

    def _lenient(self, guess: _Guess, index: int) -> None:
        """Try the names in the deepest existing directory that are like the first missing component; when
        that component is a directory, also the final name found right there."""
        if index >= len(guess.parts):
            return
        parent = guess.parts[:index]
        last = index == len(guess.parts) - 1
        for name, note, rank, score in self._like(guess.root, parent, guess.parts[index], not last):
            better = guess.changed(index, name, note, rank, score)
            if last:
                self._record(better)
            else:
                self._descend(better, index + 1)
        if last:
            return
        final, moved = guess.parts[-1], (*guess.notes, "in the deepest existing directory")
        rank = max(guess.rank, ELSEWHERE)
        self._record(_Guess(guess.root, (*parent, final), moved, rank, EXACT))
        for name, note, _, score in self._like(guess.root, parent, final, False):
            self._record(_Guess(guess.root, (*parent, name), (*moved[:-1], note, moved[-1]), rank, score))

    def _descend(self, guess: _Guess, start: int) -> None:
        index, _ = self._first_missing(guess, start)
        if index >= len(guess.parts):
            self._record(guess)
        elif self._affordable():
            self._lenient(guess, index)

    def _like(
        self, root: int, parent: tuple[str, ...], want: str, dirs_only: bool
    ) -> list[tuple[str, str, int, float]]:
        """`(name, note, rank, score)` of up to `BRANCHING` visible names in `parent` like `want`, best first.
        `dirs_only` leaves out what is known not to be a directory (a symlink may be one)."""
        names, complete = self.names(root, parent)
        if not complete:
            names = names + self._case_probes(root, parent, want, names)
        rules = self.rules(root)
        similar, spent = _similar(want, names, self.ratios)
        self.ratios -= spent
        similar.sort(key=lambda m: (m[3], -m[4], m[0]))
        picked = []
        for name, is_dir, note, rank, score in similar:
            if dirs_only and is_dir is False:
                continue
            if not rules.ignored("/".join((*parent, name)), bool(is_dir)):
                picked.append((name, note, rank, score))
                if len(picked) == BRANCHING:
                    break
        return picked

    def _first_missing(self, guess: _Guess, start: int = 0) -> tuple[int, bool]:
        """The index of the first component that is not an existing directory (the last one may be
        anything), and whether it is a file standing where a directory was needed."""
        parts = guess.parts
        for index in range(start, len(parts)):
            node = self._open(guess.root, parts[: index + 1])
            if node is None:
                return index, False
            with node:
                if index < len(parts) - 1 and not node.is_dir:
                    return index, True
        return len(parts), False

    def _record(self, guess: _Guess) -> bool:
        """Keep `guess` if it exists and may be shown: not protected, not ignored, not what was asked."""
        rel = "/".join(guess.parts)
        if not guess.notes or protected_reason(rel):
            return False
        node = self._open(guess.root, guess.parts)
        if node is None:
            return False
        with node:
            hidden = (
                protected_reason(node.rel)
                or self.rules(guess.root).ignored(rel, node.is_dir)
                or self.rules(node.root).ignored(node.rel, node.is_dir)
            )
        if hidden:
            return False
        shown = self.ws.shown_path(guess.root, rel)
        if shown not in self.found or _better(guess, self.found[shown]):
            self.found[shown] = guess
        return True

    def _open(self, root: int, parts: tuple[str, ...]):  # -> Node | None
        rel = "/".join(parts)
        try:
            return self.ws.open_node(Location(root, rel, self.ws.shown_path(root, rel)))
        except (ToolError, OSError):
            return None

    def _case_probes(self, root: int, parent: tuple[str, ...], want: str,
                     names: list[tuple[str, bool | None]]) -> list[tuple[str, bool | None]]:
        """In a directory too big to read whole, the usual case slips of `want` are looked up by name."""
        seen = {name for name, _ in names}
        out: list[tuple[str, bool | None]] = []
        for variant in dict.fromkeys((want.lower(), want.upper(), want.capitalize())):
            if variant == want or variant in seen or protected_name(variant):
                continue
            node = self._open(root, (*parent, variant))
            if node is not None:
                with node:
                    out.append((variant, node.is_dir))
        return out

    def names(self, root: int, parts: tuple[str, ...]) -> tuple[list[tuple[str, bool | None]], bool]:
        """The `_scan` of a directory, read once: `(names, complete)`. Nothing when out of budget or
        unreadable."""
        key = (root, "/".join(parts))
        if key in self.names_cache:
            return self.names_cache[key]
        if not self._affordable():
            return [], True
        self.listings -= 1
        loc = Location(root, key[1], self.ws.shown_path(root, key[1]))
        try:
            with self.ws.open_dir(loc) as (_, fd):
                listed = _scan(fd)
        except (ToolError, OSError):
            listed = [], True
        self.names_cache[key] = listed
        return listed

    def rules(self, root: int) -> IgnoreRules:
        if root not in self.rules_cache:
            self.rules_cache[root] = self.ws.ignore_rules(root, DEFAULT_RULES)
        return self.rules_cache[root]

    def _affordable(self) -> bool:
        return self.listings > 0 and time.monotonic() < self.deadline


def _better(new: _Guess, old: _Guess) -> bool:
    return (new.rank, -new.score, len(new.notes)) < (old.rank, -old.score, len(old.notes))


def _scan(fd: int) -> tuple[list[tuple[str, bool | None]], bool]:
    """Up to `MAX_ENTRIES` entries of the directory open at `fd`, protected names left out, and whether that
    was all of them. Each is `(name, is_dir)`, `is_dir` None for a symlink (it is not followed to find out)."""
    out: list[tuple[str, bool | None]] = []
    with _scandir(fd) as it:
        for count, entry in enumerate(islice(it, MAX_ENTRIES + 1)):
            if count == MAX_ENTRIES:
                return out, False
            if protected_name(entry.name):
                continue
            try:
                is_dir = None if entry.is_symlink() else entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            out.append((entry.name, is_dir))
    return out, True


def _readings(ws: Workspace, root: int, parts: tuple[str, ...]) -> list[_Guess]:
    """The request as asked, then the other ways of reading the same argument."""
    out = [_Guess(root, parts)]
    at = next((i for i, p in enumerate(parts) if p.startswith("@")), None)
    if at is not None:
        stripped = parts[at][1:]
        if stripped:
            rest = _parts("/".join((*parts[:at], stripped, *parts[at + 1 :])))
            if rest:
                out.append(_Guess(root, rest, ("without the @",)))
        else:  # `@/abs/path`
            out += _absolute(ws, "/" + "/".join(parts[at + 1 :]), "without the @")
    if parts:
        out += _absolute(ws, "/" + "/".join(parts), "read as an absolute path")
    for index, other in enumerate(ws.roots):
        if parts and len(parts) > 1 and parts[0] == os.path.basename(other.shown.rstrip("/")):
            note = "from the root's own name" if index == root else "in another workspace root"
            out.append(_Guess(index, parts[1:], (note,)))
        if index != root:
            out.append(_Guess(index, parts, ("in another workspace root",)))
    return out


def _absolute(ws: Workspace, path: str, note: str) -> list[_Guess]:
    for root in ws.roots:
        for prefix in dict.fromkeys((root.shown, root.path)):
            rest = strip_prefix(path, prefix)
            if rest is not None:
                parts = _parts(rest)
                index = ws.roots.index(root)
                return [_Guess(index, parts, (note,))] if parts else []
    return []


def _parts(rel: str) -> tuple[str, ...] | None:
    """`rel` as components, `..` applied lexically; None when it climbs above the root."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        norm = os.path.normpath("/".join(parts))
        if norm == ".." or norm.startswith("../"):
            return None
        parts = [p for p in norm.split("/") if p not in ("", ".")]
    return tuple(parts)


def _similar(want: str, names: list[tuple[str, bool | None]], ratios: int) -> tuple[list[tuple], int]:
    """`(name, is_dir, note, rank, score)` for each name like `want` (the same up to case or Unicode form; one
    edit apart; or a difflib ratio of at least `CUTOFF`), and how many ratios that took. A ratio is the
    costly step, so at most `ratios` are computed; past that, only the cheap kinds are found."""
    key = _fold(want)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(key)
    found, spent = [], 0
    for name, is_dir in names:
        if name == want:
            continue
        other = _fold(name)
        if other == key:
            note = "differs in case" if name.casefold() == want.casefold() else "differs in Unicode form"
            found.append((name, is_dir, note, CASE, EXACT))
        elif _one_edit(key, other):
            found.append((name, is_dir, "similar name", SIMILAR, ONE_EDIT))
        elif spent < ratios and _plausible(key, other):
            matcher.set_seq1(other)
            if matcher.real_quick_ratio() >= CUTOFF and matcher.quick_ratio() >= CUTOFF:
                spent += 1
                score = matcher.ratio()
                if score >= CUTOFF:
                    found.append((name, is_dir, "similar name", SIMILAR, score))
    return found, spent


def _plausible(a: str, b: str) -> bool:
    """A cheap length test: names this different in length are neither close nor one edit apart."""
    short, long = sorted((len(a), len(b)))
    return long - short <= 1 or short * 3 >= long * 2


def _one_edit(a: str, b: str) -> bool:
    """Are `a` and `b` (at least 3 characters) one insertion, deletion, substitution or swap of neighbours
    apart?"""
    if min(len(a), len(b)) < 3 or abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    if len(a) == len(b):
        if a[start + 1 :] == b[start + 1 :]:
            return True
        return a[start : start + 2] == b[start : start + 2][::-1] and a[start + 2 :] == b[start + 2 :]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return short[start:] == long[start + 1 :]


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name.casefold())


def _fallback(search: _Search, root: int, asked: tuple[str, ...]) -> list[str]:
    """Without a suggestion: which directory on the path is missing, and the roots when there are several."""
    lines = []
    ws = search.ws
    if search.missing is not None:
        index, is_file = search.missing
        if index < len(asked) - 1:
            rel = "/".join(asked[: index + 1])
            shown = ws.shown_path(root, rel)
            if not is_file and _not_found(ws, Location(root, rel, shown)):
                lines.append(f"The directory {shown} does not exist.")
            elif is_file and _visible_file(search, root, asked[: index + 1]):
                lines.append(f"{shown} is a file, not a directory.")
    if len(ws.roots) > 1:
        lines.append(f"Workspace roots: {', '.join(ws.root_list())}.")
    return lines


def _visible_file(search: _Search, root: int, parts: tuple[str, ...]) -> bool:
    rel = "/".join(parts)
    return not protected_reason(rel) and not search.rules(root).ignored(rel, False)


def _not_found(ws: Workspace, loc: Location) -> bool:
    """Is `loc` simply absent (not refused, say, as a symlink that leads out of the workspace)?"""
    try:
        return not ws.exists(loc)
    except ToolError:
        return False
