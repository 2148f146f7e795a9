"""The linear-time stdio transport: framing edge cases, big messages, stderr, shutdown."""

from __future__ import annotations

import sys

import anyio
import mcp.types as mcp_types
import pytest
from client_support import RAW_SERVER, TOY_SERVER, alive, python_server
from mcp import ClientSession

from coretools.client.stdio import StdioServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
RAW = str(RAW_SERVER)


async def session_roundtrip(process: StdioServerProcess, size: int = 10, handler=None) -> tuple[list[mcp_types.Tool], str]:
    async with process.connect() as (read, write), ClientSession(read, write, message_handler=handler) as session:
        with anyio.fail_after(30):
            await session.initialize()
            tools = (await session.list_tools()).tools
            result = await session.call_tool("echo", {"size": size})
    return tools, result.content[0].text


@pytest.mark.parametrize("mode", ["split", "batch", "garbage"])
async def test_framing_edge_cases(mode: str) -> None:
    seen: list[object] = []

    async def handler(message: object) -> None:
        seen.append(message)

    process = StdioServerProcess(sys.executable, [RAW, mode], label=mode)
    tools, text = await session_roundtrip(process, size=300, handler=handler)
    assert [t.name for t in tools] == ["echo"] and tools[0].description == "é ünïcode ✓"
    assert text == "é" * 300
    if mode == "batch":
        assert any(isinstance(m, mcp_types.ToolListChangedNotification) for m in seen)
    if mode == "garbage":
        assert any(isinstance(m, Exception) for m in seen), "unparseable lines surface as transport errors"
    assert f"raw_server {mode}" in process.stderr_tail()
    assert process.returncode is not None and not alive(process.pid)


async def test_large_message_arrives_intact() -> None:
    process = StdioServerProcess(sys.executable, [RAW, "batch"])
    _, text = await session_roundtrip(process, size=3_000_000)  # ~6 MB of two-byte characters
    assert len(text) == 3_000_000 and set(text) == {"é"}


async def test_stubborn_server_is_killed() -> None:
    process = StdioServerProcess(sys.executable, [RAW, "stubborn"])
    await session_roundtrip(process)
    assert not alive(process.pid)
    assert process.returncode == -9


async def test_stderr_tail_is_bounded() -> None:
    script = "import sys\nfor i in range(5000): print(f'line {i}', file=sys.stderr)\nsys.stderr.flush()\nimport time; time.sleep(0.5)"
    process = StdioServerProcess(sys.executable, ["-c", script], stderr_limit=1000)
    async with process.connect():
        with anyio.fail_after(20):
            while "line 4999" not in process.stderr_tail():
                await anyio.sleep(0.02)
    tail = process.stderr_tail(limit=5000)
    assert len(tail) == 1000 and tail.endswith("line 4999\n")


async def test_environment_is_minimal_plus_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_FROM_PARENT", "leak")
    script = "import os, sys\nprint(os.environ.get('SECRET_FROM_PARENT'), os.environ.get('GIVEN'), file=sys.stderr, flush=True)"
    process = StdioServerProcess(sys.executable, ["-c", script], env={"GIVEN": "yes"})
    async with process.connect() as (read, _):
        with anyio.fail_after(20):
            async for _ in read:
                pass
    assert process.stderr_tail().strip() == "None yes"


async def test_toy_server_round_trip_over_the_transport() -> None:
    toy = python_server([str(TOY_SERVER), "--name", "t"])
    process = StdioServerProcess(toy["command"], toy["args"])
    async with process.connect() as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(30):
            await session.initialize()
            result = await session.call_tool("big", {"size": 2_000_000})
    assert len(result.content[0].text) == 2_000_000
