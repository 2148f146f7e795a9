"""Cancellation over HTTP, for the requests the SDK would otherwise leave running.

The SDK cancels a call when the call's own channel says so: a stateful session's dispatcher applies the
session's `notifications/cancelled`, and a 2026-07-28 request ends when its response stream closes. Two
cases fall through, and each has a middleware here:

- `CancelOnDisconnect`: a stateful session's POST whose connection closes before its answer (the SDK
  keeps serving it, for a resumption this server cannot offer);
- `CancelByCaller`: a request outside any session (every request of `--stateless` 2025-era clients, and
  any 2026-07-28 request) whose cancel arrives as a POST of its own. Without a session, that POST reaches
  a fresh transport that knows nothing of the call. `RunningCalls` remembers, per replica, the calls
  being served outside sessions under (caller, request id), so that POST can find the call it names, and
  only if it comes from the caller who started it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import anyio
from coretools.server.config import DEFAULT_MAX_MESSAGE_BYTES
from coretools.server.http_asgi import (
    buffer_body,
    cancelled_ids,
    header,
    is_mcp_post,
    json_messages,
    normal_path,
    request_ids,
    send_json_error,
    send_too_large,
)

logger = logging.getLogger("coretools.http")

MAX_TRACKED_CALLS = 4096
REQUEST_CANCELLED = -32800  # JSON-RPC "request cancelled", as the SDK's 2025-era transport answers it


class CancelOnDisconnect:
    """ASGI middleware: a stateful-session request whose client went away is cancelled, not left running.

    Over the 2025-era transport the SDK keeps serving a request after the client's POST stream closes (the
    spec lets a client resume the stream from an event store, so a disconnect is not a cancellation). This
    server keeps no event store, so such a response can never be delivered: when the connection of a POST
    carrying requests closes before its response was sent, this sends the session the
    `notifications/cancelled` the client would have sent. The call's cancel scope then fires, and tools clean
    up as for any cancellation (a shell command's processes are killed).
    """

    def __init__(self, app: Any, path: str, max_body: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.app = app
        self.path = normal_path(path)
        self.max_body = max_body

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not is_mcp_post(scope, self.path, in_session=True):
            await self.app(scope, receive, send)
            return
        body, replay = await buffer_body(receive, self.max_body)
        if body is None:
            await send_too_large(send, self.max_body)
            return
        state = {"disconnected": False, "finished": False}

        async def watching_receive() -> dict:
            message = await replay()
            if message["type"] == "http.disconnect":
                state["disconnected"] = True
            return message

        async def watching_send(message: dict) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                state["finished"] = True
            await send(message)

        try:
            await self.app(scope, watching_receive, watching_send)
        finally:
            if state["disconnected"] and not state["finished"]:
                # parsed only now: the body of every other request is parsed once, by the SDK
                with anyio.CancelScope(shield=True):
                    for request_id in request_ids(json_messages(body)):
                        await self._cancel(scope, request_id)

    async def _cancel(self, scope: dict, request_id: Any) -> None:
        logger.info("client disconnected before request %r was answered; cancelling it", request_id)
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "the client disconnected"},
            }
        ).encode()
        keep = (b"host", b"origin", b"mcp-session-id", b"mcp-protocol-version", b"authorization")
        headers = [(k, v) for k, v in scope.get("headers", ()) if k in keep]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
        sent = False

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message: dict) -> None:
            return None

        try:
            await self.app({**scope, "headers": headers}, receive, discard)
        except Exception:  # noqa: BLE001 - best effort: the session may be gone already
            logger.debug("could not deliver the cancellation of %r", request_id, exc_info=True)


CallKey = tuple[str | None, str, Any]


class RunningCalls:
    """The requests this process serves outside sessions, by (caller, request id), each with the cancel
    scope of its HTTP exchange.

    A key can name more than one running call: clients number their requests from the same start, so
    two clients of one caller often have the same id in flight at once. A cancel for such a key stops
    none of them, since it cannot tell whose call it meant. The table holds at most `limit` calls; past
    that a call runs untracked (a cancel POST cannot reach it, closing its connection still does).
    """

    def __init__(self, limit: int = MAX_TRACKED_CALLS) -> None:
        self.limit = limit
        self._calls: dict[CallKey, list[anyio.CancelScope]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, key: CallKey, scope: anyio.CancelScope) -> bool:
        if self._count >= self.limit:
            return False
        self._calls.setdefault(key, []).append(scope)
        self._count += 1
        return True

    def remove(self, key: CallKey, scope: anyio.CancelScope) -> None:
        scopes = self._calls.get(key)
        if scopes is None or scope not in scopes:
            return
        scopes.remove(scope)
        self._count -= 1
        if not scopes:
            del self._calls[key]

    def cancel(self, key: CallKey) -> str:
        """Cancel the one call under `key`; say what happened: `cancelled`, `unknown` or `ambiguous`."""
        scopes = self._calls.get(key, [])
        if len(scopes) != 1:
            return "ambiguous" if scopes else "unknown"
        scopes[0].cancel()
        return "cancelled"


def call_key(caller: str | None, request_id: Any) -> CallKey:
    """JSON-RPC ids keep their type: the string "1" and the number 1 are different requests."""
    return (caller, type(request_id).__name__, request_id)


class CancelByCaller:
    """ASGI middleware: a `notifications/cancelled` POSTed outside a session cancels the running call it
    names, if the same caller started it on this process.

    The caller is the bearer token (a digest of it) when the server requires one; without a token
    (loopback, or `--insecure-no-auth`) every client is the same caller, as anyone who can connect can
    also call. Every POST outside a session that carries requests runs inside a cancel scope listed in
    `RunningCalls` until its exchange ends. Cancelling that scope ends the exchange, and the SDK then
    cancels the call as for a closed connection, which kills a shell command's processes. The cancelled
    exchange still gets a complete response (a JSON-RPC "request cancelled" error, or the end of its
    event stream), which the client, having given up on it, ignores.
    """

    def __init__(
        self,
        app: Any,
        path: str,
        *,
        keyed_on_token: bool,
        calls: RunningCalls | None = None,
        max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.app = app
        self.path = normal_path(path)
        self.max_body = max_body
        self.keyed_on_token = keyed_on_token
        self.calls = calls if calls is not None else RunningCalls()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not is_mcp_post(scope, self.path, in_session=False):
            await self.app(scope, receive, send)
            return
        body, replay = await buffer_body(receive, self.max_body)
        if body is None:
            await send_too_large(send, self.max_body)
            return
        messages = json_messages(body)
        caller = self._caller(scope)
        for request_id in cancelled_ids(messages):
            outcome = self.calls.cancel(call_key(caller, request_id))
            logger.info("cancel of request %r outside a session: %s", request_id, outcome)
        ids = request_ids(messages)
        if not ids:
            await self.app(scope, replay, send)
            return
        await self._serve_cancellable(scope, replay, send, [call_key(caller, i) for i in ids])

    def _caller(self, scope: dict) -> str | None:
        if not self.keyed_on_token:
            return None
        token = header(scope, b"authorization") or b""
        return hashlib.sha256(token.partition(b" ")[2].strip()).hexdigest()

    async def _serve_cancellable(self, scope: dict, receive: Any, send: Any, keys: list[CallKey]) -> None:
        state = {"started": False, "finished": False}

        async def tracking_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["finished"] = True
            await send(message)

        exchange = anyio.CancelScope()
        tracked = [key for key in keys if self.calls.add(key, exchange)]
        if len(tracked) < len(keys):
            logger.warning(
                "%d calls are running outside sessions: a new one cannot be cancelled by a POST", len(self.calls)
            )
        try:
            with exchange:
                await self.app(scope, receive, tracking_send)
        finally:
            for key in tracked:
                self.calls.remove(key, exchange)
        if exchange.cancelled_caught and not state["finished"]:
            await _end_cancelled_response(send, state["started"], keys[0][2])


async def _end_cancelled_response(send: Any, started: bool, request_id: Any) -> None:
    """Complete the response of an exchange cut short by a cancel, so its connection stays well-formed."""
    if started:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    await send_json_error(send, 200, "Request cancelled", [], code=REQUEST_CANCELLED, request_id=request_id)
