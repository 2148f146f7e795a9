"""write_file: create or overwrite a whole file, atomically, keeping its encoding, line endings and mode."""

from __future__ import annotations

from typing import Any

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import Location, Workspace
from coretools.tools import textedit as te
from coretools.tools.base import ToolContext, ToolResult


class WriteFile(te.EditTool):
    name = "write_file"
    title = "Write file"
    hint = "create a file or replace a whole one; always write the complete content, never placeholders."
    description = (
        "Writes content to a file, replacing it entirely if it exists and creating it (and any missing parent "
        "directories inside the workspace) if it does not. The write is atomic: the file is never left half-written. "
        "An existing file keeps its encoding (UTF-8, with or without BOM, or UTF-16/32 with BOM), its line-ending "
        "style (CRLF or LF) and its permissions; nothing is appended to the content. Provide the complete file: "
        "content with an omission placeholder such as '// ... existing code ...' or '# rest of the file unchanged' in "
        "place of real lines is refused. To change part of a file, prefer the 'replace' tool. The result shows the "
        "change as a compact diff numbered with the file's new line numbers, and notes a syntax error the write "
        "introduced."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path of the file to write (e.g. '/home/user/project/file.txt'). A "
                "relative path is resolved against the primary workspace root. Must be inside the workspace.",
            },
            "content": {
                "type": "string",
                "description": "The complete content to write. Do not use omission placeholders like "
                "'(rest of methods ...)', '...', or 'unchanged code'; provide complete literal content.",
            },
            "modified_by_user": {
                "type": "boolean",
                "description": "Set by the client when the user edited the proposed content before it was "
                "written; the result then says so.",
            },
        },
        "required": ["file_path", "content"],
    }
    idempotent = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        content: str = args["content"]
        loc = ctx.workspace.locate(args["file_path"])
        plan, outcome = await self.edit(ctx, loc, args)
        if plan is None or outcome is None:
            return ToolResult.text(f"No changes: {loc.shown} already has exactly this content; nothing was written.")
        if plan.created:
            headline = f"Successfully created and wrote to new file: {outcome.path}."
        else:
            headline = f"Successfully overwrote file: {outcome.path}."
        return te.result(plan, headline, args, "`content`", content)

    def precheck(self, ws: Workspace, loc: Location, args: dict[str, Any]) -> None:
        """Refuse `content` with a placeholder line that stands for omitted code (see `te.omission`): any in a
        new file, as Gemini CLI refuses; in an existing one only a new placeholder where old lines are gone.
        The file is read for this only when `content` has a placeholder at all."""
        content: str = args["content"]
        if te.placeholder_line(content, loc.shown) is None:
            return
        found = self._omission_in_file(ws, loc, content)
        if found is not None:
            raise ToolError(
                f"`content` contains an omission placeholder ({found!r}): it looks like a placeholder for omitted "
                "code, and writing it would lose that code. Nothing was written. Provide the "
                "complete file content, or use 'replace' to change only part of the file.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )

    def _omission_in_file(self, ws: Workspace, loc: Location, content: str) -> str | None:
        existing = te.read_existing(ws, loc)
        if existing is None:
            return te.omission(content, None, loc.shown)
        try:
            old, _ = te.decode(existing[1])
        except te.NotText:
            return te.omission(content, None, loc.shown)
        return te.omission(te.to_lf(content), te.to_lf(old), loc.shown)

    def plan(
        self, ws: Workspace, loc: Location, args: dict[str, Any], existing: tuple[Any, bytes] | None
    ) -> te.Plan | None:
        content: str = args["content"]
        path = loc.shown
        if existing is None:
            plan = te.Plan(loc, path, "", content, te.encode(content, te.UTF8, path), created=True)
            plan.spans = te.align("", content, [(0, 0, 0, len(content))]) if content else []
            return plan
        st, data = existing
        del existing
        notes: list[str] = []
        try:
            old, codec = te.decode(data)
        except te.NotText as exc:
            old, codec = data.decode("utf-8", "replace"), te.UTF8
            notes.append(f"The previous content was not text this tool could keep as it was ({exc.why}); the new "
                         "content was written as UTF-8.")
        breaks = te.newlines(old)
        new = te.with_newline(content, breaks.dominant) if breaks.dominant else content
        if codec.bom and new.startswith("\ufeff"):
            new = new[1:]  # the byte-order mark is written once, as the file had it
        plan = te.Plan(loc, path, old, new, te.encode(new, codec, path), created=False, expect=st,
                       before=self.journal_copy(data))
        plan.notes = notes + te.style_notes(codec, breaks)
        if plan.data == data:
            return None
        plan.spans = te.whole_file_spans(old, new)
        return plan


TOOL = WriteFile
