"""apply_patch: add, update, move and delete files in one call, in the patch format of the Codex CLI, all or
nothing, as one entry of the edit journal (one undo reverts the whole patch).

Opt-in (`--tools apply_patch`): not one of Gemini CLI's core tools. GPT-family models are trained on this
format. The patch is read and every hunk placed (`textedit.patch`) under the edit locks of all its files
before any file changes; then `journal.journaled_changes` writes them.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import EditLock, Location, Workspace
from coretools.tools import textedit as te
from coretools.tools.base import ToolContext, ToolResult, check_cancelled, confirmed, text_block
from coretools.tools.textedit import freshness
from coretools.tools.textedit import patch as grammar
from coretools.tools.textedit.edit_tool import FileChangeTool
from coretools.workspace import FileViews, journal

MAX_DIFF_CHARS = 20_000  # the diffs shown in the answer, all files together
MAX_CONFIRM_LINES = 150
_NO_FILE = journal.Snapshot(None, 0, None, None)


@dataclass
class _File:
    """One file of the patch as planned: its change(s) for the journal, and what the answer says of it."""

    verb: str  # "added", "updated", "deleted", "moved", "left unchanged"
    shown: str  # what the answer names ("a.py", "a.py to b.py")
    path: str  # the file's path after the patch
    old: str = ""
    new: str = ""
    changes: list[journal.FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Prepared:
    files: list[_File]
    locks: list[EditLock]

    def release(self) -> None:
        for lock in reversed(self.locks):
            lock.release()
        self.locks = []


class ApplyPatch(FileChangeTool):
    name = "apply_patch"
    title = "Apply patch"
    description = (
        "Applies a patch that adds, updates, moves and deletes files, all or nothing. The patch format:\n"
        "*** Begin Patch\n"
        "*** Add File: <path>          (then each line of the new file prefixed with +)\n"
        "*** Delete File: <path>\n"
        "*** Update File: <path>       (optionally followed by *** Move to: <new path>)\n"
        "@@ <a line of the file just above the change, e.g. a def or class line; may be left empty>\n"
        " <context line>   (space prefix: unchanged)\n"
        "-<removed line>\n"
        "+<added line>\n"
        "*** End of File               (optional: the hunk ends at the end of the file)\n"
        "*** End Patch\n"
        "Give about 3 lines of context around each change, and an @@ line when the context alone could match "
        "elsewhere; hunks of one file go in the file's order. Paths are relative to the primary workspace root, or "
        "absolute inside the workspace. Context and removed lines must match the file; near misses in trailing "
        "whitespace, indentation, typographic punctuation and left-out blank lines are recovered when they fit one "
        "place only. Every hunk is located before any file is changed: if one fails, nothing is changed and the "
        "error names the file and hunk and shows the nearest text. Add File never replaces an existing file, nor "
        "does Move to. The whole patch is one entry of the edit journal: one undo reverts all of it. Paths inside "
        ".git directories and secret .env files are refused."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "patch": {
                "type": "string",
                "description": "The whole patch, from '*** Begin Patch' to '*** End Patch'.",
            },
        },
        "required": ["patch"],
    }
    hint = "change several files (add, update, move, delete) in one all-or-nothing patch, in the Codex format."
    no_journal_note = " This server keeps no edit journal (--no-journal): a patch cannot be undone."
    opt_in = True
    read_only = False
    destructive = True
    idempotent = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws, views = ctx.workspace, ctx.views
        prepared = await anyio.to_thread.run_sync(self._prepare, ws, args["patch"], views)
        try:
            if self.options.confirm_edits:
                await confirmed(ctx, self._question(prepared.files), "No file was changed.")
            await anyio.to_thread.run_sync(self._commit, ws, prepared, views)
        finally:
            prepared.release()
        return self._answer(prepared.files)

    # -- planning (under the edit locks of every file of the patch) ------------------------------------------

    def _prepare(self, ws: Workspace, patch: str, views: FileViews | None) -> _Prepared:
        ops = grammar.parse(patch)
        places: list[tuple[grammar.FileOp, Location, Location | None]] = []
        keys: dict[str, Location] = {}
        for op in ops:
            loc = ws.locate(op.path)
            dest = ws.locate(op.move_to) if op.move_to else None
            places.append((op, loc, dest))
            for where in (loc, dest):
                if where is None:
                    continue
                key = ws.edit_key(where)
                if key in keys:
                    raise ToolError(f"Invalid patch: {where.shown} appears twice in it; change each file once per "
                                    "patch. Nothing was changed.", ErrorKind.INVALID_TOOL_PARAMS)
                keys[key] = where
        locks: list[EditLock] = []
        try:
            for key in sorted(keys):
                locks.append(ws.lock_edit(keys[key], cancelled=check_cancelled))
            with te.limit_in_force(self.options.edit_limit):
                files = [self._plan(ws, op, loc, dest, views) for op, loc, dest in places]
            self._check_journal_room(files)
            check_cancelled()
        except BaseException:
            for lock in reversed(locks):
                lock.release()
            raise
        return _Prepared(files, locks)

    def _plan(self, ws: Workspace, op: grammar.FileOp, loc: Location, dest: Location | None,
              views: FileViews | None) -> _File:
        key = ws.edit_key(loc)
        if op.kind == "add":
            if te.read_existing(ws, loc, views) is not None:
                raise _refused(f"*** Add File: {loc.shown} exists already; Add File never replaces a file. Use "
                               "*** Update File to change it (or *** Delete File first)")
            text = "".join(line + "\n" for line in op.lines)
            data = te.encode(text, te.UTF8, loc.shown)
            _within_limit(loc.shown, data)
            return _File("added", loc.shown, loc.shown, "", text, [journal.FileChange(loc, key, _NO_FILE, data)])
        st, data = self._existing(ws, loc, views, op)
        before = journal.Snapshot(journal.digest(data), len(data), data, st)  # type: ignore[arg-type]
        if op.kind == "delete":
            return _File("deleted", loc.shown, loc.shown, changes=[journal.FileChange(loc, key, before, None)])
        try:
            old, codec = te.decode(data)
        except te.NotText as exc:
            raise _refused(f"{loc.shown} is not text this tool can patch ({exc.why})") from None
        lf = te.to_lf(old)
        new_lf, placed = grammar.apply_hunks(lf, op.hunks, loc.shown, check_cancelled)
        breaks = te.newlines(old)
        new = te.with_newline(new_lf, breaks.dominant) if breaks.dominant else new_lf
        plan = _File("updated", loc.shown, loc.shown, old, new)
        for hunk, where in zip(op.hunks, placed):
            if where.rule:
                plan.notes.append(f"{hunk.title()} was found ignoring {where.rule} at line {where.start + 1}"
                                  + (" (its added lines re-based on the file's indentation)"
                                     if where.rule == "indentation" else "") + ".")
        if plan.notes and (error := te.introduced_error(loc.shown, lf, new_lf)):
            raise _refused(f"in {loc.shown}, a hunk found only by a near-miss rule would leave the file with a syntax "
                           f"error it did not have: {error}. Check the hunk against the file ({' '.join(plan.notes)})")
        encoded = te.encode(new, codec, loc.shown)
        _within_limit(loc.shown, encoded)
        if dest is None:
            if encoded == data:
                plan.verb = "left unchanged"  # its hunks change nothing: not written, not journaled
            else:
                plan.changes.append(journal.FileChange(loc, key, before, encoded))
            return plan
        if te.read_existing(ws, dest, views) is not None:
            raise _refused(f"*** Move to: {dest.shown} exists already; a move never replaces a file")
        plan.verb, plan.shown, plan.path = "moved", f"{loc.shown} to {dest.shown}", dest.shown
        mode = stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
        plan.changes += [journal.FileChange(dest, ws.edit_key(dest), _NO_FILE, encoded, mode, key),
                         journal.FileChange(loc, key, before, None)]
        return plan

    @staticmethod
    def _existing(ws: Workspace, loc: Location, views: FileViews | None, op: grammar.FileOp) -> tuple[Any, bytes]:
        """The file an Update or Delete names: a regular file (a symbolic link is refused, not followed, when
        the file goes away: deleted or moved), as (stat, bytes)."""
        header = "*** Delete File" if op.kind == "delete" else "*** Update File"
        if op.kind == "delete" or op.move_to:
            try:
                with ws.open_node(loc, follow=False) as node:
                    if not node.is_file:
                        what = "a directory" if node.is_dir else "not a regular file (a symbolic link?)"
                        raise _refused(f"{header}: {loc.shown} is {what}; only regular files are deleted or moved")
            except ToolError as exc:
                if exc.kind != ErrorKind.FILE_NOT_FOUND:
                    raise
        existing = te.read_existing(ws, loc, views)
        if existing is None:
            raise ToolError(f"Patch not applied: {header}: {loc.shown} does not exist. Nothing was changed.",
                            ErrorKind.FILE_NOT_FOUND)
        return existing

    def _check_journal_room(self, files: list[_File]) -> None:
        settings = self.options.journal_settings
        kept = sum(c.before.size for f in files for c in f.changes)
        if settings.enabled and kept > settings.max_bytes:
            raise ToolError(
                f"Patch not applied: the files it changes hold {kept:,} bytes, more than the edit journal keeps "
                f"({settings.max_bytes:,} bytes, --journal-max-bytes), so it could not be undone. Split the patch. "
                "Nothing was changed.",
                ErrorKind.FILE_TOO_LARGE,
            )

    # -- writing ----------------------------------------------------------------------------------------------

    def _commit(self, ws: Workspace, prepared: _Prepared, views: FileViews | None) -> None:
        changes = [c for f in prepared.files for c in f.changes]
        if not changes:
            return
        journal.journaled_changes(ws, changes, self.name, self.options.journal_settings)
        if views is None:
            return
        for change in changes:
            if change.after is None:
                views.saw(change.loc.shown, None)
            else:
                freshness.remember(ws, change.loc, views, change.after, None)  # type: ignore[arg-type]

    def _question(self, files: list[_File]) -> str:
        lines = [f"apply_patch: Apply this patch ({len(files)} file{'s' if len(files) != 1 else ''})?", ""]
        for f in files:
            lines.append(f"{f.verb} {f.shown}")
            if f.verb in ("updated", "moved"):
                spans = te.whole_file_spans(f.old, f.new)
                lines.append(te.unified_diff(f.old, f.new, spans, "original", "proposed", limit=MAX_CONFIRM_LINES).text)
        return "\n".join(lines)

    def _answer(self, files: list[_File]) -> ToolResult:
        if all(not f.changes for f in files):
            return ToolResult.text("No changes: the patch's hunks leave its files as they are; nothing was written.")
        done = ", ".join(f"{f.verb} {f.shown}" for f in files)
        if self.options.journal_settings.enabled:
            undo = "The patch is one entry of the edit journal: one undo reverts all of it."
        else:
            undo = "This server keeps no edit journal: it cannot be undone."
        text = f"Applied the patch: {done}. {undo}"
        budget = MAX_DIFF_CHARS
        for f in files:
            notes = list(f.notes)
            if f.verb != "deleted" and (syntax := te.syntax_note(f.path, f.old, f.new)):
                notes.append(syntax)
            shown = (te.numbered(f.new) if f.verb == "added"
                     else te.compact_diff(f.old, f.new, te.whole_file_spans(f.old, f.new)) if f.verb != "deleted"
                     else None)
            body = shown.text if shown is not None and len(shown.text) <= budget else ""
            budget -= len(body)
            if notes or body:
                text += f"\n\n{f.verb.capitalize()} {f.shown}." + "".join(f" {n}" for n in notes)
                text += f"\n{body}" if body else ""
        return ToolResult([text_block(text)], {"files": [{"change": f.verb, "path": f.path} for f in files]})


def _within_limit(shown: str, data: bytes) -> None:
    if len(data) > te.edit_limit():
        raise te.too_big(shown, len(data), "the patch", "Split the patch, or generate the file with run_shell_command.")


def _refused(why: str) -> ToolError:
    return ToolError(f"Patch not applied: {why}. Nothing was changed.", ErrorKind.INVALID_TOOL_PARAMS)


TOOL = ApplyPatch
