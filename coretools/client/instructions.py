"""The servers' instructions, as the model reads them in its system instruction.

An MCP server may describe in its ``instructions`` (sent once, when the session starts) how
its tools fit together and what they may touch. A host that drops them leaves the model to
guess, so the bridge passes them on: each server's text in its own block, headed with the
server's alias (the prefix of its published tool names) so the model knows which tools a
sentence is about, and after whatever system instruction the user gave.

Server text is not the user's: a server could send a novel. Each block is cut at
``per_server`` characters and all of them together at ``total``; a cut block ends with a note
giving the original length, and a server whose block no longer fits is named in a note rather
than silently left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PER_SERVER_LIMIT = 4_000
TOTAL_LIMIT = 12_000


@dataclass(frozen=True)
class ServerInstructions:
    """One server's instructions; ``prefix`` is how its tools are published (``"fs__"`` or ``""``)."""

    alias: str
    text: str
    prefix: str = ""

    def heading(self) -> str:
        head = f'Instructions from MCP server "{self.alias}"'
        if self.prefix:
            head += f" (its tools are published as {self.prefix}<tool name>)"
        return head + ":"


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, ended at a line break when one is near, with a note."""
    if len(text) <= limit:
        return text
    note = f"\n[… cut here: the instructions are {len(text):,} characters, {limit:,} are shown]"
    room = max(limit - len(note), 0)
    head = text[:room]
    line_end = head.rfind("\n")
    if line_end >= room // 2:
        head = head[:line_end]
    return head.rstrip() + note


def render_blocks(
    servers: Sequence[ServerInstructions], *, per_server: int = PER_SERVER_LIMIT, total: int = TOTAL_LIMIT
) -> list[str]:
    """One attributed block per server that sent instructions, within both limits."""
    blocks: list[str] = []
    left_out: list[str] = []
    remaining = total
    for server in servers:
        text = server.text.strip()
        if not text:
            continue
        heading = server.heading()
        room = min(per_server, remaining - len(heading) - 1)
        if room < min(200, per_server):
            left_out.append(server.alias)
            continue
        block = f"{heading}\n{cut(text, room)}"
        blocks.append(block)
        remaining -= len(block)
    if left_out:
        names = ", ".join(f'"{alias}"' for alias in left_out)
        limit = f"the {total:,}-character limit for server instructions is reached"
        blocks.append(f"[Instructions from MCP server(s) {names} left out: {limit}.]")
    return blocks


def merged_text(system: str | None, blocks: Sequence[str]) -> str | None:
    """A plain-text system prompt: the user's first, then the servers' blocks."""
    text = "\n\n".join(piece for piece in (system, *blocks) if piece)
    return text or None


def merged_content(system: str | Mapping[str, Any] | None, blocks: Sequence[str]) -> str | dict[str, Any] | None:
    """A Gemini ``systemInstruction``: the user's (a string or a ``Content``) first, then one part per block."""
    if not blocks:
        return dict(system) if isinstance(system, Mapping) else system
    if system is None or isinstance(system, str):
        parts = [{"text": system}] if system else []
    else:
        parts = [dict(part) for part in system.get("parts") or ()]
    content = dict(system) if isinstance(system, Mapping) else {}
    content["parts"] = parts + [{"text": block} for block in blocks]
    return content
