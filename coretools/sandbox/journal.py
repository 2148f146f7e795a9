"""The edit journal: the content every write_file and replace replaced, kept so the edit can be undone.

One journal per workspace (its set of real root paths), in the user's state directory, never under a root:
`state_dir()/journal/<key>/` (0700) holds `meta.json` (the roots), `lock` (flock target), `index` (one JSON
line per edit, appended) and `blobs/<id>.blob` (the bytes the edit replaced). Every file is 0600.

Crash safety. An edit takes the journal's lock, reads the file's current bytes through the gateway, writes
them as a blob (temporary file, fsync, rename), appends the index line and fsyncs it, then writes the file,
all under the lock; on a write that fails it appends a tombstone (`{"void": id}`). A process killed at any
point leaves either nothing (blob not renamed, or the index line torn: readers skip a last line without its
newline, the next writer cuts it), an orphan blob (swept at the next compaction), or a complete entry whose
file write may not have happened; such an entry is recognised later because the file still has the content
from before it (`landed`). Compaction (eviction by count and size, tombstones and orphans dropped) rewrites
the index to a temporary file and renames it over, so it too is all-or-nothing.

Several servers sharing a workspace serialise on the lock, so the journal's order is the order of the writes
and an undo's check and write cannot interleave with another journaled edit.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import durable
from coretools.sandbox.paths import Location, WriteOutcome, within

if TYPE_CHECKING:
    from coretools.sandbox.gateway import Workspace

logger = logging.getLogger("coretools")

MIB = 1024 * 1024
DEFAULT_MAX_ENTRIES = 200
DEFAULT_MAX_BYTES = 50 * MIB
MAX_JOURNALS = 64  # workspaces journaled at once; the least recently used journal goes first
MAX_INDEX_BYTES = 16 * MIB  # an index larger than this is not one of ours: read no more of it
_CHUNK = MIB


@dataclass(frozen=True)
class JournalSettings:
    """`--no-journal`, `--journal-max-entries`, `--journal-max-bytes`."""

    enabled: bool = True
    max_entries: int = DEFAULT_MAX_ENTRIES
    max_bytes: int = DEFAULT_MAX_BYTES

    def bounded(self) -> JournalSettings:
        """The settings with unusable bounds (0 or less) replaced by the defaults."""
        entries = self.max_entries if self.max_entries > 0 else DEFAULT_MAX_ENTRIES
        size = self.max_bytes if self.max_bytes > 0 else DEFAULT_MAX_BYTES
        return JournalSettings(self.enabled, entries, size)


@dataclass(frozen=True)
class Entry:
    """One journaled edit. A `None` hash means "no file": before a creation, after a removal."""

    id: int
    time: float
    tool: str
    path: str  # canonical absolute path of the file
    before_sha: str | None
    before_size: int
    after_sha: str | None
    after_size: int
    kept: bool  # False: the previous content was larger than the journal's size bound and was not kept
    undoes: int | None = None  # for an undo: the edit it reverted

    @property
    def created(self) -> bool:
        return self.before_sha is None

    @classmethod
    def parse(cls, record: dict) -> Entry | None:
        try:
            return cls(**{k: record[k] for k in cls.__dataclass_fields__ if k in record})
        except TypeError:
            return None


@dataclass(frozen=True)
class Snapshot:
    """A file's content as the journal sees it: hash, size, the bytes when within `keep`, the stat."""

    sha: str | None
    size: int
    data: bytes | None
    st: os.stat_result | None


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_snapshot(ws: Workspace, loc: Location, keep: int) -> Snapshot:
    """The file's current content through the gateway (following a contained link as writes do); bytes
    beyond `keep` are hashed, not held."""
    try:
        with ws.open_file(loc) as (node, handle):
            hasher, parts, size = hashlib.sha256(), [], 0
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
                size += len(chunk)
                if size <= keep:
                    parts.append(chunk)
            return Snapshot(hasher.hexdigest(), size, b"".join(parts) if size <= keep else None, node.st)
    except ToolError as exc:
        if exc.kind == ErrorKind.FILE_NOT_FOUND:
            return Snapshot(None, 0, None, None)
        raise


def journal_root() -> str:
    return os.path.join(durable.state_dir(), "journal")


def workspace_key(roots: list[str]) -> str:
    return hashlib.sha256("\0".join(sorted(roots)).encode("utf-8", "surrogateescape")).hexdigest()[:24]


