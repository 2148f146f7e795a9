"""The POST answer as an event stream (coretools/server/sse_response.py) of a real HTTP server.

Every test starts `python -m coretools serve --transport http --port 0` in a subprocess and talks to it
over raw sockets on 127.0.0.1, so what is checked is what a client sees: the bytes of the response, the
processes a call started, the server's descriptors and memory (/proc/PID).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_harness import TESTS, HttpServer, proc_rss_kib, wait_for

pytestmark = pytest.mark.timeout(240)

VERSION = "2025-11-25"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "redteam", "version": "0"}}}  # fmt: skip
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


# -- a raw HTTP/1.1 client --------------------------------------------------------------------------------


class Raw:
    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    @staticmethod
    def request(port: int, body: object, session: str | None = None, *, version: bool = True) -> bytes:
        data = json.dumps(body).encode()
        head = [f"POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
                "Accept: application/json, text/event-stream", f"Content-Length: {len(data)}"]  # fmt: skip
        if version:
            head.append(f"MCP-Protocol-Version: {VERSION}")
        if session:
            head.append(f"Mcp-Session-Id: {session}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + data

    def post(self, body: object, session: str | None = None, **kw: bool) -> None:
        self.sock.sendall(self.request(self.port, body, session, **kw))

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def response(self) -> tuple[int, dict[str, str], bytes]:
        status = int(self._line().split()[1])
        headers: dict[str, str] = {}
        while line := self._line():
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    self._line()
                    break
                body += self._take(size)
                self._take(2)
            return status, headers, body
        return status, headers, self._take(int(headers.get("content-length", "0")))

    def close(self) -> None:
        self.sock.close()


def sse_events(body: bytes) -> list[dict]:
    """Parse a complete SSE body strictly: every block is a comment (ping) or an event with data lines."""
    out = []
    text = body.decode()
    assert text.endswith("\r\n\r\n") or not text, f"stream does not end at an event boundary: {text[-80:]!r}"
    for block in filter(None, text.split("\r\n\r\n")):
        lines = block.split("\r\n")
        if all(line.startswith(":") for line in lines):
            out.append({"ping": block})
            continue
        fields: dict[str, list[str]] = {}
        for line in lines:
            assert not line.startswith(":"), f"a ping inside an event: {block!r}"
            k, _, v = line.partition(": ")
            fields.setdefault(k, []).append(v)
        assert set(fields) <= {"event", "data", "id", "retry"}, block
        out.append({"event": fields.get("event", [""])[0], "data": json.loads("\n".join(fields["data"]))})
    return out


def handshake(port: int) -> str:
    c = Raw(port)
    try:
        c.post(INIT, version=False)
        status, headers, body = c.response()
        assert status == 200, body
        session = headers["mcp-session-id"]
        c.post(INITIALIZED, session)
        assert c.response()[0] == 202
        return session
    finally:
        c.close()


def shell_call(rid: int, command: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "run_shell_command", "arguments": {"command": command}}}  # fmt: skip


def pids_with(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry))
    return found


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def unique_sleep() -> str:
    return f"30.{random.randrange(10**6, 10**7)}"


def start_with_ping(roots: list[Path], ping: float, *flags: str) -> HttpServer:
    """A real server subprocess whose POST streams ping every `ping` seconds (the probe tool included)."""
    boot = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import coretools.server.sse_response as s; "
            f"s.PING_SECONDS = {ping!r}; import http_harness as h; sys.exit(h.main_with_probe(sys.argv[1:]))")  # fmt: skip
    args = ["serve", "--transport", "http", "--port", "0", *sum((["--root", str(r)] for r in roots), []), *flags]
    return HttpServer.start(roots, command=[sys.executable, "-c", boot, *args], forked=True)


def port_of(server: HttpServer) -> int:
    return int(re.search(r":(\d+)/", server.url).group(1))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One server for the tests that open sessions of their own and leave nothing running behind them."""
    root = tmp_path_factory.mktemp("sse") / "root"
    root.mkdir()
    with HttpServer.start([root], forked=True) as server:
        yield server


