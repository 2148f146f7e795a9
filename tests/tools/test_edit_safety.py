"""Edits never write outside the roots (symlinks, planted links, swapped directories, a racing thread), never
lose an update (concurrent replace calls on one file), run in parallel on different files, and survive
`kill -9` of a real server process: the file is always the old content or the new, never a mix."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from coretools.sandbox import locks as locks_mod
from coretools.server.toolset import ToolSet
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.writes import Writes
from coretools.tools.textedit import edit_tool
from coretools.tools.base import Elicitation, ToolContext
from tests.conftest import REPO, call_tool, make_config, snapshot, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def decoy(root: Path) -> Path:
    return root.parent / "root-evil"


def write_args(path, content: str) -> dict:
    return {"file_path": str(path), "content": content}


def replace_args(path, old: str, new: str) -> dict:
    return {"file_path": str(path), "old_string": old, "new_string": new}


# -- symlinks -------------------------------------------------------------------------------------------------


async def test_symlink_inside_root_is_followed_and_kept(root: Path) -> None:
    (root / "real.txt").write_text("one\n")
    (root / "link.txt").symlink_to("real.txt")
    res = await call_tool(root, "write_file", write_args(root / "link.txt", "two\n"))
    assert not res.is_error, text_of(res)
    res = await call_tool(root, "replace", replace_args(root / "link.txt", "two", "three"))
    assert not res.is_error, text_of(res)
    assert (root / "link.txt").is_symlink() and os.readlink(root / "link.txt") == "real.txt"
    assert (root / "real.txt").read_text() == "three\n"


async def test_absolute_symlink_back_inside_root_works(root: Path) -> None:
    (root / "real.txt").write_text("one\n")
    (root / "abs.txt").symlink_to(root / "real.txt")
    res = await call_tool(root, "replace", replace_args("abs.txt", "one", "two"))
    assert not res.is_error, text_of(res)
    assert (root / "real.txt").read_text() == "two\n" and (root / "abs.txt").is_symlink()


@pytest.mark.parametrize("tool", ["write_file", "replace"])
async def test_symlink_to_outside_file_is_refused(root: Path, decoy: Path, tool: str) -> None:
    before = snapshot(decoy)
    (root / "out.txt").symlink_to("../root-evil/secret.txt")
    (root / "abs-out.txt").symlink_to(decoy / "secret.txt")
    for name in ("out.txt", "abs-out.txt"):
        args = write_args(root / name, "PWNED\n") if tool == "write_file" else replace_args(name, "DECOY", "PWNED")
        res = await call_tool(root, tool, args)
        assert res.is_error and "Path not in workspace" in text_of(res), text_of(res)
    assert snapshot(decoy) == before
    assert (root / "out.txt").is_symlink()


async def test_dangling_symlinks_are_refused(root: Path, decoy: Path) -> None:
    before = snapshot(decoy)
    (root / "dangling-in").symlink_to("missing.txt")
    (root / "dangling-out").symlink_to("../root-evil/created.txt")
    (root / "dangling-abs").symlink_to(decoy / "created2.txt")
    res = await call_tool(root, "write_file", write_args(root / "dangling-in", "x"))
    assert res.is_error and "dangling" in text_of(res) and "Nothing was written" in text_of(res)
    assert not (root / "missing.txt").exists()
    for name in ("dangling-out", "dangling-abs"):
        res = await call_tool(root, "write_file", write_args(root / name, "PWNED"))
        assert res.is_error, text_of(res)
        res = await call_tool(root, "replace", replace_args(root / name, "", "PWNED"))
        assert res.is_error, text_of(res)
    assert snapshot(decoy) == before
    assert all((root / n).is_symlink() for n in ("dangling-in", "dangling-out", "dangling-abs"))


async def test_symlinked_directory_to_outside_is_refused(root: Path, decoy: Path) -> None:
    before = snapshot(decoy)
    (root / "evil").symlink_to("../root-evil")
    res = await call_tool(root, "write_file", write_args(root / "evil" / "new.txt", "PWNED"))
    assert res.is_error and "Path not in workspace" in text_of(res)
    res = await call_tool(root, "write_file", write_args("evil/deeper/new.txt", "PWNED"))
    assert res.is_error
    res = await call_tool(root, "replace", replace_args("evil/secret.txt", "DECOY", "PWNED"))
    assert res.is_error
    assert snapshot(decoy) == before


def _plant(monkeypatch, action) -> list:
    """Run `action(parent_fd, name)` inside write_atomic after every check, right before the temp file is
    written and renamed: the deterministic form of an attacker racing the write."""
    calls: list = []
    original = Writes._replace

    def hooked(self, parent_fd, name, *args, **kwargs):
        calls.append(name)
        action(parent_fd, name)
        return original(self, parent_fd, name, *args, **kwargs)

    monkeypatch.setattr(Writes, "_replace", hooked)
    return calls


async def test_symlink_planted_before_rename_of_new_file(root: Path, decoy: Path, monkeypatch) -> None:
    before = snapshot(decoy)

    def plant(parent_fd: int, name: str) -> None:
        os.symlink(str(decoy / "secret.txt"), name, dir_fd=parent_fd)

    calls = _plant(monkeypatch, plant)
    res = await call_tool(root, "write_file", write_args(root / "fresh.txt", "NEW\n"))
    assert calls == ["fresh.txt"]
    assert snapshot(decoy) == before
    # the link itself was replaced (rename never follows it), or the write was refused: never written through
    if not res.is_error:
        assert not (root / "fresh.txt").is_symlink() and (root / "fresh.txt").read_text() == "NEW\n"


@pytest.mark.parametrize("tool", ["write_file", "replace"])
async def test_symlink_swapped_in_for_existing_file_before_rename(root: Path, decoy: Path, monkeypatch,
                                                                  tool: str) -> None:
    before = snapshot(decoy)
    (root / "t.txt").write_text("original\n")

    def swap(parent_fd: int, name: str) -> None:
        os.unlink(name, dir_fd=parent_fd)
        os.symlink("../root-evil/secret.txt", name, dir_fd=parent_fd)

    _plant(monkeypatch, swap)
    args = write_args(root / "t.txt", "changed\n") if tool == "write_file" else replace_args("t.txt", "original",
                                                                                             "changed")
    res = await call_tool(root, tool, args)
    assert res.is_error and "changed on disk" in text_of(res) and "Nothing was written" in text_of(res)
    assert snapshot(decoy) == before
    assert (root / "t.txt").is_symlink()  # the planted link is left as found, for the user to see


async def test_parent_directory_swapped_for_outside_link_before_rename(root: Path, decoy: Path, monkeypatch) -> None:
    before = snapshot(decoy)
    (root / "sub").mkdir()

    def swap(parent_fd: int, name: str) -> None:
        os.rename(root / "sub", root / "sub-moved")
        os.symlink("../root-evil", root / "sub")

    _plant(monkeypatch, swap)
    res = await call_tool(root, "write_file", write_args(root / "sub" / "f.txt", "data\n"))
    assert not res.is_error, text_of(res)
    assert snapshot(decoy) == before
    assert (root / "sub-moved" / "f.txt").read_text() == "data\n"  # written where the checked directory went


def test_racing_thread_flipping_a_link_never_writes_outside(root: Path, decoy: Path) -> None:
    before = snapshot(decoy)
    target = root / "flip.txt"
    stop = threading.Event()

    def flipper() -> None:
        while not stop.is_set():
            try:
                target.unlink()
            except FileNotFoundError:
                pass
            try:
                target.symlink_to(decoy / "secret.txt")
                target.unlink()
                target.write_text("regular\n")
            except OSError:
                pass

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    outcomes = {"ok": 0, "error": 0}
    try:
        for i in range(60):
            tool, args = (("write_file", write_args(target, f"round {i}\n")) if i % 2 else
                          ("replace", replace_args(target, "regular", f"round {i}")))
            res = anyio.run(call_tool, root, tool, args)
            outcomes["error" if res.is_error else "ok"] += 1
    finally:
        stop.set()
        thread.join()
    assert snapshot(decoy) == before
    assert sum(outcomes.values()) == 60


# -- an external writer, and a file created meanwhile ------------------------------------------------------------


def _before_apply(monkeypatch, action) -> None:
    """Run `action()` in the worker thread after the edit was planned (file read, diff made) and before it is
    written: where another program's save, or a slow disk, would fall."""
    real_apply = edit_tool.apply

    def apply(ws, plan):
        action()
        return real_apply(ws, plan)

    monkeypatch.setattr(edit_tool, "apply", apply)


