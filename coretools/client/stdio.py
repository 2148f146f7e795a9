"""A stdio transport for MCP servers that reads big messages in linear time.

Why not the SDK's ``stdio_client``: its reader decodes the pipe in 64 KiB text chunks and
re-joins the whole pending buffer on every chunk (``(buffer + chunk).split("\\n")``), which is
quadratic in the message size; ``benchmarks/bench_client.py`` shows the difference on 1 MB
and 10 MB tool results. This reader looks for newlines only in the bytes just received, keeps
the pieces of an unfinished line in a list, joins them once, and hands raw bytes to the JSON
validator (no text decoding step).

It also owns the child's lifecycle the way the bridge needs: stderr is drained continuously
into a bounded tail (so a failed start can be reported with what the server said), the server
runs in its own process group, and closing ends the whole group. The SDK only signals the
group when the server itself does not exit after stdin closes, so a grandchild started by a
server that exits cleanly would outlive the bridge; here any live member is terminated.

Shutdown order (spec): close stdin, give the server ``EXIT_GRACE`` seconds, SIGTERM the group,
another ``TERM_GRACE`` seconds, then SIGKILL.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import mcp.types as mcp_types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from .notices import client_logger

logger = client_logger(__name__)

READ_SIZE = 1 << 20
EXIT_GRACE = 2.0
TERM_GRACE = 2.0
_POLL = 0.02


class StdioServerProcess:
    """One MCP server subprocess; :meth:`connect` yields the ``(read, write)`` stream pair."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        label: str = "",
        stderr_limit: int = 16_384,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.cwd = cwd
        self.label = label or os.path.basename(command)
        self.stderr_limit = stderr_limit
        self.pid: int | None = None
        self.returncode: int | None = None
        self._stderr = bytearray()
        self._stderr_done: anyio.Event | None = None
        self._stderr_log = logging.getLogger(f"{__name__}.stderr")

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the server wrote to stderr."""
        return bytes(self._stderr[-limit:]).decode("utf-8", "replace")

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream, anyio.abc.ObjectSendStream]]:
        """Spawn the server; on exit stop it and everything it started."""
        # Like the SDK and the desktop hosts: a minimal inherited environment plus the config's.
        process = await anyio.open_process(
            [self.command, *self.args],
            env=get_default_environment() | self.env,
            cwd=self.cwd,
            start_new_session=sys.platform != "win32",
        )
        self.pid = process.pid
        self._stderr_done = anyio.Event()
        read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump_stdout, process, read_send)
            tg.start_soon(self._pump_stdin, process, write_receive)
            tg.start_soon(self._pump_stderr, process)
            try:
                yield read_receive, write_send
            finally:
                with anyio.CancelScope(shield=True):
                    await write_send.aclose()
                    await read_receive.aclose()
                    await self._stop(process)
                    self.returncode = process.returncode
                tg.cancel_scope.cancel()

    async def _pump_stdout(self, process: anyio.abc.Process, sink: anyio.abc.ObjectSendStream) -> None:
        assert process.stdout is not None
        pending: list[bytes] = []
        async with sink:
            while True:
                try:
                    chunk = await process.stdout.receive(READ_SIZE)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    if pending:
                        pending.append(chunk[start:end])
                        line = b"".join(pending)
                        pending.clear()
                    else:
                        line = chunk[start:end]
                    start = end + 1
                    if line.strip():
                        try:
                            await sink.send(self._parse(line))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return
                if start < len(chunk):
                    pending.append(chunk[start:] if start else chunk)

    def _parse(self, line: bytes) -> SessionMessage | Exception:
        try:
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError:
            excerpt = line[:80].decode("utf-8", "replace") + ("…" if len(line) > 80 else "")
            logger.debug("%s: unparseable line on stdout (%d bytes): %r", self.label, len(line), excerpt)
            return ValueError(f"a line on stdout is not JSON-RPC ({len(line)} bytes): {excerpt!r}")

    async def _pump_stdin(self, process: anyio.abc.Process, source: anyio.abc.ObjectReceiveStream) -> None:
        assert process.stdin is not None
        async with source:
            async for message in source:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                try:
                    await process.stdin.send(data)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    return

    async def _pump_stderr(self, process: anyio.abc.Process) -> None:
        assert process.stderr is not None and self._stderr_done is not None
        try:
            await self._read_stderr(process.stderr)
        finally:
            self._stderr_done.set()

    async def _read_stderr(self, stderr: anyio.abc.ByteReceiveStream) -> None:
        while True:
            try:
                chunk = await stderr.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            self._stderr += chunk
            if len(self._stderr) > self.stderr_limit:
                del self._stderr[: len(self._stderr) - self.stderr_limit]
            if self._stderr_log.isEnabledFor(logging.DEBUG):
                for line in chunk.decode("utf-8", "replace").splitlines():
                    self._stderr_log.debug("[%s] %s", self.label, line)

    async def _stop(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
        await _wait(lambda: process.returncode is not None, EXIT_GRACE)
        if process.returncode is None or _group_alive(process.pid):
            _signal(process, signal.SIGTERM)
            done = await _wait(lambda: process.returncode is not None and not _group_alive(process.pid), TERM_GRACE)
            if not done:
                logger.warning("%s: server did not stop after SIGTERM; killing it", self.label)
                _signal(process, signal.SIGKILL)
                await _wait(lambda: process.returncode is not None, TERM_GRACE)
        if self._stderr_done is not None:
            with anyio.move_on_after(0.5):  # let the last words reach the tail (a failed start's reason)
                await self._stderr_done.wait()
        with anyio.move_on_after(TERM_GRACE):
            await process.aclose()


async def _wait(condition, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(_POLL)
        return True
    return False


def _signal(process: anyio.abc.Process, signum: int) -> None:
    """Signal the server's whole process group (just the server where groups do not exist)."""
    if hasattr(os, "killpg"):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)
    elif process.returncode is None:  # pragma: no cover - Windows
        process.kill() if signum == getattr(signal, "SIGKILL", None) else process.terminate()


def _group_alive(pgid: int) -> bool:
    """Whether the group still has a member that is not a zombie.

    ``killpg(pgid, 0)`` also succeeds for zombies, which linger when nothing reaps orphans
    (PID 1 in many containers), so on Linux the members' states are read from ``/proc``.
    """
    if not hasattr(os, "killpg"):  # pragma: no cover - Windows
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
