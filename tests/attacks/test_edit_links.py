"""An edit never writes through a hard link. A name inside a root may be a hard link to a file outside every
root (a dotfile, a `cp -al` or `rsync --link-dest` backup, a pnpm store): `write_file`, `replace` and
`undo` replace this name with a new file (keeping its owner, group, mode, extended attributes and ACLs),
the other names keep the old content, and the answer and the edit journal say how many there were. Where
the new file could not keep the owner (root without CAP_CHOWN), the edit is refused rather than written
through.

The server runs for real: a stdio server subprocess for the exploit itself, the tool layer in-process as
root, and `coretools-mcp call`/`history` subprocesses, on real files.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, call_tool, stdio_params, text_of

pytestmark = pytest.mark.anyio

SETPRIV = shutil.which("setpriv")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files other owners")
needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv")
OLD = "old content\n"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(state))
    return state


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside every root (the user's dotfile, a backup's copy)."""
    folder = tmp_path / "home"
    folder.mkdir()
    path = folder / ".bashrc"
    path.write_text(OLD)
    return path


def acl_blob(user: int) -> bytes:
    """A POSIX access ACL (owner rw, one named user r, group r, mask r, other none)."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, user), (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
               (0x20, 0, 0xFFFFFFFF)]  # fmt: skip
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)


def edit_args(tool: str, path: Path) -> dict:
    if tool == "write_file":
        return {"file_path": str(path), "content": "new content\n"}
    return {"file_path": str(path), "old_string": "old", "new_string": "new"}


def run_cli(state_dir: Path, *argv: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state_dir)}
    return subprocess.run([*prefix, sys.executable, "-m", "coretools", *argv], capture_output=True, text=True,
                          env=env, cwd=str(REPO), timeout=60)  # fmt: skip


@pytest.mark.parametrize("tool", ["write_file", "replace"])
async def test_a_link_to_a_file_outside_the_roots_is_not_written_through(
    root: Path, outside: Path, state_dir: Path, tmp_path: Path, tool: str
) -> None:
    """The exploit over a real stdio server: the file outside keeps its content, this name gets the new."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    inside = root / "notes.txt"
    os.link(outside, inside)
    params = stdio_params([root], env={"CORETOOLS_STATE_DIR": str(state_dir)}, forked=True)
    with (tmp_path / "server.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            result = await client.call_tool(tool, edit_args(tool, inside))
    text = text_of(result)
    assert not result.is_error, text
    assert outside.read_text() == OLD
    assert inside.read_text() == "new content\n"
    assert os.stat(outside).st_nlink == 1 and os.stat(inside).st_nlink == 1
    assert "1 other name" in text and "keep the old content" in text, text


@as_root
@pytest.mark.parametrize("tool", ["write_file", "replace"])
async def test_the_new_file_keeps_owner_group_mode_and_xattrs(root: Path, outside: Path, tool: str) -> None:
    inside = root / "meta.txt"
    os.link(outside, inside)
    os.chown(inside, 1000, 1001)
    os.chmod(inside, 0o640)
    os.setxattr(inside, "user.origin", b"kept")
    os.setxattr(inside, "system.posix_acl_access", acl_blob(1002))
    before = os.stat(inside)
    result = await call_tool(root, tool, edit_args(tool, inside))
    assert not result.is_error, text_of(result)
    after = os.stat(inside)
    assert inside.read_text() == "new content\n" and outside.read_text() == OLD
    assert after.st_ino != before.st_ino
    assert (after.st_uid, after.st_gid, after.st_mode) == (1000, 1001, before.st_mode)
    assert os.getxattr(inside, "user.origin") == b"kept"
    assert os.getxattr(inside, "system.posix_acl_access") == acl_blob(1002)


async def test_every_other_name_is_counted_and_keeps_the_old_content(root: Path, outside: Path) -> None:
    inside = root / "a.txt"
    twin = root / "sub" / "b.txt"
    twin.parent.mkdir()
    os.link(outside, inside)
    os.link(outside, twin)
    result = await call_tool(root, "write_file", edit_args("write_file", inside))
    text = text_of(result)
    assert not result.is_error, text
    assert "2 other names" in text, text
    assert twin.read_text() == outside.read_text() == OLD
    assert os.stat(twin).st_ino == os.stat(outside).st_ino and os.stat(outside).st_nlink == 2
    assert inside.read_text() == "new content\n"


async def test_undo_restores_this_names_old_content_and_the_journal_records_the_links(
    root: Path, outside: Path, state_dir: Path
) -> None:
    inside = root / "notes.txt"
    os.link(outside, inside)
    result = await call_tool(root, "replace", edit_args("replace", inside), "--undo-tool")
    assert not result.is_error, text_of(result)
    outside.write_text("changed outside afterwards\n")  # the other name is its own file now
    history = run_cli(state_dir, "history", "--root", str(root), "--json")
    assert history.returncode == 0, history.stderr
    entries = [e for e in json.loads(history.stdout) if e["path"].endswith("/notes.txt")]
    assert [e["other_names"] for e in entries] == [1], history.stdout
    undone = await call_tool(root, "undo", {"file_path": str(inside)}, "--undo-tool")
    assert not undone.is_error, text_of(undone)
    assert inside.read_text() == OLD
    assert outside.read_text() == "changed outside afterwards\n"


@needs_setpriv
@pytest.mark.parametrize("tool", ["write_file", "replace"])
def test_a_linked_file_whose_owner_cannot_be_kept_is_refused(root: Path, outside: Path, state_dir: Path, tool: str) -> None:
    """Root without CAP_CHOWN cannot give a new file another user's ownership, and writing in place would
    reach the other name: the edit is refused, both names untouched."""
    inside = root / "foreign.txt"
    os.link(outside, inside)
    os.chown(inside, 12345, 12345)
    os.chmod(inside, 0o666)
    before = os.stat(inside)
    no_chown = (SETPRIV, "--bounding-set", "-chown", "--inh-caps", "-chown")
    done = run_cli(state_dir, "call", "--root", str(root), tool, json.dumps(edit_args(tool, inside)), prefix=no_chown)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 other name(s) (hard links)" in done.stdout and "Nothing was written" in done.stdout, done.stdout
    after = os.stat(inside)
    assert inside.read_text() == outside.read_text() == OLD
    assert (after.st_ino, after.st_nlink, after.st_uid) == (before.st_ino, 2, 12345)
