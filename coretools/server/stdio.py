"""The stdio transport: JSON-RPC lines read and written by the event loop itself, with no worker threads.

The SDK's `stdio_server` reads every line and writes every reply in a worker thread: three thread hops per
request. On a small machine each hop costs tens of microseconds, and worse, a worker that wakes while a
tool is running takes the GIL at the tool's first system call, so every `open` or `fstat` a tool makes
can stall behind it (measured: a 2 KB `read_file` spent ~60 us of its ~180 us waiting so). Here the loop
polls stdin and stdout and does non-blocking reads and writes on them instead.

Only the byte moving is ours: the SDK still frames, parses and serialises the messages (its
`stdio_server` is given our two streams). Non-blocking mode belongs to an open file description, which
the host and our children may share with us, so the pipes are reopened through `/proc/self/fd` to get
descriptions of our own, and the shared ones are never touched. While serving, fd 0 reads the null
device and fd 1 points at stderr, as with the SDK, so stray output from a handler or a child process
cannot reach the wire; both are restored on exit.

Where this cannot be done (not Linux, stdin or stdout not a pipe, no /proc), `claim_pipes` returns None
and the server uses the SDK's threaded transport. `CORETOOLS_STDIO=sdk` asks for that one explicitly.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio

READ_SIZE = 1 << 16


class LineReader:
    """`async for line in reader`: the lines of a non-blocking descriptor, decoded as UTF-8 (bad bytes
    replaced, as the SDK does); a last line without a newline is still yielded at end of input."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._scanned = 0  # no newline in buffer[:_scanned]: a long message is not rescanned per chunk
        self._eof = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._scanned = 0
                return line.decode("utf-8", "replace")
            self._scanned = len(self._buffer)
            if self._eof:
                if not self._buffer:
                    raise StopAsyncIteration
                line = bytes(self._buffer)
                self._buffer.clear()
                self._scanned = 0
                return line.decode("utf-8", "replace")
            try:
                chunk = os.read(self._fd, READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


class Writer:
    """`write` collects text, `flush` sends it, waiting for room in the pipe when it is full (a client that
    stops reading holds up only the replies, never the loop)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: list[str] = []
        self._hung_up = False

    async def write(self, text: str) -> None:
        self._pending.append(text)

    async def flush(self) -> None:
        data = memoryview("".join(self._pending).encode("utf-8", "replace"))
        self._pending.clear()
        while data and not self._hung_up:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except BrokenPipeError:
                # The client is gone. Replies have nowhere to go; stdin's end of input will stop the server,
                # without a traceback for a client that simply hung up.
                self._hung_up = True
                break
            data = data[written:]


@dataclass
class Pipes:
    reader: LineReader
    writer: Writer


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


@contextmanager
def claim_pipes() -> Iterator[Pipes | None]:
    """Our own non-blocking descriptions of the stdin and stdout pipes, with fd 0 and 1 diverted while
    they are in use; None (and nothing changed) where that is not possible."""
    if os.environ.get("CORETOOLS_STDIO") == "sdk" or sys.platform != "linux" or not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    opened: list[int] = []
    try:
        for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY)):
            opened.append(os.open(f"/proc/self/fd/{fd}", mode | os.O_NONBLOCK | os.O_CLOEXEC))
        # the wire as it was, to put back on exit (above 2, so it cannot be mistaken for a standard stream)
        saved = [os.dup(0), os.dup(1)]
    except OSError:
        for fd in opened:
            os.close(fd)
        yield None
        return
    try:
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
        yield Pipes(LineReader(opened[0]), Writer(opened[1]))
    finally:
        for fd, original in zip((0, 1), saved):
            try:
                os.dup2(original, fd)
            except OSError:
                pass
            os.close(original)
        for fd in opened:
            os.close(fd)
