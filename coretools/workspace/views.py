"""What one session has been shown of each file, so that an edit made from a stale view is refused.

A model that read a file, and then edits it after something else changed it (an editor saving, a build step,
another agent), writes from an outdated picture: the replacement may land in text it never saw, and a whole-
file write discards the other change. The server therefore remembers, per session, the state of each file it
showed (read it out, or wrote it itself), and an edit of a file that changed since is refused.

A state is the file's identity and stat (device, inode, size, modification and change times) and, where the
session saw the whole content, its SHA-256. Any stat difference counts as a change unless the digest shows the
content is the same (a `touch`, a `chmod`, a rewrite with identical bytes): those leave the model's picture
true. A file the session never saw may be edited freely, as Gemini CLI allows.

The record is bounded (least recently seen files drop out first) and entries expire, since a session may
live for weeks; a file that dropped out is treated as never seen.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from coretools.errors import ErrorKind, ToolError

MAX_FILES = 4096
MAX_AGE_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class FileState:
    """A file as a session saw it."""

    stat: tuple[int, int, int, int, int] | None  # dev, ino, size, mtime_ns, ctime_ns; None: it did not exist
    digest: bytes | None  # SHA-256 of the whole content, when the session saw all of it

    @classmethod
    def of(cls, st: os.stat_result | None, data: bytes | None = None) -> FileState:
        key = None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return cls(key, None if data is None else digest(data))


def digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class StaleFile(ToolError):
    def __init__(self, shown: str, why: str) -> None:
        super().__init__(
            f"File changed since you read it: {shown} ({why}). Nothing was written; the other change was kept. "
            "Read the file again (read_file) and redo the edit on its current content.",
            ErrorKind.FILE_CHANGED_SINCE_READ,
        )


class FileViews:
    """The files one session was shown, by canonical absolute path. Safe to use from worker threads."""

    def __init__(self, max_files: int = MAX_FILES, max_age: float = MAX_AGE_SECONDS) -> None:
        self._seen: OrderedDict[str, tuple[float, FileState]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_files = max_files
        self.max_age = max_age

    def __len__(self) -> int:
        return len(self._seen)

    def saw(self, path: str, st: os.stat_result | None, data: bytes | None = None) -> None:
        """Remember that the session was shown `path` as `st` (and, if given, its whole content `data`)."""
        state = FileState.of(st, data)
        now = time.monotonic()
        with self._lock:
            self._seen.pop(path, None)
            self._seen[path] = (now, state)
            while len(self._seen) > self.max_files:
                self._seen.popitem(last=False)

    def forget(self, path: str) -> None:
        with self._lock:
            self._seen.pop(path, None)

    def seen(self, path: str) -> FileState | None:
        now = time.monotonic()
        with self._lock:
            entry = self._seen.get(path)
            if entry is None:
                return None
            when, state = entry
            if now - when > self.max_age:
                del self._seen[path]
                return None
            return state

    def alias(self, st: os.stat_result) -> str | None:
        """The path under which the session last saw the file `st` is (same device and inode), for a file
        with several hard links: the session's picture of it holds under each of its names."""
        key = (st.st_dev, st.st_ino)
        with self._lock:
            found = [path for path, (_, state) in self._seen.items() if state.stat and state.stat[:2] == key]
        return found[-1] if found else None

    def check(self, path: str, st: os.stat_result | None, read: Callable[[], bytes] | None = None) -> None:
        """Refuse (`StaleFile`) an edit of `path`, found on disk as `st`, if it changed since the session saw
        it. `read` returns the current content; it is called only when the stat differs and a digest can
        decide. A file that was deleted since is forgotten as it is refused, so the next call may create it."""
        state = self.seen(path)
        if state is None:
            return
        now = FileState.of(st)
        if now.stat == state.stat:
            return
        if st is None:
            self.forget(path)
            raise StaleFile(path, "it was deleted")
        if state.stat is None:
            raise StaleFile(path, "it was created by something else after you were told it did not exist")
        if state.digest is not None and read is not None and digest(read()) == state.digest:
            return
        raise StaleFile(path, _what_changed(state.stat, now.stat))  # type: ignore[arg-type]


def _what_changed(before: tuple[int, ...], after: tuple[int, ...]) -> str:
    if before[:2] != after[:2]:
        return "it was replaced by another file, as an editor saving it does"
    if before[2] != after[2]:
        return f"its size went from {before[2]:,} to {after[2]:,} bytes"
    return "it was modified"
