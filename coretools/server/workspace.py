"""The workspace: the roots, the containment rule, and the only way any tool touches a user path.

Tools never open user paths themselves. They ask the workspace to `locate` a path argument (string checks
and root selection, no I/O) and then to open, list, walk or write it. Every one of those goes through
`kernel.open_beneath` relative to a descriptor of the root, so a path that resolves outside every root
(`..`, an escaping symlink, a sibling directory sharing a prefix) cannot be opened, even if the tree is
changed between a check and a use: the check *is* the open, and tools work on the descriptor it returns.
"""

from __future__ import annotations

import errno
import io
import os
import re
import secrets
import stat
import weakref
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from coretools.errors import InvalidPath, OutsideWorkspace, PathError, ProtectedPath, ToolError
from coretools.server import durable, kernel
from coretools.server.ignore import GEMINIIGNORE, GIT_INFO_EXCLUDE, IgnoreOptions, IgnoreRules, SpecCache

MAX_PATH_BYTES = 4096
_CONTROL_CHARS = re.compile("[\x00-\x1f\x7f]")
MAX_COMPONENT_BYTES = 255
SECRET_ENV_ALLOWED_SUFFIXES = {"example", "sample", "template", "dist", "defaults", "schema"}


class RootError(ValueError):
    """A configured root is unusable (the CLI turns this into exit code 2)."""


def is_secret_env_name(name: str) -> bool:
    """`.env`, `.env.local`, `.env.production` ... but not `.env.example` and friends."""
    lower = _protected_form(name)
    if lower == ".env":
        return True
    if lower.startswith(".env."):
        return lower[5:] not in SECRET_ENV_ALLOWED_SUFFIXES
    return False


def _protected_form(name: str) -> str:
    # Lower-cased (case-insensitive file systems) and without trailing dots and spaces, which Windows, SMB
    # and NTFS drop (`.git.`, `.env ` name the real thing there); gemini-cli compares the same way.
    return name.lower().rstrip(" .")


def protected_reason(rel: str) -> str | None:
    """Why a root-relative path is protected, or None. `.git` internals and secret env files are."""
    parts = [p for p in rel.split("/") if p]
    for part in parts:
        if _protected_form(part) == ".git":
            return "inside a .git directory"
    if parts and is_secret_env_name(parts[-1]):
        return "a secret environment file (.env)"
    return None


@dataclass(frozen=True)
class Root:
    path: str  # canonical (realpath)
    shown: str  # as configured, absolute and normalised; what users and models see
    fd: int


@dataclass(frozen=True)
class Location:
    """A path argument tied to a root, before any I/O. `rel` may still contain `..` and symlinks;
    only the kernel-checked open decides where it really leads."""

    root: int
    rel: str
    shown: str  # absolute, lexically normalised, for messages


@dataclass
class Node:
    """An open, contained file-system object (an `O_PATH` descriptor where the platform has one)."""

    fd: int
    root: int
    rel: str  # canonical path relative to its root ('' for the root itself)
    path: str  # absolute path as shown to the model
    st: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.st.st_mode)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class DirEntry:
    name: str
    rel: str
    kind: str  # "dir" | "file" | "symlink" | "other"
    size: int
    mtime: float


@dataclass
class WalkReport:
    """What a walk left out, so tools can tell the model."""

    ignored: int = 0
    symlinks_skipped: int = 0
    unreadable: int = 0
    truncated: str | None = None  # a note when a bound was hit


@dataclass
class WalkBounds:
    max_entries: int = 200_000
    max_depth: int = 64


@dataclass
class WriteOutcome:
    path: str
    created: bool
    previous_mode: int | None = None


@dataclass
class _State:
    specs: SpecCache = field(default_factory=SpecCache)


