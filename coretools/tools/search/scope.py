"""Where search_file_content searches: the targets a `path` (or every root) names, the `include` filter as
the engines read it, and why a directory the caller named is not searched (ignored by a rule).
"""

from __future__ import annotations

import os

from coretools.errors import ErrorKind, ToolError
from coretools.workspace import ignored_by
from coretools.sandbox import Location
from coretools.tools.base import ToolContext
from coretools.tools.search.results import SEARCH_OPTIONS, Target


def open_targets(ctx: ToolContext, path: str | None) -> list[Target]:
    ws = ctx.workspace
    if not path:
        targets = []
        try:
            for index, root in enumerate(ws.roots):
                node = ws.open_node(Location(index, "", root.shown))
                prefix = f"{node.path}/" if len(ws.roots) > 1 else ""
                targets.append(Target(index, node.root, node.rel, node.path, node.fd, True, prefix))
        except BaseException:
            for t in targets:
                os.close(t.fd)
            raise
        return targets
    node = ws.open_node(ws.locate(path))
    if not (node.is_dir or node.is_file):
        node.close()
        raise ToolError(
            f"Path is not a valid directory or file: {node.path}. Pass a directory (or a regular file) inside "
            "the workspace.",
            ErrorKind.PATH_IS_NOT_A_DIRECTORY,
        )
    return [Target(0, node.root, node.rel, node.path, node.fd, node.is_dir, "")]


def normalise_include(include: str) -> str:
    """`include` as the engines read it: a leading `./` (the searched directory) spelled as the anchoring
    `/`, or dropped where a later slash anchors the glob anyway (`./src/*.py` is `src/*.py`)."""
    if not include.startswith("./"):
        return include
    while include.startswith("./"):
        include = include[2:].lstrip("/")
    if not include:
        return "**"
    return include if "/" in include.rstrip("/") else "/" + include


def ignored_reason(ctx: ToolContext, target: Target) -> str | None:
    """Why the directory `target` is not searched under the default ignore rules, as `"<dir>" is ignored
    by <source> (rule '<line>')`; None when it is not ignored."""
    if not target.is_dir:
        return None
    verdict = ignored_by(ctx.workspace, target.root, target.rel, SEARCH_OPTIONS)
    return verdict.describe() if verdict is not None else None