async def test_external_change_between_read_and_write_is_not_overwritten(root: Path, monkeypatch) -> None:
    f = root / "ext.txt"
    f.write_text("mine\n")
    _before_apply(monkeypatch, lambda: f.write_text("someone else's save\n"))
    res = await call_tool(root, "replace", replace_args(f, "mine", "ours"))
    assert res.is_error and "changed on disk" in text_of(res) and "Read the file again" in text_of(res)
    assert f.read_text() == "someone else's save\n"


async def test_create_never_replaces_a_file_that_appeared(root: Path, monkeypatch) -> None:
    f = root / "race.txt"
    _before_apply(monkeypatch, lambda: f.write_text("appeared\n"))
    res = await call_tool(root, "replace", replace_args(f, "", "mine\n"))
    assert res.is_error and "already exists" in text_of(res)
    assert f.read_text() == "appeared\n"
    assert [p.name for p in root.iterdir()] == ["race.txt"]  # no temp file left behind


# -- concurrency ----------------------------------------------------------------------------------------------


def _contexts(root: Path, n: int, *extra: str, elicit=None):
    config = make_config([root], *extra)
    toolset = ToolSet(config)
    spaces = [Workspace(config.roots) for _ in range(n)]  # one per session, as in HTTP mode
    return toolset, [ToolContext(workspace=ws, elicit=elicit) for ws in spaces], spaces


