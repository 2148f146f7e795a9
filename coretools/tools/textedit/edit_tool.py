"""The base class of write_file and replace: their shared options (`--confirm`, `--max-edit-bytes`), the
locked plan -> confirm -> write sequence, and the result both tools return."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.workspace import FileViews, journal
from coretools.sandbox import EditLock, Location, Workspace, WriteOutcome, Written
from coretools.tools.base import CONFIRM_NOTE as CHANGE_CONFIRM_NOTE
from coretools.tools.base import Tool, ToolContext, ToolResult, check_cancelled, option, text_block
from coretools.tools.textedit import freshness
from coretools.tools.textedit.diff import compact_diff, numbered, refined, unified_diff
from coretools.tools.textedit.plan import (
    MAX_EDIT_BYTES, MIB, Plan, edit_limit, limit_in_force, read_existing, too_big,
)
from coretools.tools.textedit.syntax import syntax_note

MAX_CONFIRM_DIFF_LINES = 150
MAX_ECHO_CHARS = 4000
CONFIRM_CHOICES = ("none", "edits")
CONFIRM_NOTE = (
    " This server asks the user to confirm every edit (showing the diff) before applying it; an edit the user "
    "declines is not applied, and is refused if the client cannot ask the user."
)


@dataclass(frozen=True)
class EditOptions:
    """The options of both editing tools (one definition: write_file and replace share the object), the
    journal's first."""

    no_journal: bool = option(
        False,
        "--no-journal",
        "do not keep the edit journal (the content each write_file and replace replaced, kept in the user's state "
        "directory for `coretools-mcp undo`); on by default",
    )
    journal_max_entries: int = option(
        journal.DEFAULT_MAX_ENTRIES,
        "--journal-max-entries",
        f"edits the journal keeps per workspace, the oldest dropped first (default: {journal.DEFAULT_MAX_ENTRIES})",
        metavar="N",
    )
    journal_max_bytes: int = option(
        journal.DEFAULT_MAX_BYTES,
        "--journal-max-bytes",
        "previous content the journal keeps per workspace, the oldest dropped first; an edit of a file larger "
        "than this is journaled without its content and cannot be undone "
        f"(default: {journal.DEFAULT_MAX_BYTES}, i.e. {journal.DEFAULT_MAX_BYTES // MIB} MiB)",
        metavar="BYTES",
    )
    confirm: str = option(
        "none",
        "--confirm",
        "'edits': ask the user (MCP elicitation, showing the diff) before write_file or replace changes a file "
        "(and before edit_file, move_file or delete_file, with --tools); "
        "an edit the user declines, or one the client cannot ask about, is not applied. Default 'none': rely on "
        "the host's own tool approval",
        choices=CONFIRM_CHOICES,
    )
    max_edit_bytes: int = option(
        MAX_EDIT_BYTES,
        "--max-edit-bytes",
        "largest file replace and write_file read to edit, and largest content one edit may produce; a bigger "
        "edit is refused before it is built, with an error saying how to split it "
        f"(default: {MAX_EDIT_BYTES}, i.e. {MAX_EDIT_BYTES // MIB} MiB)",
        metavar="BYTES",
    )

    @property
    def journal_settings(self) -> journal.JournalSettings:
        return journal.JournalSettings(not self.no_journal, self.journal_max_entries, self.journal_max_bytes).bounded()

    @property
    def confirm_edits(self) -> bool:
        return self.confirm == "edits"

    @property
    def edit_limit(self) -> int:
        return self.max_edit_bytes if self.max_edit_bytes and self.max_edit_bytes > 0 else MAX_EDIT_BYTES


