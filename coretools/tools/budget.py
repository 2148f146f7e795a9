"""Fitting a tool's answer to the result budget (`ToolContext.result_chars`, `--max-result-chars`).

A tool that lists things (paths, entries, lines) shows as many as fit and then says how many there were
and how to get the rest, which only it knows how to say; the server cuts anything still too large.
"""

from __future__ import annotations

# Characters a listing keeps for its header and closing notes.
RESERVE_CHARS = 1_000


def lines_that_fit(lines: list[str], budget: int, reserve: int = RESERVE_CHARS) -> int:
    """How many of `lines` (joined by newlines) fit in `budget` characters less `reserve`: all of them when
    the budget is 0 (no limit), and at least one."""
    if budget <= 0:
        return len(lines)
    room = max(budget - reserve, 1)
    used = 0
    for count, line in enumerate(lines):
        used += len(line) + 1
        if used > room:
            return max(count, 1)
    return len(lines)