async def _accept(message: str, schema: dict) -> Elicitation:
    return Elicitation("accept")


def _slow_apply(monkeypatch, delay: float = 0.3) -> None:
    # widen the read-modify-write window so that unserialised calls would overlap
    _before_apply(monkeypatch, lambda: time.sleep(delay))


async def _race(root: Path, f: Path, n: int):
    toolset, ctxs, spaces = _contexts(root, n)
    results = [None] * n
    try:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                async def one(i=i):
                    results[i] = await toolset.call("replace", replace_args(f, f"k{i}=0", f"k{i}=1"), ctxs[i])
                tg.start_soon(one)
    finally:
        for ws in spaces:
            ws.close()
    return results


async def test_concurrent_replaces_on_one_file_all_land(root: Path, monkeypatch) -> None:
    f = root / "shared.txt"
    f.write_text("".join(f"k{i}=0\n" for i in range(6)))
    _slow_apply(monkeypatch, 0.1)
    results = await _race(root, f, 6)
    assert [r.is_error for r in results] == [False] * 6, [text_of(r) for r in results]
    assert f.read_text() == "".join(f"k{i}=1\n" for i in range(6))
    assert locks_mod.keys_in_use() == []


async def test_without_the_lock_the_race_is_caught_not_lost(root: Path, monkeypatch) -> None:
    """Proof that the test above can fail: with the lock disabled, the second writer's read is stale. The
    expect-unchanged guard then refuses it instead of silently losing the first update."""

    class NoLock:
        key = ""  # the journal then finds the file's canonical path itself

        def release(self) -> None:
            pass

    monkeypatch.setattr(Workspace, "lock_edit", lambda self, loc, cancelled=None: NoLock())
    f = root / "shared.txt"
    f.write_text("k0=0\nk1=0\n")
    # Both calls have read the file before either writes (a barrier, not a sleep: a sleep only made the
    # overlap likely, and on a loaded machine the calls sometimes ran one after the other).
    both_planned = threading.Barrier(2, timeout=10)
    _before_apply(monkeypatch, both_planned.wait)
    results = await _race(root, f, 2)
    errors = [text_of(r) for r in results if r.is_error]
    assert len(errors) == 1 and "changed on disk" in errors[0]
    assert f.read_text() in ("k0=1\nk1=0\n", "k0=0\nk1=1\n")


