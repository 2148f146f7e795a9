"""move_file: rename a file inside the workspace, journaled so `undo` moves it back.

Opt-in (`--tools move_file`): not one of Gemini CLI's core tools. It closes the gap that makes a model run
`mv` in the shell, where nothing is journaled and an existing file is silently replaced.
"""

from __future__ import annotations

from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import Location, Workspace
from coretools.tools.base import ToolContext, ToolResult, check_cancelled, confirmed
from coretools.tools.textedit.edit_tool import FileChangeTool
from coretools.workspace import FileViews, journal


class MoveFile(FileChangeTool):
    name = "move_file"
    title = "Move file"
    description = (
        "Moves (renames) one file inside the workspace, creating the destination's missing parent directories. An "
        "existing destination is never replaced unless `overwrite` is true (its content is then kept in the edit "
        "journal). The move is journaled, so it can be undone (`coretools-mcp undo`, or the undo tool where the "
        "server publishes it), which moves the file back. Only regular files are moved: directories and symbolic "
        "links are refused, as are paths inside .git directories and secret .env files at either end."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "source": {
                "type": "string",
                "description": "The absolute path of the file to move. A relative path is resolved against the "
                "primary workspace root. Must be inside the workspace.",
            },
            "destination": {
                "type": "string",
                "description": "The file's new absolute path, file name included (not only a directory). Must be "
                "inside the workspace.",
            },
            "overwrite": {
                "type": "boolean",
                "description": "Replace a file that already exists at `destination`. Default false: the move is "
                "refused if the destination exists.",
                "default": False,
            },
        },
        "required": ["source", "destination"],
    }
    hint = "rename or move a file (journaled, never replacing one unless asked); prefer it to `mv` in the shell."
    no_journal_note = " This server keeps no edit journal (--no-journal): a move cannot be undone."
    opt_in = True
    read_only = False
    destructive = True
    idempotent = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        source, destination = ws.locate(args["source"]), ws.locate(args["destination"])
        overwrite = bool(args.get("overwrite", False))
        if self.options.confirm_edits:
            await confirmed(ctx, f"move_file: Move {source.shown} to {destination.shown}"
                            + (" (replacing it if it exists)?" if overwrite else "?"), "Nothing was moved.")
        src, dst = await anyio.to_thread.run_sync(self._move, ws, source, destination, overwrite)
        if ctx.views is not None:
            await anyio.to_thread.run_sync(self._remember, ws, ctx.views, src, dst)
        return ToolResult.text(f"Moved {src} to {dst}.", {"source": src, "destination": dst})

    def _move(self, ws: Workspace, source: Location, destination: Location, overwrite: bool) -> tuple[str, str]:
        """Under both files' edit locks, taken in the order of their keys so two opposite moves cannot wait
        for each other."""
        first, second = sorted((source, destination), key=ws.edit_key)
        if ws.edit_key(first) == ws.edit_key(second):
            raise ToolError(f"Source and destination are the same file: {source.shown}. Nothing was moved.",
                            ErrorKind.INVALID_TOOL_PARAMS)
        held = [ws.lock_edit(first, cancelled=check_cancelled)]
        try:
            held.append(ws.lock_edit(second, cancelled=check_cancelled))

            def move(expect: Any) -> tuple[str, str]:
                return ws.move_file(source, destination, overwrite=overwrite, expect=expect)

            return journal.journaled_move(ws, source, destination, self.name, self.options.journal_settings, move)
        finally:
            for lock in reversed(held):
                lock.release()

    @staticmethod
    def _remember(ws: Workspace, views: FileViews, src: str, dst: str) -> None:
        """What the session now knows (the stale-write guard): nothing at the old path, and at the new one
        the file as it saw it under the old (a rename changes no content), or nothing it has seen."""
        known = views.seen(src) is not None
        views.saw(src, None)
        views.forget(dst)
        if known:
            try:
                with ws.open_node(ws.locate(dst), follow=False) as node:
                    views.saw(node.path, node.st)
            except ToolError:
                pass


TOOL = MoveFile
