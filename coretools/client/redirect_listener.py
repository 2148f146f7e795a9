"""The loopback listener that receives the browser's redirect at the end of an OAuth sign-in.

It listens on the redirect URI's loopback address and port only while a sign-in is waiting,
answers one request at a time (each must arrive within a few seconds and fit in
:data:`REQUEST_LIMIT` bytes), and ends with the first request to the redirect path that carries
a ``code`` or an ``error``. Other requests (a browser's ``/favicon.ico``, a stray path) get 404
and are otherwise ignored. The state check and the PKCE verifier belong to the SDK's flow.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

REQUEST_LIMIT = 16 * 1024
READ_TIMEOUT = 10.0

_DONE_PAGE = "<!doctype html><title>Signed in</title><p>Signed in to {what}. You can close this tab."
_FAILED_PAGE = "<!doctype html><title>Sign-in failed</title><p>Sign-in failed: {what}"


class RedirectListener:
    """``async with RedirectListener("127.0.0.1", port, "/oauth/callback") as listener:
    result = await listener.result()``."""

    def __init__(self, host: str, port: int, path: str, *, label: str = "the MCP server") -> None:
        self.host = host
        self.port = port
        self.path = path or "/"
        self.label = label
        self._listener: anyio.abc.SocketListener | None = None

    async def __aenter__(self) -> RedirectListener:
        host = "127.0.0.1" if self.host == "localhost" else self.host.strip("[]")
        try:
            multi = await anyio.create_tcp_listener(local_host=host, local_port=self.port)
        except OSError as exc:
            raise OAuthFlowError(
                f"cannot listen on {self.host}:{self.port} for the sign-in redirect ({exc.strerror or exc})"
            ) from exc
        self._listener = multi.listeners[0]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._listener is not None:
            await self._listener.aclose()
            self._listener = None

    async def result(self) -> AuthorizationCodeResult:
        """Wait for the redirect; an ``error`` from the authorization server raises ``OAuthFlowError``."""
        assert self._listener is not None, "use the listener as an async context manager"
        while True:
            stream = await self._listener.accept()
            async with stream:
                outcome = await self._answer(stream)
            if outcome is not None:
                if isinstance(outcome, OAuthFlowError):
                    raise outcome
                return outcome

    async def _answer(self, stream: anyio.abc.SocketStream) -> AuthorizationCodeResult | OAuthFlowError | None:
        target = await _request_target(stream)
        if target is None:
            return None
        parsed = urlsplit(target)
        if parsed.path != self.path:
            await _respond(stream, 404, "<!doctype html><title>Not found</title>")
            return None
        query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
        if "error" in query:
            reason = query["error"] + (f": {query['error_description']}" if query.get("error_description") else "")
            await _respond(stream, 400, _FAILED_PAGE.format(what=html.escape(reason)))
            return OAuthFlowError(f"the authorization server refused the sign-in ({reason[:300]})")
        if not query.get("code"):
            await _respond(stream, 400, _FAILED_PAGE.format(what="the redirect carried no authorization code"))
            return None
        await _respond(stream, 200, _DONE_PAGE.format(what=html.escape(self.label)))
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


async def _request_target(stream: anyio.abc.SocketStream) -> str | None:
    """The target of a ``GET`` request line, or ``None`` for anything else (or nothing in time)."""
    data = b""
    with anyio.move_on_after(READ_TIMEOUT):
        while b"\r\n\r\n" not in data and len(data) <= REQUEST_LIMIT:
            try:
                data += await stream.receive(4096)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                break
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET" or len(data) > REQUEST_LIMIT:
        return None
    return parts[1]


async def _respond(stream: anyio.abc.SocketStream, status: int, body: str) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    payload = body.encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(payload)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    try:
        await stream.send(head.encode() + payload)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
