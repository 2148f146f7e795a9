"""Edits never lose a write and never leave debris, through real servers:

- two HTTP servers on one workspace, journal off, 120 concurrent `replace` calls on one file: every edit
  answered "Successfully modified" is in the file (the edit lock spans processes, not only threads);
- root without CAP_CHOWN (as containers run) edits a world-writable file of another user, in place, instead
  of failing with "Permission denied";
- `kill -9` while a big `replace` writes its temporary file: no listing shows the temporary file, and the
  next server start removes it; a temporary file still being written by a live server, or a look-alike no
  server claimed, is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

import server_fork
from http_harness import HttpServer, http_client
from support import REPO, stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

SETPRIV = shutil.which("setpriv")
needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv")
NO_CHOWN = (str(SETPRIV), "--bounding-set", "-chown", "--inh-caps", "-chown")
FOREIGN = 12345
LOOK_ALIKE = ".data.txt.0123abcd.coretools.tmp"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(state))
    return state


def cli(*argv: str, prefix: tuple[str, ...] = ()) -> list[str]:
    return [*prefix, sys.executable, "-m", "coretools", *argv]


def env_of(state_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state_dir)}


def call(state_dir: Path, root: Path, tool: str, args: dict, *flags: str, prefix: tuple[str, ...] = ()):
    """`coretools-mcp call`, forked (`server_fork`) unless a `prefix` (setpriv) must shape the process
    itself: a forked one would not inherit the capabilities the prefix drops."""
    env = env_of(state_dir)
    argv = cli("call", "--root", str(root), *flags, tool, json.dumps(args), prefix=prefix)
    if not prefix:
        argv = server_fork.command(argv[1:], env)
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=120)


# -- two servers, one file ---------------------------------------------------------------------------------


async def test_concurrent_edits_from_two_servers_are_never_lost(root: Path, state_dir: Path) -> None:
    target = root / "log.txt"
    target.write_text("x" * 300_000 + "\nEND\n")
    env = {"CORETOOLS_STATE_DIR": str(state_dir)}
    answers: dict[int, tuple[bool, str]] = {}
    with HttpServer.start([root], "--stateless", "--no-journal", env=env, forked=True) as one, \
            HttpServer.start([root], "--stateless", "--no-journal", env=env, forked=True) as two:  # fmt: skip

        async def edit(url: str, i: int) -> None:
            # Each edit is its own client (its own User-Agent): one that had edited the file before would
            # rightly be refused by the stale-write guard once the other server changed it.
            async with http_client(url, headers={"User-Agent": f"editor-{i}"}) as client:
                args = {"file_path": str(target), "old_string": "\nEND\n", "new_string": f"\nedit-{i}\nEND\n"}
                result = await client.call_tool("replace", args, read_timeout_seconds=240)
                answers[i] = (bool(result.is_error), text_of(result))

        async with anyio.create_task_group() as group:
            for i in range(120):
                group.start_soon(edit, one.url if i % 2 else two.url, i)
    text = target.read_text()
    succeeded = [i for i, (error, said) in answers.items() if not error and "Successfully modified" in said]
    lost = [i for i in succeeded if f"\nedit-{i}\n" not in text]
    assert not lost, f"{len(lost)} of {len(succeeded)} edits answered as done are not in the file: {lost}"
    assert len(succeeded) == 120, [said for error, said in answers.values() if error][:3]


def test_the_edit_lock_spans_processes_and_dies_with_its_holder(root: Path, state_dir: Path) -> None:
    """The cross-process lock alone: while another process holds a file's edit lock, this one waits (here
    it gives up through `cancelled`); once that process is killed with SIGKILL, the lock is free at once,
    and its lock file does not outlive the edit."""
    from coretools.sandbox.gateway import Workspace

    target = root / "shared.txt"
    target.write_text("content\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from coretools.sandbox.gateway import Workspace; "
         "ws = Workspace([sys.argv[1]]); lock = ws.lock_edit(ws.locate('shared.txt')); print('held', flush=True); "
         "sys.stdin.read()", str(root)],
        env=env_of(state_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    ws = Workspace([str(root)])
    try:
        assert holder.stdout.readline().strip() == "held"
        deadline = time.monotonic() + 0.5

        def cancelled() -> None:
            if time.monotonic() > deadline:
                raise TimeoutError("still held by the other process")

        with pytest.raises(TimeoutError):
            ws.lock_edit(ws.locate("shared.txt"), cancelled=cancelled)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 30
        lock = ws.lock_edit(ws.locate("shared.txt"), cancelled=cancelled)
        lock.release()
        assert not list((state_dir / "locks").iterdir())
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        ws.close()


# -- root without CAP_CHOWN --------------------------------------------------------------------------------


@needs_setpriv
@pytest.mark.parametrize("tool", ["write_file", "replace"])
def test_root_without_cap_chown_edits_another_users_file_in_place(root: Path, state_dir: Path, tool: str) -> None:
    target = root / "shared.txt"
    target.write_text("old content\n")
    os.chown(target, FOREIGN, FOREIGN)
    os.chmod(target, 0o666)
    before = os.stat(target)
    args = (
        {"file_path": str(target), "content": "new content\n"}
        if tool == "write_file"
        else {"file_path": str(target), "old_string": "old", "new_string": "new"}
    )
    done = call(state_dir, root, tool, args, prefix=NO_CHOWN)
    assert done.returncode == 0, done.stdout + done.stderr
    after = os.stat(target)
    assert target.read_text() == "new content\n"
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mode) == (
        before.st_ino, FOREIGN, FOREIGN, before.st_mode,
    )
    assert [p.name for p in root.iterdir()] == ["shared.txt"]
    assert not list((state_dir / "recovery").glob("*")), "the recovery record is dropped after a good write"


# -- temporary files ---------------------------------------------------------------------------------------


async def listings(state_dir: Path, root: Path, errlog: Path) -> str:
    """What glob, list_directory, read_many_files and search_file_content show of the whole root, asked of
    one stdio server."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    shown = []
    params = stdio_params([root], env={"CORETOOLS_STATE_DIR": str(state_dir)}, forked=True)
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            for tool, args in (
                ("glob", {"pattern": "**/*"}),
                ("list_directory", {"path": str(root)}),
                ("list_directory", {"path": str(root / "sub")}),
                ("read_many_files", {"paths": ["**/*"]}),
                ("search_file_content", {"pattern": "needle"}),
            ):
                result = await client.call_tool(tool, args)
                assert not result.is_error, f"{tool}: {text_of(result)}"
                shown.append(text_of(result))
    return "\n".join(shown)


