"""Red team of this session's opt-in tools (edit_file, apply_patch, move_file, delete_file,
create_directory, the background-process tools), attacked through tool calls only, as a model steered by a
hostile file or web page would call them.

One real HTTP server (`--tools all --undo-tool`) serves the whole module; each test works in a directory of
its own under the root, next to which lies a decoy directory no tool may touch. Each test is one attack that
must be refused or come to nothing: a file outside the roots or in `.git` changed, a git directory planted,
memory or a terminal's reader exhausted, controls reaching the model, a process left behind, an answer that
says more was done than was.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.http_harness import HttpServer, http_client
from tests.support import snapshot, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="the background tools and /proc are Linux only"),
]

FLAGS = ("--tools", "all", "--undo-tool", "--structured-content")
# What the model reads must not carry terminal controls: C1 controls (U+0080-U+009F: U+009B is CSI, U+009D
# is OSC, U+009C ends it) act like ESC sequences in UTF-8 terminals; bidi overrides and isolates reorder
# what a reader sees (Trojan Source).
CONTROLS = re.compile("[\x1b\x80-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("redteam_s3")
    root, decoy = base / "root", base / "root-evil"
    root.mkdir()
    decoy.mkdir()
    (decoy / "secret.txt").write_text("DECOY SECRET\n")
    with HttpServer.start([root], *FLAGS) as running:
        yield running, root, decoy


@pytest.fixture
def server(workspace) -> HttpServer:
    return workspace[0]


@pytest.fixture
def here(workspace, request: pytest.FixtureRequest) -> Path:
    """The test's own directory inside the root."""
    d = workspace[1] / request.node.name.replace("[", "-").replace("]", "")
    d.mkdir()
    return d


@pytest.fixture
def decoy(workspace) -> Path:
    return workspace[2]


def vm_hwm_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def patch(*lines: str) -> str:
    return "\n".join(("*** Begin Patch", *lines, "*** End Patch")) + "\n"


async def test_edit_file_chained_multiple_replacements_are_counted_without_materialising_them(
    server: HttpServer, here: Path
) -> None:
    """edits[0] turns 40,000 'a' into 4,000,000 'Q' (4 MB, well within the limit); edits[1] asks to replace
    every 'Q' by 30 characters (120 MB, over --max-edit-bytes). The second edit is refused, but only after
    the server materialised its 4 million matches: +540 MiB of peak memory for a 80 KB file and a 300-byte
    call (ten times the counts took 4 GiB). Peak memory for any hostile call must stay within 300 MiB."""
    target = here / "m.txt"
    target.write_text("a\n" * 40_000)
    before = vm_hwm_mib(server.pid)
    async with http_client(server.url) as client:
        await client.call_tool("read_file", {"absolute_path": str(target), "limit": 1})
        result = await client.call_tool("edit_file", {"file_path": str(target), "edits": [
            {"old_string": "a", "new_string": "Q" * 100, "allow_multiple": True},
            {"old_string": "Q", "new_string": "R" * 30, "allow_multiple": True},
        ]})  # fmt: skip
    assert result.is_error and target.read_text() == "a\n" * 40_000, text_of(result)[:300]
    grown = vm_hwm_mib(server.pid) - before
    assert grown < 300, f"peak memory grew by {grown} MiB"


async def test_apply_patch_plants_a_bare_repository_whose_fsmonitor_git_runs_on_the_host(
    server: HttpServer, here: Path, tmp_path: Path
) -> None:
    """`.git` paths are refused, but a directory holding HEAD, config, objects/ and refs/ is a git directory
    too: git run in it (or below it, when it is the root of a project that is no repository yet) runs its
    `core.fsmonitor` on the host, outside any sandbox. One apply_patch plants it, and nothing says so (the
    same repository made by a shell command is named by the git watch)."""
    marker = tmp_path / "FSMONITOR_RAN"
    planted = patch(
        f"*** Add File: {here}/plant/HEAD", "+ref: refs/heads/main",
        f"*** Add File: {here}/plant/config", "+[core]", "+\trepositoryformatversion = 0", "+\tbare = false",
        f"+\tworktree = {here / 'plant'}", f"+\tfsmonitor = touch {marker}",
        f"*** Add File: {here}/plant/objects/info/.keep", "+", f"*** Add File: {here}/plant/refs/heads/.keep", "+",
    )  # fmt: skip
    async with http_client(server.url) as client:
        result = await client.call_tool("apply_patch", {"patch": planted})
    text = text_of(result)
    if not result.is_error:  # the user's next git command in that directory
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "GIT_CEILING_DIRECTORIES": str(here)}  # fmt: skip
        subprocess.run(["git", "status"], cwd=here / "plant", env=env, capture_output=True, timeout=30)
    assert not marker.exists() or "core.fsmonitor" in text, text


