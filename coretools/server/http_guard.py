"""Connection guard for the HTTP transport: what happens to a connection before its request reaches the app.

uvicorn on its own accepts every connection the kernel hands it and waits for a request head for as long
as the peer likes. Stalled connections therefore pile up until the process runs out of descriptors; from
then on asyncio's accept loop logs a traceback for every failed accept, and nobody, authorized clients
included, gets in. This module takes over the accept step and the start of each connection:

- `GuardedListener` accepts connections itself, a batch per wake-up, and keeps at most `cap` of them
  open. At the cap a new connection displaces the oldest one that has not yet sent a request (then the
  oldest idle kept-alive one); only when every open connection is busy with a request is the new one
  reset at once. A client that sends its request promptly therefore gets in however many stalled
  connections an attacker opens. If the process runs out of descriptors anyway (tools hold them too), the
  listener pauses for a moment instead of spinning and logging.
- `GuardedProtocol` (uvicorn's httptools protocol: llhttp, the parser of Node.js, in C) closes a
  connection that has not delivered a complete request, head and body, within `read_timeout` seconds of
  opening or of its previous response, and answers 431 to a request head over `MAX_HEAD_BYTES`.
- `ConnectionStats` counts what was displaced, refused and timed out; the listener logs one summary line
  per interval, and `RateLimitFilter` caps every other repeated log line the same way.
- `raise_nofile_limit()` lifts the soft descriptor limit towards the hard one, and `connection_cap()`
  gives connections at most half of the limit in force, leaving the rest to tools.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

logger = logging.getLogger("coretools.http")

ACCEPT_BATCH = 64
ACCEPT_PAUSE_SECONDS = 0.25
LISTEN_BACKLOG = 2048  # as uvicorn's own default
MAX_HEAD_BYTES = 16 * 1024  # a request line and headers, as h11's and Node's default limit
REFUSAL_LINGER_SECONDS = 1.0
SUMMARY_INTERVAL_SECONDS = 10.0
NOFILE_TARGET_MAX = 65536
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
RATE_LIMIT_EXEMPT = "coretools_rate_limit_exempt"
WAITING, BUSY, IDLE = "waiting", "busy", "idle"


# -- descriptor budget ------------------------------------------------------------------------------------


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, but not past 65,536; return (soft, hard) in force.

    The ceiling exists because tool subprocesses inherit the limit, and some programs walk every possible
    descriptor (to close them) at start: a soft limit in the millions makes them crawl. Connections never
    need more: `connection_cap` keeps them to half the limit and `--max-connections` lower still.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = NOFILE_TARGET_MAX if hard == resource.RLIM_INFINITY else min(hard, NOFILE_TARGET_MAX)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        except (ValueError, OSError):  # e.g. macOS refuses more than kern.maxfilesperproc
            logger.info("could not raise the descriptor limit from %d to %d", soft, ceiling)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def connection_cap(max_connections: int, nofile_soft: int) -> int:
    """Connections open at once: `max_connections`, and never more than half the descriptor limit, so that
    files, pipes and subprocesses of running tools always find descriptors."""
    if nofile_soft == resource.RLIM_INFINITY:
        return max(1, max_connections)
    return max(1, min(max_connections, nofile_soft // 2))


# -- counting and rate-limited logging --------------------------------------------------------------------


@dataclass
class ConnectionStats:
    """What the guard did since the last summary. Counters only; `take()` reads and resets them."""

    displaced: int = 0
    refused: int = 0
    timed_out: int = 0
    accept_errors: int = 0
    requests_refused: int = 0
    heads_refused: int = 0
    sessions_refused: int = 0

    def take(self) -> dict[str, int]:
        counts = {f.name: getattr(self, f.name) for f in fields(self)}
        for f in fields(self):
            setattr(self, f.name, 0)
        return counts


def summary_line(counts: dict[str, int], suppressed: int, seconds: float, cap: int, read_timeout: float, open_now: int) -> str | None:
    """One log line for the counts of the last `seconds`, or None if nothing happened."""
    parts = []
    if counts["displaced"]:
        parts.append(f"{counts['displaced']} connections that had sent no request displaced by new ones")
    if counts["refused"]:
        parts.append(f"{counts['refused']} new connections refused (every connection busy)")
    if counts["timed_out"]:
        parts.append(f"{counts['timed_out']} closed without a complete request after --read-timeout {read_timeout:g} s")
    if counts["accept_errors"]:
        parts.append(f"{counts['accept_errors']} accept errors (out of descriptors?)")
    if counts["heads_refused"]:
        parts.append(f"{counts['heads_refused']} requests refused with a head over {MAX_HEAD_BYTES // 1024} KiB")
    if counts["requests_refused"]:
        parts.append(f"{counts['requests_refused']} requests refused (Host, Origin or bearer token)")
    if counts["sessions_refused"]:
        parts.append(f"{counts['sessions_refused']} new sessions refused at --max-sessions")
    if suppressed:
        parts.append(f"{suppressed} repeated log lines suppressed")
    if not parts:
        return None
    return f"connections, last {seconds:.0f} s: " + "; ".join(parts) + f" ({open_now} open, cap {cap}: --max-connections)"


class RateLimitFilter(logging.Filter):
    """A handler filter: per `interval` seconds, at most `per_key` records with the same logger and message
    template and at most `total` records overall get through; the rest are counted, and the count goes
    into the next summary line. Records with the `RATE_LIMIT_EXEMPT` attribute always pass.

    A peer that can make the server log once per request (an invalid request line, a refused session)
    could otherwise grow the log as fast as it can send.
    """

    def __init__(self, interval: float = SUMMARY_INTERVAL_SECONDS, per_key: int = 5, total: int = 50, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval, self.per_key, self.total, self._clock = interval, per_key, total, clock
        self._lock = threading.Lock()
        self._window = clock()
        self._counts: dict[tuple[str, str], int] = {}
        self._passed = 0
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, RATE_LIMIT_EXEMPT, False):
            return True
        with self._lock:
            now = self._clock()
            if now - self._window >= self.interval:
                self._window, self._counts, self._passed = now, {}, 0
            key = (record.name, str(record.msg)[:200])
            seen = self._counts.get(key, 0)
            if seen >= self.per_key or self._passed >= self.total:
                self._suppressed += 1
                return False
            self._counts[key] = seen + 1
            self._passed += 1
            return True

    def take_suppressed(self) -> int:
        with self._lock:
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed


def install_log_filter(log_filter: logging.Filter) -> Callable[[], None]:
    """Attach `log_filter` to every handler of the root logger; return a function that detaches it."""
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(log_filter)

    def remove() -> None:
        for handler in handlers:
            handler.removeFilter(log_filter)

    return remove


# -- which connections are open, and which may be displaced -----------------------------------------------


class ConnectionRegistry:
    """The open connections, in two queues of displaceable ones (oldest first) plus a count.

    `waiting` connections have not sent a complete request head yet; `idle` ones are kept alive between
    requests. Busy connections (a request is being served) are only counted: they are never displaced.
    """

    def __init__(self, cap: int, stats: ConnectionStats) -> None:
        self.cap = cap
        self.stats = stats
        self._members: set[GuardedProtocol] = set()
        self._waiting: OrderedDict[GuardedProtocol, None] = OrderedDict()
        self._idle: OrderedDict[GuardedProtocol, None] = OrderedDict()

    @property
    def open(self) -> int:
        return len(self._members)

    def make_room(self) -> bool:
        """True if one more connection may be opened, displacing an old one if needed."""
        if len(self._members) < self.cap:
            return True
        victim = self._displaceable()
        if victim is None:
            self.stats.refused += 1
            return False
        self.stats.displaced += 1
        self.discard(victim)
        victim.displace()
        return True

    def _displaceable(self) -> GuardedProtocol | None:
        for queue in (self._waiting, self._idle):
            for protocol in queue:
                if protocol.transport is not None:
                    return protocol
        return None

    def add(self, protocol: GuardedProtocol) -> None:
        self._members.add(protocol)
        self._waiting[protocol] = None

    def mark(self, protocol: GuardedProtocol, state: str) -> None:
        if protocol not in self._members:
            return
        if state == BUSY:
            self._waiting.pop(protocol, None)
            self._idle.pop(protocol, None)
        elif state == IDLE:
            self._waiting.pop(protocol, None)
            self._idle[protocol] = None
            self._idle.move_to_end(protocol)

    def discard(self, protocol: GuardedProtocol) -> None:
        self._members.discard(protocol)
        self._waiting.pop(protocol, None)
        self._idle.pop(protocol, None)


# -- the protocol: uvicorn's httptools protocol with a read deadline and a head limit ---------------------


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus: a request must arrive in full within `read_timeout` seconds of
    the connection opening (or of the previous response), its head must fit in `MAX_HEAD_BYTES`, and the
    registry learns when the connection turns busy or idle.

    The peer owes us a request while one is partly received (head or body), or while every request it sent
    has been answered; requests it pipelined are queued by uvicorn and answered in order, so the latest
    request's response completing means all of them have.
    """

    def __init__(self, *args: Any, registry: ConnectionRegistry, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._registry = registry
        self._read_timeout = read_timeout
        self._read_deadline: asyncio.TimerHandle | None = None
        self._receiving = False
        self._head_bytes: int | None = 0  # received of a head still incomplete; None from its end to the request's
        self._head_size = 0  # request line and headers of the current head, as parsed
        self._refused = False  # answered 431: what else arrives is dropped
        self._completed = 0  # requests received in full

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_read_deadline()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        completed = self._completed
        super().data_received(data)
        if self._refused or self.transport.is_closing():  # refused within this chunk: its answer is out
            return
        if self._head_bytes is not None and self._completed == completed:
            # The whole chunk went into a head still incomplete (httptools buffers a partial header line
            # itself, out of our sight). After a request completed in this chunk, the next head's share of
            # it is unknown and goes uncounted: at most one read's worth.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_head()
                return
        self._after_progress()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._receiving = True
        self._head_size = 0

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        super().on_headers_complete()

    def _count_head(self, size: int) -> None:
        """Stop the parser (an error out of a callback) once a head arriving in one read is over the limit;
        uvicorn then calls `send_400_response`, which answers 431 instead."""
        self._head_size += size
        if self._head_size > MAX_HEAD_BYTES:
            raise ValueError("request head too large")

    def send_400_response(self, msg: str) -> None:
        if self._head_size > MAX_HEAD_BYTES:
            self._refuse_head()
        else:
            super().send_400_response(msg)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._receiving = False
        self._head_bytes = 0
        self._completed += 1

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._after_progress()
            if self._waiting_for_request():
                self._arm_read_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_read_deadline()
        self._registry.discard(self)
        super().connection_lost(exc)

    def displace(self) -> None:
        """Close this connection to make room for a new one."""
        self._disarm_read_deadline()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _refuse_head(self) -> None:
        """Answer 431 and close. The answer is followed by our FIN, then whatever the peer still sends is
        read and dropped for up to `REFUSAL_LINGER_SECONDS`: closing with unread data would send a reset,
        which can destroy the answer before the peer reads it."""
        self._disarm_read_deadline()
        self._registry.stats.heads_refused += 1
        self._refused = True
        body = b"request head too large\n"
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._read_deadline = self.loop.call_later(REFUSAL_LINGER_SECONDS, self.transport.abort)
        else:
            self.transport.close()

    def _after_progress(self) -> None:
        if not self._waiting_for_request():
            self._disarm_read_deadline()
        self._registry.mark(self, self._state())

    def _state(self) -> str:
        if self.cycle is None:
            return WAITING
        return IDLE if self.cycle.response_complete else BUSY

    def _waiting_for_request(self) -> bool:
        return self._receiving or self.cycle is None or self.cycle.response_complete

    def _arm_read_deadline(self) -> None:
        if self._read_deadline is None:
            self._read_deadline = self.loop.call_later(self._read_timeout, self._read_timed_out)

    def _disarm_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport is None or self.transport.is_closing() or not self._waiting_for_request():
            return
        self._registry.stats.timed_out += 1
        self.transport.abort()


# -- the listener: our own accept loop --------------------------------------------------------------------


class GuardedListener:
    """Accepts connections on `sock` for `protocol_factory`, within the registry's cap.

    Stands in for the `asyncio.Server` uvicorn would create (`close()`, `wait_closed()`), and logs the
    interval summaries while it runs.
    """

    def __init__(
        self,
        sock: socket.socket,
        protocol_factory: Callable[[], GuardedProtocol],
        registry: ConnectionRegistry,
        read_timeout: float,
        log_filter: RateLimitFilter | None,
    ) -> None:
        self._sock = sock
        self._factory = protocol_factory
        self._registry = registry
        self._read_timeout = read_timeout
        self._log_filter = log_filter
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self._resume: asyncio.TimerHandle | None = None
        self._summary: asyncio.Task[None] | None = None
        self._summarized_at = time.monotonic()
        self._serving = False

    def start(self) -> None:
        self._sock.listen(LISTEN_BACKLOG)
        self._sock.setblocking(False)
        self._serving = True
        self._loop.add_reader(self._sock.fileno(), self._accept_batch)
        self._summary = self._loop.create_task(self._summaries())

    def close(self) -> None:
        if self._serving:
            self._serving = False
            self._loop.remove_reader(self._sock.fileno())
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None
            self.log_summary()

    async def wait_closed(self) -> None:
        return None

    def _accept_batch(self) -> None:
        if not self._serving:
            return
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                self._registry.stats.accept_errors += 1
                if exc.errno not in RESOURCE_ERRNOS:
                    logger.debug("accept failed", exc_info=True)
                self._pause()
                return
            if not self._registry.make_room():
                _reset(conn)
                continue
            _set_nodelay(conn)
            self._attach(conn)

    def _attach(self, conn: socket.socket) -> None:
        protocol = self._factory()
        self._registry.add(protocol)
        task = self._loop.create_task(self._connect(conn, protocol))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket, protocol: GuardedProtocol) -> None:
        try:
            await self._loop.connect_accepted_socket(lambda: protocol, conn)
        except BaseException as exc:
            self._registry.discard(protocol)
            conn.close()
            if not isinstance(exc, Exception):
                raise
            logger.debug("could not set up an accepted connection", exc_info=True)

    def _pause(self) -> None:
        """Stop accepting for a moment (out of descriptors, most likely); the kernel keeps the backlog."""
        if self._serving and self._resume is None:
            self._loop.remove_reader(self._sock.fileno())
            self._resume = self._loop.call_later(ACCEPT_PAUSE_SECONDS, self._unpause)

    def _unpause(self) -> None:
        self._resume = None
        if self._serving:
            self._loop.add_reader(self._sock.fileno(), self._accept_batch)

    async def _summaries(self) -> None:
        while True:
            await asyncio.sleep(SUMMARY_INTERVAL_SECONDS)
            self.log_summary()

    def log_summary(self) -> None:
        """Log what happened since the previous summary, in one line (nothing if nothing happened)."""
        now = time.monotonic()
        seconds, self._summarized_at = now - self._summarized_at, now
        suppressed = self._log_filter.take_suppressed() if self._log_filter is not None else 0
        registry = self._registry
        line = summary_line(registry.stats.take(), suppressed, seconds, registry.cap, self._read_timeout, registry.open)
        if line:
            logger.warning(line, extra={RATE_LIMIT_EXEMPT: True})