async def test_no_listing_shows_an_edits_temporary_file(root: Path, state_dir: Path, tmp_path: Path) -> None:
    (root / "sub").mkdir()
    for folder in (root, root / "sub"):
        (folder / "data.txt").write_text("needle in the real file\n")
        (folder / LOOK_ALIKE).write_text("needle in a temporary file\n")
    shown = await listings(state_dir, root, tmp_path / "server.log")
    assert "data.txt" in shown and "needle in the real file" in shown
    assert "coretools.tmp" not in shown and "needle in a temporary file" not in shown, shown
    assert (root / LOOK_ALIKE).exists(), "a look-alike no server claimed is never removed"


def kill_while_writing_the_temporary_file(root: Path, state_dir: Path, target: Path) -> Path | None:
    """Start a `replace` of `target` and kill it with SIGKILL once its temporary file is being written;
    return the temporary file left behind (None when the write finished before the kill landed)."""
    args = {"file_path": str(target), "old_string": "HEAD", "new_string": "DONE"}
    argv = cli("call", "--root", str(root), "--no-journal", "replace", json.dumps(args))
    proc = subprocess.Popen(argv, env=env_of(state_dir), cwd=str(REPO), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            temps = [p for p in root.iterdir() if p.name.endswith(".coretools.tmp")]
            if temps and temps[0].stat().st_size > 0:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                return temps[0] if temps[0].exists() else None
            time.sleep(0.001)
        return None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_kill_during_a_big_replace_leaves_nothing_after_the_next_start(root: Path, state_dir: Path) -> None:
    target = root / "big.txt"
    old = b"HEAD\n" + b"x" * (30 * 1024 * 1024)
    target.write_bytes(old)
    left = None
    for _ in range(5):
        left = kill_while_writing_the_temporary_file(root, state_dir, target)
        if left is not None:
            break
    assert left is not None, "the kill never landed while the temporary file was written"
    assert target.read_bytes() == old
    done = call(state_dir, root, "glob", {"pattern": "**/*"})
    assert done.returncode == 0, done.stderr
    assert left.name not in done.stdout and "big.txt" in done.stdout, done.stdout
    assert not left.exists(), f"{left.name} was left behind"
    assert [p.name for p in root.iterdir()] == ["big.txt"]


def test_a_live_writers_temporary_file_is_left_alone(root: Path, state_dir: Path) -> None:
    """Another server is writing this temporary file (its claim is locked): a server starting meanwhile
    leaves it; once that writer is gone without cleaning up, the next start removes it."""
    from coretools.sandbox import durable

    temp = root / ".data.txt.89abcdef.coretools.tmp"
    temp.write_text("being written\n")
    writer = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; from coretools.sandbox import durable; "
         "claim = durable.claim_temp(sys.argv[1], os.stat(sys.argv[1])); print(claim is not None, flush=True); "
         "sys.stdin.read(); os._exit(0)", str(temp)],
        env=env_of(state_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert writer.stdout.readline().strip() == "True"
        done = call(state_dir, root, "list_directory", {"path": str(root)})
        assert done.returncode == 0, done.stderr
        assert temp.exists(), "a live writer's temporary file was removed"
    finally:
        writer.stdin.close()
        writer.wait(10)
    assert durable.sweep_temps() == [str(temp)]
    assert not temp.exists()
