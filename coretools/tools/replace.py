"""replace: exact, literal text replacement in one file, atomic and faithful to its encoding and line endings."""

from __future__ import annotations

import re
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
            count = _plural(plan.replacements or args["expected_replacements"], "replacement")
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
            if not old_string and (size := _encoded_len(new_string, te.UTF8)) > te.edit_limit():
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
        breaks = te.newlines(text)
        matches, newline_at = _find(text, old_string, breaks)
        if not matches:
            return _recovered_plan(loc, path, st, text, codec, breaks, args, before)
        new_lf = te.to_lf(new_string)
        old_lf = te.to_lf(old_string)
        if old_lf in new_lf:
            text_lf = te.to_lf(text) if breaks.crlf else text
            _refuse_applied(path, text_lf, te.around(text_lf, old_lf, new_lf),
                            "old_string is in the file only inside new_string, which is there already")
        expected = len(matches) if args.get("allow_multiple") else args["expected_replacements"]
        _check_count(path, text, [s for s, _ in matches[:10]], len(matches), expected, "")
        size = _edited_size(st.st_size, codec, te.to_lf(old_string), new_lf, matches, newline_at)
        if size > te.edit_limit():
            what = f"replacing {_plural(expected, 'occurrence')} of old_string with new_string"
            raise te.too_big(path, size, what, _SPLIT_EDIT)
        new, raw = _substitute(text, matches, lambda s, e: te.with_newline(new_lf, newline_at(s, e)))
        new, raw = _keep_final_newline(text, new, raw, breaks.dominant or "\n")
        if new == text:
            raise ToolError(
                f"No changes to apply. The new content is identical to the current content in file: {path}. "
                "Nothing was changed.",
                ErrorKind.EDIT_NO_CHANGE,
            )
        plan = te.Plan(loc, path, text, new, te.encode(new, codec, path), created=False, expect=st, before=before)
        plan.replacements = len(matches)
        plan.notes = te.style_notes(codec, breaks)
        plan.spans = te.align(text, new, raw)
        return plan


_SHOWN = 8  # lines of a refused near miss shown

_HOW = {
    "lines": "matched line by line ignoring whitespace",
    "unescaped": "matched once unescaped",
    "tokens": "matched ignoring whitespace between tokens",
    "fuzzy": "matched fuzzily",
}


def _recovered_plan(loc: Location, path: str, st, text: str, codec: te.Codec, breaks: te.Newlines,
                    args: dict[str, Any], before: bytes | None) -> te.Plan:
    """The plan of an edit whose old_string is not literally in the file: the near-miss cascade decides
    where (or refuses, the file untouched); its replacements take the file's line endings."""
    old_string: str = args["old_string"]
    text_lf = te.to_lf(text) if breaks.crlf else text
    old_lf, new_lf = te.to_lf(old_string), te.to_lf(args["new_string"])
    _refuse_replay(path, text_lf, old_lf, new_lf, args)
    try:
        found = te.recover(text_lf, old_lf, new_lf, check=check_cancelled)
    except te.AmbiguousIndentation as exc:
        raise ToolError(
            f"Cannot apply the edit to {path}: old_string is not literally in the file; it matched ignoring "
            "indentation, but old_string and new_string are indented differently and new_string fits two "
            f"readings: the lines you kept from old_string would go to {exc} (the first line you kept, at "
            "the first place). Nothing was changed. Send old_string exactly as the file has it (read_file), or "
            "new_string in the file's own indentation.",
            ErrorKind.EDIT_NO_OCCURRENCE_FOUND,
        ) from None
    if not found.count:
        _refuse_applied(path, text_lf, te.replayed(text_lf, old_lf, new_lf, check_cancelled, deletions=True)[:1],
                        "old_string is not in the file, nor anything near it, and new_string (which deletes part of "
                        "it) is there")
        raise ToolError(_no_match_message(path, text, old_string, found.nearest), ErrorKind.EDIT_NO_OCCURRENCE_FOUND)
    expected = found.count if args.get("allow_multiple") else args["expected_replacements"]
    _check_count(path, text_lf, [s for s, _ in found.spans[:10]], found.count, expected, found.strategy)
    if found.strategy == "fuzzy":
        done = [span for span in found.spans if te.closer_to_new(text_lf, old_lf, new_lf, span)]
        _refuse_applied(path, text_lf, done, "old_string is not in the file; the closest text to it is closer "
                        "still to new_string")
    if breaks.crlf:
        ends = iter(_original_indices(text, [i for span in found.spans for i in span]))
        matches = list(zip(ends, ends))
    else:
        matches = found.spans
    newline_at = _newline_rule(text, breaks)
    reps = {s: te.with_newline(rep, newline_at(s, e)) for (s, e), rep in zip(matches, found.replacements)}
    new, raw = _substitute(text, matches, lambda s, e: reps[s])
    new, raw = _keep_final_newline(text, new, raw, breaks.dominant or "\n")
    if new == text:
        raise ToolError(
            f"No changes to apply. The new content is identical to the current content in file: {path} "
            f"(old_string {_HOW[found.strategy]}). Nothing was changed.",
            ErrorKind.EDIT_NO_CHANGE,
        )
    size = len(codec.bom) + _encoded_len(new, codec)
    if size > te.edit_limit():
        what = f"replacing {_plural(expected, 'occurrence')} of old_string with new_string"
        raise te.too_big(path, size, what, _SPLIT_EDIT)
    broken = te.introduced_error(path, text, new)
    if broken is not None:
        raise ToolError(_breaks_message(path, text_lf, found, broken), ErrorKind.EDIT_NO_OCCURRENCE_FOUND)
    plan = te.Plan(loc, path, text, new, te.encode(new, codec, path), created=False, expect=st, before=before)
    plan.replacements = found.count
    plan.notes = [found.note, *te.style_notes(codec, breaks)]
    plan.spans = te.align(text, new, raw)
    return plan


