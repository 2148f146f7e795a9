"""The memory file save_memory appends to (default `~/.gemini/GEMINI.md`).

This is the one file outside the workspace roots that a tool writes, and it is not a path the model
chooses: the operator sets it (`--memory-file`) or the default applies. So it does not go through the
Workspace; this module does its I/O, and nothing else.

Saves are serialised by a process-wide lock plus an exclusive `flock` on a lock file beside the memory
file (other server processes), then written atomically: temp file in the same directory, fsync, rename,
fsync of the directory. Concurrent saves therefore all land, and a reader never sees a half-written file.

The file is loaded into every later session's context, so it is bounded: a save that would make it larger
than `MAX_FILE_BYTES` is refused (`FileFull`) before more than that much of it is read, whatever its size.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import threading
from pathlib import Path

from coretools.sandbox import diskio
from coretools.sandbox.paths import strip_prefix

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

HEADER = "## Gemini Added Memories"
_HEADER_LINE = re.compile(r"^## Gemini Added Memories[ \t]*$", re.MULTILINE)
_LEADING_BULLETS = re.compile(r"^(?:-+\s*|[*+]\s+)+")
_PROCESS_LOCK = threading.Lock()
MAX_FILE_BYTES = 256 * 1024


class FileFull(Exception):
    """A save would make the memory file larger than `MAX_FILE_BYTES`: it is `size` bytes, and would be
    `after` with the fact (None: it is over the limit already, and was not read)."""

    def __init__(self, path: Path, size: int, after: int | None) -> None:
        super().__init__(f"{path} is {size} bytes")
        self.path, self.size, self.after = path, size, after


def default_path() -> Path:
    home = os.path.expanduser("~")
    base = Path(home) if home and home != "~" else Path(tempfile.gettempdir())
    return base / ".gemini" / "GEMINI.md"


def shown(path: Path) -> str:
    """The path with the home directory written as `~`."""
    home = os.path.expanduser("~")
    text = str(path)
    below = strip_prefix(text, home) if home not in ("", "~", "/") else None
    return f"~/{below}" if below else text


def sanitize(fact: str) -> str:
    """One line, no leading list bullets, no angle brackets (which could open markup in the file)."""
    text = "".join(" " if not ch.isprintable() else ch for ch in fact)  # line breaks and control characters
    text = " ".join(text.split())
    text = _LEADING_BULLETS.sub("", text)
    text = text.replace("<", " ").replace(">", " ")
    return " ".join(text.split())


def with_fact(content: str, fact: str) -> str:
    """`content` with `- fact` added at the end of the memories section (created at the end if missing)."""
    item = f"- {fact}"
    match = _HEADER_LINE.search(content)
    if match is None:
        if not content or content.endswith("\n\n"):
            separator = ""
        elif content.endswith("\n"):
            separator = "\n"
        else:
            separator = "\n\n"
        return f"{content}{separator}{HEADER}\n{item}\n"
    head_end = match.end()
    section_end = content.find("\n## ", head_end)
    if section_end < 0:
        section_end = len(content)
    body = content[head_end:section_end].rstrip()
    after = content[section_end:]
    updated = content[:head_end] + body + "\n" + item + ("\n" + after if after else "")
    return updated.rstrip() + "\n"


def append_fact(path: Path, fact: str) -> Path:
    """Add a (sanitised) fact to the memory file at `path`; returns the file actually written (a symlinked
    memory file is updated at its target). Raises OSError on failure, `FileFull` when the file would grow
    past `MAX_FILE_BYTES` (then at most that much of it was read)."""
    real = Path(os.path.realpath(path))
    with _PROCESS_LOCK:
        real.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(real.parent / f".{real.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
            found = read_prefix(real, MAX_FILE_BYTES + 1)
            if found is None:
                old, size, mode = b"", 0, None
            else:
                (old, size), mode = found, stat.S_IMODE(real.stat().st_mode)
            if len(old) > MAX_FILE_BYTES:
                raise FileFull(real, max(size, len(old)), None)
            data = with_fact(old.decode("utf-8", "replace"), fact).encode("utf-8")
            if len(data) > MAX_FILE_BYTES:
                raise FileFull(real, size, len(data))
            diskio.replace_file(real, data, mode=mode)
        finally:
            os.close(lock_fd)  # releases the flock
    return real


def read_prefix(path: Path, limit: int) -> tuple[bytes, int] | None:
    """The first `limit` bytes of the memory file at `path` and its size, or None when there is none. A
    FIFO or device in its place is refused (OSError) without blocking on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file: {path}")
        return handle.read(limit), st.st_size
