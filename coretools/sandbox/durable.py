"""Writes that change a file's content and nothing else.

The common case is an atomic replacement: the new bytes go to a temporary file beside the target, which
first receives the target's owner, group, mode, extended attributes and ACLs, and is then renamed over it.
A file with other hard links is replaced the same way, so the edit reaches this name only: the other names
(a backup made with `cp -al`, a package store, a file outside every root) keep the old content. Where this
user cannot give the new inode the file's owner, group or attributes (and the file has no other name), the
file is rewritten in place instead, made crash-safe by a recovery record: the old bytes are first saved to a
private file in the user's state directory and fsynced, then the file is written, truncated and fsynced,
then the record is dropped. A record left behind by a crash is applied when a server starts (`recover`), so
after a restart a reader sees the old content or the new, never a mix.

A writer holds an exclusive `flock` on its record while it writes, so a second server starting meanwhile
leaves a live write alone; the kernel drops the lock when the writer dies, however it dies. The temporary
file of an atomic replacement is claimed the same way (`claim_temp`): a locked note in the state directory
names it and its inode, so `recover` removes the temporary files of killed writers, and only those.
Meanwhile no listing shows one (`is_temp_name`).

Also here: `fsync_together`, which lets the edit journal's sync and the edit's own fsync share a file-system
commit, and `DeferredSync`, the journal's sync run once by whichever thread asks first. The journal's record
format is `coretools.workspace.records`; the plain steps (write all, read all, fsync a directory) are `diskio`'s.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import secrets
import stat
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from coretools.sandbox import settings
from coretools.sandbox.diskio import fsync_dir, read_all, write_all

logger = logging.getLogger("coretools")

RECORD_SUFFIX = ".rec"
TEMP_SUFFIX = ".coretools.tmp"
_TEMP_NAME = re.compile(r"\..*\.[0-9a-f]{8}\.coretools\.tmp", re.DOTALL)  # what `temp_name` makes
CLAIM_SUFFIX = ".claim"
UNWRITTEN_CLAIM_AGE = 60.0  # seconds: an empty claim older than this lost its writer before it was written
_XATTRS = hasattr(os, "listxattr") and sys.platform == "linux"  # names a file as /proc/self/fd/N/name


def private_dir(*parts: str) -> str:
    """`settings.state_dir()/parts`, created 0700 if missing."""
    path = os.path.join(settings.state_dir(), *parts)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def may_write(parent_fd: int, name: str) -> bool:
    """Whether this process may write the existing file itself (not its directory), by the kernel's
    rules for this user: root's rules when root."""
    try:
        return os.access(name, os.W_OK, dir_fd=parent_fd, effective_ids=True, follow_symlinks=False)
    except (NotImplementedError, OSError):
        return True  # no faccessat here: the write itself will say


def rename_keeps_owner(st: os.stat_result) -> bool:
    """Whether a renamed-in replacement can have the owner and group of `st`: they are this user's, or this
    user is root with CAP_CHOWN (containers often drop it; `carry_over` still finds out if this is wrong)."""
    euid = os.geteuid()
    if (st.st_uid, st.st_gid) == (euid, os.getegid()):
        return True
    return st.st_uid == euid if euid != 0 else _has_cap_chown()


def _has_cap_chown() -> bool:
    """Whether this thread holds CAP_CHOWN (bit 0 of its effective set); True when it cannot be told."""
    for status in ("/proc/thread-self/status", "/proc/self/status"):
        try:
            with open(status, "rb") as handle:
                for line in handle:
                    if line.startswith(b"CapEff:"):
                        return bool(int(line.split()[1], 16) & 1)
        except (OSError, ValueError, IndexError):
            continue
    return True


def carry_over(parent_fd: int, name: str, tmp_fd: int, st: os.stat_result) -> bool:
    """Give the temporary file `tmp_fd` the owner, group and extended attributes (ACLs included) of `name`.
    False when something cannot be carried over by this user (root without CAP_CHOWN, as containers often
    run, cannot give a file away): the caller then writes in place."""
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(tmp_fd, st.st_uid, st.st_gid)
        except PermissionError:
            return False
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
            fsync_dir(os.path.dirname(self.path))
        finally:
            os.close(self.fd)

    def restore(self, fd: int) -> None:
        """Put the saved bytes back into the file open at `fd` (a write failed half way), then drop the
        record; if even that fails, the record stays for the next start and the lock goes with `fd`."""
        try:
            _, _, old = read_all(self.fd, 0).partition(b"\n")
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
        old = read_all(fd, st.st_size)
        header = {"path": target, "dev": st.st_dev, "ino": st.st_ino, "size": len(old)}
        write_all(rec, json.dumps(header).encode() + b"\n")
        write_all(rec, old)
        os.fsync(rec)
        fsync_dir(folder)
    except BaseException:
        os.close(rec)
        _unlink_quietly(path)
        raise
    return Record(rec, path)


def write_in_place(fd: int, data: bytes) -> None:
    """Overwrite the file open for writing at `fd` with `data`, drop any tail, and fsync."""
    os.lseek(fd, 0, os.SEEK_SET)
    write_all(fd, data)
    os.ftruncate(fd, len(data))
    os.fsync(fd)


def temp_name(name: str) -> str:
    """A fresh name for the temporary file of a write to `name`, beside it: `.NAME.<random>.coretools.tmp`.
    The stem is cut by bytes, not characters (200 characters of a multibyte name overflow NAME_MAX)."""
    stem = os.fsencode(name)[:200].decode("utf-8", "ignore")
    return f".{stem}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """Is `name` (one path component) spelled as the temporary file of an edit (`temp_name`)? Every listing
    leaves such files out: while an edit writes one it is not yet the user's file, and one a killed server
    left is removed by the next start (`recover`)."""
    return name.endswith(TEMP_SUFFIX) and _TEMP_NAME.fullmatch(name) is not None


@dataclass
class Claim:
    """A writer's locked note naming its temporary file (see `claim_temp`)."""

    fd: int
    path: str

    def drop(self) -> None:
        """The temporary file is gone (renamed into place or removed): so is the note."""
        try:
            _unlink_quietly(self.path)
        finally:
            os.close(self.fd)