def _refuse_replay(path: str, text: str, old: str, new: str, args: dict[str, Any]) -> None:
    """Refuse, before any near-miss strategy runs, an edit that is already applied: old_string is not in the
    file and new_string is, as often as the edit asks (once by default). A repeated call would otherwise
    have a near-miss strategy edit whatever else resembles old_string, such as a sibling function."""
    spans = te.replayed(text, old, new, check=check_cancelled)
    if spans and len(spans) == (len(spans) if args.get("allow_multiple") else args["expected_replacements"]):
        _refuse_applied(path, text, spans, "old_string is not in the file and new_string is already there")


def _refuse_applied(path: str, text: str, spans: list[tuple[int, int]], why: str) -> None:
    """The answer to an edit that is applied already (`spans`: where new_string stands; none: go on)."""
    if not spans:
        return
    where = ", ".join(_line_range(text, s, e) for s, e in spans[:10]) + (", ..." if len(spans) > 10 else "")
    raise ToolError(
        f"Already applied at lines {where} of {path}: {why}, so this edit looks like a repeated call. Nothing "
        "was changed. If you meant to change another place, read the file (read_file) and send that place's "
        "exact text as old_string.",
        ErrorKind.EDIT_NO_CHANGE,
    )


def _breaks_message(path: str, text: str, found: te.Recovery, error: str) -> str:
    """The refusal of a recovered edit whose result has a syntax error the file does not have: where the
    near miss was found, what is wrong, and the lines as they are."""
    (start, end), more = found.spans[0], len(found.spans) - 1
    first = _line_numbers(text, [start])[0]
    last = first + text.count("\n", start, max(start, end - 1))
    where = f"lines {first}-{last}" + (f" (and {_plural(more, 'other place')})" if more else "")
    rows = text.split("\n")[first - 1 : min(last, first + _SHOWN - 1)]
    shown = "\n".join(f"{first + k:>6}| {row[:200]}" for k, row in enumerate(rows))
    if last - first + 1 > _SHOWN:
        shown += f"\n{'':>6}  ... ({last - first + 1 - _SHOWN} more lines)"
    return (
        f"Cannot apply the edit to {path}: old_string is not literally in the file; it {_HOW[found.strategy]} at "
        f"{where}, but the edited file would have a syntax error it does not have now: {error}. Nothing was "
        "changed. Check new_string's indentation and brackets, or copy the exact lines into old_string:\n"
        + shown
    )


def _line_range(text: str, start: int, end: int) -> str:
    first = _line_numbers(text, [start])[0]
    return f"{first}-{first + text.count(chr(10), start, max(start, end - 1))}"


