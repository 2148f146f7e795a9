"""Walks shared by the tools that enumerate files (glob, read_many_files): where to start, how to match
glob patterns, and progress and cancellation while a large tree is walked in a worker thread.

The files below a directory come from `rg --files` run with the very rules the ripgrep search uses
(`ripgrep.rg_rules`), when the binary runs and the rules can be expressed, else from `Workspace.walk`.
rg only names files; nothing is shown on its word alone: each path is re-checked (`ripgrep.Recheck`:
protected names, and the ignore sources rg could judge differently) and the chosen ones are stat'ed through
the gateway (`NoFollowView.lstat_many`: beneath the root's descriptor, no symlink followed), which drops
anything that is not a regular file inside the root any more. The stats overlap with rg's walk: each batch
rg prints is stat'ed while it goes on listing.

What the rules left out is counted only on request (`count_ignored`, read_many_files' "N file(s) ignored"):
rg then logs every entry it skips (`--debug`, costly per line) and cannot filter by name. Without it (glob),
rg is given the file-name part of the pattern as `--glob`s, so it neither matches ignore rules against nor
prints the files that cannot match. A `--glob` beats ignore rules in rg, so the files it lets through are
judged by our rules afterwards, where a rule could hide them at all (`_GlobRun`).

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.from_thread

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox.matcher import GlobSet
from coretools.sandbox.rgglobs import name_glob
from coretools.sandbox.ignore import DEFAULT_EXCLUDES, GEMINIIGNORE, GIT_INFO_EXCLUDE, GITIGNORE, IgnoreOptions
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.nofollow import NoFollowView
from coretools.sandbox.paths import DirEntry, Location, WalkBounds, WalkReport

PROGRESS_EVERY = 2000
RG_WALK_TIMEOUT = 600.0


class Reporter(Protocol):
    """Where a long walk reports progress (a tool's context)."""

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None: ...


def globmatch(rel: str, patterns: str | list[str], case_sensitive: bool = False) -> bool:
    """Glob matching of a relative path: `**` (globstar), braces, extglob, dot files, `!` negation (the
    pattern engine, `coretools.sandbox`: linear in the path's length)."""
    key = patterns if isinstance(patterns, str) else tuple(patterns)
    return _matcher(key, case_sensitive)(rel)


@functools.lru_cache(maxsize=256)
def _matcher(patterns: str | tuple[str, ...], case_sensitive: bool) -> Callable[[str], bool]:
    return GlobSet.of([patterns] if isinstance(patterns, str) else patterns, not case_sensitive)


def glob_escape(pattern: str) -> str:
    """`pattern` with every glob character escaped, so that it matches itself only."""
    return "".join("\\" + ch if ch in _GLOB_CHARS else ch for ch in pattern)


_GLOB_CHARS = frozenset("*?[]{}()!@+|\\")


def name_matches(name: str, patterns: list[str]) -> bool:
    """Match a bare file name against glob patterns (braces and extglob, dot files included)."""
    return _name_matcher(tuple(patterns))(name)


@functools.lru_cache(maxsize=256)
def _name_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    return GlobSet.of(patterns, False, paths=False, negate=False)


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
            raise ToolError(f"Search path is not a directory: {node.path}", ErrorKind.PATH_IS_NOT_A_DIRECTORY)
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
    names: NameFilter,
    bounds: WalkBounds | None = None,
    select: Callable[[str], bool] | None = None,
) -> FileTable:
    """glob's walk: the files `walk_files` would give, as one `FileTable` (rows in no particular order),
    with `names` (see `name_filter`), a cheaper test of the same choice as `select`, given to rg as
    `--glob`s. The ignored count is not kept (rg would log every file it skipped by name). `loc` must be
    canonical (as `open_node` gives it back): its root is the table's."""
    bounds = bounds or WalkBounds()
    table = _rg_table(ws, loc, options, ctx, report, bounds, select, names, count_ignored=False)
    if table is None:
        table = FileTable(loc.root)
        for entry in _walked(ws, loc, options, ctx, report, bounds, select):
            table.rels.append(entry.rel)
            table.mtimes.append(entry.mtime)
            table.sizes.append(entry.size)
    return table


