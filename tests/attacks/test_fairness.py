"""One client cannot starve the others, through a real HTTP server.

Call slots: a client holds all of the server's slots but an eighth however many sessions it opens, so
while client A saturates its share with long `sleep` commands, client B's quick call is answered at once. The
server tells clients apart by the peer's address: A connects from 127.0.0.2, B from 127.0.0.1. Both
protocol eras: 2025-era sessions, and 2026-07-28 requests, which have no session at all.

Sessions: at `--max-sessions`, sessions their clients abandoned (never DELETEd) make room for a new one,
the least recently active first; only when every session is busy is the new one refused, with
`Retry-After`, and it gets in once one of them is idle again.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from http_harness import HttpServer
from support import text_of

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]

A, B = "127.0.0.2", "127.0.0.1"
SLEEP = 12  # seconds each of A's commands holds its slot: before the fix, B waited until one ended
WORST = 3.0  # B's slowest answer allowed; it is well under a second when the slots are shared


@asynccontextmanager
async def client_from(source: str, url: str, mode: str) -> AsyncIterator[Client]:
    """An official MCP client whose connections leave from the local address `source`."""
    transport = httpx2.AsyncHTTPTransport(local_address=source)
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(transport=transport, timeout=timeout, trust_env=False) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


async def eventually(predicate, timeout: float = 30.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await anyio.sleep(0.05)
    return predicate()


async def test_a_client_saturating_its_share_leaves_room_for_another(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "root"
    started = root / "started"
    started.mkdir(parents=True)
    (root / "notes.txt").write_text("hello from B\n")
    # 8 slots, 2 per session: before the fix A's four sessions held all eight
    with HttpServer.start([root], "--max-calls", "8", "--max-session-calls", "2", forked=True) as server:
        latencies: list[float] = []
        async with AsyncExitStack() as stack:
            sessions = [await stack.enter_async_context(client_from(A, server.url, mode)) for _ in range(4)]

            async def hold(client: Client, i: int) -> None:
                command = f"touch {started}/{i}; sleep {SLEEP}"
                await client.call_tool("run_shell_command", {"command": command, "description": "hold a slot"})

            async with anyio.create_task_group() as tg:
                for i in range(16):
                    tg.start_soon(hold, sessions[i % 4], i)
                assert await eventually(lambda: len(list(started.iterdir())) >= 7), "A's commands did not start"
                await anyio.sleep(1.0)  # A's other calls have arrived and wait for a slot
                async with client_from(B, server.url, mode) as other:
                    for _ in range(5):
                        began = time.monotonic()
                        result = await other.call_tool("read_file", {"absolute_path": str(root / "notes.txt")})
                        latencies.append(time.monotonic() - began)
                        assert not result.is_error and "hello from B" in text_of(result), text_of(result)
                running = len(list(started.iterdir()))
                tg.cancel_scope.cancel()
    print(f"B's read_file while A saturates ({mode}): worst {max(latencies):.2f} s; A ran {running} at once")
    assert max(latencies) < WORST, latencies
    assert running == 7, f"A ran {running} commands at once, not all of the 8 slots but one"


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = {"MCP-Protocol-Version": "2025-11-25"}


async def open_session(http: httpx2.AsyncClient, url: str) -> httpx2.Response:
    return await http.post(url, headers=JSON_HEADERS, content=json.dumps(INIT))


async def ready(http: httpx2.AsyncClient, url: str, session: str) -> None:
    """Open `session` for calls, as a client does after the handshake."""
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**JSON_HEADERS, **VERSION, "Mcp-Session-Id": session}
    assert (await http.post(url, headers=headers, content=json.dumps(note))).status_code == 202


LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


async def use(http: httpx2.AsyncClient, url: str, session: str) -> int:
    headers = {**JSON_HEADERS, **VERSION, "Mcp-Session-Id": session}
    return (await http.post(url, headers=headers, content=json.dumps(LIST))).status_code


async def test_at_the_cap_the_least_recently_active_idle_session_makes_room(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with HttpServer.start([tmp_path / "root"], "--max-sessions", "4", forked=True) as server:
        async with httpx2.AsyncClient(timeout=10, trust_env=False) as http:
            sessions = []
            for _ in range(4):  # four clients open a session each and walk away without a DELETE
                response = await open_session(http, server.url)
                assert response.status_code == 200, response.text
                sessions.append(response.headers["mcp-session-id"])
            assert await use(http, server.url, sessions[0]) == 200  # the first is used again: the second is oldest
            stray = await http.post(server.url, headers={**JSON_HEADERS, **VERSION}, content=json.dumps(LIST))
            assert stray.status_code == 400 and "initialize" in stray.json()["error"]["message"], stray.text
            fifth = await open_session(http, server.url)
            assert fifth.status_code == 200, f"a new client was locked out: {fifth.status_code} {fifth.text}"
            assert await use(http, server.url, sessions[1]) == 404, "the least recently active session ended"
            alive = [sessions[0], *sessions[2:], fifth.headers["mcp-session-id"]]
            assert [await use(http, server.url, s) for s in alive] == [200] * 4


async def test_when_every_session_is_busy_a_new_one_waits_for_one_to_be_idle(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with HttpServer.start([root], "--max-sessions", "4", forked=True) as server:
        async with httpx2.AsyncClient(timeout=30, trust_env=False) as http:
            sessions = []
            for _ in range(4):
                response = await open_session(http, server.url)
                assert response.status_code == 200, response.text
                sessions.append(response.headers["mcp-session-id"])
                await ready(http, server.url, sessions[-1])
            async with AsyncExitStack() as calls:
                streams = []
                for i, session in enumerate(sessions):  # each has a call running; the last one's is short
                    seconds = 2 if i == 3 else 30
                    body = {
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "tools/call",
                        "params": {
                            "name": "run_shell_command",
                            "arguments": {"command": f"sleep {seconds}", "description": "stay busy"},
                        },
                    }
                    headers = {**JSON_HEADERS, **VERSION, "Mcp-Session-Id": session}
                    stream = http.stream("POST", server.url, headers=headers, content=json.dumps(body))
                    streams.append(await calls.enter_async_context(stream))
                    assert streams[-1].status_code == 200
                refused = await open_session(http, server.url)
                assert refused.status_code == 503, refused.text
                assert int(refused.headers["retry-after"]) > 0
                message = refused.json()["error"]["message"]
                assert "--max-sessions 4" in message and "busy" in message, message
                async for _ in streams[3].aiter_bytes():  # the short call ends: its session is idle
                    pass
                # The server counts the request done just after its last byte is read here: a refusal in
                # that moment changes nothing, so ask again for a few seconds.
                with anyio.move_on_after(5):
                    while (admitted := await open_session(http, server.url)).status_code == 503:
                        await anyio.sleep(0.05)
                assert admitted.status_code == 200, f"an idle session did not make room: {admitted.text}"
                assert await use(http, server.url, sessions[3]) == 404
                assert [await use(http, server.url, s) for s in sessions[:3]] == [200] * 3, "busy ones stay"
