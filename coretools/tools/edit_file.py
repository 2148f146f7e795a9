"""edit_file: several replacements in one file in one call, all or nothing, each made as replace makes its one.

Opt-in (`--tools edit_file`): not one of Gemini CLI's core tools. It helps hosts whose models batch their
changes to a file: one call, one diff, one stale-write check, one journal entry (so one undo reverts the
whole batch), and a batch that fails at any edit changes nothing.

Each edit goes through replace's own cascade and guards (`textedit.replace_text`: the literal search in the
file's line endings, near misses recovered, a repeated edit answered "already applied", the count held to),
applied in order to the text as the edits before it left it. A recovered edit is refused when the file, all
edits made, has a syntax error it did not have: judged once at the end, since the edits of one batch may
only make sense together.
"""

from __future__ import annotations

from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import Location, Workspace
from coretools.tools import textedit as te
from coretools.tools.base import ToolContext, ToolResult, check_cancelled

MAX_EDITS = 100
MAX_EDIT_CHARS = 4 * 1024 * 1024  # the old_string and new_string of one call's edits together

_ONE_UNDO = " The call is one entry in the edit journal: one undo reverts all of its edits."
_WORDING = te.Wording(
    "set allow_multiple to true in this edit",
    "Make the change in smaller steps: fewer edits per call, fewer occurrences per edit, or shorter new_strings; "
    "to produce a large file, generate it with run_shell_command.",
)


