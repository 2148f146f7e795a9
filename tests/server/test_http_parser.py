"""The HTTP request parser's edges, over raw sockets against a real server: the 16 KiB head limit (a
head that never ends, one that arrives whole, one just under), a large body that is not a large head,
pipelined requests, and a pipelined slow call that the read timeout must not cut."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from http_harness import HttpServer

pytestmark = pytest.mark.timeout(120)

READ_TIMEOUT = 1.5
LIMIT = 16 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("parser") / "root"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n")
    with HttpServer.start([root], "--read-timeout", str(READ_TIMEOUT), probe=True, forked=True) as s:
        yield s


def _address(server: HttpServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _connect(server: HttpServer) -> socket.socket:
    sock = socket.create_connection(_address(server), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _host(server: HttpServer) -> str:
    host, port = _address(server)
    return f"{host}:{port}"


def _read_all(sock: socket.socket, seconds: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection (or `seconds` pass)."""
    sock.settimeout(seconds)
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (TimeoutError, ConnectionResetError):
        pass
    return b"".join(chunks)


def _statuses(data: bytes) -> list[int]:
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]


def _mcp_post(server: HttpServer, body: dict, session: str | None = None, extra: bytes = b"") -> bytes:
    payload = json.dumps(body).encode()
    path = urlsplit(server.url).path
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {_host(server)}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(payload)}\r\n"
    ).encode()
    if session:
        head += f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n".encode()
    return head + extra + b"\r\n" + payload


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def _session(server: HttpServer) -> str:
    with _connect(server) as sock:
        sock.sendall(_mcp_post(server, INITIALIZE))
        sock.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
    for line in data.split(b"\r\n"):
        if line.lower().startswith(b"mcp-session-id:"):
            session = line.split(b":", 1)[1].strip().decode()
            break
    else:
        raise AssertionError(f"no session id in {data[:300]!r}")
    with _connect(server) as sock:
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sock.sendall(_mcp_post(server, note, session))
        assert _statuses(sock.recv(65536))[0] == 202
    return session


def test_a_head_that_never_ends_is_refused_with_431(server: HttpServer) -> None:
    """One header line with no end, fed in pieces just past the limit, then nothing more: answered 431 at
    once, not left buffering until the read timeout closes it without an answer."""
    with _connect(server) as sock:
        sock.sendall(f"GET /nope HTTP/1.1\r\nHost: {_host(server)}\r\nX-Padding: ".encode())
        for _ in range(LIMIT // 4096 + 2):
            sock.sendall(b"a" * 4096)
            time.sleep(0.02)
        for _ in range(50):  # what a peer that does not read answers may go on sending
            try:
                sock.sendall(b"a" * 4096)
            except (BrokenPipeError, ConnectionResetError):
                break
        start = time.monotonic()
        answer = _read_all(sock)
    assert _statuses(answer) == [431], answer[:200]
    assert time.monotonic() - start < READ_TIMEOUT


def test_a_whole_head_over_the_limit_in_one_send_is_refused(server: HttpServer) -> None:
    headers = "".join(f"X-Header-{i}: {'v' * 30}\r\n" for i in range(600))  # ~27 KiB
    with _connect(server) as sock:
        sock.sendall(f"GET /nope HTTP/1.1\r\nHost: {_host(server)}\r\n{headers}\r\n".encode())
        assert _statuses(_read_all(sock)) == [431]


def test_a_head_under_the_limit_is_served(server: HttpServer) -> None:
    headers = "".join(f"X-Header-{i}: {'v' * 30}\r\n" for i in range(300))  # ~14 KiB
    with _connect(server) as sock:
        sock.sendall(f"GET /nope HTTP/1.1\r\nHost: {_host(server)}\r\nConnection: close\r\n{headers}\r\n".encode())
        assert _statuses(_read_all(sock)) == [404]


def test_a_large_body_is_not_a_large_head(server: HttpServer) -> None:
    """A 300 KB request in one send (its body far past the head limit) is answered normally."""
    session = _session(server)
    call = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"absolute_path": "hello.txt"}, "_meta": {"pad": "p" * 300_000}},
    }
    with _connect(server) as sock:
        sock.sendall(_mcp_post(server, call, session, b"Connection: close\r\n"))
        answer = _read_all(sock)
    assert _statuses(answer) == [200]
    assert b"hello" in answer


def test_pipelined_requests_are_all_answered_in_order(server: HttpServer) -> None:
    one = f"GET /nope-1 HTTP/1.1\r\nHost: {_host(server)}\r\n\r\n".encode()
    two = f"GET /nope-2 HTTP/1.1\r\nHost: {_host(server)}\r\nConnection: close\r\n\r\n".encode()
    with _connect(server) as sock:
        sock.sendall(one + two)
        assert _statuses(_read_all(sock)) == [404, 404]


def test_a_pipelined_slow_call_is_not_cut_by_the_read_timeout(server: HttpServer) -> None:
    """The second of two pipelined requests takes longer than the read timeout to answer: the peer owes
    nothing while it runs, so the connection stays up and both answers arrive."""
    session = _session(server)
    quick = f"GET /nope HTTP/1.1\r\nHost: {_host(server)}\r\n\r\n".encode()
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "probe_sleep", "arguments": {"seconds": READ_TIMEOUT * 2}}}
    with _connect(server) as sock:
        sock.sendall(quick + _mcp_post(server, call, session, b"Connection: close\r\n"))
        answer = _read_all(sock, 30)
    assert _statuses(answer) == [404, 200], answer[:400]
    assert b'"id":3' in answer.replace(b" ", b"") and b"isError\":true" not in answer.replace(b" ", b"")


def test_a_head_left_unfinished_is_closed_after_the_read_timeout(server: HttpServer) -> None:
    with _connect(server) as sock:
        sock.sendall(f"GET /nope HTTP/1.1\r\nHost: {_host(server)}\r\nX-Half".encode())
        start = time.monotonic()
        assert _read_all(sock, READ_TIMEOUT + 10) == b""
        assert READ_TIMEOUT - 0.2 <= time.monotonic() - start < READ_TIMEOUT + 5
