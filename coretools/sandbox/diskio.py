"""Bytes to the disk, whole and durable: the steps every write of the server is made of, written once.

* `write_all`: `os.write` may write less than it was given (a signal, a pipe, a full quota mid-way);
* `read_all`: `os.pread` likewise, from an offset, up to an optional limit;
* `fsync_dir`: a file created, renamed or removed is durable only once its directory is synced;
* `anonymous_file`: bytes handed to another program as a file with no name (memfd), read from its start;
* `replace_file`: a file the server keeps for itself (in the state directory, the memory file) replaced
  atomically by path: a temporary file beside it, fsync, rename over it, fsync the directory; a reader sees
  the old content or the new, never a mix, and a crash leaves at most the temporary file.

The user's files beneath a root are replaced by `writes` on descriptors the gateway opened (with more to
keep: owner, attributes, other hard links); it uses the first three.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile

from coretools.sandbox import kernel


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of `data` to `fd`, however many calls it takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int, size_hint: int, start: int = 0, limit: int | None = None) -> bytes:
    """The bytes of `fd` from `start` to its end (or `limit` bytes at most); `size_hint`, the size the caller
    expects, lets a file of that size be read in one call."""
    chunks = []
    offset = 0
    while limit is None or offset < limit:
        want = max(size_hint - offset, 0) + 65536
        chunk = os.pread(fd, want if limit is None else min(want, limit - offset), start + offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def fsync_dir(folder: str | int) -> None:
    """Make the names in a directory durable: `folder` is its path, or a descriptor open on it (an `O_PATH`
    one is reopened for reading). A file system that cannot sync a directory is not an error: there is
    nothing more to do."""
    if isinstance(folder, str):
        fd: int | None = os.open(folder, os.O_RDONLY | kernel.O_DIRECTORY | kernel.O_CLOEXEC)
    else:
        fd = kernel.reopen(folder, os.O_RDONLY | kernel.O_DIRECTORY) if kernel.O_PATH else os.dup(folder)
        if fd is None:
            return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def anonymous_file(label: str, data: bytes) -> int:
    """A descriptor (close-on-exec; pass it on with `pass_fds`) of a file with no name holding `data`, at its
    start: a memfd named `label` where the platform has them, else an unlinked temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(label, os.MFD_CLOEXEC)
    else:  # pragma: no cover - not Linux
        with tempfile.TemporaryFile() as handle:
            fd = os.dup(handle.fileno())
    try:
        write_all(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_file(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None, private: bool = False) -> None:
    """Create or replace the file at `path` with `data`, atomically and durably. `mode`: its permissions
    (else a new file's are 0666 less the umask, or 0600 when `private`)."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | kernel.O_NOFOLLOW | kernel.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600 if private or mode is not None else 0o666)
    try:
        try:
            write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(folder or ".")