@functools.lru_cache(maxsize=64)
def exposed_by(roots: tuple[str, ...]) -> str | None:
    """The root that contains the state directory (so its journal would be readable by the tools), or None.
    Such a workspace is not journaled; the warning is logged once per workspace."""
    state = os.path.realpath(durable.state_dir())
    for root in roots:
        if within(state, root):
            logger.warning(
                "edit journal off for this workspace: the root %s contains the state directory %s, so the tools "
                "could read the journal (set CORETOOLS_STATE_DIR or XDG_STATE_HOME elsewhere to journal it)",
                root, state,
            )
            return root
    return None


class Journal:
    """The journal of one workspace. Methods other than `entries` and `open` expect the lock to be held."""

    def __init__(self, folder: str, roots: tuple[str, ...], settings: JournalSettings) -> None:
        self.folder = folder
        self.roots = roots
        self.settings = settings.bounded()
        self.index = os.path.join(folder, "index")
        self.blobs = os.path.join(folder, "blobs")

    # -- finding and creating -------------------------------------------------------------------------

    @classmethod
    def open(cls, roots: list[str], settings: JournalSettings) -> Journal | None:
        """The journal of the workspace with these real roots (created if missing), or None when the
        journal is off or the workspace contains the state directory."""
        if not settings.enabled or exposed_by(tuple(sorted(roots))):
            return None
        return cls(os.path.join(journal_root(), workspace_key(roots)), tuple(sorted(roots)), settings)

    @classmethod
    def find(cls, roots: list[str], target: str | None, settings: JournalSettings) -> Journal | None:
        """The journal to consult for `target` (a canonical path, or None for the whole workspace) from a
        workspace with these roots: its own if it exists, else the most recently used one of a workspace
        whose roots contain the target (a server whose client narrowed its roots keeps another journal)."""
        own = os.path.join(journal_root(), workspace_key(roots))
        if os.path.exists(os.path.join(own, "meta.json")):
            return cls(own, tuple(sorted(roots)), settings)
        return cls.holding(target, settings) if target else None

    @classmethod
    def holding(cls, target: str, settings: JournalSettings) -> Journal | None:
        """The most recently used journal of a workspace whose roots contain `target`, or None."""
        found = [(used, folder, roots) for used, folder, roots in _known_journals() if any(within(target, r) for r in roots)]
        if not found:
            return None
        _, folder, roots = max(found)
        return cls(folder, tuple(roots), settings)

    def _create(self) -> None:
        _evict_journals(keep=self.folder)
        _write_file(os.path.join(self.folder, "meta.json"), json.dumps({"roots": list(self.roots)}).encode())

    # -- locking --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal's exclusive lock (blocking). A journal evicted while we waited is re-created."""
        path = os.path.join(self.folder, "lock")
        for _ in range(8):
            _private_dirs(self.folder, self.blobs)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _same_file(fd, path):
                    if not os.path.exists(os.path.join(self.folder, "meta.json")):
                        self._create()
                    yield
                    return
            finally:
                os.close(fd)
        raise OSError(f"could not lock the edit journal {self.folder}")

    # -- reading --------------------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """The live entries, oldest first. A torn last line and malformed lines are skipped."""
        return self._read()[0]

    def _read(self) -> tuple[list[Entry], int]:
        """(live entries, the next id)."""
        try:
            with open(self.index, "rb") as handle:
                raw = handle.read(MAX_INDEX_BYTES)
        except FileNotFoundError:
            return [], 1
        entries: dict[int, Entry] = {}
        top = 0
        for line in raw.split(b"\n")[:-1]:  # the last piece is empty or a torn line
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if isinstance(record.get("next"), int):
                top = max(top, record["next"] - 1)
            elif isinstance(record.get("void"), int):
                entries.pop(record["void"], None)
                top = max(top, record["void"])
            elif (entry := Entry.parse(record)) is not None:
                entries[entry.id] = entry
                top = max(top, entry.id)
        return sorted(entries.values(), key=lambda e: e.id), top + 1

    def before_bytes(self, entry: Entry) -> bytes | None:
        """The content the edit replaced; None when the file did not exist. Raises if it was not kept."""
        if entry.created:
            return None
        with open(self._blob(entry.id), "rb") as handle:
            data = handle.read(entry.before_size + 1)
        if len(data) != entry.before_size or digest(data) != entry.before_sha:
            raise OSError(f"the journal's copy of the content before edit {entry.id} is damaged")
        return data

    # -- writing (under the lock) ---------------------------------------------------------------------

    def record(self, tool: str, path: str, before: Snapshot, after: bytes | None, undoes: int | None = None) -> Entry:
        """Keep `before` (the file's content now) and append the entry of an edit that will write `after`."""
        _, next_id = self._read()
        kept = before.sha is None or (before.data is not None and before.size <= self.settings.max_bytes)
        entry = Entry(
            next_id, time.time(), tool, path, before.sha, before.size, digest(after),
            0 if after is None else len(after), kept, undoes,
        )
        if before.sha is not None and kept:
            _write_file(self._blob(entry.id), before.data or b"")
        self._append(asdict(entry))
        self._compact()
        return entry

    def void(self, entry_id: int) -> None:
        """Mark an entry whose write failed: it never happened."""
        self._append({"void": entry_id})

    def _blob(self, entry_id: int) -> str:
        return os.path.join(self.blobs, f"{entry_id}.blob")

    def _append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"
        fd = os.open(self.index, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _cut_torn_tail(fd)
            durable._write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _compact(self) -> None:
        """Evict the oldest entries beyond the bounds, drop tombstones, sweep orphan blobs and temp files."""
        entries, next_id = self._read()
        limit, total = self.settings, sum(e.before_size for e in entries if e.kept and not e.created)
        keep = list(entries)
        while keep and (len(keep) > limit.max_entries or total > limit.max_bytes) and len(keep) > 1:
            gone = keep.pop(0)
            if gone.kept and not gone.created:
                total -= gone.before_size
        if len(keep) != len(entries) or self._has_tombstones():
            lines = [json.dumps({"next": next_id})] + [json.dumps(asdict(e), ensure_ascii=False) for e in keep]
            _write_file(self.index, ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        self._sweep({f"{e.id}.blob" for e in keep if e.kept and not e.created})

    def _has_tombstones(self) -> bool:
        try:
            with open(self.index, "rb") as handle:
                return b'{"void"' in handle.read(MAX_INDEX_BYTES)
        except FileNotFoundError:
            return False

    def _sweep(self, wanted: set[str]) -> None:
        for folder, names in ((self.blobs, wanted), (self.folder, {"index", "lock", "meta.json", "blobs"})):
            for name in os.listdir(folder):
                if name not in names:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, name))


