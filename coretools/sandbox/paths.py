"""What a path argument may name, before any I/O: the roots, the containment rule's string side, the
protected names (`.git` internals, secret env files), and the value types the gateway hands out.

Each of these rules is written here once and asked by every layer that needs it:

* inside a root: `within(path, root)` (the path is the root or lies below it) and `strip_prefix(path, root)`
  (the rest of the path below it, '' for the root itself, None outside), on canonical or lexically normal
  absolute paths, component-wise (`/a/bc` is not in `/a/b`). They are the string side only: the gateway's
  kernel-checked open is what decides where a path leads.
* protected: `protected_reason` (a root-relative path), `protected_name` (one component) and
  `word_protected_reason` (a command-line argument, as the argument policy reads it) all rest on
  `is_git_name` and `is_secret_env_name`, which the sandbox's mount scan (`bwrap`) asks too. Two other
  questions about `.git` differ on purpose and are named apart: `is_dotgit`, the one name git itself opens
  (what `git_watch` follows; `.git.` is protected but git never reads it), and a glob pattern that could
  match a protected name (`word_protected_reason` with `glob`: `.g?t`, `.e*`). ripgrep's `--iglob !.git`
  (`ripgrep.PROTECTED_GLOBS`) only saves it a walk: `protected_name` decides what it reports.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from dataclasses import dataclass

MAX_PATH_BYTES = 4096

_CONTROL_CHARS = re.compile("[\x00-\x1f\x7f]")

MAX_COMPONENT_BYTES = 255

SECRET_ENV_ALLOWED_SUFFIXES = {"example", "sample", "template", "dist", "defaults", "schema"}

def has_control_chars(path: str) -> bool:
    """Does a path argument hold a newline or another control character? No file the model means has one,
    and each would garble the messages and listings that show the path."""
    return _CONTROL_CHARS.search(path) is not None

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

def is_git_name(name: str) -> bool:
    """Does one path component name a git directory (or a `.git` pointer file)? `.git` in any case, with
    trailing dots or spaces: the file tools, the argument policy and the sandbox's mount scan all ask this."""
    return name[:1] == "." and _protected_form(name) == ".git"

def is_dotgit(name: str) -> bool:
    """Is one path component the name git itself opens as a working tree's repository: `.git`, in any case
    (`.GIT` where names ignore case)? Narrower than `is_git_name`, which protects every spelling some file
    system takes for `.git`; git on Linux never opens `.git.`, so a watch of what git reads asks this."""
    return name.lower() == ".git"

def protected_reason(rel: str) -> str | None:
    """Why a root-relative path is protected, or None. `.git` internals and secret env files are."""
    parts = [p for p in rel.split("/") if p]
    for part in parts:
        if is_git_name(part):
            return "inside a .git directory"
    if parts and is_secret_env_name(parts[-1]):
        return "a secret environment file (.env)"
    return None

def word_protected_reason(word: str, glob: str | None = None) -> str | None:
    """Why a command-line argument names a protected path, or None (the argument policy's question).

    The word is read as programs read paths out of arguments: split at `=` and `:` (`--file=X`, `a:b`
    lists), then at `/`; a component that is `.git` protects everything after it, and the last one of
    each piece may be a secret env file. `glob` is the word as bash's pattern (quoted glob characters
    escaped as `[*]`) when bash may expand it into file names: then a component is protected when the
    pattern could match a protected name (`.g?t`, `.e*`, `.*`). A component that starts with `*` or `?`
    never matches a leading dot (bash's default, without `dotglob`)."""
    pieces = re.split(r"[=:]", glob if glob is not None else word)
    for piece in pieces:
        parts = [p for p in piece.split("/") if p]
        for index, part in enumerate(parts):
            reason = _pattern_reason(part) if glob is not None else _name_reason(part)
            if reason is not None and (reason == _IN_GIT or index == len(parts) - 1):
                return reason
    return None

_IN_GIT = "inside a .git directory"
_SECRET = "a secret environment file (.env)"
_CANDIDATES = {".git": _IN_GIT, ".git.": _IN_GIT, ".git ": _IN_GIT, ".env": _SECRET, ".env.local": _SECRET}

def _name_reason(name: str) -> str | None:
    if is_git_name(name):
        return _IN_GIT
    return _SECRET if is_secret_env_name(name) else None

def _pattern_reason(pattern: str) -> str | None:
    if pattern[:1] in ("*", "?"):
        return None
    lowered = pattern.lower()
    for name, reason in _CANDIDATES.items():
        if fnmatch.fnmatchcase(name, lowered):
            return reason
    prefix = re.sub(r"\[(.)\]", r"\1", lowered)
    prefix = re.split(r"[*?\[]", prefix, maxsplit=1)[0]
    if len(prefix) < len(lowered) and prefix[:1] == "." and (prefix.startswith(".env.") or ".env.".startswith(prefix)):
        return _SECRET  # `.e*`, `.env.m*`: could match `.env.myprod`
    return None

def protected_name(name: str) -> bool:
    """Is one path component protected (`protected_reason` of a single name)? Cheap for the common case:
    every protected spelling starts with a dot."""
    return name[:1] == "." and protected_reason(name) is not None

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
    directory: bool = False  # given with a final "/" (or "/."): it names a directory, never a file to write

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

def within(path: str, root: str) -> bool:
    """Is `path` the directory `root` or below it (both absolute and normal, compared by component)?"""
    return path == root or path.startswith(root.rstrip("/") + "/")

def strip_prefix(path: str, prefix: str) -> str | None:
    """`path` relative to `prefix` if it lies (lexically) inside it, component-wise; else None."""
    prefix = prefix.rstrip("/") or "/"
    if path == prefix or path.rstrip("/") == prefix:
        return ""
    if prefix == "/":
        return path.lstrip("/")
    if path.startswith(prefix + "/"):
        return path[len(prefix) + 1 :]
    return None

def dir_entry(item: os.DirEntry, parent_rel: str) -> DirEntry:
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

def scan_dir(fd: int) -> list[os.DirEntry]:
    """The entries of the directory open at `fd` (os.scandir works on a duplicate it closes itself, so `fd`
    stays valid)."""
    with os.scandir(fd) as it:
        return list(it)

def kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISREG(mode):
        return "a file"
    return "not a regular file"
