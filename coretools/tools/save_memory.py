"""save_memory: remember a fact across sessions by appending it to the user's GEMINI.md memory file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import memory_file
from coretools.tools.base import Tool, ToolContext, ToolResource, ToolResult, option

# One fact, as given. The memory file is loaded into every later session's context, and Gemini CLI's memory
# is for short facts ("I like pineapple on pizza"): 2,000 characters is a long paragraph, about 500 tokens of
# every future prompt. Checked before the fact is touched, so a huge argument costs nothing more.
MAX_FACT_CHARS = 2000


@dataclass(frozen=True)
class MemoryOptions:
    memory_file: str | None = option(  # None: ~/.gemini/GEMINI.md
        None, "--memory-file", "the file save_memory appends to (default: ~/.gemini/GEMINI.md)", metavar="PATH"
    )


class SaveMemory(Tool):
    name = "save_memory"
    title = "Save memory"
    hint = "store a fact for later sessions when the user asks you to remember it."
    Options = MemoryOptions
    options: MemoryOptions
    description = (
        "Saves a specific piece of information or fact to your long-term memory (a list under "
        "'## Gemini Added Memories' in the user's GEMINI.md memory file, loaded in later sessions).\n\n"
        "Use this tool:\n"
        "- When the user explicitly asks you to remember something (e.g. 'Remember that I like pineapple on "
        "pizza').\n"
        "- When the user states a clear, concise fact about themselves, their preferences or their environment "
        "that seems important to retain for future interactions.\n\n"
        "Do NOT use this tool:\n"
        "- To remember conversational context that is only relevant for the current session.\n"
        "- To save long, complex or rambling pieces of text. The fact should be short and to the point.\n"
        "- If you are unsure whether the information is worth remembering long-term; ask the user.\n\n"
        "The fact is stored as one line: line breaks become spaces, leading list bullets and angle brackets "
        "are removed."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "fact": {
                "type": "string",
                "description": "The specific fact or piece of information to remember. Should be a clear, "
                "self-contained statement.",
            }
        },
        "required": ["fact"],
    }
    read_only = False
    destructive = False
    idempotent = False
    open_world = False

    def memory_path(self) -> Path:
        configured = self.options.memory_file
        return Path(configured).expanduser().absolute() if configured else memory_file.default_path()

    def resources(self) -> list[ToolResource]:
        """The memory file, which the user may want to see or attach (one user's: over stdio only)."""
        path = self.memory_path()
        return [
            ToolResource(
                path=path,
                title=f"Memory ({path.name})",
                description="The facts save_memory has stored for later sessions.",
                mime_type="text/markdown",
                read_prefix=lambda limit: memory_file.read_prefix(path, limit),
            )
        ]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if len(args["fact"]) > MAX_FACT_CHARS:
            raise ToolError(
                f'Parameter "fact" is {len(args["fact"]):,} characters; a memory is a short fact of at most '
                f"{MAX_FACT_CHARS:,} characters (it is loaded into every later session). Save the essential "
                "point in a sentence or two; for longer notes, write a file in the workspace instead.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        fact = memory_file.sanitize(args["fact"])
        if not fact:
            raise ToolError(
                'Parameter "fact" must be a non-empty string (after removing line breaks, list bullets and angle '
                "brackets, nothing was left).",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        path = self.memory_path()
        try:
            written = await anyio.to_thread.run_sync(memory_file.append_fact, path, fact)
        except memory_file.FileFull as full:
            raise ToolError(_full_message(full), ErrorKind.MEMORY_TOOL_EXECUTION_ERROR) from None
        except OSError as exc:
            detail = f"{exc.strerror or exc} ({memory_file.shown(Path(exc.filename or path))})"
            raise ToolError(
                f"Failed to save memory. Detail: {detail}. The operator can choose another file with --memory-file.",
                ErrorKind.MEMORY_TOOL_EXECUTION_ERROR,
            ) from None
        message = f'Okay, I\'ve remembered that: "{fact}"'
        return ToolResult.text(
            f"{message} (saved in {memory_file.shown(written)}).",
            {"success": True, "message": message, "file": str(written)},
        )


def _full_message(full: memory_file.FileFull) -> str:
    where = memory_file.shown(full.path)
    size = f"is {full.size:,} bytes" if full.after is None else f"would be {full.after:,} bytes with this fact"
    return (
        f"Failed to save memory: the memory file {where} {size}, over the limit of "
        f"{memory_file.MAX_FILE_BYTES:,} bytes (it is loaded into every session). Nothing was written. Ask the "
        f"user to trim it: remove facts no longer needed from the '{memory_file.HEADER}' section, or move long "
        "notes elsewhere. The operator can also choose another file with --memory-file."
    )


TOOL = SaveMemory