def journaled(
    ws: Workspace,
    loc: Location,
    after: bytes | None,
    tool: str,
    settings: JournalSettings,
    write: Callable[[], WriteOutcome],
) -> WriteOutcome:
    """Run `write` (which makes the file at `loc` hold `after`) with the file's current content journaled
    first, under the journal's lock. A journal that cannot be written is logged and the edit goes ahead."""
    try:
        journal = Journal.open([r.path for r in ws.roots], settings)
    except OSError as exc:
        logger.warning("edit journal unavailable (%s); %s was edited without a journal entry", exc, loc.shown)
        journal = None
    if journal is None:
        return write()
    with journal.locked():
        try:
            entry = journal.record(tool, ws.edit_key(loc), read_snapshot(ws, loc, journal.settings.max_bytes), after)
        except OSError as exc:
            logger.warning("could not journal the edit of %s (%s); it goes ahead unjournaled", loc.shown, exc)
            return write()
        try:
            return write()
        except BaseException:
            journal.void(entry.id)
            raise


@dataclass(frozen=True)
class Undone:
    """What an undo did: the edit it reverted, its own journal entry (None when the file already had that
    content), and the edits skipped because they never took effect (their process died before writing)."""

    edit: Entry
    record: Entry | None
    skipped: tuple[Entry, ...] = ()


def history(journal: Journal, target: str | None = None) -> list[Entry]:
    """The live entries, oldest first; only those of the file `target` (a canonical path) if given."""
    return [e for e in journal.entries() if target is None or e.path == target]


def undo(ws: Workspace, journal: Journal, *, target: str | None, edit_id: int | None, force: bool) -> Undone:
    """Put back the content from before the last journaled edit of `target` (or of the workspace), or from
    before edit `edit_id`; journaled itself. Refused, the file untouched, when the file changed since the
    last journaled edit of it (unless `force`) or when that content was not kept."""
    with journal.locked():
        entries = journal.entries()
        chosen = _choose(entries, target, edit_id)
        loc = ws.locate(chosen.path)
        now = read_snapshot(ws, loc, journal.settings.max_bytes)
        mine = [e for e in entries if e.path == chosen.path]
        skipped = []
        while mine and mine[-1].after_sha != now.sha and mine[-1].before_sha == now.sha:
            skipped.append(mine.pop())
        edit = _target(mine, chosen, edit_id, loc.shown)
        if now.sha != mine[-1].after_sha and not force:
            raise _changed_since(loc.shown, mine[-1])
        if not edit.kept:
            raise ToolError(
                f"Cannot undo edit {edit.id}: the content of {loc.shown} before it ({edit.before_size:,} bytes) was "
                f"larger than the journal keeps ({journal.settings.max_bytes:,} bytes, --journal-max-bytes).",
                ErrorKind.FILE_TOO_LARGE,
            )
        restore = journal.before_bytes(edit)
        if digest(restore) == now.sha:
            return Undone(edit, None, tuple(skipped))
        record = journal.record("undo", chosen.path, now, restore, undoes=edit.id)
        try:
            if restore is None:
                ws.remove_file(loc, expect=now.st)
            else:
                ws.write_atomic(loc, restore, create_parents=True, must_not_exist=now.st is None, expect=now.st)
        except BaseException:
            journal.void(record.id)
            raise
        return Undone(edit, record, tuple(skipped))


