"""The shell sandbox's parts, each alone: the Landlock ruleset, the per-run reaper, the process-tree scan,
and the server's secrets kept from commands. Real processes and the real kernel; no server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coretools.sandbox import landlock, reaper
from coretools.sandbox.process_groups import Group, is_alive, scan
from coretools.sandbox.process_settings import child_env, hold_secret
from coretools.sandbox.seccomp import filter_program

needs_landlock = pytest.mark.skipif(landlock.abi() < 1, reason="no Landlock on this kernel")


def reaped(argv: list[str], ruleset: landlock.Ruleset | None = None, **popen) -> subprocess.Popen:
    fd = ruleset.fd if ruleset is not None else -1
    wrapped = [sys.executable, "-I", "-S", reaper.__file__, str(os.getpid()), str(fd), "-1", "--", *argv]
    return subprocess.Popen(wrapped, pass_fds=(fd,) if fd >= 0 else (), start_new_session=True, **popen)


def wait_until(check, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def sleepers(tag: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                if argv[0].endswith(b"sleep") and tag.encode() in argv:
                    found.append(int(name))
            except OSError:
                pass
    return [p for p in found if is_alive(p)]


# -- Landlock ------------------------------------------------------------------------------------------------


@needs_landlock
def test_ruleset_grants_writes_only_where_told(tmp_path: Path) -> None:
    allowed, denied, hidden = tmp_path / "allowed", tmp_path / "denied", tmp_path / "hidden"
    for d in (allowed, denied, hidden):
        d.mkdir()
    (hidden / "secret").write_text("S")
    (denied / "readable").write_text("R")
    ruleset = landlock.Ruleset(landlock.Grants(writable=(str(allowed),), hidden=(str(hidden),)))
    script = (f"touch {allowed}/ok; touch {denied}/no; cat {denied}/readable; cat {hidden}/secret; "
              f"ls {hidden}; echo end")  # fmt: skip
    try:
        done = reaped(["bash", "-c", script], ruleset, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = done.communicate(timeout=30)
    finally:
        ruleset.close()
    assert (allowed / "ok").exists() and not (denied / "no").exists()
    assert "R" in out and "S" not in out and out.rstrip().endswith("end")
    assert err.count("Permission denied") == 3, err


@needs_landlock
def test_ruleset_holds_through_proc_self_and_new_processes(tmp_path: Path) -> None:
    """A magic link or a child process does not widen the domain."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    outside = tmp_path / "outside.txt"
    ruleset = landlock.Ruleset(landlock.Grants(writable=(str(allowed),)))
    script = (f"cd {tmp_path}; exec 3<.; echo x > /proc/self/fd/3/outside.txt; "
              f"python3 -c 'open(\"{outside}\", \"w\")'; sh -c 'echo y > {outside}'; echo end")  # fmt: skip
    try:
        done = reaped(["bash", "-c", script], ruleset, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, _ = done.communicate(timeout=30)
    finally:
        ruleset.close()
    assert out.strip() == "end" and not outside.exists()


@needs_landlock
@pytest.mark.skipif(landlock.abi() < 4, reason="Landlock ABI 4 (TCP rules) needed")
def test_ruleset_without_network_refuses_tcp(tmp_path: Path) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); print(\"connected\")'"
    try:
        for network, expect in ((True, "connected"), (False, "PermissionError")):
            ruleset = landlock.Ruleset(landlock.Grants(writable=(str(tmp_path),), network=network))
            try:
                done = reaped(["bash", "-c", probe], ruleset, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                out, _ = done.communicate(timeout=30)
            finally:
                ruleset.close()
            assert expect in out, (network, out)
    finally:
        server.close()


def test_no_landlock_is_said_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock, "abi", lambda: 0)
    assert "Landlock is not available" in landlock.landlock_problem()
    with pytest.raises(landlock.LandlockError):
        landlock.Ruleset(landlock.Grants(writable=()))


# -- the reaper ----------------------------------------------------------------------------------------------

ESCAPES = ("(setsid env -u CORETOOLS_RUN_ID sleep {t} &); (env -i setsid -f sleep {t}); "
           "( (nohup sleep {t} >/dev/null 2>&1 &) & ); sleep {t} & disown; echo started")  # fmt: skip


def test_reaper_ends_every_detached_process_with_the_command() -> None:
    tag = f"{4242 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"
    done = reaped(["bash", "-c", ESCAPES.format(t=tag)], stdout=subprocess.PIPE, text=True)
    out, _ = done.communicate(timeout=30)
    assert out.strip() == "started" and done.returncode == 0
    wait_until(lambda: not sleepers(tag), 5)


def test_reaper_takes_its_tree_when_the_server_is_killed(tmp_path: Path) -> None:
    """A stand-in server starts a reaped command whose processes detach, then dies by SIGKILL: the kernel's
    parent-death signal makes the reaper kill the whole tree."""
    tag = f"{4343 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"
    command = ESCAPES.format(t=tag) + f"; sleep {tag}"
    code = (
        "import os, subprocess, sys, time\n"
        f"argv = [sys.executable, '-I', '-S', {reaper.__file__!r}, str(os.getpid()), '-1', '-1', '--', 'bash', '-c', {command!r}]\n"
        "subprocess.Popen(argv, start_new_session=True)\n"
        "time.sleep(60)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(lambda: len(sleepers(tag)) >= 5)
        server.kill()
        server.wait()
        wait_until(lambda: not sleepers(tag), 10)
    finally:
        server.kill()
        for pid in sleepers(tag):
            os.kill(pid, signal.SIGKILL)


def test_reaper_reports_the_commands_exit_and_signal() -> None:
    assert reaped(["bash", "-c", "exit 7"]).wait(timeout=30) == 7
    assert reaped(["bash", "-c", "kill -USR1 $$"]).wait(timeout=30) == -signal.SIGUSR1
    missing = reaped(["/nonexistent/program"], stderr=subprocess.PIPE, text=True)
    assert missing.wait(timeout=30) == 127 and "could not run /nonexistent/program" in missing.stderr.read()


def test_reaper_never_runs_a_command_it_could_not_confine(tmp_path: Path) -> None:
    """A ruleset descriptor that is not one (here: /dev/null) fails the confinement: exit 126, nothing run."""
    marker = tmp_path / "ran"
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        argv = [sys.executable, "-I", "-S", reaper.__file__, str(os.getpid()), str(null), "-1", "--",
                "touch", str(marker)]  # fmt: skip
        done = subprocess.run(argv, pass_fds=(null,), capture_output=True, text=True, timeout=30)
    finally:
        os.close(null)
    assert done.returncode == reaper.CONFINE_FAILED and "could not be set up" in done.stderr
    assert not marker.exists()


# -- the process tree ----------------------------------------------------------------------------------------


def test_scan_finds_members_that_left_the_group_and_wiped_their_environment() -> None:
    """An orphan that left the session and wiped its environment is re-parented to the run's reaper (a
    subreaper), so it is still found in the run's tree."""
    tag = f"{4444 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"
    leader = reaped(["bash", "-c", f"(env -i setsid sleep {tag} &); sleep {tag}"])
    try:
        wait_until(lambda: len(sleepers(tag)) == 2)
        members = scan(Group(leader.pid, 0))
        assert set(sleepers(tag)) <= set(members) and leader.pid in members
    finally:
        for pid in scan(Group(leader.pid, 0)):
            os.kill(pid, signal.SIGKILL)
        leader.wait()


# -- the server's secrets ------------------------------------------------------------------------------------


def test_the_servers_own_credentials_never_reach_a_command() -> None:
    base = {"MCP_BEARER": "s3cr3t-value-123", "ALIAS": "s3cr3t-value-123", "PATH": "/usr/bin", "PLAIN": "x"}
    hold_secret("MCP_BEARER", "s3cr3t-value-123")
    env = child_env(passthrough=("MCP_BEARER", "ALIAS"), base=base)
    assert "MCP_BEARER" not in env and "ALIAS" not in env and env["PLAIN"] == "x"


def _with_seccomp(argv: list[str], program: bytes, **popen) -> subprocess.Popen:
    read, write = os.pipe()
    os.write(write, program)
    os.close(write)
    try:
        wrapped = [sys.executable, "-I", "-S", reaper.__file__, str(os.getpid()), "-1", str(read), "--", *argv]
        return subprocess.Popen(wrapped, pass_fds=(read,), start_new_session=True, **popen)
    finally:
        os.close(read)


@pytest.mark.skipif(filter_program() is None, reason="no seccomp filter for this machine")
def test_no_network_filter_refuses_every_socket_but_unix() -> None:
    probe = ("import socket\n"
             "for family, kind in ((socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET6, socket.SOCK_STREAM),"
             " (socket.AF_UNIX, socket.SOCK_STREAM)):\n"
             "    try:\n        socket.socket(family, kind).close(); print(family.name, 'ok')\n"
             "    except OSError as exc:\n        print(family.name, exc.errno)\n")  # fmt: skip
    for network, inet in ((True, "ok"), (False, "1")):
        done = _with_seccomp(["python3", "-c", probe], filter_program(network=network), stdout=subprocess.PIPE, text=True)
        out, _ = done.communicate(timeout=30)
        assert f"AF_INET {inet}" in out and f"AF_INET6 {inet}" in out and "AF_UNIX ok" in out, (network, out)


@pytest.mark.skipif(filter_program() is None or os.geteuid() != 0, reason="needs root and the seccomp filter")
def test_a_confined_command_keeps_no_capability_even_as_root() -> None:
    done = _with_seccomp(["bash", "-c", "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; mknod /tmp/x-$$ b 8 0"],
                         filter_program(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    out, err = done.communicate(timeout=30)
    assert out.count("0000000000000000") == 4, out
    assert "Operation not permitted" in err


@needs_landlock
def test_shared_memory_is_usable_but_not_listable(tmp_path: Path) -> None:
    """POSIX semaphores work under Landlock (Python's multiprocessing locks), but `/dev/shm` cannot be
    listed, so a session cannot find another's names there."""
    ruleset = landlock.Ruleset(landlock.Grants(writable=(str(tmp_path),)))
    probe = "python3 -c 'import multiprocessing as m; l = m.Lock(); l.acquire(); print(\"lock ok\")'; ls /dev/shm"
    try:
        done = reaped(["bash", "-c", probe], ruleset, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = done.communicate(timeout=30)
    finally:
        ruleset.close()
    assert "lock ok" in out and "Permission denied" in err, (out, err)