@pytest.fixture(scope="module")
def stateless_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("sse-stateless") / "root"
    root.mkdir()
    with HttpServer.start([root], "--stateless", forked=True) as server:
        yield server


# -- a client that goes away ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["stateful", "stateless"])
def test_closing_the_post_kills_the_shell_command(kind: str, request: pytest.FixtureRequest) -> None:
    server: HttpServer = request.getfixturevalue("server" if kind == "stateful" else "stateless_server")
    port = port_of(server)
    session = handshake(port) if kind == "stateful" else None
    token = unique_sleep()
    c = Raw(port)
    c.post(shell_call(7, f"sleep {token}"), session)
    assert wait_for(lambda: bool(pids_with(token)), 15), "the command never started"
    c.close()
    assert wait_for(lambda: not pids_with(token), 10), f"`sleep {token}` survived its POST's connection"
    assert server.alive()


def test_half_closed_client_still_gets_its_answer_or_a_kill(server: HttpServer) -> None:
    """shutdown(SHUT_WR) after the request: either the answer arrives, or (uvicorn treats EOF as a
    disconnect) the command is killed; never a command left running with nobody to answer."""
    port = port_of(server)
    session = handshake(port)
    token = unique_sleep()
    c = Raw(port)
    c.post(shell_call(8, f"sleep {token}"), session)
    c.sock.shutdown(socket.SHUT_WR)
    time.sleep(1.0)
    assert wait_for(lambda: not pids_with(token), 10), "half-closed client: the command runs on unanswered"
    c.close()


# -- what the stream carries -------------------------------------------------------------------------------


def test_pings_never_split_events_and_the_stream_ends(root: Path) -> None:
    """Pings every 10 ms beside a call that reports progress 40 times: every block is whole, the last
    event is the response, and the chunked body ends."""
    server = start_with_ping([root], 0.01)
    try:
        port = port_of(server)
        session = handshake(port)
        for rid in range(1, 6):
            c = Raw(port)
            c.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                    "params": {"name": "probe_sleep", "arguments": {"seconds": 0.4, "steps": 40},
                               "_meta": {"progressToken": f"p{rid}"}}}, session)  # fmt: skip
            status, headers, body = c.response()
            c.close()
            assert status == 200 and headers["content-type"].startswith("text/event-stream")
            events = sse_events(body)
            real = [e for e in events if "data" in e]
            assert real[-1]["data"].get("id") == rid and "result" in real[-1]["data"], real[-1]
            assert sum(1 for e in real if e["data"].get("method") == "notifications/progress") == 40
            assert any("ping" in e for e in events)
        assert not any("Exception in ASGI application" in line or "Traceback" in line for line in server.stderr), (
            "".join(server.stderr)
        )
    finally:
        server.stop()


def test_pipelined_requests_on_one_connection(server: HttpServer) -> None:
    port = port_of(server)
    session = handshake(port)
    c = Raw(port)
    data = b"".join(Raw.request(port, shell_call(i, f"echo pipelined-{i}"), session) for i in (1, 2, 3))
    c.sock.sendall(data)
    for i in (1, 2, 3):
        status, _, body = c.response()
        assert status == 200
        last = [e for e in sse_events(body) if "data" in e][-1]["data"]
        assert last["id"] == i and f"pipelined-{i}" in json.dumps(last)
    c.close()


def test_concurrent_calls_on_one_session_do_not_wait_for_each_other(server: HttpServer) -> None:
    port = port_of(server)
    session = handshake(port)
    slow = Raw(port)
    slow.post(shell_call(1, "sleep 3; echo slow-done"), session)
    time.sleep(0.3)
    fast = Raw(port)
    t0 = time.monotonic()
    fast.post(shell_call(2, "echo fast-done"), session)
    _, _, body = fast.response()
    assert time.monotonic() - t0 < 2.5, "the quick call waited for the slow one"
    assert "fast-done" in body.decode()
    _, _, body = slow.response()
    assert "slow-done" in body.decode()
    slow.close()
    fast.close()