async def confirm(ctx: ToolContext, plan: Plan, tool: str) -> None:
    """Ask the user (`--confirm edits`); raise a ToolError unless they accept."""
    if ctx.elicit is None:
        raise ToolError(
            f"Edit not applied: this server requires the user to confirm every edit (--confirm edits), but the "
            f"client cannot ask the user (it does not support MCP elicitation). Nothing was written to {plan.path}. "
            "Tell the user; the operator can use a client that supports elicitation, or restart the server "
            "without --confirm edits to rely on the host's own tool approval.",
            ErrorKind.CANCELLED_BY_USER,
        )
    diff = unified_diff(plan.old, plan.new, plan.spans, "original", "proposed", limit=MAX_CONFIRM_DIFF_LINES).text
    verb = "Create" if plan.created else "Apply this change to"
    message = f"{tool}: {verb} {plan.path}?\n\n{diff}"
    try:
        answer = await ctx.elicit(message, {"type": "object", "properties": {}})
    except Exception as exc:  # noqa: BLE001 - a client that fails to answer has not said yes
        raise ToolError(
            f"Edit not applied: asking the user to confirm the edit failed ({type(exc).__name__}: {exc}). Nothing "
            f"was written to {plan.path}.",
            ErrorKind.CANCELLED_BY_USER,
        ) from None
    if answer.action == "accept":
        return
    how = "declined" if answer.action == "decline" else "dismissed"
    raise ToolError(
        f"Edit cancelled by the user: they {how} the proposed change to {plan.path}, so nothing was written. Do "
        "not retry the same edit; ask the user how they would like to proceed.",
        ErrorKind.CANCELLED_BY_USER,
    )


class FileChangeTool(Tool):
    """A tool that changes files as a whole (moves, deletions) under the edit tools' options: the same
    journal and `--confirm`, each stated in its description when it applies."""

    Options = EditOptions
    options: EditOptions
    # Appended to the description under --no-journal: what cannot be undone then.
    no_journal_note: ClassVar[str] = ""

    def __init__(self, options: EditOptions | None = None) -> None:
        super().__init__(options)
        if not self.options.journal_settings.enabled:
            self.description = type(self).description + self.no_journal_note
        if self.options.confirm_edits:
            self.description += CHANGE_CONFIRM_NOTE


class EditTool(Tool):
    """What write_file and replace share: annotations, options, and the locked plan -> confirm -> write
    sequence. Subclasses implement `plan(ws, loc, args, existing)` (runs in a worker thread under the file's
    lock, given the file's (stat, bytes) or None when it does not exist, and returns a Plan, or None when there
    is nothing to write)."""

    Options = EditOptions
    options: EditOptions
    read_only = False
    destructive = True

    def __init__(self, options: EditOptions | None = None) -> None:
        super().__init__(options)
        if self.options.confirm_edits:
            self.description = type(self).description + CONFIRM_NOTE

    def plan(  # pragma: no cover - abstract
        self, ws: Workspace, loc: Location, args: dict, existing: tuple[object, bytes] | None
    ) -> Plan | None:
        raise NotImplementedError

    def precheck(self, ws: Workspace, loc: Location, args: dict) -> None:
        """Refuse the edit (raise a ToolError) before the file is read for it; runs under the file's lock."""

    def _prepare(
        self, ws: Workspace, loc: Location, args: dict, views: FileViews | None
    ) -> tuple[EditLock, Plan | None]:
        """Take the file's lock (giving up if the call is cancelled meanwhile), run `precheck`, read the file
        once (refused if the session's view of it is stale) and plan the edit within this server's edit limit.
        Returns the lock, held; the plan is None when there is nothing to write."""
        lock = ws.lock_edit(loc, cancelled=check_cancelled)
        try:
            with limit_in_force(self.options.edit_limit):
                self.precheck(ws, loc, args)
                plan = self.plan(ws, loc, args, read_existing(ws, loc, views))
                if plan is not None and len(plan.data) > edit_limit():
                    raise too_big(plan.path, len(plan.data), "the new content",
                                  "Write a smaller file, or generate a large one with run_shell_command.")
        except BaseException:
            lock.release()
            raise
        if plan is not None:
            plan.tool, plan.journal, plan.key = self.name, self.options.journal_settings, lock.key
        return lock, plan

    def journal_copy(self, data: bytes) -> bytes | None:
        """`data`, the file's bytes the plan is made from, for `Plan.before` when the journal keeps a copy that
        large; else None (nothing held longer than needed: the journal hashes the file itself)."""
        settings = self.options.journal_settings
        return data if settings.enabled and len(data) <= settings.max_bytes else None

    def _commit(
        self, ws: Workspace, loc: Location, plan: Plan, views: FileViews | None, lock: EditLock
    ) -> WriteOutcome:
        """Write the plan and record what the session now knows of the file, then let go of the lock and
        judge the new text's syntax (`plan.syntax`). A file with other hard links got a new file under this
        name only; the answer says so."""
        try:
            outcome = apply(ws, plan)
            if isinstance(outcome, Written) and outcome.other_names:
                plan.notes.append(other_names_note(outcome.other_names))
            if views is not None:
                freshness.remember(ws, loc, views, plan.data, outcome)
        finally:
            lock.release()
        plan.path = outcome.path
        plan.syntax = syntax_note(plan.path, plan.old, plan.new)
        return outcome

    def _edit(
        self, ws: Workspace, loc: Location, args: dict, views: FileViews | None
    ) -> tuple[Plan | None, WriteOutcome | None]:
        lock, plan = self._prepare(ws, loc, args, views)
        if plan is None:
            lock.release()
            return None, None
        try:
            check_cancelled()  # a call cancelled while it planned writes nothing
        except BaseException:
            lock.release()
            raise
        return plan, self._commit(ws, loc, plan, views, lock)

    async def edit(self, ctx: ToolContext, loc: Location, args: dict) -> tuple[Plan | None, WriteOutcome | None]:
        """The whole edit in one worker thread; with `--confirm edits`, one to prepare it and, once the user
        accepted, one to write it, the file's lock held in between."""
        ws, views = ctx.workspace, ctx.views
        if not self.options.confirm_edits:
            return await anyio.to_thread.run_sync(self._edit, ws, loc, args, views)
        lock, plan = await anyio.to_thread.run_sync(self._prepare, ws, loc, args, views)
        try:
            if plan is None:
                return None, None
            await confirm(ctx, plan, self.name)
            return plan, await anyio.to_thread.run_sync(self._commit, ws, loc, plan, views, lock)
        finally:
            lock.release()


