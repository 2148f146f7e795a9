"""The stale-write guard of an edit: when the edit reads the file, it must be as the session last saw it;
after writing, the session has seen what was written (its own consecutive edits never make a file stale).

Both steps run under the file's edit lock, in a worker thread. See `coretools.workspace.views`.
"""

from __future__ import annotations

from collections.abc import Callable

from coretools.errors import ToolError
from coretools.sandbox import Location, Node, Workspace, WriteOutcome
from coretools.workspace import FileViews


def check(views: FileViews, node: Node, read: Callable[[], bytes]) -> bytes | None:
    """Refuse the edit if the file open as `node` changed since the session saw it (under this name, or
    another hard link of the same file). `read` reads the content, for a digest to decide when only the stat
    differs; returns what it read (None when it was not called)."""
    path = node.path
    if views.seen(path) is None:
        path = views.alias(node.st) if node.st.st_nlink > 1 else None
        if path is None:
            return None
    data = None

    def reader() -> bytes:
        nonlocal data
        data = read()
        return data

    views.check(path, node.st, reader)
    return data


def check_missing(views: FileViews, loc: Location) -> None:
    """Refuse the edit of a file that does not exist if the session saw it exist."""
    if views.seen(loc.shown) is not None:
        views.check(loc.shown, None)


def remember(ws: Workspace, loc: Location, views: FileViews, data: bytes, outcome: WriteOutcome) -> None:
    """Record the file as this edit left it, content included (from the stat the write took, if it did)."""
    st = getattr(outcome, "st", None)
    if st is not None:
        views.saw(outcome.path, st, data if st.st_size == len(data) else None)
        return
    try:
        with ws.open_file(loc) as (node, _):
            views.saw(node.path, node.st, data if node.st.st_size == len(data) else None)
    except ToolError:
        views.forget(loc.shown)
