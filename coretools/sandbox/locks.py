"""Per-file edit locks, process-wide: a read-modify-write of one file never interleaves with another."""

from __future__ import annotations

import threading
from collections.abc import Callable


class EditLock:
    def __init__(self, registry: _KeyedLocks, key: str, entry: list) -> None:
        self._registry, self.key, self._entry = registry, key, entry

    def release(self) -> None:
        if self._entry is not None:
            entry, self._entry = self._entry, None
            entry[0].release()
            self._registry.unref(self.key, entry)

class _KeyedLocks:
    """One lock per key, created on demand and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list] = {}  # key -> [Lock, users]

    def acquire(self, key: str, cancelled: Callable[[], object] | None, poll: float = 0.05) -> EditLock:
        with self._guard:
            entry = self._locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            while not entry[0].acquire(timeout=poll):
                if cancelled is not None:
                    cancelled()
        except BaseException:
            self.unref(key, entry)
            raise
        return EditLock(self, key, entry)

    def unref(self, key: str, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if entry[1] == 0 and self._locks.get(key) is entry:
                del self._locks[key]

_EDIT_LOCKS = _KeyedLocks()
