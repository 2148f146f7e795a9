"""Bad input on the wire: every message gets a clear answer, and the server keeps answering.

Real server processes throughout, spoken to in raw bytes: JSON-RPC lines on a stdio server's stdin, and raw
HTTP requests on a socket to an HTTP server. A host waits for the answer to each request it sent, so a
request left unanswered stalls it until its own timeout; here each bad request must be answered with an
error carrying its id (or id null when none can be read), saying what is wrong, and the next request must
be served as usual.

Memory is the server's peak RSS (VmHWM) growth while a 200 MB line streams in: a line over the message
limit is discarded as it arrives, never held. Those servers are started by the interpreter, the process
whose memory is read; the others are forked (`server_fork`), handed the very pipes or sockets.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

import server_fork
from http_harness import REPO, HttpServer, server_command, server_env

pytestmark = pytest.mark.timeout(240)

MIB = 1024 * 1024
DEFAULT_LIMIT = 4 * MIB  # --max-message-bytes's default, the MCP SDK's HTTP body limit
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


class RawStdio:
    """A stdio server subprocess, its stdout read into a queue of decoded JSON-RPC messages. `wire`: "pipe"
    (as most hosts), "socket" (socket pairs, as hosts written for Node.js give), or "sdk" (pipes, and the
    MCP SDK's threaded transport, used where the server's own cannot be). `forked`: forked from a server that
    imported coretools already, but for the SDK's transport, chosen by a variable read at start, which takes
    a fork server of its own, dearer than one server."""

    def __init__(self, root: Path, *flags: str, stderr: Path, wire: str = "pipe", forked: bool = False) -> None:
        self._err = stderr.open("wb")
        env = {k: v for k, v in server_env().items() if k != "CORETOOLS_STDIO"}  # the default transport
        if wire == "sdk":
            env["CORETOOLS_STDIO"] = "sdk"
        command = server_command([root], *flags, transport="stdio")
        if forked and wire != "sdk":
            command = server_fork.command(command[1:], env)
        if wire == "socket":
            ours, theirs = zip(socket.socketpair(), socket.socketpair())
            with theirs[0], theirs[1]:
                self.proc = subprocess.Popen(
                    command, stdin=theirs[0], stdout=theirs[1], stderr=self._err, env=env, cwd=str(REPO)
                )
            self._stdin, self._stdout = ours[0].makefile("wb"), ours[1].makefile("rb")
            self._sockets = ours
        else:
            self.proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=env, cwd=str(REPO)
            )
            self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
            self._sockets = ()
        self.messages: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.send_json({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT})
        assert "result" in self.reply("init", timeout=60)
        self.send_json({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.ping("warm")

    def _pump(self) -> None:
        assert self._stdout is not None
        for line in self._stdout:
            self.messages.put(json.loads(line))  # every stdout line must be JSON-RPC

    def send(self, data: bytes) -> None:
        assert self._stdin is not None
        self._stdin.write(data)
        self._stdin.flush()

    def send_json(self, message: dict) -> None:
        self.send(json.dumps(message).encode() + b"\n")

    def reply(self, request_id: Any, timeout: float = 30.0, *, error: bool | None = None) -> dict:
        """The next message answering `request_id` (for None: the next error with id null)."""
        deadline = time.monotonic() + timeout
        while True:
            for message in self.seen:
                if message.get("id") == request_id and (error is None or ("error" in message) == error):
                    self.seen.remove(message)
                    return message
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {request_id!r} (server alive: {self.proc.poll() is None})"
            try:
                self.seen.append(self.messages.get(timeout=min(left, 1.0)))
            except queue.Empty:
                ended = self.proc.poll()
                assert ended is None, f"the server exited ({ended}): {Path(self._err.name).read_text()[-3000:]}"

    def ping(self, name: str) -> None:
        self.send_json({"jsonrpc": "2.0", "id": f"ping-{name}", "method": "ping"})
        assert self.reply(f"ping-{name}")["result"] == {}

    def peak(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) * 1024

    def close(self) -> str:
        if self._err.closed:
            return Path(self._err.name).read_text(errors="replace")
        if self._stdin is not None:
            self._stdin.close()
        for sock in self._sockets[:1]:
            sock.shutdown(socket.SHUT_WR)  # end of input, as a host that closes its end
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()
        for sock in self._sockets:
            sock.close()
        return Path(self._err.name).read_text(errors="replace")


@pytest.fixture
def stdio(root: Path, tmp_path: Path):
    servers: list[RawStdio] = []

    def start(*flags: str, wire: str = "pipe", forked: bool = True) -> RawStdio:
        servers.append(RawStdio(root, *flags, stderr=tmp_path / f"stderr-{len(servers)}.log", wire=wire, forked=forked))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _call(request_id: Any, name: str, arguments: str) -> bytes:
    """A tools/call line with `arguments` spliced in as raw JSON text (so it can be anything)."""
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call"})[:-1]
    return f'{head}, "params": {{"name": "{name}", "arguments": {arguments}}}}}\n'.encode("utf-8", "surrogatepass")


# -- stdio: the message size limit -------------------------------------------------------------------------


@pytest.mark.parametrize("wire", ["pipe", "socket"])
def test_a_200_mb_stdio_line_is_discarded_as_it_streams_and_answered(stdio, root: Path, wire: str) -> None:
    server = stdio(wire=wire, forked=False)  # its own process: its memory is measured
    idle = server.peak()
    head = _call("huge", "write_file", '{"file_path": "huge.txt", "content": "')[:-4]
    server.send(head)
    chunk = b"a" * MIB
    for _ in range(200):
        server.send(chunk)
    server.send(b'"}}}\n')
    answer = server.reply("huge", timeout=120)
    grown = server.peak() - idle
    assert answer["error"]["code"] == -32600
    message = answer["error"]["message"]
    assert f"{DEFAULT_LIMIT:,} bytes" in message and "--max-message-bytes" in message, message
    assert f"{len(head) + 200 * MIB + 4:,} bytes" in message, message  # the true size, counted as it streamed
    assert grown < DEFAULT_LIMIT + 12 * MIB, f"peak RSS grew by {grown / MIB:.0f} MiB"
    assert not (root / "huge.txt").exists()
    server.ping("after")
    content = "b" * (3 * MIB)  # a message under the limit is still served
    server.send(_call("under", "write_file", json.dumps({"file_path": "under.txt", "content": content})))
    assert not server.reply("under", timeout=60)["result"].get("isError"), "a 3 MB message was refused"
    assert (root / "under.txt").read_text() == content


def test_max_message_bytes_sets_the_stdio_limit(stdio) -> None:
    server = stdio("--max-message-bytes", "2000")
    padding = {"_meta": {"pad": "x" * 2500}}
    server.send_json({"jsonrpc": "2.0", "id": "over", "method": "ping", "params": padding})
    message = server.reply("over")["error"]["message"]
    assert "2,000 bytes" in message and "--max-message-bytes" in message, message
    server.send_json({"jsonrpc": "2.0", "id": "fits", "method": "ping", "params": {"_meta": {"pad": "x" * 1500}}})
    assert server.reply("fits")["result"] == {}


# -- stdio: lines that are not JSON-RPC messages -----------------------------------------------------------

SURROGATE = _call(10, "read_file", '{"absolute_path": "\\ud800.txt"}')
LOW_SURROGATE = _call(11, "read_file", '{"absolute_path": "x\\udc00"}')
HIGH, LOW = b"\\ud800", b"\\udc00"
UNREADABLE = {  # name: (line, id of the answer, code, what its message must say)
    "lone surrogate": (SURROGATE, 10, -32700, f"lone surrogate {HIGH.decode()} at offset {SURROGATE.index(HIGH)}"),
    "lone low surrogate": (
        LOW_SURROGATE, 11, -32700, f"lone surrogate {LOW.decode()} at offset {LOW_SURROGATE.index(LOW)}"
    ),
    "raw NUL in a string": (_call(12, "read_file", '{"absolute_path": "a\x00b"}'), 12, -32700, "raw NUL (U+0000)"),
    "raw NUL between members": (b'{"jsonrpc": "2.0", "id": 13, "method": "ping"\x00}\n', 13, -32700, "raw NUL"),
    "500,000 levels of nesting": (
        _call(14, "read_file", '{"absolute_path": ' + "[" * 500_000 + "]" * 500_000 + "}"),
        14,
        -32700,
        "nested more than 200 levels deep",
    ),
    "deep nesting before the id": (
        b'{"jsonrpc": "2.0", "params": ' + b"[" * 5000 + b"]" * 5000 + b', "method": "ping", "id": 15}\n',
        None,
        -32700,
        "nested more than 200 levels deep",
    ),
    "not JSON": (b"{bad\n", None, -32700, "Parse error"),
    "no method": (b'{"jsonrpc": "2.0", "id": 16}\n', 16, -32600, "method: Field required"),
    "params not an object": (b'{"jsonrpc": "2.0", "id": 17, "method": "ping", "params": 3}\n', 17, -32600, "params"),
}


@pytest.mark.parametrize("wire", ["pipe", "socket", "sdk"])
def test_unreadable_stdio_lines_are_answered_and_the_next_one_served(stdio, wire: str) -> None:
    server = stdio(wire=wire)
    for name, (line, request_id, code, says) in UNREADABLE.items():
        server.send(line)
        answer = server.reply(request_id, error=True)
        assert answer["error"]["code"] == code, (name, answer)
        assert says in answer["error"]["message"], (name, answer)
        server.ping(name.replace(" ", "-"))
    errors = server.close()
    assert "Traceback" not in errors, errors


def test_a_nul_in_a_shell_command_is_an_invalid_parameter(stdio) -> None:
    server = stdio()
    server.send(_call("nul", "run_shell_command", json.dumps({"command": "echo a\x00b"})))
    result = server.reply("nul", timeout=60)["result"]
    text = result["content"][0]["text"]
    assert result["isError"] and "Internal error" not in text, text
    assert "params/command contains a NUL character (\\x00) at offset 6" in text, text
    errors = server.close()
    assert "Traceback" not in errors, errors


# -- HTTP ---------------------------------------------------------------------------------------------------

HTTP_LIMIT = 200_000


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("bad-input-http")
    with HttpServer.start([root], "--max-message-bytes", str(HTTP_LIMIT), forked=True) as server:
        yield server


def _exchange(server: HttpServer, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send one raw request (its head without the final blank line) and read the answer to the end."""
    url = urlparse(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(head + b"connection: close\r\n\r\n" + body)
        answer = b""
        while chunk := sock.recv(1 << 16):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def _post(server: HttpServer, body: bytes, host: bytes = b"127.0.0.1", extra: bytes = b"") -> tuple[int, bytes]:
    head = (
        b"POST /mcp HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
        b"accept: application/json, text/event-stream\r\ncontent-length: %d\r\n%s" % (host, len(body), extra)
    )
    return _exchange(server, head, body)


def test_http_names_a_lone_surrogate(http: HttpServer) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": INIT})
    body = body.replace('"raw"', '"\\ud800raw"').encode()
    status, answer = _post(http, body)
    reply = json.loads(answer)
    assert status == 400 and reply["error"]["code"] == -32700, answer
    offset = body.index(b"\\ud800")
    assert f"lone surrogate \\ud800 at offset {offset}" in reply["error"]["message"], reply
    assert reply["id"] == 7


def test_http_body_over_max_message_bytes_names_the_option(http: HttpServer) -> None:
    status, answer = _post(http, b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "' + b"a" * HTTP_LIMIT + b'"}')
    assert status == 413, answer
    assert f"{HTTP_LIMIT:,} bytes" in answer.decode() and "--max-message-bytes" in answer.decode(), answer


def test_http_a_head_of_10000_headers_is_refused_cleanly(http: HttpServer) -> None:
    headers = b"".join(b"x-filler-%d: v\r\n" % i for i in range(10_000))
    status, answer = _exchange(http, b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n" + headers)
    assert status == 431, answer
    time.sleep(0.5)  # whatever the refusal logs is on stderr by now
    status, _ = _post(http, b"{bad")
    assert status == 400  # still serving
    log = "".join(http.stderr)
    assert "Fatal error" not in log and "Traceback" not in log, log


@pytest.mark.parametrize("host", [b"localhost", b"127.0.0.1", b"[::1]", b"localhost:80", b"LOCALHOST"])
def test_http_accepts_loopback_names_without_a_port(http: HttpServer, host: bytes) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).encode()
    origin = b"origin: http://" + host.lower() + b"\r\n"
    status, answer = _post(http, body, host=host, extra=origin)
    assert status == 200, answer


def test_http_still_refuses_other_hosts(http: HttpServer) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).encode()
    for host in (b"evil.example", b"localhost.evil.example", b"127.0.0.1.evil.example:80"):
        status, _ = _post(http, body, host=host)
        assert status == 421, host
