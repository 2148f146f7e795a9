"""Background processes as objects the model can list, read, answer and stop (issue 33), through a real HTTP
server with `--background-tty` (each command in a pseudo-terminal, rendered by a terminal emulator): a
Python REPL answers `1+1`, an `input()` prompt and a prompt that reads /dev/tty are answered, a ticking
"dev server" is followed line by line, a process that traps SIGTERM is stopped with its children, and a
second session cannot reach the first's processes, which end with their session and with the server.
Without a terminal (in-process), reads continue exactly where the last ended under a small result budget.
On the jobs themselves: a terminal nobody reads is drained and its log capped, and the idle limit, the
server-wide cap and the bounded record of finished jobs hold."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import anyio
import pytest

from coretools.sandbox.bwrap import bwrap_problem
from coretools.sandbox.landlock import landlock_problem
from coretools.sandbox.process_groups import is_alive
from coretools.sandbox.runner import Runner, RunSpec, terminal_argv
from coretools.workspace.background import FINISHED_KEPT, TERMINAL_SIZE, BackgroundJobs, Limits, Slots, TooManyJobs
from tests.http_harness import HttpServer, http_client
from tests.support import ToolSession, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

FLAGS = ("--tools", "all", "--background-tty", "--structured-content")
ASK = 'name = input("Name: ")\nprint(f"hello {name}!")\n'
TTY_ONLY = "read -r -s -p 'Secret: ' s < /dev/tty; echo; echo \"secret of ${#s} characters\""
ESCAPE = re.compile(r"\x1b")


def gone(pid: int) -> bool:
    return not is_alive(pid) and not os.path.exists(f"/proc/{pid}")


async def eventually(check, timeout: float = 15.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("background")
    (root / "ask.py").write_text(ASK)
    with HttpServer.start([root], *FLAGS) as running:
        yield running


async def start(client, command: str) -> int:
    result = await client.call_tool("run_shell_command", {"command": command, "is_background": True,
                                                           "delay_ms": 300})  # fmt: skip
    assert not result.is_error, text_of(result)
    return result.structured_content["pid"]


async def call(client, name: str, **args) -> tuple[str, dict]:
    result = await client.call_tool(name, args)
    text = text_of(result)
    assert not ESCAPE.search(text), text  # the model reads text, never escape sequences
    return text, result.structured_content or {}


async def until_waiting(client, pid: int) -> str:
    """Read until the process is probably waiting for input; all that was read."""
    seen = []
    with anyio.fail_after(20):
        while True:
            text, info = await call(client, "read_background_output", pid=pid, delay_ms=500)
            seen.append(text)
            if info["waiting_for_input"]:
                return "\n".join(seen)


async def until_exited(client, pid: int) -> tuple[str, dict]:
    seen = []
    with anyio.fail_after(20):
        while True:
            text, info = await call(client, "read_background_output", pid=pid, delay_ms=1000)
            seen.append(text)
            if info["status"] != "running":
                return "\n".join(seen), info


async def test_a_python_repl_in_a_terminal_answers(server: HttpServer) -> None:
    async with http_client(server.url) as client:
        pid = await start(client, "python3 -i -q")
        assert ">>>" in await until_waiting(client, pid)
        text, info = await call(client, "write_background_input", pid=pid, input="1+1\n")
        assert re.search(r">>> 1\+1\n2\n>>>", text), text
        listed, _ = await call(client, "list_background_processes")
        assert re.search(rf"- \[PID {pid}\] RUNNING: `python3 -i -q` \(running for .*in a terminal", listed)
        text, info = await call(client, "write_background_input", pid=pid, keys=["ctrl-d"])
        if info["status"] == "running":
            text, info = await until_exited(client, pid)
        assert info["status"] == "exited" and info["exit_code"] == 0
        await eventually(lambda: gone(pid))


async def test_an_input_prompt_and_a_prompt_on_dev_tty_are_answered(server: HttpServer) -> None:
    async with http_client(server.url) as client:
        asking, secret = await start(client, "python3 ask.py"), await start(client, TTY_ONLY)
        assert "Name:" in await until_waiting(client, asking)
        assert "Secret:" in await until_waiting(client, secret)
        text, _ = await call(client, "write_background_input", pid=asking, input="Ada\n")
        more, info = await until_exited(client, asking) if "exited" not in text else (text, {"exit_code": 0})
        assert "hello Ada!" in text + more and info["exit_code"] == 0
        text, _ = await call(client, "write_background_input", pid=secret, input="hunter2\n")
        more, info = await until_exited(client, secret) if "exited" not in text else (text, {"exit_code": 0})
        assert "secret of 7 characters" in text + more and info["exit_code"] == 0
        assert "hunter2" not in text + more  # `read -s` turned the terminal's echo off: it is not on the screen


async def test_a_dev_server_is_followed_line_by_line_and_stopped(server: HttpServer) -> None:
    async with http_client(server.url) as client:
        text, info = await call(client, "run_shell_command", command='i=0; while true; do i=$((i+1)); echo "tick $i"; '
                                'sleep 0.05; done', is_background=True, delay_ms=300)  # fmt: skip
        pid = info["pid"]
        assert "It runs in a terminal (--background-tty)" in text
        ticks = [int(n) for n in re.findall(r"^tick (\d+)$", text, re.M)]  # the first ones come with the start
        with anyio.fail_after(30):
            while len(ticks) < 70:  # more than a screen (30 rows): lines scroll into the log meanwhile
                text, _ = await call(client, "read_background_output", pid=pid, delay_ms=300)
                ticks += [int(n) for n in re.findall(r"^tick (\d+)$", text, re.M)]
        assert ticks == list(range(1, len(ticks) + 1))  # each line once, in order, none left out
        text, info = await call(client, "read_background_output", pid=pid, lines=3)
        assert len(re.findall(r"^tick \d+$", text, re.M)) == 3 and "Showing last 3 of" in text
        text, info = await call(client, "stop_background_process", pid=pid)
        assert info["status"] == "killed" and "Sent SIGTERM to its process tree" in text
        await eventually(lambda: gone(pid))


def running_with(marker: str) -> list[int]:
    """The PIDs of processes whose command line holds `marker` (the host sees into bubblewrap's namespace)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry))
        except OSError:
            pass
    return found


async def test_a_process_that_traps_term_is_killed_with_its_children(server: HttpServer) -> None:
    marker = f"{os.getpid() % 1000}.{time.time_ns() % 10**6}"  # `sleep` of a time nothing else sleeps
    async with http_client(server.url) as client:
        pid = await start(client, f"trap '' TERM; sleep {marker} & echo armed; while true; do sleep 0.1; done")
        seen = ""
        with anyio.fail_after(15):
            while "armed" not in seen:
                seen += (await call(client, "read_background_output", pid=pid, delay_ms=300))[0]
        assert running_with(marker)
        text, info = await call(client, "stop_background_process", pid=pid)
        assert info["status"] == "killed" and "Sent SIGTERM to its process tree" in text and "armed" in text
        await eventually(lambda: gone(pid) and not running_with(marker))  # the shell that trapped TERM, its child
        listed, _ = await call(client, "list_background_processes")
        assert f"[PID {pid}] KILLED" in listed and f"(Signal: {info['signal']})" in listed


async def test_another_session_cannot_reach_them_and_they_end_with_their_session(server: HttpServer) -> None:
    async with http_client(server.url) as first:
        pid = await start(first, "echo first-session-output; sleep 600")
        async with http_client(server.url) as second:
            listed, info = await call(second, "list_background_processes")
            assert listed == "No background processes found." and info == {"processes": []}
            for name, args in [("read_background_output", {}), ("read_background_output", {"lines": 5}),
                               ("write_background_input", {"input": "x\n"}), ("stop_background_process", {})]:
                result = await second.call_tool(name, {"pid": pid, **args})
                assert result.is_error and f"No background process with PID {pid} in this session" in text_of(result)
                assert "first-session-output" not in text_of(result)
        assert is_alive(pid)
        text, _ = await call(first, "read_background_output", pid=pid, delay_ms=200)
        assert "first-session-output" in text
    await eventually(lambda: gone(pid))  # the session ended (HTTP DELETE): its processes with it


async def test_everything_ends_with_the_server(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    with HttpServer.start([tmp_path], *FLAGS) as server:
        async with create_mcp_http_client() as http:  # the session is left open: only the server's exit ends it
            async with Client(streamable_http_client(server.url, http_client=http, terminate_on_close=False),
                              mode="legacy") as client:  # fmt: skip
                pids = [await start(client, "python3 -i -q"), await start(client, "trap '' TERM; sleep 600")]
        assert all(is_alive(pid) for pid in pids)
        assert server.stop() == 0
    await eventually(lambda: all(gone(pid) for pid in pids))


async def test_without_a_terminal_reads_continue_where_they_ended(root: Path) -> None:
    async with ToolSession(root, "--tools", "all", "--max-result-chars", "3000") as tools:
        result = await tools.call("run_shell_command", command="for i in $(seq 1000 1999); do echo line-$i; done; "
                                  "read x; echo \"read: [$x]\"", is_background=True, delay_ms=0)  # fmt: skip
        pid = result.structured["pid"]
        pieces, sizes = [], []
        with anyio.fail_after(20):
            while True:
                result = await tools.call("read_background_output", pid=pid, delay_ms=500)
                text = text_of(result)
                assert len(text) <= 3000 and not result.is_error
                info = result.structured
                pieces.append(info["output"])
                sizes.append(info["log_bytes"])
                if info["status"] != "running" and info["next_offset"] == info["log_bytes"]:
                    break
        output = "".join(pieces)
        assert output.startswith("line-1000\nline-1001\n") and "line-1999\nread: []\n" in output
        assert output.count("line-") == 1000 and len(pieces) > 3  # cut to the budget, continued without a gap
        assert sizes[-1] == len(output.encode())  # the true size: all of it was read
        again = await tools.call("read_background_output", pid=pid, offset=10)
        assert again.structured["output"].startswith("line-1001\n") and again.structured["offset"] == 10
        refused = await tools.call("write_background_input", pid=pid, input="y\n")
        assert refused.is_error and "started without a terminal" in text_of(refused) and "--background-tty" in \
            text_of(refused)
        missing = await tools.call("read_background_output", pid=1)
        assert missing.is_error and "No background process with PID 1 in this session" in text_of(missing)


SANDBOXES = {"none": None, "landlock": landlock_problem(), "bwrap": bwrap_problem()}


@pytest.mark.parametrize("sandbox", list(SANDBOXES))
async def test_a_terminal_under_each_sandbox_is_the_controlling_one(root: Path, sandbox: str) -> None:
    if SANDBOXES[sandbox]:
        pytest.skip(f"{sandbox}: {SANDBOXES[sandbox]}")
    async with ToolSession(root, "--tools", "all", "--background-tty", "--shell-sandbox", sandbox) as tools:
        result = await tools.call("run_shell_command", command=TTY_ONLY + "; tty -s && echo has-a-tty",
                                  is_background=True, delay_ms=300)  # fmt: skip
        pid = result.structured["pid"]
        answer = await tools.call("write_background_input", pid=pid, input="four\n", delay_ms=3000)
        seen = text_of(answer)
        if "exited" not in seen:
            seen += text_of(await tools.call("read_background_output", pid=pid, delay_ms=3000))
        assert "secret of 4 characters" in seen and "has-a-tty" in seen and "four" not in seen


# -- the bounds, on the jobs themselves ---------------------------------------------------------------------


async def test_a_terminal_nobody_reads_is_drained_and_its_log_capped(tmp_path: Path) -> None:
    runner = Runner("test", base=str(tmp_path))
    jobs = BackgroundJobs(runner, Limits(log_cap=20_000))
    flood = "yes 0123456789abcdef | head -c 2000000; echo; echo end"
    job = jobs.start(RunSpec(terminal_argv(["bash", "-c", flood]), pty=TERMINAL_SIZE))
    try:
        await eventually(job.done.is_set, 60)  # it could write all of it: the terminal was drained unread
        assert job.exit_code == 0 and job.received > 2_000_000
        assert 20_000 <= job.log_size < 21_000  # the cap, and the notes saying so
        assert "the log reached its cap of 20,000 bytes" in job.read_log(0, 30_000).decode()
    finally:
        await runner.aclose()


async def test_idle_server_wide_and_finished_bounds(tmp_path: Path) -> None:
    runner = Runner("test", base=str(tmp_path))
    slots = Slots(2)
    jobs = BackgroundJobs(runner, Limits(idle=0.6), slots)
    other = BackgroundJobs(runner, Limits(), slots)  # another session of the same server
    try:
        idle, watched = jobs.start(RunSpec(["sleep", "30"])), jobs.start(RunSpec(["sleep", "30"]))
        with pytest.raises(TooManyJobs) as refused:
            other.start(RunSpec(["sleep", "30"]))
        assert refused.value.server_limit == 2
        end = time.monotonic() + 1.5
        while time.monotonic() < end:  # looking at one keeps it; the other is stopped as idle
            watched.touch()
            await anyio.sleep(0.1)
        await eventually(idle.done.is_set)
        assert idle.stopped == "idle" and not watched.exited.is_set()
        assert "nothing looked at it for 0.6 s" in idle.read_log(0, 10_000).decode()
        other.start(RunSpec(["true"]))  # the idle one's slot is free again
        watched.stop("requested")
        await eventually(watched.done.is_set)
        for _ in range(FINISHED_KEPT + 3):
            job = jobs.start(RunSpec(["true"]))
            await eventually(job.done.is_set)
        assert len(jobs.every()) == FINISHED_KEPT  # the oldest records go first
        assert idle not in jobs.every()
        await jobs.aclose()  # its session ended: no record is left to find
        assert jobs.every() == [] and jobs.find(job.pid) is None
    finally:
        await runner.aclose()


async def test_a_terminal_job_survives_what_the_emulator_cannot_parse(tmp_path: Path) -> None:
    """`ESC [` and 5,000 digits made pyte raise ValueError in the job's thread, which died: the job vanished
    with no exit code. The sequence is dropped, as a terminal drops it, and the output after it is read."""
    runner = Runner("test", base=str(tmp_path))
    jobs = BackgroundJobs(runner, Limits())
    bad = r"printf '\033['; head -c 5000 /dev/zero | tr '\0' 1; printf 'm\nafter\n'"
    job = jobs.start(RunSpec(terminal_argv(["bash", "-c", bad]), pty=TERMINAL_SIZE))
    try:
        await eventually(job.done.is_set)
        assert job.exit_code == 0 and job.failure is None and job in jobs.every()
        assert "after" in job.read_log(0, 100_000).decode()
    finally:
        await runner.aclose()


async def test_a_reader_thread_that_fails_ends_its_job_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    """Whatever goes wrong while a job is followed stops the command and stays on record with the reason,
    in the log and for the tools, never a job that vanishes while its command runs on unread."""
    from coretools.workspace.background import BackgroundJob

    def broken(self, chunk, sink):
        raise RuntimeError("a bug")

    monkeypatch.setattr(BackgroundJob, "_take", broken)
    runner = Runner("test", base=str(tmp_path))
    jobs = BackgroundJobs(runner, Limits())
    job = jobs.start(RunSpec(["bash", "-c", "echo hi; sleep 30"]))
    try:
        await eventually(job.done.is_set)
        assert job.failure == "RuntimeError: a bug" and job.state == "killed" and job in jobs.every()
        assert "the server failed to follow the command (RuntimeError: a bug)" in job.read_log(0, 10_000).decode()
        assert gone(job.pid)
    finally:
        await runner.aclose()


async def test_a_terminal_shows_no_c1_or_bidi_controls(tmp_path: Path) -> None:
    """pyte dropped the rest of a piece of text after a character it cannot draw (a bidi override), hiding
    it; it is drawn on, the override by name, and no control reaches the log or the screen the model reads."""
    runner = Runner("test", base=str(tmp_path))
    jobs = BackgroundJobs(runner, Limits())
    command = r"printf 'A\xc2\x9d52;c;cHdu\xc2\x9cB \xe2\x80\xaetxt.exe\xe2\x80\xac\nZ\xe2\x80\xae end'; sleep 5"
    job = jobs.start(RunSpec(terminal_argv(["bash", "-c", command]), pty=TERMINAL_SIZE))
    try:
        await eventually(lambda: "end" in (job.screen() or ""))
        screen = job.screen()
        job.stop("requested")
        await eventually(job.done.is_set)
        log = job.read_log(0, 10_000).decode()
        assert "B <U+202E>txt.exe<U+202C>" in screen + log and "Z<U+202E> end" in screen
        assert not re.search("[\x1b\x80-\x9f\u202a-\u202e\u2066-\u2069]", screen + log), ascii(screen + log)
    finally:
        await runner.aclose()


async def test_a_line_the_terminal_would_cut_is_refused(server: HttpServer) -> None:
    """In canonical mode the terminal keeps 4,095 bytes of a line and drops the rest, silently: the answer
    said "Sent 5,001 bytes", and the program ran the cut line. Such a line is refused, nothing typed; a
    program in raw mode gets the whole line."""
    async with http_client(server.url) as client:
        pid = await start(client, "read x; echo GOT ${#x}; stty -icanon; echo RAW; head -c 5001 | wc -c")
        refused = await client.call_tool("write_background_input", {"pid": pid, "input": "y" * 5000 + "\n"})
        assert refused.is_error and "Nothing was sent" in text_of(refused), text_of(refused)
        assert "at most 4,095 bytes of a line" in text_of(refused) and "line 1 is 5,000 bytes" in text_of(refused)
        text, _ = await call(client, "write_background_input", pid=pid, input="y" * 4000 + "\n", delay_ms=3000)
        with anyio.fail_after(15):
            while "RAW" not in text:
                text += (await call(client, "read_background_output", pid=pid, delay_ms=500))[0]
        text += (await call(client, "write_background_input", pid=pid, input="z" * 5000 + "\n"))[0]
        text += (await until_exited(client, pid))[0]
        assert "GOT 4000" in text and "Sent 5,001 bytes" in text and "5001" in text, text


async def test_a_client_without_a_session_is_told_why_it_has_no_background_commands(server: HttpServer) -> None:
    """A 2026-07-28 client has no session: a call's scope ends with the call, which killed a background
    command right after its answer gave its PID. is_background is refused with the reason and what to do,
    and so are the tools that would find it; a command in the foreground runs as before."""
    async with http_client(server.url, mode="auto") as client:
        started = await client.call_tool("run_shell_command", {"command": "sleep 30", "is_background": True})
        assert started.is_error and "is_background needs a session" in text_of(started), text_of(started)
        assert "without is_background" in text_of(started)
        listed = await client.call_tool("list_background_processes", {})
        assert listed.is_error and "no session" in text_of(listed) and "stdio or stateful HTTP" in text_of(listed)
        ran = await client.call_tool("run_shell_command", {"command": "echo foreground"})
        assert not ran.is_error and "foreground" in text_of(ran)


async def test_past_its_rendering_budget_a_terminal_is_logged_as_plain_text(tmp_path: Path) -> None:
    """Emulation costs about a third of a CPU-microsecond a byte: past the job's budget (none here) what was
    on the screen goes to the log, and the output after it plain, controls removed, and the log says so."""
    runner = Runner("test", base=str(tmp_path))
    jobs = BackgroundJobs(runner, Limits(render_cpu=0.0))
    command = r"printf '\033[31mred\033[0m\n'; sleep 0.3; printf '\033[32mgreen\033[0m \033]0;title\007\n'"
    job = jobs.start(RunSpec(terminal_argv(["bash", "-c", command]), pty=TERMINAL_SIZE))
    try:
        await eventually(job.done.is_set)
        log = job.read_log(0, 10_000).decode()
        assert "red\n" in log and "green \n" in log and "\x1b" not in log and "title" not in log, ascii(log)
        assert log.index("red") < log.index("its budget") < log.index("green"), log
    finally:
        await runner.aclose()
