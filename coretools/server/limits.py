"""Bounded concurrency for tool calls: a limit per client session and one for the whole server.

A call that would go over either limit is not queued: it is answered at once with an `isError` result that
says the server is busy, which limit was hit and what to do (wait for a running call to finish, then retry).
Unbounded queueing would let one eager client pile up work behind everyone else's back and make every
latency unpredictable; a prompt, explicit refusal keeps the server responsive and lets the model decide.

The limiter knows nothing about tools. It wraps the MCP layer's `on_call_tool` handler and counts the calls
that are running, keyed by whatever identifies a session (the SDK connection object). Over stateless HTTP
every request is its own connection, so only the overall limit applies there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from coretools.errors import ErrorKind
from coretools.server.config import ServerConfig
from coretools.tools.base import ToolResult

Ctx = TypeVar("Ctx")
Params = TypeVar("Params")


@dataclass
class CallLimiter:
    """Counts running calls overall and per session; `None` means no limit."""

    max_calls: int | None = None
    max_session_calls: int | None = None
    running: int = 0
    _per_session: dict[Any, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: ServerConfig) -> CallLimiter:
        return cls(_positive(config.max_calls), _positive(config.max_session_calls))

    def session_running(self, key: Hashable | None) -> int:
        return self._per_session.get(key, 0) if key is not None else 0

    def try_acquire(self, key: Hashable | None) -> str | None:
        """Take a slot for one call of session `key`; return None, or why the call is refused.

        Synchronous on purpose: the check and the increment happen without an await between them, so
        concurrent calls on the one event loop can never both take the last slot.
        """
        if self.max_session_calls is not None and key is not None:
            if self.session_running(key) >= self.max_session_calls:
                return (
                    f"Server busy: this session already has {self.max_session_calls} tool calls running, the "
                    f"most one session may run at once (server option --max-session-calls). Wait for one of "
                    "them to finish, then retry this call; do not retry in a tight loop."
                )
        if self.max_calls is not None and self.running >= self.max_calls:
            return (
                f"Server busy: {self.max_calls} tool calls are already running on this server, its limit for "
                "all clients together (server option --max-calls). Wait a moment, then retry this call."
            )
        self.running += 1
        if key is not None:
            self._per_session[key] = self._per_session.get(key, 0) + 1
        return None

    def release(self, key: Hashable | None) -> None:
        self.running -= 1
        if key is not None:
            left = self._per_session.get(key, 0) - 1
            if left > 0:
                self._per_session[key] = left
            else:
                self._per_session.pop(key, None)

    def guard(
        self,
        handler: Callable[[Ctx, Params], Awaitable[Any]],
        *,
        key: Callable[[Ctx], Hashable | None],
    ) -> Callable[[Ctx, Params], Awaitable[Any]]:
        """Wrap a tool-call handler (it returns a `ToolResult`): run it inside a slot, or answer "server busy"
        (an error `ToolResult`) without running it."""

        async def guarded(ctx: Ctx, params: Params) -> Any:
            session = key(ctx)
            refusal = self.try_acquire(session)
            if refusal is not None:
                return ToolResult.error(refusal, ErrorKind.SERVER_BUSY)
            try:
                return await handler(ctx, params)
            finally:
                self.release(session)

        return guarded


def _positive(value: Any) -> int | None:
    """A limit from the command line: a positive int, or None (no limit) for absent, zero or negative."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
