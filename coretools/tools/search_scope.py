"""Where search_file_content searches: the targets a `path` (or every root) names, the `include` filter as
the engines read it, and why a directory the caller named is not searched (ignored by a rule).
"""

from __future__ import annotations

import os

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox.ignore import DEFAULT_EXCLUDES, GEMINIIGNORE, GIT_INFO_EXCLUDE, GITIGNORE
from coretools.sandbox.matcher import RuleSet
from coretools.sandbox.paths import Location
from coretools.sandbox.ripgrep import ignore_lines
from coretools.tools.base import ToolContext
from coretools.tools.search_results import SEARCH_OPTIONS, Target


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
    ws = ctx.workspace
    if not target.is_dir or not target.rel:
        return None
    rules = ws.ignore_rules(target.root, SEARCH_OPTIONS)
    parts = target.rel.split("/")
    for depth in range(1, len(parts) + 1):
        rel = "/".join(parts[:depth])
        if rules.decide(rel, True):
            shown = ws.shown_path(target.root, rel)
            source, line = _deciding_rule(ws, target.root, rel)
            where = f"{source} (rule '{line}')" if line else source
            inside = "" if rel == target.rel else ", which contains it,"
            return f'"{shown}"{inside} is ignored by {where}'
    return None


def _deciding_rule(ws, root: int, rel: str) -> tuple[str, str | None]:
    """The ignore source and line that decide that the directory `rel` is ignored: of the rule sources in
    their order of precedence, the last line that matches it."""
    probe = rel + "/"
    parent = rel.rpartition("/")[0]
    layers: list[tuple[str, list[str], str]] = [("the default excludes", list(DEFAULT_EXCLUDES), probe)]
    layers.append((GIT_INFO_EXCLUDE, ignore_lines(ws.ignore_source(root, GIT_INFO_EXCLUDE)), probe))
    dirs = [""]  # each directory whose .gitignore applies to `rel`: the root down to its parent
    if parent:
        bits = parent.split("/")
        dirs += ["/".join(bits[: i + 1]) for i in range(len(bits))]
    for here in dirs:
        name = f"{here}/{GITIGNORE}" if here else GITIGNORE
        layers.append((name, ignore_lines(ws.ignore_source(root, name)), probe[len(here) + 1 :] if here else probe))
    layers.append((GEMINIIGNORE, ignore_lines(ws.ignore_source(root, GEMINIIGNORE)), probe))
    verdict: tuple[str, str | None] = ("the ignore rules", None)
    for source, lines, path in layers:
        for line in lines:
            hit = _rule(line).check(path)
            if hit is True:
                verdict = (source, line)
            elif hit is False:
                verdict = ("the ignore rules", None)
    return verdict


def _rule(line: str) -> RuleSet:
    return RuleSet.from_lines([line])
