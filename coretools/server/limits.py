"""Bounded concurrency for tool calls: a limit per client session, a share per client, and one for the
whole server, with a bounded, fair queue in front of them.

A call that would go over a running limit waits for a slot instead of failing, so an agent that fans out
calls gets every answer, only later. The wait is bounded three ways, which keeps the daemon's memory and
every caller's latency bounded too: a per-session queue length, an overall queue length, and a wait
timeout (never longer than `--call-timeout`). Only a full queue or a timed-out wait answers with an error
(kind `server_busy`) that names the limit and how long the call waited.

A client (whatever identifies one: over HTTP the peer's address) may hold all of the server's slots but
an eighth (at least one), and likewise of its queue places. However many sessions one client opens, that
eighth stays free for the others, so another client's quick call starts at once while one client
saturates its share; a running call cannot be taken back, so only slots held back up front guarantee
that. A client alone still has nearly the whole server. Calls with no client (stdio, which serves one)
have no share to count.

Order: first come first served within a session. A freed slot goes to the waiting client with the fewest
calls running (below its share), and within it to the session with the fewest; among equals they take
turns, the one served moving to the back. So neither a client nor a session with a deep queue can starve
another, and a client with nothing running is served next. A client's calls without a session (stateless
HTTP, 2026-era requests) share one place in its rotation.

Progress: a waiting call whose request carries a progress token is told how many calls queued before it
are still waiting ("waiting: N calls ahead"). The value sent is the fraction of those calls that have
left the queue, always below 1, so the tool's own progress afterwards (absolute counts, starting at 1)
still increases.

The limiter knows nothing about tools. It wraps the MCP layer's `on_call_tool` handler and counts calls
keyed by whatever identifies a session (the SDK connection object) and a client; every per-session and
per-client record is dropped as soon as it is empty.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from coretools.errors import ErrorKind
from coretools.sandbox.settings import limit_option
from coretools.server.config import (
    DEFAULT_MAX_QUEUED_CALLS, DEFAULT_MAX_SESSION_QUEUED_CALLS, DEFAULT_QUEUE_TIMEOUT, ServerConfig,
)  # fmt: skip
from coretools.tools.base import ToolResult

Ctx = TypeVar("Ctx")
Params = TypeVar("Params")
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]

logger = logging.getLogger("coretools")

# The least time between two queue-position notifications of one waiting call: a deep queue draining
# fast would otherwise cost a notification per waiter per departure.
PROGRESS_INTERVAL = 0.2


@dataclass(eq=False)
class _Waiter:
    key: Hashable | None
    client: Hashable | None
    seq: int  # arrival order across all sessions
    ahead: int  # calls queued before this one when it arrived
    granted: anyio.Event = field(default_factory=anyio.Event)
    moved: anyio.Event = field(default_factory=anyio.Event)  # a call ahead left the queue, or the slot came


@dataclass
class CallLimiter:
    """Counts running and waiting calls overall, per client and per session; a `None` limit means no
    limit, a queue length of 0 means calls over a limit are refused at once. A client's shares follow from
    `max_calls` and `max_queued_calls`."""

    max_calls: int | None = None
    max_session_calls: int | None = None
    max_queued_calls: int = DEFAULT_MAX_QUEUED_CALLS
    max_session_queued_calls: int = DEFAULT_MAX_SESSION_QUEUED_CALLS
    wait_limit: float | None = DEFAULT_QUEUE_TIMEOUT  # seconds a call may wait; None: no limit
    call_timeout_caps_wait: bool = False  # the wait limit is --call-timeout's, not --queue-timeout's
    running: int = 0
    queued: int = 0
    max_client_calls: int | None = field(init=False)
    max_client_queued_calls: int = field(init=False)
    _per_session: dict[Any, int] = field(default_factory=dict)
    _per_client: dict[Any, int] = field(default_factory=dict)
    _client_queued: dict[Any, int] = field(default_factory=dict)
    # the waiting calls: clients in rotation order, each with its sessions in rotation order
    _queues: OrderedDict[Any, OrderedDict[Any, deque[_Waiter]]] = field(default_factory=OrderedDict)
    _order: list[int] = field(default_factory=list)  # `seq` of every waiting call, ascending
    _watchers: set[_Waiter] = field(default_factory=set)
    _seq: Any = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.max_client_calls = None if self.max_calls is None else _share(self.max_calls)
        self.max_client_queued_calls = _share(self.max_queued_calls)

    @classmethod
    def from_config(cls, config: ServerConfig) -> CallLimiter:
        queue_timeout = _seconds(limit_option(config.queue_timeout, "--queue-timeout"))
        call_timeout = _seconds(limit_option(config.call_timeout, "--call-timeout"))
        wait_limit = _min_limit(queue_timeout, call_timeout)
        session_queued = limit_option(config.max_session_queued_calls, "--max-session-queued-calls") or 0
        queued = limit_option(config.max_queued_calls, "--max-queued-calls") or 0
        if not (queue_timeout and session_queued):  # 0 for any of the three turns queueing off for every call,
            queued = 0  # sessionless ones included
        return cls(
            limit_option(config.max_calls, "--max-calls"),
            limit_option(config.max_session_calls, "--max-session-calls"),
            max_queued_calls=queued,
            max_session_queued_calls=session_queued,
            wait_limit=wait_limit,
            call_timeout_caps_wait=wait_limit is not None and wait_limit != queue_timeout,
        )

    # -- counters ----------------------------------------------------------------------------------------

    def session_running(self, key: Hashable | None) -> int:
        return self._per_session.get(key, 0) if key is not None else 0

    def client_running(self, client: Hashable | None) -> int:
        return self._per_client.get(client, 0) if client is not None else 0

    def session_queued(self, key: Hashable | None, client: Hashable | None = None) -> int:
        queue = self._queues.get(client, {}).get(key)
        return len(queue) if queue else 0

    def client_queued(self, client: Hashable | None) -> int:
        return self._client_queued.get(client, 0) if client is not None else 0

    def idle(self) -> bool:
        """Nothing running, nothing waiting, and no record left behind."""
        return not (
            self.running
            or self.queued
            or self._per_session
            or self._per_client
            or self._client_queued
            or self._queues
            or self._order
            or self._watchers
        )

    def _server_full(self) -> bool:
        return self.max_calls is not None and self.running >= self.max_calls

    def _client_full(self, client: Hashable | None) -> bool:
        return self.max_client_calls is not None and self.client_running(client) >= self.max_client_calls

    def _session_full(self, key: Hashable | None) -> bool:
        return self.max_session_calls is not None and self.session_running(key) >= self.max_session_calls

    def _can_run(self, key: Hashable | None, client: Hashable | None) -> bool:
        return not (self._server_full() or self._client_full(client) or self._session_full(key))

    def _take(self, key: Hashable | None, client: Hashable | None) -> None:
        self.running += 1
        if key is not None:
            self._per_session[key] = self._per_session.get(key, 0) + 1
        if client is not None:
            self._per_client[client] = self._per_client.get(client, 0) + 1

    def release(self, key: Hashable | None, client: Hashable | None = None) -> None:
        """Give back a slot and hand it on to a waiting call."""
        self.running -= 1
        _decrement(self._per_session, key)
        _decrement(self._per_client, client)
        if self._queues:
            self._dispatch()

    # -- the queue ----------------------------------------------------------------------------------------

    def _admit(self, key: Hashable | None, client: Hashable | None, watched: bool) -> _Waiter | str | None:
        """Run now (None), wait in the queue (the waiter), or be refused (why). Synchronous on purpose: the
        check and the count change happen with no await between them, so two calls on the one event loop
        can never both take the last slot or the last place in the queue."""
        sessions = self._queues.get(client)
        if (sessions is None or key not in sessions) and self._can_run(key, client):
            self._take(key, client)
            return None
        full = self._full_queue(key, client)
        if full is not None:
            return full
        waiter = _Waiter(key, client, next(self._seq), self.queued)
        if sessions is None:
            sessions = self._queues[client] = OrderedDict()
        sessions.setdefault(key, deque()).append(waiter)
        self._order.append(waiter.seq)  # arrivals are numbered in order, so the list stays sorted
        self.queued += 1
        if client is not None:
            self._client_queued[client] = self._client_queued.get(client, 0) + 1
        if watched:
            self._watchers.add(waiter)
        return waiter

    def _dispatch(self) -> None:
        """Grant free slots to waiting calls until none is free or no waiting call may run."""
        while self._queues and not self._server_full() and self._grant_next():
            pass

    def _grant_next(self) -> bool:
        """Grant a slot to the next waiting call that may run: the client with the fewest calls running,
        within it the session with the fewest, each the first in its rotation among equals (the client and
        session granted move to the back), and the session's calls in arrival order. A client at its share,
        or a session at its limit, is passed over."""
        chosen: tuple[int, Any, Any] | None = None
        for client, waiting in self._queues.items():
            running = self.client_running(client)
            if self._client_full(client) or (chosen is not None and running >= chosen[0]):
                continue
            key = self._next_session(waiting)
            if key is _NONE:
                continue
            chosen = (running, client, key)
            if not running:
                break
        if chosen is None:
            return False
        _, client, key = chosen
        sessions = self._queues[client]
        queue = sessions[key]
        waiter = queue.popleft()
        if queue:
            sessions.move_to_end(key)
        else:
            del sessions[key]
        if sessions:
            self._queues.move_to_end(client)
        else:
            del self._queues[client]
        self._take(key, client)
        self._departed(waiter)
        waiter.granted.set()
        waiter.moved.set()
        return True

    def _next_session(self, sessions: OrderedDict[Any, deque[_Waiter]]) -> Any:
        """Of a client's sessions with calls waiting, the one with the fewest calls running, the first in
        rotation among equals; `_NONE` if all are at their limit."""
        chosen, fewest = _NONE, 0
        for key in sessions:
            running = self.session_running(key)
            if self._session_full(key) or (chosen is not _NONE and running >= fewest):
                continue
            chosen, fewest = key, running
            if not running:
                break
        return chosen

    def _leave(self, waiter: _Waiter) -> None:
        """Take a waiting call out of the queue (timed out or cancelled); it never runs."""
        sessions = self._queues.get(waiter.client)
        queue = sessions.get(waiter.key) if sessions is not None else None
        if queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        if not queue:
            del sessions[waiter.key]
            if not sessions:
                del self._queues[waiter.client]
        self._departed(waiter)

    def _departed(self, waiter: _Waiter) -> None:
        self.queued -= 1
        _decrement(self._client_queued, waiter.client)
        index = bisect.bisect_left(self._order, waiter.seq)
        del self._order[index]
        self._watchers.discard(waiter)
        for other in self._watchers:
            if other.seq > waiter.seq:
                other.moved.set()

    def _ahead(self, waiter: _Waiter) -> int:
        return bisect.bisect_left(self._order, waiter.seq)

    async def _wait(self, waiter: _Waiter, report: ProgressFn | None) -> None:
        """Wait for the slot; with a reporter, tell the caller each time fewer calls are ahead (at most every
        `PROGRESS_INTERVAL`)."""
        if report is None:
            await waiter.granted.wait()
            return
        told: int | None = None
        while not waiter.granted.is_set():
            ahead = self._ahead(waiter)
            if told is None or ahead < told:
                told = ahead
                await _report(report, waiter.ahead, ahead)
            with anyio.move_on_after(PROGRESS_INTERVAL):
                await waiter.granted.wait()
            if not waiter.granted.is_set():
                await waiter.moved.wait()
                waiter.moved = anyio.Event()

    async def _queue_wait(self, waiter: _Waiter, report: ProgressFn | None) -> str | None:
        """Wait in the queue; None once the call holds a slot, or why it gave up. A cancelled wait (client
        cancel, dropped connection) leaves the queue at once, or gives back a slot granted meanwhile."""
        started = anyio.current_time()
        try:
            with anyio.move_on_after(self.wait_limit):
                await self._wait(waiter, report)
        except BaseException:
            self._abandon(waiter)
            raise
        if waiter.granted.is_set():
            return None
        self._leave(waiter)
        return self._timed_out(waiter.key, anyio.current_time() - started, waiter.client)

    def _abandon(self, waiter: _Waiter) -> None:
        if waiter.granted.is_set():
            self.release(waiter.key, waiter.client)
        else:
            self._leave(waiter)

    # -- the wrapper --------------------------------------------------------------------------------------

    def guard(
        self,
        handler: Callable[[Ctx, Params], Awaitable[Any]],
        *,
        key: Callable[[Ctx], Hashable | None],
        client: Callable[[Ctx], Hashable | None] | None = None,
        progress: Callable[[Ctx], ProgressFn | None] | None = None,
    ) -> Callable[[Ctx, Params], Awaitable[Any]]:
        """Wrap a tool-call handler (it returns a `ToolResult`): run it inside a slot, after waiting in the
        queue if need be, or answer "server busy" (an error `ToolResult`) without running it. `key` gives a
        request's session and `client` its client (None: no client, no share to count). `progress` gives a
        request's progress reporter, or None when the request asked for no progress; by default the MCP
        request's own (`request_progress`)."""
        reporter = progress or request_progress
        identify = client or _no_client

        async def guarded(ctx: Ctx, params: Params) -> Any:
            session = key(ctx)
            who = identify(ctx)
            report = reporter(ctx)
            admitted = self._admit(session, who, watched=report is not None)
            if isinstance(admitted, str):
                logger.info("tool call refused: %s", admitted)
                return ToolResult.error(admitted, ErrorKind.SERVER_BUSY)
            if admitted is not None:
                refusal = await self._queue_wait(admitted, report)
                if refusal is not None:
                    logger.info("tool call gave up waiting: %s", refusal)
                    return ToolResult.error(refusal, ErrorKind.SERVER_BUSY)
            try:
                if admitted is not None:
                    # A call cancelled just as its slot came is woken by the grant, not by the cancellation,
                    # which anyio delivers at the next checkpoint: take it here, before the call runs.
                    await anyio.lowlevel.checkpoint()
                return await handler(ctx, params)
            finally:
                self.release(session, who)

        return guarded

    # -- what a refused call is told ----------------------------------------------------------------------

    def _blocking_limit(self, key: Hashable | None, client: Hashable | None) -> str:
        session_limit = self.max_session_calls
        if session_limit is not None and key is not None and self.session_running(key) >= session_limit:
            return (
                f"this session already has {_calls(session_limit, verb=False)} running, the most one session "
                "may run at once (server option --max-session-calls)"
            )
        if self._client_full(client) and self.max_client_calls != self.max_calls:
            return (
                f"this client already has {_calls(self.client_running(client), verb=False)} running, the most "
                f"one client may run at once: all but {self.max_calls - self.max_client_calls} of the server's "
                f"{self.max_calls} (server option --max-calls), the rest being kept for other clients"
            )
        if self.max_calls is not None and self.running >= self.max_calls:
            return (
                f"{_calls(self.max_calls)} already running on this server, its limit for all clients together "
                "(server option --max-calls)"
            )
        return "earlier calls of this session are still waiting for a slot"

    def _full_queue(self, key: Hashable | None, client: Hashable | None) -> str | None:
        """Why a call cannot join the queue (it is full), or None."""
        if key is not None and self.session_queued(key, client) >= self.max_session_queued_calls:
            queue = (
                f"{_more(self.session_queued(key, client))} waiting, the most one session may queue (server "
                "option --max-session-queued-calls)"
            )
        elif (
            client is not None
            and self.client_queued(client) >= self.max_client_queued_calls
            and self.max_client_queued_calls != self.max_queued_calls
        ):
            queue = (
                f"{_more(self.client_queued(client))} waiting, the most one client may queue: all but "
                f"{self.max_queued_calls - self.max_client_queued_calls} of the server's {self.max_queued_calls} "
                "places (server option --max-queued-calls)"
            )
        elif self.queued >= self.max_queued_calls:
            queue = (
                f"{_calls(self.queued)} waiting across all clients, the most this server queues (server option "
                "--max-queued-calls)"
            )
        else:
            return None
        if not (self.max_queued_calls and self.max_session_queued_calls):
            queue = "this server does not queue calls over its limits"
        return (
            f"Server busy: {self._blocking_limit(key, client)}, and {queue}. This call was refused at once (it "
            "waited 0 s) and did not run. Wait for some of the running calls to finish, then retry it; do not "
            "retry in a tight loop, and make fewer calls at once."
        )

    def _timed_out(self, key: Hashable | None, waited: float, client: Hashable | None = None) -> str:
        limit = "--call-timeout" if self.call_timeout_caps_wait else "--queue-timeout"
        return (
            f"Server busy: this call waited {waited:.1f} s in the queue for a free slot, the longest a call may "
            f"wait (server option {limit}, {self.wait_limit:g} s), and did not run. When it gave up, "
            f"{self._blocking_limit(key, client)}. Retry it once some running calls have finished, or make fewer "
            "calls at once."
        )


