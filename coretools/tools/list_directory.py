"""list_directory: the entries of one directory, directories first, with sizes and what was hidden."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio

from coretools.errors import ErrorKind, PathError, ProtectedPath, ToolError
from coretools.sandbox import DirEntry, IgnoreOptions, Location, Workspace, name_matches, protected_name
from coretools.workspace import RESPECT_PARAMETERS, Ignored, describe_chain, ignored_chain, include_hint
from coretools.tools.budget import lines_that_fit
from coretools.tools.dialects import latest_from
from coretools.tools.base import Tool, ToolContext, ToolResult, check_cancelled

MAX_ENTRIES_SHOWN = 5000
_CHECK_EVERY = 1000  # entries between two cancellation checks


@dataclass
class _Tally:
    """What a listing counted: every entry, those shown, those hidden by the rules and by the parameter."""

    seen: int = 0
    shown: int = 0
    by_rules: int = 0
    by_param: int = 0


class ListDirectory(Tool):
    name = "list_directory"
    title = "List directory"
    narrowing = "list a smaller directory"
    skips_ignored = True
    hint = "see what one directory holds, to find your way around the workspace."
    description = (
        "Lists the files and subdirectories directly inside a directory: directories first (marked [DIR]), then "
        "files with their sizes. Entries hidden by .gitignore, .geminiignore and the default excludes "
        "(node_modules, .git, dist, build, ...) are left out and counted. Optionally hides entries whose names "
        "match the given glob patterns."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The absolute path to the directory to list (a relative path is resolved against the "
                "primary workspace root).",
            },
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Glob patterns matched against entry names to leave out (e.g. ['*.log', 'tmp*']).",
            },
            "file_filtering_options": {
                "type": "object",
                "description": "Whether to honour ignore files (both default to true).",
                "properties": {
                    "respect_git_ignore": {
                        "type": "boolean",
                        "description": "Hide entries matched by .gitignore files. Default: true.",
                    },
                    "respect_gemini_ignore": {
                        "type": "boolean",
                        "description": "Hide entries matched by .geminiignore. Default: true.",
                    },
                },
            },
        },
        "required": ["path"],
    }
    aliases = {"dir_path": "path"}
    latest_schema = latest_from(input_schema, rename={"path": "dir_path"})

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await anyio.to_thread.run_sync(self._list, args, ctx)

    def _list(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        filtering = args.get("file_filtering_options") or {}
        options = IgnoreOptions(
            git=filtering.get("respect_git_ignore", True),
            gemini=filtering.get("respect_gemini_ignore", True),
            defaults=True,
        )
        loc = ws.locate(args["path"])
        patterns = [p for p in args.get("ignore") or [] if p]
        tally = _Tally()
        try:
            with ws.iter_dir(loc) as (node, entries):
                chain = ignored_chain(ws, node.root, node.rel, options)
                if chain:
                    tally.seen = sum(1 for _ in _checked(entries))
                else:
                    rows = self._visible(ws, node.root, loc, _checked(entries), options, patterns, tally)
                    first = heapq.nsmallest(MAX_ENTRIES_SHOWN, rows)  # (holds no more than it returns)
        except ToolError as exc:
            if exc.kind == ErrorKind.PATH_IS_NOT_A_DIRECTORY:
                raise ToolError(f"Error: Path is not a directory: {loc.shown}", exc.kind) from None
            if exc.kind == ErrorKind.FILE_NOT_FOUND:  # Gemini CLI's words, with the workspace's hint
                missing = PathError(f"Error: Directory not found or inaccessible: {loc.shown}", exc.kind)
                raise ws.missing(loc, missing) from None
            raise
        if not tally.seen:
            return ToolResult.text(f"Directory {node.path} is empty.")
        if chain:
            return _ignored_directory(node.path, chain, tally.seen)
        labels = [label for _, _, label in first]
        labels = labels[: lines_that_fit(labels, ctx.result_chars)]
        lines = [f"Directory listing for {node.path}:", *labels]
        notes = []
        if tally.shown > len(labels):
            notes.append(
                f"({tally.shown - len(labels)} more entries not shown: this answer lists {len(labels)} of "
                f"{tally.shown}; use glob with a pattern, such as '{_example(node.path)}/*.py', to narrow down)"
            )
        if tally.by_rules:
            notes.append(f"({tally.by_rules} ignored by .gitignore/.geminiignore rules or default excludes)")
        if tally.by_param:
            notes.append(f"({tally.by_param} hidden by the ignore parameter)")
        if not tally.shown:
            lines.append("(no visible entries)")
        text = "\n".join(lines)
        if notes:
            text += "\n\n" + "\n".join(notes)
        structured = {
            "path": node.path,
            "entries": labels,
            "ignored": tally.by_rules,
            "hidden_by_pattern": tally.by_param,
        }
        return ToolResult.text(text, structured)

    def _visible(
        self,
        ws: Workspace,
        root: int,
        loc: Location,
        entries: Iterable[DirEntry],
        options: IgnoreOptions,
        patterns: list[str],
        tally: _Tally,
    ) -> Iterator[tuple[bool, str, str]]:
        """The entries to show as `(not a directory, lower-case name, label)`, which sort in the listing's order
        (directories first, then by name), each counted in `tally` as it comes."""
        rules = ws.ignore_rules(root, options)
        for entry in entries:
            tally.seen += 1
            is_dir, label, target = self._describe(ws, root, loc, entry)
            # A symlink is hidden if its own name or its target is ignored (as Gemini CLI does).
            if entry.kind in ("dir", "file", "symlink") and (
                (not ws.allow_protected and protected_name(entry.name))  # (the directory itself is not)
                or rules.decide(entry.rel, is_dir)
                or (target is not None and ws.is_ignored(target.root, target.rel, is_dir, options))
            ):
                tally.by_rules += 1
                continue
            if patterns and name_matches(entry.name, patterns):
                tally.by_param += 1
                continue
            tally.shown += 1
            yield not is_dir, entry.name.lower(), label

    @staticmethod
    def _describe(
        ws: Workspace, root: int, parent: Location, entry: DirEntry
    ) -> tuple[bool, str, Location | None]:
        """`(is_dir, label, symlink target inside the workspace or None)`."""
        if entry.kind == "dir":
            return True, f"[DIR] {entry.name}", None
        if entry.kind == "file":
            return False, f"{entry.name} ({entry.size} bytes)", None
        if entry.kind == "symlink":
            try:
                with ws.open_node(Location(root, entry.rel, ws.shown_path(root, entry.rel))) as target:
                    where = Location(target.root, target.rel, target.path)
                    if target.is_dir:
                        return True, f"[DIR] {entry.name} (symlink to {target.path})", where
                    return False, f"{entry.name} ({target.st.st_size} bytes, symlink to {target.path})", where
            except ProtectedPath:
                return False, f"{entry.name} (symlink to a protected path)", None
            except ToolError as exc:
                if exc.kind == ErrorKind.FILE_NOT_FOUND:
                    return False, f"{entry.name} (broken symlink)", None
                return False, f"{entry.name} (symlink pointing outside the workspace)", None
        return False, f"{entry.name} (special file)", None


def _ignored_directory(path: str, chain: list[Ignored], count: int) -> ToolResult:
    """The answer for a directory the rules hide (itself or through a directory containing it): none of its
    entries is listed, as a walk never shows anything below an ignored directory; it says who hides it and
    which `file_filtering_options` would list it."""
    hint = include_hint(chain, RESPECT_PARAMETERS, _spell, "list it")
    text = (
        f"Directory listing for {path}:\n(no visible entries)\n\n"
        f"({describe_chain(chain)}, so {_its_entries(count)} not listed; {hint}.)"
    )
    structured = {
        "path": path,
        "entries": [],
        "ignored": count,
        "hidden_by_pattern": 0,
        "ignored_by": [verdict.where for verdict in chain],
    }
    return ToolResult.text(text, structured)


def _checked(entries: Iterable[DirEntry]) -> Iterator[DirEntry]:
    """`entries`, with a check every `_CHECK_EVERY` that the call was not cancelled (a directory can hold
    millions): a call that timed out stops listing."""
    for count, entry in enumerate(entries):
        if count % _CHECK_EVERY == 0:
            check_cancelled()
        yield entry


def _its_entries(count: int) -> str:
    return "its 1 entry is" if count == 1 else f"its {count} entries are"


def _spell(names: list[str]) -> str:
    return "file_filtering_options: {" + ", ".join(f"{name}: false" for name in names) + "}"


TOOL = ListDirectory


def _example(path: str) -> str:
    return path.rstrip("/") or "/"
