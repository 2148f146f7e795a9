"""Per-file edit locks: a read-modify-write of one file never interleaves with another, in this process or
in another server on the same workspace.

Two layers. In this process, a lock per canonical path (`_KeyedLocks`), so threads wait without touching
the disk. Across processes, an `flock` on a lock file in the user's state directory
(`settings.state_dir()/locks/<key>`), where the key is the file's identity (device and inode; for a file
that does not exist yet, a hash of its canonical path). The kernel drops an `flock` when its holder dies,
however it dies, so a killed server never wedges the others.

Why a lock file named after the identity rather than an `flock` on the edited file itself: a file about to
be created has nothing to lock; opening the user's file has effects of its own (a FIFO, a file this user may
write but not read); and any program holding an `flock` on that file, a hostile command included, would
block every edit of it. Why the identity rather than the path: two spellings of one file (another case on a
case-insensitive file system, a bind mount) are one lock. An atomic replacement gives the file a new
identity, so whoever takes a lock checks afterwards that the file still has the identity it locked, and
starts again under the new one if not; a version of the file is only ever read under its own identity's
lock, so no edit builds on a version another is replacing. (`fcntl` record locks would not do: they belong
to the process, so two threads share them, and any close of the file drops them.)

The table of lock files stays bounded: a holder removes its lock file before letting go (a waiter that then
gets the removed file sees that its path no longer names it, and starts again), so only the lock files of
edits in progress exist, plus those of killed servers, which the next holder of that key or the next
server's start (`durable.recover`) removes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable

from coretools.sandbox import durable, settings

logger = logging.getLogger("coretools")

MAX_REKEYS = 64  # a file replaced this often meanwhile by another program: go ahead (the stale check holds)
_MAX_POLL = 0.05


class EditLock:
    """A held edit lock: the in-process lock of `key` (the file's canonical path) and, when the state
    directory can hold one, the cross-process lock file."""

    def __init__(self, registry: _KeyedLocks, key: str, entry: list, shared: _FileLock | None = None) -> None:
        self._registry, self.key, self._entry, self._shared = registry, key, entry, shared

    def release(self) -> None:
        if self._shared is not None:
            shared, self._shared = self._shared, None
            shared.release()
        if self._entry is not None:
            entry, self._entry = self._entry, None
            entry[0].release()
            self._registry.unref(self.key, entry)


class _KeyedLocks:
    """One lock per key, created on demand and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list] = {}  # key -> [Lock, users]

    def acquire(
        self,
        key: str,
        cancelled: Callable[[], object] | None,
        identity: Callable[[], str] | None = None,
        poll: float = 0.05,
    ) -> EditLock:
        """Lock `key` in this process, then (given `identity`, which names the file's current identity) in
        every process sharing the state directory."""
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
        try:
            shared = _lock_identity(identity, cancelled) if identity is not None else None
        except BaseException:
            entry[0].release()
            self.unref(key, entry)
            raise
        return EditLock(self, key, entry, shared)

    def unref(self, key: str, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if entry[1] == 0 and self._locks.get(key) is entry:
                del self._locks[key]


    def keys(self) -> list[str]:
        """The keys locked or waited for now."""
        with self._guard:
            return list(self._locks)


_EDIT_LOCKS = _KeyedLocks()


def lock_edit(key: str, cancelled: Callable[[], object] | None, identity: Callable[[], str]) -> EditLock:
    """Take the edit lock of the file whose canonical path is `key`, in this process and then in every
    process sharing the state directory (`identity` names the file's current identity, see `identity_key`);
    blocking, `cancelled` is called while waiting and may raise to give up."""
    return _EDIT_LOCKS.acquire(key, cancelled, identity)


def keys_in_use() -> list[str]:
    """The canonical paths whose edit lock some thread of this process holds or waits for."""
    return _EDIT_LOCKS.keys()


class _FileLock:
    """An `flock` held on the lock file at `path` (open at `fd`)."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path

    def release(self) -> None:
        """Remove the lock file, then let go: a waiter on it finds its path gone and starts again."""
        try:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        finally:
            os.close(self.fd)


def identity_key(st: os.stat_result | None, canonical: str) -> str:
    """The lock file's name for a file with this stat (None: it does not exist) and canonical path."""
    if st is not None:
        return f"{st.st_dev:x}-{st.st_ino:x}"
    return "new-" + hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()[:32]


_unavailable_logged = False


class _NoLockFile(Exception):
    """The state directory cannot hold this lock file (read-only, full, not a directory)."""


def _lock_identity(identity: Callable[[], str], cancelled: Callable[[], object] | None) -> _FileLock | None:
    """Lock the lock file of the file's identity, until the identity locked is still the file's. None when
    the state directory cannot hold lock files (logged once): the edit goes ahead, locked in this process.
    Whatever `cancelled` raises goes through."""
    global _unavailable_logged
    folder = os.path.join(settings.state_dir(), "locks")
    try:
        try:
            durable.private_dir("locks")
        except OSError as exc:
            raise _NoLockFile(exc) from None
        for _ in range(MAX_REKEYS):
            key = identity()
            held = _lock_path(os.path.join(folder, key), cancelled)
            if identity() == key:
                return held
            held.release()
        return _lock_path(os.path.join(folder, identity()), cancelled)
    except _NoLockFile as exc:
        if not _unavailable_logged:
            _unavailable_logged = True
            logger.warning("edits are locked within this server only: cannot lock in %s (%s)", folder, exc)
        return None


def _lock_path(path: str, cancelled: Callable[[], object] | None) -> _FileLock:
    """`flock` the lock file at `path` (created if missing), waiting with short sleeps so that `cancelled`
    is asked in between; a lock file removed by its holder meanwhile is made anew."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise _NoLockFile(exc) from None
        try:
            delay = 0.001
            while not _try_lock(fd):
                if cancelled is not None:
                    cancelled()
                time.sleep(delay)
                delay = min(delay * 2, _MAX_POLL)
            if durable.same_file(fd, path) is not None:
                return _FileLock(fd, path)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        raise _NoLockFile(exc) from None
    return True
