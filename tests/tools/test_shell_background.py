"""run_shell_command with `is_background`, with real bash (and real bubblewrap where the machine allows it):
the call returns after the delay while the command runs on, with its bounds (how many at once, how long,
how much log) and its end at server shutdown, all checked by PID and by files the command leaves."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest

from coretools.workspace.background import BackgroundJobs, Limits
from coretools.sandbox.bwrap import bwrap_problem
from coretools.sandbox.process_groups import is_alive
from coretools.sandbox.runner import Runner, RunSpec
from coretools.tools.run_shell_command import RunShellCommand
from tests.conftest import call_tool, connect, stdio_params, text_of
from tests.tools.test_schemas import gemini_problems

pytestmark = pytest.mark.anyio

LANDLOCK = ("--shell-sandbox", "landlock")  # sandboxed, with host PIDs (no PID namespace)
FIELDS = ["Command", "Directory", "Stdout", "Stderr", "Error", "Exit Code", "Signal", "Background PIDs",
          "Process Group PGID"]  # fmt: skip
MARGIN = 0.5  # seconds a backgrounding call may take beyond its delay on a loaded machine


async def eventually(check, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.02)


def gone(pid: int) -> bool:
    """Not running, and reaped (no zombie left in /proc)."""
    return not is_alive(pid) and not os.path.exists(f"/proc/{pid}")


async def background(client, command: str, **args):
    started = time.monotonic()
    result = await client.call_tool("run_shell_command", {"command": command, "is_background": True, **args})
    return result, time.monotonic() - started


# -- the call returns, the command runs on -----------------------------------------------------------------


async def test_returns_after_the_delay_and_the_command_still_finishes(root: Path) -> None:
    marker = root / "marker"
    async with connect([root], "legacy", "--structured-content") as client:
        result, took = await background(client, f"echo first; sleep 1; echo second; touch {marker}")
        assert 0.2 <= took < 0.2 + MARGIN and not result.is_error
        s = result.structured_content
        text = text_of(result)
        assert text.startswith(f"Command is running in background. PID: {s['pid']}. Process Group PGID: {s['pgid']}.")
        assert s["log_path"] in text and text.endswith("Initial output:\nfirst")
        assert is_alive(s["pid"]) and not marker.exists()
        await eventually(marker.exists)
        await eventually(lambda: gone(s["pid"]))  # finished and reaped
        await eventually(lambda: "exited with code 0" in Path(s["log_path"]).read_text())
        log = await client.call_tool("read_file", {"absolute_path": s["log_path"]})
        assert not log.is_error and text_of(log).startswith("first\nsecond\n")
        assert "[coretools: the command exited with code 0" in text_of(log)


async def test_delay_ms_sets_the_wait(root: Path) -> None:
    async with connect([root], "legacy") as client:
        _, took = await background(client, "sleep 5", delay_ms=700)
        assert 0.7 <= took < 0.7 + MARGIN
        _, took = await background(client, "sleep 5", delay_ms=0)
        assert took < MARGIN


async def test_a_command_done_within_the_delay_gives_the_normal_result(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        result, took = await background(client, "echo out; echo err >&2; exit 3", delay_ms=3000)
        assert took < 2  # it did not wait out the delay
        lines = text_of(result).splitlines()
        assert [line.split(":", 1)[0] for line in lines] == FIELDS
        assert "Stdout: out" in lines and "Stderr: err" in lines and "Exit Code: 3" in lines
        s = result.structured_content
        assert s["exit_code"] == 3 and "log_path" not in s and gone(s["pgid"])


async def test_dir_path_is_the_newer_name_of_directory(root: Path) -> None:
    (root / "sub").mkdir()
    new = await call_tool(root, "run_shell_command", {"command": "pwd", "dir_path": "sub"})
    old = await call_tool(root, "run_shell_command", {"command": "pwd", "directory": "sub"})
    assert new.structured["stdout"] == old.structured["stdout"] == f"{root}/sub"
    both = await call_tool(root, "run_shell_command", {"command": "pwd", "dir_path": "sub", "directory": "."})
    assert both.is_error and "'dir_path' and 'directory'" in text_of(both)
    args = {"command": "pwd", "dir_path": "sub", "is_background": True}
    background = await call_tool(root, "run_shell_command", args)
    assert background.structured["stdout"] == f"{root}/sub"


async def test_parameters_are_checked(root: Path) -> None:
    negative = await call_tool(root, "run_shell_command", {"command": "true", "is_background": True, "delay_ms": -1})
    assert negative.is_error and "delay_ms" in text_of(negative)
    wrong = await call_tool(root, "run_shell_command", {"command": "true", "is_background": "yes"})
    assert wrong.is_error and "is_background" in text_of(wrong)


# -- bounds ---------------------------------------------------------------------------------------------


async def test_at_most_n_background_commands(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content", "--max-background-commands", "2") as client:
        first, _ = await background(client, f"until [ -e {root}/go ]; do sleep 0.05; done", delay_ms=0)
        second, _ = await background(client, "sleep 30", delay_ms=0)
        third, _ = await background(client, "sleep 30", delay_ms=0)
        assert third.is_error and "Too many background commands are running (2" in text_of(third)
        assert f"PID {first.structured_content['pid']}" in text_of(third)
        (root / "go").touch()
        await eventually(lambda: gone(first.structured_content["pid"]))
        await anyio.sleep(0.1)
        fourth, _ = await background(client, "sleep 30", delay_ms=0)
        assert not fourth.is_error and is_alive(fourth.structured_content["pid"])
    off = await call_tool(root, "run_shell_command", {"command": "true", "is_background": True},
                          "--max-background-commands", "0")  # fmt: skip
    assert off.is_error and "turned off" in text_of(off)


async def test_lifetime_limit_kills_the_group(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content", "--background-timeout", "1", *LANDLOCK) as client:
        result, _ = await background(client, "trap '' TERM; sleep 30 & echo $!; sleep 30")
        s = result.structured_content
        child = int(s["initial_output"])
        assert is_alive(s["pid"]) and is_alive(child)
        await eventually(lambda: gone(s["pid"]) and not is_alive(child), 10)
        await eventually(lambda: "--background-timeout" in Path(s["log_path"]).read_text())
        assert "was ended by signal 9" in Path(s["log_path"]).read_text()


async def test_call_timeout_does_not_stop_a_backgrounded_command(root: Path) -> None:
    marker = root / "marker"
    async with connect([root], "legacy", "--structured-content", "--call-timeout", "1") as client:
        result, _ = await background(client, f"sleep 2; touch {marker}")
        assert not result.is_error
        await eventually(marker.exists, 10)


async def test_shell_timeouts_do_not_apply_to_background_commands(root: Path) -> None:
    marker = root / "marker"
    flags = ("--shell-timeout", "0.5", "--shell-inactivity-timeout", "0.5")
    async with connect([root], "legacy", *flags) as client:
        await background(client, f"sleep 1.5; touch {marker}")
        await eventually(marker.exists, 10)


async def test_the_log_stops_at_its_cap(tmp_path: Path) -> None:
    runner = Runner("test")
    jobs = BackgroundJobs(runner, Limits(log_cap=1000))
    try:
        job = jobs.start(RunSpec(["bash", "-c", "head -c 5000 /dev/zero | tr '\\0' a; echo; echo done >&2"]))
        await anyio.to_thread.run_sync(job.join, 10)
        log = Path(job.log_path).read_text()
        assert log.startswith("a" * 1000) and "a" * 1001 not in log
        assert "reached its cap of 1,000 bytes" in log and "exited with code 0" in log
        assert oct(os.stat(job.log_path).st_mode & 0o777) == "0o600"
    finally:
        await jobs.aclose()
        await runner.aclose()


# -- shutdown and cancellation --------------------------------------------------------------------------


async def test_server_shutdown_kills_background_commands(root: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    params = stdio_params([root], "--structured-content")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("run_shell_command", {"command": "sleep 60 & sleep 61", "is_background": True})
        pid = result.structured_content["pid"]
        assert is_alive(pid)
    await eventually(lambda: not is_alive(pid), 10)


async def test_closing_the_tool_kills_them(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        result, _ = await background(client, "trap '' TERM; sleep 60")
        s = result.structured_content
        assert is_alive(s["pid"])
    await eventually(lambda: gone(s["pid"]), 10)
    assert not Path(s["log_path"]).exists()  # removed with the server's scratch directory


async def test_shutdown_is_logged_and_waits_for_the_kill() -> None:
    runner = Runner("test")
    jobs = BackgroundJobs(runner, Limits())
    try:
        job = jobs.start(RunSpec(["bash", "-c", "trap '' TERM; echo up; sleep 60"]))
        await eventually(lambda: b"up" in Path(job.log_path).read_bytes())
        started = time.monotonic()
        await jobs.aclose()
        assert time.monotonic() - started < 3 and gone(job.pid) and jobs.running() == []
        log = Path(job.log_path).read_text()
        assert "was ended by signal 9" in log and "stopped because the server shut down" in log
    finally:
        await runner.aclose()


async def test_a_cancelled_call_takes_its_command_with_it(root: Path) -> None:
    pidfile = root / "pid"
    async with connect([root], "legacy", *LANDLOCK) as client:
        with anyio.move_on_after(10):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    args = {"command": f"echo $$ > {pidfile}; sleep 30", "is_background": True, "delay_ms": 30_000}
                    await client.call_tool("run_shell_command", args)

                tg.start_soon(call)
                await eventually(lambda: pidfile.exists() and pidfile.read_text().strip())
                pid = int(pidfile.read_text())
                assert is_alive(pid)
                tg.cancel_scope.cancel()
        await eventually(lambda: not is_alive(pid), 5)


# -- the sandbox ----------------------------------------------------------------------------------------

BWRAP_PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None and "namespace" in BWRAP_PROBLEM, reason=f"the kernel forbids namespaces: {BWRAP_PROBLEM}"
)


@needs_bwrap
async def test_background_commands_run_in_the_same_sandbox(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    command = f"touch {outside}/x 2>&1; echo status=$?; sleep 0.5; touch {root}/inside"
    async with connect([root], "legacy", "--structured-content", "--shell-sandbox", "bwrap") as client:
        result, _ = await background(client, command)
        s = result.structured_content
        assert "sandbox" in text_of(result) and "kill --" not in text_of(result)
        await eventually((root / "inside").exists, 10)
        await eventually(lambda: "exited with code 0" in Path(s["log_path"]).read_text())
        assert "status=1" in Path(s["log_path"]).read_text() and not (outside / "x").exists()
        log = await client.call_tool("read_file", {"absolute_path": s["log_path"]})
        assert "status=1" in text_of(log)


# -- the schemas ----------------------------------------------------------------------------------------


def test_the_latest_schema_is_gemini_safe_and_the_default_is_unchanged() -> None:
    latest = RunShellCommand.latest_schema
    assert gemini_problems(latest) == []
    assert list(latest["properties"]) == ["command", "description", "dir_path", "is_background", "delay_ms"]
    assert latest["required"] == ["command"]
    assert list(RunShellCommand.input_schema["properties"]) == ["command", "description", "directory"]
    assert set(RunShellCommand().accepted_schema()["properties"]) == {
        "command", "description", "directory", "dir_path", "is_background", "delay_ms"
    }  # fmt: skip


def test_killing_by_pgid_reaches_a_background_command_outside_the_sandbox() -> None:
    """The reply's advice (`kill -- -PGID`) works: the command leads its own group."""
    runner_jobs = BackgroundJobs(Runner("test"), Limits())
    job = runner_jobs.start(RunSpec(["bash", "-c", "sleep 30 & sleep 30"]))
    try:
        assert os.getpgid(job.pid) == job.pgid == job.pid
        os.killpg(job.pgid, signal.SIGTERM)
        assert job.join(10)
        assert job.signal == signal.SIGTERM
    finally:
        job.stop("shutdown")
        job.join(5)