# -- shutdown --------------------------------------------------------------------------------------------


def test_sigterm_with_calls_in_flight_ends_promptly_and_kills_them(root: Path) -> None:
    server = HttpServer.start([root], forked=True)
    try:
        port = port_of(server)
        session = handshake(port)
        tokens = [unique_sleep() for _ in range(3)]
        clients = []
        for i, token in enumerate(tokens):
            c = Raw(port, timeout=20)
            c.post(shell_call(i + 1, f"sleep {token}"), session)
            clients.append(c)
        assert wait_for(lambda: all(pids_with(t) for t in tokens), 15)
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(20)
        elapsed = time.monotonic() - t0
        assert code == 0, "".join(server.stderr)
        assert elapsed < 10, f"shutdown took {elapsed:.1f}s with calls in flight"
        assert wait_for(lambda: not any(pids_with(t) for t in tokens), 5), "a command outlived the server"
        for c in clients:  # each stream got a complete (chunked) ending, not a cut connection
            status, _, _ = c.response()
            assert status == 200
            c.close()
    finally:
        server.kill()


# -- resources -----------------------------------------------------------------------------------------


def test_many_aborted_calls_leak_neither_descriptors_nor_memory(root: Path, tmp_path: Path) -> None:
    with HttpServer.start([root], probe=True) as server:
        port = port_of(server)
        session = handshake(port)

        def warm(n: int, prefix: str) -> None:
            for i in range(n):
                c = Raw(port)
                c.post({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                        "params": {"name": "probe_sleep",
                                   "arguments": {"seconds": 30, "marker": str(tmp_path / f"{prefix}{i}")}}}, session)  # fmt: skip
                if prefix == "w":
                    wait_for(lambda: (tmp_path / f"{prefix}{i}.started").exists(), 5)
                c.close()

        warm(20, "w")
        assert wait_for(lambda: all((tmp_path / f"w{i}.cancelled").exists() for i in range(20)), 20)
        time.sleep(1)
        fds0, rss0 = fd_count(server.pid), proc_rss_kib(server.pid)
        warm(300, "a")
        started = lambda: [i for i in range(300) if (tmp_path / f"a{i}.started").exists()]  # noqa: E731
        assert wait_for(lambda: all((tmp_path / f"a{i}.cancelled").exists() for i in started()), 40), (
            f"{len([i for i in started() if not (tmp_path / f'a{i}.cancelled').exists()])} aborted calls still run"
        )
        assert wait_for(lambda: fd_count(server.pid) <= fds0 + 5, 15), f"fds {fds0} -> {fd_count(server.pid)}"
        rss1 = proc_rss_kib(server.pid)
        assert rss1 - rss0 < 20 * 1024, f"RSS grew {rss0} -> {rss1} KiB over 300 aborted calls"
        # still serving
        c = Raw(port)
        c.post(shell_call(999, "echo alive"), session)
        assert "alive" in c.response()[2].decode()
        c.close()


def test_a_cancelled_call_still_ends_its_stream(server: HttpServer) -> None:
    """notifications/cancelled for a running call: the command dies and the POST's stream completes (no
    response that never ends)."""
    port = port_of(server)
    session = handshake(port)
    token = unique_sleep()
    c = Raw(port, timeout=15)
    c.post(shell_call(5, f"sleep {token}"), session)
    assert wait_for(lambda: bool(pids_with(token)), 15)
    k = Raw(port)
    k.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}, session)
    assert k.response()[0] == 202
    k.close()
    assert wait_for(lambda: not pids_with(token), 10)
    status, _, body = c.response()  # raises (socket timeout) if the stream never ends
    assert status == 200
    sse_events(body)
    c.close()