class Workspace:
    """A set of root directories (the first is primary) and the operations allowed beneath them."""

    def __init__(self, roots: list[str], *, allow_protected: bool = False) -> None:
        if not roots:
            raise RootError("no workspace root")
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
            if real in seen:
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
        """Validate one configured root; return its absolute form or raise `RootError`."""
        path = os.path.abspath(os.path.expanduser(raw))
        if not os.path.exists(path):
            raise RootError(f"root does not exist: {raw}")
        if not os.path.isdir(path):
            raise RootError(f"root is not a directory: {raw}")
        real = os.path.realpath(path)
        if not allow_broad:
            if real == "/":
                raise RootError(
                    f"refusing to serve the whole file system ({raw}); pick a project directory, "
                    "or pass --allow-broad-root if you really mean it"
                )
            home = os.path.realpath(os.path.expanduser("~"))
            if real == home:
                raise RootError(
                    f"refusing to serve the home directory itself ({raw}); pick a project directory, "
                    "or pass --allow-broad-root if you really mean it"
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
                if _within(c, root.path):
                    reason = self._protected_inside(c)
                    if reason is None:
                        kept.append(c)
                    elif refused is not None:
                        refused.append(f"{c} is {reason} of the root {root.shown}, a protected path")
                elif _within(root.path, c):
                    kept.append(root.shown)
        kept = [k for k in dict.fromkeys(kept) if os.path.isdir(k)]
        if not kept:
            return None
        narrowed = Workspace(kept, allow_protected=self.allow_protected)
        # The strings above were checked before the new roots were opened; check the opened descriptors
        # too, so a client root swapped for a symlink to elsewhere in between cannot widen the workspace
        # or land inside a protected path.
        escaped = [
            r
            for r in narrowed.roots
            if not any(_within(r.path, mine.path) for mine in self.roots) or self._protected_inside(r.path)
        ]
        if escaped:
            for r in escaped:
                os.close(r.fd)
                narrowed._fds.remove(r.fd)
            narrowed.roots = tuple(r for r in narrowed.roots if r not in escaped)
            narrowed._anchors = [kernel.Anchor(r.fd, r.path) for r in narrowed.roots]
            if not narrowed.roots:
                return None
        return narrowed

    def _protected_inside(self, path: str) -> str | None:
        """Why a client root at canonical `path` would expose a protected path of an operator root (it lies
        in `.git`, say), or None. Decided from the operator's roots, so a client cannot move the boundary."""
        if self.allow_protected:
            return None
        for root in self.roots:
            if _within(path, root.path) and path != root.path:
                reason = protected_reason(path[len(root.path) :].lstrip("/"))
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
        if _CONTROL_CHARS.search(path):
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
        if path.startswith("/"):
            for index, root in enumerate(self.roots):
                rest = _strip_prefix(path, root.shown)
                if rest is None and root.path != root.shown:
                    rest = _strip_prefix(path, root.path)
                if rest is not None:
                    return self._location(index, rest)
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
            if not _within(shown_norm, root_shown):
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
            raise self._os_error(exc, loc.shown) from None

    def _os_error(self, exc: OSError, shown: str) -> ToolError:
        code = exc.errno
        if code == errno.EXDEV:
            return OutsideWorkspace(shown, self.root_list())
        if code in (errno.ENOENT, errno.ENOTDIR):
            return PathError(f"File not found: {shown}", "file_not_found")
        if code == errno.ELOOP:
            return PathError(f"Path could not be resolved (symlink loop): {shown}", "path_not_in_workspace")
        if code in (errno.EACCES, errno.EPERM):
            return PathError(f"Permission denied: {shown}", "permission_denied")
        if code == errno.ENOSPC:
            return ToolError(f"No space left on device while writing {shown}", "no_space_left")
        if code == errno.EFBIG:
            return ToolError(f"File too large for this file system or resource limit: {shown}", "file_write_failure")
        if code == errno.EROFS:
            return ToolError(f"Read-only file system: {shown}", "file_write_failure")
        if code == errno.ENAMETOOLONG:
            return InvalidPath("Path is too long.")
        if code == errno.ENXIO:  # where there is no O_PATH, opening a socket (or a driverless device) says so
            return ToolError(
                f"Not a regular file (a socket or a device): {shown}. Only regular files can be read.",
                "read_content_failure",
            )
        return ToolError(f"{os.strerror(code) if code else exc}: {shown}", "execution_failed")

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
                rest = _strip_prefix(real, self.roots[index].path)
                if rest is not None:
                    return index, rest
            # A root renamed or moved since start-up: compare with where its descriptor is now, so the
            # protected-path check still sees the real name behind a symlink alias (`notes -> .env`).
            for index in order:
                now = kernel.fd_real_path(self.roots[index].fd)
                rest = _strip_prefix(real, now) if now else None
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
        if kernel.O_PATH:
            try:
                fd = kernel.open_plain(self.roots[loc.root].fd, loc.rel, flags)
            except OSError as exc:
                raise self._os_error(exc, loc.shown) from None
            if fd is not None:  # no symlink on the way: the path as given is the real one
                return self._node(fd, loc.root, loc.rel, exempt=exempt, exact=True)
        fd, root = self._open(loc, flags, follow=follow)
        return self._node(fd, root, loc.rel, exempt=exempt)

    def stat(self, loc: Location) -> os.stat_result:
        with self.open_node(loc) as node:
            return node.st

    def exists(self, loc: Location) -> bool:
        try:
            with self.open_node(loc):
                return True
        except PathError as exc:
            if exc.kind == "file_not_found":
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
        fast = self._open_plain_regular(loc, exempt)
        if fast is not None:
            node, fd = fast
            with _reader(fd) as handle:
                yield node, handle
            return
        node = self._open_node(loc, exempt=exempt)
        try:
            if node.is_dir:
                raise ToolError(f"Path is a directory, not a file: {node.path}", "target_is_directory")
            if not node.is_file:
                raise ToolError(
                    f"Not a regular file ({_kind_name(node.st.st_mode)}): {node.path}. Only regular files can be read.",
                    "read_content_failure",
                )
            fd = kernel.reopen(node.fd, os.O_RDONLY) if kernel.O_PATH else None
            if fd is None:
                fd, _ = self._open(loc, os.O_RDONLY | kernel.O_NONBLOCK | kernel.O_NOCTTY)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_dev) != (node.st.st_ino, node.st.st_dev):
                os.close(fd)
                raise ToolError(f"File changed while being opened: {node.path}", "read_content_failure")
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
                raise ToolError(f"Path is not a directory: {node.path}", "path_is_not_a_directory")
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
        """Entries of a directory, symlinks not followed (their kind is "symlink")."""
        with self.open_dir(loc) as (node, fd):
            entries = [_entry(e, node.rel) for e in _scandir(fd)]
            return node, entries

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
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
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
                    return handle.read(1 << 20)  # type: ignore[attr-defined]
            except ToolError:
                return None

        return self._state.specs.entry(root, rel_file, signature, load)

    def is_ignored(self, node_root: int, rel: str, is_dir: bool, options: IgnoreOptions) -> bool:
        if not (options.git or options.defaults):  # only .geminiignore can apply (read_file's question)
            if not options.gemini or self._ignore_spec(node_root, GEMINIIGNORE) is None:
                return False
        return self.ignore_rules(node_root, options).ignored(rel, is_dir)

    def walk(
        self,
        loc: Location,
        options: IgnoreOptions,
        *,
        bounds: WalkBounds | None = None,
        report: WalkReport | None = None,
        include_dirs: bool = False,
        cancelled: object = None,
    ) -> Iterator[DirEntry]:
        """Yield the files below `loc` (depth first, names sorted), pruning ignored directories and never
        following symlinks. `cancelled`, if given, is called between directories and may raise."""
        bounds = bounds or WalkBounds()
        report = report if report is not None else WalkReport()
        check = cancelled if callable(cancelled) else None
        with self.open_dir(loc) as (node, top_fd):
            rules = self.ignore_rules(node.root, options)
            stack: list[tuple[int, str, int]] = [(os.dup(top_fd), node.rel, 0)]
            count = 0
            try:
                while stack:
                    dir_fd, dir_rel, depth = stack.pop()
                    try:
                        if check is not None:
                            check()
                        try:
                            raw = sorted(_scandir(dir_fd), key=lambda e: e.name)
                        except OSError:
                            report.unreadable += 1
                            continue
                        subdirs: list[tuple[str, str]] = []
                        for item in raw:
                            entry = _entry(item, dir_rel)
                            if entry.kind == "symlink":
                                report.symlinks_skipped += 1
                                continue
                            if entry.kind not in ("dir", "file"):
                                continue
                            is_dir = entry.kind == "dir"
                            # parents are visible (pruned otherwise), so the name alone decides
                            if not self.allow_protected and protected_reason(entry.name):
                                report.ignored += 1
                                continue
                            if rules.active and rules.decide(entry.rel, is_dir):
                                report.ignored += 1
                                continue
                            count += 1
                            if count > bounds.max_entries:
                                report.truncated = f"stopped after {bounds.max_entries} entries"
                                return
                            if is_dir:
                                if include_dirs:
                                    yield entry
                                if depth + 1 >= bounds.max_depth:
                                    report.truncated = f"did not descend below depth {bounds.max_depth}"
                                    continue
                                subdirs.append((entry.name, entry.rel))
                            else:
                                yield entry
                        for name, rel in reversed(subdirs):
                            try:
                                sub = os.open(
                                    name,
                                    os.O_RDONLY | kernel.O_DIRECTORY | kernel.O_NOFOLLOW | kernel.O_CLOEXEC,
                                    dir_fd=dir_fd,
                                )
                            except OSError:
                                report.unreadable += 1
                                continue
                            stack.append((sub, rel, depth + 1))
                    finally:
                        os.close(dir_fd)
            finally:
                for fd, _, _ in stack:
                    os.close(fd)

    # -- writing ----------------------------------------------------------------------------------------

    def _parent_of(self, loc: Location, *, create: bool) -> tuple[int, int, str, str]:
        """Open the parent directory of `loc` (creating missing directories inside the root if asked).
        Returns `(parent_fd, root_index, parent_rel, name)`."""
        parent_rel, _, name = loc.rel.rpartition("/")
        if name in ("", ".", ".."):
            raise InvalidPath(f"Path does not name a file: {loc.shown}")
        flags = (kernel.O_PATH or os.O_RDONLY) | kernel.O_DIRECTORY
        parent_loc = Location(loc.root, parent_rel, os.path.dirname(loc.shown))
        try:
            fd, root = kernel.open_beneath(self._anchors, loc.root, parent_rel, flags)
        except kernel.EscapeError:
            raise OutsideWorkspace(loc.shown, self.root_list()) from None
        except FileNotFoundError:
            if not create:
                raise PathError(f"Directory not found: {parent_loc.shown}", "file_not_found") from None
            fd, root = self._make_dirs(loc.root, parent_rel, loc.shown)
        except OSError as exc:
            raise self._os_error(exc, loc.shown) from None
        real_root, real_parent = self._real_rel(fd, root, parent_rel)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise PathError(f"Parent is not a directory: {parent_loc.shown}", "file_not_found")
        return fd, real_root, real_parent, name

    def _make_dirs(self, root: int, parent_rel: str, shown: str) -> tuple[int, int]:
        """`mkdir -p` of `parent_rel`; returns the last directory, opened.

        Each prefix is re-resolved with `open_beneath`, so `..` and in-root symlinks mean what they mean
        everywhere else and an escaping symlink is refused; a directory is only ever created (mkdirat) in a
        descriptor that contained resolution returned. mkdirat never follows a final symlink, so a dangling
        link in the way is not created through: EEXIST, and the re-open still fails.
        (This used to open `..` beneath the root instead of the current directory, refusing every `..`, and
        it expected ELOOP for a symlinked directory where O_PATH|O_NOFOLLOW|O_DIRECTORY gives ENOTDIR, so
        creating directories below an in-root symlinked directory failed with "File not found".)
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
                        _, real_parent = self._real_rel(fd, index, "/".join(parts[:i]))
                        reason = protected_reason(f"{real_parent}/{part}" if real_parent else part)
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
            raise self._os_error(exc, shown) from None
        return fd, index

    def write_atomic(
        self,
        loc: Location,
        data: bytes,
        *,
        create_parents: bool = True,
        must_not_exist: bool = False,
        mode: int | None = None,
        expect: os.stat_result | None = None,
    ) -> WriteOutcome:
        """Replace (or create) a file atomically: temp file beside it, fsync, rename over it.

        A reader sees the old content or the new, never a mix; a crash leaves at most a stray temp file.
        A symlink at the target is followed only if it resolves inside a root; the real file is replaced.
        `expect` (the stat of the file as it was read) refuses the write if the file was replaced or changed
        on disk since; `must_not_exist` never replaces a file that appears meanwhile (hard-link, not rename).
        """
        parent_fd, root, parent_rel, name = self._parent_of(loc, create=create_parents)
        try:
            try:
                st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                os.close(parent_fd)
                parent_fd = -1
                try:
                    target = self.open_node(loc)  # follows the link, contained
                except PathError as exc:
                    if exc.kind != "file_not_found":
                        raise
                    raise _dangling_link(loc.shown) from None
                with target:
                    if not target.is_file:
                        raise ToolError(f"Symlink target is not a regular file: {loc.shown}", "file_write_failure")
                    real = Location(target.root, target.rel, target.path)
                return self.write_atomic(
                    real, data, create_parents=False, must_not_exist=must_not_exist, mode=mode, expect=expect
                )
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise ToolError(f"Path is a directory, not a file: {loc.shown}", "target_is_directory")
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ToolError(f"Not a regular file ({_kind_name(st.st_mode)}): {loc.shown}", "file_write_failure")
            if st is not None and must_not_exist:
                raise ToolError(f"File already exists: {loc.shown}", "attempt_to_create_existing_file")
            if expect is not None:
                _check_unchanged(st, expect, loc.shown)
            rel = f"{parent_rel}/{name}" if parent_rel else name
            shown = self.shown_path(root, rel)
            if not self.allow_protected:
                reason = protected_reason(rel)
                if reason:
                    raise ProtectedPath(shown, reason)
            # Keep the old permissions minus set-user/group-ID: new content must not inherit them (the kernel
            # drops them too when an ordinary process writes to such a file).
            perm = stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID) if st is not None else mode
            if st is not None and not durable.may_write(parent_fd, name):
                raise PathError(
                    f"Permission denied: {shown} is not writable by the user the server runs as (uid "
                    f"{os.geteuid()}); it was left untouched. Ask the user to change its permissions, or write "
                    "elsewhere.",
                    "permission_denied",
                )
            target = os.path.join(self.roots[root].path, rel)
            if st is not None and not durable.rename_keeps_identity(st):
                self._write_in_place(parent_fd, name, data, perm, st, shown, target, expect)
            else:
                self._replace(parent_fd, name, data, perm, st, shown, target, no_replace=must_not_exist, expect=expect)
            return WriteOutcome(shown, created=st is None, previous_mode=stat.S_IMODE(st.st_mode) if st else None)
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
    ) -> None:
        # The temp name is cut by bytes, not characters (200 characters of a multibyte name overflowed
        # NAME_MAX: "Path is too long"). O_EXCL|O_NOFOLLOW never opens a planted file or symlink; a name
        # already taken, by chance or by a plant, just means another random suffix.
        stem = os.fsencode(name)[:200].decode("utf-8", "ignore")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | kernel.O_NOFOLLOW | kernel.O_CLOEXEC
        for attempt in range(16):
            tmp = f".{stem}.{secrets.token_hex(4)}.coretools.tmp"
            try:
                fd = os.open(tmp, flags, 0o666 if perm is None else 0o600, dir_fd=parent_fd)
                break
            except FileExistsError as exc:
                if attempt == 15:
                    raise self._os_error(exc, shown) from None
            except OSError as exc:
                raise self._os_error(exc, shown) from None
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if perm is not None:
                    os.fchmod(fd, perm)
                carried = old is None or durable.carry_over(parent_fd, name, fd, old)
                if carried:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if not carried:
                os.unlink(tmp, dir_fd=parent_fd)
                self._write_in_place(parent_fd, name, data, perm, old, shown, target, expect)
                return
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
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=parent_fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self._os_error(exc, shown) from None
            raise
        _fsync_dir(parent_fd)

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
    ) -> None:
        """Rewrite the file itself (same inode: its links, owner and attributes stay), crash-safe through a
        recovery record of its old bytes (see `durable`)."""
        try:
            fd = os.open(name, os.O_RDWR | kernel.O_NOFOLLOW | kernel.O_NONBLOCK | kernel.O_CLOEXEC, dir_fd=parent_fd)
        except OSError as exc:
            raise self._os_error(exc, shown) from None
        try:
            st = os.fstat(fd)
            _check_unchanged(st, expect if expect is not None else old, shown)
            record = durable.save_old(target, fd, st)
            try:
                durable.write_in_place(fd, data)
                if perm is not None and stat.S_IMODE(st.st_mode) != perm:
                    os.fchmod(fd, perm)
            except BaseException:
                record.restore(fd)
                raise
            record.drop()
        except OSError as exc:
            raise self._os_error(exc, shown) from None
        finally:
            os.close(fd)

    # -- edits: per-file serialisation (issue 3, editing tools) ---------------------------------------

    def edit_key(self, loc: Location) -> str:
        """The canonical absolute path of the file `loc` names, following a contained symlink at the target
        as `write_atomic` does. It names the file across atomic replacements (an inode would not) and is the
        same in every Workspace of this process, so it can key a process-wide lock."""
        try:
            parent_fd, root, parent_rel, name = self._parent_of(loc, create=False)
        except PathError as exc:
            if exc.kind != "file_not_found":
                raise
            return os.path.normpath(os.path.join(self.roots[loc.root].path, loc.rel))
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            st = None
        finally:
            os.close(parent_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            try:
                with self.open_node(loc) as target:
                    return os.path.join(self.roots[target.root].path, target.rel)
            except PathError:
                pass  # dangling or escaping: the write will refuse it; key the link itself
        rel = f"{parent_rel}/{name}" if parent_rel else name
        return os.path.join(self.roots[root].path, rel)

    def lock_edit(self, loc: Location, *, cancelled: Callable[[], object] | None = None) -> EditLock:
        """Take the process-wide lock of the file `loc` names (blocking; `cancelled` is called while waiting
        and may raise to give up). Read-modify-write under it; release with `.release()`."""
        return _EDIT_LOCKS.acquire(self.edit_key(loc), cancelled)

    # -- paths another program reported (issue 4 follow-up: ripgrep enumerates, the gateway checks) -------

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


class EditLock:
    def __init__(self, registry: _KeyedLocks, key: str, entry: list) -> None:
        self._registry, self.key, self._entry = registry, key, entry

    def release(self) -> None:
        if self._entry is not None:
            entry, self._entry = self._entry, None
            entry[0].release()
            self._registry.unref(self.key, entry)


class _KeyedLocks:
    """One lock per key, created on demand and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list] = {}  # key -> [Lock, users]

    def acquire(self, key: str, cancelled: Callable[[], object] | None, poll: float = 0.05) -> EditLock:
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
        return EditLock(self, key, entry)

    def unref(self, key: str, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if entry[1] == 0 and self._locks.get(key) is entry:
                del self._locks[key]


_EDIT_LOCKS = _KeyedLocks()


def _check_unchanged(st: os.stat_result | None, expect: os.stat_result, shown: str) -> None:
    same = st is not None and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
        expect.st_dev, expect.st_ino, expect.st_size, expect.st_mtime_ns
    )
    if not same:
        raise ToolError(
            f"File changed on disk while it was being edited (another program wrote, moved or deleted it): "
            f"{shown}. Nothing was written. Read the file again and redo the edit.",
            "file_write_failure",
        )


