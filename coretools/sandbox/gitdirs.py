"""Git directories by their content: a directory git would take for a repository's, whatever its name.

Git reads a directory as a git directory when it holds `HEAD`, `objects/` and `refs/` (a bare repository, or
a work tree's `.git` under any name), and runs what its `config` names (`core.fsmonitor`, hooks, filters)
when the user next runs git there or below. The name rules of `paths.protected_reason` keep the tools out of
`.git`; these rules keep them from writing into such a directory under another name, and from completing
one: the write that would give a directory the last of the three is refused, so no sequence of writes
plants a repository whose settings git would obey on the host.
"""

from __future__ import annotations

import os

GIT_DIR_ENTRIES = ("HEAD", "objects", "refs")

REASON_INSIDE = "inside a git directory (it holds HEAD, objects/ and refs/; git obeys the config beside them)"
REASON_MAKES = "the entry that would make {where} a git directory (HEAD, objects/ and refs/), whose config git would obey"


def _exists(root_fd: int, rel: str) -> bool:
    try:
        os.stat(rel, dir_fd=root_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def is_git_directory(root_fd: int, rel: str) -> bool:
    """Whether the directory `rel` (relative to the root's descriptor; "" is the root) holds what git needs
    to take it for a git directory."""
    base = f"{rel}/" if rel else ""
    return all(_exists(root_fd, base + entry) for entry in GIT_DIR_ENTRIES)


def git_directory_reason(root_fd: int, parent_rel: str, name: str) -> str | None:
    """Why creating or writing `name` in the directory `parent_rel` (root-relative, real) is refused, or None:
    the directory or one of its ancestors in the root is a git directory, or `name` is the last entry it
    lacks to be one."""
    parts = [p for p in parent_rel.split("/") if p]
    for depth in range(len(parts) + 1):
        if is_git_directory(root_fd, "/".join(parts[:depth])):
            return REASON_INSIDE
    if name in GIT_DIR_ENTRIES:
        base = f"{parent_rel}/" if parent_rel else ""
        if all(_exists(root_fd, base + entry) for entry in GIT_DIR_ENTRIES if entry != name):
            return REASON_MAKES.format(where=parent_rel or "the root")
    return None
