"""glob: files matching a glob pattern, recently modified first."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import anyio

from coretools.errors import ToolError
from coretools.server.ripgrep import MAX_GLOB_CHARS, check_rg_argument
from coretools.server.ignore import IgnoreOptions
from coretools.server.workspace import DirEntry, Location, WalkReport, Workspace
from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.walking import (
    glob_escape,
    globmatch,
    has_magic,
    name_filter,
    search_scopes,
    split_literal_prefix,
    walk_files,
    walk_order,
)

RECENT_SECONDS = 24 * 3600
MAX_RESULTS = 5000


class Glob(Tool):
    name = "glob"
    title = "Find files"
    description = (
        "Efficiently finds files matching a glob pattern (e.g. 'src/**/*.ts', '**/*.{md,txt}', 'docs/*.md'), "
        "returning absolute paths sorted with files modified in the last 24 hours first (newest first), then "
        "alphabetically. '**' matches any number of directories; a pattern without '/' matches only at the top "
        "of the search directory. Files hidden by .gitignore, .geminiignore and default excludes are skipped; "
        "when nothing matches, the answer says how many files matching the pattern .gitignore/.geminiignore "
        "hid (that count is not given when files are found)."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "The glob pattern to match against, e.g. '**/*.py' or 'docs/*.md'.",
            },
            "path": {
                "type": "string",
                "description": "Optional: the absolute path of the directory to search within. If omitted, every "
                "workspace root is searched.",
            },
            "case_sensitive": {
                "type": "boolean",
                "description": "Optional: whether matching is case-sensitive. Defaults to false.",
                "default": False,
            },
            "respect_git_ignore": {
                "type": "boolean",
                "description": "Optional: whether to skip files matched by .gitignore. Defaults to true.",
                "default": True,
            },
        },
        "required": ["pattern"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await anyio.to_thread.run_sync(self._glob, args, ctx)

    def _glob(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        pattern = args["pattern"].strip()
        if not pattern:
            raise ToolError("The 'pattern' parameter cannot be empty.", "invalid_tool_params")
        check_rg_argument("pattern", pattern, MAX_GLOB_CHARS)
        scopes = search_scopes(ws, args.get("path"))
        options = IgnoreOptions(git=args["respect_git_ignore"], gemini=True, defaults=True)
        case_sensitive = args["case_sensitive"]
        report = WalkReport()
        found: list[tuple[str, float, int, str]] = []  # shown path, mtime, scope, root-relative path
        searched: list[tuple[Location, str]] = []
        for scope in scopes:
            local = pattern
            if local.startswith("/"):  # an absolute pattern inside this scope becomes relative to it
                if not local.startswith(scope.shown.rstrip("/") + "/"):
                    continue
                local = local[len(scope.shown.rstrip("/")) + 1 :]
            if not has_magic(local) or _literal_exists(ws, scope.loc, local):
                local = glob_escape(local)  # a name such as 'file[1].txt' that exists is meant literally
            prefix, rest = split_literal_prefix(local)
            start = scope.loc
            if prefix:
                start = ws.locate(prefix, base=scope.loc)
                if not ws.exists(start):
                    continue
            try:
                with ws.open_node(start) as node:
                    if not node.is_dir:
                        continue
                    base = Location(node.root, node.rel, node.path)
            except ToolError:
                continue
            searched.append((base, rest))
            shown = ws.shown_path
            found += (
                (shown(base.root, e.rel), e.mtime, len(searched), e.rel)
                for e in _matching(ws, base, rest, case_sensitive, options, ctx, report, ordered=False)
            )
        where = scopes[0].shown if len(scopes) == 1 else f"{len(scopes)} workspace directories"
        within = "within" if len(scopes) == 1 else "across"
        if not found:
            ignored = _hidden_matches(ws, searched, case_sensitive, options, ctx)
            text = f'No files found matching pattern "{pattern}" {within} {where}'
            if ignored:
                text += f" ({ignored} files were ignored)"
            return ToolResult.text(text + ".", {"files": [], "ignored": ignored})
        now = time.time()
        # recent files: newest first, equal times in walk order (scope by scope); older ones by path
        recent = sorted(
            (f for f in found if now - f[1] < RECENT_SECONDS), key=lambda f: (-f[1], f[2], walk_order(f[3]))
        )
        older = sorted(f[0] for f in found if now - f[1] >= RECENT_SECONDS)
        paths = [f[0] for f in recent] + older
        header = f'Found {len(paths)} file(s) matching "{pattern}" {within} {where}'
        header += ", sorted by modification time (newest first):"
        shown = paths[:MAX_RESULTS]
        text = header + "\n" + "\n".join(shown)
        if len(paths) > MAX_RESULTS:
            text += f"\n... {len(paths) - MAX_RESULTS} more not shown; use a narrower pattern or path."
        if report.truncated:
            text += f"\n(The walk was bounded: {report.truncated}.)"
        # The ignored count is only worked out when nothing matched (see _hidden_matches).
        return ToolResult.text(text, {"files": shown, "total": len(paths), "ignored": None})


def _matching(
    ws: Workspace,
    base: Location,
    rest: str,
    case_sensitive: bool,
    options: IgnoreOptions,
    ctx: ToolContext | None,
    report: WalkReport,
    ordered: bool = True,
) -> Iterator[DirEntry]:
    """The files below `base` that the glob `rest` (relative to it) matches and `options` let through."""
    matches = functools.partial(globmatch, patterns=rest, case_sensitive=case_sensitive)
    names = name_filter(rest, case_sensitive)
    yield from walk_files(
        ws, base, options, ctx, report, select=matches, names=names, count_ignored=False, ordered=ordered
    )


def _hidden_matches(
    ws: Workspace,
    searched: list[tuple[Location, str]],
    case_sensitive: bool,
    options: IgnoreOptions,
    ctx: ToolContext | None,
) -> int:
    """How many files match the pattern but were hidden by .gitignore/.geminiignore, as Gemini CLI counts
    them: the matches of the same search with those sources off (default excludes and protected paths still
    hide, and are not counted). Only called when the search found nothing, so every such match was hidden."""
    loose = IgnoreOptions(git=False, gemini=False, defaults=options.defaults)
    if loose == options:
        return 0
    return sum(
        1 for base, rest in searched for _ in _matching(ws, base, rest, case_sensitive, loose, ctx, WalkReport())
    )


def _literal_exists(ws: Workspace, base: Location, pattern: str) -> bool:
    try:
        return ws.exists(ws.locate(pattern, base=base))
    except ToolError:
        return False


TOOL = Glob
