"""The edit journal on real files: what an edit keeps, bounds and eviction, permissions, tombstones, torn
lines, the refusal of an undo over a later change, and the journal's absence where a root holds it."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import settings as env_settings
from coretools.workspace import records
from coretools.workspace import journal as jr
from coretools.sandbox.gateway import Workspace


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state directory of this test alone."""
    where = tmp_path / "state"
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(where))
    jr.exposed_by.cache_clear()
    return where


def edit(ws: Workspace, path: Path, data: bytes | None, settings: jr.JournalSettings | None = None, tool: str = "t"):
    """A journaled write of `data` to `path` (the way write_file and replace write)."""
    loc = ws.locate(str(path))
    return jr.journaled(ws, loc, data, tool, settings or jr.JournalSettings(),
                        lambda sync: ws.write_atomic(loc, data, create_parents=True, sync_with=sync))


def book(ws: Workspace, settings: jr.JournalSettings | None = None) -> jr.Journal:
    found = jr.Journal.find([r.path for r in ws.roots], None, settings or jr.JournalSettings())
    assert found is not None
    return found


def undo(ws: Workspace, path: Path | None = None, **kw):
    target = ws.edit_key(ws.locate(str(path))) if path else None
    options = {"edit_id": None, "force": False, **kw}
    return jr.undo(ws, book(ws), target=target, **options)


def test_an_edit_keeps_the_previous_bytes_and_undo_puts_them_back(root: Path, state: Path) -> None:
    f = root / "a.bin"
    f.write_bytes(b"\x00old\r\n\xff")
    f.chmod(0o640)
    with _ws(root) as ws:
        edit(ws, f, b"new")
        [entry] = jr.history(book(ws))
        assert (entry.tool, entry.before_size, entry.after_size, entry.kept) == ("t", 7, 3, True)
        done = undo(ws, f)
    assert f.read_bytes() == b"\x00old\r\n\xff" and stat.S_IMODE(f.stat().st_mode) == 0o640
    assert done.edit.id == 1 and done.record is not None and done.record.undoes == 1


def test_journal_files_are_private(root: Path, state: Path) -> None:
    with _ws(root) as ws:
        edit(ws, root / "a", b"1")
        edit(ws, root / "a", b"2")
    for dirpath, dirnames, filenames in os.walk(state / "journal"):
        assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o700, dirpath
        for name in filenames:
            assert stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode) == 0o600, name


def test_undo_of_a_creation_removes_the_file_and_undoing_that_brings_it_back(root: Path, state: Path) -> None:
    f = root / "sub" / "new.txt"
    with _ws(root) as ws:
        edit(ws, f, b"hello\n")
        assert undo(ws, f).edit.created
        assert not f.exists()
        undo(ws, f)
    assert f.read_bytes() == b"hello\n"


def test_undo_to_an_older_edit_restores_the_state_before_it(root: Path, state: Path) -> None:
    f = root / "a"
    f.write_text("v0")
    with _ws(root) as ws:
        for n in (1, 2, 3):
            edit(ws, f, f"v{n}".encode())
        undo(ws, f, edit_id=2)
        assert f.read_text() == "v1"
        with pytest.raises(ToolError, match="not in the edit journal"):
            undo(ws, f, edit_id=99)


def test_undo_is_refused_when_the_file_changed_since_unless_forced(root: Path, state: Path) -> None:
    f = root / "a"
    f.write_text("before")
    with _ws(root) as ws:
        edit(ws, f, b"edited")
        f.write_text("the user's own change")
        with pytest.raises(ToolError, match="changed since its last journaled edit"):
            undo(ws, f)
        assert f.read_text() == "the user's own change"
        undo(ws, f, force=True)
    assert f.read_text() == "before"


def test_count_bound_evicts_the_oldest(root: Path, state: Path) -> None:
    settings = jr.JournalSettings(max_entries=3)
    f = root / "a"
    with _ws(root) as ws:
        for n in range(6):
            edit(ws, f, f"v{n}".encode(), settings)
        j = book(ws, settings)
        assert [e.id for e in j.entries()] == [4, 5, 6]
        # the evicted entries' segments are gone from disk, their content with them
        assert sorted(n for n in os.listdir(j.folder) if n.endswith(".seg")) == ["4.seg", "5.seg", "6.seg"]
        edit(ws, f, b"next", settings)
        assert [e.id for e in j.entries()] == [5, 6, 7]  # ids never go back


