"""The stdio transport: JSON-RPC lines read and written by the event loop itself, with no worker threads.

The SDK's `stdio_server` reads every line and writes every reply in a worker thread: three thread hops per
request. On a small machine each hop costs tens of microseconds, and worse, a worker that wakes while a
tool is running takes the GIL at the tool's first system call, so every `open` or `fstat` a tool makes
can stall behind it (measured: a 2 KB `read_file` spent ~60 us of its ~180 us waiting so). Here the loop
polls stdin and stdout and does non-blocking reads and writes on them instead.

Reading is also where a hostile or broken client is met: a line over `--max-message-bytes` is discarded
as it arrives (`LineReader`), never held whole, and every line that is not a JSON-RPC message is answered
with an error (`message_streams`, `message_errors`) instead of being dropped with the host left waiting.
The SDK still validates and serialises the messages.

Non-blocking mode belongs to an open file description, which the host and our children may share with
us, so pipes are reopened through `/proc/self/fd` to get descriptions of our own, and sockets (what hosts
written for Node.js give) are read and written with per-call `MSG_DONTWAIT`; the shared descriptions are
never touched. While serving, fd 0 reads the null device and fd 1 points at stderr, as with the SDK, so
stray output from a handler or a child process cannot reach the wire; both are restored on exit.

Where this cannot be done (not Linux, stdin or stdout neither a pipe nor a socket), `claim_pipes` returns
None and the server uses the SDK's threaded transport, whose unreadable lines `answering` still answers
(but which reads a line whole). `CORETOOLS_STDIO=sdk` asks for that one explicitly.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import anyio

from coretools.sandbox import settings
from coretools.server.config import DEFAULT_MAX_MESSAGE_BYTES

logger = logging.getLogger("coretools")

READ_SIZE = 1 << 16
HEAD_BYTES = 4096  # what is kept of an oversized line, to find its request id


class Oversized(NamedTuple):
    """A line longer than the reader's limit, discarded as it arrived: its size and its first bytes (where
    the request id usually is)."""

    size: int
    head: str


class LineReader:
    """`async for line in reader`: the lines of a non-blocking descriptor, decoded as UTF-8 (bad bytes
    replaced, as the SDK does); a last line without a newline is still yielded at end of input.

    A line over `limit` bytes is never held: once the buffer passes the limit without a newline, what
    arrives is counted and dropped until the line ends, and the reader yields an `Oversized` in its place.
    The memory one line can take is the limit plus one read."""

    def __init__(
        self, fd: int, limit: int = DEFAULT_MAX_MESSAGE_BYTES, read: Callable[[int], bytes] | None = None
    ) -> None:
        self._fd = fd
        self._read = read or functools.partial(os.read, fd)
        self._limit = limit
        self._buffer = bytearray()
        self._scanned = 0  # no newline in buffer[:_scanned]: a long message is not rescanned per chunk
        self._dropped: Oversized | None = None  # the line being discarded, its size so far
        self._eof = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str | Oversized:
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                return self._take(end + 1)
            self._scanned = len(self._buffer)
            if self._dropped is not None or len(self._buffer) > self._limit:
                self._drop(len(self._buffer))
            if self._eof:
                if not self._buffer and self._dropped is None:
                    raise StopAsyncIteration
                return self._take(len(self._buffer))
            try:
                chunk = self._read(READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    def _take(self, length: int) -> str | Oversized:
        """The line that ends `length` bytes into the buffer, removed from it."""
        if self._dropped is None and length - 1 > self._limit:  # a long line's end came in the same read
            self._drop(length - 1)
            length = 1
        line = bytes(self._buffer[:length])
        del self._buffer[:length]
        self._scanned = 0
        if self._dropped is not None:
            dropped, self._dropped = self._dropped, None
            return dropped._replace(size=dropped.size + len(line.rstrip(b"\r\n")))
        return line.decode("utf-8", "replace")

    def _drop(self, length: int) -> None:
        """Discard the first `length` bytes of the buffer, all of them part of an oversized line."""
        if self._dropped is None:
            head = bytes(self._buffer[:HEAD_BYTES]).decode("utf-8", "replace")
            self._dropped = Oversized(0, head)
        self._dropped = self._dropped._replace(size=self._dropped.size + length)
        del self._buffer[:length]
        self._scanned = 0


class Writer:
    """`write` collects text, `flush` sends it, waiting for room in the pipe when it is full (a client that
    stops reading holds up only the replies, never the loop)."""

    def __init__(self, fd: int, write: Callable[[memoryview], int] | None = None) -> None:
        self._fd = fd
        self._write = write or functools.partial(os.write, fd)
        self._pending: list[str] = []
        self._hung_up = False

    async def write(self, text: str) -> None:
        self._pending.append(text)

    async def flush(self) -> None:
        data = memoryview("".join(self._pending).encode("utf-8", "replace"))
        self._pending.clear()
        while data and not self._hung_up:
            try:
                written = self._write(data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except (BrokenPipeError, ConnectionResetError):
                # The client is gone. Replies have nowhere to go; stdin's end of input will stop the server,
                # without a traceback for a client that simply hung up.
                self._hung_up = True
                break
            data = data[written:]


@dataclass
class Pipes:
    reader: LineReader
    writer: Writer


@asynccontextmanager
async def message_streams(pipes: Pipes, limit: int) -> AsyncIterator[tuple[Any, Any]]:
    """The server's read and write streams over `pipes`, as the SDK's `stdio_server` makes them, except that
    no line goes unanswered: one that is not a JSON-RPC message, or is over `limit` bytes, gets an error reply
    (`message_errors`) and the next line is read as usual. The SDK would hand the server an exception the
    server only logs, leaving the host waiting for an answer that never comes."""
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    from coretools.server.message_errors import Unreadable, read_message, too_large

    read_writer, read_stream = create_context_streams[SessionMessage](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def read_lines(replies: Any) -> None:
        async with read_writer, replies:
            async for line in pipes.reader:
                if isinstance(line, Oversized):
                    logger.warning("refused a stdio message of %d bytes (--max-message-bytes %d)", line.size, limit)
                    await replies.send(SessionMessage(too_large(line.size, limit, line.head)))
                    continue
                if not line or line.isspace():  # (not strip(): that would copy a long line)
                    continue
                try:
                    message = read_message(line)
                except Unreadable as exc:
                    logger.info("unreadable stdio message: %s", exc)
                    await replies.send(SessionMessage(exc.reply))
                    continue
                await read_writer.send(SessionMessage(message))

    async def write_lines() -> None:
        async with write_reader:
            async for session_message in write_reader:
                await pipes.writer.write(session_message.message.model_dump_json(by_alias=True, exclude_unset=True))
                await pipes.writer.write("\n")
                await pipes.writer.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_lines, write_stream.clone())
        tg.start_soon(write_lines)
        yield read_stream, write_stream


@asynccontextmanager
async def answering(streams: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's own stdio transport (`streams`, where ours cannot be had), with each line it could not read
    answered (`message_errors.answer_to`) instead of handed to the server, which would only log it."""
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    from coretools.server.message_errors import answer_to

    async with streams as (read, write):
        relay_writer, relayed = create_context_streams[SessionMessage](0)

        async def relay(replies: Any) -> None:
            async with relay_writer, replies:
                async for item in read:
                    if isinstance(item, Exception):
                        logger.info("unreadable stdio message: %s", item)
                        await replies.send(SessionMessage(answer_to(item)))
                    else:
                        await relay_writer.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay, write.clone())
            yield relayed, write