async def test_background_output_carries_no_c1_controls_or_bidi_overrides(server: HttpServer, here: Path) -> None:
    """ESC sequences are stripped from a background command's output, but their 8-bit forms are not: U+009D
    (OSC: `52;c;...` sets the clipboard, `0;...` the title) and U+009B (CSI), encoded in UTF-8, reach the
    text the model and the host's terminal read, and so do bidi overrides (U+202E) that show text reversed."""
    command = r"printf 'A\xc2\x9d52;c;cHdu\xc2\x9cB\xc2\x9b2JC \xe2\x80\xaetxt.exe\xe2\x80\xac\n'; sleep 1"
    async with http_client(server.url) as client:
        started = await client.call_tool("run_shell_command", {"command": command, "is_background": True,
                                                               "directory": str(here), "delay_ms": 100})  # fmt: skip
        pid = started.structured_content["pid"]
        with anyio.fail_after(20):
            while True:
                read = await client.call_tool("read_background_output", {"pid": pid, "lines": 5, "delay_ms": 500})
                if read.structured_content["status"] != "running":
                    break
    text = text_of(read)
    assert "A" in text and "txt.exe" in text, text
    assert not CONTROLS.search(text), ascii(text)


@pytest.mark.parametrize(
    ("tool", "make"),
    [
        ("move_file", lambda d: {"source": str(d / "a.txt"), "destination": str(d / "newdir") + "/"}),
        ("apply_patch", lambda d: {"patch": patch(f"*** Add File: {d / 'newdir'}/", "+x")}),
    ],
    ids=["move_file", "apply_patch"],
)
async def test_a_destination_ending_in_a_slash_is_not_made_a_file(server: HttpServer, here: Path, tool, make) -> None:
    """`newdir/` names a directory: the move or the new file silently became a regular file named `newdir`
    (the model then writes `newdir/x` and fails, or believes a.txt is at newdir/a.txt)."""
    (here / "a.txt").write_text("A\n")
    async with http_client(server.url) as client:
        result = await client.call_tool(tool, make(here))
    assert result.is_error or (here / "newdir").is_dir(), (text_of(result), os.listdir(here))


async def test_create_directory_where_a_file_is_says_so(server: HttpServer, here: Path) -> None:
    """At a regular file the answer was 'a not a regular file of that name exists' (it is one), and below it
    'File not found' (the file is there): neither tells the model what is in the way."""
    (here / "a.txt").write_text("A\n")
    async with http_client(server.url) as client:
        at = text_of(await client.call_tool("create_directory", {"path": str(here / "a.txt")}))
        below = text_of(await client.call_tool("create_directory", {"path": str(here / "a.txt" / "sub")}))
    assert "not a regular file" not in at, at
    assert not below.startswith("File not found"), below


