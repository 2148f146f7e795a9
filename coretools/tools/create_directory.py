"""create_directory: make a directory (and its missing parents) inside the workspace, as `mkdir -p` would,
journaled so `undo` removes what it made (while it is still empty).

Opt-in (`--tools create_directory`): not one of Gemini CLI's core tools. It exists so a model that needs an
empty directory does not fall back to `mkdir` in the shell; write_file already creates the parents of a file.
"""

from __future__ import annotations

from typing import Any

import anyio

from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.textedit.edit_tool import EditOptions
from coretools.workspace import journal


class CreateDirectory(Tool):
    name = "create_directory"
    title = "Create directory"
    description = (
        "Creates a directory inside the workspace, with any missing parent directories (like `mkdir -p`). A "
        "directory that already exists is left as it is and reported. Paths inside .git directories and secret "
        ".env files are refused. There is no need to create a file's directory before write_file, which creates "
        "missing parents itself; use this for a directory that should exist empty."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The absolute path of the directory to create (e.g. '/home/user/project/src/new'). A "
                "relative path is resolved against the primary workspace root. Must be inside the workspace.",
            },
        },
        "required": ["path"],
    }
    hint = "make an empty directory (write_file creates a file's parent directories itself)."
    Options = EditOptions  # the journal's options
    options: EditOptions
    opt_in = True
    read_only = False
    destructive = False
    idempotent = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        loc = ctx.workspace.locate(args["path"])
        shown, created = await anyio.to_thread.run_sync(
            journal.journaled_directory, ctx.workspace, loc, self.name, self.options.journal_settings
        )
        if not created:
            return ToolResult.text(f"Directory already exists: {shown}; nothing was changed.", {"created": False})
        return ToolResult.text(f"Created directory: {shown}", {"created": True})


TOOL = CreateDirectory
