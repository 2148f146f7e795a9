"""The process groups coretools started: a registry of every group that may still have members, and the
ways to find and kill them.

A command that leaves `cmd &` behind keeps running after the call returns (as in Gemini CLI), so each
owner (a tool's `Runner`) kills its groups when it closes; an atexit hook and SIGTERM/SIGHUP handlers kill
everything that is left, so the server never leaves orphans behind, even when it is stopped by a signal. A
process that leaves its group (`setsid`, a double fork) is still found through the marker variable in its
environment (`MARKER_VAR`), unless it also wipes its environment (`env -i`): that and SIGKILL of the server
itself are the limits (the bubblewrap sandbox's `--die-with-parent` + PID namespace covers both).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
from dataclasses import dataclass

MARKER_VAR = "CORETOOLS_RUN_ID"


@dataclass
class Group:
    """One started process group: its id (the leader's pid), the marker in its members' environment, and
    the owner that kills it on close."""

    pgid: int
    marker: str
    owner: int


_registry: dict[int, Group] = {}
_registry_lock = threading.Lock()
_atexit_installed = False
_handlers_installed = False


def register(group: Group) -> None:
    with _registry_lock:
        _registry[group.pgid] = group
    _install_safety_net()


def unregister(pgid: int) -> None:
    with _registry_lock:
        _registry.pop(pgid, None)


def registered(owner: int | None = None) -> list[Group]:
    """The registered groups (of `owner`, if given)."""
    with _registry_lock:
        return [g for g in _registry.values() if owner is None or g.owner == owner]


def kill_everything() -> None:
    """SIGKILL every group (and marked escapee) any runner in this process started. Safe at exit."""
    for group in registered():
        kill_group(group, signal.SIGKILL)
        unregister(group.pgid)


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


# -- finding and killing processes -----------------------------------------------------------------------

def scan(pgid: int, marker: str | None) -> list[int]:
    """Live (non-zombie) processes in group `pgid`, or carrying `marker` in their environment."""
    me = os.getpid()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return _scan_ps(pgid)
    needle = f"{MARKER_VAR}={marker}".encode() if marker else None
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3 or fields[0] == b"Z" or fields[0] == b"X":
            continue
        if int(fields[2]) == pgid:
            found.append(pid)
            continue
        if needle is None:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(pid)
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


def signal_group(pgid: int, signum: int) -> None:
    """Signal the process group `pgid` itself (its members that left it are not looked for)."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:  # the pgid was recycled by someone else's group: never touch it
        pass


def kill_group(group: Group, signum: int) -> list[int]:
    """Signal the group and every marked process outside it; return the pids that were still alive."""
    signal_group(group.pgid, signum)
    alive = scan(group.pgid, group.marker)
    for pid in alive:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
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
