"""How much the client bridge costs on large tool results, against a baseline in the same run.

Run: ``uv run python benchmarks/bench_client.py [--repeat N] [--sizes 1,10]`` (sizes in MB).

Every path talks to the same real stdio MCP server (``tests/client/servers/toy_server.py``,
tool ``big``: a text result of N bytes) and times one ``tools/call`` round trip, median over
``--repeat`` calls on a warm connection:

* baseline: a plain line reader: hand-written JSON-RPC over the pipe, ``readline`` plus
  ``json.loads``; the floor set by the server and the pipe;
* SDK: ``mcp.client.stdio.stdio_client`` + ``ClientSession.call_tool``;
* ours: ``coretools.client.stdio.StdioServerProcess`` + ``ClientSession.call_tool``;
* bridge: ``Bridge.call`` (name lookup, argument coercion, per-server timeout, result
  conversion), and separately the ``json.dumps`` of the ``functionResponse`` turn that any
  REST request body containing the result has to pay.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from coretools.client import Bridge, function_response_content, parse_config  # noqa: E402
from coretools.client.stdio import StdioServerProcess  # noqa: E402

TOY = REPO / "tests" / "client" / "servers" / "toy_server.py"
SERVER = [sys.executable, str(TOY), "--name", "bench"]


def measure_baseline(size: int, repeat: int) -> list[float]:
    process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=1 << 20)
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict) -> None:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})  # fmt: skip
        json.loads(process.stdout.readline())
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        times = []
        for i in range(1, repeat + 1):
            start = time.perf_counter()
            send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "big", "arguments": {"size": size}}})
            reply = json.loads(process.stdout.readline())
            times.append(time.perf_counter() - start)
            assert len(reply["result"]["content"][0]["text"]) == size
        return times
    finally:
        process.stdin.close()
        process.wait(10)


async def _time_calls(call: Callable[[], Awaitable[int]], size: int, repeat: int) -> list[float]:
    assert await call() == size  # warm-up, also checks the result
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        got = await call()
        times.append(time.perf_counter() - start)
        assert got == size
    return times


async def measure_session(transport, size: int, repeat: int) -> list[float]:
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()

        async def call() -> int:
            result = await session.call_tool("big", {"size": size})
            return len(result.content[0].text)

        return await _time_calls(call, size, repeat)


async def measure_bridge(size: int, repeat: int) -> tuple[list[float], list[float]]:
    """``Bridge.call`` times, and the times to serialise its ``functionResponse`` turn."""
    config = parse_config({"mcpServers": {"bench": {"command": SERVER[0], "args": SERVER[1:]}}})
    encode_times: list[float] = []
    async with Bridge(config) as bridge:

        async def call() -> int:
            outcome = await bridge.call("big", {"size": size}, call_id="c1")
            start = time.perf_counter()
            body = json.dumps(function_response_content([outcome]))
            encode_times.append(time.perf_counter() - start)
            return len(outcome.output) if len(body) > size else -1

        call_times = await _time_calls(call, size, repeat)
    return call_times, encode_times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default="1,10", help="result sizes in MB, comma-separated")
    opts = parser.parse_args()
    rows = []
    for mb in (float(s) for s in opts.sizes.split(",")):
        size = int(mb * 1_000_000)
        baseline = statistics.median(measure_baseline(size, opts.repeat))
        paths = [
            ("baseline: plain line reader", baseline),
            ("SDK stdio_client + ClientSession", statistics.median(anyio.run(measure_session, stdio_client(StdioServerParameters(command=SERVER[0], args=SERVER[1:])), size, opts.repeat))),
            ("StdioServerProcess + ClientSession", statistics.median(anyio.run(measure_session, StdioServerProcess(SERVER[0], SERVER[1:]).connect(), size, opts.repeat))),
        ]  # fmt: skip
        call_times, encode_times = anyio.run(measure_bridge, size, opts.repeat)
        paths.append(("Bridge.call (coercion, timeout, convert)", statistics.median(call_times) - statistics.median(encode_times)))
        paths.append(("  + json.dumps of the functionResponse", statistics.median(encode_times)))
        for name, seconds in paths:
            rows.append((f"{mb:g} MB", name, seconds * 1000, seconds / baseline))
    print(f"one tools/call round trip, median of {opts.repeat} warm calls (Python {sys.version.split()[0]})")
    print(f"{'result':>7}  {'path':<42} {'ms':>8}  {'x baseline':>10}")
    for size, name, ms, ratio in rows:
        print(f"{size:>7}  {name:<42} {ms:8.1f}  {ratio:10.2f}")


if __name__ == "__main__":
    main()
