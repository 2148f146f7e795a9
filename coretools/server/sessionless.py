"""What the server showed each client that has no session: stateless HTTP and 2026-07-28 requests.

The stale-write guard (`coretools.workspace.views`) needs to know what *this* client was shown. A stateful
session is a client; without one every request stands alone, so the record is kept under what each request
says of its sender, the same on every request of one client:

- the credential it presented: a digest of its `Authorization` header;
- the address it connects from (not the port, which changes per connection);
- the program it is, as far as HTTP says: its `User-Agent`;
- its protocol version, and the client info and capabilities that 2026-07-28 requests carry in `_meta`
  (a 2025-era stateless request carries neither: its `initialize` went to another request).

Requests that differ in any of these are different clients and never share a record, so a file one of
them read never passes as read by another. Requests that agree in all of them cannot be told apart by any
server without sessions: two copies of one host on one machine with one token are one client here (a
client that names itself apart, by its client info, is kept apart). None of this is access control: a
client may always write a file it never read, so a client claiming another's identity gains nothing but
the other's refusals.

The record is bounded like the session record: at most `max_clients` clients (the least recently active
dropped first) and a client idle for `idle` seconds is forgotten, as an idle session ends. A forgotten
client's files count as never seen, which can let an edit through but never refuses one. The identity is
kept as a SHA-256, so a client's size in memory does not depend on what it declares.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from coretools.workspace.views import MAX_AGE_SECONDS, FileViews

SESSION_HEADER = "mcp-session-id"


def sessionless(request: Any) -> bool:
    """Whether an HTTP request stands alone: no `Mcp-Session-Id` (stateless 2025-era requests, and every
    2026-07-28 request, whatever the server's mode)."""
    return request is not None and not request.headers.get(SESSION_HEADER)


def client_identity(request: Any, protocol_version: str, client_info: Any, capabilities: Any) -> bytes:
    """The digest naming the client of a sessionless request (see the module docstring for its parts)."""
    peer = request.scope.get("client")
    parts = {
        "credential": hashlib.sha256((request.headers.get("authorization") or "").encode()).hexdigest(),
        "address": peer[0] if peer else None,
        "agent": request.headers.get("user-agent"),
        "protocol": protocol_version,
        "info": _plain(client_info),
        "capabilities": _plain(capabilities),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).digest()


def _plain(model: Any) -> Any:
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


class SessionlessViews:
    """The `FileViews` of each sessionless client, by identity; bounded in number and idle time."""

    def __init__(self, max_clients: int, idle: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_clients = max_clients  # 0: no limit but the idle time
        self.idle = idle or MAX_AGE_SECONDS  # 0 (sessions never idle out): as long as a record's entries last
        self._clock = clock
        self._clients: OrderedDict[bytes, tuple[float, FileViews]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._clients)

    def views(self, identity: bytes) -> FileViews:
        now = self._clock()
        while self._clients:
            oldest, (last, _) = next(iter(self._clients.items()))
            if now - last <= self.idle:
                break
            del self._clients[oldest]
        entry = self._clients.pop(identity, None)
        views = entry[1] if entry is not None else FileViews()
        self._clients[identity] = (now, views)
        while self.max_clients and len(self._clients) > self.max_clients:
            self._clients.popitem(last=False)
        return views
