"""undo: put a file back as it was before an edit of write_file or replace (or a deletion or a move by the
opt-in file tools, every file of a patch of apply_patch, or the directories create_directory made), from the
edit journal.

Published only with `--undo-tool`, for hosts that keep no checkpoints of their own. It reverts through the
same journal as `coretools-mcp undo`, and is journaled itself, so an undo can be undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.workspace import journal
from coretools.sandbox import Location, Workspace
from coretools.tools.base import Tool, ToolContext, ToolResult, check_cancelled, option
from coretools.tools.textedit.edit_tool import EditOptions


@dataclass(frozen=True)
class UndoOptions(EditOptions):
    """The journal's options (shared with the editing tools) and `--undo-tool`."""

    undo_tool: bool = option(
        False,
        "--undo-tool",
        "publish an `undo` tool that restores a file from the edit journal, for hosts without checkpoints of their "
        "own (off by default; `coretools-mcp undo` works either way)",
    )


class UndoTool(Tool):
    name = "undo"
    title = "Undo"
    description = (
        "Restores a file to its content before the most recent edit that write_file, replace or undo made to it "
        "through this server, or before an earlier edit given by `edit_id` (which also reverts every later "
        "edit of that file). A file that the edit created is removed; a file delete_file removed comes back; a "
        "file move_file moved goes back to its old path (name either path); a patch apply_patch applied is undone as a "
        "whole (name any of its files: every file it changed is put back); the directories create_directory made are "
        "removed while they are empty. The undo is itself recorded, so undoing "
        "the file again redoes the edit. Refused, leaving the file untouched, if the file was changed since its "
        "last recorded edit (by the user or another program), or if the content was too large to keep. Use it "
        "to revert your own mistaken edit or when the user asks to revert; do not use it to redo work."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path to the file to restore.",
            },
            "edit_id": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional: the number of an earlier edit of this file, as an earlier undo reported; "
                "the file gets its content from before that edit. Default: its most recent edit.",
            },
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }
    hint = "undo reverts the last edit of a file made by write_file or replace."
    Options = UndoOptions
    options: UndoOptions
    read_only = False
    destructive = True
    idempotent = False

    def unavailable_reason(self) -> str | None:
        if not self.options.undo_tool:
            return "off by default; start the server with --undo-tool to publish it"
        if self.options.no_journal:
            return "the edit journal is off (--no-journal)"
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        loc = ws.locate(args["file_path"])
        done = await anyio.to_thread.run_sync(self._undo, ws, loc, args.get("edit_id"))
        return ToolResult.text(done.describe(loc.shown), {"edit": done.edit.id, "undo": done.record and done.record.id})

    def _undo(self, ws: Workspace, loc: Location, edit_id: int | None) -> journal.Undone:
        """Under the file's edit lock (given up if the call is cancelled while waiting for it)."""
        lock = ws.lock_edit(loc, cancelled=check_cancelled)
        try:
            target = lock.key
            settings = self.options.journal_settings
            book = journal.Journal.find([r.path for r in ws.roots], target, settings)
            if book is None:
                raise ToolError(f"No journaled edit of {loc.shown}: nothing to undo.", ErrorKind.FILE_NOT_FOUND)
            return journal.undo(ws, book, target=target, edit_id=edit_id, force=False)
        finally:
            lock.release()


TOOL = UndoTool
