"""Sessions: what belongs to one client session and is never shown to another.

A session is one stdio process, one stateful HTTP session, or one stateless HTTP request. Each has a
`SessionScope`: the place where tools keep per-session state that must not leak across clients, above all
the shell's runner (its private temporary directory, saved outputs and background logs) and its background
jobs. The scope in force is a context variable (`current`), set around each tool call, so that the
gateway's reading of saved outputs (`scratch.find`) serves only the calling session's areas.

A scope ends when its session ends (`close_now`, from a finaliser when the server drops the session; the
HTTP session cap and idle expiry bound how many exist) or when the server stops (`aclose`). Everything it
holds is closed then: processes killed, directories removed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

logger = logging.getLogger("coretools")
T = TypeVar("T", bound="Closeable")


class Closeable(Protocol):
    def close_now(self) -> None: ...

    async def aclose(self) -> None: ...


class SessionScope:
    """The per-session objects of one session, by key, each made once on first use."""

    def __init__(self, label: str = "session", *, reusable: bool = False, per_call: bool = False) -> None:
        self.label = label
        # It ends with the call that uses it (a sessionless HTTP request's, or an unnamed connection's):
        # nothing started in it may be promised to outlive the call (a background command).
        self.per_call = per_call
        self._items: dict[str, Closeable] = {}
        self._lock = threading.Lock()
        self._reusable = reusable  # the process's own scope: a server started again in-process uses it anew
        self.closed = False

    def get(self, key: str, make: Callable[[], T]) -> T:
        with self._lock:
            if self.closed:
                raise RuntimeError("this session has ended")
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = make()
            return item  # type: ignore[return-value]

    def pop(self, key: str) -> Closeable | None:
        """Take one object out (its owner is closing it)."""
        with self._lock:
            return self._items.pop(key, None)

    def _take(self) -> list[Closeable]:
        with self._lock:
            self.closed = not self._reusable
            items, self._items = list(self._items.values()), {}
        return items

    def close_now(self) -> None:
        """End the session at once (no waiting: called from a finaliser or at exit)."""
        for item in self._take():
            try:
                item.close_now()
            except Exception:  # noqa: BLE001 - one item's failure must not keep the others alive
                logger.exception("closing a session's %s failed", type(item).__name__)

    async def aclose(self) -> None:
        for item in self._take():
            try:
                await item.aclose()
            except Exception:  # noqa: BLE001
                logger.exception("closing a session's %s failed", type(item).__name__)

    @contextmanager
    def active(self) -> Iterator[SessionScope]:
        token = current.set(self)
        try:
            yield self
        finally:
            current.reset(token)


PROCESS = SessionScope("process", reusable=True)  # the session of a process that serves one client (stdio, `call`)
current: ContextVar[SessionScope | None] = ContextVar("coretools_session", default=None)


def calling() -> SessionScope:
    """The session of the tool call in progress (the process's own outside any call)."""
    return current.get() or PROCESS


def visible(owner: Any) -> bool:
    """Whether something owned by `owner` (a scope, or None for the server's own) may be shown now."""
    return owner is None or owner is calling()
