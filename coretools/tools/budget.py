"""Fitting a result to the result budget (`ToolContext.result_chars`, `--max-result-chars`): the one home of
every cut.

Hosts cut or refuse large tool results (Claude Code stops at 25,000 tokens by default), and a cut the model
cannot see the end of loses it. So a tool that lists things (paths, entries, lines) shows as many as fit
(`lines_that_fit`), or gives its text the room the budget leaves beside its notes (`room`), and then says
how many there were and how to get the rest, which only it knows how to say. `fit` is the backstop the
server applies to every result: text still larger is cut at the budget and ends with the true size and how
to ask for less (the tool's `narrowing`). A budget of 0 means no limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coretools.tools.base import ToolResult

if TYPE_CHECKING:
    import mcp_types as types

# Characters a listing keeps for its header and closing notes.
RESERVE_CHARS = 1_000


def room(budget: int, reserve: int, least: int = 1) -> int | None:
    """The characters a result's main text may take: the budget less what its header and notes keep
    (`reserve`), at least `least`; None when the budget is 0 (no limit)."""
    return None if budget <= 0 else max(budget - reserve, least)


def lines_that_fit(lines: list[str], budget: int, reserve: int = RESERVE_CHARS) -> int:
    """How many of `lines` (joined by newlines) fit in `budget` characters less `reserve`: all of them when
    the budget is 0 (no limit), and at least one."""
    space = room(budget, reserve)
    if space is None:
        return len(lines)
    used = 0
    for count, line in enumerate(lines):
        used += len(line) + 1
        if used > space:
            return max(count, 1)
    return len(lines)


def fit(result: ToolResult, budget: int, how: str) -> ToolResult:
    """`result` with its text cut to `budget` characters in all (media blocks are left to their own caps);
    `how` says how to see the rest."""
    import mcp_types as types  # here: `history` and `undo` import the tools and do without the MCP types

    total = sum(len(b.text) for b in result.content if isinstance(b, types.TextContent))
    if budget <= 0 or total <= budget:
        return result
    note = (
        f"\n[... result cut: {total - budget:,} of its {total:,} characters are not shown; this server returns at "
        f"most {budget:,} characters per result (server option --max-result-chars). To see the rest, {how}.]"
    )
    space = max(budget - len(note), 0)
    blocks: list[types.ContentBlock] = []
    cut = False
    for block in result.content:
        if not isinstance(block, types.TextContent):
            blocks.append(block)
        elif cut:
            continue
        elif len(block.text) <= space:
            blocks.append(block)
            space -= len(block.text)
        else:
            blocks.append(types.TextContent(type="text", text=block.text[:space] + note))
            cut = True
    return ToolResult(blocks, result.structured, result.is_error)