class EditFile(te.EditTool):
    name = "edit_file"
    title = "Edit file (several replacements)"
    hint = (
        "make several changes to one file in one call, all or nothing, with one diff and one undo; each edit is "
        "an old_string/new_string pair matched as replace matches it."
    )
    description = (
        "Makes several replacements in one existing file in one call, all or nothing: if any edit cannot be "
        "applied, none is, the file is left unchanged, and the error names the edit by its index (edits[i]) and "
        "shows the text nearest to its old_string. Always read the file first (read_file) to get the exact text.\n\n"
        "The edits are applied in order, each to the text as the edits before it left it: a later edit's "
        "old_string may match text an earlier edit's new_string put in, and an earlier new_string that repeats a "
        "later old_string makes that one match twice (refused unless it sets allow_multiple). Each edit is matched "
        "exactly as replace matches its old_string: the exact literal text, including whitespace and indentation, "
        "occurring once (or at least once with `allow_multiple`, every occurrence then replaced); when it is not "
        "found literally, the same near misses are recovered (indentation and other whitespace, over-escaping, one "
        "clearly closest place) and an edit that is already in the file is answered 'already applied'. A recovered "
        f"edit is refused if the file, all edits made, would have a syntax error it does not have now. At most "
        f"{MAX_EDITS} edits per call, and {MAX_EDIT_CHARS // (1024 * 1024)} MiB of old_string and new_string text "
        "together. Do not use omission placeholders such as '// ... rest of methods ...' in new_string.\n\n"
        "The file keeps its encoding, line endings and permissions. The result shows the whole change as one "
        "compact diff; `dry_run: true` shows that diff without writing anything. To create a file, use "
        "write_file."
    )
    input_schema = {  # noqa: RUF012 - read-only, as in every tool
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path of the file to modify (e.g. '/home/user/project/file.txt'). A "
                "relative path is resolved against the primary workspace root. Must be inside the workspace.",
            },
            "edits": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_EDITS,
                "description": "The replacements, applied in order, each to the text as the edits before it left "
                "it. All are applied, or none.",
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": {
                            "type": "string",
                            "description": "The exact literal text to replace, unescaped, with enough context "
                            "(about 3 lines before and after the change) to occur only once. Not empty.",
                        },
                        "new_string": {
                            "type": "string",
                            "description": "The exact literal text to replace `old_string` with, unescaped, with "
                            "the correct whitespace and indentation. Provide complete code: no omission "
                            "placeholders.",
                        },
                        "allow_multiple": {
                            "type": "boolean",
                            "default": False,
                            "description": "If true, replace every occurrence of old_string (at least one must "
                            "exist); if false (the default), old_string must occur exactly once.",
                        },
                    },
                    "required": ["old_string", "new_string"],
                },
            },
            "dry_run": {
                "type": "boolean",
                "default": False,
                "description": "If true, answer the diff the edits would make and write nothing.",
            },
        },
        "required": ["file_path", "edits"],
    }
    opt_in = True
    idempotent = False

    def __init__(self, options: te.EditOptions | None = None) -> None:
        super().__init__(options)
        if self.options.journal_settings.enabled:
            self.description += _ONE_UNDO

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        edits: list[dict[str, Any]] = args["edits"]
        loc = ctx.workspace.locate(args["file_path"])
        _check_edits(edits, loc.shown)
        if args.get("dry_run"):
            plan = await anyio.to_thread.run_sync(self._dry_run, ctx.workspace, loc, args, ctx)
            headline = (
                f"Dry run: nothing was written. Applied to {plan.path}, the {_edits(edits)} would make "
                f"{te.plural(plan.replacements, 'replacement')}."
            )
            return te.result(plan, headline, args, "", "", diff_of="the file as the edits would leave it")
        plan, outcome = await self.edit(ctx, loc, args)
        assert plan is not None and outcome is not None
        headline = (
            f"Successfully modified file: {outcome.path} ({_edits(edits)}, "
            f"{te.plural(plan.replacements, 'replacement')})."
        )
        return te.result(plan, headline, args, "", "")

    def _dry_run(self, ws: Workspace, loc: Location, args: dict[str, Any], ctx: ToolContext) -> te.Plan:
        """The plan, made as an edit makes it (under the file's lock, the stale-write guard included), and
        nothing written or recorded; with the syntax error the edits would introduce, if any."""
        lock, plan = self._prepare(ws, loc, args, ctx.views)
        lock.release()
        assert plan is not None
        error = te.introduced_error(plan.path, plan.old, plan.new)
        plan.syntax = None if error is None else f"Note: after these edits, {error}."
        return plan

    def plan(
        self, ws: Workspace, loc: Location, args: dict[str, Any], existing: tuple[Any, bytes] | None
    ) -> te.Plan:
        path = loc.shown
        edits: list[dict[str, Any]] = args["edits"]
        if existing is None:
            raise ToolError(
                f"File not found: {path}. edit_file changes an existing file; to create one, use write_file. To "
                "edit an existing file, check the path (list_directory or glob can find it)." + ws.path_hint(loc),
                ErrorKind.FILE_NOT_FOUND,
            )
        st, data = existing
        del existing
        try:
            original, codec = te.decode(data)
        except te.NotText as exc:
            raise ToolError(
                f"Cannot edit {path}: {exc.why}. edit_file only edits text it can write back exactly as it was "
                "read, so nothing was changed. To replace the whole file use write_file (it writes UTF-8).",
                ErrorKind.EDIT_PREPARATION_FAILURE,
            ) from None
        before = self.journal_copy(data)
        del data
        text, size, count = original, st.st_size, 0
        regions: list[tuple[int, int, int, int]] = []
        recovered: list[tuple[int, str, tuple[str, str]]] = []  # edit, its note, where it was placed
        for i, edit in enumerate(edits):
            check_cancelled()
            expected = None if edit.get("allow_multiple") else 1
            try:
                done = te.replace_text(path, text, codec, te.newlines(text), edit["old_string"], edit["new_string"],
                                       expected, size, _WORDING)
            except ToolError as exc:
                raise _failed(exc, i, len(edits), path) from None
            regions = _compose(regions, done.raw)
            text, size, count = done.new, done.size, count + done.count
            if done.recovery is not None and done.located is not None:
                recovered.append((i, done.recovery.note, done.located))
        if text == original:
            raise ToolError(
                f"No changes to apply: together the {_edits(edits)} leave {path} as it is (a later edit undoes an "
                "earlier one). Nothing was changed.",
                ErrorKind.EDIT_NO_CHANGE,
            )
        if recovered:
            broken = te.introduced_error(path, original, text)
            if broken is not None:
                i, _, located = recovered[0]
                message = te.breaks_message(path, located, f"{broken} (once all the edits are made)")
                raise _failed(ToolError(message), i, len(edits), path, ErrorKind.EDIT_NO_OCCURRENCE_FOUND)
        plan = te.Plan(loc, path, original, text, te.encode(text, codec, path), created=False, expect=st,
                       before=before)
        plan.replacements = count
        plan.notes = [f"edits[{i}]: {note}" for i, note, _ in recovered]
        plan.notes += te.style_notes(codec, te.newlines(original))
        plan.spans = te.align(original, text, regions)
        return plan


