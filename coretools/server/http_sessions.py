"""The session cap of stateful HTTP (`--max-sessions`): at the cap a new session takes the place of the
least recently active idle one, so sessions nobody will use again cannot lock new clients out.

Hosts often leave a session behind without the DELETE that ends it (a killed agent, a closed editor). The
idle timeout ends such a session eventually, but until then it holds its place, and a cap full of them
would refuse every new client for that long. So `SessionCap` counts, per session it saw opened, the
requests in flight (a call running, waiting for a slot or streaming its answer; an open GET stream): a
session with none is idle. A request that opens a session at the cap ends the idle session whose last
request finished longest ago, as its client would with a DELETE (its id then answers 404, and the MCP
spec has the client initialize again), and takes its place. Only when every session is busy is the new one
refused: HTTP 503 with `Retry-After` and a JSON-RPC error naming the limit.

A POST without a session id opens one only if it carries an `initialize` request; at the cap, one that
does not (a client sending calls without its session) ends nothing and is answered 400. 2026-07-28
requests, which have no sessions, pass through uncounted, as does every request naming a session id this
process did not open (the SDK answers those 404). The SDK keeps its own cap at the same number behind this
one; it is never reached first, since every session it holds passed through here.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from coretools.server.config import DEFAULT_MAX_MESSAGE_BYTES
from coretools.server.http_asgi import (
    buffer_body,
    header,
    json_messages,
    normal_path,
    request_path,
    send_json_error,
    send_too_large,
)

logger = logging.getLogger("coretools.http")

RETRY_AFTER_SECONDS = 10
NO_SESSION = (
    "Bad Request: this request names no session (no Mcp-Session-Id header) and is not an initialize "
    "request, the only one that opens a session. Send the session id the initialize response gave you, or "
    "initialize a new session first."
)


class SessionCap:
    """ASGI middleware in front of the SDK's stateful sessions: at most `max_sessions` open, the least
    recently active idle one ended to admit a new one. `stats` (a `http_guard.ConnectionStats`) counts the
    refusals; `max_body` bounds the body read, at the cap only, to see whether a request opens a session."""

    def __init__(
        self, app: Any, path: str, max_sessions: int, stats: Any = None, max_body: int = DEFAULT_MAX_MESSAGE_BYTES
    ) -> None:
        self.app = app
        self.path = normal_path(path)
        self.max_sessions = max_sessions
        self.max_body = max_body
        self._stats = stats
        self._busy: dict[str, int] = {}  # session id: requests in flight
        self._idle: OrderedDict[str, None] = OrderedDict()  # idle sessions, least recently active first
        self._opening = 0  # places held by requests that may open a session
        self.message = (
            f"Too many open sessions: this server allows {max_sessions} at once (--max-sessions {max_sessions}) "
            "and every one is busy, with a call running or a stream open (an idle one would have been ended to "
            f"make room). Retry in {RETRY_AFTER_SECONDS} s, or end sessions you no longer use (HTTP DELETE)."
        )

    def __len__(self) -> int:
        """Sessions open or being opened."""
        return len(self._busy) + len(self._idle) + self._opening

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or request_path(scope) != self.path:
            await self.app(scope, receive, send)
            return
        session = header(scope, b"mcp-session-id")
        if session is not None:
            await self._in_session(session.decode("latin-1"), scope, receive, send)
        elif scope.get("method") == "POST" and not _sessionless_era(scope):
            await self._open(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- requests of a session ----------------------------------------------------------------------------

    async def _in_session(self, session: str, scope: dict, receive: Any, send: Any) -> None:
        if session in self._idle:
            del self._idle[session]
            self._busy[session] = 1
        elif session in self._busy:
            self._busy[session] += 1
        else:
            await self.app(scope, receive, send)
            return
        ended = False

        async def watching_send(message: dict) -> None:
            nonlocal ended
            if message["type"] == "http.response.start":
                ended = message["status"] < 300 or message["status"] == 404
            await send(message)

        try:
            await self.app(scope, receive, watching_send if scope.get("method") == "DELETE" else send)
        finally:
            self._finished(session, ended)

    def _finished(self, session: str, ended: bool) -> None:
        """A request of `session` is over; the session is forgotten if it `ended`, idle if it was the last."""
        count = self._busy.get(session)
        if count is None:  # ended meanwhile
            return
        if ended or count == 1:
            del self._busy[session]
            if not ended:
                self._idle[session] = None
        else:
            self._busy[session] = count - 1

    # -- opening a session ----------------------------------------------------------------------------------

    async def _open(self, scope: dict, receive: Any, send: Any) -> None:
        victim: str | None = None
        if len(self) >= self.max_sessions:
            body, receive = await buffer_body(receive, self.max_body)
            if body is None:
                await send_too_large(send, self.max_body)
                return
            if not any(m.get("method") == "initialize" for m in json_messages(body)):
                await send_json_error(send, 400, NO_SESSION, [], code=-32600)
                return
            if not self._idle:
                await self._refuse(send)
                return
            victim, _ = self._idle.popitem(last=False)
        opened: str | None = None

        async def registering_send(message: dict) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                session = header(message, b"mcp-session-id")
                if session is not None:
                    opened = session.decode("latin-1")
                    self._opening -= 1
                    self._busy[opened] = self._busy.get(opened, 0) + 1
            await send(message)

        self._opening += 1
        try:
            if victim is not None:
                await self._end(victim, scope)
            await self.app(scope, receive, registering_send)
        finally:
            if opened is None:
                self._opening -= 1
            else:
                self._finished(opened, ended=False)

    async def _refuse(self, send: Any) -> None:
        if self._stats is not None:
            self._stats.sessions_refused += 1
        logger.info("new session refused: all %d sessions are busy", self.max_sessions)
        await send_json_error(send, 503, self.message, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])

    async def _end(self, session: str, scope: dict) -> None:
        """End `session` as its client would, with a DELETE through the SDK (which forgets it before
        answering)."""
        logger.info(
            "ended idle session %s, the least recently active, to admit a new one (--max-sessions %d)",
            session[:64],
            self.max_sessions,
        )
        headers = [(b"host", header(scope, b"host") or b"localhost"), (b"mcp-session-id", session.encode("latin-1"))]
        delivered = False

        async def receive() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message: dict) -> None:
            return None

        try:
            await self.app({**scope, "method": "DELETE", "headers": headers, "query_string": b""}, receive, discard)
        except Exception:  # noqa: BLE001 - the session may have ended on its own meanwhile
            logger.debug("could not end session %s", session[:64], exc_info=True)


def _sessionless_era(scope: dict) -> bool:
    """A 2026-07-28 request (a protocol version header the SDK does not hand to its sessions), which opens
    no session."""
    version = header(scope, b"mcp-protocol-version")
    return version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
