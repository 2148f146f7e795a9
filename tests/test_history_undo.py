"""`coretools-mcp history` and `undo` as real subprocesses, run from another directory with absolute paths;
two processes journaling into one workspace at once; and SIGKILL in the middle of an edit and of an undo.

The processes are forked (`server_fork`), each still a process of its own with its own arguments, working
directory and environment, but for the ones SIGKILLed mid-write: those are started by the interpreter, so
the kill lands on the writing process itself at the moment chosen."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import server_fork
from tests.conftest import REPO

COMMAND = [sys.executable, "-m", "coretools"]


def forked(argv: list[str], env: dict) -> list[str]:
    """`argv` (this interpreter and its arguments) forked from a process that imported coretools already."""
    return server_fork.command(argv[1:], env)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of every process of one test: a state directory of its own."""
    return {**os.environ, "CORETOOLS_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO)}


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory outside the workspace."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    return where


def run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(forked([*COMMAND, *args], env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120, check=False)  # fmt: skip


def call(env: dict, root: Path, tool: str, arguments: dict, *extra: str) -> subprocess.CompletedProcess:
    proc = run(env, root, "call", tool, json.dumps(arguments), "--root", str(root), *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def entries(env: dict, cwd: Path, *args: str) -> list[dict]:
    proc = run(env, cwd, "history", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_history_and_undo_from_another_directory(root: Path, env: dict, elsewhere: Path) -> None:
    f = root / "notes.txt"
    call(env, root, "write_file", {"file_path": str(f), "content": "alpha\nbeta\n"})
    call(env, root, "replace", {"file_path": str(f), "old_string": "beta", "new_string": "gamma"})
    listing = run(env, elsewhere, "history", str(f))
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert len(lines) == 2 and "write_file" in lines[0] and "new" in lines[0] and "replace" in lines[1]
    assert all(str(f) in line for line in lines)

    undone = run(env, elsewhere, "undo", str(f))
    assert undone.returncode == 0, undone.stderr
    assert "Undid edit 2" in undone.stdout and f.read_text() == "alpha\nbeta\n"
    assert [e["tool"] for e in entries(env, elsewhere, str(f))] == ["write_file", "replace", "undo"]

    again = run(env, elsewhere, "undo", str(f))  # the undo is journaled: undoing it redoes the edit
    assert again.returncode == 0 and f.read_text() == "alpha\ngamma\n"

    first = run(env, elsewhere, "undo", str(f), "--to", "1", "--root", str(root))
    assert first.returncode == 0, first.stderr
    assert not f.exists()  # before edit 1 the file did not exist


def test_undo_is_refused_when_the_file_changed_since(root: Path, env: dict, elsewhere: Path) -> None:
    f = root / "a.py"
    f.write_text("x = 1\n")
    call(env, root, "replace", {"file_path": str(f), "old_string": "1", "new_string": "2"})
    f.write_text("x = 3  # typed by the user\n")
    refused = run(env, elsewhere, "undo", str(f))
    assert refused.returncode == 1 and "changed since" in refused.stderr
    assert f.read_text() == "x = 3  # typed by the user\n"
    forced = run(env, elsewhere, "undo", "--force", str(f))
    assert forced.returncode == 0 and f.read_text() == "x = 1\n"


def test_no_journal_writes_nothing(root: Path, env: dict, tmp_path: Path) -> None:
    call(env, root, "write_file", {"file_path": str(root / "a"), "content": "1"}, "--no-journal")
    assert (root / "a").read_text() == "1" and not (tmp_path / "state" / "journal").exists()
    proc = run(env, root, "undo", str(root / "a"), "--no-journal")
    assert proc.returncode == 2 and "journal is off" in proc.stderr


def test_nothing_to_undo(root: Path, env: dict, elsewhere: Path) -> None:
    (root / "a").write_text("untouched")
    proc = run(env, elsewhere, "undo", str(root / "a"), "--root", str(root))
    assert proc.returncode == 1 and "nothing to undo" in proc.stderr
    assert run(env, elsewhere, "history", "--root", str(root)).stdout.startswith("No journaled edits")


# -- several processes, and processes killed mid-write ----------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys
    from coretools.sandbox.gateway import Workspace
    from coretools.tools.textedit.edit_tool import apply
    from coretools.tools.textedit.plan import Plan

    root, name, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ws = Workspace([root])
    loc = ws.locate(name)
    for n in range(count):
        data = bytes([65 + n % 3]) * size if size else f"{sys.argv[5]} {n}\\n".encode()
        plan = Plan(loc, loc.shown, "", "", data, False)
        plan.tool = "write_file"
        apply(ws, plan)
        print(n, flush=True)
    """
)


def worker(
    env: dict, root: Path, name: str, count: int, size: int = 0, tag: str = "w", *, killed: bool = False
) -> subprocess.Popen:
    """A process that writes `name` `count` times through the editing tools' own `apply`; one to be `killed`
    is the interpreter itself."""
    argv = [sys.executable, "-c", WORKER, str(root), name, str(count), str(size), tag]
    return subprocess.Popen(
        argv if killed else forked(argv, env),
        env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def journal_state(env: dict) -> tuple[list[dict], Path]:
    """The journal's live entries, checked: every segment whole up to at most one torn record at the end of
    the last, ids unique and increasing, every kept copy whole."""
    from coretools.workspace import records
    from coretools.workspace import journal as jr

    [folder] = (Path(env["CORETOOLS_STATE_DIR"]) / "journal").iterdir()
    segments = sorted(folder.glob("*.seg"), key=lambda p: int(p.stem))
    for n, segment in enumerate(segments):
        with open(segment, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            ends = [stop for stop, _, _ in records.scan_records(handle.fileno(), 0, size)]
        if n < len(segments) - 1:
            assert ends and ends[-1] == size, segment  # only the last segment can end in a torn record
    book = jr.Journal(str(folder), (), jr.JournalSettings())
    live = book.entries()
    ids = [e.id for e in live]
    assert ids == sorted(set(ids))
    for e in live:
        if e.kept and not e.created:
            assert hashlib.sha256(book.before_bytes(e)).hexdigest() == e.before_sha
    return [vars(e) for e in live], folder


def test_two_processes_share_a_journal(root: Path, env: dict) -> None:
    (root / "shared").write_text("start\n")
    procs = [worker(env, root, "shared", 25, tag=tag) for tag in ("one", "two")]
    procs += [worker(env, root, f"own-{tag}", 10, tag=tag) for tag in ("one", "two")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    live, _ = journal_state(env)
    assert len(live) == 70 and [r["id"] for r in live] == list(range(1, 71))
    for path in {r["path"] for r in live}:
        chain = [r for r in live if r["path"] == path]
        # Snapshot and write happen under the journal's lock: each edit starts from what the previous wrote.
        assert all(b["before_sha"] == a["after_sha"] for a, b in itertools.pairwise(chain))
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == chain[-1]["after_sha"]


def test_two_cli_processes_edit_one_workspace_at_once(root: Path, env: dict, elsewhere: Path) -> None:
    files = [root / "a.txt", root / "b.txt"]
    procs = [
        subprocess.Popen(
            forked([*COMMAND, "call", "write_file", json.dumps({"file_path": str(f), "content": f.name}),
                    "--root", str(root)], env),  # fmt: skip
            env=env, cwd=elsewhere, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for f in files
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert sorted(e["path"] for e in entries(env, elsewhere, "--root", str(root))) == [str(f) for f in files]


SIZE = 24 * 1024 * 1024
VERSIONS = {bytes([c]) * SIZE for c in (65, 66, 67)}


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_kill_9_during_an_edit_leaves_a_usable_journal(root: Path, env: dict, elsewhere: Path, delay: float) -> None:
    big = root / "big.bin"
    big.write_bytes(b"C" * SIZE)
    proc = worker(env, root, "big.bin", 50, SIZE, killed=True)
    assert proc.stdout is not None and proc.stdout.readline()  # one edit done: the next is under way
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert big.read_bytes() in VERSIONS  # whole old or whole new, never a mix
    live, _ = journal_state(env)
    assert live
    undone = run(env, elsewhere, "undo", str(big))
    assert undone.returncode == 0, undone.stderr
    assert big.read_bytes() in VERSIONS
    journal_state(env)


def wait_for_undo_entry(env: dict, proc: subprocess.Popen) -> None:
    """Until the undo has journaled itself (it writes the file next), or has finished."""
    from coretools.workspace import records

    folder = next((Path(env["CORETOOLS_STATE_DIR"]) / "journal").iterdir())

    def recorded() -> bool:
        for segment in folder.glob("*.seg"):
            with open(segment, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                found = records.scan_records(handle.fileno(), 0, size, check_last=False)
                if any(b'"tool": "undo"' in header for _, header, _ in found):
                    return True
        return False

    deadline = time.monotonic() + 60
    while not recorded() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.1, 0.3])
def test_kill_9_during_an_undo(root: Path, env: dict, elsewhere: Path, delay: float) -> None:
    big = root / "big.bin"
    big.write_bytes(b"A" * SIZE)
    done = worker(env, root, "big.bin", 2, SIZE)  # A -> A (no change), then B
    assert done.wait(timeout=120) == 0
    assert big.read_bytes() == b"B" * SIZE
    proc = subprocess.Popen([*COMMAND, "undo", str(big)], env=env, cwd=elsewhere,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_undo_entry(env, proc)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = big.read_bytes()
    assert before in (b"A" * SIZE, b"B" * SIZE)
    journal_state(env)
    again = run(env, elsewhere, "undo", str(big))  # undoes the killed undo if it landed, else the edit
    assert again.returncode == 0, again.stderr
    assert big.read_bytes() == (b"B" * SIZE if before == b"A" * SIZE else b"A" * SIZE)
    journal_state(env)
