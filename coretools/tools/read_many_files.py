"""read_many_files: the text of several files (named, by directory or by glob), concatenated."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread

from coretools.errors import ToolError
from coretools.sandbox import (
    IgnoreOptions, Location, WalkReport, globmatch, has_magic, limit_option, relative_to, strip_prefix,
    walk_files,
)
from coretools.tools.dialects import latest_from
from coretools.tools.base import (
    Tool, ToolContext, ToolResult, audio_block, blob_block, check_cancelled, image_block, option, text_block,
)  # fmt: skip
from coretools.tools.filetypes import SNIFF_BYTES, classify, extension, window_after_sniff

DEFAULT_LINE_LIMIT = 2000
MAX_FILES = 500
MAX_TOTAL_CHARS = 1_000_000  # the text of one call when the server sets no result budget
SKIPPED_LIST_CHARS = 10_000
MAX_MEDIA_BYTES = 20 * 1024 * 1024  # per file, as read_file
# Base64 of all the images, audio and PDFs of one call (`--max-media-bytes`), apart from the text budget: what
# Gemini accepts inline in one request. The first media file of a call is read whatever its size (up to the
# per-file limit), so a single file reads as it does with read_file.
DEFAULT_MEDIA_BUDGET = 20 * 1024 * 1024
# Gemini CLI's default content excludes (binary formats, compiled Python, OS litter, the memory file);
# directories such as node_modules/ and build/ are the ignore engine's default excludes.
DEFAULT_FILE_EXCLUDES = [
    "**/*.{bin,exe,dll,so,dylib,class,jar,war,zip,tar,gz,bz2,rar,7z,doc,docx,xls,xlsx,ppt,pptx,odt,ods,odp}",
    "**/*.{pyc,pyo}",
    "**/.DS_Store",
    "**/.env",
    "**/GEMINI.md",
]


@dataclass
class Plan:
    files: dict[str, Location] = field(default_factory=dict)  # shown path -> location (sorted later)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    ignored: int = 0


@dataclass(frozen=True)
class ReadManyOptions:
    max_media_bytes: int = option(  # 0: no limit
        DEFAULT_MEDIA_BUDGET,
        "--max-media-bytes",
        "base64-encoded size of all the images, audio and PDFs one read_many_files call returns (apart from the "
        "text's result budget, --max-result-chars); further media files are skipped and listed; 0 for no limit "
        f"(default: {DEFAULT_MEDIA_BUDGET}, i.e. {DEFAULT_MEDIA_BUDGET // (1024 * 1024)} MiB)",
        metavar="BYTES",
    )


class ReadManyFiles(Tool):
    name = "read_many_files"
    title = "Read many files"
    hint = "read several files at once, named by path, directory or glob pattern."
    Options = ReadManyOptions
    options: ReadManyOptions
    narrowing = "name fewer files, or narrower patterns"
    skips_ignored = True
    description = (
        "Reads the content of several files at once, named by path, directory or glob pattern (relative to the "
        "primary workspace root), and concatenates the text with a '--- <path> ---' line before each file. "
        "Use it to get an overview of a code base or to read related files together. Directories are read "
        "recursively. Images, PDFs and audio are included only when named explicitly (by file name or "
        "extension in a pattern). Files hidden by ignore rules and default excludes are skipped and listed."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "paths": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "minLength": 1},
                "description": "Files, directories or glob patterns relative to the primary root, e.g. "
                "['src/**/*.ts'], ['README.md', 'docs/'].",
            },
            "include": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Optional: additional glob patterns to include, merged with 'paths'.",
            },
            "exclude": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Optional: glob patterns of files to leave out, e.g. ['**/*.test.ts'].",
            },
            "recursive": {
                "type": "boolean",
                "description": "Optional: read directories recursively (default true). Glob patterns recurse "
                "where they say '**'.",
                "default": True,
            },
            "useDefaultExcludes": {
                "type": "boolean",
                "description": "Optional: apply the default excludes (node_modules, .git, build output, binary "
                "formats...). Default true.",
                "default": True,
            },
            "respect_git_ignore": {
                "type": "boolean",
                "description": "Optional: skip files matched by .gitignore. Default true.",
                "default": True,
            },
        },
        "required": ["paths"],
    }
    latest_schema = latest_from(
        input_schema,
        drop=("paths", "respect_git_ignore"),
        add={
            "include": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "minLength": 1},
                "description": "Files, directories or glob patterns relative to the primary root, e.g. "
                "['src/**/*.ts'], ['README.md', 'docs/'].",
            },
            "file_filtering_options": {
                "type": "object",
                "description": "Optional: whether to honour .gitignore and .geminiignore (both true by default).",
                "properties": {
                    "respect_git_ignore": {"type": "boolean", "description": "Skip files .gitignore matches."},
                    "respect_gemini_ignore": {"type": "boolean", "description": "Skip files .geminiignore matches."},
                },
            },
        },
        required=["include"],
    )
    extra_properties = {"file_filtering_options": latest_schema["properties"]["file_filtering_options"]}

    required_via = {"paths": ("include",)}

    @classmethod
    def translate(cls, args: dict[str, Any]) -> dict[str, Any]:
        """Later Gemini CLI versions name the files to read `include`, with no `paths`."""
        if "paths" not in args and "include" in args:
            args = {**args, "paths": args["include"]}
            del args["include"]
        return super().translate(args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await anyio.to_thread.run_sync(self._run, args, ctx)

    def _run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        patterns = [p.replace("\\", "/") for p in [*args["paths"], *(args.get("include") or [])]]
        filtering = args.get("file_filtering_options") or {}
        git = filtering.get("respect_git_ignore", args["respect_git_ignore"])
        gemini = filtering.get("respect_gemini_ignore", True)
        options = IgnoreOptions(git=git, gemini=gemini, defaults=args["useDefaultExcludes"])
        excludes = list(args.get("exclude") or [])
        if args["useDefaultExcludes"]:
            excludes += DEFAULT_FILE_EXCLUDES
        plan = self._plan(ctx, patterns, options, excludes, args["recursive"])
        return self._read(ctx, plan, patterns)

    def _plan(
        self, ctx: ToolContext, patterns: list[str], options: IgnoreOptions, excludes: list[str], recursive: bool
    ) -> Plan:
        ws = ctx.workspace
        plan = Plan()
        globs: list[str] = []
        rules: dict = {}  # each root's ignore rules, worked out once for every path of this call
        for pattern in patterns:
            if has_magic(pattern) and not self._literal_exists(ctx, pattern):
                globs.append(pattern.lstrip("./") if pattern.startswith("./") else pattern)
                continue
            try:
                loc = ws.locate(pattern)
                with ws.open_node(loc) as node:
                    target = Location(node.root, node.rel, node.path)
                    is_dir = node.is_dir
            except ToolError as exc:
                plan.skipped.append((pattern, exc.message))
                continue
            if is_dir:
                report = WalkReport()
                for entry in walk_files(ws, target, options, ctx, report):
                    rel = relative_to(entry.rel, target.rel)
                    if not recursive and "/" in rel:
                        continue
                    self._consider(ctx, plan, Location(target.root, entry.rel, ws.shown_path(target.root, entry.rel)),
                                   rel, excludes)
                plan.ignored += report.ignored
            else:
                if ws.is_ignored(target.root, target.rel, False, options, rules):
                    plan.ignored += 1
                    continue
                self._consider(ctx, plan, target, target.rel, excludes)
        if globs:
            for index, root in enumerate(ws.roots):
                report = WalkReport()
                local = []
                for g in globs:
                    if g.startswith("/"):
                        g = strip_prefix(g, root.shown) or ""
                        if not g:
                            continue
                    local.append(g)
                if not local:
                    continue
                matches = functools.partial(globmatch, patterns=local)
                for entry in walk_files(ws, Location(index, "", root.shown), options, ctx, report, select=matches):
                    loc = Location(index, entry.rel, ws.shown_path(index, entry.rel))
                    self._consider(ctx, plan, loc, entry.rel, excludes)
                plan.ignored += report.ignored
        if plan.ignored:
            plan.skipped.append((f"{plan.ignored} file(s)", "ignored by .gitignore/.geminiignore or default excludes"))
        return plan

    @staticmethod
    def _literal_exists(ctx: ToolContext, pattern: str) -> bool:
        try:
            return ctx.workspace.exists(ctx.workspace.locate(pattern))
        except ToolError:
            return False

    @staticmethod
    def _consider(ctx: ToolContext, plan: Plan, loc: Location, rel: str, excludes: list[str]) -> None:
        if excludes and (globmatch(rel, excludes) or globmatch(loc.rel, excludes)):
            plan.skipped.append((loc.shown, "excluded by pattern"))
            return
        plan.files.setdefault(loc.shown, loc)

    def _read(self, ctx: ToolContext, plan: Plan, patterns: list[str]) -> ToolResult:
        ws = ctx.workspace
        blocks: list = []
        read: list[str] = []
        limit = ctx.result_chars if ctx.result_chars > 0 else MAX_TOTAL_CHARS
        budget = limit - min(SKIPPED_LIST_CHARS, limit // 4)  # room for the list of skipped files
        media = MediaBudget(limit_option(self.options.max_media_bytes, "--max-media-bytes"))
        paths = sorted(plan.files)
        lowered = [p.lower() for p in patterns]
        for number, shown in enumerate(paths, 1):
            check_cancelled()
            if number % 50 == 0:
                try:
                    anyio.from_thread.run(ctx.progress, float(number), float(len(paths)), f"read {number} files")
                except RuntimeError:
                    pass
            if len(read) >= MAX_FILES:
                plan.skipped.append((shown, f"file limit reached ({MAX_FILES} files per call)"))
                continue
            if budget <= 0:
                plan.skipped.append((shown, f"result size limit reached ({limit:,} characters per result)"))
                continue
            loc = plan.files[shown]
            try:
                with ws.open_file(loc) as (node, handle):
                    head = handle.read(SNIFF_BYTES)
                    kind = classify(node.rel.rsplit("/", 1)[-1], head)
                    if kind.kind in ("image", "audio", "pdf"):
                        ext = extension(node.rel)
                        stem = node.rel.rsplit("/", 1)[-1][: -len(ext) or None].lower()
                        if not any(_names_extension(p, ext) or (stem and stem in p) for p in lowered):
                            plan.skipped.append(
                                (node.path, "asset file (image/pdf/audio) was not explicitly requested by name or extension")
                            )
                            continue
                        if node.st.st_size > MAX_MEDIA_BYTES:
                            plan.skipped.append((node.path, "larger than 20MB"))
                            continue
                        refusal = media.refusal(node.st.st_size)
                        if refusal:
                            plan.skipped.append((node.path, refusal))
                            continue
                        data = head + handle.read(MAX_MEDIA_BYTES + 1 - len(head))
                        if len(data) > MAX_MEDIA_BYTES:  # it grew since it was measured
                            plan.skipped.append((node.path, "larger than 20MB"))
                            continue
                        media.take(len(data))
                        maker = {"image": image_block, "audio": audio_block}.get(kind.kind)
                        blocks.append(text_block(f"--- {node.path} ---"))
                        blocks.append(
                            maker(data, kind.mime) if maker else blob_block(data, kind.mime, f"file://{node.path}")
                        )
                        read.append(node.path)
                        continue
                    if kind.kind == "binary":
                        plan.skipped.append((node.path, "binary file"))
                        continue
                    window = window_after_sniff(
                        handle, kind, head, node.st.st_size, 0, DEFAULT_LINE_LIMIT, check=check_cancelled
                    )
                    if ctx.views is not None:
                        ctx.views.saw(node.path, node.st)
            except ToolError as exc:
                plan.skipped.append((shown, f"Read error: {exc.message}"))
                continue
            body = "\n".join(window.lines)
            if not window.complete:
                body = (
                    "[WARNING: This file was truncated (showing lines 1-"
                    f"{window.end} of {window.total}). To view the rest, use the 'read_file' tool on this file "
                    "with 'offset'.]\n\n" + body
                )
            if len(body) > budget:
                shown_lines = body.count("\n", 0, budget)
                body = body[:budget] + (
                    f"\n[... cut: this result's size limit ({limit:,} characters, server option --max-result-chars) "
                    f"was reached; read the rest of this file with read_file and offset: {shown_lines}]"
                )
            budget -= len(body)
            blocks.append(text_block(f"--- {node.path} ---\n\n{body}\n\n"))
            read.append(node.path)
        if not read:
            text = "No files matching the criteria were found or all were skipped."
            if plan.skipped:
                text += "\n" + _skipped_text(plan.skipped)
            return ToolResult.text(text, {"files": [], "skipped": _skipped_struct(plan.skipped)})
        tail = "\n--- End of content ---"
        if plan.skipped:
            tail += "\n\n" + _skipped_text(plan.skipped)
        blocks.append(text_block(tail))
        return ToolResult(blocks, {"files": read, "skipped": _skipped_struct(plan.skipped)})


@dataclass
class MediaBudget:
    """The base64 bytes of media one call may still return."""

    limit: int | None  # None: no limit
    used: int = 0

    def refusal(self, size: int) -> str | None:
        """Why a media file of `size` bytes is not read, or None. The first one always fits."""
        if self.used == 0 or self.limit is None or self.used + encoded_size(size) <= self.limit:
            return None
        return (
            f"media budget of this call reached: {self.used:,} of {self.limit:,} bytes of base64-encoded images, "
            "audio and PDFs per call (server option --max-media-bytes); name fewer media files per call, or read "
            "this one with read_file"
        )

    def take(self, size: int) -> None:
        self.used += encoded_size(size)


def encoded_size(size: int) -> int:
    """Length of the base64 text of `size` bytes."""
    return 4 * ((size + 2) // 3)


def _names_extension(pattern: str, ext: str) -> bool:
    """Does a (lower-cased) pattern ask for this extension: `*.png`, or a brace list such as `*.{png,md}`
    (an item of a list opened by `.{` and closed by the next `}`)? One pass over the pattern."""
    if not ext:
        return False
    if ext in pattern:
        return True
    bare = ext[1:]
    closes_after = [False] * (len(pattern) + 1)  # is there a `}` at or after each position?
    for at in range(len(pattern) - 1, -1, -1):
        closes_after[at] = closes_after[at + 1] or pattern[at] == "}"
    in_list = False  # inside a `.{` list not yet closed
    for at, ch in enumerate(pattern):
        starts_item = in_list and (pattern[at - 1] == "," or pattern[at - 2 : at] == ".{")
        if starts_item and pattern.startswith(bare, at):
            end = at + len(bare)
            if end < len(pattern) and (pattern[end] == "}" or (pattern[end] == "," and closes_after[end])):
                return True
        if ch == "}":
            in_list = False
        elif ch == "{" and at and pattern[at - 1] == ".":
            in_list = True
    return False


def _skipped_text(skipped: list[tuple[str, str]], limit: int = 50) -> str:
    lines = [f"Skipped {len(skipped)} item(s):"]
    lines += [f"- {path} ({reason})" for path, reason in skipped[:limit]]
    if len(skipped) > limit:
        lines.append(f"- ... and {len(skipped) - limit} more")
    return "\n".join(lines)


def _skipped_struct(skipped: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"path": p, "reason": r} for p, r in skipped]


TOOL = ReadManyFiles