@dataclass
class FileTable:
    """Files of one root as parallel columns, a row per file: root-relative path, modification time, size.
    Columns instead of an object per file because a walk can find a hundred thousand files: strings,
    floats and ints are not tracked by the garbage collector, so keeping them sets off no collections,
    whose cost grows with every object kept (they took about a third of a glob over 80k files)."""

    root: int
    rels: list[str] = field(default_factory=list)
    mtimes: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


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
) -> FileTable | None:
    """The files rg lists (`rg_files`), each stat'ed through the gateway while rg is still listing. None
    when rg cannot be used."""
    sink = _StatSink(ws, ctx, None if names is not None and names.exact else select)
    check = anyio.from_thread.check_cancelled
    try:
        listed = rg_files(ws, loc, options, report, bounds, check, names, sink, count_ignored)
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
) -> Iterator[DirEntry]:
    """The Python walk's files (when rg cannot be used), with progress and cancellation."""
    count = 0
    for entry in ws.walk(loc, options, bounds=bounds, report=report, cancelled=anyio.from_thread.check_cancelled):
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
    names: NameFilter | None,
    sink: _StatSink,
    count_ignored: bool = True,
) -> int | None:
    """Lists the files below the directory `loc` per `rg --files` with our rules, re-checked (only those
    `names` accepts, if given): `sink.add(root, directory, root-relative paths)` receives them batch by
    batch as rg lists them, and `sink.drop` forgets those a late re-check hides. Returns how many were
    listed, or None when rg cannot be used (no binary, rules rg cannot express): then the caller walks.

    With `count_ignored`, `report.ignored` counts what the rules left out as the walk would (an ignored
    directory once): rg logs each entry it skips at --debug level, and the re-check counts what it drops.
    rg is then not given `names`: every file it skipped for its name would cost a debug line, far more than
    the test here. Without it, rg gets `names.globs` as `--glob`s (see `_GlobRun`), so it neither matches
    ignore rules against nor prints the files that cannot match; `names.regex` still decides where rg's
    globs are a superset (case folding, see `NameFilter.globs_exact`)."""
    from coretools.sandbox import ripgrep

    binary = ripgrep.find_rg()
    if binary is None:
        return None
    with ws.open_dir(loc) as (node, dir_fd):
        rules = ripgrep.rg_rules(functools.partial(ws.ignore_source, node.root), node.rel, options, ws.allow_protected)
        if rules is None:
            return None
        depth, extra, by_name = bounds.max_depth, [], None
        if names is not None and not count_ignored:
            by_name = _GlobRun(ws, node.root, node.rel, options, names, rules.recheck_options(options))
            extra += by_name.flags()
            depth = min(depth, 1) if names.top else depth
            recheck = by_name.recheck
        else:
            recheck = ripgrep.Recheck.of(ws, node.root, node.rel, rules.recheck_options(options), ws.allow_protected)
            if count_ignored:
                extra.append("--debug")
        argv = [binary, "--files", "--null", *extra, "--max-depth", str(depth), *rules.flags, "."]
        # (our --globs come before rules.flags: their `!.git` override, later, wins over them)
        run = ripgrep.RgRun(
            argv, ripgrep.dir_cwd(dir_fd, node.path), rules.ignore_files, timeout=RG_WALK_TIMEOUT, check=check,
            sep=b"\0", count_in_stderr=_ignored_by_rules if count_ignored else None,
        )
        wanted = names.regex.search if names is not None else None
        if by_name is not None and names.globs_exact:
            wanted = None  # rg's globs are the very same test
        prefix = f"{node.rel}/" if node.rel else ""
        given = 0
        for batch in run.records():
            if count_ignored:
                rels = _judged_counting(batch, wanted, recheck)
            else:
                rels = _judged(batch, wanted, recheck, by_name)
            if prefix:
                rels = [prefix + rel for rel in rels]
            if given + len(rels) > bounds.max_entries:
                del rels[bounds.max_entries - given :]
                report.truncated = f"stopped after {bounds.max_entries} entries"
            if rels:
                given += len(rels)
                sink.add(node.root, node.rel, rels)
            if report.truncated:
                break
        if run.returncode == 2 and not given and not run.stopped:
            return None  # rg refused the arguments (it printed nothing): walk instead
        if run.stopped and not report.truncated:
            report.truncated = run.stopped.replace("the search", "the walk")
        if count_ignored:
            report.ignored += run.stderr_hits + recheck.hidden
        if by_name is not None and given:
            by_name.judge_files(sink, complete=run.returncode is not None and not report.truncated)
        return given


