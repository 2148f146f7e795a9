"""An edit changes the content and nothing else: not a file the server's user may not write, not the
owner, group, mode, extended attributes or ACLs; and a kill -9 in the middle of an in-place write leaves the
old content or the new once a server has started again. (The other names of a hard-linked file:
`test_edit_links.py`.)

The server runs for real: as root in-process through the tool layer, and as another user (uid 65534) or as
root without CAP_CHOWN (which writes a file it cannot give away in place) as a subprocess under `setpriv`,
on real files on the real file system. The server that starts after a kill runs as root with every
capability, so it is forked (`server_fork`); its start-up, which puts interrupted writes back, is its own.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import server_fork
from support import REPO, call_tool, text_of

pytestmark = pytest.mark.anyio

NOBODY = 65534
FOREIGN = 12345
SETPRIV = shutil.which("setpriv")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create files owned by others")
needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv")


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(state))
    return state


@pytest.fixture
def shared() -> Path:
    """A root that uid 65534 can reach and write in (the directory), with files it may or may not write.
    (pytest's own temporary directories are private to root.)"""
    base = Path(tempfile.mkdtemp(prefix="coretools-shared-"))
    os.chmod(base, 0o755)
    root = base / "root"
    root.mkdir()
    os.chmod(root, 0o777)
    yield root
    shutil.rmtree(base, ignore_errors=True)


@functools.cache
def _nobody_cannot_import() -> str | None:
    """Why uid 65534 cannot import the server from this checkout, if it cannot (asked once: the answer
    depends on the checkout's permissions only)."""
    probe = [SETPRIV, "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups", sys.executable, "-c",
             "import coretools.cli, mcp"]  # fmt: skip
    done = subprocess.run(probe, capture_output=True, text=True, env={"PYTHONPATH": str(REPO)}, cwd="/", timeout=60)
    return done.stderr.strip()[-200:] if done.returncode != 0 else None


def nobody_can_run_the_server() -> None:
    """The server runs this interpreter and checkout as uid 65534; where that user cannot read them (a
    private clone), these tests cannot run."""
    problem = _nobody_cannot_import()
    if problem is not None:
        pytest.skip(f"uid {NOBODY} cannot run the server from this checkout ({problem}): "
                    "clone it where every user can read it to run this test")


def call_as_nobody(root: Path, tool: str, args: dict) -> subprocess.CompletedProcess:
    nobody_can_run_the_server()
    state = root.parent / "state"
    state.mkdir(exist_ok=True)
    os.chown(state, NOBODY, NOBODY)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(state), "CORETOOLS_STATE_DIR": str(state)}
    argv = [SETPRIV, "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups", sys.executable, "-m",
            "coretools", "call", "--root", str(root), tool, json.dumps(args)]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", timeout=60)


def no_chown() -> list[str]:
    """The prefix that runs a command as root without CAP_CHOWN, as containers often run."""
    return [SETPRIV, "--bounding-set", "-chown", "--inh-caps", "-chown"]


def foreign(path: Path, data: bytes) -> None:
    """A world-writable file of another user: root without CAP_CHOWN edits it in place."""
    path.write_bytes(data)
    os.chown(path, FOREIGN, FOREIGN)
    os.chmod(path, 0o666)


def replace_args(path: Path) -> dict:
    return {"file_path": str(path), "old_string": "old", "new_string": "new"}


@needs_setpriv
@pytest.mark.parametrize("tool", ["write_file", "replace"])
def test_file_the_user_may_not_write_is_refused_and_untouched(shared: Path, tool: str) -> None:
    target = shared / "root-owned.txt"
    target.write_text("old content\n")
    os.chmod(target, 0o644)
    before = os.stat(target)
    args = {"file_path": str(target), "content": "new\n"} if tool == "write_file" else replace_args(target)
    done = call_as_nobody(shared, tool, args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "permission" in done.stdout.lower(), done.stdout
    after = os.stat(target)
    assert target.read_text() == "old content\n"
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mode) == (before.st_ino, 0, 0, before.st_mode)


@needs_setpriv
def test_owner_that_cannot_be_kept_means_an_in_place_write(shared: Path) -> None:
    """A world-writable file owned by root: uid 65534 may write it, but a rename would make it 65534's."""
    target = shared / "world-writable.txt"
    target.write_text("old content\n")
    os.chmod(target, 0o666)
    before = os.stat(target)
    done = call_as_nobody(shared, "replace", replace_args(target))
    assert done.returncode == 0, done.stdout + done.stderr
    after = os.stat(target)
    assert target.read_text() == "new content\n"
    assert (after.st_ino, after.st_uid, after.st_gid) == (before.st_ino, 0, 0)
    assert stat.S_IMODE(after.st_mode) == 0o666
    assert not list((shared.parent / "state").glob("recovery/*")), "the recovery record is dropped after a good write"


@needs_setpriv
def test_group_that_cannot_be_kept_means_an_in_place_write(shared: Path) -> None:
    target = shared / "group-root.txt"
    target.write_text("old content\n")
    os.chown(target, NOBODY, 0)
    os.chmod(target, 0o640)
    done = call_as_nobody(shared, "write_file", {"file_path": str(target), "content": "new content\n"})
    assert done.returncode == 0, done.stdout + done.stderr
    after = os.stat(target)
    assert target.read_text() == "new content\n"
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (NOBODY, 0, 0o640)


