"""The stale-write guard: an edit of a file that changed on disk since the session saw it is refused and the
other change survives; the session's own consecutive edits, files it never read, and content-preserving
changes (touch) pass. Real servers: a stdio subprocess (another process changes the file between the read
and the edit), HTTP sessions, and the in-memory client for the finer cases.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, stdio_client, types

from http_harness import HttpServer, http_client
from support import connect, stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BODY = "".join(f"line {i}\n" for i in range(1, 40))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _append_elsewhere(path: Path, text: str) -> None:
    """Append from another process, as an editor or a build step would."""
    subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'a').write({text!r})"], check=True)


def _rename_over(path: Path, content: str) -> None:
    """Save the way editors do: write a new file beside it and rename it over the original."""
    script = (
        "import os, sys; p = sys.argv[1]; t = p + '.swp'; open(t, 'w').write(sys.argv[2]); os.replace(t, p)"
    )
    subprocess.run([sys.executable, "-c", script, str(path), content], check=True)


def _kind(result: types.CallToolResult) -> str | None:
    return (result.structured_content or {}).get("error", {}).get("kind")


async def _replace(client: Client, path: Path, old: str, new: str) -> types.CallToolResult:
    return await client.call_tool("replace", {"file_path": str(path), "old_string": old, "new_string": new})


async def test_stdio_append_between_read_and_replace_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    target.write_text(BODY)
    async with Client(stdio_client(stdio_params([tmp_path], "--structured-content", forked=True)), mode="legacy") as client:
        if True:
            assert not (await client.call_tool("read_file", {"absolute_path": str(target)})).is_error
            _append_elsewhere(target, "added by someone else\n")
            result = await _replace(client, target, "line 5\n", "line five\n")
            assert result.is_error, text_of(result)
            assert _kind(result) == "file_changed_since_read"
            assert "changed since you read it" in text_of(result)
            assert target.read_text() == BODY + "added by someone else\n"
            assert not (await client.call_tool("read_file", {"absolute_path": str(target)})).is_error
            result = await _replace(client, target, "line 5\n", "line five\n")
            assert not result.is_error, text_of(result)
    assert target.read_text() == BODY.replace("line 5\n", "line five\n") + "added by someone else\n"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stdio_editor_rename_before_write_file_is_refused(tmp_path: Path, mode: str) -> None:
    target = tmp_path / "notes.md"
    target.write_text(BODY)
    async with Client(stdio_client(stdio_params([tmp_path], "--structured-content", forked=True)), mode=mode) as client:
        if True:
            await client.call_tool("read_file", {"absolute_path": str(target)})
            _rename_over(target, "saved in an editor\n")
            result = await client.call_tool("write_file", {"file_path": str(target), "content": "mine\n"})
            assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)
            assert "replaced by another file" in text_of(result)
    assert target.read_text() == "saved in an editor\n"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_own_consecutive_edits_do_not_make_a_file_stale(tmp_path: Path, mode: str) -> None:
    target = tmp_path / "a.txt"
    target.write_text(BODY)
    async with connect([tmp_path], mode) as client:
        await client.call_tool("read_file", {"absolute_path": str(target)})
        for i in (1, 2, 3):
            result = await _replace(client, target, f"line {i}\n", f"LINE {i}\n")
            assert not result.is_error, text_of(result)
        result = await client.call_tool("write_file", {"file_path": str(target), "content": "fresh\n"})
        assert not result.is_error, text_of(result)
        result = await _replace(client, target, "fresh", "fresher")
        assert not result.is_error, text_of(result)
    assert target.read_text() == "fresher\n"


async def test_a_file_never_read_can_be_edited(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text(BODY)
    async with connect([tmp_path], "legacy") as client:
        _append_elsewhere(target, "x\n")
        assert not (await _replace(client, target, "line 7\n", "seven\n")).is_error
        other = tmp_path / "b.txt"
        other.write_text("b\n")
        assert not (await client.call_tool("write_file", {"file_path": str(other), "content": "B\n"})).is_error


async def test_touch_without_a_content_change_is_not_stale(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text(BODY)
    async with connect([tmp_path], "legacy", "--structured-content") as client:
        await client.call_tool("read_file", {"absolute_path": str(target)})
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        os.chmod(target, 0o640)
        result = await _replace(client, target, "line 9\n", "nine\n")
        assert not result.is_error, text_of(result)
    assert target.stat().st_mode & 0o777 == 0o640


async def test_same_size_rewrite_is_stale(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text(BODY)
    async with connect([tmp_path], "legacy", "--structured-content") as client:
        await client.call_tool("read_file", {"absolute_path": str(target)})
        changed = BODY.replace("line 3\n", "LINE 3\n")
        with open(target, "r+") as handle:  # same inode, same size
            handle.write(changed)
        result = await _replace(client, target, "line 9\n", "nine\n")
        assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)
    assert target.read_text() == changed


async def test_read_many_files_counts_as_a_read(tmp_path: Path) -> None:
    target = tmp_path / "src" / "m.py"
    target.parent.mkdir()
    target.write_text(BODY)
    async with connect([tmp_path], "legacy", "--structured-content") as client:
        result = await client.call_tool("read_many_files", {"paths": ["src/*.py"]})
        assert "line 1" in text_of(result)
        _append_elsewhere(target, "more\n")
        result = await _replace(client, target, "line 2\n", "two\n")
        assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)
    assert target.read_text().endswith("more\n")


async def test_a_windowed_read_of_a_large_file_still_guards(tmp_path: Path) -> None:
    target = tmp_path / "big.txt"
    target.write_text("".join(f"row {i}\n" for i in range(400_000)))  # past the whole-read size
    async with connect([tmp_path], "legacy", "--structured-content") as client:
        await client.call_tool("read_file", {"absolute_path": str(target), "offset": 10, "limit": 5})
        _append_elsewhere(target, "tail\n")
        result = await _replace(client, target, "row 12\n", "twelve\n")
        assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)


async def test_deleted_since_read_is_refused_once(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text(BODY)
    async with connect([tmp_path], "legacy", "--structured-content") as client:
        await client.call_tool("read_file", {"absolute_path": str(target)})
        target.unlink()
        result = await client.call_tool("write_file", {"file_path": str(target), "content": "again\n"})
        assert result.is_error and "deleted" in text_of(result)
        assert not target.exists()
        result = await client.call_tool("write_file", {"file_path": str(target), "content": "again\n"})
        assert not result.is_error, text_of(result)
    assert target.read_text() == "again\n"


async def test_sessions_do_not_share_what_they_saw(tmp_path: Path) -> None:
    """Each stateful HTTP session has its own record: a read in one does not hold back another."""
    target = tmp_path / "a.txt"
    target.write_text(BODY)
    server = HttpServer.start([tmp_path], "--structured-content", forked=True)
    try:
        async with http_client(server.url, "legacy") as reader, http_client(server.url, "legacy") as other:
            await reader.call_tool("read_file", {"absolute_path": str(target)})
            _append_elsewhere(target, "x\n")
            result = await _replace(other, target, "line 4\n", "four\n")
            assert not result.is_error, text_of(result)
            result = await _replace(reader, target, "line 6\n", "six\n")
            assert result.is_error and _kind(result) == "file_changed_since_read", text_of(result)
    finally:
        assert server.stop() == 0


def test_the_record_is_bounded_and_expires(tmp_path: Path) -> None:
    from coretools.workspace.views import FileViews

    views = FileViews(max_files=3, max_age=60.0)
    st = (tmp_path).stat()
    for i in range(10):
        views.saw(f"/f{i}", st)
    assert len(views) == 3 and views.seen("/f0") is None and views.seen("/f9") is not None
    expired = FileViews(max_age=0.0)
    expired.saw("/f", st)
    assert expired.seen("/f") is None and len(expired) == 0