def _kind(fd: int) -> str | None:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    return "pipe" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else None


def _without_waiting(call: Callable[[Any, int], Any]) -> Callable[[Any], Any]:
    """A socket's `recv` or `send` that raises `BlockingIOError` instead of waiting."""
    return lambda arg: call(arg, socket.MSG_DONTWAIT)


@contextmanager
def claim_pipes(limit: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[Pipes | None]:
    """Our own non-blocking access to the stdin and stdout pipes or sockets, with fd 0 and 1 diverted while
    they are in use, and lines read up to `limit` bytes; None (and nothing changed) where that is not
    possible.

    A pipe is reopened through /proc as a non-blocking description of our own. A socket (hosts written for
    Node.js give their servers socket pairs, not pipes) cannot be reopened, so a duplicate of it is read and
    written with per-call non-blocking flags (`MSG_DONTWAIT`), leaving the shared description as it is."""
    kinds = (_kind(0), _kind(1))
    if settings.sdk_stdio() or sys.platform != "linux" or None in kinds:
        yield None
        return
    opened: list[int] = []
    sockets: dict[int, socket.socket] = {}
    try:
        for fd, mode, kind in ((0, os.O_RDONLY, kinds[0]), (1, os.O_WRONLY, kinds[1])):
            if kind == "socket":
                opened.append(os.dup(fd))  # not inherited by children, as O_CLOEXEC below
                sockets[fd] = socket.socket(fileno=opened[-1])
            else:
                opened.append(os.open(f"/proc/self/fd/{fd}", mode | os.O_NONBLOCK | os.O_CLOEXEC))
        # the wire as it was, to put back on exit (above 2, so it cannot be mistaken for a standard stream)
        saved = [os.dup(0), os.dup(1)]
    except OSError:
        for sock in sockets.values():
            sock.detach()
        for fd in opened:
            os.close(fd)
        yield None
        return
    read = _without_waiting(sockets[0].recv) if 0 in sockets else None
    write = _without_waiting(sockets[1].send) if 1 in sockets else None
    try:
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
        yield Pipes(LineReader(opened[0], limit, read), Writer(opened[1], write))
    finally:
        for fd, original in zip((0, 1), saved):
            try:
                os.dup2(original, fd)
            except OSError:
                pass
            os.close(original)
        for sock in sockets.values():
            sock.detach()
        for fd in opened:
            os.close(fd)