def _set_nodelay(conn: socket.socket) -> None:
    """Turn Nagle's algorithm off on an accepted connection.

    uvicorn writes a streamed response's last event and the chunked terminator (`0\r\n\r\n`) in two
    sends. With Nagle on, the terminator waits for the peer to acknowledge the event, and a peer that
    delays its ACK (Linux: about 40 ms, once a connection is past its first exchanges) holds every
    response on a kept-alive connection that long. asyncio sets this option itself only on sockets whose
    `proto` is `IPPROTO_TCP`, which a socket made with `socket.socket(family, SOCK_STREAM)` and the
    connections accepted from it are not, so the listener sets it here.
    """
    try:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # not a TCP socket (nothing to do), or already closing
        pass


def _reset(conn: socket.socket) -> None:
    """Close an accepted socket with a reset (no FIN handshake, no TIME_WAIT left on our side)."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    conn.close()


# -- uvicorn with the guard in front ----------------------------------------------------------------------


class GuardedServer(uvicorn.Server):
    """`uvicorn.Server` that serves `sock` through a `GuardedListener` instead of `loop.create_server`."""

    def __init__(
        self,
        config: uvicorn.Config,
        sock: socket.socket,
        *,
        cap: int,
        read_timeout: float,
        stats: ConnectionStats,
        log_filter: RateLimitFilter | None,
    ) -> None:
        super().__init__(config)
        self._sock = sock
        self.registry = ConnectionRegistry(cap, stats)
        self._read_timeout = read_timeout
        self._log_filter = log_filter

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # lifespan only: no listener of uvicorn's own
        if not self.started:
            return
        listener = GuardedListener(self._sock, self._protocol, self.registry, self._read_timeout, self._log_filter)
        listener.start()  # synchronous: nobody sees `started` before the socket listens
        self.servers = [listener]  # type: ignore[list-item]

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End the open POST streams first (sse_starlette's streams end on uvicorn's exit signal), so a
        call in flight does not hold the shutdown for the whole grace period."""
        from coretools.server.sse_response import end_streams

        end_streams()
        await super().shutdown(sockets=sockets)

    def _protocol(self) -> GuardedProtocol:
        return GuardedProtocol(
            config=self.config,
            server_state=self.server_state,
            app_state=self.lifespan.state,
            registry=self.registry,
            read_timeout=self._read_timeout,
        )
