"""The one size budget every result is held to (`--max-result-chars`).

Hosts cut or refuse large tool results (Claude Code stops at 25,000 tokens by default), and a cut the model
cannot see the end of loses it. Each tool fits its own answer to the budget and says exactly how to get the
rest (the next offset, a narrower pattern); this is the backstop for anything that still comes out larger:
the text is cut at the budget and ends with the true size and how to ask for less.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coretools.tools.base import DEFAULT_RESULT_CHARS, ToolResult

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["DEFAULT_RESULT_CHARS", "fit"]

def fit(result: ToolResult, budget: int, how: str) -> ToolResult:
    """`result` with its text cut to `budget` characters in all (media blocks are left to their own caps)."""
    import mcp_types as types  # here: `history` and `undo` import this module and do without the MCP types

    total = sum(len(b.text) for b in result.content if isinstance(b, types.TextContent))
    if budget <= 0 or total <= budget:
        return result
    note = (
        f"\n[... result cut: {total - budget:,} of its {total:,} characters are not shown; this server returns at "
        f"most {budget:,} characters per result (server option --max-result-chars). To see the rest, {how}.]"
    )
    room = max(budget - len(note), 0)
    blocks: list[types.ContentBlock] = []
    cut = False
    for block in result.content:
        if not isinstance(block, types.TextContent):
            blocks.append(block)
        elif cut:
            continue
        elif len(block.text) <= room:
            blocks.append(block)
            room -= len(block.text)
        else:
            blocks.append(types.TextContent(type="text", text=block.text[:room] + note))
            cut = True
    return ToolResult(blocks, result.structured, result.is_error)