def _check_edits(edits: list[dict[str, Any]], path: str) -> None:
    """Refuse, before the file is read, a batch over the size bound or an edit that could never be right:
    an empty old_string, one equal to its new_string, a new_string with an omission placeholder."""
    chars = sum(len(e["old_string"]) + len(e["new_string"]) for e in edits)
    if chars > MAX_EDIT_CHARS:
        raise ToolError(
            f"Too much text in one edit_file call: its old_strings and new_strings together are {chars:,} "
            f"characters, more than the limit of {MAX_EDIT_CHARS:,}. Nothing was changed. {_WORDING.split}",
            ErrorKind.INVALID_TOOL_PARAMS,
        )
    for i, edit in enumerate(edits):
        old, new = te.to_lf(edit["old_string"]), te.to_lf(edit["new_string"])
        if not old:
            raise _failed(ToolError(
                "old_string is empty. Each edit replaces text that is in the file: to add text, include the "
                "line next to where it goes in old_string and in new_string. To create a file, use write_file.",
                ErrorKind.INVALID_TOOL_PARAMS,
            ), i, len(edits), path)
        if old == new:
            raise _failed(ToolError(
                "its old_string and new_string are identical, so it changes nothing; put the current text in "
                "old_string and the text you want instead in new_string.",
                ErrorKind.EDIT_NO_CHANGE,
            ), i, len(edits), path)
        found = te.omission(new, old, path)
        if found is not None:
            raise _failed(ToolError(
                f"its new_string contains an omission placeholder ({found!r}) that is not in its old_string: it "
                "looks like a placeholder for omitted code, and applying it would delete that code. Provide the "
                "exact literal replacement text.",
                ErrorKind.INVALID_TOOL_PARAMS,
            ), i, len(edits), path)


def _failed(exc: ToolError, i: int, total: int, path: str, kind: ErrorKind | None = None) -> ToolError:
    """The refusal of the whole call because of edit `i`: which edit, that nothing was changed, and the
    edit's own refusal (its line numbers are those of the text the edits before it left)."""
    before = "edits[0]" if i == 1 else f"edits[0..{i - 1}]"
    whose = "" if i == 0 else f" (line numbers below are of the text as {before} left it)"
    return ToolError(
        f"edits[{i}] (edit {i + 1} of {total}) cannot be applied, so none of the edits was: {path} is unchanged"
        f"{whose}. {exc.message}",
        kind or exc.kind,
    )


def _edits(edits: list[dict[str, Any]]) -> str:
    return te.plural(len(edits), "edit")


def _compose(
    regions: list[tuple[int, int, int, int]], raw: list[tuple[int, int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """The changes from the original text to the text after one more edit, as (original start, original end,
    new start, new end), given `regions`, the changes up to the text before it, and `raw`, the edit's own
    replacements of that text. Regions and replacements that overlap or touch become one region; between
    regions the texts are equal. One pass over both, each sorted."""
    events = sorted([(s, e, 0, i) for i, (_, _, s, e) in enumerate(regions)]
                    + [(s, e, 1, i) for i, (s, e, _, _) in enumerate(raw)])
    out: list[tuple[int, int, int, int]] = []
    drift_old = drift_new = 0  # before the current group: (text - original) lengths, (new - text) lengths
    group: list[Any] | None = None  # [start, end, original shift inside, new shift inside] in the text's offsets

    def close() -> None:
        nonlocal drift_old, drift_new
        assert group is not None
        start, end, inside_old, inside_new = group
        out.append((start - drift_old, end - drift_old - inside_old, start + drift_new, end + drift_new + inside_new))
        drift_old += inside_old
        drift_new += inside_new

    for start, end, edit, i in events:
        if group is not None and start > group[1]:
            close()
            group = None
        if group is None:
            group = [start, end, 0, 0]
        group[1] = max(group[1], end)
        if edit:
            s, e, ns, ne = raw[i]
            group[3] += (ne - ns) - (e - s)
        else:
            os_, oe, s, e = regions[i]
            group[2] += (e - s) - (oe - os_)
    if group is not None:
        close()
    return out


TOOL = EditFile
