"""The walker: the one way the tools enumerate the files below a directory (glob, read_many_files,
search_file_content's Python engine and its rg fallback), with progress and cancellation checks when
they walk a large tree in a worker thread.

`walk` is the descriptor walk: each directory opened beneath its parent's descriptor, no symlink followed,
ignored directories pruned, every entry judged by the ignore engine. `walk_files` and `find_files` take the
files below a directory from `rg --files` run with the very rules the ripgrep search uses
(`ripgrep.rg_rules`) when the binary runs and the rules can be expressed, else from `walk`. rg only names
files; nothing is shown on its word alone: each path is re-checked (`ripgrep.Recheck`: protected names, and
the ignore sources rg could judge differently) and the chosen ones are stat'ed through the gateway
(`NoFollowView.lstat_many`: beneath the root's descriptor, no symlink followed), which drops anything that
is not a regular file inside the root any more. The stats overlap with rg's walk: each batch rg prints is
stat'ed while it goes on listing.

What the rules left out is counted only on request (`count_ignored`, read_many_files' "N file(s) ignored"):
rg then logs every entry it skips (`--debug`, costly per line) and cannot filter by name. Without it (glob),
rg is given the file-name part of the pattern as `--glob`s, so it neither matches ignore rules against nor
prints the files that cannot match. A `--glob` beats ignore rules in rg, so the files it lets through are
judged by our rules afterwards, where a rule could hide them at all (`GlobRun`).

`find_files` gives what it found as a `FileTable` (columns, not an object per file) to callers that sort
and count big results (glob); `walk_files` yields `DirEntry`s in the walk's order.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.from_thread

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import durable, kernel, ripgrep
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import (
    DEFAULT_EXCLUDES, GEMINIIGNORE, GIT_INFO_EXCLUDE, GITIGNORE, IgnoreOptions, IgnoreRules,
)
from coretools.sandbox.matcher import GlobSet
from coretools.sandbox.nofollow import NoFollowView
from coretools.sandbox.paths import (
    DirEntry,
    Location,
    WalkBounds,
    WalkReport,
    dir_entry,
    protected_name,
)
from coretools.sandbox.rgglobs import NameFilter

PROGRESS_EVERY = 2000
MAX_PROBED_DIRS = 10_000  # directories `depth_cut` lists at most
RG_WALK_TIMEOUT = 600.0


class Reporter(Protocol):
    """Where a long walk reports progress (a tool's context)."""

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None: ...


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
            raise ToolError(f"Search path is not a directory: {node.path}", ErrorKind.PATH_IS_NOT_A_DIRECTORY)
        return [Scope(Location(node.root, node.rel, node.path), node.path)]


def walk(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    *,
    bounds: WalkBounds | None = None,
    report: WalkReport | None = None,
    include_dirs: bool = False,
    cancelled: Callable[[], None] | None = None,
    top_only: bool = False,
    ordered: bool = True,
) -> Iterator[DirEntry]:
    """The files below the directory `loc` (and, `include_dirs`, the directories), depth first, names
    sorted, a directory's files before its subdirectories; ignored directories pruned, symlinks never
    followed. Each directory is opened relative to its parent's descriptor with O_NOFOLLOW, so a directory
    swapped for a link after it was listed is not entered. `cancelled`, if given, is called between
    directories and may raise. `top_only`: the entries of `loc` itself, no subdirectory entered (and none
    reported as a depth cut). Not `ordered`: each directory's entries in the order the kernel reads them,
    one at a time, so a directory of a million files is not held whole to be sorted."""
    bounds = bounds or WalkBounds()
    report = report if report is not None else WalkReport()
    with ws.open_dir(loc) as (node, top_fd):
        rules = ws.ignore_rules(node.root, options)
        stack: list[tuple[int, str, int]] = [(os.dup(top_fd), node.rel, 0)]
        count = 0
        try:
            while stack:
                dir_fd, dir_rel, depth = stack.pop()
                try:
                    if cancelled is not None:
                        cancelled()
                    try:
                        listing = os.scandir(dir_fd)  # (of a duplicate of `dir_fd`, which it closes)
                    except OSError:
                        report.unreadable += 1
                        continue
                    subdirs: list[tuple[str, str]] = []
                    with listing:
                        for item in sorted(listing, key=_NAME) if ordered else listing:
                            entry = dir_entry(item, dir_rel)
                            if entry.kind == "symlink":
                                report.symlinks_skipped += 1
                                continue
                            if entry.kind not in ("dir", "file") or durable.is_temp_name(entry.name):
                                continue  # an edit's temporary file is never shown, nor counted as ignored
                            is_dir = entry.kind == "dir"
                            if hidden(ws, rules, entry.name, entry.rel, is_dir):
                                report.ignored += 1
                                continue
                            count += 1
                            if count > bounds.max_entries:
                                report.truncated = f"stopped after {bounds.max_entries} entries"
                                return
                            if is_dir:
                                if include_dirs:
                                    yield entry
                                if top_only:
                                    continue
                                if depth + 1 >= bounds.max_depth:
                                    cut = depth_note(bounds.max_depth, entry.rel)
                                    report.truncated = report.truncated or cut
                                    continue
                                subdirs.append((entry.name, entry.rel))
                            else:
                                yield entry
                    for name, rel in reversed(subdirs):
                        try:
                            sub = open_subdir(dir_fd, name)
                        except OSError:
                            report.unreadable += 1
                            continue
                        stack.append((sub, rel, depth + 1))
                finally:
                    os.close(dir_fd)
        finally:
            for fd, _, _ in stack:
                os.close(fd)


def depth_note(max_depth: int, rel: str) -> str:
    """What a walk says of the first directory it did not enter for being `max_depth` levels down."""
    shown = rel if len(rel) <= 120 else f"{rel[:60]}...{rel[-57:]}"
    return f"did not descend below depth {max_depth} (first at {shown})"


def depth_cut(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    max_depth: int,
    cancelled: Callable[[], None] | None = None,
    max_dirs: int = MAX_PROBED_DIRS,
) -> str | None:
    """Where a walk below `loc` bounded at `max_depth` would be cut (`depth_note`), or None when every
    directory it would enter is less deep, or when that was not found in the first `max_dirs` directories
    (about a second). Only directories are judged (no file is stat'ed); rg says nothing of the directories
    its `--max-depth` leaves out, and a chain of directories without files gives no file to show for it."""
    rules = ws.ignore_rules(loc.root, options)
    with ws.open_dir(loc) as (node, top_fd):
        stack: list[tuple[int, str, int]] = [(os.dup(top_fd), node.rel, 0)]
        probed = 0
        try:
            while stack and probed < max_dirs:
                probed += 1
                dir_fd, dir_rel, depth = stack.pop()
                try:
                    if cancelled is not None:
                        cancelled()
                    try:
                        with os.scandir(dir_fd) as listing:
                            subdirs = sorted(item.name for item in listing if _is_dir(item))
                    except OSError:
                        continue
                    for name in reversed(subdirs):
                        rel = f"{dir_rel}/{name}" if dir_rel else name
                        if hidden(ws, rules, name, rel, True):
                            continue
                        if depth + 1 >= max_depth:
                            return depth_note(max_depth, rel)
                        try:
                            stack.append((open_subdir(dir_fd, name), rel, depth + 1))
                        except OSError:
                            continue
                finally:
                    os.close(dir_fd)
        finally:
            for fd, _, _ in stack:
                os.close(fd)
    return None


def _is_dir(item: os.DirEntry) -> bool:
    try:
        return item.is_dir(follow_symlinks=False)
    except OSError:
        return False


def hidden(ws: Workspace, rules: IgnoreRules, name: str, rel: str, is_dir: bool) -> bool:
    """Does the walk leave out the entry `name` (root-relative `rel`) of a directory it entered: a protected
    name, or one the ignore rules hide? The parents are visible (an ignored directory is not entered), so
    the entry's own name and path decide."""
    if not ws.allow_protected and protected_name(name):
        return True
    return rules.active and rules.decide(rel, is_dir)


def open_subdir(parent: int, name: str) -> int:
    """Open the directory `name` beneath the descriptor `parent`, with O_NOFOLLOW: a directory swapped for a
    link after it was listed is not entered (raises OSError)."""
    return os.open(name, os.O_RDONLY | kernel.O_DIRECTORY | kernel.O_NOFOLLOW | kernel.O_CLOEXEC, dir_fd=parent)


def walk_files(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    ctx: Reporter | None,
    report: WalkReport,
    *,
    bounds: WalkBounds | None = None,
    select: Callable[[str], bool] | None = None,
) -> Iterator[DirEntry]:
    """The files below the directory `loc` that the ignore rules let through, in the walk's order (depth
    first, names sorted, a directory's files before its subdirectories), from a worker thread with progress
    notifications and cancellation checks. `select(path relative to loc)`, if given, picks files before
    they are stat'ed (cheap for a glob over a big tree). `report.ignored` counts what the rules left out
    (an ignored directory once)."""
    bounds = bounds or WalkBounds()
    table = _rg_table(ws, loc, options, ctx, report, bounds, select, None, count_ignored=True)
    if table is None:
        yield from _walked(ws, loc, options, ctx, report, bounds, select)
        return
    rels, mtimes, sizes = table.rels, table.mtimes, table.sizes
    for row in sorted(range(len(rels)), key=lambda row: walk_order(rels[row])):
        rel = rels[row]
        yield DirEntry(rel.rpartition("/")[2], rel, "file", sizes[row], mtimes[row])


def find_files(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    ctx: Reporter | None,
    report: WalkReport,
    *,
    names: NameFilter | None,
    bounds: WalkBounds | None = None,
    select: Callable[[str], bool] | None = None,
    top_only: bool = False,
    keep: Callable[[FileTable], None] | None = None,
) -> FileTable:
    """glob's walk: the files `walk_files` would give, as one `FileTable` (rows in no particular order),
    with `names` (see `name_filter`), a cheaper test of the same choice as `select`, given to rg as
    `--glob`s. The ignored count is not kept (rg would log every file it skipped by name). `loc` must be
    canonical (as `open_node` gives it back): its root is the table's.

    `top_only` (a pattern that can only match in `loc` itself, such as `*.md`): that one directory is listed
    here; starting rg would cost the server several times as much.

    `keep(table)`, if given, makes the walk count every file however many there are: whenever the table holds
    more than `bounds.max_entries` rows, `keep` drops those the caller will not show (adding them to
    `table.passed`), so the table stays that small. Without it the walk stops there."""
    bounds = bounds or WalkBounds()
    table = None
    if not top_only:
        table = _rg_table(ws, loc, options, ctx, report, bounds, select, names, count_ignored=False, keep=keep)
    if table is None:
        table = FileTable(loc.root)
        walk_bounds = bounds if keep is None else WalkBounds(max_entries=sys.maxsize, max_depth=bounds.max_depth)
        for entry in _walked(ws, loc, options, ctx, report, walk_bounds, select, top_only=top_only, ordered=False):
            table.rels.append(entry.rel)
            table.mtimes.append(entry.mtime)
            table.sizes.append(entry.size)
            if keep is not None and len(table.rels) > bounds.max_entries:
                keep(table)
    return table


@dataclass
class FileTable:
    """Files of one root as parallel columns, a row per file: root-relative path, modification time, size.
    Columns instead of an object per file because a walk can find a hundred thousand files: strings,
    floats and ints are not tracked by the garbage collector, so keeping them sets off no collections,
    whose cost grows with every object kept (they took about a third of a glob over 80k files).
    `passed`: files found and counted, but no longer held (see `find_files`' `keep`)."""

    root: int
    rels: list[str] = field(default_factory=list)
    mtimes: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    passed: int = 0

    @property
    def found(self) -> int:
        return len(self.rels) + self.passed


def _rg_table(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    ctx: Reporter | None,
    report: WalkReport,
    bounds: WalkBounds,
    select: Callable[[str], bool] | None,
    names: NameFilter | None,
    count_ignored: bool,
    keep: Callable[[FileTable], None] | None = None,
) -> FileTable | None:
    """The files rg lists (`rg_files`), each stat'ed through the gateway while rg is still listing. None
    when rg cannot be used."""
    sink = _StatSink(ws, ctx, None if names is not None and names.exact else select)
    check = anyio.from_thread.check_cancelled
    try:
        listed = rg_files(ws, loc, options, report, bounds, check, names, sink, count_ignored, keep)
    finally:
        sink.close()
    if listed is None:
        return None
    return sink.table if sink.table is not None else FileTable(loc.root)


class _StatSink:
    """Takes the paths rg lists, batch by batch, and keeps in a `FileTable` those that are regular files
    when stat'ed through the gateway: resolved beneath the root's descriptor, no symlink followed
    (`NoFollowView.lstat_many`). Whatever rg said, a path that now leads elsewhere, or to anything but a
    regular file, is dropped. `select(path relative to the listed directory)`, if given, picks first."""

    def __init__(self, ws: Workspace, ctx: Reporter | None, select: Callable[[str], bool] | None) -> None:
        self._ws, self._ctx, self._select = ws, ctx, select
        self.table: FileTable | None = None
        self._view: NoFollowView | None = None
        self._reported = 0

    def add(self, root: int, base: str, rels: list[str]) -> None:
        """`rels`: root-relative paths below the root-relative directory `base`."""
        if self._select is not None:
            cut = len(base) + 1 if base else 0
            rels = [rel for rel in rels if self._select(rel[cut:])]
        if self._view is None:
            self.table, self._view = FileTable(root), self._ws.no_follow(root)
        assert self.table is not None
        # A few at a time: each stat result is an object the garbage collector tracks, and a whole batch of
        # them alive at once sets off collections (whose cost grows with the server's heap)
        for start in range(0, len(rels), _STAT_STEP):
            part = rels[start : start + _STAT_STEP]
            _add_regular(self.table, part, self._view.lstat_many(part))
        found = len(self.table.rels)
        if self._ctx is not None and found - self._reported >= PROGRESS_EVERY:
            self._reported = found
            _progress(self._ctx, found, f"found {found} files")

    def drop(self, below: set[str], hidden: Callable[[str], bool]) -> None:
        """Forget the files below one of the directories `below` (root-relative; "" for the whole root) that
        `hidden(root-relative path)` says."""
        table = self.table
        if table is None or not below:
            return
        heads = list(map(_FIRST, map(_SPLIT_LAST, table.rels)))  # each file's directory (loops in C)
        inside: dict[str, bool] = {}  # directory -> below one of `below`?

        def under(head: str) -> bool:
            hit = inside.get(head)
            if hit is None:
                hit = head in below or (bool(head) and under(head.rpartition("/")[0]))
                inside[head] = hit
            return hit

        for head in set(heads):
            under(head)
        suspects = itertools.compress(range(len(heads)), map(inside.__getitem__, heads))
        gone = [row for row in suspects if hidden(table.rels[row])]
        if gone:
            keep = sorted(set(range(len(table.rels))).difference(gone))
            table.rels = [table.rels[row] for row in keep]
            table.mtimes = [table.mtimes[row] for row in keep]
            table.sizes = [table.sizes[row] for row in keep]

    def dirs(self) -> set[str]:
        """The root-relative directories of the files kept so far."""
        return {rel.rpartition("/")[0] for rel in self.table.rels} if self.table is not None else set()

    def close(self) -> None:
        if self._view is not None:
            self._view.close()


_SPLIT_LAST = operator.methodcaller("rpartition", "/")
_FIRST = operator.itemgetter(0)
_STAT_STEP = 100  # below the collector's first threshold (700 new objects)
_MODE = operator.attrgetter("st_mode")
_MTIME = operator.attrgetter("st_mtime")
_SIZE = operator.attrgetter("st_size")


def _add_regular(table: FileTable, rels: list[str], stats: list[os.stat_result | None]) -> None:
    """Append the rows of `rels` whose stat says regular file (None: gone, refused, or behind a link)."""
    if all(stats) and all(map(stat.S_ISREG, map(_MODE, stats))):  # the usual batch: C-level loops only
        table.rels += rels
        table.mtimes += map(_MTIME, stats)
        table.sizes += map(_SIZE, stats)
        return
    for rel, st in zip(rels, stats):
        if st is not None and stat.S_ISREG(st.st_mode):
            table.rels.append(rel)
            table.mtimes.append(st.st_mtime)
            table.sizes.append(st.st_size)


def _walked(
    ws: Workspace,
    loc: Location,
    options: IgnoreOptions,
    ctx: Reporter | None,
    report: WalkReport,
    bounds: WalkBounds,
    select: Callable[[str], bool] | None,
    top_only: bool = False,
    ordered: bool = True,
) -> Iterator[DirEntry]:
    """The Python walk's files (when rg cannot be used, or `top_only`), with progress and cancellation."""
    count = 0
    cancelled = anyio.from_thread.check_cancelled
    walked = walk(
        ws, loc, options, bounds=bounds, report=report, cancelled=cancelled, top_only=top_only, ordered=ordered
    )
    for entry in walked:
        count += 1
        if ctx is not None and count % PROGRESS_EVERY == 0:
            _progress(ctx, count, f"walked {count} files")
        if select is None or select(relative_to(entry.rel, loc.rel)):
            yield entry


def walk_order(rel: str) -> str:
    """A sort key that puts root-relative file paths in `walk`'s order: in each directory its
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
    names: NameFilter | None,
    sink: _StatSink,
    count_ignored: bool = True,
    keep: Callable[[FileTable], None] | None = None,
) -> int | None:
    """Lists the files below the directory `loc` per `rg --files` with our rules, re-checked (only those
    `names` accepts, if given): `sink.add(root, directory, root-relative paths)` receives them batch by
    batch as rg lists them, and `sink.drop` forgets those a late re-check hides. Returns how many were
    listed, or None when rg cannot be used (no binary, rules rg cannot express): then the caller walks.

    With `count_ignored`, `report.ignored` counts what the rules left out as the walk would (an ignored
    directory once): rg logs each entry it skips at --debug level, and the re-check counts what it drops.
    rg is then not given `names`: every file it skipped for its name would cost a debug line, far more than
    the test here. Without it, rg gets `names.globs` as `--glob`s (see `GlobRun`), so it neither matches
    ignore rules against nor prints the files that cannot match; `names.regex` still decides where rg's
    globs are a superset (case folding, see `NameFilter.globs_exact`).

    rg is given one level more than `bounds.max_depth`: a file it lists that deep is not kept, and says where
    the walk was cut. `keep`: see `find_files` (the files are judged by every rule before it drops any)."""
    binary = ripgrep.find_rg()
    if binary is None:
        return None
    with ws.open_dir(loc) as (node, dir_fd):
        rules = ripgrep.rg_rules(functools.partial(ws.ignore_source, node.root), node.rel, options, ws.allow_protected)
        if rules is None:
            return None
        depth, extra, by_name, cut = bounds.max_depth, [], None, True
        if names is not None and not count_ignored:
            by_name = GlobRun(ws, node.root, node.rel, options, names, rules.recheck_options(options))
            extra += by_name.flags()
            depth = min(depth, 1) if names.top else depth
            cut = not names.top
            recheck = by_name.recheck
        else:
            recheck = ripgrep.Recheck.of(ws, node.root, node.rel, rules.recheck_options(options), ws.allow_protected)
            if count_ignored:
                extra.append("--debug")
        argv = [binary, "--files", "--null", *extra, "--max-depth", str(depth + 1 if cut else depth), *rules.flags, "."]
        # (our --globs come before rules.flags: their `!.git` override, later, wins over them)
        run = ripgrep.RgRun(
            argv, ripgrep.dir_cwd(dir_fd, node.path), rules.ignore_files, timeout=RG_WALK_TIMEOUT, check=check,
            sep=b"\0", count_in_stderr=_ignored_by_rules if count_ignored else None,
            data_limit=ripgrep.RG_DATA_LIMIT,  # a huge .gitignore took rg 3.7 GB: the Python walk then
        )
        wanted = names.regex.search if names is not None else None
        if by_name is not None and names.globs_exact:
            wanted = None  # rg's globs are the very same test
        prefix = f"{node.rel}/" if node.rel else ""
        given, full = 0, False
        for batch in run.records():
            if count_ignored:
                rels = _judged_counting(batch, wanted, recheck)
            else:
                rels = _judged(batch, wanted, recheck, by_name)
            if cut and any(map(operator.ge, map(_SLASHES, rels), itertools.repeat(depth))):
                rels = _within_depth(rels, depth, prefix, report)
            if prefix:
                rels = [prefix + rel for rel in rels]
            if keep is None and given + len(rels) > bounds.max_entries:
                del rels[bounds.max_entries - given :]
                report.truncated, full = f"stopped after {bounds.max_entries} entries", True
            if rels:
                given += len(rels)
                sink.add(node.root, node.rel, rels)
            if keep is not None and sink.table is not None and len(sink.table.rels) > bounds.max_entries:
                if by_name is not None:
                    by_name.judge_files(sink, complete=False)  # (before any file is dropped uncounted)
                keep(sink.table)
            if full:
                break
        if (run.returncode == 2 or run.out_of_memory) and not given and not run.stopped:
            return None  # rg refused the arguments, or ran out of its memory: walk instead
        if run.out_of_memory and not full:
            report.truncated = "ripgrep ran out of its memory bound part way (the ignore files are too large)"
        if run.stopped and not full:
            report.truncated = run.stopped.replace("the search", "the walk")
        if count_ignored:
            report.ignored += run.stderr_hits + recheck.hidden
        if by_name is not None and given:
            by_name.judge_files(sink, complete=run.returncode is not None and not full)
        return given


_SLASHES = operator.methodcaller("count", "/")
_NAME = operator.attrgetter("name")


# -- glob's fast path: `rg --files` given the name part of a glob as `--glob`s --------------------------------


class FileSink(Protocol):
    """Where the files rg listed were kept (the walk's stat sink)."""

    def dirs(self) -> set[str]: ...

    def drop(self, below: set[str], hidden: Callable[[str], bool]) -> None: ...


class GlobRun:
    """What an `rg --files` run given the name part of a glob as `--glob`s asks of the re-check. Such an
    override glob lets what it matches past every ignore rule: rg matches no ignore rule against a file
    (about a quarter faster than with a file type, which rg applies after the rules), and it descends into
    an ignored directory whose own name matches. So, beyond the usual re-check (`recheck_options`; None:
    protected names only):

    * a directory whose name one of the globs matches is judged by all the rules, as it comes;
    * a listed file is judged by all the rules once rg is done (`judge_files`), and only where a rule could
      hide it by its own name: below a directory with such a rule (`ripgrep.NameRules`), and when its name
      is one such a rule could match (`ripgrep.file_name_test`); in a source tree, hardly anywhere. rg
      itself says which directories have a `.gitignore` (it is given `--glob .gitignore` too, and lists
      them), instead of a stat of each directory; as it may list one after the files it governs, files are
      judged at the end, and dropped from the sink then."""

    def __init__(
        self, ws: Workspace, root: int, base: str, options: IgnoreOptions, names: NameFilter,
        recheck_options: IgnoreOptions | None,
    ) -> None:
        self._ws, self._root, self._base, self._options, self._names = ws, root, base, options, names
        self.globs = list(names.globs) + ([GITIGNORE] if options.git else [])
        self._every = ws.ignore_rules(root, options)
        self._usual = ws.ignore_rules(root, recheck_options) if recheck_options is not None else None
        # the names the globs stand for, case ignored (a superset is safe: such a directory is judged by
        # every rule, which agrees with rg's verdict wherever rg applied the rules itself)
        self._let_in = GlobSet.of([*names.names, GITIGNORE], True, paths=False, negate=False)
        self._dir_tails = dir_tails([glob for glob in self.globs if glob != GITIGNORE])
        # files are never judged by rules here (see judge_files): `files` says no directory needs it
        self.recheck = ripgrep.Recheck(
            DirRules(self._every, self._usual, self._let_in), base, ws.allow_protected, files=lambda _dir: False
        )
        self._ignore_dirs: set[str] = set()  # root-relative directories below `base` rg listed a .gitignore in

    def flags(self) -> list[str]:
        return [arg for glob in self.globs for arg in ("--glob", glob)]

    def plain(self, joined: bytes) -> bool:
        """Does no path of a batch (rg's paths joined by NULs) need the re-check? So when only protected
        names (all with a leading dot) and directories the globs let in can be hidden, and there are
        none."""
        if self._usual is not None or b"/." in joined or self._dir_tails is None:
            return False
        lower = joined.lower()
        return not any(tail in lower for tail in self._dir_tails)

    def note_ignore_files(self, batch: list[bytes], joined: bytes) -> tuple[list[bytes], bytes]:
        """Remember where rg listed a `.gitignore` in a batch (`joined`: its paths joined by NULs); such a
        path stays in the batch only if the glob asked for it (rg lists them for us)."""
        end = joined.find(GITIGNORE_TAIL)
        if end < 0:
            return batch, joined
        removed = False
        while end >= 0:
            stop = end + len(GITIGNORE_TAIL)
            if stop == len(joined) or joined[stop] == 0:  # the whole name, at the end of a path
                raw = joined[joined.rfind(b"\0", 0, end) + 1 : stop]
                head = raw[2:-len(GITIGNORE_TAIL)].decode("utf-8", "surrogateescape")
                self._ignore_dirs.add(f"{self._base}/{head}" if self._base and head else self._base or head)
                if self._names.regex.search(raw) is None:
                    batch.remove(raw)
                    removed = True
            end = joined.find(GITIGNORE_TAIL, stop)
        return batch, b"\0".join(batch) if removed else joined

    def judge_files(self, sink: FileSink, complete: bool) -> None:
        """Drop from `sink` the files the rules hide by their own name (their directories were judged as
        they came). After a `complete` run every `.gitignore` below `base` was listed, so only those are
        read; otherwise every directory that holds a file is asked about, with a stat each. Files are
        given to the ignore engine only where a rule could hide them: in a directory `NameRules` names,
        and with a name that one of the rules there could match (`file_name_test`)."""
        source = self._listed_source if complete else self._ws_source
        read = functools.lru_cache(maxsize=None)(source)  # (each file is asked about twice)
        may_hide = ripgrep.NameRules(read, self._options, list(self._names.names))
        dirs = self._ignore_dirs if complete else sink.dirs()
        below = {self._base} if may_hide(self._base) else {d for d in dirs if may_hide(d)}
        if not below:
            return
        named = ripgrep.file_name_test(self._every_line(dirs, read)) if complete else lambda name: True
        every = self._every
        sink.drop(below, lambda rel: named(rel.rpartition("/")[2]) and every.decide(rel, False))

    def _every_line(self, dirs: set[str], read: Callable[[str], bytes | None]) -> list[str]:
        """The lines of every ignore file the rules read for the files below `base`, if `.gitignore`s are
        found in `dirs` only (below `base`)."""
        options, lines = self._options, []
        sources = [GEMINIIGNORE] if options.gemini else []
        if options.defaults:
            lines += DEFAULT_EXCLUDES
        if options.git:
            sources.append(GIT_INFO_EXCLUDE)
            parts = self._base.split("/") if self._base else []
            above = ["/".join(parts[:depth]) for depth in range(len(parts) + 1)]  # the root down to `base`
            sources += [f"{d}/{GITIGNORE}" if d else GITIGNORE for d in [*above, *dirs]]
        for source in sources:
            lines += ripgrep.ignore_lines(read(source))
        return lines

    def _ws_source(self, rel_file: str) -> bytes | None:
        return self._ws.ignore_source(self._root, rel_file)

    def _listed_source(self, rel_file: str) -> bytes | None:
        head, _, name = rel_file.rpartition("/")
        below_base = head != self._base and (not self._base or head.startswith(f"{self._base}/"))
        if name == GITIGNORE and below_base and head not in self._ignore_dirs:
            return None  # rg walked that directory and listed no .gitignore there
        return self._ws_source(rel_file)


GITIGNORE_TAIL = f"/{GITIGNORE}".encode()


class DirRules:
    """The rules `GlobRun`'s re-check judges directories by (files never get here): a directory the globs
    let in by all of them (`every`), any other as the usual re-check would (`usual`; None: not at all)."""

    def __init__(self, every, usual, let_in: Callable[[str], object]) -> None:
        self._every, self._usual, self._let_in = every, usual, let_in

    def decide(self, rel: str, is_dir: bool) -> bool:
        rules = self._every if self._let_in(rel.rpartition("/")[2]) else self._usual
        return rules is not None and rules.decide(rel, is_dir)


def dir_tails(globs: list[str]) -> list[bytes] | None:
    """What a batch of rg's paths (joined by NULs, lower-cased) must contain for one of its directories to
    match one of `globs`: the text after a glob's last `*`, lower-cased (a class `[xX]` is a letter either
    way), then "/". None when a glob ends in `*` or a `{..}` stands after it (any directory can match)."""
    tails = []
    for glob in globs:
        tail = glob.rpartition("*")[2]
        if not tail or "{" in tail:  # (an alternation of a letter's case pairs: any directory, to be safe)
            return None
        tails.append((re.sub(r"\[(.)[^\]]*\]", r"\1", tail).lower() + "/").encode())
    return tails


def _within_depth(rels: list[str], depth: int, prefix: str, report: WalkReport) -> list[str]:
    """The paths of `rels` (relative to the walk's base, root-relative after `prefix`) at most `depth` levels
    down; the first directory that held a deeper one is where the walk was cut (`report.truncated`)."""
    kept = []
    for rel in rels:
        if rel.count("/") < depth:
            kept.append(rel)
        elif not report.truncated:
            report.truncated = depth_note(depth, prefix + "/".join(rel.split("/")[:depth]))
    return kept


def _judged(
    batch: list[bytes], wanted: Callable[[bytes], object] | None, recheck, by_name: GlobRun | None
) -> list[str]:
    """The paths of a batch (rg's, `./a/b`) that `wanted` and the re-check let through, base-relative. The
    re-check is skipped for a batch in which it cannot hide anything (see `GlobRun.plain`, `_plain`)."""
    joined = b"\0".join(batch)
    if by_name is not None:
        batch, joined = by_name.note_ignore_files(batch, joined)
    if wanted is not None:
        batch = list(filter(wanted, batch))
    rels = [raw[2:].decode("utf-8", "surrogateescape") for raw in batch]
    if by_name.plain(joined) if by_name is not None else _plain(recheck, joined):
        return rels
    return list(filter(recheck.visible, rels))


def _plain(recheck, joined: bytes) -> bool:
    """Does no path of a batch (rg's paths joined by NULs) need the re-check? So when the re-check can hide
    nothing but protected names and no component starts with a dot (as every protected spelling does): a
    scan of the batch in C instead of a test per path."""
    return recheck.rules is None and b"/." not in joined


def _judged_counting(batch: list[bytes], wanted: Callable[[bytes], object] | None, recheck) -> list[str]:
    """The paths of a batch (rg's, `./a/b`) that `wanted` and the re-check let through, base-relative. Every
    path the re-check drops counts as ignored, as in the walk, so a path `wanted` rejects is still
    re-checked when the check involves rules, or when it can hit a protected name (those start with a
    dot)."""
    judge_all = recheck.rules is not None
    visible = recheck.visible
    rels: list[str] = []
    for raw in batch:
        if wanted is not None and wanted(raw) is None:
            if judge_all or b"/." in raw:
                visible(raw[2:].decode("utf-8", "surrogateescape"))
            continue
        rel = raw[2:].decode("utf-8", "surrogateescape")
        if visible(rel):
            rels.append(rel)
    return rels


def _ignored_by_rules(debug_line: bytes) -> bool:
    # rg --debug logs each entry it skips: "...walk.rs:NNN: ignoring ./path: Ignore(IgnoreMatch(...))".
    return b": ignoring ./" in debug_line


def _progress(ctx: Reporter, done: int, message: str) -> None:
    try:
        anyio.from_thread.run(ctx.progress, float(done), None, message)
    except RuntimeError:  # not in a worker thread of an event loop (direct use): no progress
        pass


def relative_to(entry_rel: str, base_rel: str) -> str:
    return entry_rel[len(base_rel) + 1 :] if base_rel else entry_rel
