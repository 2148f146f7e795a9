"""delete_file: remove one file inside the workspace, its content kept in the edit journal so `undo` brings
it back.

Opt-in (`--tools delete_file`): not one of Gemini CLI's core tools. It closes the gap that makes a model run
`rm` in the shell, where nothing is journaled: this removal is refused unless the journal can keep the content.
"""

from __future__ import annotations

from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import Location, Workspace
from coretools.tools.base import ToolContext, ToolResult, check_cancelled, confirmed
from coretools.tools.textedit.edit_tool import FileChangeTool
from coretools.workspace import journal


class DeleteFile(FileChangeTool):
    name = "delete_file"
    title = "Delete file"
    description = (
        "Deletes one file inside the workspace. Its content is kept in the server's edit journal first, so the "
        "deletion can be undone (`coretools-mcp undo`, or the undo tool where the server publishes it); a file "
        "larger than the journal keeps is refused. Only regular files are deleted: directories and symbolic links "
        "are refused, as are paths inside .git directories and secret .env files. Delete only what the task or the "
        "user calls for."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The absolute path of the file to delete (e.g. '/home/user/project/old.txt'). A "
                "relative path is resolved against the primary workspace root. Must be inside the workspace.",
            },
        },
        "required": ["path"],
    }
    hint = "delete a file (journaled, so it can be undone); prefer it to `rm` in the shell."
    no_journal_note = " This server keeps no edit journal (--no-journal): a deletion cannot be undone."
    opt_in = True
    read_only = False
    destructive = True
    idempotent = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        loc = ctx.workspace.locate(args["path"])
        if self.options.confirm_edits:
            await confirmed(ctx, f"delete_file: Delete {loc.shown}?", "Nothing was deleted.")
        shown = await anyio.to_thread.run_sync(self._delete, ctx.workspace, loc)
        if ctx.views is not None:  # the session knows the file is gone: creating it again is not a stale write
            ctx.views.saw(shown, None)
        if not self.options.journal_settings.enabled:
            return ToolResult.text(f"Deleted file: {shown}. This server keeps no edit journal: it cannot be undone.")
        return ToolResult.text(f"Deleted file: {shown}. Its content is in the edit journal; an undo restores it.")

    def _delete(self, ws: Workspace, loc: Location) -> str:
        """Under the file's edit lock: the file is named (never followed), journaled whole, then removed if it is
        still what was journaled."""
        with ws.open_node(loc, follow=False) as node:
            if node.is_dir:
                raise ToolError(
                    f"Path is a directory, not a file: {loc.shown}. Only files are deleted.",
                    ErrorKind.TARGET_IS_DIRECTORY,
                )
            if not node.is_file:
                raise ToolError(
                    f"Not a regular file: {loc.shown}. Only regular files are deleted (not symbolic links).",
                    ErrorKind.FILE_WRITE_FAILURE,
                )
        lock = ws.lock_edit(loc, cancelled=check_cancelled)
        try:
            settings = self.options.journal_settings
            before = journal.read_snapshot(ws, loc, settings.max_bytes)
            if before.sha is None:
                raise ToolError(f"File not found: {loc.shown}", ErrorKind.FILE_NOT_FOUND)
            if settings.enabled and before.data is None:
                raise ToolError(
                    f"Not deleted: {loc.shown} ({before.size:,} bytes) is larger than the edit journal keeps "
                    f"({settings.max_bytes:,} bytes, --journal-max-bytes), so the deletion could not be undone.",
                    ErrorKind.FILE_TOO_LARGE,
                )

            def remove(sync: Any) -> str:
                if sync is not None:
                    sync()
                return ws.remove_file(loc, expect=before.st)

            return journal.journaled(ws, loc, None, self.name, settings, remove, key=lock.key, before=before)
        finally:
            lock.release()


TOOL = DeleteFile
