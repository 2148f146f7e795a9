"""glob: files matching a glob pattern, recently modified first."""

from __future__ import annotations

import functools
import time
from typing import Any

import anyio

from coretools.errors import ToolError
from coretools.server.ignore import IgnoreOptions
from coretools.server.workspace import Location, WalkReport, Workspace
from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.walking import (
    glob_escape,
    globmatch,
    has_magic,
    name_filter,
    search_scopes,
    split_literal_prefix,
    walk_files,
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
        "of the search directory. Files hidden by .gitignore, .geminiignore and default excludes are skipped."
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
        scopes = search_scopes(ws, args.get("path"))
        options = IgnoreOptions(git=args["respect_git_ignore"], gemini=True, defaults=True)
        case_sensitive = args["case_sensitive"]
        report = WalkReport()
        found: list[tuple[str, float]] = []
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
            matches = functools.partial(globmatch, patterns=rest, case_sensitive=case_sensitive)
            names = name_filter(rest, case_sensitive)
            for entry in walk_files(ws, base, options, ctx, report, select=matches, names=names):
                found.append((ws.shown_path(base.root, entry.rel), entry.mtime))
        where = scopes[0].shown if len(scopes) == 1 else f"{len(scopes)} workspace directories"
        within = "within" if len(scopes) == 1 else "across"
        if not found:
            text = f'No files found matching pattern "{pattern}" {within} {where}'
            if report.ignored:
                text += f" ({report.ignored} files were ignored)"
            return ToolResult.text(text + ".", {"files": [], "ignored": report.ignored})
        now = time.time()
        recent = sorted((f for f in found if now - f[1] < RECENT_SECONDS), key=lambda f: -f[1])
        older = sorted((f for f in found if now - f[1] >= RECENT_SECONDS), key=lambda f: f[0])
        paths = [p for p, _ in recent + older]
        header = f'Found {len(paths)} file(s) matching "{pattern}" {within} {where}'
        if report.ignored:
            header += f" ({report.ignored} additional files were ignored)"
        header += ", sorted by modification time (newest first):"
        shown = paths[:MAX_RESULTS]
        text = header + "\n" + "\n".join(shown)
        if len(paths) > MAX_RESULTS:
            text += f"\n... {len(paths) - MAX_RESULTS} more not shown; use a narrower pattern or path."
        if report.truncated:
            text += f"\n(The walk was bounded: {report.truncated}.)"
        return ToolResult.text(text, {"files": shown, "total": len(paths), "ignored": report.ignored})


def _literal_exists(ws: Workspace, base: Location, pattern: str) -> bool:
    try:
        return ws.exists(ws.locate(pattern, base=base))
    except ToolError:
        return False


TOOL = Glob
