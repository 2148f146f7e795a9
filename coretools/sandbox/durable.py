"""Writes that change a file's content and nothing else.

The common case is an atomic replacement: the new bytes go to a temporary file beside the target, which
first receives the target's owner, group, mode, extended attributes and ACLs, and is then renamed over it.
A rename makes a new inode, so where that would change more than the content (the file has other hard
links, or this user cannot give the new inode the file's owner, group or attributes) the file is rewritten
in place instead, made crash-safe by a recovery record: the old bytes are first saved to a private file in
the user's state directory and fsynced, then the file is written, truncated and fsynced, then the record is
dropped. A record left behind by a crash is applied when a server starts (`recover`), so after a restart a
reader sees the old content or the new, never a mix.

A writer holds an exclusive `flock` on its record while it writes, so a second server starting meanwhile
leaves a live write alone; the kernel drops the lock when the writer dies, however it dies.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import stat
import sys
from dataclasses import dataclass

logger = logging.getLogger("coretools")

RECORD_SUFFIX = ".rec"
_XATTRS = hasattr(os, "listxattr") and sys.platform == "linux"  # names a file as /proc/self/fd/N/name


def state_dir() -> str:
    """The user's private state directory for coretools (`CORETOOLS_STATE_DIR`, else XDG's)."""
    explicit = os.environ.get("CORETOOLS_STATE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "coretools")


def private_dir(*parts: str) -> str:
    """`state_dir()/parts`, created 0700 if missing."""
    path = os.path.join(state_dir(), *parts)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def may_write(parent_fd: int, name: str) -> bool:
    """Whether this process may write the existing file itself (not its directory), by the kernel's
    rules for this user: root's rules when root."""
    try:
        return os.access(name, os.W_OK, dir_fd=parent_fd, effective_ids=True, follow_symlinks=False)
    except (NotImplementedError, OSError):
        return True  # no faccessat here: the write itself will say


def rename_keeps_identity(st: os.stat_result) -> bool:
    """Whether a renamed-in replacement can be what `st` is: one name, an owner this user can give it."""
    if st.st_nlink > 1:
        return False
    euid = os.geteuid()
    return euid == 0 or st.st_uid == euid


def carry_over(parent_fd: int, name: str, tmp_fd: int, st: os.stat_result) -> bool:
    """Give the temporary file `tmp_fd` the group and extended attributes (ACLs included) of `name`.
    False when something cannot be carried over by this user: the caller then writes in place."""
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        os.fchown(tmp_fd, st.st_uid, st.st_gid)
    elif st.st_gid != os.getegid():
        try:
            os.fchown(tmp_fd, -1, st.st_gid)
        except PermissionError:
            return False
    if not _XATTRS:
        return True
    source = f"/proc/self/fd/{parent_fd}/{name}"
    try:
        names = os.listxattr(source, follow_symlinks=False)
    except OSError as exc:
        return exc.errno in (errno.ENOTSUP, errno.ENOENT)
    for key in names:
        try:
            os.setxattr(tmp_fd, key, os.getxattr(source, key, follow_symlinks=False))
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES, errno.ENOTSUP):
                return False
            raise
    return True


@dataclass
class Record:
    """An open, locked recovery record of one in-place write."""

    fd: int
    path: str

    def drop(self) -> None:
        try:
            os.unlink(self.path)
            _fsync_path(os.path.dirname(self.path))
        finally:
            os.close(self.fd)

    def restore(self, fd: int) -> None:
        """Put the saved bytes back into the file open at `fd` (a write failed half way), then drop the
        record; if even that fails, the record stays for the next start and the lock goes with `fd`."""
        try:
            _, _, old = _read_all(self.fd, 0).partition(b"\n")
            write_in_place(fd, old)
        except OSError:
            os.close(self.fd)
            return
        self.drop()


def save_old(target: str, fd: int, st: os.stat_result) -> Record:
    """Copy the file open at `fd` (canonical path `target`) into a new locked, fsynced record."""
    folder = private_dir("recovery")
    path = os.path.join(folder, secrets.token_hex(8) + RECORD_SUFFIX)
    rec = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(rec, fcntl.LOCK_EX)
        old = _read_all(fd, st.st_size)
        header = {"path": target, "dev": st.st_dev, "ino": st.st_ino, "size": len(old)}
        _write_all(rec, json.dumps(header).encode() + b"\n")
        _write_all(rec, old)
        os.fsync(rec)
        _fsync_path(folder)
    except BaseException:
        os.close(rec)
        _unlink_quietly(path)
        raise
    return Record(rec, path)


def write_in_place(fd: int, data: bytes) -> None:
    """Overwrite the file open for writing at `fd` with `data`, drop any tail, and fsync."""
    os.lseek(fd, 0, os.SEEK_SET)
    _write_all(fd, data)
    os.ftruncate(fd, len(data))
    os.fsync(fd)


def recover() -> list[str]:
    """Apply every record left by an interrupted in-place write (old content back); return the paths
    restored. Records of writes still in progress (locked by a live writer) are left alone."""
    folder = os.path.join(state_dir(), "recovery")
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    restored = []
    for name in names:
        if not name.endswith(RECORD_SUFFIX):
            continue
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            target = _apply(fd, path)
            if target:
                restored.append(target)
            _unlink_quietly(path)
        finally:
            os.close(fd)
    return restored


def _apply(rec: int, path: str) -> str | None:
    data = _read_all(rec, os.fstat(rec).st_size)
    head, newline, old = data.partition(b"\n")
    try:
        header = json.loads(head) if newline else None
    except ValueError:
        header = None
    if not header or len(old) != header.get("size"):
        return None  # cut short while being saved: the file itself was not touched yet
    target = header["path"]
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        logger.warning("recovery record %s names %s, which cannot be opened (%s); left as it is", path, target, exc)
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (header["dev"], header["ino"]) or not stat.S_ISREG(st.st_mode):
            logger.warning("recovery record %s: %s is another file now; left as it is", path, target)
            return None
        write_in_place(fd, old)
    finally:
        os.close(fd)
    logger.warning("restored %s from the recovery record of an interrupted write (its old content is back)", target)
    return target


def _read_all(fd: int, size_hint: int) -> bytes:
    chunks = []
    offset = 0
    while True:
        chunk = os.pread(fd, max(size_hint - offset, 0) + 65536, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_path(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
