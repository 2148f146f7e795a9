"""search_file_content's answer: Gemini CLI's layout (`File:` blocks, `L<n>: ` for a matching line, `L<n>- `
for a context line, `---` between files), or the sorted file list of `names_only`, under a header with the
true totals and, when not everything is shown, why and how to see the rest. The text stays within the
request's `text_chars`, taken from the result budget (`--max-result-chars`)."""

from __future__ import annotations

import bisect
from typing import Any

from coretools.tools.base import ToolResult
from coretools.tools.search.results import Collector, Request, Target


def where(path: str | None, targets: list[Target]) -> str:
    if path:
        return f'in path "{path}"'
    if len(targets) == 1:
        return "in the workspace directory"
    return f"across {len(targets)} workspace directories"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("h") else f"{n} {word}s"


def no_matches(req: Request, place: str, flt: str, note: str = "") -> str:
    return f'No matches found for pattern "{req.pattern}" {place}{flt}.{note}'


def format_result(
    req: Request, path: str | None, include: str | None, targets: list[Target], out: Collector, engine: str
) -> ToolResult:
    """The answer to a finished search; `path` and `include` as the caller gave them."""
    place = where(path, targets)
    flt = f' (filter: "{include}")' if include else ""
    structured: dict[str, Any] = {
        "total_matches": out.total_matches,
        "total_files": out.total_files,
        "shown_matches": 0,
        "truncated": False,
        "engine": engine,
        "unverified_files": out.unverified_files,
    }
    if out.skipped:
        structured["skipped"] = len(out.skipped)
    notes = _notes(out)
    if out.total_matches == 0:
        structured["stopped"] = out.stopped
        return ToolResult.text(no_matches(req, place, flt, notes), structured)
    if req.names_only:
        return _names(req, place, flt, out, notes, structured)
    body, shown, shown_files, full = _blocks(req, out)
    truncated = shown < out.total_matches
    head = (
        f"Found {plural(out.total_matches, 'match')} in {plural(out.total_files, 'file')} "
        f'for pattern "{req.pattern}" {place}{flt}'
    )
    if truncated:
        head += (
            f" (showing the first {plural(shown, 'match')} in {plural(shown_files, 'file')}, sorted by path; "
            f"results limited to {_limits(req, out, full)}). To see the rest, narrow the search: a more "
            "specific pattern, a 'path' to a subdirectory, or an 'include' glob such as '*.py'; or pass "
            "names_only: true to list every matching file"
        )
    structured.update(shown_matches=shown, truncated=truncated, stopped=out.stopped)
    return ToolResult.text("\n".join([head + ":" + notes, *body]), structured)


def _notes(out: Collector) -> str:
    notes = f" Note: {out.stopped}, so the totals are lower bounds." if out.stopped else ""
    if out.unverified_files:
        notes += (
            f" Note: {plural(out.unverified_files, 'file')} changed during the search (or could not be read again "
            "inside the workspace); their unconfirmed matches are left out."
        )
    if out.skipped:
        shown = "; ".join(out.skipped[:SKIPPED_SHOWN])
        more = len(out.skipped) - SKIPPED_SHOWN
        notes += (
            f" Note: not everything could be searched within the search's bounds, so the totals are lower bounds: "
            f"{shown}{f'; and {more} more' if more > 0 else ''}."
        )
    return notes


SKIPPED_SHOWN = 8  # of the notes on what was skipped (each names a path of at most `listing.SHOWN_PATH`)


def _limits(req: Request, out: Collector, full: bool) -> str:
    reasons = []
    if req.per_file and any(out.counts[key] > len(out.kept[key]) for key in out.keys()):
        reasons.append(f"{req.per_file} matches per file")
    if not full:
        reasons.append(f"about {req.text_chars // 1000} KB of text")
    elif out.stored >= out.cap:
        reasons.append(f"the limit of {req.cap} matches")
    return " and ".join(reasons) or f"the limit of {req.cap} matches"


def _blocks(req: Request, out: Collector) -> tuple[list[str], int, int, bool]:
    """The `File:` blocks within the text budget: the lines, matches shown, files shown, and whether the
    budget held everything kept."""
    body: list[str] = []
    shown = shown_files = size = 0
    full = True
    budget = req.text_chars
    for key in out.keys():
        block = [f"File: {key[1]}"]
        context = out.context.get(key)
        if context:
            rows = _rows(out.kept[key], context, req.before, req.after)
        else:  # matching lines only (most searches): the rows as they are kept
            rows = ((number, text, True) for number, text in out.kept[key])
        for number, text, is_match in rows:
            row = f"L{number}{':' if is_match else '-'} {text}"
            if size + len(row) > budget and shown:
                full = False
                break
            block.append(row)
            size += len(row) + 1
            shown += is_match
        if len(block) > 1:
            body += ["---", *block]
            shown_files += 1
        if not full:
            break
    body.append("---")
    return body, shown, shown_files, full


def _rows(
    lines: list[tuple[int, str]], context: dict[int, str], before: int, after: int
) -> list[tuple[int, str, bool]]:
    """A file's matching lines and the context lines near them (within `before`/`after` of a match that is
    shown), by line number."""
    rows = [(number, text, True) for number, text in lines]
    if context:
        numbers = [number for number, _ in lines]
        for number, text in context.items():
            i = bisect.bisect_left(numbers, number)
            later = i < len(numbers) and numbers[i] - number <= before
            earlier = i > 0 and number - numbers[i - 1] <= after
            if (later or earlier) and (i >= len(numbers) or numbers[i] != number):
                rows.append((number, text, False))
        rows.sort(key=lambda row: row[0])
    return rows


def _names(req: Request, place: str, flt: str, out: Collector, notes: str, structured: dict) -> ToolResult:
    """`names_only`: the matching files, sorted, within the text budget."""
    names: list[str] = []
    size = 0
    for _, name in out.keys():
        if size + len(name) > req.text_chars and names:
            break
        names.append(name)
        size += len(name) + 1
    head = (
        f"Found {plural(out.total_files, 'file')} with matches ({plural(out.total_matches, 'matching line')}) "
        f'for pattern "{req.pattern}" {place}{flt}'
    )
    truncated = len(names) < out.total_files
    if truncated:
        limit = f"the limit of {req.cap} files" if len(names) >= req.cap else f"about {req.text_chars // 1000} KB"
        head += (
            f" (showing the first {plural(len(names), 'file')}, sorted by path; results limited to {limit}). "
            "To see the rest, narrow the search: a 'path' to a subdirectory or an 'include' glob"
        )
    structured.update(shown_files=len(names), truncated=truncated, stopped=out.stopped)
    return ToolResult.text("\n".join([head + ":" + notes, *names]), structured)
