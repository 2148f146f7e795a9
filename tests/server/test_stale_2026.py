"""The stale-write guard without sessions: stateless HTTP (`legacy` on a `--stateless` server) and
2026-07-28 requests (`auto`, on that server and on one with sessions), through the official MCP client and
two real HTTP servers shared by the module.

The record is kept per client, named by what each request says of its sender: an edit from a stale read is
refused and the client's own edits pass, as in a session; a client that differs in its credential, its
User-Agent or its client info has a record of its own, so what one client read or wrote never passes for
another's read. The bounds (how many clients, how long idle) are checked on the record itself.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from http_harness import HttpServer
from support import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BODY = "".join(f"line {i}\n" for i in range(1, 40))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def stateless(tmp_path_factory: pytest.TempPathFactory):
    """A `--stateless` server: no request of it has a session, in either era."""
    root = tmp_path_factory.mktemp("stale2026")
    server = HttpServer.start([root], "--stateless", "--structured-content", forked=True)
    yield server, root
    assert server.stop() == 0


@pytest.fixture(scope="module")
def stateful(tmp_path_factory: pytest.TempPathFactory):
    """A server with sessions: its 2026-07-28 requests still have none."""
    root = tmp_path_factory.mktemp("stateful2026")
    server = HttpServer.start([root], "--structured-content", forked=True)
    yield server, root
    assert server.stop() == 0


def _append_elsewhere(path: Path, text: str) -> None:
    """Append from another process, as an editor or a build step would."""
    subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'a').write({text!r})"], check=True)


def _kind(result: types.CallToolResult) -> str | None:
    return (result.structured_content or {}).get("error", {}).get("kind")


async def _read(client: Client, path: Path) -> None:
    result = await client.call_tool("read_file", {"absolute_path": str(path)})
    assert not result.is_error, text_of(result)


async def _replace(client: Client, path: Path, old: str, new: str) -> types.CallToolResult:
    return await client.call_tool("replace", {"file_path": str(path), "old_string": old, "new_string": new})


def _named(name: str) -> dict:
    return {"client_info": types.Implementation(name=name, version="1.0")}


@asynccontextmanager
async def _client(url: str, mode: str, headers: dict[str, str] | None = None, **client_kwargs: Any):
    """The official client over streamable HTTP, sending `headers` with every request."""
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **client_kwargs) as client:
            yield client


@pytest.mark.parametrize(
    ("served", "mode"), [("stateless", "legacy"), ("stateless", "auto"), ("stateful", "auto")],
    ids=["stateless-2025", "stateless-2026", "stateful-server-2026"],
)
async def test_a_stale_edit_is_refused_and_own_edits_pass(
    served: str, mode: str, request: pytest.FixtureRequest
) -> None:
    http, root = request.getfixturevalue(served)
    target = root / f"guarded-{request.node.callspec.id}.py"
    target.write_text(BODY)
    async with _client(http.url, mode) as client:
        await _read(client, target)
        _append_elsewhere(target, "added by someone else\n")
        result = await _replace(client, target, "line 5\n", "line five\n")
        assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)
        assert target.read_text() == BODY + "added by someone else\n"
        await _read(client, target)
        for old, new in [("line 5\n", "line five\n"), ("line 6\n", "line six\n")]:  # its own edits: no re-read
            result = await _replace(client, target, old, new)
            assert not result.is_error, text_of(result)
    expected = BODY.replace("line 5\n", "line five\n").replace("line 6\n", "line six\n")
    assert target.read_text() == expected + "added by someone else\n"


@pytest.mark.parametrize(
    ("mode", "first", "second"),
    [
        ("auto", _named("agent-a"), _named("agent-b")),
        ("legacy", {"headers": {"Authorization": "Bearer a"}}, {"headers": {"Authorization": "Bearer b"}}),
        ("legacy", {"headers": {"User-Agent": "host-a/1.0"}}, {"headers": {"User-Agent": "host-b/2.0"}}),
    ],
    ids=["2026-client-info", "stateless-credential", "stateless-user-agent"],
)
async def test_no_client_vouches_for_anothers_write(
    stateless, mode: str, first: dict, second: dict, request: pytest.FixtureRequest
) -> None:
    """A reads; B reads and edits (B's record now holds the new content); A's edit from its old read is
    refused all the same. And B, which never read the second file, may edit it after A read it and it changed."""
    http, root = stateless
    case = request.node.callspec.id
    target, other = root / f"shared-{case}.py", root / f"unread-{case}.py"
    target.write_text(BODY)
    other.write_text(BODY)
    async with _client(http.url, mode, **first) as a, _client(http.url, mode, **second) as b:
        await _read(a, target)
        await _read(b, target)
        result = await _replace(b, target, "line 2\n", "line two\n")
        assert not result.is_error, text_of(result)
        result = await _replace(a, target, "line 3\n", "line three\n")
        assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)
        assert target.read_text() == BODY.replace("line 2\n", "line two\n")

        await _read(a, other)
        _append_elsewhere(other, "x\n")
        result = await _replace(b, other, "line 4\n", "four\n")
        assert not result.is_error, text_of(result)


def test_the_record_is_bounded_in_clients_and_idle_time() -> None:
    from coretools.server.sessionless import SessionlessViews

    now = [0.0]
    record = SessionlessViews(max_clients=3, idle=600.0, clock=lambda: now[0])
    kept = record.views(b"a")
    for name in (b"b", b"c"):
        record.views(name)
    assert record.views(b"a") is kept  # used again: now the most recent
    record.views(b"d")
    assert len(record) == 3 and record.views(b"a") is kept  # b, the least recently active, was dropped
    now[0] += 601
    fresh = record.views(b"a")
    assert fresh is not kept and len(record) == 1  # idle past the timeout: every client forgotten
    never = SessionlessViews(max_clients=0, idle=0.0, clock=lambda: now[0])
    for i in range(1000):
        never.views(str(i).encode())
    assert len(never) == 1000  # no count limit asked for; idle time still ends them
    now[0] += 24 * 3600 + 1
    never.views(b"x")
    assert len(never) == 1
