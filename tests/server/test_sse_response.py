"""`PostEventStream`, the SSE answer to a 2025-era POST: the SDK still builds its POST streams through our
chooser, the bytes and headers are sse_starlette's, pings flow while a call is slow, and a client that goes
away cancels the writer behind the stream. Served by a real uvicorn on 127.0.0.1, read by a raw socket."""

from __future__ import annotations

import functools
import inspect
import socket

import anyio
import pytest
import uvicorn
from mcp.server import streamable_http
from sse_starlette.sse import EventSourceResponse

from coretools.server import sse_response
from coretools.server.sse_response import PostEventStream, end_streams, install, sse_headers

pytestmark = pytest.mark.anyio

SDK_HEADERS = {"Cache-Control": "no-cache, no-transform", "Connection": "keep-alive", "Content-Type": "text/event-stream"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_sdk_builds_its_post_streams_through_the_chooser() -> None:
    source = inspect.getsource(streamable_http.StreamableHTTPServerTransport._handle_post_request)
    assert "EventSourceResponse(" in source and "partial(\n" in source and "self._run_sse_writer" in source
    install()
    install()
    chooser = streamable_http.EventSourceResponse
    transport = streamable_http.StreamableHTTPServerTransport(mcp_session_id=None)
    post = chooser(content=None, data_sender_callable=functools.partial(transport._run_sse_writer, "1"), headers={})
    assert isinstance(post, PostEventStream)

    async def standalone() -> None: ...

    assert isinstance(chooser(content=None, data_sender_callable=standalone, headers={}), EventSourceResponse)
    assert isinstance(chooser(content=None, headers={}, ping=5), EventSourceResponse)


@pytest.mark.parametrize("extra", [{}, {"mcp-session-id": "abc"}])
async def test_headers_are_sse_starlettes(extra: dict) -> None:
    headers = {**SDK_HEADERS, **extra}
    theirs = EventSourceResponse(content=iter(()), headers=headers).raw_headers
    assert sorted(sse_headers(headers)) == sorted(theirs)
    assert sorted(sse_headers(None)) == sorted(EventSourceResponse(content=iter(())).raw_headers)


class _App:
    """One PostEventStream per request: `events` are sent by the writer `delay` seconds apart."""

    def __init__(self, events: list[dict], delay: float) -> None:
        self.events, self.delay = events, delay
        self.writer_cancelled = anyio.Event()

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return
        writer, reader = anyio.create_memory_object_stream[dict](0)

        async def write() -> None:
            try:
                async with writer:
                    for event in self.events:
                        await anyio.sleep(self.delay)
                        await writer.send(event)
            except anyio.get_cancelled_exc_class():
                self.writer_cancelled.set()
                raise

        await PostEventStream(reader, write, SDK_HEADERS)(scope, receive, send)


async def _serve(app: _App, tg) -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off", http="httptools"))
    tg.start_soon(functools.partial(server.serve, sockets=[sock]))
    while not server.started:
        await anyio.sleep(0.01)
    app.server = server
    return sock.getsockname()[1]


async def _post(port: int):
    stream = await anyio.connect_tcp("127.0.0.1", port)
    await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
    return stream


async def _read_until(stream, end: bytes, limit: float = 10) -> bytes:
    data = b""
    with anyio.fail_after(limit):
        while end not in data:
            data += await stream.receive()
    return data


async def test_events_pings_and_the_end_are_framed_as_sse_starlette_frames_them(monkeypatch) -> None:
    monkeypatch.setattr(sse_response, "PING_SECONDS", 0.1)
    events = [{"event": "message", "data": '{"jsonrpc":"2.0","id":1,"result":{}}'}, {"event": "message", "data": "a\nb"}]
    app = _App(events, delay=0.45)
    async with anyio.create_task_group() as tg:
        port = await _serve(app, tg)
        stream = await _post(port)
        raw = await _read_until(stream, b"\r\n0\r\n\r\n")
        await stream.aclose()
        app.server.should_exit = True
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"text/event-stream" in head and b"transfer-encoding: chunked" in head.lower()
    assert b"x-accel-buffering: no" in head.lower()
    expected = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n"
    assert expected in body and b"data: a\r\ndata: b\r\n\r\n" in body
    assert body.index(b": ping - ") < body.index(b"event: message"), "no ping while the call was slow"


async def test_a_client_that_goes_away_cancels_the_writer() -> None:
    app = _App([{"data": "never"}], delay=3600)
    async with anyio.create_task_group() as tg:
        port = await _serve(app, tg)
        stream = await _post(port)
        await _read_until(stream, b"\r\n\r\n")
        await stream.aclose()
        with anyio.fail_after(10):
            await app.writer_cancelled.wait()
        app.server.should_exit = True


async def test_shutdown_ends_open_streams_with_a_complete_response() -> None:
    app = _App([{"data": "never"}], delay=3600)
    async with anyio.create_task_group() as tg:
        port = await _serve(app, tg)
        stream = await _post(port)
        await _read_until(stream, b"\r\n\r\n")
        end_streams()
        assert await _read_until(stream, b"0\r\n\r\n") == b"0\r\n\r\n"  # the chunked body's end, nothing else
        with anyio.fail_after(10):
            await app.writer_cancelled.wait()
        await stream.aclose()
        app.server.should_exit = True
