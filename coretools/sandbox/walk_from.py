"""A walk that can start in the middle: the files of one root in `walk`'s order (depth first, names sorted,
a directory's files before its subdirectories), resuming after a `Position` a previous walk reached.

A paged listing (MCP resources) cannot hold a whole tree between pages, nor walk it again from the top for
every page. A position is just a root-relative path and whether everything below it was passed; resuming
lists the directories on the way down to it and carries on from there, so a page costs the entries it
judges plus one listing per directory above the position. The files themselves may change between pages:
a position is a place in the order, not a reference to a file that must still exist.

Every entry is judged by `walk`'s own rules (`walk.hidden`, `walk.open_subdir`): directories opened beneath
their parent's descriptor with O_NOFOLLOW, symlinks and special files skipped, protected names and ignored
paths left out (an ignored directory is not entered). Each judged entry is one step, whether it is shown or
not, so a caller can bound the work of a page by counting steps.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import IgnoreOptions, IgnoreRules
from coretools.sandbox.paths import DirEntry, Location, dir_entry, scan_dir
from coretools.sandbox.walk import hidden, open_subdir

MAX_DEPTH = 64


@dataclass(frozen=True)
class Position:
    """A place in the walk's order: just after the entry `rel` (root-relative), and, when `subtree`, after
    everything below it too (a directory passed whole)."""

    rel: str
    subtree: bool


# One judged entry: the file to show (None when the entry is left out or is a directory) and the position
# just after it.
Step = tuple[DirEntry | None, Position]


def walk_after(
    ws: Workspace,
    root: int,
    options: IgnoreOptions,
    after: Position | None = None,
    *,
    max_depth: int = MAX_DEPTH,
    cancelled: Callable[[], None] | None = None,
) -> Iterator[Step]:
    """The steps of root `root`'s walk after `after` (from the start when None). `cancelled`, if given, is
    called before each directory is listed and may raise. Close the iterator when stopping early: it holds
    directory descriptors."""
    rest = after.rel.split("/") if after is not None and after.rel else []
    walker = _Walker(ws, ws.ignore_rules(root, options), max_depth, cancelled, bool(after and after.subtree))
    with ws.open_dir(Location(root, "", ws.roots[root].shown)) as (node, top_fd):
        yield from walker.directory(os.dup(top_fd), node.rel, 0, rest)


class _Walker:
    def __init__(
        self,
        ws: Workspace,
        rules: IgnoreRules,
        max_depth: int,
        cancelled: Callable[[], None] | None,
        resume_subtree: bool,
    ) -> None:
        self.ws, self.rules, self.max_depth, self.cancelled = ws, rules, max_depth, cancelled
        self.resume_subtree = resume_subtree

    def directory(self, fd: int, rel: str, depth: int, rest: list[str]) -> Iterator[Step]:
        """Walk the directory open at `fd` (closed here), after `rest`, the position's components below it
        (empty: the whole directory)."""
        try:
            if self.cancelled is not None:
                self.cancelled()
            try:
                items = sorted(scan_dir(fd), key=lambda e: e.name)
            except OSError:
                return
            yield from self._files(items, rel, rest)
            yield from self._subdirs(fd, items, rel, depth, rest)
        finally:
            os.close(fd)

    def _files(self, items: list[os.DirEntry], rel: str, rest: list[str]) -> Iterator[Step]:
        """The non-directories of one directory after the position: all of them when the position is not
        in this directory, those after its name when it is a file here, none when it is below here. Only
        those are stat'ed: a page resuming in a big directory does not stat what earlier pages passed."""
        if len(rest) > 1 or (len(rest) == 1 and self.resume_subtree):
            return
        start = rest[0] if rest else None
        for item in items:
            if (start is not None and item.name <= start) or _is_dir(item):
                continue
            entry = dir_entry(item, rel)
            shown = entry.kind == "file" and not hidden(self.ws, self.rules, entry.name, entry.rel, False)
            yield (entry if shown else None), Position(entry.rel, False)

    def _subdirs(self, fd: int, items: list[os.DirEntry], rel: str, depth: int, rest: list[str]) -> Iterator[Step]:
        """The subdirectories after the position, each walked whole, except the one the position is inside,
        whose walk resumes."""
        for item in items:
            name = item.name
            if not _is_dir(item) or self._passed(name, rest):
                continue
            sub_rel = f"{rel}/{name}" if rel else name
            inner = rest[1:] if len(rest) > 1 and name == rest[0] else []
            if not hidden(self.ws, self.rules, name, sub_rel, True) and depth + 1 < self.max_depth:
                sub = self._open(fd, name)
                if sub is not None:
                    yield from self.directory(sub, sub_rel, depth + 1, inner)
            yield None, Position(sub_rel, True)

    def _passed(self, name: str, rest: list[str]) -> bool:
        """Is the subdirectory `name` before the position? A file position here leaves every subdirectory
        ahead (files come first); a directory position leaves those after it; a position deeper down, those
        from its directory on."""
        if not rest:
            return False
        if len(rest) == 1:
            return self.resume_subtree and name <= rest[0]
        return name < rest[0]

    @staticmethod
    def _open(parent: int, name: str) -> int | None:
        try:
            return open_subdir(parent, name)
        except OSError:
            return None


def _is_dir(item: os.DirEntry) -> bool:
    """A directory itself, not a link to one (the file type the directory listing gave, else an lstat)."""
    try:
        return item.is_dir(follow_symlinks=False)
    except OSError:
        return False