def _check_count(path: str, text: str, starts: list[int], found: int, expected: int, strategy: str) -> None:
    """Refuse unless exactly `expected` occurrences were found (by the literal search, or by the near-miss
    `strategy` that decided: a looser one is never tried after it)."""
    if found == expected:
        return
    lines = _line_numbers(text, starts)
    where = ", ".join(map(str, lines)) + (", ..." if found > 10 else "")
    how = f" ({_HOW[strategy]}, as it is not literally in the file)" if strategy else ""
    raise ToolError(
        f"Failed to edit, expected {_plural(expected, 'occurrence')} but found {found} for old_string{how} "
        f"in file: {path}. Nothing was changed. The occurrences start on line(s) {where}. To replace all of "
        f"them, set expected_replacements to {found}; to change only one, include more surrounding "
        "lines in old_string so that it matches exactly once.",
        ErrorKind.EDIT_EXPECTED_OCCURRENCE_MISMATCH,
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _edited_size(file_bytes: int, codec: te.Codec, old_lf: str, new_lf: str, matches, newline_at) -> int:
    """The file's size in bytes once each match is replaced, counted before anything is built.

    A match is `old_lf` with a "\\r" before some of its line breaks, and a replacement is `new_lf` with a
    "\\r" before each of its line breaks where the file uses CRLF there."""
    cr = len("\r".encode(codec.encoding))
    old_bytes = _encoded_len(old_lf, codec)
    new_bytes = _encoded_len(new_lf, codec)
    new_breaks = new_lf.count("\n")
    size = file_bytes
    for s, e in matches:
        size -= old_bytes + (e - s - len(old_lf)) * cr
        size += new_bytes + (new_breaks * cr if newline_at(s, e) == "\r\n" else 0)
    return size


def _encoded_len(text: str, codec: te.Codec, chunk: int = 1 << 20) -> int:
    """Bytes of `text` in `codec`, measured a piece at a time so that a huge text is never encoded whole (a
    lone surrogate counts as the bytes it would take; writing it is refused later, with its own error)."""
    if text.isascii() and codec.encoding == "utf-8":
        return len(text)
    return sum(len(text[i : i + chunk].encode(codec.encoding, "surrogatepass")) for i in range(0, len(text), chunk))


def _find_all(text: str, needle: str) -> list[tuple[int, int]]:
    out = []
    pos = text.find(needle)
    while pos >= 0:
        out.append((pos, pos + len(needle)))
        pos = text.find(needle, pos + len(needle))
    return out


def _find(text: str, old_string: str, breaks: te.Newlines):
    """Non-overlapping occurrences of `old_string` in `text`, any line break in `old_string` matching the file's
    (LF, CRLF, or either in a mixed file); and, per occurrence, the line break its replacement should use."""
    old_lf = te.to_lf(old_string)
    newline_at = _newline_rule(text, breaks)
    if not breaks.crlf:
        return _find_all(text, old_lf), newline_at
    if not breaks.mixed:
        return _find_all(text, old_lf.replace("\n", "\r\n")), newline_at
    return _find_either_break(text, old_lf), newline_at


def _newline_rule(text: str, breaks: te.Newlines):
    """The line break a replacement of text[s:e] uses: the file's, or in a mixed file the first one inside
    the replaced text (the dominant one if it has none)."""
    if not breaks.crlf:
        return lambda s, e: "\n"
    if not breaks.mixed:
        return lambda s, e: "\r\n"
    dominant = breaks.dominant or "\n"

    def newline_at(s: int, e: int) -> str:
        first = text.find("\n", s, e)
        if first < 0:
            return dominant
        return "\r\n" if first > s and text[first - 1] == "\r" else "\n"

    return newline_at


def _find_either_break(text: str, old_lf: str) -> list[tuple[int, int]]:
    """Occurrences of `old_lf` in a text with both kinds of line break, each "\\n" of `old_lf` matching "\\n" or
    "\\r\\n": searched for in the text with its CRLFs made LF, then mapped back. Linear: a regular expression
    with an optional "\\r" per line would take time proportional to the text times `old_lf`, holding the
    interpreter all along."""
    if old_lf.endswith("\r") or "\r\n" in old_lf:
        return _find_with_cr_before_break(text, old_lf)
    spans = _find_all(text.replace("\r\n", "\n"), old_lf)
    ends = iter(_original_indices(text, [i for span in spans for i in span]))
    return list(zip(ends, ends))


def _original_indices(text: str, positions: list[int]) -> list[int]:
    """Map increasing indices of `text.replace("\\r\\n", "\\n")` to indices of `text` (a CRLF's "\\n" maps to
    its "\\r"). Each step counts the CRLFs of a stretch of `text` it has not counted before: linear overall."""
    out: list[int] = []
    o = p = 0  # an index of `text` and the index of the same character in the LF-only text
    for target in positions:
        while p < target:
            end = o + (target - p)
            pairs = text.count("\r\n", o, end)  # each of these is two characters for one
            p += end - o - pairs
            o = end + (1 if text[end - 1] == "\r" and text.startswith("\n", end) else 0)
        out.append(o)
    return out


MAX_CR_SEARCH_WORK = 20_000_000


def _find_with_cr_before_break(text: str, old_lf: str) -> list[tuple[int, int]]:
    """`old_lf` has a lone "\\r" at its end or before one of its line breaks, which may be the first half of one
    of the file's CRLFs (and is gone once they are made LF): matched with a regular expression, whose cost (up
    to the text times `old_lf`) is refused past a bound."""
    if len(text) * len(old_lf) > MAX_CR_SEARCH_WORK:
        raise ToolError(
            "old_string has a carriage return (\\r) at its end or before a line break, and this file mixes CRLF "
            "and LF line endings: such a search is too costly in a file this large. Nothing was changed. Leave "
            "the lone \\r out of old_string (end it at the end of a line, or include the line break itself).",
            ErrorKind.INVALID_TOOL_PARAMS,
        )
    pattern = re.compile("\r?\n".join(re.escape(part) for part in old_lf.split("\n")))
    return [m.span() for m in pattern.finditer(text)]


def _substitute(text: str, matches: list[tuple[int, int]], replacement) -> tuple[str, list[tuple[int, int, int, int]]]:
    pieces: list[str] = []
    raw: list[tuple[int, int, int, int]] = []
    pos = npos = 0
    for s, e in matches:
        pieces.append(text[pos:s])
        npos += s - pos
        rep = replacement(s, e)
        pieces.append(rep)
        raw.append((s, e, npos, npos + len(rep)))
        npos += len(rep)
        pos = e
    pieces.append(text[pos:])
    return "".join(pieces), raw


def _keep_final_newline(old: str, new: str, raw: list, newline: str) -> tuple[str, list]:
    """A file that ended without a line break does not gain one, and one that had it does not lose it, when the
    last replacement reaches the end of the file."""
    if not old or not new or not raw or raw[-1][1] != len(old):
        return new, raw
    s, e, ns, ne = raw[-1]
    if old.endswith("\n") and not new.endswith("\n"):
        return new + newline, [*raw[:-1], (s, e, ns, ne + len(newline))]
    if not old.endswith("\n") and new.endswith("\n"):
        cut = 2 if new.endswith("\r\n") else 1
        if ne - ns >= cut:
            return new[:-cut], [*raw[:-1], (s, e, ns, ne - cut)]
        return new[:-cut], [*raw[:-1], (s - cut, e, ns - cut, ne - cut)]
    return new, raw


def _line_numbers(text: str, positions: list[int]) -> list[int]:
    out, line, last = [], 1, 0
    for pos in positions:
        line += text.count("\n", last, pos)
        last = pos
        out.append(line)
    return out


def _no_match_message(path: str, text: str, old_string: str, nearest: str = "") -> str:
    parts = [(
        f"Failed to edit, 0 occurrences found for old_string in {path}. No edits made: the exact text in old_string "
        "was not found, nor anything near enough to it to edit safely (ignoring indentation and other whitespace, "
        "over-escaping, or a few differing characters in one clearly closest place). Check the text with "
        "read_file and copy it exactly."
    )]
    if nearest:
        parts.append(nearest)
        return "\n".join(parts)
    similar = te.similar_lines(text, old_string, check=check_cancelled)
    if similar:
        parts.append(similar)
        parts.append("Copy the exact text from these lines into old_string (without the line numbers).")
    else:
        parts.append("Nothing in the file resembles it; use read_file to see the current content.")
    return "\n".join(parts)


TOOL = Replace