def acl_blob(user: int) -> bytes:
    """A POSIX access ACL (the `system.posix_acl_access` xattr): owner rw, one named user r, group r,
    mask r, other none."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, user), (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
               (0x20, 0, 0xFFFFFFFF)]  # fmt: skip
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)


@as_root
@pytest.mark.parametrize("tool", ["write_file", "replace"])
async def test_owner_group_mode_xattrs_and_acl_survive(root: Path, tool: str) -> None:
    target = root / "meta.txt"
    target.write_text("old content\n")
    os.chown(target, 1000, 1001)
    os.setxattr(target, "user.origin", b"kept")
    os.setxattr(target, "system.posix_acl_access", acl_blob(1002))
    before = os.stat(target)
    args = {"file_path": str(target), "content": "new content\n"} if tool == "write_file" else replace_args(target)
    result = await call_tool(root, tool, args)
    assert not result.is_error, text_of(result)
    after = os.stat(target)
    assert target.read_text() == "new content\n"
    assert (after.st_uid, after.st_gid, after.st_mode) == (1000, 1001, before.st_mode)
    assert os.getxattr(target, "user.origin") == b"kept"
    assert os.getxattr(target, "system.posix_acl_access") == acl_blob(1002)


@needs_setpriv
def test_in_place_write_that_shrinks_leaves_no_tail(root: Path, state_dir: Path) -> None:
    target = root / "foreign.txt"
    foreign(target, b"old " * 1000 + b"\n")
    before = os.stat(target)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state_dir)}
    argv = [*no_chown(), sys.executable, "-m", "coretools", "call", "--root", str(root), "write_file",
            json.dumps({"file_path": str(target), "content": "short\n"})]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    after = os.stat(target)
    assert target.read_bytes() == b"short\n"
    assert (after.st_ino, after.st_uid, after.st_gid) == (before.st_ino, FOREIGN, FOREIGN)


# -- kill -9 during an in-place write -------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import os, sys, time
    target, marker, stage = sys.argv[1], sys.argv[2], sys.argv[3]
    real_write = os.write
    calls = {"n": 0}

    def slow_write(fd, data):
        calls["n"] += 1
        path = os.readlink(f"/proc/self/fd/{fd}")
        touching_target = os.path.samefile(path, target) if os.path.exists(path) else False
        if (stage == "target") == touching_target:
            half = bytes(data[: max(1, len(data) // 2)])
            real_write(fd, half)
            os.fsync(fd)
            open(marker, "w").close()
            time.sleep(60)
        return real_write(fd, data)

    os.write = slow_write
    from coretools.sandbox import durable
    assert not durable.rename_keeps_owner(os.stat(target)), "this writer must write in place"
    from coretools.sandbox.gateway import Workspace
    ws = Workspace([os.path.dirname(target)])
    ws.write_atomic(ws.locate(os.path.basename(target)), b"N" * 200_000)
    """
)


@needs_setpriv
@pytest.mark.parametrize("stage", ["record", "target"])
def test_kill_during_in_place_write_then_restart(root: Path, tmp_path: Path, state_dir: Path, stage: str) -> None:
    """Killed while saving the old bytes, or while writing the file: after a server starts, the file holds
    the old content (the record is applied or found incomplete), never a mix."""
    target = root / "foreign.txt"
    old = b"O" * 150_000
    foreign(target, old)
    marker = tmp_path / "paused"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state_dir)}
    proc = subprocess.Popen([*no_chown(), sys.executable, "-c", WRITER, str(target), str(marker), stage], env=env)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None, "the writer exited before pausing"
            assert time.monotonic() < deadline, "the writer never paused"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    if stage == "target":
        assert target.read_bytes() not in (old, b"N" * 200_000), "the kill did not land mid-write"
    restart = ["-m", "coretools", "call", "--root", str(root), "read_file", json.dumps({"absolute_path": str(target)})]
    done = subprocess.run(server_fork.command(restart, env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == old
    assert not list(state_dir.glob("recovery/*"))
    if stage == "target":
        assert "restored" in done.stderr.lower(), done.stderr


@needs_setpriv
def test_a_live_writers_record_is_left_alone(root: Path, tmp_path: Path, state_dir: Path) -> None:
    """Two servers share the state directory: one starting up never restores the record of a write that
    another is still making."""
    target = root / "foreign.txt"
    foreign(target, b"O" * 150_000)
    marker = tmp_path / "paused"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state_dir)}
    proc = subprocess.Popen([*no_chown(), sys.executable, "-c", WRITER, str(target), str(marker), "target"],
                            env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        mixed = target.read_bytes()
        from coretools.sandbox import durable

        assert durable.recover() == []
        assert target.read_bytes() == mixed
        assert list(state_dir.glob("recovery/*"))
    finally:
        proc.kill()
        proc.wait(10)


@needs_setpriv
def test_in_place_write_that_fails_half_way_puts_the_old_content_back(root: Path, state_dir: Path) -> None:
    """A write cut short by the file-size limit (EFBIG after part of the new bytes landed): the old bytes are
    put back at once, the caller gets the error, and no record is left."""
    target = root / "foreign.txt"
    foreign(target, b"O" * 50_000)
    script = textwrap.dedent(
        """
        import os, resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
        from coretools.errors import ToolError
        from coretools.sandbox.gateway import Workspace
        ws = Workspace([os.path.dirname(sys.argv[1])])
        try:
            ws.write_atomic(ws.locate(os.path.basename(sys.argv[1])), b"N" * 200_000)
        except ToolError as exc:
            print(exc.message)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state_dir)}
    done = subprocess.run([*no_chown(), sys.executable, "-c", script, str(target)], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert "File too large" in done.stdout, done.stdout + done.stderr
    assert target.read_bytes() == b"O" * 50_000
    assert not list(state_dir.glob("recovery/*"))