@pytest.mark.parametrize("confirm", [(), ("--confirm", "edits")])
async def test_every_way_out_of_an_edit_lets_go_of_the_lock(root: Path, confirm: tuple[str, ...]) -> None:
    """Nothing to write, a refusal, a failed write and a written edit each leave no lock behind: the next
    edit of the same file goes ahead."""
    f = root / "same.txt"
    f.write_text("v=0\n")
    toolset, (ctx,), spaces = _contexts(root, 1, *confirm, elicit=_accept)
    try:
        with anyio.fail_after(20):
            calls = [
                ("write_file", write_args(f, "v=0\n")),  # already this content
                ("replace", replace_args(f, "nowhere", "x")),  # refused
                ("write_file", write_args(root / "missing-dir-is-a-file" / "x.txt", "x")),  # fails to write
                ("replace", replace_args(f, "v=0", "v=1")),
                ("replace", replace_args(f, "v=1", "v=2")),
            ]
            (root / "missing-dir-is-a-file").write_text("")
            results = [await toolset.call(name, args, ctx) for name, args in calls]
    finally:
        for ws in spaces:
            ws.close()
    assert [r.is_error for r in results] == [False, True, True, False, False], [text_of(r) for r in results]
    assert f.read_text() == "v=2\n"
    assert locks_mod.keys_in_use() == []


async def test_a_call_cancelled_before_it_writes_changes_nothing(root: Path, monkeypatch) -> None:
    """Cancelled while waiting for the file's lock, or while its edit is being planned (the whole edit runs
    in one worker thread): nothing is written and no lock is left behind."""
    from coretools.tools.replace import Replace

    f = root / "c.txt"
    f.write_text("v=0\n")
    toolset, (ctx,), spaces = _contexts(root, 1)
    try:
        held = spaces[0].lock_edit(spaces[0].locate(str(f)))
        try:
            with anyio.move_on_after(0.3) as scope:
                await toolset.call("replace", replace_args(f, "v=0", "v=1"), ctx)
            assert scope.cancelled_caught
        finally:
            held.release()
        real_plan = Replace.plan

        def slow_plan(self, *args):
            time.sleep(0.6)  # the call is cancelled meanwhile
            return real_plan(self, *args)

        monkeypatch.setattr(Replace, "plan", slow_plan)
        with anyio.move_on_after(0.2) as scope:
            await toolset.call("replace", replace_args(f, "v=0", "v=2"), ctx)
        assert scope.cancelled_caught
    finally:
        for ws in spaces:
            ws.close()
    assert f.read_text() == "v=0\n"
    assert locks_mod.keys_in_use() == []


async def test_same_file_waits_different_file_proceeds(root: Path) -> None:
    """File A's edit holds its lock while the user is asked; an edit of B completes meanwhile, and a second
    edit of A only reads the file after the first one wrote it."""
    a, b = root / "a.txt", root / "b.txt"
    a.write_text("a=0\nx=0\n")
    b.write_text("b=0\n")
    asked = anyio.Event()
    release = anyio.Event()
    seen_by_second: list[tuple[str, str]] = []

    async def slow_user(message: str, schema: dict) -> Elicitation:
        asked.set()
        await release.wait()
        return Elicitation("accept")

    async def quick_user(message: str, schema: dict) -> Elicitation:
        seen_by_second.append(("a" if str(a) in message else "b", a.read_text()))
        return Elicitation("accept")

    toolset, (ctx_a1,), spaces = _contexts(root, 1, "--confirm", "edits", elicit=slow_user)
    _, (ctx_b, ctx_a2), spaces2 = _contexts(root, 2, "--confirm", "edits", elicit=quick_user)
    results: dict[str, object] = {}
    try:
        async with anyio.create_task_group() as tg:
            async def first() -> None:
                results["a1"] = await toolset.call("replace", replace_args(a, "a=0", "a=1"), ctx_a1)

            async def second() -> None:
                results["a2"] = await toolset.call("replace", replace_args(a, "x=0", "x=1"), ctx_a2)

            tg.start_soon(first)
            with anyio.fail_after(10):
                await asked.wait()
            tg.start_soon(second)
            with anyio.fail_after(10):  # a different file is not blocked by A's pending confirmation
                results["b"] = await toolset.call("replace", replace_args(b, "b=0", "b=1"), ctx_b)
            assert b.read_text() == "b=1\n" and a.read_text() == "a=0\nx=0\n"
            await anyio.sleep(0.2)  # give an unserialised second edit of A every chance to go ahead
            release.set()
    finally:
        for ws in spaces + spaces2:
            ws.close()
    assert not any(r.is_error for r in results.values()), [text_of(r) for r in results.values()]
    assert a.read_text() == "a=1\nx=1\n"
    # B was asked while A's first edit was pending; A's second edit was only prepared after the first landed
    assert seen_by_second == [("b", "a=0\nx=0\n"), ("a", "a=1\nx=0\n")]