async def test_a_background_command_of_a_sessionless_client_runs_as_it_says(server: HttpServer, here: Path) -> None:
    """The answer gives a PID, a log and the tools to follow it; the next call finds no process, and the
    command is gone. Either it runs (owned by something the next request can name) or the call is refused."""
    async with http_client(server.url, mode="auto") as client:
        started = await client.call_tool("run_shell_command", {"command": "sleep 30", "is_background": True,
                                                               "directory": str(here), "delay_ms": 100})  # fmt: skip
        if started.is_error:
            return
        pid = started.structured_content["pid"]
        listed = text_of(await client.call_tool("list_background_processes", {}))
        await client.call_tool("stop_background_process", {"pid": pid})
    assert f"[PID {pid}] RUNNING" in listed, (text_of(started)[:200], listed)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("apply_patch", lambda d, x: {"patch": patch("*** Add File: ../root-evil/x.txt", "+pwn")}),
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Add File: {x}/abs.txt", "+pwn")}),
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Add File: {d}/out/x.txt", "+pwn")}),
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Update File: {d}/a.txt", f"*** Move to: {d}/out/m.txt",
                                                     "@@", "-A", "+B")}),  # fmt: skip
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Update File: {d}/lnk", "@@", "-DECOY SECRET", "+pwn")}),
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Add File: {d}/.GIT/hooks/pre-commit", "+pwn")}),
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Add File: {d}/sub/.git", "+gitdir: ../../../root-evil")}),
        ("apply_patch", lambda d, x: {"patch": patch(f"*** Update File: {d}/a.txt", f"*** Move to: {d}/.env.local",
                                                     "@@", "-A", "+B")}),  # fmt: skip
        ("edit_file", lambda d, x: {"file_path": str(d / "lnk"),
                                    "edits": [{"old_string": "DECOY", "new_string": "p"}]}),  # fmt: skip
        ("move_file", lambda d, x: {"source": str(d / "out/secret.txt"), "destination": str(d / "stolen.txt")}),
        ("move_file", lambda d, x: {"source": str(d / "a.txt"), "destination": str(d / "nested/.git")}),
        ("delete_file", lambda d, x: {"path": str(d / "out/secret.txt")}),
        ("create_directory", lambda d, x: {"path": str(d / "out/made")}),
        ("create_directory", lambda d, x: {"path": str(d / "nested/.git/hooks")}),
    ],
)
async def test_held_escapes_and_protected_paths(server: HttpServer, here: Path, decoy: Path, tool, args) -> None:
    """`..`, absolute paths, a directory symlink to outside, a file symlink, `*** Move to:` out or onto .env,
    `.GIT` in another case and a `.git` pointer file: each refused with its reason, nothing changed."""
    (here / "a.txt").write_text("A\n")
    os.symlink(decoy, here / "out")
    os.symlink(decoy / "secret.txt", here / "lnk")
    outside, inside = snapshot(decoy), snapshot(here)
    async with http_client(server.url) as client:
        result = await client.call_tool(tool, args(here, decoy))
    text = text_of(result)
    assert result.is_error and re.match(r"(Path not in workspace|Path is protected|Invalid path): ", text), text
    assert snapshot(decoy) == outside and snapshot(here) == inside


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("apply_patch", lambda d: {"patch": patch(f"*** Add File: {d}/g/hooks/post-checkout", "+#!/bin/sh")}),
        ("apply_patch", lambda d: {"patch": patch(f"*** Update File: {d}/e", "@@", "-SECRET=1", "+SECRET=2")}),
        ("edit_file", lambda d: {"file_path": str(d / "g/config"),
                                 "edits": [{"old_string": "[core]", "new_string": "[core]\n\tfsmonitor = x"}]}),
        ("move_file", lambda d: {"source": str(d / "a.txt"), "destination": str(d / "g/hooks/pre-push")}),
        ("delete_file", lambda d: {"path": str(d / "g/config")}),
    ],
    ids=["patch-hook", "patch-env", "edit-config", "move-hook", "delete-config"],
)
async def test_held_links_inside_the_root_to_dot_git_and_dot_env(server: HttpServer, here: Path, tool, args) -> None:
    """Links that stay inside the root but lead into `.git` or to `.env` are judged by where they lead."""
    (here / ".git").mkdir()
    (here / ".git" / "hooks").mkdir()
    (here / ".git" / "config").write_text("[core]\n")
    (here / ".env").write_text("SECRET=1\n")
    (here / "a.txt").write_text("A\n")
    os.symlink(".git", here / "g")
    os.symlink(".env", here / "e")
    inside = snapshot(here)
    async with http_client(server.url) as client:
        result = await client.call_tool(tool, args(here))
    assert result.is_error and text_of(result).startswith("Path is protected: "), text_of(result)
    assert snapshot(here) == inside


async def test_held_a_hard_link_to_outside_is_replaced_not_written_through(
    server: HttpServer, here: Path, decoy: Path
) -> None:
    os.link(decoy / "secret.txt", here / "hl.txt")
    async with http_client(server.url) as client:
        result = await client.call_tool("apply_patch", {"patch": patch(f"*** Update File: {here}/hl.txt", "@@",
                                                                       "-DECOY SECRET", "+pwn")})  # fmt: skip
    assert not result.is_error, text_of(result)
    assert (decoy / "secret.txt").read_text() == "DECOY SECRET\n" and (here / "hl.txt").read_text() == "pwn\n"


async def test_held_undo_into_a_directory_swapped_for_a_link_to_outside(
    server: HttpServer, here: Path, decoy: Path
) -> None:
    (here / "d").mkdir()
    (here / "d" / "f.txt").write_text("F\n")
    outside = snapshot(decoy)
    async with http_client(server.url) as client:
        deleted = await client.call_tool("apply_patch", {"patch": patch(f"*** Delete File: {here}/d/f.txt")})
        assert not deleted.is_error, text_of(deleted)
        shutil.rmtree(here / "d")
        os.symlink(decoy, here / "d")
        undone = await client.call_tool("undo", {"file_path": str(here / "d" / "f.txt")})
    assert undone.is_error and text_of(undone).startswith("Path not in workspace"), text_of(undone)
    assert snapshot(decoy) == outside


