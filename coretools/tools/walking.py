"""Walks shared by the tools that enumerate files (glob, read_many_files): where to start, how to match
glob patterns, and progress and cancellation while a large tree is walked in a worker thread.

The files below a directory come from `rg --files` run with the very rules the ripgrep search uses
(`ripgrep.rg_rules`), when the binary runs and the rules can be expressed, else from `Workspace.walk`.
rg only names files; nothing is shown on its word alone: each path is re-checked (`ripgrep.Recheck`:
protected names, and the ignore sources rg could judge differently) and the chosen ones are stat'ed through
the gateway (`Workspace.lstat_many`: beneath the root's descriptor, no symlink followed), which drops
anything that is not a regular file inside the root any more.

What the rules left out is counted only on request (`count_ignored`, read_many_files' "N file(s) ignored"):
rg then logs every entry it skips (`--debug`, costly per line) and cannot filter by name. Without it (glob),
rg is given the file-name part of the pattern as a `--glob`, so it neither matches ignore rules against
nor prints the files that cannot match; the re-check then judges the files it lists by every rule that
could hide their name (a `--glob` beats ignore rules in rg).
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import anyio
import anyio.from_thread

from coretools.errors import ToolError
from coretools.server.ignore import IgnoreOptions
from coretools.server.workspace import DirEntry, Location, NoFollowView, WalkBounds, WalkReport, Workspace
from coretools.tools.base import ToolContext

PROGRESS_EVERY = 2000
RG_WALK_TIMEOUT = 600.0


# wcmatch is imported on first use: it costs ~6 MB of RSS, which a server that never globs need not pay.
def globmatch(rel: str, patterns: str | list[str], case_sensitive: bool = False) -> bool:
    """Glob matching of a relative path: `**` (globstar), braces, extglob, dot files, `!` negation."""
    key = patterns if isinstance(patterns, str) else tuple(patterns)
    return _matcher(key, case_sensitive)(rel)


@functools.lru_cache(maxsize=256)
def _matcher(patterns: str | tuple[str, ...], case_sensitive: bool) -> Callable[[str], bool]:
    # wcmatch's own regexes, compiled once and used directly: `globmatch` (and a compiled matcher) set up
    # per call what only the file-system-aware modes need, ~10x the cost of the match. Without REALPATH a
    # path matches when an include regex matches it whole and no exclude (`!` pattern) does.
    import re

    from wcmatch import glob as wglob

    flags = wglob.GLOBSTAR | wglob.BRACE | wglob.EXTGLOB | wglob.DOTGLOB | wglob.NEGATE | wglob.GLOBSTARLONG
    if not case_sensitive:
        flags |= wglob.IGNORECASE
    include, exclude = wglob.translate(patterns if isinstance(patterns, str) else list(patterns), flags=flags)
    inc = [re.compile(p).fullmatch for p in include]
    exc = [re.compile(p).fullmatch for p in exclude]
    if len(inc) == 1 and not exc:
        only = inc[0]
        return lambda path: only(path) is not None
    return lambda path: any(m(path) for m in inc) and not any(m(path) for m in exc)


def glob_escape(pattern: str) -> str:
    from wcmatch import glob as wglob

    return wglob.escape(pattern)


def name_matches(name: str, patterns: list[str]) -> bool:
    """Match a bare file name against glob patterns (braces and extglob, dot files included)."""
    from wcmatch import fnmatch

    return fnmatch.fnmatch(name, patterns, flags=fnmatch.BRACE | fnmatch.EXTMATCH | fnmatch.DOTMATCH)


def has_magic(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[]{}!@+()")


@dataclass
class Scope:
    """A directory to walk and how paths below it are shown."""

    loc: Location
    shown: str  # absolute path of the directory, as shown to the model


def search_scopes(ws: Workspace, path: str | None) -> list[Scope]:
    """The directory named by `path` (which must be a directory inside the workspace), or every root."""
    if not path:
        return [Scope(Location(i, "", r.shown), r.shown) for i, r in enumerate(ws.roots)]
    loc = ws.locate(path)
    with ws.open_node(loc) as node:
        if not node.is_dir:
            raise ToolError(f"Search path is not a directory: {node.path}", "path_is_not_a_directory")
        return [Scope(Location(node.root, node.rel, node.path), node.path)]


def split_literal_prefix(pattern: str) -> tuple[str, str]:
    """`src/app/**/*.py` -> (`src/app`, `**/*.py`): the leading components without glob magic, so a walk can
    start there instead of at the top."""
    parts = pattern.split("/")
    literal: list[str] = []
    while len(parts) > 1 and parts[0] and not has_magic(parts[0]) and parts[0] not in (".", ".."):
        literal.append(parts.pop(0))
    return "/".join(literal), "/".join(parts)


def walk_files(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    ctx: ToolContext | None,
    report: WalkReport,
    *,
    bounds: WalkBounds | None = None,
    select: Callable[[str], bool] | None = None,
    names: NameFilter | None = None,
    count_ignored: bool = True,
    ordered: bool = True,
) -> Iterator[DirEntry]:
    """The files below the directory `loc` that the ignore rules let through, in the walk's order (depth
    first, names sorted, a directory's files before its subdirectories), from a worker thread with progress
    notifications and cancellation checks. `select(path relative to loc)`, if given, picks files before
    they are stat'ed (cheap for a glob over a big tree); `names` (see `name_filter`) is a cheaper test of
    the same choice that rg's paths are given first. `report.ignored` counts what the rules left out (an
    ignored directory once) only if `count_ignored`; otherwise rg filters by `names` itself and the count
    is not kept (the Python walk keeps it anyway). `ordered=False`: any order (the caller sorts)."""
    bounds = bounds or WalkBounds()

    def check() -> None:
        anyio.from_thread.check_cancelled()

    found: list[tuple[str, os.stat_result]] = []
    views: dict[int, NoFollowView] = {}
    exact = names is not None and names.exact
    reported = [0]

    def take(root: int, base: str, rels: list[str]) -> None:
        # called for each batch while rg is still listing: the stats overlap with its walk
        if select is not None and not exact:
            cut = len(base) + 1 if base else 0
            rels = [rel for rel in rels if select(rel[cut:])]
        view = views.get(root) or views.setdefault(root, ws.no_follow(root))
        found.extend((rel, st) for rel, st in zip(rels, view.lstat_many(rels)) if st and stat.S_ISREG(st.st_mode))
        if ctx is not None and len(found) - reported[0] >= PROGRESS_EVERY:
            reported[0] = len(found)
            _progress(ctx, len(found), f"found {len(found)} files")

    try:
        listed = rg_files(ws, loc, options, report, bounds, check, names, take, count_ignored)
    finally:
        for view in views.values():
            view.close()
    if listed is not None:
        if ordered:
            found.sort(key=lambda item: walk_order(item[0]))
        for rel, st in found:
            yield DirEntry(rel.rpartition("/")[2], rel, "file", st.st_size, st.st_mtime)
        return
    count = 0
    for entry in ws.walk(loc, options, bounds=bounds, report=report, cancelled=check):
        count += 1
        if ctx is not None and count % PROGRESS_EVERY == 0:
            _progress(ctx, count, f"walked {count} files")
        if select is None or select(relative_to(entry.rel, loc.rel)):
            yield entry


def walk_order(rel: str) -> str:
    """A sort key that puts root-relative file paths in `Workspace.walk`'s order: in each directory its
    files (by name) come before its subdirectories (by name). NUL and SOH sort below every name character."""
    head, _, name = rel.rpartition("/")
    return ("\x01" + head.replace("/", "\x00\x01") + "\x00\x00" if head else "\x00") + name


def rg_files(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    report: WalkReport,
    bounds: WalkBounds,
    check: Callable[[], None],
    names: NameFilter | None = None,
    take: Callable[[int, str, list[str]], None] | None = None,
    count_ignored: bool = True,
) -> tuple[int, str, list[str]] | None:
    """`(root, directory, root-relative paths)` of the files below the directory `loc` per `rg --files`
    with our rules (re-checked, not yet stat'ed; only those `names` accepts, if given), or None when rg
    cannot be used (no binary, rules rg cannot express): then the caller walks. `take(root, directory,
    paths)`, if given, receives them batch by batch as rg lists them.

    With `count_ignored`, `report.ignored` counts what the rules left out as the walk would (an ignored
    directory once): rg logs each entry it skips at --debug level, and the re-check counts what it drops.
    rg is then not given `names`: every file it skipped for its name would cost a debug line, far more than
    the test here. Without it, rg gets `names.glob` as a `--glob` (and, for a top-level pattern,
    `--max-depth 1`); since that whitelists matching files past the ignore rules, the re-check judges every
    listed path by all of them (files only where `ripgrep.NameRules` says a rule could hide the name), and
    `names.regex` still decides (rg's glob is a superset where case folding differs)."""
    from coretools.server import ripgrep

    binary = ripgrep.find_rg()
    if binary is None:
        return None
    with ws.open_dir(loc) as (node, dir_fd):
        rules = ripgrep.rg_rules(
            lambda rel: ws.ignore_source(node.root, rel), node.rel, options, ws.allow_protected
        )
        if rules is None:
            return None
        depth, extra = bounds.max_depth, []
        if count_ignored or names is None:
            recheck_options, files = rules.recheck_options(options), None
            if count_ignored:
                extra.append("--debug")
        else:
            # A --glob whitelists the files it matches past every ignore rule (directories are still pruned
            # unless their own name matches), so each listed path is judged by all our rules again, files
            # only where a rule could hide their name at all (in a source tree: hardly anywhere).
            extra += ["--glob", names.glob]
            depth = min(depth, 1) if names.top else depth
            recheck_options = options
            files = ripgrep.NameRules(lambda rel: ws.ignore_source(node.root, rel), options, list(names.names))
        recheck = ripgrep.Recheck.of(ws, node.root, node.rel, recheck_options, ws.allow_protected, files)
        argv = [binary, "--files", "--null", *extra, "--max-depth", str(depth), *rules.flags, "."]
        # (our --glob comes before rules.flags: their `!.git` override, later, wins over it)
        run = ripgrep.RgRun(
            argv, ripgrep.dir_cwd(dir_fd, node.path), rules.ignore_files, timeout=RG_WALK_TIMEOUT, check=check,
            sep=b"\0", count_in_stderr=_ignored_by_rules if count_ignored else None,
        )
        wanted = names.regex.search if names is not None else None
        # Every path the re-check drops counts as ignored, as in the walk, so when counting, a path `names`
        # rejects is still re-checked when the check involves rules, or when it can hit a protected name
        # (those start with a dot).
        judge_all = count_ignored and recheck.rules is not None
        judge_dotted = count_ignored
        prefix = f"{node.rel}/" if node.rel else ""
        visible = recheck.visible
        found: list[str] = []
        for batch in run.records():
            start = len(found)
            for raw in batch:
                if wanted is not None and wanted(raw) is None:
                    if judge_all or (judge_dotted and b"/." in raw):
                        visible(raw[2:].decode("utf-8", "surrogateescape"))
                    continue
                rel = raw[2:].decode("utf-8", "surrogateescape")  # rg was asked for ".": "./" first
                if visible(rel):
                    found.append(prefix + rel)
            if len(found) > bounds.max_entries:
                del found[bounds.max_entries :]
                report.truncated = f"stopped after {bounds.max_entries} entries"
            if take is not None and len(found) > start:
                take(node.root, node.rel, found[start:])
            if report.truncated:
                break
        if run.returncode == 2 and not found and not run.stopped:
            return None  # rg refused the arguments (it printed nothing): walk instead
        if run.stopped and not report.truncated:
            report.truncated = run.stopped.replace("the search", "the walk")
        if count_ignored:
            report.ignored += run.stderr_hits + recheck.hidden
        return node.root, node.rel, found


def _ignored_by_rules(debug_line: bytes) -> bool:
    # rg --debug logs each entry it skips: "...walk.rs:NNN: ignoring ./path: Ignore(IgnoreMatch(...))".
    return b": ignoring ./" in debug_line


@dataclass(frozen=True)
class NameFilter:
    """A test of rg's raw paths (`./a/b.py`) that accepts every path a glob matches; `exact`: only those.
    `glob`: a file-name glob for rg (globset syntax) that accepts at least the names `regex` does; `top`:
    only files directly in the walked directory can match."""

    regex: re.Pattern[bytes]
    exact: bool
    glob: str = "*"
    top: bool = False
    names: tuple[str, ...] = ()  # the name part of the pattern, braces expanded (text and `*`)


_PLAIN = r"[A-Za-z0-9._\- ]"
# `*` may not stand inside a `{a,b}` list: `*{*,x}` expands to a globstar.
_NAME_GLOB = re.compile(rf"[A-Za-z0-9._\- *]*(?:\{{{_PLAIN}+(?:,{_PLAIN}+)+\}}[A-Za-z0-9._\- *]*)*")
# Python's case-insensitive matching (which wcmatch uses) pairs these ASCII letters with non-ASCII ones too.
_UNICODE_FOLDS = {"i": "iI\u0130\u0131", "k": "kK\u212a", "s": "sS\u017f"}


def name_filter(pattern: str, case_sensitive: bool) -> NameFilter | None:
    """A `NameFilter` for a glob relative to the walked directory (as `globmatch` reads it), or None. Only a
    last component made of plain ASCII characters, `*` and flat `{a,b}` lists of plain words qualifies; it is
    exact for `**/<name>` and for a top-level `<name>`, and a superset (the file name only) otherwise."""
    if pattern.startswith("**/") and "/" not in pattern[3:]:
        head, name, exact = b"/", pattern[3:], True
    elif "/" not in pattern:
        head, name, exact = rb"\A\./", pattern, True
    else:
        head, name, exact = b"/", pattern.rpartition("/")[2], False
    if not name or "**" in name or _NAME_GLOB.fullmatch(name) is None or name.strip("*") == "":
        return None
    body, glob, expanded = [], [], [""]
    for token in re.findall(r"\{[^{}]*\}|.", name):
        alts = token[1:-1].split(",") if len(token) > 1 else [token]
        if len(token) > 1:
            body.append(b"(?:" + b"|".join(_name_regex(alt, case_sensitive) for alt in alts) + b")")
            glob.append("{" + ",".join(_name_glob(alt, case_sensitive) for alt in alts) + "}")
        else:
            body.append(_name_regex(token, case_sensitive))
            glob.append(_name_glob(token, case_sensitive))
        expanded = [done + alt for done in expanded for alt in alts] if len(expanded) * len(alts) <= 64 else ["*"]
    regex = re.compile(head + b"".join(body) + rb"\Z", re.DOTALL)
    names = tuple(re.sub(r"\*+", "*", n) for n in expanded)
    return NameFilter(regex, exact, re.sub(r"\*+", "*", "".join(glob)), top=head != b"/", names=names)


def _name_glob(text: str, case_sensitive: bool) -> str:
    # The characters allowed here are literal in globset except `*`; a letter that Python's case folding
    # pairs with a non-ASCII one becomes `*` (a superset: the regex decides), others a two-letter class.
    out = []
    for ch in text:
        if case_sensitive or not ch.isalpha():
            out.append(ch)
        elif ch.lower() in _UNICODE_FOLDS:
            out.append("*")
        else:
            out.append(f"[{ch.lower()}{ch.upper()}]")
    return "".join(out)


def _name_regex(text: str, case_sensitive: bool) -> bytes:
    out = []
    for ch in text:
        if ch == "*":
            out.append(b"[^/]*")
        elif case_sensitive or not ch.isalpha():
            out.append(re.escape(ch.encode()))
        else:
            folds = _UNICODE_FOLDS.get(ch.lower(), ch.lower() + ch.upper())
            out.append(b"(?:" + b"|".join(re.escape(f.encode()) for f in folds) + b")")
    return b"".join(out)


def _progress(ctx: ToolContext, done: int, message: str) -> None:
    try:
        anyio.from_thread.run(ctx.progress, float(done), None, message)
    except RuntimeError:  # not in a worker thread of an event loop (direct use): no progress
        pass


def relative_to(entry_rel: str, base_rel: str) -> str:
    return entry_rel[len(base_rel) + 1 :] if base_rel else entry_rel
