"""A walk that can start in the middle: the files of one root in `walk`'s order (depth first, names sorted,
a directory's files before its subdirectories), resuming after a `Position` a previous walk reached.

A paged listing (MCP resources) cannot hold a whole tree between pages, nor walk it again from the top for
every page. A position is just a root-relative path and whether everything below it was passed; resuming
lists the directories on the way down to it and carries on from there, so a page costs the entries it
judges plus one listing per directory above the position. The files themselves may change between pages:
a position is a place in the order, not a reference to a file that must still exist.

Every entry is judged by the walker's own rules (`walker.hidden`, `walker.open_subdir`): directories
opened beneath their parent's descriptor with O_NOFOLLOW, symlinks and special files skipped, protected
names and ignored paths left out (an ignored directory is not entered). Each judged entry is one step,
whether it is shown or not, so a caller can bound the work of a page by counting steps; told that bound
(`max_steps`), the walk keeps no more than that many entries of a directory, so a page costs as much in a
directory of a million files as in one of a thousand.
"""

from __future__ import annotations

import heapq
import operator
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import IgnoreOptions, IgnoreRules
from coretools.sandbox.paths import DirEntry, Location, dir_entry
from coretools.sandbox.walker import hidden, open_subdir

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
    max_steps: int | None = None,
) -> Iterator[Step]:
    """The steps of root `root`'s walk after `after` (from the start when None). `cancelled`, if given, is
    called before each directory is listed and may raise. `max_steps`: the most steps the caller will take
    (a directory then keeps only that many of its files, and of its subdirectories, the first by name). Close
    the iterator when stopping early: it holds directory descriptors."""
    rest = after.rel.split("/") if after is not None and after.rel else []
    resume = bool(after and after.subtree)
    walker = _Walker(ws, ws.ignore_rules(root, options), max_depth, cancelled, resume, max_steps)
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
        limit: int | None,
    ) -> None:
        self.ws, self.rules, self.max_depth, self.cancelled = ws, rules, max_depth, cancelled
        self.resume_subtree, self.limit = resume_subtree, limit

    def directory(self, fd: int, rel: str, depth: int, rest: list[str]) -> Iterator[Step]:
        """Walk the directory open at `fd` (closed here), after `rest`, the position's components below it
        (empty: the whole directory)."""
        try:
            if self.cancelled is not None:
                self.cancelled()
            try:
                files, subdirs = self._listing(fd, rest)
            except OSError:
                return
            yield from self._files(files, rel)
            yield from self._subdirs(fd, subdirs, rel, depth, rest)
        finally:
            os.close(fd)

    def _listing(self, fd: int, rest: list[str]) -> tuple[list[os.DirEntry], list[os.DirEntry]]:
        """The entries of one directory after the position, sorted by name: the non-directories (all of them
        when the position is not in this directory, those after its name when it is a file here, none when
        it is below here), and the subdirectories not passed. At most `limit` of each, kept as the
        directory is read."""
        files_too = not (len(rest) > 1 or (len(rest) == 1 and self.resume_subtree))
        start = rest[0] if rest and files_too else None
        files: list[os.DirEntry] = []
        subdirs: list[os.DirEntry] = []
        with os.scandir(fd) as found:  # (of a duplicate of `fd`, which it closes)
            for item in found:
                if _is_dir(item):
                    if not self._passed(item.name, rest):
                        subdirs.append(item)
                        subdirs = self._first(subdirs)
                elif files_too and (start is None or item.name > start):
                    files.append(item)
                    files = self._first(files)
        files.sort(key=_NAME)
        subdirs.sort(key=_NAME)
        return files[: self.limit], subdirs[: self.limit]

    def _first(self, items: list[os.DirEntry]) -> list[os.DirEntry]:
        """`items`, or, once they are twice `limit`, the first `limit` of them by name."""
        if self.limit is None or len(items) < 2 * self.limit + 2:
            return items
        return heapq.nsmallest(self.limit, items, key=_NAME)

    def _files(self, files: list[os.DirEntry], rel: str) -> Iterator[Step]:
        """The non-directories `_listing` chose. Only those are stat'ed: a page resuming in a big directory
        does not stat what earlier pages passed."""
        for item in files:
            entry = dir_entry(item, rel)
            shown = entry.kind == "file" and not hidden(self.ws, self.rules, entry.name, entry.rel, False)
            yield (entry if shown else None), Position(entry.rel, False)

    def _subdirs(self, fd: int, subdirs: list[os.DirEntry], rel: str, depth: int, rest: list[str]) -> Iterator[Step]:
        """The subdirectories after the position, each walked whole, except the one the position is inside,
        whose walk resumes."""
        for item in subdirs:
            name = item.name
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


_NAME = operator.attrgetter("name")


def _is_dir(item: os.DirEntry) -> bool:
    """A directory itself, not a link to one (the file type the directory listing gave, else an lstat)."""
    try:
        return item.is_dir(follow_symlinks=False)
    except OSError:
        return False
