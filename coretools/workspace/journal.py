"""The edit journal: the content every write_file and replace replaced, kept so the edit can be undone; a
removed file's content and a move's old path too (`journaled_move`: an undo moves the file back); and the
files one call changed together as one entry (`journaled_changes`: apply_patch), undone together; and the
directories a create_directory made (`journaled_directory`: an undo removes them while they are empty).

One journal per workspace (its set of real root paths), in the user's state directory, never under a root:
`settings.state_dir()/journal/<key>/` (0700) holds `meta.json` (the roots), `lock` (flock target) and numbered
segments `<n>.seg`, append-only files of checksummed records (`records.append_record`): per edit one record
whose header is the entry (JSON, with the floor below which entries are evicted) and whose blob is the bytes
the edit replaced. Every file is 0600.

Crash safety. An edit takes the journal's lock, reads the file's current bytes through the gateway, appends
its record and fdatasyncs it (one barrier; a new segment's name also gets a directory fsync), then writes the
file, all under the lock; on a write that fails it appends a tombstone (`{"void": id}`). A process killed at
any point leaves either nothing (a torn record: it fails its lengths or checksums, readers stop before it and
the next writer cuts it) or a complete entry whose file write may not have happened; such an entry is
recognised later because the file still has the content from before it. An entry of several files is one
record too, durable before the first file changes; each file is then written atomically, so after a crash
each is its old content or its new, and the undo puts back those that changed. Eviction only raises the
floor, in the same record; a segment wholly below it is unlinked, and one that a crash brings back is still
below it. So nothing is ever rewritten.

Several servers sharing a workspace serialise on the lock, so the journal's order is the order of the writes
and an undo's check and write cannot interleave with another journaled edit. Each process keeps what it has
read of a journal and, under the lock, reads only what others appended since.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import diskio, durable, settings
from coretools.sandbox.paths import Location, WriteOutcome, within
from coretools.workspace import made_directories, records
from coretools.workspace.journal_folders import (
    SEGMENT_SUFFIX, evict_journals, journal_root, known_journals, private_dirs, segment_number,
)

if TYPE_CHECKING:
    from coretools.sandbox.gateway import Workspace

logger = logging.getLogger("coretools")

MIB = 1024 * 1024
DEFAULT_MAX_ENTRIES = 200
DEFAULT_MAX_BYTES = 50 * MIB
MIN_SEGMENT_BYTES = 64 * 1024
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
    other_names: int = 0  # hard links besides `path`: the edit replaced this name only; they kept `before`
    moved_from: str | None = None  # for a move: the path the file had; `after` is its content, `before` the replaced
    mode: int | None = None  # the permission bits `before` had (set-user/group-ID dropped), for a file put back anew
    # An entry of several files (see `journaled_changes`): each file's change as a dict of the fields above
    # (path, before_sha, before_size, after_sha, after_size, mode, moved_from); the record's blob holds the
    # content each had before, one after the other in this order. `path` is the first file's.
    files: list[dict] | None = None
    blob_at: int | None = None  # for one file of such an entry (`parts`): where its content starts in the blob
    # An entry of directories (`journaled_directory`), outermost first, `path` the innermost: those it made
    # (create_directory), or those it removed (an undo of that); no file hash applies.
    dirs_made: list[str] | None = None
    dirs_removed: list[str] | None = None

    @property
    def created(self) -> bool:
        return self.before_sha is None

    @property
    def dirs(self) -> list[str] | None:
        """The directories an entry of directories made or removed; None for an entry of files."""
        return self.dirs_made if self.dirs_made is not None else self.dirs_removed

    @property
    def dirs_change(self) -> str | None:
        """For the history: "created directory X (and its parents ...)", or "removed ..."; None for files."""
        if self.dirs is None:
            return None
        parents = f" (and its parent{'s' * (len(self.dirs) > 2)} {', '.join(self.dirs[:-1])})" if self.dirs[1:] else ""
        return f"{'created' if self.dirs_made is not None else 'removed'} directory {self.path}{parents}"

    @property
    def paths(self) -> list[str]:
        """The files the entry changed (a move's old path included), or its directories."""
        if self.dirs is not None:
            return list(self.dirs)
        if self.files is None:
            return [self.path] + ([self.moved_from] if self.moved_from else [])
        return [f["path"] for f in self.files]

    def parts(self) -> list[Entry]:
        """The entry as one entry per file it changed (itself, when it changed one)."""
        if self.files is None:
            return [self]
        out, at = [], 0
        for f in self.files:
            out.append(Entry(self.id, self.time, self.tool, f["path"], f["before_sha"], f["before_size"],
                             f["after_sha"], f["after_size"], True, self.undoes, 0, f.get("moved_from"),
                             f.get("mode"), None, at))
            at += f["before_size"] if f["before_sha"] is not None else 0
        return out

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


@dataclass(frozen=True)
class FileChange:
    """One file of a change to several (`journaled_changes`): at `loc` (canonical path `key`), the file that
    is `before` (read under its edit lock; its stat is checked again when it is written) becomes `after`
    (None: removed). `mode` is the permission bits of a file written anew; `moved_from` names, for the
    history, the file whose content moved here."""

    loc: Location
    key: str
    before: Snapshot
    after: bytes | None
    mode: int | None = None
    moved_from: str | None = None


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


def workspace_key(roots: list[str]) -> str:
    return hashlib.sha256("\0".join(sorted(roots)).encode("utf-8", "surrogateescape")).hexdigest()[:24]


@functools.lru_cache(maxsize=64)
def exposed_by(roots: tuple[str, ...]) -> str | None:
    """The root that contains the state directory (so its journal would be readable by the tools), or None.
    Such a workspace is not journaled; the warning is logged once per workspace."""
    state = os.path.realpath(settings.state_dir())
    for root in roots:
        if within(state, root):
            logger.warning(
                "edit journal off for this workspace: the root %s contains the state directory %s, so the tools "
                "could read the journal (set CORETOOLS_STATE_DIR or XDG_STATE_HOME elsewhere to journal it)",
                root, state,
            )
            return root
    return None


@dataclass
class _Segment:
    """One segment file as far as it has been read: the offset after its last whole record, how many
    records that is, and the highest entry id among them."""

    number: int
    end: int = 0
    records: int = 0
    top: int = 0


class _State:
    """What has been read of a journal's segments. Kept per process between edits (see `_cached`) and
    brought up to date by reading only what other processes appended since."""

    def __init__(self, lock_id: tuple[int, int] | None) -> None:
        self.lock_id = lock_id
        self.segments: dict[int, _Segment] = {}  # by number, ascending
        self.entries: dict[int, Entry] = {}  # at or above the floor, voided ones included
        self.voided: set[int] = set()
        self.blobs: dict[int, tuple[int, records.Blob]] = {}  # entry id -> (segment number, its blob)
        self.floor = 0  # entries below it were evicted
        self.top = 0  # the highest id ever recorded
        self.count = 0  # live entries
        self.total = 0  # bytes of the copies kept, voided entries' included (they are on disk)

    def last(self) -> _Segment | None:
        return self.segments[max(self.segments)] if self.segments else None

    def live(self) -> list[Entry]:
        return [self.entries[i] for i in sorted(self.entries) if i >= self.floor and i not in self.voided]

    def apply(self, segment: _Segment, header: bytes, blob: records.Blob, record: object = None) -> None:
        """Take in one whole record of `segment` (`record`: its header, parsed, when the caller has it)."""
        segment.records += 1
        if record is None:
            try:
                record = json.loads(header)
            except ValueError:
                return
        if not isinstance(record, dict):
            return
        if isinstance(record.get("void"), int):
            self.count -= record["void"] in self.entries and record["void"] not in self.voided
            self.voided.add(record["void"])
            self.top, segment.top = max(self.top, record["void"]), max(segment.top, record["void"])
        elif (entry := Entry.parse(record)) is not None:
            self.entries[entry.id] = entry
            self.blobs[entry.id] = (segment.number, blob)
            self.count, self.total = self.count + (entry.id not in self.voided), self.total + _kept_size(entry)
            self.top, segment.top = max(self.top, entry.id), max(segment.top, entry.id)
            if isinstance(record.get("floor"), int) and record["floor"] > self.floor:
                self.floor = record["floor"]
                self._prune()

    def _prune(self) -> None:
        """Forget the entries below the floor (the oldest come first: records are read in id order)."""
        while self.entries and (oldest := next(iter(self.entries))) < self.floor:
            gone = self.entries.pop(oldest)
            del self.blobs[oldest]
            self.count, self.total = self.count - (oldest not in self.voided), self.total - _kept_size(gone)
        self.voided = {i for i in self.voided if i >= self.floor}


_CACHE_SIZE = 8
_cache: dict[str, _State] = {}
_cache_lock = threading.Lock()


def _cached(folder: str, state: _State | None = None) -> _State | None:
    """This process's state of the journal in `folder` (with `state`: remember it, the least recently
    used one forgotten beyond a few). Only read and updated under the journal's lock."""
    with _cache_lock:
        found = _cache.pop(folder, None) if state is None else state
        if found is not None:
            _cache[folder] = found
            while len(_cache) > _CACHE_SIZE:
                _cache.pop(next(iter(_cache)))
        return found


class Journal:
    """The journal of one workspace. Methods other than `entries`, `before_bytes` and `open` expect the
    lock to be held."""

    def __init__(self, folder: str, roots: tuple[str, ...], settings: JournalSettings) -> None:
        self.folder = folder
        self.roots = roots
        self.settings = settings.bounded()
        self._lock_id: tuple[int, int] | None = None  # the lock file's identity while we hold it
        self._view: _State | None = None

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
        found = [(used, folder, roots) for used, folder, roots in known_journals() if any(within(target, r) for r in roots)]
        if not found:
            return None
        _, folder, roots = max(found)
        return cls(folder, tuple(roots), settings)

    def _create(self) -> None:
        evict_journals(keep=self.folder)
        meta = json.dumps({"roots": list(self.roots)}).encode()
        diskio.replace_file(os.path.join(self.folder, "meta.json"), meta, private=True)
        diskio.fsync_dir(journal_root())

    # -- locking --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal's exclusive lock (blocking). A journal evicted while we waited is re-created."""
        path = os.path.join(self.folder, "lock")
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(8):
            try:
                fd = os.open(path, flags, 0o600)
            except FileNotFoundError:
                private_dirs(self.folder)
                fd = os.open(path, flags, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._lock_id = durable.same_file(fd, path)
                if self._lock_id is not None:
                    if not os.path.exists(os.path.join(self.folder, "meta.json")):
                        self._create()
                    yield
                    return
            finally:
                self._lock_id = None
                os.close(fd)
        raise OSError(f"could not lock the edit journal {self.folder}")

    # -- reading --------------------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """The live entries, oldest first. A torn last record is skipped."""
        return self._state().live()

    def _state(self) -> _State:
        """The journal's records, read up to date. Under the lock this process's cached state is caught up
        with what was appended since (a stat of the last segment and of the next name when nothing was);
        without it, everything is read afresh and nothing cached."""
        if self._lock_id is None:
            self._view = self._load(None)
            return self._view
        state = _cached(self.folder)
        if state is None or state.lock_id != self._lock_id or not self._catch_up(state):
            state = self._load(self._lock_id)
        self._view = _cached(self.folder, state)
        return state

    def _segment(self, number: int) -> str:
        return os.path.join(self.folder, f"{number}{SEGMENT_SUFFIX}")

    def _load(self, lock_id: tuple[int, int] | None) -> _State:
        state = _State(lock_id)
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return state
        for number in sorted(n for n in map(segment_number, names) if n is not None):
            state.segments[number] = _Segment(number)
            self._read_on(state, state.segments[number])
        return state

    def _catch_up(self, state: _State) -> bool:
        """Read what was appended to the last segment since `state` was taken; False when more changed
        than that (a new segment, a cut, a journal removed and made anew) and it must be read afresh."""
        last = state.last()
        if last is None or os.path.exists(self._segment(last.number + 1)):
            return False
        try:
            size = os.stat(self._segment(last.number), follow_symlinks=False).st_size
        except FileNotFoundError:
            return False
        if size > last.end:
            self._read_on(state, last)
        return size >= last.end

    def _read_on(self, state: _State, segment: _Segment) -> None:
        """Take in the whole records of `segment` after those already read."""
        try:
            fd = os.open(self._segment(segment.number), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            for stop, header, blob in records.scan_records(fd, segment.end, size):
                state.apply(segment, header, blob)
                segment.end = stop
        finally:
            os.close(fd)

    def before_bytes(self, entry: Entry) -> bytes | None:
        """The content the edit replaced; None when the file did not exist. Raises if it was not kept."""
        if entry.created:
            return None
        view = self._view if self._view is not None and entry.id in self._view.blobs else self._load(None)
        if entry.id not in view.blobs:
            raise OSError(f"edit {entry.id} is no longer in the journal")
        number, blob = view.blobs[entry.id]
        fd = os.open(self._segment(number), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            data = records.read_blob(fd, blob)
        finally:
            os.close(fd)
        if data is not None and entry.blob_at is not None:
            data = data[entry.blob_at : entry.blob_at + entry.before_size]
        if data is None or len(data) != entry.before_size or digest(data) != entry.before_sha:
            raise OSError(f"the journal's copy of the content before edit {entry.id} is damaged")
        return data

    # -- writing (under the lock) ---------------------------------------------------------------------

    def record(self, tool: str, path: str, before: Snapshot, after: bytes | None, undoes: int | None = None) -> Entry:
        """`begin`, then make the record durable at once."""
        entry, sync = self.begin(tool, path, before, after, undoes=undoes)
        sync()
        return entry

    def begin(
        self,
        tool: str,
        path: str,
        before: Snapshot,
        after: bytes | None,
        *,
        undoes: int | None = None,
        moved: tuple[str, Snapshot] | None = None,
    ) -> tuple[Entry, Callable[[], None]]:
        """Keep `before` (the file's content now) with the entry of an edit that will write `after`: one
        record, appended now, which also carries the new floor (evicting the oldest entries). Returns the
        entry and the record's sync, which must have run before the edit's new content can become visible;
        the writer runs it beside its own fsync (`durable.fsync_together`), so one commit can cover both.
        For a move, `moved` is the path the file comes from and its content (which `after` then stands for)."""
        state = self._state()
        kept = before.sha is None or (before.data is not None and before.size <= self.settings.max_bytes)
        after_sha, after_size = (moved[1].sha, moved[1].size) if moved else (digest(after), len(after or b""))
        entry = Entry(
            state.top + 1, time.time(), tool, path, before.sha, before.size, after_sha, after_size, kept, undoes,
            before.st.st_nlink - 1 if before.st and before.sha else 0, moved[0] if moved else None,
            _mode(before),
        )
        blob = (before.data or b"") if before.sha is not None and kept else b""
        return entry, self._append(state, _header(entry, self._floor(state, entry)), blob)

    def begin_many(
        self, tool: str, changes: list[FileChange], undoes: int | None = None
    ) -> tuple[Entry, Callable[[], None]]:
        """`begin` for several files changed together: one record whose blob holds each file's content from
        before (every one kept: the caller refuses a change whose content the journal cannot keep)."""
        state = self._state()
        files = [{"path": c.key, "before_sha": c.before.sha, "before_size": c.before.size, "after_sha": digest(c.after),
                  "after_size": len(c.after or b""), "mode": _mode(c.before), "moved_from": c.moved_from}
                 for c in changes]
        blob = b"".join(c.before.data or b"" for c in changes if c.before.sha is not None)
        entry = Entry(state.top + 1, time.time(), tool, files[0]["path"], digest(blob) if blob else None, len(blob),
                      None, sum(f["after_size"] for f in files), True, undoes, files=files)
        return entry, self._append(state, _header(entry, self._floor(state, entry)), blob)

    def begin_dirs(
        self, tool: str, dirs: list[str], *, removed: bool = False, undoes: int | None = None
    ) -> tuple[Entry, Callable[[], None]]:
        """`begin` for directories (outermost first) about to be made, or (`removed`) removed."""
        state = self._state()
        entry = Entry(state.top + 1, time.time(), tool, dirs[-1], None, 0, None, 0, True, undoes,
                      **{"dirs_removed" if removed else "dirs_made": dirs})
        return entry, self._append(state, _header(entry, self._floor(state, entry)), b"")

    def void(self, entry_id: int) -> None:
        """Mark an entry whose write failed: it never happened."""
        self._append(self._state(), {"void": entry_id}, b"")()

    def _floor(self, state: _State, new: Entry) -> int:
        """The lowest id to keep once `new` is recorded: the newest entries within the count and size
        bounds. A voided entry's copy counts toward the size (it is on disk until its segment goes)."""
        count, total = state.count + 1, state.total + _kept_size(new)
        limit = self.settings
        for entry in state.entries.values():  # oldest first
            if count <= limit.max_entries and total <= limit.max_bytes:
                return entry.id
            count, total = count - (entry.id not in state.voided), total - _kept_size(entry)
        return new.id

    def _append(self, state: _State, record: dict, blob: bytes) -> Callable[[], None]:
        """Append one record to the last segment, or to a new one once it holds a quarter of the bounds,
        and return its sync: fdatasync, and a directory fsync for a new segment's name."""
        header = json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogateescape")
        last = state.last()
        roll = last is None or last.records * 4 >= self.settings.max_entries or last.end >= self._segment_bytes()
        segment = _Segment(last.number + 1 if last else 1) if roll or last is None else last
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if roll else 0)
        fd = os.open(self._segment(segment.number), flags, 0o600)
        try:
            if not roll and os.fstat(fd).st_size != segment.end:
                os.ftruncate(fd, segment.end)  # a record torn by a writer that died (or failed) mid-append
            stop, where = records.append_record(fd, segment.end, header, blob, sync=False)
        except BaseException:
            os.close(fd)
            raise
        if roll:
            state.segments[segment.number] = segment
        state.apply(segment, header, where, record)
        segment.end = stop
        return durable.DeferredSync(fd, self.folder if roll else None, lambda: self._drop_dead(state, sweep=roll)).run

    def _segment_bytes(self) -> int:
        """A segment's size bound: a quarter of the journal's, so evicted copies linger on disk only in the
        oldest segment still in use, but not so small that every edit starts a segment (each costs a
        directory fsync)."""
        return max(self.settings.max_bytes // 4, MIN_SEGMENT_BYTES)

    def _drop_dead(self, state: _State, *, sweep: bool) -> None:
        """Remove the segments whose every entry is below the floor (the last one stays: it holds the
        highest id). No directory fsync: a removed segment that a crash brings back is still below the
        floor. When `sweep`, stray files (a temporary file of a crashed writer) go too."""
        newest = max(state.segments)
        for number in [n for n, s in state.segments.items() if n != newest and s.top < state.floor]:
            del state.segments[number]
            with contextlib.suppress(OSError):
                os.unlink(self._segment(number))
        if sweep:
            for name in os.listdir(self.folder):
                if name not in ("lock", "meta.json") and segment_number(name) is None:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.folder, name))


def _header(entry: Entry, floor: int) -> dict:
    """The record header of `entry`: its fields (those of several files only when it has them) and the floor."""
    optional = ("files", "blob_at", "dirs_made", "dirs_removed")
    fields = {k: v for k, v in vars(entry).items() if v is not None or k not in optional}
    return {**fields, "floor": floor}


def _mode(before: Snapshot) -> int | None:
    if before.st is None or before.sha is None:
        return None
    return stat.S_IMODE(before.st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)


def _kept_size(entry: Entry) -> int:
    return entry.before_size if entry.kept and not entry.created else 0


def journaled(
    ws: Workspace,
    loc: Location,
    after: bytes | None,
    tool: str,
    settings: JournalSettings,
    write: Callable[[Callable[[], None] | None], WriteOutcome],
    *,
    key: str | None = None,
    before: Snapshot | None = None,
) -> WriteOutcome:
    """Run `write` (which makes the file at `loc` hold `after`) with the file's current content journaled
    first, under the journal's lock. `write` gets the journal record's sync (None when nothing was
    journaled), to run before the new content becomes visible (`Workspace.write_atomic`'s `sync_with`).
    `key` is the file's canonical path (`Workspace.edit_key`) and `before` its content, when the caller has
    them; a `before` is only valid if `write` refuses a file whose stat is no longer `before.st`.
    A journal that cannot be written is logged and the edit goes ahead."""
    journal = _opened(ws, settings, f"{loc.shown} was edited")
    if journal is None:
        return write(None)
    with journal.locked():
        try:
            before = read_snapshot(ws, loc, journal.settings.max_bytes) if before is None else before
            entry, sync = journal.begin(tool, key or ws.edit_key(loc), before, after)
        except OSError as exc:
            logger.warning("could not journal the edit of %s (%s); it goes ahead unjournaled", loc.shown, exc)
            return write(None)
        try:
            return write(sync)
        except BaseException:
            sync()
            journal.void(entry.id)
            raise
        finally:
            sync()


def _opened(ws: Workspace, settings: JournalSettings, done: str) -> Journal | None:
    """The workspace's journal, or None when it is off or cannot be opened (logged: `done` says what went
    ahead without a journal entry)."""
    try:
        return Journal.open([r.path for r in ws.roots], settings)
    except OSError as exc:
        logger.warning("edit journal unavailable (%s); %s without a journal entry", exc, done)
        return None


def journaled_move(
    ws: Workspace,
    source: Location,
    destination: Location,
    tool: str,
    settings: JournalSettings,
    move: Callable[[os.stat_result | None], tuple[str, str]],
) -> tuple[str, str]:
    """Run `move` (which renames `source` to `destination`, refusing a source whose stat is no longer the
    one it is given) with one journal entry, under the journal's lock: on the destination's path, holding
    what it replaced (nothing, or an overwritten file's content) and the source's path, so an undo moves the
    file back. A destination whose content is larger than the journal keeps is not overwritten. A journal
    that cannot be written is logged and the move goes ahead."""
    journal = _opened(ws, settings, f"{source.shown} was moved")
    if journal is None:
        return move(None)
    with journal.locked():
        try:
            moved = read_snapshot(ws, source, 0)
            before = read_snapshot(ws, destination, journal.settings.max_bytes)
            if before.sha is not None and before.data is None:
                raise ToolError(
                    f"Not moved: {destination.shown} exists and its content ({before.size:,} bytes) is larger than the "
                    f"edit journal keeps ({journal.settings.max_bytes:,} bytes), so replacing it could not be undone.",
                    ErrorKind.FILE_TOO_LARGE,
                )
            src_key, dst_key = ws.edit_key(source), ws.edit_key(destination)
            entry, sync = journal.begin(tool, dst_key, before, None, moved=(src_key, moved))
        except OSError as exc:
            logger.warning("could not journal the move of %s (%s); it goes ahead unjournaled", source.shown, exc)
            return move(None)
        try:
            sync()
            return move(moved.st)
        except BaseException:
            journal.void(entry.id)
            raise


def journaled_directory(ws: Workspace, loc: Location, tool: str, settings: JournalSettings) -> tuple[str, bool]:
    """`mkdir -p` of `loc` with the directories it makes journaled first (under the journal's lock), so an
    undo removes them: see `made_directories`. Returns the shown path and whether it was made. A journal
    that cannot be written is logged and the directory is made."""
    journal = _opened(ws, settings, f"{loc.shown} was created")
    if journal is None:
        return ws.make_directory(loc)
    with journal.locked():
        return _make_directories(ws, journal, loc, tool)[0]


def _make_directories(ws: Workspace, journal: Journal, loc: Location, tool: str,
                      undoes: int | None = None) -> tuple[tuple[str, bool], Entry | None]:
    def record(dirs: list[str]) -> Entry | None:
        try:
            entry, sync = journal.begin_dirs(tool, dirs, undoes=undoes)
            sync()
            return entry
        except OSError as exc:
            logger.warning("could not journal the creation of %s (%s); it goes ahead unjournaled", loc.shown, exc)
            return None

    return made_directories.make(ws, loc, record, lambda entry: journal.void(entry.id))


def journaled_changes(ws: Workspace, changes: list[FileChange], tool: str, settings: JournalSettings) -> None:
    """Make every change (in order) with one journal entry, under the journal's lock: the record, with each
    file's content from before, is durable before the first file changes, and each file is written
    atomically (or removed). A change that fails puts back the files changed before it and voids the entry;
    if that too fails, the entry stays, so `undo` can put them back. A journal that cannot be written is
    logged and the changes go ahead."""
    journal = _opened(ws, settings, "a change of several files went ahead")
    if journal is None:
        _change_all(ws, changes)
        return
    with journal.locked():
        try:
            entry, sync = journal.begin_many(tool, changes)
            sync()
        except OSError as exc:
            logger.warning("could not journal a change of %d files (%s); it goes ahead unjournaled", len(changes), exc)
            _change_all(ws, changes)
            return
        _change_all(ws, changes, lambda: journal.void(entry.id))


def _change_all(ws: Workspace, changes: list[FileChange], clean: Callable[[], None] = lambda: None) -> None:
    """Write or remove each file in turn. On a failure, the files already changed are put back and, once all
    are, `clean` runs (voiding the journal entry) and the failure goes on; a file that cannot be put back
    makes the failure say so."""
    done: list[FileChange] = []
    try:
        for change in changes:
            _change_one(ws, change.loc, change.before.st, change.after, change.mode)
            done.append(change)
    except BaseException as exc:
        left = []
        for change in reversed(done):
            try:
                now = read_snapshot(ws, change.loc, 0)
                _change_one(ws, change.loc, now.st, change.before.data if change.before.sha else None,
                            _mode(change.before))
            except (ToolError, OSError):
                left.append(change.loc.shown)
        if not left:
            clean()
            raise
        reason = exc.message if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
        raise ToolError(
            f"The change failed part way ({reason}) and these files could not be put back: {', '.join(left)}. "
            "The edit journal has their content from before; `coretools-mcp undo` restores them.",
            ErrorKind.FILE_WRITE_FAILURE,
        ) from None


def _change_one(ws: Workspace, loc: Location, st: os.stat_result | None, data: bytes | None, mode: int | None) -> None:
    """Make the file at `loc`, which is `st` now (None: no file), hold `data` (None: removed)."""
    if data is None:
        if st is not None:
            ws.remove_file(loc, expect=st)
        return
    ws.write_atomic(loc, data, create_parents=True, must_not_exist=st is None, expect=st,
                    mode=mode if st is None else None)


@dataclass(frozen=True)
class Undone:
    """What an undo did: the edit it reverted, its own journal entry (None when the file already had that
    content), and the edits skipped because they never took effect (their process died before writing)."""

    edit: Entry
    record: Entry | None
    skipped: tuple[Entry, ...] = ()

    def describe(self, shown: str) -> str:
        """One sentence for the model (and the command line) on what the undo did to `shown`."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.edit.time))
        what = f"edit {self.edit.id} ({self.edit.tool or 'edit'} at {when})"
        if self.edit.files is not None:
            return self._describe_together(what)
        if self.edit.dirs is not None:
            return self._describe_dirs(what)
        if self.record is None:
            return f"Nothing to write: {shown} already has its content from before {what}."
        if self.edit.moved_from:
            replaced = "" if self.edit.created else f", and put back the file it had replaced at {self.edit.path}"
            return (
                f"Undid {what}: moved {self.edit.path} back to {self.edit.moved_from}{replaced}. This undo is edit "
                f"{self.record.id}; undoing the file again reverts it."
            )
        state = "removed it (the edit had created it)" if self.edit.created else "restored its content from before it"
        return (
            f"Undid {what} of {shown}: {state}. This undo is edit {self.record.id}; undoing the file again "
            "reverts it."
        )

    def _describe_dirs(self, what: str) -> str:
        made = self.edit.dirs_made is not None
        if self.record is None and self.skipped:
            return (f"Nothing to do: the directories {what} made are gone already; it is dropped from the journal, so "
                    "the next undo goes to the edit before it.")
        if self.record is None:
            return f"Nothing to do: the directories {what} {'made are gone' if made else 'removed exist'} already."
        dirs = list(reversed(self.record.dirs_removed or [])) if made else self.record.dirs_made or []
        return (f"Undid {what}: {'removed' if made else 'made again'} {', '.join(dirs)}. This undo is edit "
                f"{self.record.id}; undoing it again reverts it.")

    def _describe_together(self, what: str) -> str:
        if self.record is None and self.skipped:
            return f"Nothing to write: no file of {what} has its content from it; it never took effect."
        if self.record is None:
            return f"Nothing to write: every file of {what} already has its content from before it."
        said = []
        for part in self.record.parts():
            state = "removed" if part.after_sha is None else "put back" if part.before_sha is None else "restored"
            said.append(f"{part.path} ({state})")
        return (f"Undid {what}, all its files together: {', '.join(said)}. This undo is edit {self.record.id}; "
                "undoing it again reverts it.")


def history(journal: Journal, target: str | None = None) -> list[Entry]:
    """The live entries, oldest first; only those of the file `target` (a canonical path) if given."""
    return [e for e in journal.entries()
            if target is None or e.path == target or ((e.files or e.dirs) and target in e.paths)]


def undo(ws: Workspace, journal: Journal, *, target: str | None, edit_id: int | None, force: bool) -> Undone:
    """Put back the content from before the last journaled edit of `target` (or of the workspace), or from
    before edit `edit_id`; journaled itself. Refused, the file untouched, when the file changed since the
    last journaled edit of it (unless `force`) or when that content was not kept."""
    with journal.locked():
        entries = journal.entries()
        chosen = _choose(entries, target, edit_id)
        if chosen.files is not None:
            return _undo_together(ws, journal, chosen, entries, force)
        if chosen.dirs is not None:
            return _undo_directories(ws, journal, chosen, entries)
        loc = ws.locate(chosen.path)
        now = read_snapshot(ws, loc, journal.settings.max_bytes)
        mine = [p for e in entries if e.dirs is None for p in e.parts() if p.path == chosen.path]
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
        if edit.moved_from:
            if edit is not mine[-1]:
                raise ToolError(
                    f"Edit {edit.id} moved {edit.moved_from} to {loc.shown}; later edits of {loc.shown} must be undone "
                    "first.",
                    ErrorKind.INVALID_TOOL_PARAMS,
                )
            return Undone(edit, _move_back(ws, journal, edit, loc, now), tuple(skipped))
        restore = journal.before_bytes(edit)
        if digest(restore) == now.sha:
            return Undone(edit, None, tuple(skipped))
        record, sync = journal.begin("undo", chosen.path, now, restore, undoes=edit.id)
        try:
            if restore is None:
                sync()
                ws.remove_file(loc, expect=now.st)
            else:
                ws.write_atomic(
                    loc, restore, create_parents=True, must_not_exist=now.st is None, expect=now.st, sync_with=sync,
                    mode=edit.mode,
                )
        except BaseException:
            sync()
            journal.void(record.id)
            raise
        finally:
            sync()
        return Undone(edit, record, tuple(skipped))


def _undo_together(ws: Workspace, journal: Journal, edit: Entry, entries: list[Entry], force: bool) -> Undone:
    """Undo an entry of several files (a patch) as a whole: each file that has the content the entry gave
    it gets its content from before; one that still has that content is left (the process that made the
    entry died before changing it); any other is refused, nothing written, unless `force`. The undo is
    itself one entry of several files, so undoing it again redoes the change."""
    changes, last = [], all(not (set(e.paths) & set(edit.paths)) for e in entries if e.id > edit.id)
    for part in edit.parts():
        loc = ws.locate(part.path)
        now = read_snapshot(ws, loc, journal.settings.max_bytes)
        if now.sha == part.before_sha:
            continue
        if now.sha != part.after_sha and not force:
            later = [e for e in entries if e.id > edit.id and part.path in e.paths]
            if later:
                raise ToolError(
                    f"Not undone: {loc.shown} was edited again after edit {edit.id} (edit {later[-1].id}); undo that "
                    "first. No file was changed.",
                    ErrorKind.INVALID_TOOL_PARAMS,
                )
            raise _changed_since(loc.shown, edit)
        if now.sha is not None and now.data is None:
            raise ToolError(f"Not undone: {loc.shown} is larger than the edit journal keeps, so this undo could not "
                            "itself be undone. No file was changed.", ErrorKind.FILE_TOO_LARGE)
        changes.append(FileChange(loc, part.path, now, journal.before_bytes(part), part.mode))
    if not changes:
        if last and edit.undoes is None and not any(e.undoes == edit.id for e in entries):
            journal.void(edit.id)  # every file still has its content from before: the change never took effect
            return Undone(edit, None, (edit,))
        return Undone(edit, None)
    record, sync = journal.begin_many("undo", changes, undoes=edit.id)
    sync()
    _change_all(ws, changes, lambda: journal.void(record.id))
    return Undone(edit, record)


def _undo_directories(ws: Workspace, journal: Journal, edit: Entry, entries: list[Entry]) -> Undone:
    """Undo an entry of directories: those it made are removed, innermost first, each only while it is
    empty (a directory that holds anything is refused, naming it, and nothing is removed); those an undo
    removed are made again. Journaled as the opposite entry, so undoing it again reverts it. A creation
    whose directories are all gone (removed by hand, or its process died before the mkdir) is voided, so a
    plain undo goes on to the edit before it instead of stopping there each time."""
    if edit.dirs_removed is not None:
        return Undone(edit, _make_directories(ws, journal, ws.locate(edit.path), "undo", edit.id)[1])

    def record(dirs: list[str]) -> Entry:
        entry, sync = journal.begin_dirs("undo", dirs, removed=True, undoes=edit.id)
        sync()
        return entry

    done = made_directories.remove(ws, edit.dirs_made or [], record, lambda e: journal.void(e.id))
    if done is None and edit.undoes is None and not any(e.undoes == edit.id for e in entries):
        journal.void(edit.id)
        return Undone(edit, None, (edit,))
    return Undone(edit, done)


def _move_back(ws: Workspace, journal: Journal, edit: Entry, loc: Location, now: Snapshot) -> Entry:
    """Undo the move `edit` (its destination `loc` holds `now`): the file goes back to its old path, itself
    journaled as a move (so undoing it again moves the file once more), and a file the move replaced comes
    back from the journal."""
    back = ws.locate(edit.moved_from or "")
    restore = journal.before_bytes(edit)
    record, sync = journal.begin("undo", edit.moved_from or "", Snapshot(None, 0, None, None), None, undoes=edit.id,
                                 moved=(edit.path, now))
    try:
        sync()
        ws.move_file(loc, back, overwrite=False, expect=now.st)
    except BaseException:
        journal.void(record.id)
        raise
    if restore is not None:
        replaced, sync = journal.begin("undo", edit.path, Snapshot(None, 0, None, None), restore, undoes=edit.id)
        try:
            ws.write_atomic(loc, restore, create_parents=True, must_not_exist=True, sync_with=sync, mode=edit.mode)
        except BaseException:
            sync()
            journal.void(replaced.id)
            raise
        finally:
            sync()
    return record


def _choose(entries: list[Entry], target: str | None, edit_id: int | None) -> Entry:
    if edit_id is not None:
        found = next((e for e in entries if e.id == edit_id), None)
        if found is None:
            raise ToolError(
                f"Edit {edit_id} is not in the edit journal (it keeps the most recent edits only; "
                "`coretools-mcp history` lists them).",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        if target is not None and target not in found.paths:
            raise ToolError(f"Edit {edit_id} changed {', '.join(found.paths)}, not {target}.",
                            ErrorKind.INVALID_TOOL_PARAMS)
        return found
    mine = [e for e in entries if target is None or target in e.paths]
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
