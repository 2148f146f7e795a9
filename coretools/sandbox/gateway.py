"""The workspace gateway: the roots and the only way any tool touches a user path.

Tools never open user paths themselves. They ask the workspace to `locate` a path argument (string checks
and root selection, no I/O) and then to open, list or write it; `walker.walk` walks below a directory the
workspace opened. Every one of those goes through `kernel.open_beneath` relative to a descriptor of the
root, so a path that resolves outside every root (`..`, an escaping symlink, a sibling directory sharing a
prefix) cannot be opened, even if the tree is changed between a check and a use: the check *is* the open,
and tools work on the descriptor it returns.
Writes are in `writes.py`: a `Writes` collaborator that reaches the files through this class's contained opens
(`open_parent`, `open_node`), to which the workspace hands its write calls.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlparse

from coretools.errors import (
    ConfigurationError,
    ErrorKind,
    InvalidPath,
    OutsideWorkspace,
    PathError,
    ProtectedPath,
    ToolError,
)
from coretools.sandbox import durable, kernel, scratch
from coretools.sandbox.gitdirs import git_directory_reason
from coretools.sandbox.ignore import (
    GEMINIIGNORE,
    GIT_INFO_EXCLUDE,
    MAX_IGNORE_FILE_BYTES,
    IgnoreOptions,
    IgnoreRules,
    SpecCache,
)
from coretools.sandbox.nofollow import NoFollowView
from coretools.sandbox.paths import (
    MAX_COMPONENT_BYTES,
    MAX_PATH_BYTES,
    DirEntry,
    Location,
    Node,
    Root,
    dir_entry,
    has_control_chars,
    kind_name,
    protected_reason,
    strip_prefix,
    within,
)
from coretools.sandbox.locks import EditLock
from coretools.sandbox.writes import Writes, Written


@dataclass
class _State:
    specs: SpecCache = field(default_factory=SpecCache)


def _refuse_file_as_directory(loc: Location) -> None:
    """A path ending in '/' names a directory (`Location.directory`), as the kernel reads it: `a.txt/` is
    not the file `a.txt`, for reads as for writes."""
    if loc.directory:
        raise ToolError(
            f"Not a directory: {loc.shown}/ ends with '/', which names a directory, but {loc.shown} is not one. "
            "Drop the final '/' to read the file.",
            ErrorKind.PATH_IS_NOT_A_DIRECTORY,
        )


class Workspace:
    """A set of root directories (the first is primary) and the operations allowed beneath them."""

    def __init__(
        self, roots: list[str], *, allow_protected: bool = False, accept: Callable[[str], bool] | None = None
    ) -> None:
        """`accept`: a test of each root's canonical path as its opened descriptor reports it; a root it
        refuses is closed and left out."""
        if not roots:
            raise ConfigurationError("no workspace root")
        opened: list[Root] = []
        seen: set[str] = set()
        for raw in roots:
            shown = os.path.normpath(os.path.abspath(os.path.expanduser(raw)))
            real = os.path.realpath(shown)
            fd = os.open(real, (kernel.O_PATH or os.O_RDONLY) | kernel.O_DIRECTORY | kernel.O_CLOEXEC)
            # Take the canonical path from the descriptor itself where the platform can say: if a component
            # was swapped for a symlink between realpath() and open(), the root is where the descriptor
            # points, and that is what containment (and `narrowed`) must compare against.
            real = kernel.fd_real_path(fd) or real
            if real in seen or (accept is not None and not accept(real)):
                os.close(fd)
                continue
            seen.add(real)
            opened.append(Root(real, shown, fd))
        self.roots: tuple[Root, ...] = tuple(opened)
        self.allow_protected = allow_protected
        self._anchors = [kernel.Anchor(r.fd, r.path) for r in self.roots]
        self._state = _State()
        # The root descriptors are closed by close(), or when the last reference goes: a workspace that a
        # connection dropped (roots changed, session ended) may still be in use by calls in flight.
        self._fds = [r.fd for r in opened]
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    # -- construction helpers -------------------------------------------------------------------------

    @staticmethod
    def check_root(raw: str, *, allow_broad: bool = False) -> str:
        """Validate one configured root; return its absolute form or raise `ConfigurationError`."""
        path = os.path.abspath(os.path.expanduser(raw))
        if not os.path.exists(path):
            raise ConfigurationError(f"root does not exist: {raw}")
        if not os.path.isdir(path):
            raise ConfigurationError(f"root is not a directory: {raw}")
        real = os.path.realpath(path)
        if not allow_broad:
            if real == "/":
                raise ConfigurationError(
                    f"refusing to serve the whole file system ({raw}); pick a project directory, "
                    "or pass --allow-broad-root if you really mean it"
                )
            home = os.path.realpath(os.path.expanduser("~"))
            if real == home:
                raise ConfigurationError(
                    f"refusing to serve the home directory itself ({raw}); pick a project directory, "
                    "or pass --allow-broad-root if you really mean it"
                )
            overlap = scratch.root_overlap(real)
            if overlap:
                raise ConfigurationError(
                    f"refusing to serve {raw}: {overlap}, which every session could then read; pick a project "
                    "directory, start the server with TMPDIR set to a directory outside its roots, or pass "
                    "--allow-broad-root if you really mean it"
                )
        return path

    def close(self) -> None:
        self._finalizer()
        self.roots = ()

    def narrowed(self, client_roots: list[str], refused: list[str] | None = None) -> Workspace | None:
        """The workspace seen by a client that declared `client_roots`: only the parts of our roots that
        are also inside a client root. Client roots can narrow the operator's roots, never widen them, and
        never reach into a protected path; each client root refused for that is described in `refused`."""
        kept: list[str] = []
        for client in client_roots:
            c = os.path.realpath(client)
            for root in self.roots:
                if within(c, root.path):
                    reason = self._protected_inside(c)
                    if reason is None:
                        kept.append(c)
                    elif refused is not None:
                        refused.append(f"{c} is {reason} of the root {root.shown}, a protected path")
                elif within(root.path, c):
                    kept.append(root.shown)
        kept = [k for k in dict.fromkeys(kept) if os.path.isdir(k)]
        if not kept:
            return None
        # The strings above were checked before the new roots were opened; check the opened descriptors
        # too, so a client root swapped for a symlink to elsewhere in between cannot widen the workspace
        # or land inside a protected path.
        narrowed = type(self)(kept, allow_protected=self.allow_protected, accept=self._may_narrow_to)
        if not narrowed.roots:
            narrowed.close()
            return None
        return narrowed

    def _may_narrow_to(self, real: str) -> bool:
        return any(within(real, mine.path) for mine in self.roots) and not self._protected_inside(real)

    def _protected_inside(self, path: str) -> str | None:
        """Why a client root at canonical `path` would expose a protected path of an operator root (it lies
        in `.git`, say), or None. Decided from the operator's roots, so a client cannot move the boundary."""
        if self.allow_protected:
            return None
        for root in self.roots:
            below = strip_prefix(path, root.path)
            reason = protected_reason(below) if below else None
            if reason:
                return reason
        return None

    @property
    def primary(self) -> Root:
        return self.roots[0]

    def root_list(self) -> list[str]:
        return [r.shown for r in self.roots]

    # -- locating ---------------------------------------------------------------------------------------

    def locate(self, path: str, *, base: Location | None = None) -> Location:
        """Check a path argument and tie it to a root. Relative paths are relative to `base` (or the
        primary root). No file-system access happens here."""
        if not isinstance(path, str) or not path.strip():
            raise InvalidPath("Path must be a non-empty string.")
        if path.startswith("file://"):
            path = unquote(urlparse(path).path)
        if has_control_chars(path):
            raise InvalidPath("Path contains invalid characters (newlines or control characters).")
        try:
            encoded = path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate such as "\ud800" (JSON allows it): no file can have it
            raise InvalidPath("Path is not valid Unicode (it contains an unpaired surrogate character).") from None
        if len(encoded) > MAX_PATH_BYTES:
            raise InvalidPath(f"Path is too long (maximum {MAX_PATH_BYTES} bytes).")
        if len(encoded) > MAX_COMPONENT_BYTES:  # (a shorter path cannot have a component that is too long)
            for part in path.split("/"):
                if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
                    raise InvalidPath(
                        f'Path component "{part[:20]}..." is too long (maximum {MAX_COMPONENT_BYTES} bytes).'
                    )
        if path.endswith(("/", "/.")) and path.strip("/."):
            return replace(self.locate(path.rstrip("/").removesuffix("/.").rstrip("/") or "/", base=base), directory=True)
        if path.startswith("/"):
            for index, root in enumerate(self.roots):
                rest = strip_prefix(path, root.shown)
                if rest is None and root.path != root.shown:
                    rest = strip_prefix(path, root.path)
                if rest is not None:
                    return self._location(index, rest)
            if scratch.is_scratch_path(path):
                return Location(self.scratch_index, os.path.basename(path), os.path.normpath(path))
            raise OutsideWorkspace(path, self.root_list())
        anchor = base or Location(0, "", self.primary.shown)
        joined = f"{anchor.rel}/{path}" if anchor.rel else path
        return self._location(anchor.root, joined)

    def _location(self, index: int, rel: str) -> Location:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        rel = "/".join(parts)
        root_shown = self.roots[index].shown
        if ".." in parts:
            # `..` is left in `rel` for the kernel to judge (a symlinked parent changes what it means); but a
            # path that climbs out lexically can be refused right away with a clear message.
            shown_norm = os.path.normpath(os.path.join(root_shown, rel))
            if not within(shown_norm, root_shown):
                raise OutsideWorkspace(shown_norm, self.root_list())
            lexical = os.path.relpath(shown_norm, root_shown)
        else:  # already normal: no need for normpath and relpath (this is most calls)
            lexical = rel
            shown_norm = self.shown_path(index, rel)
        if not self.allow_protected:
            reason = protected_reason(lexical)
            if reason:
                raise ProtectedPath(shown_norm, reason)
        return Location(index, rel, shown_norm)

    @property
    def scratch_index(self) -> int:
        """The root index of a location in a scratch area (saved command outputs, see `scratch`): one past
        the roots, so it reads through the scratch area's own checks and names no root."""
        return len(self.roots)

    def is_scratch(self, root: int) -> bool:
        return root >= len(self.roots)

    def _scratch_node(self, loc: Location, flags: int) -> Node:
        fd, st = scratch.open_saved(loc.shown, flags)
        return Node(fd, loc.root, loc.rel, loc.shown, st)

    def shown_path(self, root: int, rel: str) -> str:
        base = self.roots[root].shown
        if not rel:
            return base
        return f"{base}{rel}" if base.endswith("/") else f"{base}/{rel}"

    # -- opening ----------------------------------------------------------------------------------------

    def _open(self, loc: Location, flags: int, mode: int = 0o666, *, follow: bool = True) -> tuple[int, int]:
        try:
            return kernel.open_beneath(self._anchors, loc.root, loc.rel, flags, mode, follow_final=follow)
        except kernel.EscapeError:
            raise OutsideWorkspace(loc.shown, self.root_list()) from None
        except OSError as exc:
            raise self.missing(loc, self.os_error(exc, loc.shown)) from None

    def os_error(self, exc: OSError, shown: str) -> ToolError:
        """The error a tool reports when the system call on the path shown as `shown` failed with `exc`."""
        code = exc.errno
        if code == errno.EXDEV:
            return OutsideWorkspace(shown, self.root_list())
        if code in (errno.ENOENT, errno.ENOTDIR):
            return PathError(f"File not found: {shown}", ErrorKind.FILE_NOT_FOUND)
        if code == errno.ELOOP:
            return PathError(f"Path could not be resolved (symlink loop): {shown}", ErrorKind.PATH_NOT_IN_WORKSPACE)
        if code in (errno.EACCES, errno.EPERM):
            return PathError(f"Permission denied: {shown}", ErrorKind.PERMISSION_DENIED)
        if code == errno.ENOSPC:
            return ToolError(f"No space left on device while writing {shown}", ErrorKind.NO_SPACE_LEFT)
        if code == errno.EFBIG:
            return ToolError(f"File too large for this file system or resource limit: {shown}", ErrorKind.FILE_WRITE_FAILURE)
        if code == errno.EROFS:
            return ToolError(f"Read-only file system: {shown}", ErrorKind.FILE_WRITE_FAILURE)
        if code == errno.ENAMETOOLONG:
            return InvalidPath("Path is too long.")
        if code == errno.ENXIO:  # where there is no O_PATH, opening a socket (or a driverless device) says so
            return ToolError(
                f"Not a regular file (a socket or a device): {shown}. Only regular files can be read.",
                ErrorKind.READ_CONTENT_FAILURE,
            )
        return ToolError(f"{os.strerror(code) if code else exc}: {shown}", ErrorKind.EXECUTION_FAILED)

    def _node(
        self,
        fd: int,
        root: int,
        fallback_rel: str,
        *,
        exempt: str | None = None,
        exact: bool = False,
        st: os.stat_result | None = None,
    ) -> Node:
        """`exact`: `fallback_rel` is known to be the real path (opened with no symlink on the way).
        `st`: the descriptor's stat, when the caller already has it."""
        if st is None:
            st = os.fstat(fd)
        if exact:
            norm = os.path.normpath(fallback_rel) if fallback_rel else "."
            root_index, rel = root, "" if norm == "." else norm
        else:
            root_index, rel = self._real_rel(fd, root, fallback_rel)
        node = Node(fd, root_index, rel, self.shown_path(root_index, rel), st)
        if not self.allow_protected and rel != exempt:
            reason = protected_reason(rel)
            if reason:
                node.close()
                raise ProtectedPath(node.path, reason)
        return node

    def _real_rel(self, fd: int, root: int, fallback_rel: str) -> tuple[int, str]:
        real = kernel.fd_real_path(fd)
        if real is not None:
            order = [root, *range(len(self.roots))]
            for index in order:
                rest = strip_prefix(real, self.roots[index].path)
                if rest is not None:
                    return index, rest
            # A root renamed or moved since start-up: compare with where its descriptor is now, so the
            # protected-path check still sees the real name behind a symlink alias (`notes -> .env`).
            for index in order:
                now = kernel.fd_real_path(self.roots[index].fd)
                rest = strip_prefix(real, now) if now else None
                if rest is not None:
                    return index, rest
        # No kernel-reported path: the lexical one. (This used `.lstrip("./")`, which strips characters, not
        # a prefix: `.env` became `env` and slipped past the protected-path check.)
        norm = os.path.normpath(fallback_rel) if fallback_rel else "."
        return root, "" if norm == "." else norm

    def open_node(self, loc: Location, *, follow: bool = True) -> Node:
        """Open anything (file, directory, special file) without reading it, for `stat` and type checks."""
        return self._open_node(loc, follow=follow)

    def _open_node(self, loc: Location, *, follow: bool = True, exempt: str | None = None) -> Node:
        flags = kernel.O_PATH if kernel.O_PATH else os.O_RDONLY | kernel.O_NONBLOCK | kernel.O_NOCTTY
        if self.is_scratch(loc.root):
            return self._scratch_node(loc, flags)
        if kernel.O_PATH:
            try:
                fd = kernel.open_plain(self.roots[loc.root].fd, loc.rel, flags)
            except OSError as exc:
                raise self.missing(loc, self.os_error(exc, loc.shown)) from None
            if fd is not None:  # no symlink on the way: the path as given is the real one
                return self._node(fd, loc.root, loc.rel, exempt=exempt, exact=True)
        fd, root = self._open(loc, flags, follow=follow)
        return self._node(fd, root, loc.rel, exempt=exempt)

    def missing(self, loc: Location, error: ToolError) -> ToolError:
        """The error to raise when opening `loc` failed with `error`: `error` itself. The workspace layer's
        `HintedWorkspace` overrides this to name, in a not-found error, the paths the caller likely meant."""
        return error

    def path_hint(self, loc: Location) -> str:
        """For a tool's own not-found message: a line starting with a newline that names the paths `loc`
        likely meant, or '' (always '' here; see `missing`)."""
        return ""

    def exists(self, loc: Location) -> bool:
        try:
            with self.open_node(loc):
                return True
        except PathError as exc:
            if exc.kind == ErrorKind.FILE_NOT_FOUND:
                return False
            raise

    @contextmanager
    def open_file(self, loc: Location) -> Iterator[tuple[Node, object]]:
        """Open a regular file for reading; yields `(node, binary_file)`.

        FIFOs, sockets and devices are refused without opening them for reading, so nothing blocks.
        """
        with self._open_regular(loc) as pair:
            yield pair

    @contextmanager
    def _open_regular(self, loc: Location, *, exempt: str | None = None) -> Iterator[tuple[Node, object]]:
        # `exempt`: the one protected root-relative path the server itself may read (.git/info/exclude for
        # the ignore engine), and only when that is the file's real path, never through an alias.
        if self.is_scratch(loc.root):
            node = self._scratch_node(loc, os.O_RDONLY)
            fd, node.fd = node.fd, -1
            with _reader(fd) as handle:
                _refuse_file_as_directory(loc)
                yield node, handle
            return
        fast = self._open_plain_regular(loc, exempt)
        if fast is not None:
            node, fd = fast
            with _reader(fd) as handle:
                _refuse_file_as_directory(loc)
                yield node, handle
            return
        node = self._open_node(loc, exempt=exempt)
        try:
            if node.is_dir:
                raise ToolError(f"Path is a directory, not a file: {node.path}", ErrorKind.TARGET_IS_DIRECTORY)
            _refuse_file_as_directory(loc)
            if not node.is_file:
                raise ToolError(
                    f"Not a regular file ({kind_name(node.st.st_mode)}): {node.path}. Only regular files can be read.",
                    ErrorKind.READ_CONTENT_FAILURE,
                )
            fd = kernel.reopen(node.fd, os.O_RDONLY) if kernel.O_PATH else None
            if fd is None:
                fd, _ = self._open(loc, os.O_RDONLY | kernel.O_NONBLOCK | kernel.O_NOCTTY)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_dev) != (node.st.st_ino, node.st.st_dev):
                os.close(fd)
                raise ToolError(f"File changed while being opened: {node.path}", ErrorKind.READ_CONTENT_FAILURE)
            node.st = st
            with _reader(fd) as handle:
                yield node, handle
        finally:
            node.close()

    def _open_plain_regular(self, loc: Location, exempt: str | None) -> tuple[Node, int] | None:
        """The common case in one open: a symlink-free path to a regular file, opened for reading directly
        (non-blocking, so a FIFO cannot hang it) and checked on the descriptor. Anything else (a link on the
        way, not a regular file, no openat2) returns None and takes the general O_PATH route, which refuses
        special files without opening them for reading."""
        if not kernel.O_PATH:
            return None
        try:
            fd = kernel.open_plain(self.roots[loc.root].fd, loc.rel, os.O_RDONLY | kernel.O_NONBLOCK | kernel.O_NOCTTY)
        except OSError:
            return None  # the general route reports the error with its own message
        if fd is None:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        node = self._node(fd, loc.root, loc.rel, exempt=exempt, exact=True, st=st)  # closes fd if protected
        node.fd = -1  # the file object below owns the descriptor
        return node, fd

    def read_bytes(self, loc: Location, limit: int | None = None) -> tuple[Node, bytes]:
        with self.open_file(loc) as (node, handle):
            data = handle.read() if limit is None else handle.read(limit)  # type: ignore[attr-defined]
            return node, data

    # -- directories ------------------------------------------------------------------------------------

    @contextmanager
    def open_dir(self, loc: Location) -> Iterator[tuple[Node, int]]:
        """Open a directory for listing; yields `(node, readable_dir_fd)`."""
        node = self.open_node(loc)
        try:
            if not node.is_dir:
                raise ToolError(f"Path is not a directory: {node.path}", ErrorKind.PATH_IS_NOT_A_DIRECTORY)
            fd = kernel.reopen(node.fd, os.O_RDONLY | kernel.O_DIRECTORY) if kernel.O_PATH else None
            if fd is None:
                fd, _ = self._open(loc, os.O_RDONLY | kernel.O_DIRECTORY)
            try:
                yield node, fd
            finally:
                os.close(fd)
        finally:
            node.close()

    def list_dir(self, loc: Location) -> tuple[Node, list[DirEntry]]:
        """Entries of a directory, symlinks not followed (their kind is "symlink"); never an edit's temporary
        file (`durable.is_temp_name`)."""
        with self.iter_dir(loc) as (node, entries):
            return node, list(entries)

    @contextmanager
    def iter_dir(self, loc: Location) -> Iterator[tuple[Node, Iterator[DirEntry]]]:
        """`list_dir` one entry at a time, as the kernel reads them (in no order): for a directory of any size,
        since nothing stays of an entry the caller does not keep."""
        with self.open_dir(loc) as (node, fd), os.scandir(fd) as found:
            yield node, (dir_entry(item, node.rel) for item in found if not durable.is_temp_name(item.name))

    def ignore_rules(self, root: int, options: IgnoreOptions) -> IgnoreRules:
        return IgnoreRules(lambda rel: self._ignore_spec(root, rel), options)

    def _ignore_spec(self, root: int, rel_file: str):  # -> RuleSet | None
        return self._ignore_entry(root, rel_file)[0]

    def ignore_source(self, root: int, rel_file: str) -> bytes | None:
        """The bytes of one ignore file of a root (`.gitignore`, `.geminiignore`, `.git/info/exclude`), read
        through the gateway and cached with its parsed form, so ripgrep can be handed the very rules the
        walk applies. None when it does not exist or cannot be read."""
        return self._ignore_entry(root, rel_file)[1]

    def _ignore_entry(self, root: int, rel_file: str):  # -> (RuleSet | None, bytes | None)
        try:
            st = os.stat(rel_file, dir_fd=self.roots[root].fd, follow_symlinks=False)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_FILE_BYTES:
            signature = None
        else:
            signature = (st.st_ino, st.st_size, st.st_mtime_ns)

        def load() -> bytes | None:
            loc = Location(root, rel_file, self.shown_path(root, rel_file))
            try:
                # The server reads `.git/info/exclude` for itself (its content is never shown). The
                # protected-path rule refused it here, so the ignore engine silently never applied it;
                # it is waived for exactly that real path.
                with self._open_regular(loc, exempt=GIT_INFO_EXCLUDE) as (_, handle):
                    return handle.read(MAX_IGNORE_FILE_BYTES)  # type: ignore[attr-defined]
            except ToolError:
                return None

        return self._state.specs.entry(root, rel_file, signature, load)

    def is_ignored(
        self, node_root: int, rel: str, is_dir: bool, options: IgnoreOptions,
        rules: dict[int, IgnoreRules] | None = None,
    ) -> bool:
        """Is `rel` ignored under `options`? A call that asks about many paths passes one `rules` dict for all
        of them: each root's rules (and what they decided about directories) are then worked out once."""
        if self.is_scratch(node_root):
            return False
        if not (options.git or options.defaults):  # only .geminiignore can apply (read_file's question)
            if not options.gemini or self._ignore_spec(node_root, GEMINIIGNORE) is None:
                return False
        if rules is None:
            return self.ignore_rules(node_root, options).ignored(rel, is_dir)
        if node_root not in rules:
            rules[node_root] = self.ignore_rules(node_root, options)
        return rules[node_root].ignored(rel, is_dir)

    # -- writing (where: here; how a file is replaced: `writes`) ----------------------------------------

    def open_parent(self, loc: Location, *, create: bool, directory: bool = False) -> tuple[int, int, str, str]:
        """Open the parent directory of `loc` (creating missing directories inside the root if asked), where
        every write, edit and removal begins. Returns `(parent_fd, root_index, parent_rel, name)`. A scratch
        area is read-only."""
        if self.is_scratch(loc.root):
            raise scratch.read_only_error(loc.shown, self.root_list())
        parent_rel, _, name = loc.rel.rpartition("/")
        if name in ("", ".", "..") or (loc.directory and not directory):
            raise InvalidPath(f"Path does not name a file: {loc.shown}/ ends with '/', which names a directory. Give "
                              "the file's own path." if loc.directory else f"Path does not name a file: {loc.shown}")
        flags = (kernel.O_PATH or os.O_RDONLY) | kernel.O_DIRECTORY
        try:
            plain = kernel.open_plain(self.roots[loc.root].fd, parent_rel, flags)
        except OSError:
            plain = None  # the general route below reports it
        if plain is not None:  # no symlink on the way: the path given, normalised, is the real one
            norm = os.path.normpath(parent_rel) if parent_rel else "."
            return self._outside_git_dirs(plain, loc.root, "" if norm == "." else norm, name, loc.shown)
        parent_loc = Location(loc.root, parent_rel, os.path.dirname(loc.shown))
        try:
            fd, root = kernel.open_beneath(self._anchors, loc.root, parent_rel, flags)
        except kernel.EscapeError:
            raise OutsideWorkspace(loc.shown, self.root_list()) from None
        except FileNotFoundError:
            if not create:
                raise PathError(f"Directory not found: {parent_loc.shown}", ErrorKind.FILE_NOT_FOUND) from None
            fd, root = self._make_dirs(loc.root, parent_rel, loc.shown)
        except NotADirectoryError:
            raise PathError(self._not_a_directory(loc.root, parent_rel, loc.shown), ErrorKind.PATH_IS_NOT_A_DIRECTORY) from None
        except OSError as exc:
            raise self.os_error(exc, loc.shown) from None
        real_root, real_parent = self._real_rel(fd, root, parent_rel)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise PathError(f"Parent is not a directory: {parent_loc.shown}", ErrorKind.FILE_NOT_FOUND)
        return self._outside_git_dirs(fd, real_root, real_parent, name, loc.shown)

    def _outside_git_dirs(self, fd: int, root: int, parent_rel: str, name: str, shown: str) -> tuple[int, int, str, str]:
        """`open_parent`'s answer, unless the write would land in a git directory of any name or complete one
        (`gitdirs`); then the parent is closed and the write refused as protected."""
        if not self.allow_protected and (reason := git_directory_reason(self.roots[root].fd, parent_rel, name)):
            os.close(fd)
            raise ProtectedPath(shown, reason)
        return fd, root, parent_rel, name

    def _not_a_directory(self, root: int, parent_rel: str, shown: str) -> str:
        """Why `shown` cannot be reached: the first component of its parent that is there but no directory."""
        parts = [p for p in parent_rel.split("/") if p not in ("", ".")]
        for i in range(len(parts)):
            prefix = "/".join(parts[: i + 1])
            try:
                st = os.stat(prefix, dir_fd=self.roots[root].fd, follow_symlinks=False)
            except OSError:
                break
            if not stat.S_ISDIR(st.st_mode):
                return f"Cannot reach {shown}: {self.shown_path(root, prefix)} is {kind_name(st.st_mode)}, not a directory."
        return f"Cannot reach {shown}: a component of its path is not a directory."

    def _make_dirs(self, root: int, parent_rel: str, shown: str) -> tuple[int, int]:
        """`mkdir -p` of `parent_rel`; returns the last directory, opened.

        Each prefix is re-resolved with `open_beneath`, so `..` and in-root symlinks mean what they mean
        everywhere else and an escaping symlink is refused; a directory is only ever created (mkdirat) in a
        descriptor that contained resolution returned. mkdirat never follows a final symlink, so a dangling
        link in the way is not created through: EEXIST, and the re-open still fails. A symlinked directory
        opened with O_PATH|O_NOFOLLOW|O_DIRECTORY answers ENOTDIR, not ELOOP: it is re-resolved like any prefix.
        """
        flags = (kernel.O_PATH or os.O_RDONLY) | kernel.O_DIRECTORY
        fd, index = kernel.open_beneath(self._anchors, root, "", flags)
        parts = [p for p in parent_rel.split("/") if p not in ("", ".")]
        try:
            for i, part in enumerate(parts):
                prefix = "/".join(parts[: i + 1])
                try:
                    nxt, nxt_index = kernel.open_beneath(self._anchors, root, prefix, flags)
                except FileNotFoundError:
                    if not self.allow_protected:
                        # Judge the real place before creating anything: through an in-root link
                        # (`cfg -> .git`) a lexically harmless `cfg/new/x` would create `.git/new`.
                        real_root, real_parent = self._real_rel(fd, index, "/".join(parts[:i]))
                        reason = protected_reason(f"{real_parent}/{part}" if real_parent else part)
                        reason = reason or git_directory_reason(self.roots[real_root].fd, real_parent, part)
                        if reason:
                            raise ProtectedPath(shown, reason)
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nxt, nxt_index = kernel.open_beneath(self._anchors, root, prefix, flags)
                os.close(fd)
                fd, index = nxt, nxt_index
        except ToolError:
            os.close(fd)
            raise
        except kernel.EscapeError:
            os.close(fd)
            raise OutsideWorkspace(shown, self.root_list()) from None
        except OSError as exc:
            os.close(fd)
            raise self.os_error(exc, shown) from None
        return fd, index

    def write_atomic(self, loc: Location, data: bytes, **how: object) -> Written:
        """Replace or create the file `loc` names, atomically; `how` as `Writes.write_atomic` takes it."""
        return Writes(self).write_atomic(loc, data, **how)  # type: ignore[arg-type]

    def remove_file(self, loc: Location, *, expect: os.stat_result | None = None) -> str:
        """Remove the regular file `loc` names (see `Writes.remove_file`); returns its shown path."""
        return Writes(self).remove_file(loc, expect=expect)

    def remove_directory(self, loc: Location, *, expect: os.stat_result | None = None) -> str:
        """Remove the empty directory `loc` names, not following it (see `Writes.remove_directory`)."""
        return Writes(self).remove_directory(loc, expect=expect)

    def make_directory(self, loc: Location) -> tuple[str, bool]:
        """`mkdir -p` of `loc`, contained (see `Writes.make_directory`): its shown path and whether it was created."""
        return Writes(self).make_directory(loc)

    def move_file(self, source: Location, destination: Location, **how: object) -> tuple[str, str]:
        """Rename the file `source` names to `destination`, contained (see `Writes.move_file`)."""
        return Writes(self).move_file(source, destination, **how)  # type: ignore[arg-type]

    def edit_key(self, loc: Location) -> str:
        """The canonical path of the file `loc` names, the key of its edit lock (see `Writes.edit_key`)."""
        return Writes(self).edit_key(loc)

    def lock_edit(self, loc: Location, *, cancelled: Callable[[], object] | None = None) -> EditLock:
        """Take the edit lock of the file `loc` names (see `Writes.lock_edit`); release with `.release()`."""
        return Writes(self).lock_edit(loc, cancelled=cancelled)

    # -- paths another program reported (ripgrep enumerates, the gateway checks) -------------------------

    def no_follow(self, root: int) -> NoFollowView:
        """A view of root-relative paths (as ripgrep reports them) that resolves each one a component at a
        time from the root's descriptor and follows no symlink at all; use it as a context manager."""
        return NoFollowView(self.roots[root].fd, self.allow_protected)

    def lstat_many(self, root: int, rels: list[str]) -> list[os.stat_result | None]:
        """`lstat` of many root-relative paths, resolved beneath the root's descriptor without following any
        symlink (a symlinked directory on the way, `..`, or a protected path gives None, as does a missing
        one). One directory open per distinct directory, one `fstatat` per path."""
        with self.no_follow(root) as view:
            return view.lstat_many(rels)

def _close_all(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass

def _reader(fd: int) -> io.BufferedReader:
    # An explicit buffer size: with the default, `open` asks the descriptor whether it is a terminal (one
    # more system call per file) only to choose a size.
    return open(fd, "rb", buffering=io.DEFAULT_BUFFER_SIZE)  # noqa: SIM115 - the caller closes it
