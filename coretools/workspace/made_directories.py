"""The directories a `mkdir -p` makes, found before it makes them, and their removal again: what the edit
journal records of create_directory and what its undo does.

Every path here is canonical (a root's real path joined with real names), so a journal entry names the
directories that were made, not the link or the `..` a path argument went through; and the directory is
then made at that canonical place, so what is made is exactly what was recorded.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from coretools.errors import ErrorKind, PathError, ToolError
from coretools.sandbox.paths import Location

if TYPE_CHECKING:
    from coretools.sandbox.gateway import Workspace

E = TypeVar("E")  # the journal's entry, which this module does not import (the journal imports it)
_MAX_HOPS = 40  # links followed on the way to the deepest existing directory, as the kernel's ELOOP bound


def planned(ws: Workspace, loc: Location) -> tuple[Location, list[str]]:
    """The canonical place of the directory `loc` names and the directories a `mkdir -p` of it would make
    there now, outermost first (none: it exists). The deepest existing directory on the way is resolved
    (a contained link followed, as writes follow it) until its real path is the one named; the names below
    it do not exist yet, so they are real as they stand."""
    path = os.path.normpath(ws.edit_key(loc))
    top = path
    for _ in range(_MAX_HOPS):
        top = path
        while not _exists(ws, top):
            top = os.path.dirname(top)
        real = top if any(r.path == top for r in ws.roots) else ws.edit_key(ws.locate(top))
        if real == top:
            break
        path = os.path.normpath(real + path[len(top):])
    else:
        raise PathError(f"Too many levels of symbolic links: {loc.shown}", ErrorKind.INVALID_TOOL_PARAMS)
    missing, at = [], path
    while at != top and at != os.path.dirname(at):
        missing.append(at)
        at = os.path.dirname(at)
    return ws.locate(path), missing[::-1]


def _exists(ws: Workspace, path: str) -> bool:
    """Whether `path` names something (a contained link followed); a path the gateway refuses otherwise
    counts as there, so the mkdir itself reports why."""
    try:
        return ws.exists(ws.locate(path))
    except ToolError:
        return True


def make(ws: Workspace, loc: Location, record: Callable[[list[str]], E | None],
         void: Callable[[E], None]) -> tuple[tuple[str, bool], E | None]:
    """`mkdir -p` of `loc` at its canonical place, the directories it will make given to `record` first
    (which makes them durable in the journal and returns the entry, or None when it could not); an entry
    whose mkdir failed, or made nothing (another program made the directory meanwhile), goes to `void`.
    Returns `Workspace.make_directory`'s answer and the entry that stands."""
    target, missing = planned(ws, loc)
    entry = record(missing) if missing else None
    try:
        made = ws.make_directory(target)
    except BaseException:
        if entry is not None:
            void(entry)
        raise
    if entry is not None and not made[1]:
        void(entry)
        entry = None
    return made, entry


def remove(ws: Workspace, dirs: list[str], record: Callable[[list[str]], E], void: Callable[[E], None]) -> E | None:
    """Remove what is left of `dirs` (outermost first; those gone are skipped), innermost first, each only
    while it is an empty directory (the name, never followed: see `Workspace.remove_directory`), after
    `record` journaled them; None when none is left. When one is refused, the ones removed before it are
    made again, the entry goes to `void` and the refusal goes on: all or nothing."""
    there = [path for path in dirs if _exists(ws, path)]
    if not there:
        return None
    entry = record(there)
    try:
        _remove_all(ws, there)
    except BaseException:
        void(entry)
        raise
    return entry


def _remove_all(ws: Workspace, dirs: list[str]) -> None:
    removed: list[Location] = []
    try:
        for path in reversed(dirs):
            loc = ws.locate(path)
            try:
                ws.remove_directory(loc)
            except ToolError as exc:
                if exc.kind != ErrorKind.FILE_NOT_FOUND:
                    raise
                continue
            removed.append(loc)
    except BaseException:
        if removed:
            with contextlib.suppress(ToolError, OSError):
                ws.make_directory(removed[0])
        raise
