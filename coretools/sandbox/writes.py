"""Writes through the gateway: atomic replacement (also of a file with other hard links, which keep their
content), in-place writes where a rename would change more than the content (see `durable`), removal, and
the per-file edit lock (see `locks`).

`Writes` is a collaborator of the gateway, not a part of it: it reaches the file system only through the
small `Gateway` interface (contained opening of a parent directory or a file, the error for a failed system
call, the roots, the protected-path switch), so every path it touches was resolved beneath a root by the
gateway."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from coretools.errors import ErrorKind, PathError, ProtectedPath, ToolError
from coretools.sandbox import diskio, durable, kernel, locks
from coretools.sandbox.paths import Location, Node, Root, WriteOutcome, kind_name, protected_reason


@dataclass
class Written(WriteOutcome):
    """What `write_atomic` did, and the file's stat once written (to remember it without opening it again).
    `other_names`: the hard links the file had besides this name; they keep the old content."""

    st: os.stat_result | None = None
    other_names: int = 0


class Gateway(Protocol):
    """What `Writes` needs of the workspace gateway (`gateway.Workspace`)."""

    roots: tuple[Root, ...]
    allow_protected: bool

    def open_parent(self, loc: Location, *, create: bool, directory: bool = False) -> tuple[int, int, str, str]: ...

    def open_node(self, loc: Location, *, follow: bool = True) -> Node: ...

    def shown_path(self, root: int, rel: str) -> str: ...

    def os_error(self, exc: OSError, shown: str) -> ToolError: ...


class Writes:
    """The write half of the workspace gateway: `Workspace` hands it its write calls."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def write_atomic(
        self,
        loc: Location,
        data: bytes,
        *,
        create_parents: bool = True,
        must_not_exist: bool = False,
        mode: int | None = None,
        expect: os.stat_result | None = None,
        sync_with: Callable[[], None] | None = None,
    ) -> Written:
        """Replace (or create) a file atomically: temp file beside it, fsync, rename over it.

        A reader sees the old content or the new, never a mix; a crash leaves at most a temp file, which
        no listing shows and the next start removes. A file with other hard links is replaced too: only
        this name gets the new content (never written through to a name that may lie outside every root).
        A symlink at the target is followed only if it resolves inside a root; the real file is replaced.
        `expect` (the stat of the file as it was read) refuses the write if the file was replaced or changed
        on disk since; `must_not_exist` never replaces a file that appears meanwhile (hard-link, not rename).
        `sync_with` (the edit journal's record sync) runs beside the temp file's fsync and is done before the
        rename, or before an in-place write begins.
        """
        parent_fd, root, parent_rel, name = self.gateway.open_parent(loc, create=create_parents)
        try:
            try:
                st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                os.close(parent_fd)
                parent_fd = -1
                try:
                    target = self.gateway.open_node(loc)  # follows the link, contained
                except PathError as exc:
                    if exc.kind != ErrorKind.FILE_NOT_FOUND:
                        raise
                    raise _dangling_link(loc.shown) from None
                with target:
                    if not target.is_file:
                        raise ToolError(f"Symlink target is not a regular file: {loc.shown}", ErrorKind.FILE_WRITE_FAILURE)
                    real = Location(target.root, target.rel, target.path)
                return self.write_atomic(
                    real, data, create_parents=False, must_not_exist=must_not_exist, mode=mode, expect=expect,
                    sync_with=sync_with,
                )
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise ToolError(f"Path is a directory, not a file: {loc.shown}", ErrorKind.TARGET_IS_DIRECTORY)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ToolError(f"Not a regular file ({kind_name(st.st_mode)}): {loc.shown}", ErrorKind.FILE_WRITE_FAILURE)
            if st is not None and must_not_exist:
                raise ToolError(f"File already exists: {loc.shown}", ErrorKind.ATTEMPT_TO_CREATE_EXISTING_FILE)
            if expect is not None:
                _check_unchanged(st, expect, loc.shown)
            shown = self._landed(root, parent_rel, name)
            # Keep the old permissions minus set-user/group-ID: new content must not inherit them (the kernel
            # drops them too when an ordinary process writes to such a file).
            perm = stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID) if st is not None else mode
            if st is not None and not durable.may_write(parent_fd, name):
                raise PathError(
                    f"Permission denied: {shown} is not writable by the user the server runs as (uid "
                    f"{os.geteuid()}); it was left untouched. Ask the user to change its permissions, or write "
                    "elsewhere.",
                    ErrorKind.PERMISSION_DENIED,
                )
            target = os.path.join(self.gateway.roots[root].path, parent_rel, name)
            if st is not None and not durable.rename_keeps_owner(st):
                _refuse_linked(st, shown)
                now = self._write_in_place(parent_fd, name, data, perm, st, shown, target, expect, sync_with)
            else:
                now = self._replace(
                    parent_fd, name, data, perm, st, shown, target, no_replace=must_not_exist, expect=expect,
                    sync_with=sync_with,
                )
            previous = stat.S_IMODE(st.st_mode) if st else None
            other = st.st_nlink - 1 if st is not None else 0
            return Written(shown, created=st is None, previous_mode=previous, st=now, other_names=other)
        finally:
            if parent_fd >= 0:
                os.close(parent_fd)

    def _replace(
        self,
        parent_fd: int,
        name: str,
        data: bytes,
        perm: int | None,
        old: os.stat_result | None,
        shown: str,
        target: str,
        *,
        no_replace: bool = False,
        expect: os.stat_result | None = None,
        sync_with: Callable[[], None] | None = None,
    ) -> os.stat_result | None:
        """Returns the stat of the file written (None when it could not be told). The temp file is claimed
        (`durable.claim_temp`) while it exists, so a kill leaves nothing the next start cannot remove."""
        # O_EXCL|O_NOFOLLOW never opens a planted file or symlink; a name already taken, by chance or by a
        # plant, just means another random suffix.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | kernel.O_NOFOLLOW | kernel.O_CLOEXEC
        for attempt in range(16):
            tmp = durable.temp_name(name)
            try:
                fd = os.open(tmp, flags, 0o666 if perm is None else 0o600, dir_fd=parent_fd)
                break
            except FileExistsError as exc:
                if attempt == 15:
                    raise self.gateway.os_error(exc, shown) from None
            except OSError as exc:
                raise self.gateway.os_error(exc, shown) from None
        written = claim = None
        try:
            try:
                claim = durable.claim_temp(os.path.join(os.path.dirname(target), tmp), os.fstat(fd))
                diskio.write_all(fd, data)
                if perm is not None:
                    os.fchmod(fd, perm)
                carried = old is None or durable.carry_over(parent_fd, name, fd, old)
                if carried:
                    durable.fsync_together(fd, sync_with)
                    if expect is not None:  # once more, as late as possible: the temp file took time to write
                        try:
                            now = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                        except FileNotFoundError:
                            now = None
                        _check_unchanged(now, expect, shown)
                    if no_replace:
                        _link_no_replace(parent_fd, tmp, name, shown)
                    else:
                        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
                    written = os.fstat(fd)  # after the rename, which changes the file's ctime
            finally:
                os.close(fd)
            if not carried:
                os.unlink(tmp, dir_fd=parent_fd)
                _refuse_linked(old, shown)  # type: ignore[arg-type]
                return self._write_in_place(
                    parent_fd, name, data, perm, old, shown, target, expect, sync_with  # type: ignore[arg-type]
                )
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=parent_fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self.gateway.os_error(exc, shown) from None
            raise
        finally:
            if claim is not None:
                claim.drop()
        diskio.fsync_dir(parent_fd)
        return written

    def _write_in_place(
        self,
        parent_fd: int,
        name: str,
        data: bytes,
        perm: int | None,
        old: os.stat_result,
        shown: str,
        target: str,
        expect: os.stat_result | None,
        sync_with: Callable[[], None] | None = None,
    ) -> os.stat_result:
        """Rewrite the file itself (same inode: its owner and attributes stay), crash-safe through a recovery
        record of its old bytes (see `durable`). Never a file with other names (a link made meanwhile is
        refused). Returns its stat once written."""
        try:
            fd = os.open(name, os.O_RDWR | kernel.O_NOFOLLOW | kernel.O_NONBLOCK | kernel.O_CLOEXEC, dir_fd=parent_fd)
        except OSError as exc:
            raise self.gateway.os_error(exc, shown) from None
        try:
            st = os.fstat(fd)
            _check_unchanged(st, expect if expect is not None else old, shown)
            _refuse_linked(st, shown)
            if sync_with is not None:
                sync_with()
            record = durable.save_old(target, fd, st)
            try:
                durable.write_in_place(fd, data)
                if perm is not None and stat.S_IMODE(st.st_mode) != perm:
                    os.fchmod(fd, perm)
            except BaseException:
                record.restore(fd)
                raise
            record.drop()
            return os.fstat(fd)
        except OSError as exc:
            raise self.gateway.os_error(exc, shown) from None
        finally:
            os.close(fd)

    def _landed(self, root: int, parent_rel: str, name: str) -> str:
        """The shown path of the name `open_parent` reached, refused if that real place is protected (the name
        the call gave was judged before, but a contained link in its path may lead elsewhere)."""
        rel = f"{parent_rel}/{name}" if parent_rel else name
        shown = self.gateway.shown_path(root, rel)
        if not self.gateway.allow_protected and (reason := protected_reason(rel)):
            raise ProtectedPath(shown, reason)
        return shown

    def remove_file(self, loc: Location, *, expect: os.stat_result | None = None) -> str:
        """Remove the regular file `loc` names (not a link: its real path is expected), contained like every
        write; `expect` refuses if it was replaced or changed since. Returns the shown path. (Undo of an edit
        that created the file.)"""
        parent_fd, root, parent_rel, name = self.gateway.open_parent(loc, create=False)
        try:
            rel = f"{parent_rel}/{name}" if parent_rel else name
            shown = self.gateway.shown_path(root, rel)
            try:
                st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            except OSError as exc:
                raise self.gateway.os_error(exc, shown) from None
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"Not a regular file ({kind_name(st.st_mode)}): {shown}", ErrorKind.FILE_WRITE_FAILURE)
            if not self.gateway.allow_protected and (reason := protected_reason(rel)):
                raise ProtectedPath(shown, reason)
            if expect is not None:
                _check_unchanged(st, expect, shown)
            try:
                os.unlink(name, dir_fd=parent_fd)
            except OSError as exc:
                raise self.gateway.os_error(exc, shown) from None
            diskio.fsync_dir(parent_fd)
            return shown
        finally:
            os.close(parent_fd)

    def remove_directory(self, loc: Location, *, expect: os.stat_result | None = None) -> str:
        """Remove the empty directory `loc` names, with unlinkat(AT_REMOVEDIR) in its opened parent: the name
        is removed, never followed, so a symbolic link put in the directory's place is refused, not its
        target. `expect` (the directory's stat when it was checked) refuses another directory put there
        since. A directory with anything inside is refused, naming what. Returns the shown path. (Undo of
        create_directory.)"""
        parent_fd, root, parent_rel, name = self.gateway.open_parent(loc, create=False)
        try:
            shown = self._landed(root, parent_rel, name)
            try:
                st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise ToolError(f"Not removed: {shown} is {kind_name(st.st_mode)} now, not a directory (it was "
                                    "replaced); it was left as it is. Nothing was removed.",
                                    ErrorKind.FILE_WRITE_FAILURE)
                if expect is not None and (st.st_dev, st.st_ino) != (expect.st_dev, expect.st_ino):
                    raise ToolError(f"Directory changed on disk (another directory was put in its place): {shown}. "
                                    "Nothing was removed.", ErrorKind.FILE_WRITE_FAILURE)
                inside = _listed(parent_fd, name)
                if inside:
                    raise _not_empty(shown, inside)
                os.rmdir(name, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise _not_empty(shown, _listed(parent_fd, name)) from None
                raise self.gateway.os_error(exc, shown) from None
            diskio.fsync_dir(parent_fd)
            return shown
        finally:
            os.close(parent_fd)

    def make_directory(self, loc: Location) -> tuple[str, bool]:
        """Create the directory `loc` names and its missing parents (`mkdir -p`), each with mkdirat in a
        descriptor that contained resolution returned (`open_parent`), never at or inside a protected path
        (judged on the name given before anything is created, and on the real place). Returns the shown
        path and whether it was created (False: a directory, or a contained link to one, was there)."""
        if not self.gateway.allow_protected and (reason := protected_reason(loc.rel)):
            raise ProtectedPath(loc.shown, reason)
        parent_fd, root, parent_rel, name = self.gateway.open_parent(loc, create=True, directory=True)
        try:
            shown = self._landed(root, parent_rel, name)
            try:
                os.mkdir(name, 0o777, dir_fd=parent_fd)
            except FileExistsError:
                with self.gateway.open_node(loc) as node:  # follows a link only inside the roots
                    if not node.is_dir:
                        raise ToolError(
                            f"Cannot create directory {shown}: {kind_name(node.st.st_mode)} of that name exists there.",
                            ErrorKind.ATTEMPT_TO_CREATE_EXISTING_FILE,
                        ) from None
                return shown, False
            except OSError as exc:
                raise self.gateway.os_error(exc, shown) from None
            diskio.fsync_dir(parent_fd)
            return shown, True
        finally:
            os.close(parent_fd)

    def move_file(
        self, source: Location, destination: Location, *, overwrite: bool = False, expect: os.stat_result | None = None
    ) -> tuple[str, str]:
        """Rename the regular file `source` names to `destination` (its missing parent directories created
        as writes create them), both resolved beneath a root, neither protected. An existing destination is
        refused unless `overwrite`; without it the move is a hard link then an unlink, so a file that
        appears at the destination meanwhile is never replaced. The names are moved, not followed: a
        symbolic link at either end is refused. `expect` refuses a source replaced or changed since. Returns
        both shown paths."""
        src_fd, src_root, src_parent, src_name = self.gateway.open_parent(source, create=False)
        dst_fd = -1
        try:
            src_rel = f"{src_parent}/{src_name}" if src_parent else src_name
            src_shown = self.gateway.shown_path(src_root, src_rel)
            if not self.gateway.allow_protected and (reason := protected_reason(src_rel)):
                raise ProtectedPath(src_shown, reason)
            if not self.gateway.allow_protected and (reason := protected_reason(destination.rel)):
                raise ProtectedPath(destination.shown, reason)
            try:
                st = os.stat(src_name, dir_fd=src_fd, follow_symlinks=False)
            except OSError as exc:
                raise self.gateway.os_error(exc, src_shown) from None
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(
                    f"Path is a directory, not a file: {src_shown}. Only files are moved.",
                    ErrorKind.TARGET_IS_DIRECTORY,
                )
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(
                    f"Not a regular file ({kind_name(st.st_mode)}): {src_shown}. Only regular files are moved.",
                    ErrorKind.FILE_WRITE_FAILURE,
                )
            if expect is not None:
                _check_unchanged(st, expect, src_shown)
            dst_fd, dst_root, dst_parent, dst_name = self.gateway.open_parent(destination, create=True)
            dst_rel = f"{dst_parent}/{dst_name}" if dst_parent else dst_name
            dst_shown = self.gateway.shown_path(dst_root, dst_rel)
            if not self.gateway.allow_protected and (reason := protected_reason(dst_rel)):
                raise ProtectedPath(dst_shown, reason)
            _check_destination(dst_fd, dst_name, dst_shown, st, overwrite=overwrite)
            try:
                if overwrite:
                    os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                else:
                    _link_no_replace_from(src_fd, src_name, dst_fd, dst_name, dst_shown)
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise ToolError(
                        f"Cannot move {src_shown} to {dst_shown}: they are on different file systems, where a file "
                        "cannot be renamed. Nothing was moved. Write the content to the destination and delete the "
                        "source instead.",
                        ErrorKind.FILE_WRITE_FAILURE,
                    ) from None
                raise self.gateway.os_error(exc, dst_shown) from None
            diskio.fsync_dir(dst_fd)
            diskio.fsync_dir(src_fd)
            return src_shown, dst_shown
        finally:
            os.close(src_fd)
            if dst_fd >= 0:
                os.close(dst_fd)

    def edit_key(self, loc: Location) -> str:
        """The canonical absolute path of the file `loc` names, following a contained symlink at the target
        as `write_atomic` does. It names the file across atomic replacements (an inode would not) and is the
        same in every Workspace of this process, so it can key a process-wide lock."""
        try:  # a name, not a write: a path given with a final "/" has one too (the write refuses it)
            parent_fd, root, parent_rel, name = self.gateway.open_parent(loc, create=False, directory=True)
        except PathError as exc:
            if exc.kind != ErrorKind.FILE_NOT_FOUND:
                raise
            return os.path.normpath(os.path.join(self.gateway.roots[loc.root].path, loc.rel))
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            st = None
        finally:
            os.close(parent_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            try:
                with self.gateway.open_node(loc) as target:
                    return os.path.join(self.gateway.roots[target.root].path, target.rel)
            except PathError:
                pass  # dangling or escaping: the write will refuse it; key the link itself
        rel = f"{parent_rel}/{name}" if parent_rel else name
        return os.path.join(self.gateway.roots[root].path, rel)

    def lock_edit(self, loc: Location, *, cancelled: Callable[[], object] | None = None) -> locks.EditLock:
        """Take the lock of the file `loc` names, in this process and in every server sharing the state
        directory (blocking; `cancelled` is called while waiting and may raise to give up). Read-modify-write
        under it; release with `.release()`."""
        key = self.edit_key(loc)
        return locks.lock_edit(key, cancelled, lambda: locks.identity_key(self._edit_stat(loc), key))

    def _edit_stat(self, loc: Location) -> os.stat_result | None:
        """The stat of the file `loc` names, following a contained symlink as `write_atomic` does; None when
        there is none to stat (missing, or a link the write will refuse)."""
        try:
            with self.gateway.open_node(loc) as node:
                return node.st
        except PathError:
            return None

def _listed(parent_fd: int, name: str) -> list[str]:
    """The names in the directory `name` of `parent_fd`, opened without following a link (none when it
    cannot be listed: the removal then reports what it finds)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def _not_empty(shown: str, inside: list[str]) -> ToolError:
    """The refusal to remove a directory that is not empty, naming (the first few of) what is in it."""
    named = ", ".join(inside[:5]) + (f" and {len(inside) - 5} more" if len(inside) > 5 else "") or "entries"
    return ToolError(
        f"Not removed: {shown} is not empty (it holds {named}); removing it would lose that. Nothing was removed. "
        "Move or delete what is inside first if the directory should go.",
        ErrorKind.FILE_WRITE_FAILURE,
    )


def _check_unchanged(st: os.stat_result | None, expect: os.stat_result, shown: str) -> None:
    same = st is not None and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
        expect.st_dev, expect.st_ino, expect.st_size, expect.st_mtime_ns
    )
    if not same:
        raise ToolError(
            f"File changed on disk while it was being edited (another program wrote, moved or deleted it): "
            f"{shown}. Nothing was written. Read the file again and redo the edit.",
            ErrorKind.FILE_WRITE_FAILURE,
        )

def _link_no_replace(parent_fd: int, tmp: str, name: str, shown: str) -> None:
    try:
        os.link(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd, follow_symlinks=False)
    except FileExistsError:
        raise ToolError(f"File already exists: {shown}", ErrorKind.ATTEMPT_TO_CREATE_EXISTING_FILE) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)  # no hard links here
        return
    os.unlink(tmp, dir_fd=parent_fd)

def _check_destination(parent_fd: int, name: str, shown: str, source: os.stat_result, *, overwrite: bool) -> None:
    """Refuse a move onto a directory, a link or other non-file, onto the source itself, or onto an existing
    file unless `overwrite`."""
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ToolError(f"{os.strerror(exc.errno or 0)}: {shown}", ErrorKind.FILE_WRITE_FAILURE) from None
    if (st.st_dev, st.st_ino) == (source.st_dev, source.st_ino):
        raise ToolError(
            f"Source and destination are the same file: {shown}. Nothing was moved.", ErrorKind.INVALID_TOOL_PARAMS
        )
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(
            f"Destination is a directory: {shown}. Give the file's full new path (the directory's path and the "
            "file's name).",
            ErrorKind.TARGET_IS_DIRECTORY,
        )
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(
            f"Destination is not a regular file ({kind_name(st.st_mode)}): {shown}", ErrorKind.FILE_WRITE_FAILURE
        )
    if not overwrite:
        raise ToolError(
            f"Destination already exists: {shown}. Nothing was moved. Pass overwrite: true to replace it, or choose "
            "another name.",
            ErrorKind.ATTEMPT_TO_CREATE_EXISTING_FILE,
        )

def _link_no_replace_from(src_fd: int, src_name: str, dst_fd: int, dst_name: str, shown: str) -> None:
    """Move a name without ever replacing one: a rename that refuses an existing destination where the
    kernel has one, else a hard link (refused likewise), then the source's unlink; a plain rename where the
    file system has neither."""
    try:
        if kernel.rename_no_replace(src_fd, src_name, dst_fd, dst_name):
            return
        os.link(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
    except FileExistsError:
        raise ToolError(
            f"Destination already exists: {shown}. Nothing was moved.", ErrorKind.ATTEMPT_TO_CREATE_EXISTING_FILE
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return
    os.unlink(src_name, dir_fd=src_fd)

def _refuse_linked(st: os.stat_result, shown: str) -> None:
    """Refuse to write in place a file with other names: the write would reach them all."""
    if st.st_nlink > 1:
        raise PathError(
            f"Cannot edit {shown}: it has {st.st_nlink - 1} other name(s) (hard links), which an edit must leave "
            f"as they are, so it would be replaced by a new file; but the user the server runs as (uid "
            f"{os.geteuid()}) cannot give a new file this one's owner, group or attributes. Nothing was written. "
            "Ask the user to give this name a copy of its own (as the file's owner: cp -p NAME NAME.copy && mv "
            "NAME.copy NAME), or write elsewhere.",
            ErrorKind.PERMISSION_DENIED,
        )

def _dangling_link(shown: str) -> ToolError:
    return ToolError(
        f"Cannot write {shown}: it is a symbolic link whose target does not exist (a dangling link). Nothing was "
        "written. Write to the link's intended target path instead, or remove the link first.",
        ErrorKind.FILE_WRITE_FAILURE,
    )