async def test_cancelled_waiter_does_not_leak_the_lock(root: Path) -> None:
    f = root / "c.txt"
    f.write_text("v=0\n")
    release = anyio.Event()
    asked = anyio.Event()

    async def slow_user(message: str, schema: dict) -> Elicitation:
        asked.set()
        await release.wait()
        return Elicitation("decline")

    toolset, (holder, waiter, later), spaces = _contexts(root, 3, "--confirm", "edits", elicit=slow_user)
    try:
        async with anyio.create_task_group() as tg:
            async def hold() -> None:
                await toolset.call("replace", replace_args(f, "v=0", "v=1"), holder)

            tg.start_soon(hold)
            await asked.wait()
            with anyio.move_on_after(0.3) as scope:
                await toolset.call("replace", replace_args(f, "v=0", "v=2"), waiter)
            assert scope.cancelled_caught
            release.set()
        later.elicit = _accept  # the user says yes this time: the edit needs the lock the waiter gave up
        res = await toolset.call("replace", replace_args(f, "v=0", "v=3"), later)
        assert not res.is_error, text_of(res)
    finally:
        for ws in spaces:
            ws.close()
    assert f.read_text() == "v=3\n"
    assert locks_mod.keys_in_use() == []


# -- kill -9 during large writes --------------------------------------------------------------------------------