def claim_temp(path: str, st: os.stat_result) -> Claim | None:
    """Note, in the state directory, that this process is writing the temporary file at `path` (absolute)
    with the identity of `st`, and hold the note's `flock` until `Claim.drop`. A note whose lock is free was
    left by a writer that died: `recover` removes the file it names, if it is still that inode. Not fsynced:
    it guards against a killed process, whose writes the kernel keeps. None when the state directory cannot
    hold it (the write goes ahead; a kill would leave the temporary file, still hidden from listings)."""
    try:
        folder = private_dir("pending")
        note = os.path.join(folder, secrets.token_hex(8) + CLAIM_SUFFIX)
        fd = os.open(note, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        logger.debug("cannot note the temporary file %s (%s)", path, exc)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_all(fd, json.dumps({"path": path, "dev": st.st_dev, "ino": st.st_ino}).encode("utf-8", "surrogateescape"))
    except OSError:
        Claim(fd, note).drop()
        return None
    return Claim(fd, note)


def sweep_temps() -> list[str]:
    """Remove the temporary files of writers that died (their claims' locks are free) and return their
    paths. A file is removed only if it is still the very inode claimed and named as a temporary file."""
    folder = os.path.join(settings.state_dir(), "pending")
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    removed = []
    for name in names:
        if not name.endswith(CLAIM_SUFFIX):
            continue
        note = os.path.join(folder, name)
        try:
            fd = os.open(note, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a live writer's
        claim = Claim(fd, note)
        try:
            raw = read_all(fd, 4096, 0, 1 << 16)
            if not raw and os.fstat(fd).st_mtime > time.time() - UNWRITTEN_CLAIM_AGE:
                os.close(fd)  # just created, its writer about to lock it
                continue
            if _remove_claimed(raw):
                removed.append(json.loads(raw)["path"])
        except OSError:
            pass
        claim.drop()
    if removed:
        logger.warning("removed %d temporary file(s) left by interrupted writes: %s", len(removed), ", ".join(removed))
    return removed


def _remove_claimed(raw: bytes) -> bool:
    try:
        note = json.loads(raw)
        path, dev, ino = note["path"], note["dev"], note["ino"]
    except (ValueError, KeyError, TypeError):
        return False
    if not isinstance(path, str) or not is_temp_name(os.path.basename(path)):
        return False
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (dev, ino):
        return False
    os.unlink(path)
    return True


def sweep_locks(folder: str) -> int:
    """Remove the lock files in `folder` that no live process holds (see `locks`); returns how many."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if same_file(fd, path) is not None:
                os.unlink(path)  # while holding it: a waiter then finds its path gone and starts again
                removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def recover() -> list[str]:
    """Apply every record left by an interrupted in-place write (old content back); return the paths
    restored. Records of writes still in progress (locked by a live writer) are left alone. The temporary
    files and lock files of killed writers go too."""
    sweep_temps()
    sweep_locks(os.path.join(settings.state_dir(), "locks"))
    folder = os.path.join(settings.state_dir(), "recovery")
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
    data = read_all(rec, os.fstat(rec).st_size)
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


# -- append-only record files ------------------------------------------------------------------------------
#
class DeferredSync:
    """The fdatasync of a file open at `fd` (then an fsync of `folder` if given, then `then`), run once by
    whichever thread asks first; later calls wait for it, and the descriptor is closed after. A sync that
    fails is logged, not raised: the edit journal's caller goes ahead as when the journal cannot be written."""

    def __init__(self, fd: int, folder: str | None, then: Callable[[], None]) -> None:
        self.fd, self.folder, self.then = fd, folder, then
        self.lock = threading.Lock()

    def run(self) -> None:
        with self.lock:
            if self.fd < 0:
                return
            try:
                os.fdatasync(self.fd)
                if self.folder is not None:
                    fsync_dir(self.folder)
                self.then()
            except OSError as exc:
                logger.warning("could not sync %s (%s); going ahead", self.folder or f"descriptor {self.fd}", exc)
            finally:
                os.close(self.fd)
                self.fd = -1


def same_file(fd: int, path: str) -> tuple[int, int] | None:
    """The identity (device, inode) of the file open at `fd` if `path` still names it, else None."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino) else None


def remove_locked_folder(folder: str) -> None:
    """Remove a folder of files guarded by the `flock` on its file `lock`, unless someone holds it."""
    path = os.path.join(folder, "lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    try:
        for name in os.listdir(folder):
            if name != "lock":
                _unlink_quietly(os.path.join(folder, name))
        os.unlink(path)  # last: a waiter that then locks the unlinked file sees it is gone and starts afresh
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    finally:
        os.close(fd)


_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def fsync_together(fd: int, other: Callable[[], None] | None) -> None:
    """fsync `fd` while `other` (the sync of another file, e.g. the edit journal's record) runs in a helper
    thread; return when both are done. Issued together, a journaling file system can commit both in one
    transaction, where one after the other costs two."""
    global _helpers
    if other is None:
        os.fsync(fd)
        return
    with _helpers_lock:
        if _helpers is None:
            _helpers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="coretools-sync")
        pending = _helpers.submit(other)
    try:
        os.fsync(fd)
    finally:
        pending.result()


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
