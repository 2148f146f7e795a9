"""The event-loop stdio transport (coretools.server.stdio): framing, back-pressure, the fd diversion, and the
fallback to the SDK's threaded transport where stdin/stdout are not pipes.

Real pipes and real server subprocesses throughout; the protocol itself over this transport is also covered
by every stdio test of the other suites (the official client talks to the server over pipes). The servers
are forked (`server_fork`), which hands them the very descriptors it was given (pipes, sockets, a regular
file) and keeps no other reference to them; the probes of the descriptors' claim at start-up run in an
interpreter of their own.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

import server_fork
from coretools.server.stdio import HEAD_BYTES, LineReader, Oversized, Writer
from tests.conftest import REPO

pytestmark = pytest.mark.anyio


def _nonblocking_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    for fd in (r, w):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    return r, w


def _feed(fd: int, pieces: list[bytes], pause: float = 0.01) -> threading.Thread:
    """Write `pieces` to a (blocking-mode view of a) pipe from a thread, with pauses, then close it."""

    def run() -> None:
        try:
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    try:
                        view = view[os.write(fd, view) :]
                    except BlockingIOError:
                        time.sleep(0.001)
                time.sleep(pause)
        finally:
            os.close(fd)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


async def _lines(reader: LineReader) -> list[str]:
    return [line async for line in reader]


async def test_reader_frames_lines_however_the_bytes_arrive() -> None:
    big = json.dumps({"jsonrpc": "2.0", "id": 3, "params": {"content": "é" * 1_500_000}})  # ~3 MB, many reads
    wire = (b'{"id":1}\n{"id":2}\n' + big.encode() + b"\n" + b'{"id":4}').decode()  # no final newline
    data = wire.encode()
    pieces = [data[:5], data[5:13], data[13:30], data[30:100_000], data[100_000:]]
    r, w = _nonblocking_pipe()
    thread = _feed(w, pieces)
    try:
        lines = await _lines(LineReader(r, limit=len(big) + 1))
    finally:
        thread.join()
        os.close(r)
    assert lines == ['{"id":1}\n', '{"id":2}\n', big + "\n", '{"id":4}']


async def test_reader_discards_a_line_over_its_limit_and_reads_on() -> None:
    """A line over the limit is never held: it comes out as an `Oversized` with its true size and first
    bytes, whether its end arrives in a later read, in the read that passed the limit, or never (end of
    input); a line of exactly the limit is a line."""
    limit = 100_000
    exact = b"e" * limit
    wire = [
        b'{"id":1}\n' + b"a" * 70_000, b"a" * 70_000, b"a" * 70_000 + b'\n{"id":2}\n',  # ends in a later read
        exact + b"\n",
        b"b" * (limit + 10) + b'\n{"id":3}\n',  # ends in the read that passed the limit
        b"c" * 250_000,  # never ends
    ]
    r, w = _nonblocking_pipe()
    thread = _feed(w, wire)
    try:
        lines = await _lines(LineReader(r, limit=limit))
    finally:
        thread.join()
        os.close(r)
    assert lines[0] == '{"id":1}\n'
    assert lines[1] == Oversized(210_000, "a" * HEAD_BYTES)
    assert lines[2:4] == ['{"id":2}\n', exact.decode() + "\n"]
    assert lines[4] == Oversized(limit + 10, "b" * HEAD_BYTES)
    assert lines[5:] == ['{"id":3}\n', Oversized(250_000, "c" * HEAD_BYTES)]


async def test_reader_replaces_invalid_utf8_and_splits_multibyte_characters_safely() -> None:
    r, w = _nonblocking_pipe()
    snowman = "☃".encode()
    thread = _feed(w, [b'{"a":"x' + snowman[:1], snowman[1:] + b'\xff"}\n'])
    try:
        lines = await _lines(LineReader(r))
    finally:
        thread.join()
        os.close(r)
    assert lines == ['{"a":"x☃\ufffd"}\n']


async def test_writer_waits_for_a_slow_reader_and_loses_nothing() -> None:
    r, w = _nonblocking_pipe()
    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    payload = "".join(f"line {i:07d} " + "ü" * 40 + "\n" for i in range(60_000))  # ~5.5 MB, pipe holds 64 KB
    received = bytearray()

    def slow_reader() -> None:
        time.sleep(0.2)  # the pipe is full long before this: the writer must wait, not fail or drop
        while chunk := os.read(r, 1 << 16):
            received.extend(chunk)

    thread = threading.Thread(target=slow_reader)
    thread.start()
    writer = Writer(w)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            for start in range(0, len(payload), 1_000_000):
                await writer.write(payload[start : start + 1_000_000])
            await writer.flush()
            tg.cancel_scope.cancel()
    finally:
        os.close(w)
        thread.join()
        os.close(r)
    assert received.decode() == payload
    assert ticks >= 5  # the loop kept running while the writer waited for room in the pipe


_CLAIM_PROBE = r"""
import fcntl, os, sys
from coretools.server.stdio import claim_pipes
with claim_pipes() as pipes:
    sys.stderr.write(f"claimed={pipes is not None}\n")
    if pipes is not None:
        os.write(1, b"stray-bytes-from-a-handler\n")  # fd 1 is stderr now: must not reach the wire
        os.system("echo stray-from-a-child")  # a child's stdout too
        shared_nonblocking = bool(fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK)
        sys.stderr.write(f"stdin-now-null={os.path.realpath('/proc/self/fd/0') == '/dev/null'}\n")
        os.write(pipes.writer._fd, b"wire\n")
