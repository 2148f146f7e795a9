"""Sessions are a bounded resource: a cap on how many are open at once and an idle expiry for the ones a
client abandoned (killed without a DELETE).

At the cap, a new session takes the place of the least recently active idle one (tests/attacks/
test_fairness.py shows that, and the refusal when all are busy); a DELETE frees a place at once. A session
nobody uses expires after `--session-idle-timeout`, and its slot is free again. A live official client
keeps its GET stream open, which keeps its session alive however short the idle timeout.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import types

from http_harness import HttpServer, http_client

pytestmark = pytest.mark.timeout(120)

INIT_BODY = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
LIST_BODY = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = {"MCP-Protocol-Version": "2025-11-25"}


def initialize(http: httpx2.Client, url: str) -> httpx2.Response:
    return http.post(url, headers=MCP_HEADERS, content=json.dumps(INIT_BODY))


def use(http: httpx2.Client, url: str, session: str) -> int:
    headers = {**MCP_HEADERS, **VERSION, "Mcp-Session-Id": session}
    return http.post(url, headers=headers, content=json.dumps(LIST_BODY)).status_code


def refusal_message(response: httpx2.Response) -> str:
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "error" in body, body
    return body["error"]["message"]


def test_a_delete_frees_a_place_and_ends_no_other_session(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with HttpServer.start([tmp_path / "root"], "--max-sessions", "3", forked=True) as server, httpx2.Client(timeout=10, trust_env=False) as http:
        sessions = []
        for _ in range(3):
            response = initialize(http, server.url)
            assert response.status_code == 200, response.text
            sessions.append(response.headers["mcp-session-id"])
        assert all(use(http, server.url, s) == 200 for s in sessions)
        ended = http.delete(server.url, headers={**VERSION, "Mcp-Session-Id": sessions[0]})
        assert ended.status_code == 200
        assert use(http, server.url, sessions[0]) == 404
        new = initialize(http, server.url)
        assert new.status_code == 200, "a DELETE frees a place"
        alive = [*sessions[1:], new.headers["mcp-session-id"]]
        assert all(use(http, server.url, s) == 200 for s in alive), "the freed place was used: nothing ended"


def test_default_session_cap_is_bounded(tmp_path: Path) -> None:
    """Without options the server still holds a few hundred sessions, not ten thousand: opening more ends
    the least recently active."""
    (tmp_path / "root").mkdir()
    with HttpServer.start([tmp_path / "root"], forked=True) as server, httpx2.Client(timeout=10, trust_env=False) as http:
        sessions = []
        for _ in range(300):
            response = initialize(http, server.url)
            assert response.status_code == 200, response.text
            sessions.append(response.headers["mcp-session-id"])
        alive = [s for s in sessions if use(http, server.url, s) == 200]
        assert 16 <= len(alive) < 300, len(alive)
        assert alive == sessions[-len(alive) :], "the sessions ended are the least recently active ones"


def test_idle_session_expires_and_frees_its_slot(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    flags = ("--max-sessions", "1", "--session-idle-timeout", "1")
    with HttpServer.start([tmp_path / "root"], *flags, forked=True) as server, httpx2.Client(timeout=10, trust_env=False) as http:
        first = initialize(http, server.url)
        assert first.status_code == 200
        session = first.headers["mcp-session-id"]
        deadline = time.monotonic() + 10
        while use(http, server.url, session) == 200 and time.monotonic() < deadline:
            time.sleep(1.5)  # each use restarts the idle clock; this gap is longer than the timeout
        assert use(http, server.url, session) == 404, "the idle session should have expired"
        assert initialize(http, server.url).status_code == 200, "its slot is free again"


@pytest.mark.anyio
async def test_live_client_outlives_a_short_idle_timeout(tmp_path: Path) -> None:
    """The official client holds a GET stream open, so its session never counts as idle."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "f.txt").write_text("still here\n")
    with HttpServer.start([root], "--session-idle-timeout", "1", forked=True) as server:
        async with http_client(server.url, "legacy") as client:
            await anyio.sleep(3)
            result = await client.call_tool("read_file", {"absolute_path": str(root / "f.txt")})
            assert "still here" in "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
