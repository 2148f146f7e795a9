"""Faults around a real server process: a client that vanishes mid-call (the call's processes must die), a
full disk during `write_file` (RLIMIT_FSIZE, and a 1 MiB tmpfs where mounting is allowed: clear error, old
file intact), and a server SIGKILLed in the middle of a `replace` (the file is the old or the new version,
never a mix).

These complement test_edit_safety.py, which kills a one-shot `coretools-mcp call` at chosen phases of a
write; here the victim is a long-running HTTP server with an MCP client waiting on the call.

The clients, and the servers that are not killed by their PID, are forked (`server_fork`): each is still a
process of its own that dies of SIGKILL or sees its input close, without importing the MCP SDK again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import server_fork
from http_harness import REPO, TESTS, HttpServer, http_client, pid_alive, server_command, server_env, wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(result) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


# -- a client that disconnects mid-call -------------------------------------------------------------------

SHELL_CLIENT = """
import sys, json, anyio
sys.path.insert(0, {tests!r})
transport, target, mode, command = sys.argv[1:5]

async def main():
    if transport == "http":
        from http_harness import http_client
        client_cm = http_client(target, mode)
    else:
        from mcp import Client, StdioServerParameters
        argv = json.loads(target)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=json.loads(sys.argv[5]), cwd={repo!r})
        client_cm = Client(params, mode=mode)
    async with client_cm as client:
        await client.call_tool("run_shell_command", {{"command": command}})

anyio.run(main)
"""


# The shell writes its own pids, which are host pids under Landlock (not in bubblewrap's PID namespace).
HOST_PIDS = ("--shell-sandbox", "landlock")


def _shell_command(root: Path) -> str:
    # the shell, a foreground child and a background grandchild: every one of them must die
    return f"echo $$ > {root}/pid.shell; sleep 301 & echo $! > {root}/pid.bg; sleep 300 & echo $! > {root}/pid.fg; wait"


def _pids(root: Path) -> list[int]:
    return [int((root / f"pid.{n}").read_text().strip()) for n in ("shell", "bg", "fg")]


def _spawn_client(transport: str, target: str, mode: str, root: Path, env: dict | None = None) -> subprocess.Popen:
    """The client, forked; SIGKILL to its process group kills its launcher, and with it the client."""
    script = SHELL_CLIENT.format(tests=str(TESTS), repo=str(REPO))
    argv = server_fork.command(["-c", script, transport, target, mode, _shell_command(root), json.dumps(env or {})],
                               server_env())  # fmt: skip
    return subprocess.Popen(argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_http_client_vanishing_mid_call_kills_the_commands_processes(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with HttpServer.start([root], *HOST_PIDS, forked=True) as server:
        client = _spawn_client("http", server.url, mode, root)
        try:
            assert wait_for(lambda: all((root / f"pid.{n}").exists() for n in ("shell", "bg", "fg")), 30)
            assert wait_for(lambda: all((root / f"pid.{n}").read_text().strip() for n in ("shell", "bg", "fg")), 5)
            pids = _pids(root)
            assert all(pid_alive(p) for p in pids)
        finally:
            os.killpg(client.pid, signal.SIGKILL)  # the client and nothing else: no DELETE, no cancel message
            client.wait()
        assert wait_for(lambda: not any(pid_alive(p) for p in pids), 20), "the command's processes outlived the client"
        assert server.alive()


def test_stdio_client_vanishing_mid_call_kills_the_server_and_commands(tmp_path: Path) -> None:
    """Over stdio the host dying closes the server's stdin: the server exits and takes the command along."""
    root = tmp_path / "root"
    root.mkdir()
    argv = server_fork.command(server_command([root], *HOST_PIDS, transport="stdio")[1:], server_env())
    client = _spawn_client("stdio", json.dumps(argv), "legacy", root, env=server_env())
    try:
        assert wait_for(lambda: all((root / f"pid.{n}").exists() for n in ("shell", "bg", "fg")), 30)
        assert wait_for(lambda: all((root / f"pid.{n}").read_text().strip() for n in ("shell", "bg", "fg")), 5)
        pids = _pids(root)
        server_pid = _parent_of(_parent_of(pids[0]) or 0)  # the shell's parent is its run's reaper
        assert all(pid_alive(p) for p in pids)
    finally:
        os.killpg(client.pid, signal.SIGKILL)  # the stdio server runs in its own session and survives this
        client.wait()
    assert wait_for(lambda: not any(pid_alive(p) for p in pids), 20), "the command's processes outlived the host"
    assert server_pid is None or wait_for(lambda: not pid_alive(server_pid), 20), "the server outlived its host"


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


# -- a full disk during write_file ------------------------------------------------------------------------

LIMIT = 1024 * 1024

