"""Walks shared by the tools that enumerate files (glob, read_many_files): where to start, how to match
glob patterns, and progress and cancellation while a large tree is walked in a worker thread."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import anyio.from_thread

from coretools.errors import ToolError
from coretools.server.ignore import IgnoreOptions
from coretools.server.workspace import DirEntry, Location, WalkBounds, WalkReport, Workspace
from coretools.tools.base import ToolContext

PROGRESS_EVERY = 2000


# wcmatch is imported on first use: it costs ~6 MB of RSS, which a server that never globs need not pay.
def globmatch(rel: str, patterns: str | list[str], case_sensitive: bool = False) -> bool:
    """Glob matching of a relative path: `**` (globstar), braces, extglob, dot files, `!` negation."""
    from wcmatch import glob as wglob

    flags = wglob.GLOBSTAR | wglob.BRACE | wglob.EXTGLOB | wglob.DOTGLOB | wglob.NEGATE | wglob.GLOBSTARLONG
    if not case_sensitive:
        flags |= wglob.IGNORECASE
    return wglob.globmatch(rel, patterns, flags=flags)


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
) -> Iterator[DirEntry]:
    """`Workspace.walk` from a worker thread, with progress notifications and cancellation checks."""
    count = 0

    def check() -> None:
        anyio.from_thread.check_cancelled()

    for entry in ws.walk(loc, options, bounds=bounds, report=report, cancelled=check):
        count += 1
        if ctx is not None and count % PROGRESS_EVERY == 0:
            _progress(ctx, count, f"walked {count} files")
        yield entry


def _progress(ctx: ToolContext, done: int, message: str) -> None:
    try:
        anyio.from_thread.run(ctx.progress, float(done), None, message)
    except RuntimeError:  # not in a worker thread of an event loop (direct use): no progress
        pass


def relative_to(entry_rel: str, base_rel: str) -> str:
    return entry_rel[len(base_rel) + 1 :] if base_rel else entry_rel
