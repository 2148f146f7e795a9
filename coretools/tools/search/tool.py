"""search_file_content: a regular expression searched in file contents, with ripgrep (Python fallback).

The seed schema is published by default; every newer Gemini CLI name and option is accepted too (`dir_path`,
`include_pattern`, and the ripgrep and GrepTool variants' options), and `--schema-dialect latest` publishes
the newest schema as `grep_search`. Without the newer options a call behaves as it always did:
case-insensitive, ignore rules applied, up to `--search-max-matches` matching lines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import MAX_GLOB_CHARS, MAX_PATTERN_CHARS, check_rg_argument
from coretools.tools.base import Tool, ToolContext, ToolResult, check_cancelled, option
from coretools.tools.budget import room
from coretools.tools.dialects import latest_from
from coretools.tools.search.engines import PythonEngine, RipgrepEngine
from coretools.tools.search.format import format_result, no_matches, where
from coretools.tools.search.regex import LineRegex
from coretools.tools.search.results import MAX_CONTEXT, NO_IGNORE, SEARCH_OPTIONS, Collector, Job, Request, Target
from coretools.tools.search.scope import ignored_reason, normalise_include, open_targets

DEFAULT_MAX_MATCHES = 300
NAMES_ONLY_MAX_FILES = 1000
DEFAULT_TIMEOUT = 60.0

NEWER_OPTIONS: dict[str, dict[str, Any]] = {
    "exclude_pattern": {
        "type": "string",
        "description": "Optional: A regular expression; matching lines that also match it are left out (and "
        "not counted). Case follows 'case_sensitive'.",
    },
    "names_only": {
        "type": "boolean",
        "description": "Optional: If true, only the file paths of the matches will be returned, sorted, "
        "instead of the matching lines. Defaults to false.",
        "default": False,
    },
    "max_matches_per_file": {
        "type": "integer",
        "minimum": 1,
        "description": "Optional: At most this many matching lines are shown per file (all are counted).",
    },
    "total_max_matches": {
        "type": "integer",
        "minimum": 1,
        "description": "Optional: At most this many matching lines are shown in all (files, with "
        "'names_only'); the totals are still counted. If omitted, the server's limit applies (300 by "
        "default).",
    },
    "case_sensitive": {
        "type": "boolean",
        "description": "Optional: If true, the search is case-sensitive. Defaults to false (case is ignored).",
        "default": False,
    },
    "fixed_strings": {
        "type": "boolean",
        "description": "Optional: If true, 'pattern' is a literal string, not a regular expression. Defaults "
        "to false.",
        "default": False,
    },
    "context": {
        "type": "integer",
        "minimum": 0,
        "description": "Optional: Lines of context shown before and after each match (like grep -C); "
        "context lines read 'L<n>- ', matching lines 'L<n>: '.",
    },
    "after": {
        "type": "integer",
        "minimum": 0,
        "description": "Optional: Lines of context shown after each match (like grep -A); overrides "
        "'context' on that side.",
    },
    "before": {
        "type": "integer",
        "minimum": 0,
        "description": "Optional: Lines of context shown before each match (like grep -B); overrides "
        "'context' on that side.",
    },
    "no_ignore": {
        "type": "boolean",
        "description": "Optional: If true, also searches files that .gitignore, .geminiignore and the default "
        "excludes (node_modules, build, ...) leave out; protected files (secrets, .git) stay excluded. "
        "Defaults to false.",
        "default": False,
    },
}


@dataclass(frozen=True)
class SearchOptions:
    search_max_matches: int = option(
        DEFAULT_MAX_MATCHES,
        "--search-max-matches",
        f"matching lines shown per search (the totals are always counted; default {DEFAULT_MAX_MATCHES})",
        metavar="N",
    )
    search_timeout: float = option(
        DEFAULT_TIMEOUT,
        "--search-timeout",
        f"stop a search after this long and report what was found (default {DEFAULT_TIMEOUT:g})",
        metavar="SECONDS",
    )
    search_engine: str = option(
        "auto",
        "--search-engine",
        "auto: ripgrep when its binary runs, else the pure-Python engine (default auto)",
        choices=["auto", "ripgrep", "python"],
    )


class SearchFileContent(Tool):
    name = "search_file_content"
    title = "Search text"
    hint = "search file contents with a regular expression (ripgrep syntax)."
    Options = SearchOptions
    options: SearchOptions
    narrowing = "search a smaller directory (`path`) or fewer files (`include`)"
    skips_ignored = True
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
    aliases = {"dir_path": "path", "include_pattern": "include"}
    extra_properties = NEWER_OPTIONS
    latest_name = "grep_search"
    latest_schema = latest_from(
        input_schema, rename={"path": "dir_path", "include": "include_pattern"}, add=NEWER_OPTIONS
    )

    def _engines(self) -> list:
        from coretools.sandbox import find_rg

        choice = self.options.search_engine
        binary = find_rg() if choice != "python" else None
        if choice == "ripgrep" and binary is None:
            raise ToolError(
                "The ripgrep engine was requested but no working rg binary was found.", ErrorKind.EXECUTION_FAILED
            )
        return ([RipgrepEngine(binary)] if binary else []) + [PythonEngine()]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        req = self._request(args, ctx)
        targets, found = await anyio.to_thread.run_sync(self._in_thread, ctx, args, req)
        if isinstance(found, str):
            return _ignored(req, args, targets, found)
        shown_include = (args.get("include") or "").strip() or None
        return format_result(req, args.get("path"), shown_include, targets, *found)

    def _in_thread(
        self, ctx: ToolContext, args: dict[str, Any], req: Request
    ) -> tuple[list[Target], str | tuple[Collector, str]]:
        """Everything that touches the file system, in one worker thread (each hop to a thread costs the
        server CPU): the targets, and why the ignore rules leave the `path` out (nothing is searched then) or
        the search's collector and engine. The targets' descriptors are closed when it returns."""
        targets = open_targets(ctx, args.get("path"))
        try:
            if not args.get("no_ignore"):
                reason = ignored_reason(ctx, targets[0])
                if reason is not None:
                    return targets, reason
            return targets, self._search(ctx, targets, req)
        finally:
            for target in targets:
                try:
                    os.close(target.fd)
                except OSError:
                    pass

    def _request(self, args: dict[str, Any], ctx: ToolContext) -> Request:
        """The call as the engines take it, every parameter checked before anything runs."""
        pattern = args["pattern"]
        if not pattern:
            raise ToolError("The 'pattern' parameter cannot be empty.", ErrorKind.INVALID_TOOL_PARAMS)
        check_rg_argument("pattern", pattern, MAX_PATTERN_CHARS)
        include = (args.get("include") or "").strip() or None
        if include is not None:
            check_rg_argument("include", include, MAX_GLOB_CHARS)
        exclude = args.get("exclude_pattern") or None
        if exclude is not None:
            check_rg_argument("exclude_pattern", exclude, MAX_PATTERN_CHARS)
            LineRegex(exclude, bool(args.get("case_sensitive")), label="exclude ")
        for name in ("max_matches_per_file", "total_max_matches"):
            if args.get(name) is not None and args[name] < 1:
                raise ToolError(f"{name} must be at least 1.", ErrorKind.INVALID_TOOL_PARAMS)
        names_only = bool(args.get("names_only"))
        cap = args.get("total_max_matches") or (
            NAMES_ONLY_MAX_FILES if names_only else max(1, self.options.search_max_matches)
        )
        context = args.get("context") or 0
        return Request(
            pattern=pattern,
            include=normalise_include(include) if include else None,
            cap=cap,
            timeout=self.options.search_timeout,
            allow_protected=ctx.workspace.allow_protected,
            ignore=NO_IGNORE if args.get("no_ignore") else SEARCH_OPTIONS,
            case_sensitive=bool(args.get("case_sensitive")),
            fixed_strings=bool(args.get("fixed_strings")),
            before=min(MAX_CONTEXT, _given(args.get("before"), context)),
            after=min(MAX_CONTEXT, _given(args.get("after"), context)),
            exclude=exclude,
            per_file=args.get("max_matches_per_file"),
            names_only=names_only,
            text_chars=_text_chars(ctx.result_chars),
        )

    def _search(self, ctx: ToolContext, targets: list[Target], req: Request) -> tuple[Collector, str]:
        def check() -> None:
            check_cancelled()

        def progress(out: Collector) -> None:
            matches = out.total_matches + out.pending
            message = f"{matches} matches in {out.total_files} files so far"
            try:
                anyio.from_thread.run(ctx.progress, out.total_files + matches, None, message)
            except RuntimeError:  # no event loop to report to (a synchronous caller)
                pass

        for engine in self._engines():
            collector = Collector(req.cap, req.names_only)
            if engine.search(Job(ctx.workspace, targets, req, collector, check, progress)):
                return collector, engine.name
        raise AssertionError("the Python engine always runs")  # pragma: no cover


def _given(value: int | None, default: int) -> int:
    return default if value is None else max(0, value)


def _ignored(req: Request, args: dict[str, Any], targets: list[Target], reason: str) -> ToolResult:
    """The answer for a `path` the ignore rules leave out: nothing in it is searched, and how to search it."""
    include = (args.get("include") or "").strip()
    flt = f' (filter: "{include}")' if include else ""
    note = f" {reason}, so nothing in it is searched; pass no_ignore: true to search it."
    structured = {"total_matches": 0, "total_files": 0, "shown_matches": 0, "truncated": False, "ignored": True}
    return ToolResult.text(no_matches(req, where(args.get("path"), targets), flt, note), structured)


TOOL = SearchFileContent


# What a search answer keeps beside its matches: the header, the notes on limits and skipped files.
RESERVE_CHARS = 5_000


def _text_chars(budget: int) -> int:
    """The characters of matches an answer may hold within the result budget (all of a large cap if none)."""
    space = room(budget, RESERVE_CHARS, least=1_000)
    return 10_000_000 if space is None else space
