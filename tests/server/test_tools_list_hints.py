"""`tools/list` is the same answer for the server's whole life, and says so to 2026-07-28 clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from support import stdio_params

pytestmark = [pytest.mark.timeout(60), pytest.mark.anyio]


async def test_the_tool_list_is_stable_and_its_cache_hint_says_so(tmp_path: Path, mode: str) -> None:
    async with Client(stdio_params([tmp_path], "--tools", "all"), mode=mode) as client:
        first = await client.list_tools(cache_mode="bypass")
        again = await client.list_tools(cache_mode="bypass")
    assert [t.model_dump() for t in first.tools] == [t.model_dump() for t in again.tools]
    assert len({t.name for t in first.tools}) == len(first.tools)
    if mode == "legacy":
        return  # 2025-11-25 results carry no freshness hints
    assert first.ttl_ms == 24 * 3600 * 1000 and first.cache_scope == "private", (first.ttl_ms, first.cache_scope)
