"""Nagle's algorithm is off on the HTTP server's connections.

uvicorn ends a streamed (SSE) response with two sends: the last event, then the chunked terminator. With
Nagle on, the terminator waits for the client's ACK of the event, which the client delays (about 40 ms
on Linux) once its connection is past the first exchanges; a client that keeps its connection alive,
as the official MCP clients do, then waits that long for every answer.

The first test checks the socket option itself on a connection accepted by the guard's listener from a
socket made by `bind_socket` (the path that left it off). The second drives uvicorn behind the guard
over one kept-alive connection; it asserts on the fastest of ten exchanges, which Nagle would push past
40 ms, so a busy machine alone cannot fail it.
"""

from __future__ import annotations

import asyncio
import socket
import time

import uvicorn

from coretools.server.http import bind_socket
from coretools.server.http_guard import ConnectionRegistry, ConnectionStats, GuardedListener, GuardedServer

MEASURED_EXCHANGES = 10
FASTEST_EXCHANGE_MS = 20.0  # delayed ACK is at least 40 ms on Linux


class Recorder(asyncio.Protocol):
    def __init__(self, connected: asyncio.Event, transports: list[asyncio.Transport]) -> None:
        self._connected = connected
        self._transports = transports

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transports.append(transport)  # type: ignore[arg-type]
        self._connected.set()


def _nodelay(transport: asyncio.BaseTransport) -> int:
    return transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_accepted_connections_have_tcp_nodelay() -> None:
    async def scenario() -> list[int]:
        sock = bind_socket("127.0.0.1", 0)
        connected, transports = asyncio.Event(), []
        registry = ConnectionRegistry(8, ConnectionStats())
        listener = GuardedListener(sock, lambda: Recorder(connected, transports), registry, 10.0, None)  # type: ignore[arg-type, return-value]
        listener.start()
        try:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            await asyncio.wait_for(connected.wait(), 10)
            flags = [_nodelay(t) for t in transports]
            writer.close()
            for t in transports:
                t.close()
            return flags
        finally:
            listener.close()
            sock.close()

    flags = asyncio.run(scenario())
    assert flags and all(flags), "an accepted connection still has Nagle's algorithm on"


async def _streaming_app(scope: dict, receive, send) -> None:
    """An SSE-shaped answer as the SDK gives it: one event, then an empty last body (chunked encoding)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b'event: message\r\ndata: {"ok":true}\r\n\r\n', "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _exchange(conn: socket.socket, host: str) -> float:
    """One POST and its complete chunked answer on `conn`; milliseconds."""
    start = time.perf_counter()
    conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
    received = b""
    while not received.endswith(b"\r\n0\r\n\r\n"):
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200")
    return (time.perf_counter() - start) * 1000


def _kept_alive_exchanges(port: int) -> list[float]:
    host = f"127.0.0.1:{port}"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(3):  # past the connection's first exchanges, where Linux ACKs at once
            _exchange(conn, host)
        return [_exchange(conn, host) for _ in range(MEASURED_EXCHANGES)]


def test_streamed_answers_on_a_kept_alive_connection_are_not_held_back() -> None:
    async def scenario() -> list[float]:
        sock = bind_socket("127.0.0.1", 0)
        config = uvicorn.Config(_streaming_app, http="h11", ws="none", lifespan="off", log_config=None, log_level="warning")
        server = GuardedServer(config, sock, cap=8, read_timeout=10.0, stats=ConnectionStats(), log_filter=None)
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                await asyncio.sleep(0.01)
            return await asyncio.to_thread(_kept_alive_exchanges, sock.getsockname()[1])
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, 10)
            sock.close()

    times = asyncio.run(scenario())
    assert min(times) < FASTEST_EXCHANGE_MS, f"every kept-alive exchange took {min(times):.0f} ms or more: {times}"