def apply(ws: Workspace, plan: Plan) -> WriteOutcome:
    """Write the plan; the content it replaces is journaled first (unless `--no-journal`)."""
    def write(sync: Callable[[], None] | None) -> WriteOutcome:
        return ws.write_atomic(
            plan.loc, plan.data, create_parents=True, must_not_exist=plan.must_not_exist,
            expect=plan.expect, sync_with=sync,  # type: ignore[arg-type]
        )

    settings = plan.journal or EditOptions().journal_settings
    before = None
    if plan.before is not None and plan.expect is not None:
        before = journal.Snapshot(
            journal.digest(plan.before), len(plan.before), plan.before, plan.expect  # type: ignore[arg-type]
        )
    return journal.journaled(
        ws, plan.loc, plan.data, plan.tool, settings, write, key=plan.key or None, before=before
    )


def other_names_note(count: int) -> str:
    """What the answer says of a hard-linked file the edit replaced under its own name only."""
    names = "1 other name (a hard link)" if count == 1 else f"{count} other names (hard links)"
    return (
        f"The file had {names}; only this name has the new content, the other names keep the old content (an "
        "edit never writes through a hard link)."
    )


def result(plan: Plan, headline: str, args: dict, user_field: str, user_value: str,
           diff_of: str = "the file as it is now") -> ToolResult:
    """One text block: the confirmation, notes, the user's own version if they modified the proposal
    (`modified_by_user`), a syntax error the edit introduced, and the change as a compact numbered diff (the
    content, numbered, for a new file), numbered with the lines of `diff_of`."""
    parts = [headline, *plan.notes]
    if args.get("modified_by_user"):
        parts.append(f"User modified the {user_field} to be: {echo(user_value)}")
    text = " ".join(p for p in parts if p)
    if plan.syntax:
        text += f"\n{plan.syntax}"
    if plan.created:
        shown = numbered(plan.new)
        if shown.text:
            text += f"\nContent, numbered:\n{shown.text}"
    else:
        shown = compact_diff(plan.old, plan.new, refined(plan.old, plan.new, plan.spans))
        if shown.text:
            text += f"\nDiff (numbered with the lines of {diff_of}):\n{shown.text}"
    return ToolResult([text_block(text)])


def echo(value: str) -> str:
    """A user-supplied value repeated back in a message, within reason."""
    if len(value) <= MAX_ECHO_CHARS:
        return value
    return value[:MAX_ECHO_CHARS] + f"[... {len(value) - MAX_ECHO_CHARS} more characters, see the diff below ...]"
