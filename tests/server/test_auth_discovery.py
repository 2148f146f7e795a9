"""Auth discovery over real HTTP: a server that takes a static bearer token publishes no OAuth metadata, so
the well-known OAuth paths answer a plain 404 (a 401 there sends MCP clients into an OAuth flow that cannot
work), while the MCP endpoint keeps its 401 and `WWW-Authenticate: Bearer` challenge. A bad
`MCP-Protocol-Version` header gets a 400 naming the versions the server speaks.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from http_harness import HttpServer, http_client

pytestmark = pytest.mark.timeout(60)

TOKEN = "discovery-" + "t" * 40
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT_BODY = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
LIST_BODY = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
WELL_KNOWN = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=["stateful", "stateless"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("discovery-root")
    flags = ["--auth-token-env", "CORETOOLS_DISCOVERY_TOKEN"]
    flags += ["--stateless"] if request.param == "stateless" else []
    server = HttpServer.start([root], *flags, env={"CORETOOLS_DISCOVERY_TOKEN": TOKEN}, forked=True)
    yield server
    assert server.stop() == 0


def _origin(url: str) -> str:
    return url.rsplit("/", 1)[0]


def _http() -> httpx2.Client:
    return httpx2.Client(timeout=10, trust_env=False)


@pytest.mark.parametrize("path", WELL_KNOWN)
@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("auth", [None, "Bearer wrong", f"Bearer {TOKEN}"])
def test_well_known_paths_are_plain_404(server: HttpServer, path: str, method: str, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    with _http() as http:
        response = http.request(method, _origin(server.url) + path, headers=headers)
    assert response.status_code == 404
    assert "www-authenticate" not in response.headers
    assert response.headers["content-type"].startswith("text/plain")


def test_well_known_still_checks_host(server: HttpServer) -> None:
    with _http() as http:
        response = http.get(_origin(server.url) + WELL_KNOWN[0], headers={"Host": "evil.example"})
    assert response.status_code == 421


@pytest.mark.parametrize("auth", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer"])
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_mcp_endpoint_without_the_token_is_401(server: HttpServer, auth: str | None, method: str) -> None:
    headers = {**MCP_HEADERS, **({"Authorization": auth} if auth else {})}
    with _http() as http:
        response = http.request(method, server.url, headers=headers, content=json.dumps(INIT_BODY))
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert response.json()["error"]["message"]


def test_unknown_path_without_the_token_is_401(server: HttpServer) -> None:
    with _http() as http:
        response = http.get(_origin(server.url) + "/elsewhere")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")


@pytest.mark.parametrize("version", ["1999-01-01", "garbage", "2025-11-26", ""])
@pytest.mark.parametrize("body", [INIT_BODY, LIST_BODY], ids=["initialize", "tools-list"])
def test_bad_protocol_version_is_400_naming_the_supported_ones(server: HttpServer, version: str, body: dict) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": version}
    with _http() as http:
        response = http.post(server.url, headers=headers, content=json.dumps(body))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == UNSUPPORTED_PROTOCOL_VERSION
    for supported in (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS):
        assert supported in error["message"]
    assert error["data"]["supported"] == [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
    assert "_meta" not in error["message"] and "envelope" not in error["message"]


def test_bad_protocol_version_needs_the_token_first(server: HttpServer) -> None:
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "1999-01-01"}
    with _http() as http:
        assert http.post(server.url, headers=headers, content=json.dumps(INIT_BODY)).status_code == 401


def test_a_long_bad_version_is_not_echoed_whole(server: HttpServer) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "9" * 2000}
    with _http() as http:
        response = http.post(server.url, headers=headers, content=json.dumps(INIT_BODY))
    assert response.status_code == 400
    assert len(response.text) < 1000


@pytest.mark.anyio
async def test_sdk_clients_still_connect_with_the_token(server: HttpServer, mode: str) -> None:
    with anyio.fail_after(30):
        async with http_client(server.url, mode, token=TOKEN) as client:
            assert (await client.list_tools()).tools