# restored: fd 0 and 1 are the pipes again, and their shared descriptions were never made non-blocking
sys.stderr.write(f"shared-nonblocking={bool(fcntl.fcntl(1, fcntl.F_GETFL) & os.O_NONBLOCK)}"
                 f"/{bool(fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK)}\n")
sys.stdout.write("after\n")
"""


def _probe(stdin, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-c", _CLAIM_PROBE], stdin=stdin, capture_output=True, env=env, timeout=60, check=True
    )


@pytest.mark.skipif(sys.platform != "linux", reason="the event-loop transport is Linux-only")
def test_claim_diverts_fd_1_and_0_and_restores_them() -> None:
    done = _probe(subprocess.PIPE)
    err = done.stderr.decode()
    assert "claimed=True" in err
    assert done.stdout == b"wire\nafter\n"  # neither stray write reached the wire
    assert "stray-bytes-from-a-handler" in err and "stray-from-a-child" in err
    assert "stdin-now-null=True" in err
    assert "shared-nonblocking=False/False" in err


@pytest.mark.skipif(sys.platform != "linux", reason="the event-loop transport is Linux-only")
def test_claim_takes_sockets_as_node_hosts_give_them_and_leaves_them_blocking() -> None:
    """Hosts written for Node.js (libuv) give a server socket pairs, not pipes, for stdin and stdout."""
    stdin_ours, stdin_theirs = socket.socketpair()
    stdout_ours, stdout_theirs = socket.socketpair()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with stdin_ours, stdout_ours:
        with stdin_theirs, stdout_theirs:
            proc = subprocess.Popen(
                [sys.executable, "-c", _CLAIM_PROBE], stdin=stdin_theirs, stdout=stdout_theirs,
                stderr=subprocess.PIPE, env=env,
            )
        stdin_ours.shutdown(socket.SHUT_WR)
        _, err = proc.communicate(timeout=60)
        stdout_ours.settimeout(10)
        received = b""
        while chunk := stdout_ours.recv(1 << 16):
            received += chunk
    assert proc.returncode == 0, err.decode()
    assert "claimed=True" in err.decode()
    assert received == b"wire\nafter\n"
    assert "shared-nonblocking=False/False" in err.decode()


def test_claim_declines_when_stdin_is_not_a_pipe(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("")
    with source.open("rb") as stdin:
        done = _probe(stdin)
    assert "claimed=False" in done.stderr.decode()
    assert done.stdout == b"after\n"


def test_claim_declines_when_asked_for_the_sdk_transport() -> None:
    done = _probe(subprocess.PIPE, {"CORETOOLS_STDIO": "sdk"})
    assert "claimed=False" in done.stderr.decode()


def _server(env: dict[str, str], *args: str) -> list[str]:
    """`python -m coretools serve *args` under `env`, forked where it runs the default transport; the SDK's
    is chosen by a variable read at start, which takes a fork server of its own, dearer than one server."""
    argv = ["-m", "coretools", "serve", *args]
    return [sys.executable, *argv] if env.get("CORETOOLS_STDIO") else server_fork.command(argv, env)


def _requests(root: Path) -> bytes:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "read_file", "arguments": {"absolute_path": str(root / "a.txt")}}},
    ]
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def _converse(root: Path, stdin_from: Path | None = None, env_extra: dict | None = None) -> dict:
    """Run a real server, send the requests (through a pipe, or from a file), and collect the replies by id.
    Stdin stays open until the read_file reply is in: a client that closes it early is asking to shut down."""
    env = {k: v for k, v in os.environ.items() if k != "CORETOOLS_STDIO"}
    env |= {"PYTHONPATH": str(REPO), **(env_extra or {})}
    stdin = stdin_from.open("rb") if stdin_from else subprocess.PIPE
    proc = subprocess.Popen(
        _server(env, "--root", str(root)), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    replies: dict = {}
    try:
        assert proc.stdout is not None
        if proc.stdin is not None:
            proc.stdin.write(_requests(root))
            proc.stdin.flush()
        while 2 not in replies:
            raw = proc.stdout.readline()
            assert raw, f"the server closed stdout early: {proc.stderr.read().decode()}"  # type: ignore[union-attr]
            reply = json.loads(raw)  # every stdout line is JSON-RPC
            replies[reply.get("id")] = reply
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        else:
            stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == 0
    return replies


@pytest.mark.parametrize("transport", ["pipes", "sdk"])
def test_server_answers_over_either_transport(tmp_path: Path, transport: str) -> None:
    (tmp_path / "a.txt").write_text("hello from a file\n")
    replies = _converse(tmp_path, env_extra={"CORETOOLS_STDIO": "sdk"} if transport == "sdk" else None)
    assert replies[1]["result"]["serverInfo"]["name"] == "coretools"
    assert replies[2]["result"]["content"][0]["text"] == "hello from a file"


def test_server_answers_with_stdin_from_a_regular_file(tmp_path: Path) -> None:
    """Not a pipe: the SDK's transport takes over (epoll cannot watch a regular file). The file ends after the
    requests, which reads as the client hanging up: the last reply may be dropped, the first must come."""
    (tmp_path / "a.txt").write_text("hello from a file\n")
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_requests(tmp_path)[: _requests(tmp_path).rindex(b'{"jsonrpc"')])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with requests.open("rb") as stdin:
        done = subprocess.run(
            _server(env, "--root", str(tmp_path)), stdin=stdin, capture_output=True, env=env, timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1]
    assert replies[0]["result"]["serverInfo"]["name"] == "coretools"


def test_a_large_reply_to_a_slow_client_arrives_whole_and_later_requests_are_answered(tmp_path: Path) -> None:
    line = "".join(chr(0x400 + i % 200) for i in range(1500))  # Cyrillic-ish, 2 bytes each in UTF-8
    (tmp_path / "big.txt").write_text((line + "\n") * 2000)  # a ~6 MB reply
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        _server(env, "--root", str(tmp_path), "--max-result-chars", "0"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_requests(tmp_path).replace(b"a.txt", b"big.txt"))
        proc.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
        proc.stdin.flush()
        time.sleep(1.0)  # read nothing for a while: the server's pipe is full and it must wait
        replies = {}
        while not {2, 3} <= replies.keys():  # requests run concurrently: the ping may well be answered first
            raw = proc.stdout.readline()
            assert raw, "the server closed stdout before answering"
            reply = json.loads(raw)
            replies[reply.get("id")] = reply
        assert replies[2]["result"]["content"][0]["text"] == "\n".join([line] * 2000)
        assert replies[3]["result"] == {}
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
    assert proc.returncode == 0


@pytest.mark.skipif(sys.platform != "linux", reason="the event-loop transport is Linux-only")
def test_a_client_that_hangs_up_mid_reply_stops_the_server_quietly(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text(("x" * 1000 + "\n") * 2000)  # a 2 MB reply: far more than the pipe holds
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        _server(env, "--root", str(tmp_path)),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(_requests(tmp_path).replace(b"a.txt", b"big.txt"))
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    proc.stdout.read(1000)  # the read_file reply has started ...
    proc.stdout.close()  # ... and the client goes away
    time.sleep(0.5)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    errors = proc.stderr.read().decode()
    proc.stderr.close()
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors


@pytest.mark.parametrize("transport", ["pipes", "sdk"])
async def test_official_client_in_both_eras_over_either_transport(
    root: Path, mode: str, transport: str, tmp_path: Path
) -> None:
    from mcp import Client, stdio_client

    from tests.conftest import stdio_params, text_of

    lines = [f"over stdio, line {i:04d}" for i in range(1500)]
    (root / "hello.txt").write_text("\n".join(lines) + "\n")  # ~33 KB: a reply larger than one pipe write
    env = {"CORETOOLS_STDIO": "sdk"} if transport == "sdk" else {}  # the default: the variable unset
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(stdio_params([root], env=env, forked=True), errlog=errlog), mode=mode) as client:
            for _ in range(3):
                result = await client.call_tool("read_file", {"absolute_path": "hello.txt"})
                assert text_of(result) == "\n".join(lines)
            bad = await client.call_tool("read_file", {"absolute_path": "/etc/passwd"})
            assert bad.is_error and "Path not in workspace" in text_of(bad)