def _choose(entries: list[Entry], target: str | None, edit_id: int | None) -> Entry:
    if edit_id is not None:
        found = next((e for e in entries if e.id == edit_id), None)
        if found is None:
            raise ToolError(
                f"Edit {edit_id} is not in the edit journal (it keeps the most recent edits only; "
                "`coretools-mcp history` lists them).",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        if target is not None and found.path != target:
            raise ToolError(f"Edit {edit_id} changed {found.path}, not {target}.", ErrorKind.INVALID_TOOL_PARAMS)
        return found
    mine = [e for e in entries if target is None or e.path == target]
    if not mine:
        where = f"of {target}" if target else "in this workspace"
        raise ToolError(f"No journaled edit {where}: nothing to undo.", ErrorKind.FILE_NOT_FOUND)
    return mine[-1]


def _target(mine: list[Entry], chosen: Entry, edit_id: int | None, shown: str) -> Entry:
    """The edit to revert among the file's edits that took effect."""
    if edit_id is None and mine:
        return mine[-1]
    if edit_id is not None and chosen in mine:
        return chosen
    raise ToolError(
        f"Nothing to undo: {shown} already has the content from before edit {chosen.id}, which did not take effect.",
        ErrorKind.FILE_NOT_FOUND,
    )


def _changed_since(shown: str, last: Entry) -> ToolError:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last.time))
    return ToolError(
        f"Not undone: {shown} changed since its last journaled edit ({last.id}, {last.tool} at {when}), by "
        "another program or by hand; undoing would discard that change. The file was left as it is. (From the "
        "command line, `coretools-mcp undo --force` undoes anyway.)",
        ErrorKind.FILE_WRITE_FAILURE,
    )


def _known_journals() -> list[tuple[float, str, list[str]]]:
    """(last use, folder, roots) of every journal in the state directory (at most a bounded number)."""
    found = []
    try:
        names = os.listdir(journal_root())
    except FileNotFoundError:
        return []
    for name in names[: MAX_JOURNALS * 4]:
        folder = os.path.join(journal_root(), name)
        try:
            with open(os.path.join(folder, "meta.json"), "rb") as handle:
                roots = json.loads(handle.read(1 << 20))["roots"]
            used = os.stat(os.path.join(folder, "index")).st_mtime if os.path.exists(os.path.join(folder, "index")) else 0.0
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(roots, list) and all(isinstance(r, str) for r in roots):
            found.append((used, folder, roots))
    return found


def _evict_journals(keep: str) -> None:
    """Remove the least recently used journals beyond `MAX_JOURNALS`, skipping any in use."""
    known = sorted(_known_journals())
    for _, folder, _ in known[: max(len(known) - MAX_JOURNALS + 1, 0)]:
        if folder != keep:
            _remove_journal(folder)


def _remove_journal(folder: str) -> None:
    path = os.path.join(folder, "lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    try:
        for sub in ("blobs", ""):
            where = os.path.join(folder, sub)
            for name in os.listdir(where) if os.path.isdir(where) else []:
                if name != "blobs" and name != "lock":
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(where, name))
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(folder, "blobs"))
        os.unlink(path)  # last: a waiter that then locks the unlinked file sees it is gone and starts afresh
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    finally:
        os.close(fd)


def _private_dirs(*paths: str) -> None:
    """The state directory and then each of `paths` (each a child of the one before), created 0700."""
    os.makedirs(durable.state_dir(), mode=0o700, exist_ok=True)
    for path in (journal_root(), *paths):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)


def _same_file(fd: int, path: str) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _cut_torn_tail(fd: int) -> None:
    """Drop a last line left without its newline by a writer that died mid-append."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(size - MAX_INDEX_BYTES, 0)
    data = os.pread(fd, size - start, start)
    cut = data.rfind(b"\n")
    os.ftruncate(fd, start + cut + 1 if cut >= 0 else start)


def _write_file(path: str, data: bytes) -> None:
    """Crash-safe creation or replacement of a private file: temp file, fsync, rename, fsync the folder."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        durable._write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    durable._fsync_path(folder)