# The server, before it starts: files may not grow past LIMIT, and hitting that is an error (EFBIG), not the
# default SIGXFSZ that would kill the process.
LIMITED_SERVER = f"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT}))
from coretools.cli import main
sys.exit(main(sys.argv[1:]))
"""


async def _write_too_much(server: HttpServer, root: Path, expect: str) -> None:
    target = root / "keep.txt"
    old = "old content that must survive\n" * 100
    target.write_text(old)
    before = sorted(p.name for p in root.iterdir())
    async with http_client(server.url) as client:
        result = await client.call_tool("write_file", {"file_path": str(target), "content": "N" * (2 * LIMIT)})
        assert result.is_error, _text(result)
        assert expect in _text(result) and "keep.txt" in _text(result)
        assert target.read_text() == old
        assert sorted(p.name for p in root.iterdir()) == before, "a temporary file was left behind"
        created = await client.call_tool("write_file", {"file_path": str(root / "new-big.txt"), "content": "N" * (2 * LIMIT)})
        assert created.is_error and not (root / "new-big.txt").exists()
        # the server is fine and small writes still work
        small = await client.call_tool("write_file", {"file_path": str(target), "content": "small and new\n"})
        assert not small.is_error, _text(small)
        assert target.read_text() == "small and new\n"
        if "replace" in [t.name for t in (await client.list_tools()).tools]:
            grown = await client.call_tool(
                "replace", {"file_path": str(target), "old_string": "small", "new_string": "G" * (2 * LIMIT)}
            )
            assert grown.is_error and expect in _text(grown)
            assert target.read_text() == "small and new\n"


@pytest.mark.anyio
async def test_file_size_limit_during_write_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    command = [sys.executable, "-c", LIMITED_SERVER, *server_command([root])[3:]]
    with HttpServer.start([root], command=command, forked=True) as server:
        await _write_too_much(server, root, "File too large")
        assert server.alive()


@pytest.mark.anyio
async def test_full_tmpfs_during_write_file(tmp_path: Path) -> None:
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip() or mounted.returncode}")
    try:
        root = mnt / "root"
        root.mkdir()
        with HttpServer.start([root], forked=True) as server:
            await _write_too_much(server, root, "No space left on device")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- the server SIGKILLed mid-replace ---------------------------------------------------------------------


def _versions(lines: int) -> tuple[str, str]:
    old = "".join(f"old {i:08d} {'o' * 50}\n" for i in range(lines))
    return old, old.replace("old ", "NEW ")


REPLACE_CLIENT = """
import sys, json, anyio
sys.path.insert(0, {tests!r})
from http_harness import http_client
async def main(url, args_file):
    async with http_client(url) as client:
        await client.call_tool("replace", json.load(open(args_file)))
anyio.run(main, *sys.argv[1:])
"""


@pytest.mark.parametrize("moment", ["temp-file-seen", "random"])
def test_server_killed_mid_replace_leaves_old_or_new(tmp_path: Path, moment: str) -> None:
    """Replace every line of a ~10 MB file; SIGKILL the server while the call is in flight (when its temp
    file appears, or after a random delay). The file must be exactly the old or the new text."""
    root = tmp_path / "root"
    root.mkdir()
    old, new = _versions(160_000)
    target = root / "big.txt"
    rng = random.Random(8)
    outcomes = {"old": 0, "new": 0, "killed mid-write": 0}
    for i in range(3):
        target.write_text(old)
        args = tmp_path / "args.json"
        args.write_text(json.dumps({"file_path": str(target), "old_string": "old ", "new_string": "NEW ", "expected_replacements": 160_000}))
        server = HttpServer.start([root])  # the real process, SIGKILLed by its own PID
        client = subprocess.Popen(
            server_fork.command(["-c", REPLACE_CLIENT.format(tests=str(TESTS)), server.url, str(args)], server_env()),
            env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            if moment == "temp-file-seen":
                assert wait_for(lambda: any(p.name.endswith(".coretools.tmp") for p in root.iterdir()), 60, 0.0005), (
                    "the replace never started writing"
                )
            else:
                time.sleep(rng.uniform(0.5, 2.5))
            server.kill()
        finally:
            client.kill()
            client.wait()
        content = target.read_text()
        assert content in (old, new), f"a partial file after kill #{i}"
        outcomes["old" if content == old else "new"] += 1
        leftovers = list(root.glob("*.coretools.tmp"))
        if leftovers and leftovers[0].stat().st_size < len(new):
            outcomes["killed mid-write"] += 1
        for leftover in leftovers:
            leftover.unlink()
    if moment == "temp-file-seen":
        assert outcomes["killed mid-write"] >= 1, outcomes  # the kill really landed inside the write
