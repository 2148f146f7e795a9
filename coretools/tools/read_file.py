"""read_file: one file's content, paged for text, as media content for images, audio and PDF."""

from __future__ import annotations

from typing import Any, BinaryIO

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import IgnoreOptions, Node
from coretools.tools.base import (
    Tool,
    ToolContext,
    ToolResult,
    audio_block,
    blob_block,
    check_cancelled,
    image_block,
    text_block,
)
from coretools.tools.budget import lines_that_fit
from coretools.tools.dialects import latest_from
from coretools.tools.filetypes import (
    LINE_CUT_MARKER, MAX_LINE_CHARS, SNIFF_BYTES, WHOLE_BYTES, Window, classify, read_window, window_of_content,
)

DEFAULT_LIMIT = 2000
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_SVG_BYTES = 1024 * 1024
INLINE_READ_BYTES = 64 * 1024
GEMINI_ONLY = IgnoreOptions(git=False, gemini=True, defaults=False)


class ReadFile(Tool):
    name = "read_file"
    title = "Read file"
    hint = "read one file (text, image, audio or PDF); use offset/limit to page through a large one."
    description = (
        "Reads and returns the content of a specified file. If the file is large, the content will be truncated; "
        "the response then says so and how to read more with 'offset' and 'limit'. Handles text (lines longer "
        "than 2000 characters are shortened), images (PNG, JPG, GIF, WEBP, BMP), audio (MP3, WAV, AIFF, AAC, "
        "OGG, FLAC), PDF and SVG files; other binary files are reported, not dumped."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "absolute_path": {
                "type": "string",
                "description": "The absolute path to the file to read (e.g. '/home/user/project/file.txt'). "
                "A relative path is resolved against the primary workspace root. Must be inside the workspace.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Optional: for text files, the 0-based line number to start reading from. "
                "Use with 'limit' to page through large files.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional: for text files, the maximum number of lines to read "
                f"(default {DEFAULT_LIMIT}).",
            },
        },
        "required": ["absolute_path"],
    }
    aliases = {"file_path": "absolute_path"}
    extra_properties = {
        "start_line": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional: for text files, the 1-based line number to start reading from.",
        },
        "end_line": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional: for text files, the 1-based line number to stop reading at (inclusive).",
        },
    }
    latest_schema = latest_from(
        input_schema, rename={"absolute_path": "file_path"}, drop=("offset", "limit"), add=extra_properties
    )

    @classmethod
    def translate(cls, args: dict[str, Any]) -> dict[str, Any]:
        """The newest dialect's 1-based, inclusive `start_line`/`end_line` as the published 0-based `offset`
        and line count `limit`."""
        args = super().translate(args)
        if "start_line" not in args and "end_line" not in args:
            return args
        if "offset" in args or "limit" in args:
            raise ToolError(
                "Give either start_line/end_line (1-based lines, inclusive) or offset/limit (0-based offset and a "
                "line count), not both.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        start = args.pop("start_line", 1)
        end = args.pop("end_line", None)
        if end is not None and end < start:
            raise ToolError(
                f"end_line ({end}) is before start_line ({start}); both are 1-based and inclusive.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        args["offset"] = start - 1
        if end is not None:
            args["limit"] = end - start + 1
        return args

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        with ws.open_file(ws.locate(args["absolute_path"])) as (node, handle):
            if ws.is_ignored(node.root, node.rel, False, GEMINI_ONLY):
                raise ToolError(
                    f"File path '{node.path}' is ignored by the workspace's .geminiignore patterns.",
                    ErrorKind.INVALID_TOOL_PARAMS,
                )
            # Small files are read on the event loop: a worker-thread hop costs more than the read itself
            # (measured: ~60 us to read 2 KB, ~200 us for the hop). Anything larger goes to a thread.
            if node.st.st_size <= INLINE_READ_BYTES:
                return self._content(node, handle, args, ctx)
            return await anyio.to_thread.run_sync(self._content, node, handle, args, ctx)

    def _content(self, node: Node, handle: BinaryIO, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        windowed = "offset" in args or "limit" in args
        offset = args.get("offset", 0)
        limit = args.get("limit", DEFAULT_LIMIT)
        size = node.st.st_size
        # A file up to WHOLE_BYTES is read in one call (one more byte than its size, so a file that
        # grew since the stat is noticed and streamed instead); a larger one is sniffed, then streamed.
        if size <= WHOLE_BYTES:
            data = handle.read(size + 1)
            whole = len(data) <= size
        else:
            data, whole = handle.read(SNIFF_BYTES), False
        head = data[:SNIFF_BYTES]
        if ctx.views is not None:
            ctx.views.saw(node.path, node.st, data if whole else None)

        def everything() -> bytes:
            if whole:
                return data
            handle.seek(0)
            return handle.read()

        kind = classify(node.rel.rsplit("/", 1)[-1], head)
        if kind.kind in ("image", "audio", "pdf"):
            if size > MAX_FILE_BYTES:
                raise _too_large(node.path, size)
            content = everything()
            label = {"image": "image", "audio": "audio", "pdf": "PDF"}[kind.kind]
            note = text_block(f"Read {label} file: {node.path} ({kind.mime}, {len(content)} bytes)")
            if kind.kind == "image":
                return ToolResult([note, image_block(content, kind.mime)])
            if kind.kind == "audio":
                return ToolResult([note, audio_block(content, kind.mime)])
            return ToolResult([note, blob_block(content, kind.mime, f"file://{node.path}")])
        if kind.kind == "binary":
            return ToolResult.text(f"Cannot display content of binary file: {node.path}")
        if kind.kind == "svg":
            if size > MAX_SVG_BYTES:
                return ToolResult.text(f"Cannot display content of SVG file larger than 1MB: {node.path}")
            return ToolResult.text(everything().decode("utf-8", "replace"))
        if size > MAX_FILE_BYTES and not windowed:
            raise _too_large(node.path, size)
        if whole:
            window = window_of_content(data, kind, offset, limit)
        else:
            window = read_window(handle, kind, offset, limit, check=check_cancelled)
        if window.total and offset >= window.total:
            raise ToolError(
                f"offset {offset} is beyond the end of the file: {node.path} has {window.total} lines "
                f"(valid offsets are 0 to {window.total - 1}).",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        window, budget_cut = _fitted(window, ctx.result_chars)
        body = "\n".join(window.lines)
        if window.complete:
            return ToolResult.text(body)
        shown = f"{window.start + 1}-{window.end}" if window.lines else "none"
        if window.end < window.total:
            action = f"For example, to read the next section of the file, use offset: {window.end}."
        else:
            action = "This window reaches the end of the file."
        if window.cut_lines:
            action += f" {window.cut_lines} line(s) longer than {MAX_LINE_CHARS} characters were shortened."
        if budget_cut:
            action += (
                f" This result stops early: a result may hold at most {ctx.result_chars:,} characters (server "
                "option --max-result-chars)."
            )
        asked = windowed and not window.cut_lines and not budget_cut
        if asked:
            return ToolResult.text(
                f"Status: Showing lines {shown} of {window.total} total lines. {action}\n\n"
                f"--- FILE CONTENT ---\n{body}"
            )
        text = (
            "\nIMPORTANT: The file content has been truncated.\n"
            f"Status: Showing lines {shown} of {window.total} total lines.\n"
            "Action: To read more of the file, you can use the 'offset' and 'limit' parameters in a subsequent "
            f"'read_file' call. {action}\n\n"
            "--- FILE CONTENT (truncated) ---\n"
            f"{body}"
        )
        return ToolResult.text(text)


# Room a truncated answer keeps for its header (the status and action lines).
HEADER_CHARS = 800


def _fitted(window: Window, budget: int) -> tuple[Window, bool]:
    """The window cut to the lines that fit the result budget (at least one line), and whether it was cut."""
    count = lines_that_fit(window.lines, budget, HEADER_CHARS)
    if count == len(window.lines):
        return window, False
    kept = window.lines[:count]
    cut = sum(1 for kept_line in kept if kept_line.endswith(LINE_CUT_MARKER))
    return Window(kept, window.start, window.total, cut), True


def _too_large(path: str, size: int) -> ToolError:
    return ToolError(
        f"File size exceeds the 20MB limit: {path} ({size / (1024 * 1024):.2f}MB). For text files, read a window "
        "with 'offset' and 'limit'; use search_file_content to find the lines you need.",
        ErrorKind.FILE_TOO_LARGE,
    )


TOOL = ReadFile
