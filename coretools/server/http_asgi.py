"""ASGI plumbing shared by the HTTP middlewares: header lookup, request-body buffering, JSON-RPC bodies
and error responses."""

from __future__ import annotations

import json
from typing import Any


def header(scope: dict, name: bytes) -> bytes | None:
    """The first value of header `name` (lower-case bytes, as ASGI gives them), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def normal_path(path: str) -> str:
    """`path` without a trailing slash (`/` stays `/`), the form paths are compared in."""
    return path.rstrip("/") or "/"


def request_path(scope: dict) -> str:
    """The request path without a trailing slash (`/` stays `/`), for comparing with the MCP path."""
    return normal_path(scope.get("path", ""))


def is_mcp_post(scope: dict, path: str, *, in_session: bool) -> bool:
    """Is this a POST to the MCP path `path` (normalised) that names a session (`Mcp-Session-Id`), or, if
    not `in_session`, one that names none?"""
    return (
        scope["type"] == "http"
        and scope.get("method") == "POST"
        and request_path(scope) == path
        and (header(scope, b"mcp-session-id") is not None) == in_session
    )


async def send_json_error(
    send: Any,
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]],
    *,
    code: int = -32001,
    data: Any = None,
    request_id: Any = None,
) -> None:
    """A JSON-RPC error (by default with no request id, which MCP clients show) as an HTTP response with
    `status`."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    await send_body(send, status, body, [(b"content-type", b"application/json"), *headers])


async def send_too_large(send: Any, limit: int) -> None:
    """The answer to a request body over `limit` bytes."""
    message = f"Request body too large: the limit is {limit:,} bytes (server option --max-message-bytes)."
    await send_json_error(send, 413, message, [], code=-32600)


async def send_body(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """A complete response: `headers` plus the content length, then `body`."""
    length = (b"content-length", str(len(body)).encode())
    await send({"type": "http.response.start", "status": status, "headers": [*headers, length]})
    await send({"type": "http.response.body", "body": body})


async def buffer_body(receive: Any, limit: int) -> tuple[bytes | None, Any]:
    """Read the whole request body; return it (None if over `limit` bytes) and a `receive` that replays it,
    then passes through."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            pending: list[dict] = [message]
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None, receive
        if not message.get("more_body", False):
            pending = []
            break
    body = b"".join(chunks)
    queue = [{"type": "http.request", "body": body, "more_body": False}, *pending]

    async def replay() -> dict:
        if queue:
            return queue.pop(0)
        return await receive()

    return body, replay


def json_messages(body: bytes) -> list[dict]:
    """The JSON-RPC messages of a POST body (a single message or a batch); none for junk."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    messages = payload if isinstance(payload, list) else [payload]
    return [m for m in messages if isinstance(m, dict)]


def is_request_id(value: Any) -> bool:
    """JSON-RPC ids are strings or integers (a boolean is not one, although Python counts it as an int)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def request_ids(messages: list[dict]) -> list[Any]:
    """The ids of the requests among `messages` (not notifications or responses)."""
    return [m["id"] for m in messages if isinstance(m.get("method"), str) and is_request_id(m.get("id"))]


def cancelled_ids(messages: list[dict]) -> list[Any]:
    """The request ids named by the `notifications/cancelled` among `messages`."""
    found = []
    for m in messages:
        params = m.get("params")
        if m.get("method") == "notifications/cancelled" and "id" not in m and isinstance(params, dict):
            if is_request_id(params.get("requestId")):
                found.append(params["requestId"])
    return found
