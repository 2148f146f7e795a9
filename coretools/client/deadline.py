"""Deadlines that stop while a person is busy: a sign-in in the browser, an answer in the terminal.

The bridge bounds a server's connection and each tool call with a deadline. When the server
sends the user to the browser to sign in, the minutes the user spends there are not the
server's fault and must not use up that budget. The deadline travels in a context variable:
the SDK's HTTP transport runs each outgoing request in the context of the task that sent it,
so the OAuth handlers, deep below the request, find the deadline of the request they serve and
pause it with :func:`waiting_for_person`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio


class Deadline:
    """A budget of seconds for a cancel scope, spent only while nobody is waiting on a person."""

    def __init__(self, scope: anyio.CancelScope, seconds: float) -> None:
        self._scope = scope
        self._budget = seconds
        self._pauses = 0
        scope.deadline = anyio.current_time() + seconds

    def pause(self) -> None:
        if self._pauses == 0:
            self._budget = max(0.0, self._scope.deadline - anyio.current_time())
            self._scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        self._pauses -= 1
        if self._pauses == 0:
            self._scope.deadline = anyio.current_time() + self._budget

    def lift(self) -> None:
        """No deadline any more (the connection is up; the scope stays as the connection's own)."""
        self._budget = math.inf
        self._scope.deadline = math.inf


_current: ContextVar[Deadline | None] = ContextVar("coretools_client_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[tuple[anyio.CancelScope, Deadline]]:
    """A cancel scope with a pausable deadline; ``scope.cancelled_caught`` tells that it expired."""
    with anyio.CancelScope() as scope:
        budget = Deadline(scope, seconds)
        token = _current.set(budget)
        try:
            yield scope, budget
        finally:
            _current.reset(token)


@contextmanager
def waiting_for_person() -> Iterator[None]:
    """Stop the clock of the current deadline (if any) while the block runs."""
    budget = _current.get()
    if budget is None:
        yield
        return
    budget.pause()
    try:
        yield
    finally:
        budget.resume()