async def test_held_an_undo_of_a_patch_whose_other_file_changed_changes_nothing(server: HttpServer, here: Path) -> None:
    (here / "a.txt").write_text("a1\n")
    (here / "c.txt").write_text("c1\n")
    async with http_client(server.url) as client:
        both = patch(f"*** Update File: {here}/a.txt", "@@", "-a1", "+A1",
                     f"*** Update File: {here}/c.txt", "@@", "-c1", "+C1")  # fmt: skip
        applied = await client.call_tool("apply_patch", {"patch": both})
        assert not applied.is_error, text_of(applied)
        await client.call_tool("write_file", {"file_path": str(here / "c.txt"), "content": "again\n"})
        undone = await client.call_tool("undo", {"file_path": str(here / "a.txt")})
    assert undone.is_error, text_of(undone)
    assert (here / "a.txt").read_text() == "A1\n" and (here / "c.txt").read_text() == "again\n"


async def test_held_stop_ends_what_the_command_detached(server: HttpServer, here: Path) -> None:
    tag = f"4242.{os.getpid()}"
    command = (f"setsid -f sleep {tag}1; nohup sleep {tag}2 >/dev/null 2>&1 & disown; "
               f"(trap '' TERM HUP; exec sleep {tag}3) & sleep 100")  # fmt: skip

    def running() -> int:
        count = 0
        for entry in os.listdir("/proc"):
            try:
                count += entry.isdigit() and tag.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                pass
        return count

    async with http_client(server.url) as client:
        started = await client.call_tool("run_shell_command", {"command": command, "is_background": True,
                                                               "directory": str(here), "delay_ms": 300})  # fmt: skip
        with anyio.fail_after(10):
            while running() < 3:
                await anyio.sleep(0.05)
        stopped = await client.call_tool("stop_background_process", {"pid": started.structured_content["pid"]})
        assert not stopped.is_error, text_of(stopped)
    with anyio.fail_after(10):
        while running():
            await anyio.sleep(0.05)


@pytest.fixture(scope="module")
def terminal_server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("redteam_s3_tty")
    with HttpServer.start([root], *FLAGS, "--background-tty") as running:
        yield running


async def test_a_terminal_job_survives_what_its_program_writes(terminal_server: HttpServer) -> None:
    """A program's output is untrusted input to the emulator. Here `ESC [` and 5,000 digits: the job vanished
    (list_background_processes finds none) and the call's answer says nothing went wrong."""
    command = r"printf '\033['; head -c 5000 /dev/zero | tr '\0' 1; printf 'm\nafter\n'; sleep 2"
    async with http_client(terminal_server.url) as client:
        started = await client.call_tool("run_shell_command", {"command": command, "is_background": True,
                                                               "delay_ms": 100})  # fmt: skip
        text = text_of(started)
        if not started.is_error:
            assert "pid" in (started.structured_content or {}), text
            read = await client.call_tool("read_background_output", {"pid": started.structured_content["pid"],
                                                                     "delay_ms": 3000})  # fmt: skip
            text = text_of(read)
            assert "after" in text, text
    assert not any("Traceback" in line for line in terminal_server.stderr), "".join(terminal_server.stderr)[-2000:]


async def test_typed_input_the_terminal_drops_is_not_reported_sent(terminal_server: HttpServer) -> None:
    """`read` a line of 5,000 typed characters in a terminal and print its length."""
    async with http_client(terminal_server.url) as client:
        started = await client.call_tool("run_shell_command", {"command": "read x; echo GOT ${#x}; sleep 1",
                                                               "is_background": True, "delay_ms": 300})  # fmt: skip
        pid = started.structured_content["pid"]
        written = await client.call_tool("write_background_input", {"pid": pid, "input": "y" * 5000 + "\n"})
        wrote = text_of(written)
        if written.is_error:  # refused, nothing typed: the program still waits for its line
            assert "Nothing was sent" in wrote, wrote
            await client.call_tool("stop_background_process", {"pid": pid})
            return
        seen = [wrote]
        with anyio.fail_after(20):
            while True:
                read = await client.call_tool("read_background_output", {"pid": pid, "delay_ms": 1000})
                seen.append(text_of(read))
                if read.structured_content["status"] != "running":
                    break
    assert "Sent 5,001 bytes" not in wrote or "GOT 5000" in "\n".join(seen), (wrote[:200], seen[1:])
