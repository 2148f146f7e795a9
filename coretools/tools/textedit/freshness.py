"""The stale-write guard of an edit: before planning, the file must be as the session last saw it; after
writing, the session has seen what was written (its own consecutive edits never make a file stale).

Both steps run under the file's edit lock, in a worker thread. See `coretools.sandbox.views`.
"""

from __future__ import annotations

import os

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.paths import Location
from coretools.sandbox.views import FileState, FileViews, StaleFile


def check(ws: Workspace, loc: Location, views: FileViews, limit: int) -> FileState | None:
    """Refuse the edit if the file changed since the session saw it (under this name, or another hard link
    of the same file). Returns the state the check accepted,
    for `confirm_unchanged`, or None when the session never saw the file (nothing to hold it to)."""
    try:
        with ws.open_file(loc) as (node, handle):
            path = node.path
            if views.seen(path) is None:
                path = views.alias(node.st) if node.st.st_nlink > 1 else None
                if path is None:
                    return None
            views.check(path, node.st, lambda: handle.read(limit + 1))  # type: ignore[attr-defined]
            return FileState.of(node.st)
    except ToolError as exc:
        if exc.kind != ErrorKind.FILE_NOT_FOUND:
            raise
    if views.seen(loc.shown) is None:
        return None
    views.check(loc.shown, None)
    return FileState.of(None)


def confirm_unchanged(accepted: FileState | None, planned: os.stat_result | None, shown: str) -> None:
    """The plan read the file the check accepted, not a version written between the two."""
    if accepted is not None and FileState.of(planned).stat != accepted.stat:
        raise StaleFile(shown, "it was modified while this edit was being prepared")


def remember(ws: Workspace, loc: Location, views: FileViews, data: bytes) -> None:
    """Record the file as this edit left it, content included."""
    try:
        with ws.open_file(loc) as (node, _):
            views.saw(node.path, node.st, data if node.st.st_size == len(data) else None)
    except ToolError:
        views.forget(loc.shown)