HOOK_PATCHES = r'''
import os, sys, time
PHASE = os.environ.get("CRASH_PHASE", "")
MARK = os.environ.get("CRASH_MARK", "")

def _is_temp(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(".coretools.tmp")
    except OSError:
        return False

def _park():
    open(MARK, "w").close()
    time.sleep(120)

_write, _rename = os.write, os.rename

def write(fd, data):
    if _is_temp(fd):
        view = memoryview(data)
        n = _write(fd, view[: max(1, len(view) // 3)])
        if PHASE == "mid-write":
            _park()
        return n
    return _write(fd, data)

def rename(*args, **kwargs):
    if PHASE == "before-rename":
        _park()
    _rename(*args, **kwargs)
    if PHASE == "after-rename":
        _park()

os.write, os.rename = write, rename
'''
HOOK = HOOK_PATCHES + """
from coretools.cli import main
sys.exit(main())
"""
# Runs `coretools call --root ROOT TOOL -` in a process of its own for each line "MARK ARGUMENTS_FILE" it reads,
# forked from this one, which has imported the CLI and every tool module already; answers with the process's pid,
# creates MARK when the tool call starts and MARK.write when it first writes to a temporary file, and after a
# line "reap" answers with the process's exit code. The processes write through the patched os.write and
# os.rename above.
ZYGOTE = HOOK_PATCHES + """
import traceback
from coretools import cli
from coretools.server.toolset import ToolSet

cli.build_parser(with_client=False)  # imports every tool module, as each `call` does
_tool_run, _writing = ToolSet.run, False

async def _marked_run(self, *args, **kwargs):
    open(MARK, "w").close()
    return await _tool_run(self, *args, **kwargs)

def _marked_write(fd, data):
    global _writing
    if not _writing and _is_temp(fd):
        _writing = True
        open(MARK + ".write", "w").close()
    return write(fd, data)

ToolSet.run, os.write = _marked_run, _marked_write
root, tool = sys.argv[1], sys.argv[2]
while line := sys.stdin.readline():
    MARK, arguments = line.split()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        sys.stdin = open(arguments)
        code = 1
        try:
            code = cli.main(["call", "--root", root, tool, "-"])
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    print(pid, flush=True)
    assert sys.stdin.readline() == "reap\\n"
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


def _spawn(root: Path, tool: str, args: dict, tmp: Path, phase: str = "") -> tuple[subprocess.Popen, Path]:
    payload = tmp / "args.json"
    payload.write_text(json.dumps(args))
    mark = tmp / f"mark-{random.random()}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CRASH_PHASE": phase, "CRASH_MARK": str(mark)}
    stdin = payload.open("rb")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOOK, "call", "--root", str(root), tool, "-"],
        stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=str(REPO),
    )
    stdin.close()
    return proc, mark


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()


def _versions(n_lines: int) -> tuple[str, str]:
    old = "".join(f"old line {i:08d} {'x' * 40}\n" for i in range(n_lines))
    new = "".join(f"NEW LINE {i:08d} {'y' * 40}\n" for i in range(n_lines))
    return old, new


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hook reads /proc/self/fd")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("phase,expected", [("mid-write", "old"), ("before-rename", "old"), ("after-rename", "new")])
@pytest.mark.parametrize("tool", ["write_file", "replace"])
def test_kill_at_each_phase_leaves_old_or_new(root: Path, tmp_path: Path, phase: str, expected: str,
                                              tool: str) -> None:
    old, new = _versions(150_000)  # ~9 MB
    f = root / "big.txt"
    f.write_text(old)
    args = write_args(f, new) if tool == "write_file" else replace_args(f, old, new)
    proc, mark = _spawn(root, tool, args, tmp_path, phase)
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the server never reached the write"
        time.sleep(0.01)
    _kill(proc)
    assert f.read_text() == (old if expected == "old" else new)
    temps = [p for p in root.iterdir() if p.name.endswith(".coretools.tmp")]
    if phase == "mid-write":
        assert len(temps) == 1 and 0 < temps[0].stat().st_size < len(new)  # really killed half-way through


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hook reads /proc/self/fd")
@pytest.mark.timeout(300)
def test_kill_at_random_moments_leaves_old_or_new(root: Path, tmp_path: Path) -> None:
    """SIGKILL at random moments of real write_file calls, each `coretools call` in a process of its own. The
    processes are forked from one that has imported the CLI, and every kill lands in the tool call, none in the
    interpreter's start-up: half at a random moment of the whole call, counted from its start, half at a
    random moment from its first write of the new content to the process's exit (the write, fsync, rename and
    journal commit take about a tenth of the call; validation and reading and journaling the old content the
    rest)."""
    a, b = _versions(200_000)  # ~12 MB each way
    f = root / "big.txt"
    f.write_text(a)
    payloads = {}
    for name, content in (("a", a), ("b", b)):
        payloads[content] = tmp_path / f"to-{name}.json"
        payloads[content].write_text(json.dumps(write_args(f, content)))
    errors = tmp_path / "zygote.err"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CRASH_PHASE": "", "CRASH_MARK": ""}
    with errors.open("w") as err:
        zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE, str(root), "write_file"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=err, env=env, cwd=str(REPO), text=True)

    def started(content: str, phase: str) -> int:
        """The pid of a process writing `content` to `f`, once its tool call has started ("call") or once it
        has started writing ("write")."""
        mark = tmp_path / f"mark-{random.random()}"
        zygote.stdin.write(f"{mark} {payloads[content]}\n")
        zygote.stdin.flush()
        pid = int(zygote.stdout.readline() or 0)
        assert pid, errors.read_text()
        if phase == "write":
            mark = mark.with_name(mark.name + ".write")
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert time.monotonic() < deadline, f"the tool call never reached its {phase}: " + errors.read_text()
            time.sleep(0.001)
        return pid

    def reaped() -> int:
        zygote.stdin.write("reap\n")
        zygote.stdin.flush()
        return int(zygote.stdout.readline())

    try:
        duration = {}  # from the mark of each phase to the process's exit
        for phase, content in (("call", b), ("write", a)):
            started(content, phase)
            began = time.monotonic()
            assert reaped() == 0, errors.read_text()
            duration[phase] = time.monotonic() - began
            assert f.read_text() == content
        rng = random.Random(1234)
        seen = {"a": 0, "b": 0}
        ends = {0: 0, -signal.SIGKILL: 0}
        for i in range(12):
            current = f.read_text()
            phase = ("call", "write")[i % 2]
            pid = started(a if current == b else b, phase)
            time.sleep(rng.uniform(0.0, 1.0) * duration[phase])
            os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still this process's, even if it ended
            end = reaped()
            assert end in ends, errors.read_text()
            ends[end] += 1
            content = f.read_text()
            assert content in (a, b), f"partial file after kill #{i}"
            seen["a" if content == a else "b"] += 1
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)
        zygote.stdout.close()
    assert sum(seen.values()) == 12
    assert ends[-signal.SIGKILL] > 0  # the kills did land in the calls
