"""A view of root-relative paths that another program reported, resolved without following any symlink."""

from __future__ import annotations

import errno
import os
import stat

from coretools.sandbox import kernel
from coretools.sandbox.paths import protected_name


class NoFollowView:
    """Root-relative paths resolved one component at a time from a root descriptor with `O_NOFOLLOW`, the
    way `walker.walk` descends: no symlink is followed (not even one that stays inside the root), `..`,
    `.` and empty components are refused, protected names are hidden (unless allowed). Whatever a program
    such as ripgrep reported by name is thus only looked at where it really is inside the root, even if the
    tree changed since. Directory descriptors are cached for the view's life (a bounded number)."""

    MAX_DIRS = 64  # paths from rg come a directory at a time; a few descriptors suffice

    def __init__(self, root_fd: int, allow_protected: bool) -> None:
        self._root_fd = root_fd
        self._allow_protected = allow_protected
        self._dirs: dict[str, int | None] = {}

    def __enter__(self) -> NoFollowView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._dirs.values():
            if fd is not None:
                os.close(fd)
        self._dirs.clear()

    def _refused(self, name: str) -> bool:
        return name in ("", ".", "..") or (not self._allow_protected and protected_name(name))

    def _dir(self, dir_rel: str) -> int | None:
        if not dir_rel:
            return self._root_fd
        if dir_rel in self._dirs:
            return self._dirs[dir_rel]
        parent_rel, _, name = dir_rel.rpartition("/")
        parent = self._dir(parent_rel)
        fd = None
        if parent is not None and not self._refused(name):
            flags = (kernel.O_PATH or os.O_RDONLY) | kernel.O_DIRECTORY | kernel.O_NOFOLLOW | kernel.O_CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=parent)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    return self._remember(dir_rel, None)
                # out of descriptors: give back the cached ones (keeping the parent) and try once more
                self._dirs.pop(parent_rel, None)
                self.close()
                try:
                    fd = os.open(name, flags, dir_fd=parent)
                finally:
                    if parent != self._root_fd:
                        os.close(parent)
        return self._remember(dir_rel, fd)

    def _remember(self, dir_rel: str, fd: int | None) -> int | None:
        if len(self._dirs) >= self.MAX_DIRS:
            self.close()  # the parent was only needed to open this one
        self._dirs[dir_rel] = fd
        return fd

    def _parent(self, rel: str) -> tuple[int | None, str]:
        dir_rel, _, name = rel.rpartition("/")
        if self._refused(name):
            return None, name
        return self._dir(dir_rel), name

    def lstat(self, rel: str) -> os.stat_result | None:
        parent, name = self._parent(rel)
        if parent is None:
            return None
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return None

    def lstat_many(self, rels: list[str]) -> list[os.stat_result | None]:
        """`lstat` of each path (consecutive paths in one directory share its descriptor lookup)."""
        out: list[os.stat_result | None] = [None] * len(rels)
        last_head: str | None = None
        fd: int | None = None
        guard = not self._allow_protected
        for index, rel in enumerate(rels):
            head, _, name = rel.rpartition("/")
            if head != last_head:
                last_head, fd = head, self._dir(head)
            if fd is None or name in ("", ".", "..") or (guard and name[:1] == "." and protected_name(name)):
                continue
            try:
                out[index] = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                pass
        return out

    def open_regular(self, rel: str) -> int | None:
        """A read-only descriptor of the regular file at `rel` (caller closes it), or None. Opened as the
        workspace gateway opens a plain path (`Workspace._open_plain_regular`): directly, never following a
        symlink (`O_NOFOLLOW`) and without blocking (`O_NONBLOCK`: a FIFO swapped in cannot hang it), then
        checked on the descriptor, so anything but a regular file is closed unread. One system call fewer
        per file than an `lstat` first: a search opens every file rg reports."""
        dir_rel, _, name = rel.rpartition("/")
        if self._refused(name):
            return None
        parent = self._dir(dir_rel)
        if parent is None:
            return None
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except OSError:
            return None
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError:
            regular = False
        if not regular:
            os.close(fd)
            return None
        return fd


_READ_FLAGS = os.O_RDONLY | kernel.O_NOFOLLOW | kernel.O_NONBLOCK | kernel.O_NOCTTY | kernel.O_CLOEXEC
