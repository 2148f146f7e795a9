"""The plan of one edit, made under the file's lock before anything is written: the old and new text, the
encoded bytes, the change spans and the diff; and the size limit it is made within (`--max-edit-bytes`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import Location, Workspace
from coretools.workspace import FileViews, JournalSettings
from coretools.tools.textedit import freshness
from coretools.tools.textedit.diff import Span

# The largest file an edit reads and the largest content it writes (`--max-edit-bytes`). An edit holds the old
# text, the new text and the new bytes at once, each about this size for an ASCII file, within 300 MiB.
MAX_EDIT_BYTES = 64 * 1024 * 1024
MIB = 1024 * 1024


@dataclass
class Plan:
    loc: Location
    path: str  # shown absolute path
    old: str  # decoded old text ('' for a new file)
    new: str
    data: bytes  # encoded new content
    created: bool
    expect: object = None  # os.stat_result of the file as read (refuse the write if it changed since)
    must_not_exist: bool = False
    spans: list[Span] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    replacements: int = 0  # occurrences replaced (replace)
    syntax: str | None = None  # a syntax error the edit introduced, as a note (see `syntax.syntax_note`)
    tool: str = ""  # the tool that made it, for the edit journal
    journal: JournalSettings | None = None  # None: the journal's defaults
    key: str = ""  # the canonical path the edit lock named the file by (the journal's too)
    before: bytes | None = None  # the bytes the plan was made from, for the journal (None: it reads them)


# The edit limit of the tool whose plan runs in this context (see `limit_in_force`).
_EDIT_LIMIT: ContextVar[int] = ContextVar("coretools_edit_limit", default=MAX_EDIT_BYTES)


def too_big(path: str, size: int, what: str, how: str) -> ToolError:
    """The refusal of an edit whose result would be `size` bytes, over the limit in force."""
    limit = _EDIT_LIMIT.get()
    return ToolError(
        f"Cannot edit {path}: {what} would make the file {size:,} bytes{_in_mib(size)}, more than this server's "
        f"limit of {limit:,} bytes{_in_mib(limit)} for one edit (server option --max-edit-bytes). Nothing was "
        f"changed. {how}",
        ErrorKind.FILE_TOO_LARGE,
    )


def _in_mib(size: int) -> str:
    return f" ({size / MIB:.1f} MiB)" if size >= MIB else ""


def edit_limit() -> int:
    """The edit limit in force (see `limit_in_force`)."""
    return _EDIT_LIMIT.get()


@contextmanager
def limit_in_force(limit: int) -> Iterator[None]:
    """Make `limit` the edit limit of what runs in this context: the plan of one tool's edit, in its worker
    thread, so the helpers a plan calls need not be handed the limit."""
    token = _EDIT_LIMIT.set(limit)
    try:
        yield
    finally:
        _EDIT_LIMIT.reset(token)


def read_existing(ws: Workspace, loc: Location, views: FileViews | None = None) -> tuple[object, bytes] | None:
    """(stat, bytes) of the file, or None if it does not exist, in one open. Directories and special files
    are refused; so is, first, a file the session `views` saw and that changed since (see `freshness`)."""
    limit = _EDIT_LIMIT.get()
    try:
        with ws.open_file(loc) as (node, handle):
            read = None
            if views is not None:
                read = freshness.check(views, node, lambda: handle.read(limit + 1))  # type: ignore[attr-defined]
            if node.st.st_size > limit:
                size = node.st.st_size
                raise ToolError(
                    f"File is too large to edit ({size:,} bytes{_in_mib(size)}; the limit is {limit:,} "
                    f"bytes{_in_mib(limit)}, server option --max-edit-bytes): {node.path}. Edit it with "
                    "run_shell_command (e.g. sed) instead.",
                    ErrorKind.FILE_TOO_LARGE,
                )
            return node.st, read if read is not None else handle.read()  # type: ignore[attr-defined]
    except ToolError as exc:
        if exc.kind != ErrorKind.FILE_NOT_FOUND:
            raise
    if views is not None:
        freshness.check_missing(views, loc)
    return None
