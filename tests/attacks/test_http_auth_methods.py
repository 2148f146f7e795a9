"""Every HTTP method meets the same checks: the bearer token and the Host/Origin (DNS-rebinding) checks
apply to POST, to GET (the server-to-client stream) and to DELETE (ending a session), whether the request
names no session, an unknown one or a live one. A check that only looked at POST, or that ran after the
session lookup, would let a browser page or an unauthenticated peer reach the other methods.

`Origin: null` is what sandboxed iframes, `file://` and `data:` pages send: it is never a trusted origin.
Each case is a raw HTTP request against a real server on 127.0.0.1; nothing here depends on the wording of
an answer, only on its status.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

import server_fork
from http_harness import REPO, HttpServer, server_command, server_env

pytestmark = pytest.mark.timeout(120)

TOKEN = "attack-suite-" + "k" * 40
TOKEN_ENV = {"CT_ATTACK_TOKEN": TOKEN}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
METHODS = ["POST", "GET", "DELETE"]
SESSIONS = ["no-session", "unknown-session", "live-session"]
BAD_ORIGINS = [
    "null",
    "http://evil.example",
    "https://127.0.0.1.evil.example",
    "http://localhost.evil.example:8080",
    "file://",
]
BAD_HOSTS = ["evil.example", "evil.example:80", "127.0.0.1.evil.example:80"]
INIT_BODY = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("auth") / "root"
    root.mkdir()
    with HttpServer.start([root], "--auth-token-env", "CT_ATTACK_TOKEN", env=TOKEN_ENV, forked=True) as server:
        yield server


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """The default configuration: loopback, no token; only the Host/Origin checks stand between a browser
    page and the tools."""
    root = tmp_path_factory.mktemp("open") / "root"
    root.mkdir()
    with HttpServer.start([root], forked=True) as server:
        yield server


@pytest.fixture(scope="module")
def stateless_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("stateless") / "root"
    root.mkdir()
    with HttpServer.start([root], "--stateless", forked=True) as server:
        yield server


def plain_client() -> httpx2.Client:
    """A client of its own (a fresh connection) for plain HTTP to 127.0.0.1: `verify=False` spares the TLS
    context it would never use, 50 ms of CPU a client, hundreds of clients here."""
    return httpx2.Client(timeout=10, trust_env=False, verify=False)


def open_session(url: str, headers: dict[str, str] | None = None) -> str:
    """Initialize a session over raw HTTP and return its id."""
    with plain_client() as http:
        response = http.post(url, headers={**MCP_HEADERS, **(headers or {})}, content=json.dumps(INIT_BODY))
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def send(url: str, method: str, headers: dict[str, str]) -> httpx2.Response:
    """One request; for a GET that opens a stream only the status line and headers are read."""
    body = json.dumps(INIT_BODY) if method == "POST" else None
    with plain_client() as http:
        with http.stream(method, url, headers={**MCP_HEADERS, **headers}, content=body) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
            return response


def session_headers(server: HttpServer, session: str, auth: dict[str, str]) -> dict[str, str]:
    if session == "no-session":
        return {}
    if session == "unknown-session":
        return {"Mcp-Session-Id": "0" * 32}
    return {"Mcp-Session-Id": open_session(server.url, auth)}


# -- bearer token -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "credentials",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"}],
    ids=["none", "wrong", "basic", "empty"],
)
def test_every_method_needs_the_token(token_server: HttpServer, method: str, session: str, credentials: dict) -> None:
    headers = {**session_headers(token_server, session, AUTH), **credentials}
    response = send(token_server.url, method, headers)
    assert response.status_code == 401, (method, session, response.status_code)
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("method", METHODS)
def test_token_holder_reaches_every_method(token_server: HttpServer, method: str) -> None:
    """The control: the same requests with the token are served (so the 401s above are the check, not a
    broken request)."""
    headers = {**AUTH, **session_headers(token_server, "live-session", AUTH)}
    assert send(token_server.url, method, headers).status_code == 200


# -- Host and Origin --------------------------------------------------------------------------------------


@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("origin", BAD_ORIGINS)
def test_every_method_refuses_a_foreign_origin(open_server: HttpServer, method: str, session: str, origin: str) -> None:
    headers = {**session_headers(open_server, session, {}), "Origin": origin}
    response = send(open_server.url, method, headers)
    assert response.status_code == 403, (method, session, origin, response.status_code)


@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("host", BAD_HOSTS)
def test_every_method_refuses_a_foreign_host(open_server: HttpServer, method: str, session: str, host: str) -> None:
    headers = {**session_headers(open_server, session, {}), "Host": host}
    response = send(open_server.url, method, headers)
    assert response.status_code == 421, (method, session, host, response.status_code)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("origin", ["null", "http://evil.example"])
def test_the_token_does_not_excuse_a_foreign_origin(token_server: HttpServer, method: str, origin: str) -> None:
    """A page that somehow holds the token still cannot call from a foreign origin."""
    for session in SESSIONS:
        headers = {**AUTH, **session_headers(token_server, session, AUTH), "Origin": origin}
        assert send(token_server.url, method, headers).status_code == 403, (method, session, origin)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("origin", ["null", "http://evil.example"])
def test_stateless_every_method_refuses_a_foreign_origin(stateless_server: HttpServer, method: str, origin: str) -> None:
    assert send(stateless_server.url, method, {"Origin": origin}).status_code == 403
    assert send(stateless_server.url, method, {"Host": "evil.example"}).status_code == 421


@pytest.mark.parametrize("method", METHODS)
def test_2026_requests_meet_the_same_checks(open_server: HttpServer, method: str) -> None:
    """Requests in the 2026-07-28 era (no session, version in a header) take another path in the SDK."""
    era = {"MCP-Protocol-Version": "2026-07-28"}
    assert send(open_server.url, method, {**era, "Origin": "null"}).status_code == 403
    assert send(open_server.url, method, {**era, "Host": "evil.example"}).status_code == 421


@pytest.mark.parametrize("method", METHODS)
def test_a_loopback_origin_is_served(open_server: HttpServer, method: str) -> None:
    """The control for the origin cases: a page on a loopback origin (the operator's own tooling) is served."""
    headers = {**session_headers(open_server, "live-session", {}), "Origin": "http://localhost:1234"}
    assert send(open_server.url, method, headers).status_code == 200


def test_other_paths_are_guarded_too(open_server: HttpServer, token_server: HttpServer) -> None:
    """A request for any other path meets the same checks before it learns the path does not exist."""
    other = open_server.url.rsplit("/", 1)[0] + "/anything"
    assert send(other, "GET", {"Origin": "null"}).status_code == 403
    assert send(token_server.url.rsplit("/", 1)[0] + "/anything", "GET", {}).status_code == 401


def test_refusals_close_the_connection(token_server: HttpServer) -> None:
    """A refused request does not keep its connection: an unauthenticated peer cannot park keep-alive
    connections on the server."""
    for headers in ({}, {**AUTH, "Origin": "null"}, {**AUTH, "Host": "evil.example"}):
        response = send(token_server.url, "GET", headers)
        assert response.status_code in (401, 403, 421)
        assert response.headers.get("connection", "").lower() == "close", (headers, dict(response.headers))


def test_allowing_origin_null_is_refused_at_start(tmp_path: Path) -> None:
    """`--allowed-origin null` would admit every web page (any page can open a sandboxed iframe): the
    server refuses to start with it and says why."""
    (tmp_path / "root").mkdir()
    done = subprocess.run(
        server_fork.command(server_command([tmp_path / "root"], "--allowed-origin", "null")[1:], server_env()),
        capture_output=True,
        text=True,
        env=server_env(),
        cwd=str(REPO),
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert "--allowed-origin null" in done.stderr
