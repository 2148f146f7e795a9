"""Scratch areas: where a command's full output and a background command's log are kept, readable
through the file tools and nothing else.

A runner that saves output owns one area: a directory (0700) inside its private temporary directory,
holding flat files (0600) whose names carry 128 random bits. The workspace gateway treats an absolute
path directly inside a registered area as a read-only location (`Workspace.locate`): read_file and
read_many_files can read it; writing, editing, listing it, or running a command in it is refused.
Containment needs no resolution at all, because an area is flat: a path must name one file directly
inside it, which is opened relative to the area's descriptor with O_NOFOLLOW (no symlink, no `..`, no
subdirectory), and must be a regular file of the server's user with a single link (a hard link planted
by a command to some other file is refused as well).

Bounds, applied whenever a file is made: at most `MAX_FILES` files and `MAX_BYTES` bytes per area, none
older than `MAX_AGE` seconds; expired files go first, then the oldest, never a file in use (the log of
a background command that is still running).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
import threading
import time

from coretools.errors import ErrorKind, PathError, ToolError
from coretools.sandbox import diskio, kernel, session
from coretools.sandbox.paths import within

MAX_FILES = 128
MAX_BYTES = 512 * 1024 * 1024
MAX_AGE = 24 * 3600.0

_areas: dict[str, ScratchArea] = {}  # by directory path (as made and canonical)
_areas_lock = threading.Lock()


class ScratchArea:
    """One flat directory of saved outputs and logs, registered so the gateway can read from it."""

    def __init__(self, path: str, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES,
                 max_age: float = MAX_AGE, owner: object = None) -> None:  # fmt: skip
        os.makedirs(path, mode=0o700, exist_ok=True)
        self.owner = owner  # the session whose calls may read it (`session.visible`); None: every session
        os.chmod(path, 0o700)
        self.path = os.path.realpath(path)
        self.max_files, self.max_bytes, self.max_age = max_files, max_bytes, max_age
        self.fd = os.open(self.path, (kernel.O_PATH or os.O_RDONLY) | kernel.O_DIRECTORY | kernel.O_CLOEXEC)
        self._in_use: set[str] = set()
        self._lock = threading.Lock()
        self._keys = {path, self.path}
        with _areas_lock:
            for key in self._keys:
                _areas[key] = self

    def create(self, label: str, suffix: str = ".txt") -> tuple[int, str]:
        """A new empty file, opened for writing; returns `(fd, path)`. The bounds are applied first."""
        self.prune()
        name = f"{label}-{secrets.token_hex(16)}{suffix}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | kernel.O_NOFOLLOW | kernel.O_CLOEXEC
        fd = os.open(os.path.join(self.path, name), flags, 0o600)
        return fd, os.path.join(self.path, name)

    def save(self, label: str, data: bytes, suffix: str = ".txt") -> str:
        """Write `data` to a new file of the area; return its path."""
        fd, path = self.create(label, suffix)
        try:
            diskio.write_all(fd, data)
        finally:
            os.close(fd)
        return path

    def open(self, name: str, flags: int) -> int:
        """Open the file `name` of the area (`os.open` flags), relative to the area's descriptor; OSError
        (EBADF) once the area is closed. `close` waits for an open in progress: the number of a closed
        descriptor goes to whatever the process opens next (another session's directory, a workspace root),
        and a read racing the end of its session must not name a file there."""
        with self._lock:
            return os.open(name, flags, dir_fd=self.fd)

    def hold(self, path: str) -> None:
        """Keep `path` from being pruned (a log still being written) until `release`."""
        with self._lock:
            self._in_use.add(os.path.basename(path))

    def release(self, path: str) -> None:
        with self._lock:
            self._in_use.discard(os.path.basename(path))

    def prune(self) -> list[str]:
        """Remove expired files, then the oldest ones, until the area is within its bounds with room for
        one more file. Files in use stay. Returns the names removed."""
        entries = self._entries()
        now = time.time()
        with self._lock:
            in_use = set(self._in_use)
        candidates = sorted((e for e in entries if e[0] not in in_use), key=lambda e: e[1])
        count, total = len(entries), sum(e[2] for e in entries)
        removed = []
        for name, mtime, size in candidates:
            if now - mtime <= self.max_age and count < self.max_files and total <= self.max_bytes:
                break
            try:
                os.unlink(os.path.join(self.path, name))
            except OSError:
                continue
            removed.append(name)
            count, total = count - 1, total - size
        return removed

    def _entries(self) -> list[tuple[str, float, int]]:
        found = []
        try:
            with os.scandir(self.path) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    found.append((entry.name, st.st_mtime, st.st_size))
        except OSError:
            pass
        return found

    def close(self) -> None:
        """Unregister the area (its files become unreachable through the tools) and close its descriptor.
        The directory itself is removed by its owner."""
        with _areas_lock:
            for key in self._keys:
                if _areas.get(key) is self:
                    del _areas[key]
        with self._lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def user_parent() -> str:
    """The directory that holds every server's scratch of this user (`$TMPDIR/coretools-UID`, 0700), which
    the sandboxes hide whole so that no command sees another server's sessions; the system's temporary
    directory itself where that name is taken by something else (a link, another owner)."""
    base = tempfile.gettempdir()
    path = os.path.join(base, f"coretools-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return base
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return base
    return path


def root_overlap(real: str) -> str | None:
    """Why a workspace root at the canonical path `real` would hold the saved outputs and logs of sessions,
    or None. Inside a root they would be ordinary files of it, which every session may list, read and `cat`
    (Landlock grants by hierarchy and cannot carve them out), so such a root is refused: one that holds the
    directory of every server's scratch (`--root /tmp`, a `$TMPDIR` inside the root), one inside it, and
    one inside or around a live area (where the system's temporary directory had to stand in for it)."""
    parent = os.path.realpath(user_parent())
    if within(parent, real):
        return f"it holds {parent}, where coretools keeps the saved command output and logs of every session"
    if parent != os.path.realpath(tempfile.gettempdir()) and within(real, parent):
        return f"it is inside {parent}, where coretools keeps the saved command output and logs of every session"
    with _areas_lock:
        areas = {area.path for area in _areas.values()}
    for path in sorted(areas):
        if within(real, path) or within(path, real):
            return f"it overlaps {path}, where coretools keeps the saved command output of a session"
    return None


def find(path: str) -> tuple[ScratchArea, str] | None:
    """The registered area that `path` names a file directly inside of, and that file's name; or None.
    Purely lexical: the name is one plain component (no `/`, `.`, `..`). Another session's area is None:
    it does not exist for this caller."""
    directory, _, name = os.path.normpath(path).rpartition("/")
    if name in ("", ".", "..") or not directory:
        return None
    with _areas_lock:
        area = _areas.get(directory)
    return None if area is None or not session.visible(area.owner) else (area, name)


def is_scratch_path(path: str) -> bool:
    return find(path) is not None


def open_saved(path: str, flags: int) -> tuple[int, os.stat_result]:
    """Open a file of a scratch area for reading (`flags`: O_RDONLY, or O_PATH to look at it); returns
    `(fd, stat)`. Only a regular file directly in the area, not a symlink, owned by this user and with one
    link, is opened; anything else is refused with a `ToolError`."""
    found = find(path)
    if found is None:
        raise PathError(f"File not found: {path}", ErrorKind.FILE_NOT_FOUND)
    area, name = found
    open_flags = flags | kernel.O_NOFOLLOW | kernel.O_CLOEXEC
    if not flags & kernel.O_PATH:
        open_flags |= kernel.O_NONBLOCK | kernel.O_NOCTTY
    try:
        fd = area.open(name, open_flags)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF):
            raise PathError(
                f"File not found: {path}. Saved command outputs are removed after {area.max_age / 3600:g} h, when "
                f"more than {area.max_files} accumulate, or when the server stops.",
                ErrorKind.FILE_NOT_FOUND,
            ) from None
        raise _not_readable(path) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
        os.close(fd)
        raise _not_readable(path)
    return fd, st


def read_only_error(path: str, roots: list[str]) -> ToolError:
    """The refusal of any write, edit or working directory in a scratch area."""
    return PathError(
        f"{path} is a saved command output in the server's read-only scratch area: it can be read, not written, "
        f"edited or used as a directory. Work inside the workspace ({', '.join(roots)}).",
        ErrorKind.PERMISSION_DENIED,
    )


def _not_readable(path: str) -> ToolError:
    return ToolError(
        f"Not a saved output the server wrote (a link, a directory or a file replaced since): {path}",
        ErrorKind.READ_CONTENT_FAILURE,
    )
