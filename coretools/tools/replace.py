"""replace: exact, literal text replacement in one file, atomic and faithful to its encoding and line endings."""

from __future__ import annotations

from typing import Any


from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import Location, Workspace
from coretools.tools import textedit as te
from coretools.tools.dialects import latest_from
from coretools.tools.base import ToolContext, ToolResult, check_cancelled

_SPLIT_EDIT = (
    "Make the change in smaller steps: replace fewer occurrences per call (a lower expected_replacements, with "
    "more context in old_string to single them out) or use a shorter new_string; to produce a large file, "
    "generate it with run_shell_command."
)
_WORDING = te.Wording("set expected_replacements to {found}", _SPLIT_EDIT)


class Replace(te.EditTool):
    name = "replace"
    title = "Edit file (replace text)"
    hint = (
        "change part of a file by literal match (whitespace and escaping near misses are recovered); include "
        "enough context to be unique, and set expected_replacements to change several occurrences."
    )
    description = (
        "Replaces text within a file. By default replaces a single occurrence; set `expected_replacements` to "
        "replace that many occurrences (the count must match exactly, or nothing is changed). Always read the file "
        "first (read_file) to get the exact text.\n\n"
        "1. `old_string` must be the exact literal text to replace, including all whitespace and indentation, and "
        "must not be escaped. Include at least 3 lines of context before and after the change so it matches only "
        "where you intend.\n"
        "2. `new_string` is the exact literal replacement (`$` and backslashes are literal). Do not use omission "
        "placeholders such as '// ... rest of methods ...'.\n"
        "3. An empty `old_string` creates a new file with `new_string` as its content (the file must not exist).\n\n"
        "The edit is atomic. The file keeps its encoding (UTF-8, with or without BOM, or UTF-16/32 with BOM), its "
        "line endings (an `old_string` written with LF also matches a CRLF file) and its permissions; a file that "
        "is not valid text in one of these encodings is refused rather than rewritten.\n\n"
        "When `old_string` is not found literally, near misses are recovered, in this order, and the result says "
        "which applied: the same lines ignoring indentation, trailing whitespace, tabs versus spaces and "
        "blank-line indentation (`new_string` is then re-indented to the file's indentation); an over-escaped "
        "pair (\\n, \\t, \\\" written as two characters), unescaped alike; the same tokens with different "
        "whitespace between them; and, for blocks of 3 or more lines, the one clearly closest place (at least 90% "
        "similar, no other within 5%). The first of these that matches decides, and its count must equal "
        "`expected_replacements`. An ambiguous or too distant near miss changes nothing: the error shows the "
        "nearest text with line numbers. The result shows the change as a compact diff numbered with the file's new line numbers, and notes a "
        "syntax error the edit introduced (Python, JSON, YAML, TOML, shell, JavaScript, TypeScript, Go, Rust)."
    )
    input_schema = {  # noqa: RUF012 - read-only, as in every tool
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path of the file to modify (e.g. '/home/user/project/file.txt'). A "
                "relative path is resolved against the primary workspace root. Must be inside the workspace.",
            },
            "old_string": {
                "type": "string",
                "description": "The exact literal text to replace, unescaped, with at least 3 lines of context "
                "before and after the target so that it identifies the place uniquely. Empty to create a new file.",
            },
            "new_string": {
                "type": "string",
                "description": "The exact literal text to replace `old_string` with, unescaped, with the correct "
                "whitespace and indentation. Provide complete code: no omission placeholders.",
            },
            "expected_replacements": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "How many occurrences of `old_string` to replace (default 1). The file must contain "
                "exactly this many, or nothing is changed.",
            },
            "modified_by_user": {
                "type": "boolean",
                "description": "Set by the client when the user edited the proposed `new_string` before it was "
                "applied; the result then says so.",
            },
        },
        "required": ["file_path", "old_string", "new_string"],
    }
    extra_properties = {
        "allow_multiple": {
            "type": "boolean",
            "description": "If true, replace every occurrence of old_string (at least one must exist); if false "
            "(the default), old_string must occur exactly once.",
        },
        "instruction": {
            "type": "string",
            "description": "A short, self-contained description of the change: why, where, what, and the "
            "outcome. It is repeated in the result.",
        },
    }
    latest_schema = latest_from(
        input_schema,
        drop=("expected_replacements", "modified_by_user"),
        add={"instruction": extra_properties["instruction"], "allow_multiple": extra_properties["allow_multiple"]},
        required=["file_path", "instruction", "old_string", "new_string"],
    )

    @classmethod
    def translate(cls, args: dict[str, Any]) -> dict[str, Any]:
        """`allow_multiple: false` is `expected_replacements: 1`; `true` replaces every occurrence unless a
        count is also given (which is then held to)."""
        args = super().translate(args)
        if "allow_multiple" not in args:
            return args
        given = args.get("expected_replacements")
        if not args["allow_multiple"] and given not in (None, 1):
            raise ToolError(
                f"Parameters 'allow_multiple' (false: exactly one occurrence) and 'expected_replacements' ({given}) "
                "disagree. Pass only one of them.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        if not args["allow_multiple"] or given is not None:
            args = {k: v for k, v in args.items() if k != "allow_multiple"}
        return args
    idempotent = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        old_string: str = args["old_string"]
        new_string: str = args["new_string"]
        loc = ctx.workspace.locate(args["file_path"])
        if old_string and te.to_lf(old_string) == te.to_lf(new_string):
            raise ToolError(
                f"No changes to apply. The old_string and new_string are identical in file: {loc.shown}. Nothing "
                "was changed; put the current text in old_string and the text you want instead in new_string.",
                ErrorKind.EDIT_NO_CHANGE,
            )
        found = te.omission(te.to_lf(new_string), te.to_lf(old_string), loc.shown)
        if found is not None:
            raise ToolError(
                f"`new_string` contains an omission placeholder ({found!r}) that is not in old_string: it looks like "
                "a placeholder for omitted code, and applying it would delete that code. Nothing was changed. "
                "Provide the exact literal replacement text.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        plan, outcome = await self.edit(ctx, loc, args)
        assert plan is not None and outcome is not None
        if plan.created:
            headline = f"Created new file: {outcome.path} with provided content."
        else:
            count = te.plural(plan.replacements or args["expected_replacements"], "replacement")
            headline = f"Successfully modified file: {outcome.path} ({count})."
            if args.get("instruction", "").strip():
                headline += f" Instruction carried out: {te.echo(args['instruction'].strip())}"
        return te.result(plan, headline, args, "`new_string` content", new_string)

    def plan(
        self, ws: Workspace, loc: Location, args: dict[str, Any], existing: tuple[Any, bytes] | None
    ) -> te.Plan:
        old_string: str = args["old_string"]
        new_string: str = args["new_string"]
        path = loc.shown
        if existing is None:
            if not old_string and (size := te.encoded_len(new_string, te.UTF8)) > te.edit_limit():
                raise te.too_big(path, size, "creating it with new_string as its content", _SPLIT_EDIT)
            if old_string:
                raise ToolError(
                    f"File not found: {path}. Cannot apply the edit because the file does not exist. To create a new "
                    "file, call replace with an empty old_string and the whole content as new_string, or use "
                    "write_file. To edit an existing file, check the path (list_directory or glob can find it)."
                    + ws.path_hint(loc),
                    ErrorKind.FILE_NOT_FOUND,
                )
            plan = te.Plan(loc, path, "", new_string, te.encode(new_string, te.UTF8, path), created=True,
                           must_not_exist=True)
            plan.spans = te.align("", new_string, [(0, 0, 0, len(new_string))]) if new_string else []
            return plan
        st, data = existing
        del existing
        if not old_string:
            raise ToolError(
                f"File already exists, cannot create: {path}. An empty old_string means 'create a new file'. To "
                "change this file, pass the exact text to replace as old_string (read it first with read_file), or "
                "use write_file to overwrite it entirely.",
                ErrorKind.ATTEMPT_TO_CREATE_EXISTING_FILE,
            )
        try:
            text, codec = te.decode(data)
        except te.NotText as exc:
            raise ToolError(
                f"Cannot edit {path}: {exc.why}. replace only edits text it can write back exactly as it was read, "
                "so nothing was changed. To replace the whole file use write_file (it writes UTF-8); to edit it in "
                "its own encoding, use run_shell_command with a tool that understands it.",
                ErrorKind.EDIT_PREPARATION_FAILURE,
            ) from None
        before = self.journal_copy(data)
        del data
        expected = None if args.get("allow_multiple") else args["expected_replacements"]
        breaks = te.newlines(text)
        done = te.replace_text(path, text, codec, breaks, old_string, args["new_string"], expected,
                               st.st_size, _WORDING)
        if done.located is not None:
            broken = te.introduced_error(path, text, done.new)
            if broken is not None:
                raise ToolError(te.breaks_message(path, done.located, broken), ErrorKind.EDIT_NO_OCCURRENCE_FOUND)
        plan = te.Plan(loc, path, text, done.new, te.encode(done.new, codec, path), created=False, expect=st,
                       before=before)
        plan.replacements = done.count
        plan.notes = [done.recovery.note] if done.recovery is not None else []
        plan.notes += te.style_notes(codec, breaks)
        plan.spans = te.align(text, done.new, done.raw)
        return plan


TOOL = Replace
