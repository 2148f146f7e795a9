"""search_file_content: a regular expression searched in file contents, with ripgrep (Python fallback)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox.ripgrep import MAX_GLOB_CHARS, MAX_PATTERN_CHARS, check_rg_argument
from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.search_engines import Collector, Job, PythonEngine, Request, RipgrepEngine, Target

DEFAULT_MAX_MATCHES = 300
MAX_TEXT_CHARS = 50_000
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class SearchOptions:
    search_max_matches: int = DEFAULT_MAX_MATCHES
    search_timeout: float = DEFAULT_TIMEOUT
    search_engine: str = "auto"


class SearchFileContent(Tool):
    name = "search_file_content"
    title = "Search text"
    hint = "search file contents with a regular expression (ripgrep syntax)."
    Options = SearchOptions
    options: SearchOptions
    description = (
        "Searches for a regular expression pattern within the content of files in a specified directory (or "
        "every workspace directory), optionally filtered by a glob pattern. Matching is case-insensitive and "
        "line by line (ripgrep / Rust regex syntax). Returns the lines that match, with their file paths and "
        "line numbers; ignored files (.gitignore, .geminiignore, default excludes such as node_modules) and "
        "binary files are not searched. Output is capped; the header always gives the true totals."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "The regular expression (regex) pattern to search for within file contents "
                "(e.g., 'function\\s+myFunction', 'import\\s+\\{.*\\}\\s+from\\s+.*').",
            },
            "path": {
                "type": "string",
                "description": "Optional: The absolute path to the directory (or file) to search within. If "
                "omitted, searches every workspace directory.",
            },
            "include": {
                "type": "string",
                "description": "Optional: A glob pattern to filter which files are searched, relative to the "
                "searched directory (e.g., '*.js', '*.{ts,tsx}', 'src/**'). If omitted, searches all files "
                "(respecting potential global ignores).",
            },
        },
        "required": ["pattern"],
    }

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--search-max-matches",
            type=int,
            default=DEFAULT_MAX_MATCHES,
            metavar="N",
            help=f"matching lines shown per search (the totals are always counted; default {DEFAULT_MAX_MATCHES})",
        )
        parser.add_argument(
            "--search-timeout",
            type=float,
            default=DEFAULT_TIMEOUT,
            metavar="SECONDS",
            help=f"stop a search after this long and report what was found (default {DEFAULT_TIMEOUT:g})",
        )
        parser.add_argument(
            "--search-engine",
            choices=["auto", "ripgrep", "python"],
            default="auto",
            help="auto: ripgrep when its binary runs, else the pure-Python engine (default auto)",
        )

    def _engines(self) -> list:
        from coretools.sandbox.ripgrep import find_rg

        choice = self.options.search_engine
        binary = find_rg() if choice != "python" else None
        if choice == "ripgrep" and binary is None:
            raise ToolError(
                "The ripgrep engine was requested but no working rg binary was found.", ErrorKind.EXECUTION_FAILED
            )
        return ([RipgrepEngine(binary)] if binary else []) + [PythonEngine()]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = args["pattern"]
        if not pattern:
            raise ToolError("The 'pattern' parameter cannot be empty.", ErrorKind.INVALID_TOOL_PARAMS)
        include = (args.get("include") or "").strip() or None
        check_rg_argument("pattern", pattern, MAX_PATTERN_CHARS)
        if include is not None:
            check_rg_argument("include", include, MAX_GLOB_CHARS)
        req = Request(
            pattern=pattern,
            include=include,
            cap=max(1, self.options.search_max_matches),
            timeout=self.options.search_timeout,
            allow_protected=ctx.workspace.allow_protected,
        )
        targets = await anyio.to_thread.run_sync(_open_targets, ctx, args.get("path"))
        try:
            collector, engine = await anyio.to_thread.run_sync(self._search, ctx, targets, req)
        finally:
            for target in targets:
                try:
                    os.close(target.fd)
                except OSError:
                    pass
        return _format(args, include, targets, collector, engine, req)

    def _search(self, ctx: ToolContext, targets: list[Target], req: Request) -> tuple[Collector, str]:
        def check() -> None:
            anyio.from_thread.check_cancelled()

        def progress(out: Collector) -> None:
            message = f"{out.total_matches} matches in {out.total_files} files so far"
            try:
                anyio.from_thread.run(ctx.progress, out.total_files + out.total_matches, None, message)
            except RuntimeError:  # no event loop to report to (a synchronous caller)
                pass

        for engine in self._engines():
            collector = Collector(req.cap)
            if engine.search(Job(ctx.workspace, targets, req, collector, check, progress)):
                return collector, engine.name
        raise AssertionError("the Python engine always runs")  # pragma: no cover


def _open_targets(ctx: ToolContext, path: str | None) -> list[Target]:
    ws = ctx.workspace
    if not path:
        from coretools.sandbox.paths import Location

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


def _where(args: dict[str, Any], targets: list[Target]) -> str:
    if args.get("path"):
        return f'in path "{args["path"]}"'
    if len(targets) == 1:
        return "in the workspace directory"
    return f"across {len(targets)} workspace directories"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("h") else f"{n} {word}s"


def _format(
    args: dict[str, Any], include: str | None, targets: list[Target], out: Collector, engine: str, req: Request
) -> ToolResult:
    where = _where(args, targets)
    flt = f' (filter: "{include}")' if include else ""
    structured: dict[str, Any] = {
        "total_matches": out.total_matches,
        "total_files": out.total_files,
        "shown_matches": 0,
        "truncated": False,
        "engine": engine,
        "unverified_files": out.unverified_files,
    }
    stopped = f" Note: {out.stopped}, so the totals are lower bounds." if out.stopped else ""
    if out.unverified_files:
        stopped += (
            f" Note: {_plural(out.unverified_files, 'file')} changed during the search (or could not be read again "
            "inside the workspace); their unconfirmed matches are left out."
        )
    if out.total_matches == 0:
        structured["stopped"] = out.stopped
        return ToolResult.text(f'No matches found for pattern "{req.pattern}" {where}{flt}.{stopped}', structured)
    body: list[str] = []
    shown = 0
    shown_files = 0
    size = 0
    full = True
    for path, lines in out.groups():
        block = [f"File: {path}"]
        for number, text in lines:
            row = f"L{number}: {text}"
            if size + len(row) > MAX_TEXT_CHARS and shown:
                full = False
                break
            block.append(row)
            size += len(row) + 1
            shown += 1
        if len(block) > 1:
            body += ["---", *block]
            shown_files += 1
        if not full:
            break
    body.append("---")
    truncated = shown < out.total_matches
    head = (
        f"Found {_plural(out.total_matches, 'match')} in {_plural(out.total_files, 'file')} "
        f'for pattern "{req.pattern}" {where}{flt}'
    )
    if truncated:
        reason = f"the limit of {req.cap} matches" if full else f"about {MAX_TEXT_CHARS // 1000} KB of text"
        head += (
            f" (showing the first {_plural(shown, 'match')} in {_plural(shown_files, 'file')}, sorted by path; "
            f"results limited to {reason}). To see the rest, narrow the search: a more specific pattern, a "
            "'path' to a subdirectory, or an 'include' glob such as '*.py'"
        )
    head += ":" + stopped
    structured.update(shown_matches=shown, truncated=truncated, stopped=out.stopped)
    return ToolResult.text("\n".join([head, *body]), structured)


TOOL = SearchFileContent

