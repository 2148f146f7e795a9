"""glob: files matching a glob pattern, recently modified first."""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import operator
import time
from collections.abc import Callable
from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import (
    MAX_GLOB_CHARS, FileTable, IgnoreOptions, Location, Scope, WalkBounds, WalkReport, Workspace,
    check_rg_argument, depth_cut, find_files, glob_escape, globmatch, has_magic, name_filter, search_scopes,
    split_literal_prefix, strip_prefix, walk_order,
)
from coretools.workspace import (
    RESPECT_PARAMETERS, Ignored, describe_chain, ignored_by, ignored_chain, include_hint,
)
from coretools.tools.budget import lines_that_fit
from coretools.tools.dialects import latest_from
from coretools.tools.base import Tool, ToolContext, ToolResult, check_cancelled

RECENT_SECONDS = 24 * 3600
MAX_RESULTS = 5000
MAX_PREFIX_DIRS = 64  # case variants of a pattern's literal directories followed at each level


class Glob(Tool):
    name = "glob"
    title = "Find files"
    narrowing = "use a more specific pattern or search a smaller directory"
    skips_ignored = True
    hint = "find files by name pattern, such as '**/*.py'."
    description = (
        "Efficiently finds files matching a glob pattern (e.g. 'src/**/*.ts', '**/*.{md,txt}', 'docs/*.md'), "
        "returning absolute paths sorted with files modified in the last 24 hours first (newest first), then "
        "alphabetically. '**' matches any number of directories; a pattern without '/' matches only at the top "
        "of the search directory. Files hidden by .gitignore, .geminiignore and default excludes are skipped; "
        "when nothing matches, the answer says how many files matching the pattern .gitignore/.geminiignore "
        "hid (that count is not given when files are found)."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "The glob pattern to match against, e.g. '**/*.py' or 'docs/*.md'.",
            },
            "path": {
                "type": "string",
                "description": "Optional: the absolute path of the directory to search within. If omitted, every "
                "workspace root is searched.",
            },
            "case_sensitive": {
                "type": "boolean",
                "description": "Optional: whether matching is case-sensitive. Defaults to false.",
                "default": False,
            },
            "respect_git_ignore": {
                "type": "boolean",
                "description": "Optional: whether to skip files matched by .gitignore. Defaults to true.",
                "default": True,
            },
        },
        "required": ["pattern"],
    }
    aliases = {"dir_path": "path"}
    extra_properties = {
        "respect_gemini_ignore": {
            "type": "boolean",
            "description": "Optional: whether to skip files matched by .geminiignore. Defaults to true.",
            "default": True,
        },
    }
    latest_schema = latest_from(input_schema, rename={"path": "dir_path"}, add=extra_properties)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await anyio.to_thread.run_sync(self._glob, args, ctx)

    def _glob(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        pattern = args["pattern"].strip()
        if not pattern:
            raise ToolError("The 'pattern' parameter cannot be empty.", ErrorKind.INVALID_TOOL_PARAMS)
        check_rg_argument("pattern", pattern, MAX_GLOB_CHARS)
        scopes = search_scopes(ws, args.get("path"))
        options = IgnoreOptions(
            git=args["respect_git_ignore"], gemini=args.get("respect_gemini_ignore", True), defaults=True
        )
        case_sensitive = args["case_sensitive"]
        report = WalkReport()
        now = time.time()
        keep = functools.partial(_keep_first, now, MAX_RESULTS)  # (every match counted, the first ones kept)
        starts = _starts(ws, scopes, pattern, case_sensitive, options)
        found = [
            _matching(ws, base, rest, case_sensitive, options, ctx, report, keep)
            for base, rest, chain in starts
            if not chain
        ]  # (one table per start directory)
        skipped = [chain for _, _, chain in starts if chain]
        notes = [_skipped_note(chain) for chain in skipped]
        extra = {"ignored_dirs": [_skip_record(chain) for chain in skipped]} if skipped else {}
        where = scopes[0].shown if len(scopes) == 1 else f"{len(scopes)} workspace directories"
        within = "within" if len(scopes) == 1 else "across"
        total = sum(table.found for table in found)
        if not total:
            searched = [(base, rest) for base, rest, _ in starts]
            ignored = _hidden_matches(ws, searched, case_sensitive, options, ctx)
            text = f'No files found matching pattern "{pattern}" {within} {where}'
            if ignored:
                text += f" ({ignored} files were ignored)"
            bounded = report.truncated or _depth_cut(ws, [s for s in starts if not s[2]], options)
            if bounded:
                notes.insert(0, f"(The walk was bounded: {bounded}; a file there may match.)")
            text = " ".join([text + ".", *notes])
            return ToolResult.text(text, {"files": [], "ignored": ignored, **extra})
        header = f'Found {total} file(s) matching "{pattern}" {within} {where}'
        header += ", sorted by modification time (newest first):"
        shown = first_in_order(ws, found, now, MAX_RESULTS)
        shown = shown[: lines_that_fit(shown, ctx.result_chars)]
        text = header + "\n" + "\n".join(shown)
        if total > len(shown):
            text += (
                f"\n... {total - len(shown)} more not shown (this answer lists {len(shown)} of {total}); use a "
                "narrower pattern (such as 'src/**/*.py') or a path (dir_path) to see the others."
            )
        if report.truncated:
            text += f"\n(The walk was bounded: {report.truncated}.)"
        text += "".join(f"\n({note})" for note in notes)
        # The ignored count is only worked out when nothing matched (see _hidden_matches).
        return ToolResult.text(text, {"files": shown, "total": total, "ignored": None, **extra})


def _keep_first(now: float, limit: int, table: FileTable) -> None:
    """`find_files`' `keep`: of the rows of `table`, the first `limit` in glob's order (see `first_in_order`)
    stay; the others are only counted (`table.passed`)."""
    rels, mtimes, sizes = table.rels, table.mtimes, table.sizes
    rows = _recent_rows(mtimes, now, lambda row: walk_order(rels[row]), limit)[:limit]
    if len(rows) < limit:
        older = (row for row, mtime in enumerate(mtimes) if now - mtime >= RECENT_SECONDS)
        rows += heapq.nsmallest(limit - len(rows), older, key=rels.__getitem__)
    table.passed += len(rels) - len(rows)
    table.rels = [rels[row] for row in rows]
    table.mtimes = [mtimes[row] for row in rows]
    table.sizes = [sizes[row] for row in rows]


def _count_only(table: FileTable) -> None:
    """`find_files`' `keep` for a walk that only counts (`_hidden_matches`)."""
    table.passed += len(table.rels)
    table.rels, table.mtimes, table.sizes = [], [], []


def _depth_cut(ws: Workspace, starts: list[tuple[Location, str, list[Ignored]]], options: IgnoreOptions) -> str | None:
    """Where the walk of a pattern that found nothing was cut for depth, if it was (a walk of directories
    only: rg does not say). Patterns that match only in their start directory are not walked."""
    for base, rest, _ in starts:
        if "/" in rest or "**" in rest:
            where = depth_cut(ws, base, options, WalkBounds().max_depth, check_cancelled)
            if where:
                return where
    return None


def first_in_order(ws: Workspace, tables: list[FileTable], now: float, limit: int) -> list[str]:
    """The shown paths of the first `limit` files of `tables` (one per start directory, in order) in glob's
    order: files modified in the last 24 hours newest first, equal times in walk order table by table, then
    the others by shown path. Rows are sorted as numbers into the columns, not as an object per file (see
    `FileTable`), and only the paths shown are built."""
    if len(tables) == 1:
        return _first_in_order_one(ws, tables[0], now, limit)
    rels: list[str] = []
    mtimes: list[float] = []
    starts: list[int] = []  # the first row of each table
    for table in tables:
        starts.append(len(rels))
        rels += table.rels
        mtimes += table.mtimes

    def scope(row: int) -> int:
        return bisect.bisect_right(starts, row) - 1

    def shown(row: int) -> str:
        return ws.shown_path(tables[scope(row)].root, rels[row])

    recent = _recent_rows(mtimes, now, lambda row: (scope(row), walk_order(rels[row])), limit)
    paths = [shown(row) for row in recent[:limit]]
    if len(paths) < limit and len(recent) < len(rels):
        older = [row for row, mtime in enumerate(mtimes) if now - mtime >= RECENT_SECONDS]
        paths += sorted(map(shown, older))[: limit - len(paths)]
    return paths


def _first_in_order_one(ws: Workspace, table: FileTable, now: float, limit: int) -> list[str]:
    """`first_in_order` of one scope (the usual case): its shown paths are one string followed by the
    root-relative path, so those are what is sorted, and the string is put before the ones shown."""
    rels, mtimes = table.rels, table.mtimes
    head = ws.shown_path(table.root, "x")[:-1]  # (`shown_path` puts the root's path and a separator first)
    recent = _recent_rows(mtimes, now, lambda row: walk_order(rels[row]), limit)
    paths = [head + rels[row] for row in recent[:limit]]
    if len(paths) < limit and len(recent) < len(rels):
        older = rels if not recent else [rel for rel, mtime in zip(rels, mtimes) if now - mtime >= RECENT_SECONDS]
        paths += [head + rel for rel in sorted(older)[: limit - len(paths)]]
    return paths


def _recent_rows(mtimes: list[float], now: float, tie_key: Callable[[int], object], limit: int) -> list[int]:
    """The rows modified in the last 24 hours, newest first, equal times by `tie_key` (as far as the first
    `limit` go)."""
    if not mtimes or now - max(mtimes) >= RECENT_SECONDS:
        return []
    if now - min(mtimes) < RECENT_SECONDS:  # (`now - mtime` falls as `mtime` grows, floats or not)
        recent = list(range(len(mtimes)))
    else:
        recent = [row for row, mtime in enumerate(mtimes) if now - mtime < RECENT_SECONDS]
    recent.sort(key=mtimes.__getitem__, reverse=True)  # equal times keep their rows' order...
    _sort_ties(recent, mtimes, tie_key, limit)  # ...then are put in walk order
    return recent


def _sort_ties(rows: list[int], mtimes: list[float], key: Callable[[int], object], limit: int) -> None:
    """Sort by `key`, in place, each run of `rows` that share a modification time (runs are adjacent), as far
    as the first `limit` rows go."""
    times = list(map(mtimes.__getitem__, rows[: limit + 1]))
    if not any(map(operator.eq, times, itertools.islice(times, 1, None))):
        return  # no two alike: the usual case with nanosecond times
    start = 0
    while start < min(limit, len(rows)):
        end = start + 1
        while end < len(rows) and mtimes[rows[end]] == mtimes[rows[start]]:
            end += 1
        if end - start > 1:
            rows[start:end] = sorted(rows[start:end], key=key)
        start = end


def _matching(
    ws: Workspace,
    base: Location,
    rest: str,
    case_sensitive: bool,
    options: IgnoreOptions,
    ctx: ToolContext | None,
    report: WalkReport,
    keep: Callable[[FileTable], None] | None = None,
) -> FileTable:
    """The files below `base` that the glob `rest` (relative to it) matches and `options` let through (with
    `keep`, see `find_files`)."""
    matches = functools.partial(globmatch, patterns=rest, case_sensitive=case_sensitive)
    names = name_filter(rest, case_sensitive)
    top_only = "/" not in rest and "**" not in rest  # matches only names in `base` itself
    return find_files(ws, base, options, ctx, report, names=names, select=matches, top_only=top_only, keep=keep)


def _hidden_matches(
    ws: Workspace,
    searched: list[tuple[Location, str]],
    case_sensitive: bool,
    options: IgnoreOptions,
    ctx: ToolContext | None,
) -> int:
    """How many files match the pattern but were hidden by .gitignore/.geminiignore, as Gemini CLI counts
    them: the matches of the same search with those sources off (default excludes and protected paths still
    hide, and are not counted). Only called when the search found nothing, so every such match was hidden."""
    loose = IgnoreOptions(git=False, gemini=False, defaults=options.defaults)
    if loose == options:
        return 0
    tables = (
        _matching(ws, base, rest, case_sensitive, loose, ctx, WalkReport(), _count_only)
        for base, rest in searched
        if ignored_by(ws, base.root, base.rel, loose) is None  # (a walk never judges where it starts)
    )
    return sum(table.found for table in tables)


def _starts(
    ws: Workspace, scopes: list[Scope], pattern: str, case_sensitive: bool, options: IgnoreOptions
) -> list[tuple[Location, str, list[Ignored]]]:
    """Where the pattern is matched: for each scope, each directory its literal leading components name (the
    walk starts there), the rest of the pattern relative to it, and why the rules hide that directory (empty:
    they do not). A walk never judges the directory it starts in, so that is done here."""
    starts = []
    for scope in scopes:
        local = _without_dot_prefix(pattern)
        if local.startswith("/"):  # an absolute pattern inside this scope becomes relative to it
            below = strip_prefix(local, scope.shown)
            if not below:
                continue
            local = _without_dot_prefix(below)
        if not has_magic(local) or _literal_exists(ws, scope.loc, local):
            local = glob_escape(local)  # a name such as 'file[1].txt' that exists is meant literally
        prefix, rest = split_literal_prefix(local)
        for base in _start_dirs(ws, scope.loc, prefix, case_sensitive):
            starts.append((base, rest, ignored_chain(ws, base.root, base.rel, options)))
    return starts


def _literal_exists(ws: Workspace, base: Location, pattern: str) -> bool:
    try:
        return ws.exists(ws.locate(pattern, base=base))
    except ToolError:
        return False


def _without_dot_prefix(pattern: str) -> str:
    """A leading `./` stands for the search directory, as in search_file_content's include filter:
    `./src/*.py` is `src/*.py`, `./*.md` is `*.md` (still only the top level)."""
    stripped = pattern
    while stripped.startswith("./"):
        stripped = stripped[2:].lstrip("/")
    return stripped or pattern


def _start_dirs(ws: Workspace, top: Location, prefix: str, case_sensitive: bool) -> list[Location]:
    """Where the walk for a pattern whose literal directories are `prefix` starts below `top`, rather than
    at the top: the directory spelled so, or, ignoring case, every directory whose path matches it segment
    by segment (found by listing each level through the gateway). None when it names no directory."""
    if not prefix:
        candidates = [top]
    elif case_sensitive:
        candidates = [ws.locate(prefix, base=top)]
    else:
        candidates = _case_variants(ws, top, prefix.split("/"))
    exact = ws.locate(prefix, base=top).rel if prefix else top.rel
    starts = []
    for loc in candidates:
        try:
            if not ws.exists(loc):
                continue
        except ToolError:
            if loc.rel == exact:  # (a case variant nobody spelled out is passed over instead)
                raise
            continue
        try:
            with ws.open_node(loc) as node:
                found = Location(node.root, node.rel, node.path)
                if node.is_dir and all((d.root, d.rel) != (found.root, found.rel) for d in starts):
                    starts.append(found)  # (two spellings may lead to one directory through a link)
        except ToolError:
            continue
    return starts


def _case_variants(ws: Workspace, top: Location, segments: list[str]) -> list[Location]:
    """The paths below `top` whose components match `segments` ignoring case (as glob matches names), at
    most `MAX_PREFIX_DIRS` at each level, in name order. A protected name is refused as when spelled out."""
    level = [top]
    for segment in segments:
        below: list[Location] = []
        for loc in level:
            if segment.lower() == segment.upper():  # nothing in it has a case: one spelling
                below.append(ws.locate(segment, base=loc))
                continue
            literal = glob_escape(segment)
            try:
                with ws.iter_dir(loc) as (_, entries):
                    names = sorted(
                        entry.name for entry in entries
                        if entry.kind in ("dir", "symlink") and globmatch(entry.name, literal, case_sensitive=False)
                    )
            except ToolError:
                continue
            below += [ws.locate(name, base=loc) for name in names]
        level = below[:MAX_PREFIX_DIRS]
    return level


def _skipped_note(chain: list[Ignored]) -> str:
    """What glob says of a start directory the rules hide (its files are not listed): who hides it, and
    which parameters would let glob look in it."""
    hint = include_hint(chain, RESPECT_PARAMETERS, _spell, "include it")
    return f"{describe_chain(chain)}, so glob does not look in it; {hint}."


def _spell(names: list[str]) -> str:
    return " and ".join(f"{name}: false" for name in names)


def _skip_record(chain: list[Ignored]) -> dict[str, Any]:
    return {"path": chain[0].shown, "ignored_by": [verdict.where for verdict in chain]}


TOOL = Glob