def test_size_bound_evicts_the_oldest_and_a_too_large_file_is_journaled_without_content(root: Path, state: Path) -> None:
    settings = jr.JournalSettings(max_bytes=100)
    f = root / "a"
    f.write_bytes(b"x" * 40)
    with _ws(root) as ws:
        for n in range(4):
            edit(ws, f, bytes([65 + n]) * 40, settings)
        j = book(ws, settings)
        kept = [e for e in j.entries() if e.kept]
        assert sum(e.before_size for e in kept) <= 100 and len(kept) == 2
        big = root / "big"
        big.write_bytes(b"b" * 500)
        edit(ws, big, b"small", settings)
        last = j.entries()[-1]
        assert not last.kept and last.before_size == 500
        with pytest.raises(ToolError) as caught:
            jr.undo(ws, j, target=str(big), edit_id=None, force=False)
        assert caught.value.kind == ErrorKind.FILE_TOO_LARGE
    assert big.read_bytes() == b"small"


def test_a_failed_write_leaves_no_entry(root: Path, state: Path) -> None:
    f = root / "a"
    f.write_text("x")
    with _ws(root) as ws:
        loc = ws.locate(str(f))

        def failing(sync):
            raise ToolError("disk on fire", ErrorKind.FILE_WRITE_FAILURE)

        with pytest.raises(ToolError):
            jr.journaled(ws, loc, b"y", "t", jr.JournalSettings(), failing)
        assert jr.history(book(ws)) == []
        edit(ws, f, b"z")
        assert [e.id for e in jr.history(book(ws))] == [2]


def test_a_torn_last_record_is_skipped_and_cut_by_the_next_writer(root: Path, state: Path) -> None:
    f = root / "a"
    with _ws(root) as ws:
        edit(ws, f, b"1")
        j = book(ws)
        segment = Path(j.folder) / "1.seg"
        whole = segment.read_bytes()
        header = b'{"id": 2, "time": 1, "tool": "t", "path": "x"}'
        torn = records.pack_prefix(header, b"content") + b"cont"  # killed in the middle of the blob
        with open(segment, "ab") as handle:
            handle.write(torn)
        assert [e.id for e in j.entries()] == [1]
        edit(ws, f, b"2")
        assert segment.read_bytes().startswith(whole) and torn not in segment.read_bytes()
        assert [e.id for e in j.entries()] == [1, 2]


def test_a_garbled_last_record_is_skipped(root: Path, state: Path) -> None:
    """Whole in length but not in content (a power loss can leave an appended range zeroed)."""
    f = root / "a"
    f.write_bytes(b"v0")
    with _ws(root) as ws:
        edit(ws, f, b"v1")
        edit(ws, f, b"v2")
        segment = Path(book(ws).folder) / "1.seg"
        data = bytearray(segment.read_bytes())
        data[-1] ^= 0xFF  # the last byte of the last record's blob
        segment.write_bytes(bytes(data))
        assert [e.id for e in book(ws).entries()] == [1]


def test_an_entry_whose_write_never_happened_is_skipped_by_undo(root: Path, state: Path) -> None:
    """A process killed between journaling and writing leaves an entry the file never got."""
    f = root / "a"
    f.write_text("v0")
    with _ws(root) as ws:
        edit(ws, f, b"v1")
        j = book(ws)
        with j.locked():
            j.record("t", str(f), jr.read_snapshot(ws, ws.locate(str(f)), 1 << 20), b"v2-never-written")
        done = undo(ws, f)
    assert f.read_text() == "v0" and [e.id for e in done.skipped] == [2] and done.edit.id == 1


def test_no_journal_when_a_root_contains_the_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(tmp_path / ".state"))
    jr.exposed_by.cache_clear()
    with _ws(tmp_path) as ws:
        edit(ws, tmp_path / "a", b"1")
    assert (tmp_path / "a").read_bytes() == b"1" and not (tmp_path / ".state" / "journal").exists()


def test_disabled_journal_writes_nothing(root: Path, state: Path) -> None:
    with _ws(root) as ws:
        edit(ws, root / "a", b"1", jr.JournalSettings(enabled=False))
    assert not os.path.exists(os.path.join(env_settings.state_dir(), "journal"))


def test_each_workspace_has_its_own_journal_and_a_narrowed_one_is_found(root: Path, state: Path) -> None:
    sub = root / "sub"
    sub.mkdir()
    with _ws(sub) as narrow:
        edit(narrow, sub / "a", b"1")
    with _ws(root) as wide:
        target = wide.edit_key(wide.locate(str(sub / "a")))
        found = jr.Journal.find([r.path for r in wide.roots], target, jr.JournalSettings())
        assert found is not None and found.roots == (str(sub.resolve()),)
        jr.undo(wide, found, target=target, edit_id=None, force=False)
    assert not (sub / "a").exists()


@contextlib.contextmanager
def _ws(root: Path) -> Iterator[Workspace]:
    """A Workspace that is closed after the block."""
    ws = Workspace([str(root)])
    try:
        yield ws
    finally:
        ws.close()
