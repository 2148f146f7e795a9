"""The processes coretools started: a registry of every run that may still have members, and the ways to
find and kill them.

A run's members are found from the kernel's process tree, never from anything the command controls. Each
run has a root process (the leader `Popen` started: bash, bwrap, or the per-run reaper of `reaper.py`),
and its members are the root and every process descending from it, plus whatever is still in the root's
process group. Leaving the group (`setsid`, a double fork, `nohup`, `disown`) or wiping the environment
does not leave the tree, because orphans do not go to init:

* the per-run reaper (shell commands outside bubblewrap) is a child subreaper, so every orphan of the run
  is re-parented to it and stays its descendant for as long as it lives;
* bubblewrap runs the command in a PID namespace, which the kernel empties when bwrap ends;
* the server itself is a child subreaper (`become_subreaper`), so an orphan whose reaper was killed comes
  to the server instead of init, and `kill_everything` finds it among the server's own descendants.

Each owner (a session's `Runner`) kills its runs when it closes; an atexit hook and SIGTERM/SIGHUP
handlers kill everything that is left. A server killed with SIGKILL cannot run either: the reaper and
bwrap are told by the kernel (`PR_SET_PDEATHSIG`) and take their trees with them.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Group:
    """One started run: its process group (the leader's pid, which is also the root of its tree) and the
    owner that kills it on close."""

    pgid: int
    owner: int

    @property
    def root(self) -> int:
        return self.pgid


_registry: dict[int, Group] = {}
_registry_lock = threading.Lock()
_atexit_installed = False
_handlers_installed = False
_subreaper = False
_known_children: set[int] = set()  # pids the server started itself (Popen reaps them; we must not)


def register(group: Group) -> None:
    with _registry_lock:
        _registry[group.pgid] = group
        _known_children.add(group.pgid)
    _install_safety_net()


def unregister(pgid: int) -> None:
    with _registry_lock:
        _registry.pop(pgid, None)
        _known_children.discard(pgid)


def registered(owner: int | None = None) -> list[Group]:
    """The registered groups (of `owner`, if given)."""
    with _registry_lock:
        return [g for g in _registry.values() if owner is None or g.owner == owner]


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux ≥ 3.4): orphans of the runs it started are re-parented to
    it instead of init, so they stay in its tree. Called once by the server at start; True if it holds."""
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return _subreaper
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def reap_orphans() -> None:
    """Kill and collect the orphans re-parented to this process (a subreaper). In a process that is the
    server (`become_subreaper`), every child it did not start is a command's process whose reaper was
    killed or failed: it belongs to no run any more, so it ends at once, with what it started. The server's
    own children are left to their `Popen`."""
    if not _subreaper:
        return
    table = None
    for pid in _children(os.getpid()):
        with _registry_lock:
            if pid in _known_children:
                continue
        table = table or _process_table()
        for member in (*_descendants(pid, table), pid):
            _kill(member, signal.SIGKILL)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def kill_everything() -> None:
    """SIGKILL every run any runner in this process started, and every other descendant of the server (an
    orphan whose own reaper was killed). Safe at exit."""
    for group in registered():
        kill_group(group, signal.SIGKILL)
        unregister(group.pgid)
    if _subreaper:
        for pid in _descendants(os.getpid(), _process_table()):
            _kill(pid, signal.SIGKILL)
        reap_orphans()


def _install_safety_net() -> None:
    """The atexit hook at the first registration; the signal handlers at the first one made on the main
    thread (a run from a worker thread, such as ripgrep's, cannot install them)."""
    global _atexit_installed, _handlers_installed
    if not _atexit_installed:
        _atexit_installed = True
        atexit.register(kill_everything)
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                signal.signal(signum, _on_fatal_signal)
        except (ValueError, OSError):  # not the main thread after all, or an exotic platform
            pass


def _on_fatal_signal(signum: int, frame: object) -> None:
    kill_everything()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


# -- the kernel's process tree ---------------------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, int]] | None:
    """pid -> (parent pid, process group) of every live (non-zombie) process, from /proc; None without it."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, tuple[int, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3 or (fields[0] in (b"Z", b"X") and not _has_live_threads(name)):
            continue
        table[int(name)] = (int(fields[1]), int(fields[2]))
    return table


def _has_live_threads(pid: str) -> bool:
    """A process whose main thread exited shows as a zombie while its other threads run on: it is alive."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def _descendants(root: int, table: dict[int, tuple[int, int]] | None) -> list[int]:
    """Every live process below `root` in the tree (not `root` itself)."""
    if table is None:
        return []
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _children(pid: int) -> list[int]:
    """The direct children of `pid`, zombies included (the kernel's list per thread)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                found.extend(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            continue
    return found


def scan(group: Group) -> list[int]:
    """The live members of a run: its root (if alive), every descendant of the root, and anything still in
    its process group."""
    table = _process_table()
    if table is None:
        return _scan_ps(group.pgid)
    me = os.getpid()
    found = {pid for pid, (_, pgid) in table.items() if pgid == group.pgid and pid != me}
    if group.root in table:
        found.add(group.root)
    found.update(_descendants(group.root, table))
    return sorted(found)


def _scan_ps(pgid: int) -> list[int]:
    try:
        out = subprocess.run(
            ["ps", "-A", "-o", "pid=,pgid=,stat="], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    pids = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == str(pgid) and not parts[2].startswith("Z"):
            pids.append(int(parts[0]))
    return sorted(pids)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def signal_group(pgid: int, signum: int) -> None:
    """Signal the process group `pgid` itself (its members that left it are not looked for)."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:  # the pgid was recycled by someone else's group: never touch it
        pass


def kill_group(group: Group, signum: int) -> list[int]:
    """Signal every member of the run (see `scan`), the tree's leaves first so that a reaper outlives what
    it reaps; return the pids that were still alive."""
    alive = scan(group)
    for pid in sorted(alive, key=lambda p: p == group.root):
        _kill(pid, signum)
    signal_group(group.pgid, signum)
    if signum == signal.SIGKILL:
        reap_orphans()
    return alive


def is_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie (tests and reports use this)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