def _judged(
    batch: list[bytes], wanted: Callable[[bytes], object] | None, recheck, by_name: _GlobRun | None
) -> list[str]:
    """The paths of a batch (rg's, `./a/b`) that `wanted` and the re-check let through, base-relative. The
    re-check is skipped for a batch in which it cannot hide anything (see `_GlobRun.plain`, `_plain`)."""
    joined = b"\0".join(batch)
    if by_name is not None and _GITIGNORE_TAIL in joined:
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


class _GlobRun:
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
        from coretools.sandbox import ripgrep

        self._ws, self._root, self._base, self._options, self._names = ws, root, base, options, names
        self.globs = list(names.globs) + ([GITIGNORE] if options.git else [])
        self._every = ws.ignore_rules(root, options)
        self._usual = ws.ignore_rules(root, recheck_options) if recheck_options is not None else None
        # the names the globs stand for, case ignored (a superset is safe: such a directory is judged by
        # every rule, which agrees with rg's verdict wherever rg applied the rules itself)
        self._let_in = GlobSet.of([*names.names, GITIGNORE], True, paths=False, negate=False)
        self._dir_tails = _dir_tails([glob for glob in self.globs if glob != GITIGNORE])
        # files are never judged by rules here (see judge_files): `files` says no directory needs it
        self.recheck = ripgrep.Recheck(
            _DirRules(self._every, self._usual, self._let_in), base, ws.allow_protected, files=lambda _dir: False
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
        removed = False
        end = joined.find(_GITIGNORE_TAIL)
        while end >= 0:
            stop = end + len(_GITIGNORE_TAIL)
            if stop == len(joined) or joined[stop] == 0:  # the whole name, at the end of a path
                raw = joined[joined.rfind(b"\0", 0, end) + 1 : stop]
                head = raw[2:-len(_GITIGNORE_TAIL)].decode("utf-8", "surrogateescape")
                self._ignore_dirs.add(f"{self._base}/{head}" if self._base and head else self._base or head)
                if self._names.regex.search(raw) is None:
                    batch.remove(raw)
                    removed = True
            end = joined.find(_GITIGNORE_TAIL, stop)
        return batch, b"\0".join(batch) if removed else joined

    def judge_files(self, sink: _StatSink, complete: bool) -> None:
        """Drop from `sink` the files the rules hide by their own name (their directories were judged as
        they came). After a `complete` run every `.gitignore` below `base` was listed, so only those are
        read; otherwise every directory that holds a file is asked about, with a stat each. Files are
        given to the ignore engine only where a rule could hide them: in a directory `NameRules` names,
        and with a name that one of the rules there could match (`file_name_test`)."""
        from coretools.sandbox import ripgrep

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
        from coretools.sandbox import ripgrep

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


_GITIGNORE_TAIL = f"/{GITIGNORE}".encode()


class _DirRules:
    """The rules `_GlobRun`'s re-check judges directories by (files never get here): a directory the globs
    let in by all of them (`every`), any other as the usual re-check would (`usual`; None: not at all)."""

    def __init__(self, every, usual, let_in: Callable[[str], object]) -> None:
        self._every, self._usual, self._let_in = every, usual, let_in

    def decide(self, rel: str, is_dir: bool) -> bool:
        rules = self._every if self._let_in(rel.rpartition("/")[2]) else self._usual
        return rules is not None and rules.decide(rel, is_dir)


def _dir_tails(globs: list[str]) -> list[bytes] | None:
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


def _progress(ctx: Reporter, done: int, message: str) -> None:
    try:
        anyio.from_thread.run(ctx.progress, float(done), None, message)
    except RuntimeError:  # not in a worker thread of an event loop (direct use): no progress
        pass


def relative_to(entry_rel: str, base_rel: str) -> str:
    return entry_rel[len(base_rel) + 1 :] if base_rel else entry_rel
