"""The event stream that answers a POST of the 2025-era streamable HTTP transport: two tasks, not five.

The SDK answers each POST that carries a request with sse_starlette's `EventSourceResponse`, which starts
five tasks per response: the body, a keep-alive ping, a shutdown listener, a disconnect listener and the
SDK's writer. A call's answer is usually one event, so those tasks cost more than the answer itself (about a
tenth of the server's CPU per `read_file` call). `PostEventStream` sends the same bytes (sse_starlette's own
encoder, the same headers) from one loop, beside the SDK's writer and a disconnect listener, both plain
asyncio tasks (an anyio task group's child costs several times as much to start and to stop); the pings
are timed by the event loop's timer.

Only the POST answer is replaced: it ends with the call's response. The standalone GET stream and a
replay live until the session or the server ends, and keep sse_starlette for its shutdown handling.
`install` puts the chooser in the SDK's module; `tests/server/test_sse_response.py` checks that the SDK
still calls it as this module expects.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from sse_starlette.event import ensure_bytes
from sse_starlette.sse import EventSourceResponse

logger = logging.getLogger("coretools.http")

PING_SECONDS = EventSourceResponse.DEFAULT_PING_INTERVAL
SEPARATOR = EventSourceResponse.DEFAULT_SEPARATOR


def sse_headers(headers: Mapping[str, str] | None) -> list[tuple[bytes, bytes]]:
    """The response head sse_starlette would send for `headers`."""
    merged = {k.lower(): v for k, v in (headers or {}).items()}
    merged.setdefault("cache-control", "no-store")
    merged["connection"] = "keep-alive"
    merged["x-accel-buffering"] = "no"
    merged.setdefault("content-type", "text/event-stream; charset=utf-8")
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merged.items()]


class PostEventStream:
    """An SSE response: the events of `content`, while `data_sender_callable` runs beside it."""

    def __init__(
        self,
        content: Any,
        data_sender_callable: Callable[[], Awaitable[None]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.content = content
        self.sender = data_sender_callable
        self.raw_headers = sse_headers(headers)
        self.ended = False
        self.events = anyio.CancelScope()  # cancelled by `end_streams` when the server shuts down
        self._pinger: asyncio.TimerHandle | None = None
        self._pings: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        _OPEN.add(self)
        loop = asyncio.get_running_loop()
        stop = anyio.CancelScope()  # cancelled when the client goes away, or the writer or a ping fails
        sender = loop.create_task(self._send_events(stop)) if self.sender is not None else None
        watch = loop.create_task(self._watch(receive, stop, sender))
        self._pinger = loop.call_later(PING_SECONDS, self._ping, send, stop)
        finished = False
        try:
            with stop:
                await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
                with self.events:
                    async for event in self.content:
                        body = ensure_bytes(event, SEPARATOR)
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                self.ended = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                finished = not self.events.cancel_called
        finally:
            self.ended = True
            self._pinger.cancel()
            watch.cancel()
            if sender is not None and not finished:  # cut short: the writer may still be waiting to send
                sender.cancel()
            _OPEN.discard(self)

    async def _send_events(self, stop: anyio.CancelScope) -> None:
        """The SDK's writer, which puts the call's messages on the stream; one that fails ends the stream."""
        assert self.sender is not None
        try:
            await self.sender()
        except Exception:  # noqa: BLE001 - a plain task has no task group to raise into
            logger.exception("the writer of an event stream failed")
            stop.cancel()

    async def _watch(self, receive: Any, stop: anyio.CancelScope, sender: asyncio.Task[None] | None) -> None:
        """End the stream and the writer when the client goes away.

        It only waits, with no timeout of its own (the pings have a timer), and is cancelled as the
        response ends."""
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        except Exception:  # noqa: BLE001 - a plain task has no task group to raise into: end the stream
            logger.debug("the watch of an event stream failed", exc_info=True)
        stop.cancel()
        if sender is not None:
            sender.cancel()

    def _ping(self, send: Any, scope: anyio.CancelScope) -> None:
        """Every PING_SECONDS while the response is open, a comment, so the client (and any proxy between)
        sees the stream alive during a slow call."""
        loop = asyncio.get_running_loop()
        self._pinger = loop.call_later(PING_SECONDS, self._ping, send, scope)
        task = loop.create_task(self._send_ping(send, scope))
        self._pings.add(task)
        task.add_done_callback(self._pings.discard)

    async def _send_ping(self, send: Any, scope: anyio.CancelScope) -> None:
        if self.ended:  # checked with no await before the send: nothing follows the response's end
            return
        ping = ensure_bytes({"comment": f"ping - {datetime.datetime.now(datetime.timezone.utc)}"}, SEPARATOR)
        try:
            await send({"type": "http.response.body", "body": ping, "more_body": True})
        except Exception:  # noqa: BLE001 - as a failed send of an event would, it ends the stream
            logger.debug("a ping of an event stream failed", exc_info=True)
            scope.cancel()


_OPEN: set[PostEventStream] = set()


def end_streams() -> None:
    """End every open POST stream now (the server is shutting down): each finishes its response cleanly,
    and the calls behind them are cancelled when the SDK's session manager stops."""
    for stream in list(_OPEN):
        stream.events.cancel()


def _choose(writer_name: str) -> Callable[..., Any]:
    def response(*, content: Any, data_sender_callable: Any = None, headers: Any = None, **rest: Any) -> Any:
        func = data_sender_callable.func if isinstance(data_sender_callable, functools.partial) else None
        if not rest and getattr(func, "__name__", None) == writer_name:
            return PostEventStream(content, data_sender_callable, headers)
        return EventSourceResponse(content=content, data_sender_callable=data_sender_callable, headers=headers, **rest)

    return response


def install() -> None:
    """Answer the SDK's POST streams with `PostEventStream` (idempotent)."""
    from mcp.server import streamable_http

    if getattr(streamable_http.EventSourceResponse, "__module__", None) != __name__:
        streamable_http.EventSourceResponse = _choose("_run_sse_writer")