_NONE = object()  # no session found (None is a session key: calls without a session)


def _no_client(ctx: Any) -> None:
    return None


def _decrement(counts: dict[Any, int], key: Hashable | None) -> None:
    """Count one less for `key` (None: not counted); a count that reaches 0 is dropped."""
    if key is None:
        return
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def _share(limit: int) -> int:
    """A client's share of a limit: all of it but an eighth (at least one) kept for other clients; all of
    a limit of 1 (or 0)."""
    return limit - max(1, limit // 8) if limit > 1 else limit


def request_progress(ctx: Any) -> ProgressFn | None:
    """The progress reporter of an MCP request (the SDK's `ServerRequestContext`) if it carries a progress
    token, else None: without a token nothing is sent, so there is nothing to compute."""
    meta = getattr(ctx, "meta", None) or {}
    token = meta.get("progress_token", meta.get("progressToken")) if isinstance(meta, dict) else None
    session = getattr(ctx, "session", None)
    if token is None or session is None:
        return None
    return session.report_progress


async def _report(report: ProgressFn, initial: int, ahead: int) -> None:
    done = initial - ahead
    try:
        await report(done / (initial + 1), 1.0, f"waiting: {ahead} call{'' if ahead == 1 else 's'} ahead")
    except Exception:  # noqa: BLE001 - progress is best effort; the call keeps its place
        logger.debug("queue progress notification failed", exc_info=True)


def _calls(count: int, verb: bool = True) -> str:
    """"3 tool calls are", "1 tool call is" (without `verb`: "3 tool calls")."""
    text = "1 tool call" if count == 1 else f"{count} tool calls"
    return f"{text} {'is' if count == 1 else 'are'}" if verb else text


def _more(count: int) -> str:
    """"2 more of its calls are", "1 more of its calls is"."""
    return f"{count} more of its calls {'is' if count == 1 else 'are'}"


def _seconds(value: float | None) -> float | None:
    return None if value is None else float(value)


def _min_limit(a: float | None, b: float | None) -> float | None:
    """The smaller of two time limits, None meaning none."""
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)
