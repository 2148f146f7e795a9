"""Contained path resolution at the system-call level.

`open_beneath(root_fd, rel, flags)` opens `rel` relative to a directory descriptor and guarantees that no
step of the resolution leaves that directory, however the tree changes while it runs:

* On Linux >= 5.6 the kernel does it: `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`.
  `..` may not climb above the root, absolute symlinks and `/proc/*/fd` magic links are refused.
* Elsewhere (and when openat2 refuses something a user would expect to work, such as an absolute
  symlink that points back inside a root), `walk_open` resolves one component at a time with
  `O_NOFOLLOW` relative to descriptors it holds, reads symlinks itself and keeps its own `..` stack,
  so nothing it opens can be outside a root even if a component is swapped for a symlink mid-walk.

Both return a descriptor; callers work on that descriptor and never reopen the path by name.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass

from coretools.sandbox import settings
from coretools.sandbox.paths import strip_prefix

O_PATH = getattr(os, "O_PATH", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
O_NOCTTY = getattr(os, "O_NOCTTY", 0)

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

_SYS_OPENAT2 = 437  # the same number on every Linux architecture (new syscalls share one table)
MAX_SYMLINKS = 40


class EscapeError(OSError):
    """Resolution would leave the root (`..` above it, or a symlink pointing elsewhere)."""

    def __init__(self, detail: str = "resolves outside the root") -> None:
        super().__init__(errno.EXDEV, detail)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_openat2() -> Callable[[int, str, int, int], int] | None:
    if sys.platform != "linux" or settings.openat2_disabled():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    number = ctypes.c_long(_SYS_OPENAT2)
    size = ctypes.c_size_t(ctypes.sizeof(_OpenHow))
    # One `open_how` per (flags, mode, resolve), built once: a few combinations are ever used, and building
    # the structure on every call cost as much as the system call. They are never written after creation,
    # so threads can share them.
    hows: dict[tuple[int, int, int], object] = {}

    def openat2(dir_fd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
        key = (flags, mode if flags & os.O_CREAT else 0, resolve)
        how = hows.get(key)
        if how is None:
            how = hows.setdefault(key, ctypes.byref(_OpenHow(*key)))
        fd = syscall(number, ctypes.c_int(dir_fd), os.fsencode(path), how, size)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return int(fd)

    # Probe once: an old kernel answers ENOSYS, a seccomp filter EPERM/ENOSYS. The probe's descriptor is closed.
    try:
        top = os.open("/", os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = openat2(top, ".", O_PATH | O_CLOEXEC, RESOLVE_BENEATH)
    except OSError:
        return None
    finally:
        os.close(top)
    os.close(fd)
    return openat2


_openat2 = _load_openat2()


def have_openat2() -> bool:
    return _openat2 is not None


RENAME_NOREPLACE = 1


def _load_renameat2() -> Callable[..., int] | None:
    if sys.platform != "linux":
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_renameat2 = _load_renameat2()


def rename_no_replace(src_fd: int, src: str, dst_fd: int, dst: str) -> bool:
    """Rename the name `src` of the directory `src_fd` to `dst` of `dst_fd` in one step that never replaces
    an existing `dst` (`renameat2(RENAME_NOREPLACE)`: FileExistsError), so a crash leaves one name or the
    other, never both. False where the C library, the kernel or the file system cannot; the caller then
    moves another way."""
    if _renameat2 is None:
        return False
    if _renameat2(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), dst)


@dataclass
class Anchor:
    """A root the walker may resolve into: its descriptor and its canonical absolute path."""

    fd: int
    path: str


def open_beneath(
    anchors: list[Anchor],
    index: int,
    rel: str,
    flags: int,
    mode: int = 0o666,
    *,
    follow_final: bool = True,
) -> tuple[int, int]:
    """Open `rel` beneath `anchors[index]`; return `(fd, anchor_index)`.

    The anchor index tells which root the result lies in: an absolute symlink inside one root may point
    into another root, which is allowed and resolved by the walker.
    """
    flags |= O_CLOEXEC
    if not follow_final:
        flags |= O_NOFOLLOW
    if _openat2 is not None:
        for _ in range(8):  # EAGAIN: a concurrent rename raced the kernel's lookup; retry a few times
            try:
                return _openat2(anchors[index].fd, rel or ".", flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, mode), index
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    continue
                if exc.errno in (errno.EXDEV, errno.ELOOP) and _walk_may_help(rel, exc.errno, follow_final):
                    break  # an absolute or cross-root symlink: let the walker decide
                raise
    return walk_open(anchors, index, rel, flags, mode, follow_final=follow_final)


def open_plain(root_fd: int, rel: str, flags: int, mode: int = 0o666) -> int | None:
    """Open `rel` beneath `root_fd` if no step of it is a symlink (`RESOLVE_NO_SYMLINKS`), else None.

    The fast path for the common case: when it succeeds, the path the caller gave, normalised, *is* the real
    path (no link was followed and `..` stayed beneath the root), so no `/proc/self/fd` lookup is needed to
    learn where the file is. None means "resolve it the general way" (a symlink on the way, an escape
    attempt, or no openat2 here); other errors (not found, permission) are raised as they are.
    """
    if _openat2 is None:
        return None
    for _ in range(8):
        try:
            return _openat2(
                root_fd, rel or ".", flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS, mode
            )
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                continue
            if exc.errno in (errno.ELOOP, errno.EXDEV):
                return None
            raise
    return None


def _walk_may_help(rel: str, err: int, follow_final: bool) -> bool:
    # ELOOP with O_NOFOLLOW means "the final component is a symlink": a real answer, not a containment issue.
    return err == errno.EXDEV or (err == errno.ELOOP and follow_final)


def walk_open(
    anchors: list[Anchor],
    index: int,
    rel: str,
    flags: int,
    mode: int = 0o666,
    *,
    follow_final: bool = True,
) -> tuple[int, int]:
    """Userspace contained resolution: one component at a time, never letting the kernel follow a link."""
    flags |= O_CLOEXEC
    pending = _split(rel)
    pending.reverse()  # a stack: pop() yields the next component
    links = 0
    current = index
    stack: list[int] = [os.dup(anchors[current].fd)]  # descriptors of the directories walked so far
    try:
        while pending:
            name = pending.pop()
            if name == "..":
                if len(stack) == 1:
                    raise EscapeError("'..' climbs above the root")
                os.close(stack.pop())
                continue
            last = not pending
            parent = stack[-1]
            if last:
                try:
                    fd = os.open(name, flags | O_NOFOLLOW, mode, dir_fd=parent)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) or not follow_final:
                        raise
                    if not _is_symlink(parent, name):
                        raise
                    fd = -1
                if fd >= 0 and not (O_PATH and flags & O_PATH and follow_final and _fd_is_symlink(fd)):
                    return fd, current
                if fd >= 0:
                    os.close(fd)
            else:
                try:
                    fd = os.open(name, (O_PATH or os.O_RDONLY) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, dir_fd=parent)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) or not _is_symlink(parent, name):
                        raise
                    fd = -1
                if fd >= 0:
                    stack.append(fd)
                    continue
            # `name` is a symlink: splice its target into the pending components.
            links += 1
            if links > MAX_SYMLINKS:
                raise OSError(errno.ELOOP, "Too many levels of symbolic links", rel)
            target = os.readlink(name, dir_fd=parent)
            parts = _split(target)
            if target.startswith("/"):
                current, inside = _locate_absolute(anchors, target)
                for fd in stack:
                    os.close(fd)
                stack = [os.dup(anchors[current].fd)]
                parts = _split(inside)
            pending.extend(reversed(parts))
        # rel was empty or ended in '..': open the directory we are standing in
        return os.open(".", flags, mode, dir_fd=stack[-1]), current
    finally:
        for fd in stack:
            os.close(fd)


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _fd_is_symlink(fd: int) -> bool:
    return stat.S_ISLNK(os.fstat(fd).st_mode)


def _locate_absolute(anchors: list[Anchor], target: str) -> tuple[int, str]:
    """Map an absolute symlink target onto the root that contains it, or refuse."""
    for i, anchor in enumerate(anchors):
        rel = strip_prefix(target, anchor.path)
        if rel is not None:
            return i, rel.rstrip("/")
    raise EscapeError(f"symlink points outside the workspace: {target}")


def fd_real_path(fd: int) -> str | None:
    """The canonical path the kernel has for an open descriptor, when the platform can say."""
    if sys.platform == "linux":
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        if path.endswith(" (deleted)"):
            # Only an unlinked file is "deleted": a real name may end that way too (`.git/x (deleted)`),
            # and answering None for it would drop the protected-path check to the lexical alias name.
            try:
                if os.fstat(fd).st_nlink == 0:
                    return None
            except OSError:
                return None
        return path
    if sys.platform == "darwin":
        import fcntl

        try:
            buf = fcntl.fcntl(fd, 50, b"\0" * 1024)  # F_GETPATH
        except OSError:
            return None
        return os.fsdecode(buf.split(b"\0", 1)[0])
    return None


def reopen(fd: int, flags: int) -> int | None:
    """Open the very inode behind an `O_PATH` descriptor with real access flags (Linux), or None."""
    if not O_PATH or sys.platform != "linux":
        return None
    try:
        return os.open(f"/proc/self/fd/{fd}", flags | O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENXIO):
            return None
        raise