def _link_no_replace(parent_fd: int, tmp: str, name: str, shown: str) -> None:
    try:
        os.link(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd, follow_symlinks=False)
    except FileExistsError:
        raise ToolError(f"File already exists: {shown}", "attempt_to_create_existing_file") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)  # no hard links here
        return
    os.unlink(tmp, dir_fd=parent_fd)


def _dangling_link(shown: str) -> ToolError:
    return ToolError(
        f"Cannot write {shown}: it is a symbolic link whose target does not exist (a dangling link). Nothing was "
        "written. Write to the link's intended target path instead, or remove the link first.",
        "file_write_failure",
    )


# -- end of the issue-3 block -------------------------------------------------------------------------


# -- issue 4 follow-up: contained access to paths another program reported ------------------------------


def protected_name(name: str) -> bool:
    """Is one path component protected (`protected_reason` of a single name)? Cheap for the common case:
    every protected spelling starts with a dot."""
    return name[:1] == "." and protected_reason(name) is not None


class NoFollowView:
    """Root-relative paths resolved one component at a time from a root descriptor with `O_NOFOLLOW`, the
    way `Workspace.walk` descends: no symlink is followed (not even one that stays inside the root), `..`,
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
        """A read-only descriptor of the regular file at `rel` (caller closes it), or None. Special files
        are never opened for reading (checked first without opening, then on the descriptor)."""
        parent, name = self._parent(rel)
        if parent is None:
            return None
        try:
            before = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISREG(before.st_mode):
                return None
            fd = os.open(
                name, os.O_RDONLY | kernel.O_NOFOLLOW | kernel.O_NONBLOCK | kernel.O_NOCTTY | kernel.O_CLOEXEC,
                dir_fd=parent,
            )
        except OSError:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_dev) != (before.st_ino, before.st_dev):
            os.close(fd)
            return None
        return fd


# -- end of the issue-4 follow-up block -----------------------------------------------------------------


def _close_all(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def _fsync_dir(dir_fd: int) -> None:
    fd = kernel.reopen(dir_fd, os.O_RDONLY | kernel.O_DIRECTORY) if kernel.O_PATH else os.dup(dir_fd)
    if fd is None:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _scandir(fd: int) -> list[os.DirEntry]:
    # os.scandir(fd) works on a duplicate it closes itself, so ours stays valid.
    with os.scandir(fd) as it:
        return list(it)


def _entry(item: os.DirEntry, parent_rel: str) -> DirEntry:
    rel = f"{parent_rel}/{item.name}" if parent_rel else item.name
    try:
        st = item.stat(follow_symlinks=False)
    except OSError:
        return DirEntry(item.name, rel, "other", 0, 0.0)
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        kind = "symlink"
    elif stat.S_ISDIR(mode):
        kind = "dir"
    elif stat.S_ISREG(mode):
        kind = "file"
    else:
        kind = "other"
    return DirEntry(item.name, rel, kind, st.st_size if kind == "file" else 0, st.st_mtime)


def _kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def _reader(fd: int) -> io.BufferedReader:
    # An explicit buffer size: with the default, `open` asks the descriptor whether it is a terminal (one
    # more system call per file) only to choose a size.
    return open(fd, "rb", buffering=io.DEFAULT_BUFFER_SIZE)  # noqa: SIM115 - the caller closes it


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _strip_prefix(path: str, prefix: str) -> str | None:
    """`path` relative to `prefix` if it lies (lexically) inside it, component-wise; else None."""
    prefix = prefix.rstrip("/") or "/"
    if path == prefix or path.rstrip("/") == prefix:
        return ""
    if prefix == "/":
        return path.lstrip("/")
    if path.startswith(prefix + "/"):
        return path[len(prefix) + 1 :]
    return None
