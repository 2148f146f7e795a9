"""An OAuth authorization server and OAuth-protected MCP servers, on 127.0.0.1, for the client tests.

Built from the SDK's server-side auth pieces: ``create_auth_routes`` (metadata, ``/authorize``,
``/token`` with PKCE verification, ``/register``, ``/revoke``) over an in-memory provider, and
the low-level ``Server.streamable_http_app(auth=..., token_verifier=...)``, which serves RFC 9728
metadata and answers 401 with a ``WWW-Authenticate`` challenge.

Servers (ports chosen here; one JSON line on stdout gives the URLs once all listen):

* ``as``: the authorization server. ``/authorize`` approves at once and redirects (the test's
  "browser" just follows redirects). Test controls: ``POST /test/reset`` (clear the log),
  ``GET /test/log``, ``POST /test/lifetime?seconds=N`` (lifetime of new access tokens),
  ``POST /test/revoke-all``.
* ``one`` and ``two``: MCP servers at ``/mcp`` that accept only tokens issued for themselves
  (``validate_token_resource``) with scope ``read``. ``one``'s ``admin`` tool wants ``write``
  too: calling it with a ``read`` token gets 403 ``insufficient_scope`` (step-up).
* ``mismatch``: its metadata names another resource (``/elsewhere``) than the one it serves.
* ``lost``: names an authorization server whose metadata does not exist.
"""

import json
import secrets
import socket
import sys
import time
from collections import deque
from typing import Any

import anyio
import mcp.types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, AuthorizationCode, AuthorizationParams, RefreshToken, construct_redirect_uri
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SCOPES = ["read", "write"]
LOG: deque[dict[str, Any]] = deque(maxlen=2000)


def log(event: str, **fields: Any) -> None:
    LOG.append({"event": event, **fields})


class Provider:
    """An authorization server that approves every request and binds tokens to the resource asked for."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.lifetime = 3600

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        requested = client_info.scope
        client_info.scope = " ".join(SCOPES)  # RFC 7591 lets the server widen what it grants later
        self.clients[client_info.client_id] = client_info
        log("register", client_id=client_info.client_id, scope=requested, auth_method=client_info.token_endpoint_auth_method,
            redirect_uris=[str(u) for u in client_info.redirect_uris or []])  # fmt: skip

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or ["read"], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
        )  # fmt: skip
        log("authorize", client_id=client.client_id, scopes=params.scopes, resource=params.resource)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(code.code, None)
        log("token", grant="authorization_code", resource=code.resource, scopes=code.scopes)
        return self._issue(client.client_id, code.scopes, code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        log("token", grant="refresh_token", resource=refresh_token.resource, scopes=scopes)
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        expires_at = int(time.time()) + self.lifetime
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes, expires_at=expires_at, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(access_token=access, expires_in=self.lifetime, scope=" ".join(scopes), refresh_token=refresh)


PROVIDER = Provider()


class Verifier:
    """The MCP servers' token check: the authorization server's own records (same process)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await PROVIDER.load_access_token(token)
        log("presented", server=self.name, known=found is not None, resource=found.resource if found else None)
        return found


def mcp_server(name: str) -> Server:
    async def on_list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in ("whoami", "admin")]
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        token = get_access_token()
        text = json.dumps({"server": name, "tool": params.name, "scopes": token.scopes if token else None})
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(name, version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


class StepUp:
    """ASGI middleware: ``tools/call`` of ``admin`` needs scope ``write`` (403 ``insufficient_scope`` otherwise)."""

    def __init__(self, app: Any, metadata_url: str) -> None:
        self.app = app
        self.metadata_url = metadata_url

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        body, messages = b"", []
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if b'"admin"' in body and b"tools/call" in body and not await self._has_write(scope):
            challenge = f'Bearer error="insufficient_scope", scope="read write", resource_metadata="{self.metadata_url}"'
            await send({"type": "http.response.start", "status": 403, "headers": [(b"www-authenticate", challenge.encode()),
                                                                                   (b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b'{"error": "insufficient_scope"}'})
            return

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _has_write(self, scope: dict) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = await PROVIDER.load_access_token(header.removeprefix("Bearer "))
        return token is not None and "write" in token.scopes


def control_routes() -> list[Route]:
    async def reset(request: Request) -> JSONResponse:
        LOG.clear()
        PROVIDER.lifetime = 3600
        return JSONResponse({})

    async def show(request: Request) -> JSONResponse:
        return JSONResponse(list(LOG))

    async def lifetime(request: Request) -> JSONResponse:
        PROVIDER.lifetime = int(request.query_params["seconds"])
        return JSONResponse({})

    async def revoke_all(request: Request) -> JSONResponse:
        PROVIDER.access.clear()
        PROVIDER.refresh.clear()
        return JSONResponse({})

    return [Route("/test/reset", reset, methods=["POST"]), Route("/test/log", show), Route("/test/lifetime", lifetime, methods=["POST"]),
            Route("/test/revoke-all", revoke_all, methods=["POST"])]  # fmt: skip


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def resource_app(name: str, base: str, issuer: str, resource_path: str = "/mcp") -> Any:
    settings = AuthSettings(
        issuer_url=AnyHttpUrl(issuer), resource_server_url=AnyHttpUrl(base + resource_path),
        required_scopes=["read"], validate_token_resource=True,
    )  # fmt: skip
    app = mcp_server(name).streamable_http_app(
        stateless_http=True, json_response=True, host="127.0.0.1", auth=settings, token_verifier=Verifier(name)
    )
    return StepUp(app, f"{base}/.well-known/oauth-protected-resource{resource_path}")


async def main() -> None:
    names = ["as", "one", "two", "mismatch", "lost"]
    sockets = {name: listening_socket() for name in names}
    urls = {name: f"http://127.0.0.1:{sock.getsockname()[1]}" for name, sock in sockets.items()}
    issuer = urls["as"]
    routes = create_auth_routes(
        PROVIDER, AnyHttpUrl(issuer),
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=SCOPES, default_scopes=["read"]),
        revocation_options=RevocationOptions(enabled=True),
    )  # fmt: skip
    apps = {
        "as": Starlette(routes=routes + control_routes()),
        "one": resource_app("one", urls["one"], issuer),
        "two": resource_app("two", urls["two"], issuer),
        "mismatch": resource_app("mismatch", urls["mismatch"], issuer, resource_path="/elsewhere"),
        "lost": resource_app("lost", urls["lost"], issuer + "/nowhere"),
    }
    servers = {n: uvicorn.Server(uvicorn.Config(apps[n], log_level="warning", lifespan="on")) for n in names}
    async with anyio.create_task_group() as group:
        for name in names:
            group.start_soon(servers[name].serve, [sockets[name]])
        while not all(s.started for s in servers.values()):
            await anyio.sleep(0.02)
        print(json.dumps(urls), flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
