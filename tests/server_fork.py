"""Servers forked from a process that has imported them already: a real `python -m coretools serve` costs
~1.8 s of CPU before it answers, ~80% of it importing the MCP SDK, and the suite starts hundreds.

`command(argv, env)` gives the command line that starts `python *argv`: a small launcher (`python -I -S`,
~0.04 s of CPU) hands its stdin, stdout and stderr, its environment, working directory and arguments to a fork
server of this test process, which forks a server that runs `-m coretools ...`, `-c CODE ...` or
`path/to/script.py ...` exactly as the interpreter would (a fresh `__main__`, `sys.argv`, `sys.path[0]`,
`__file__`, a session of its own as `start_new_session` gives). The launcher stays as the server's stand-in:
it passes on the signals a test or a client sends it (TERM, INT, HUP, QUIT, USR1, USR2), exits with the
server's exit code (or dies of the same signal), and when the launcher itself is killed the fork server kills
the server. What is fixed at start (the interpreter's `PYTHON*`, `LANG`, `LC_*`; coretools' `CORETOOLS_*`)
selects a fork server of its own, which imported under it; where none matches, a terminal is attached, or the
arguments are none of the forms, the launcher execs the interpreter itself, so the command always means the
same as before.

What a forked server cannot stand in for is a test about the server's PID itself (its memory in `/proc`,
SIGKILL, its parent): those tests start the interpreter directly.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# The launcher: stdlib only, no site, so it starts in a few milliseconds. It falls back to the interpreter
# whenever the fork server is missing or declines.
LAUNCHER = r"""
import array, hashlib, json, os, signal, socket, sys
directory, argv = sys.argv[1], sys.argv[2:]
pid, pending = 0, []  # the server's PID; the signals that came before it was known
def fallback():
    for signum in pending:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os.execv(sys.executable, [sys.executable, *argv])
fixed = sorted((k, v) for k, v in os.environ.items()
               if (k.startswith(("PYTHON", "LC_", "CORETOOLS_")) or k == "LANG")
               and k not in ("CORETOOLS_STATE_DIR", "CORETOOLS_OAUTH_DIR"))
key = hashlib.sha256(json.dumps(fixed).encode()).hexdigest()[:16]
if any(os.isatty(fd) for fd in (0, 1, 2)):
    fallback()
def forward(signum, frame):
    if not pid:
        pending.append(signum)
        return
    try:
        os.kill(pid, signum)
    except OSError:
        pass
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(signum, forward)
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    conn.connect(os.path.join(directory, key))
    order = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    conn.sendmsg([len(order).to_bytes(4, "big") + order], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    reader = conn.makefile("rb")
    pid = int(reader.readline())
except (OSError, ValueError):
    fallback()
if pid <= 0:
    fallback()
for signum in pending:
    forward(signum, None)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
status = reader.readline().strip()
code = int(status) if status else 1
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code & 0xFF)
"""


def interpreter_key(env: dict[str, str]) -> str:
    """What is fixed when the server starts, as the launcher computes it: the interpreter's settings (after
    its own changes: in the C locale it sets LC_CTYPE, PEP 538), and coretools' own variables, some of which
    are read once at import (`CORETOOLS_NO_OPENAT2`); only the state directory and the client's token
    directory are read at each use."""
    fixed = sorted((k, v) for k, v in env.items()
                   if (k.startswith(("PYTHON", "LC_", "CORETOOLS_")) or k == "LANG")
                   and k not in ("CORETOOLS_STATE_DIR", "CORETOOLS_OAUTH_DIR"))
    return hashlib.sha256(json.dumps(fixed).encode()).hexdigest()[:16]


class _ForkServers:
    """This test process's fork servers, one per interpreter key, started on first use and ended with it."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="coretools-fork-")
        self.lock = threading.Lock()
        self.procs: dict[str, subprocess.Popen] = {}
        atexit.register(self.close)

    def ensure(self, env: dict[str, str]) -> None:
        key = interpreter_key(env)
        with self.lock:
            proc = self.procs.get(key)
            if proc is not None and proc.poll() is None:
                return
            self.procs[key] = proc = subprocess.Popen([sys.executable, str(Path(__file__)), self.directory],
                                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                                      cwd=str(REPO))  # fmt: skip
            proc.stdout.readline()  # its socket is listening (or it failed, and the launchers fall back)

    def close(self) -> None:
        """Closing a fork server's stdin ends it and the servers it forked that are still running."""
        for proc in self.procs.values():
            proc.stdin.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


_servers: list[_ForkServers] = []


def command(argv: list[str], env: dict[str, str]) -> list[str]:
    """The command line that runs `python *argv` under `env`, forked from a fork server that matches `env`."""
    if not _servers:
        _servers.append(_ForkServers())
    _servers[0].ensure(env)
    return [sys.executable, "-I", "-S", "-c", LAUNCHER, _servers[0].directory, *argv]


# -- the fork server (this file run as a script) ------------------------------------------------------------


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    size = int.from_bytes(data[:4], "big")
    body = data[4:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise OSError("the launcher went away")
        body += more
    return json.loads(body), list(fds)


def _open(conn: socket.socket) -> bool:
    """Whether the launcher at the other end is still there."""
    try:
        return bool(conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return True
    except OSError:
        return False


def _forkable(order: dict) -> bool:
    """Whether `python *argv` is one of the forms this server runs: `-m MODULE`, `-c CODE`, or a `.py` file
    that exists (the interpreter's own error for a missing one is left to the interpreter)."""
    argv = order["argv"]
    if argv and argv[0] in ("-m", "-c"):
        return len(argv) >= 2
    return bool(argv) and argv[0].endswith(".py") and not argv[0].startswith("-") and os.path.isfile(
        os.path.join(order["cwd"], argv[0]))


def _serve(directory: str) -> dict:
    """Fork a server for each launcher; returns only in a forked child, with its order. Ends, killing the
    servers still running, when its stdin closes (the test process ended, whatever way)."""
    path = os.path.join(directory, interpreter_key(dict(os.environ)))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print(path, flush=True)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, launcher connection)
    while True:
        watched = [sys.stdin, listener, *children, *(conn for _, conn in children.values())]
        ready, _, _ = select.select(watched, [], [])
        for item in ready:
            if item is sys.stdin:
                for pid, _ in children.values():
                    os.kill(pid, signal.SIGKILL)
                os._exit(0)
            if item is listener:
                conn, _ = listener.accept()
                try:
                    order, fds = _receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                if len(fds) != 3 or not _forkable(order):
                    with contextlib.suppress(OSError):
                        conn.sendall(b"0\n")
                    conn.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    for pidfd, (_, other) in children.items():
                        os.close(pidfd)
                        other.close()
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                        os.close(fd)
                    return order
                for fd in fds:
                    os.close(fd)
                children[os.pidfd_open(pid)] = (pid, conn)
                try:
                    conn.sendall(f"{pid}\n".encode())
                except OSError:  # the launcher was killed while its server was forked
                    os.kill(pid, signal.SIGKILL)
            elif isinstance(item, int):
                pid, conn = children.pop(item)
                os.close(item)
                _, status = os.waitpid(pid, 0)
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                with contextlib.suppress(OSError):
                    conn.sendall(f"{code}\n".encode())
                conn.close()
            else:  # the launcher's connection closed before its server ended: the launcher was killed
                for pid, conn in list(children.values()):
                    if conn is item and not _open(conn):
                        os.kill(pid, signal.SIGKILL)


def _run(order: dict) -> None:
    """Become `python *argv` in `cwd` under `env`, as the interpreter would have started it."""
    import runpy

    os.setsid()
    os.chdir(order["cwd"])
    os.environ.clear()
    os.environ.update(order["env"])
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    if order["argv"][0] not in ("-m", "-c"):
        _run_script(main, *order["argv"])
        return
    flag, target, *rest = order["argv"]
    if flag == "-m":
        sys.argv = ["-m", *rest]
        sys.path[0] = os.getcwd()
        runpy._run_module_as_main(target, alter_argv=True)  # noqa: SLF001 - what `python -m` itself calls
    else:
        sys.argv = ["-c", *rest]
        sys.path[0] = ""
        exec(compile(target, "<string>", "exec"), main.__dict__)  # noqa: S102 - what `python -c` runs


def _run_script(main: types.ModuleType, script: str, *args: str) -> None:
    """What `python SCRIPT *args` does: `sys.argv[0]` as given, `__file__` and the code's file name made
    absolute against the working directory, `sys.path[0]` the directory of the file with links resolved."""
    import builtins
    import importlib.machinery

    path = os.path.join(os.getcwd(), script)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    main.__dict__.update(__file__=path, __cached__=None, __builtins__=builtins,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path))  # fmt: skip
    with open(path, "rb") as file:
        source = file.read()
    exec(compile(source, path, "exec"), main.__dict__)  # noqa: S102 - what the interpreter runs


if __name__ == "__main__":
    sys.path[0] = str(TESTS)
    import coretools.cli  # noqa: F401 - what every server imports, once, here
    import coretools.client.cli  # noqa: F401 - the client's CLI, which its tests run as `-c RUNNER`
    import coretools.server.app  # noqa: F401
    import coretools.server.http  # noqa: F401
    import coretools.server.stdio  # noqa: F401
    import http_harness  # noqa: F401 - the probe tool's servers import it
    import mcp.server.auth.routes  # noqa: F401 - the client tests' servers (tests/client/servers): the SDK's
    import mcp.server.stdio  # noqa: F401 - low-level server, its stdio transport, its OAuth pieces, uvicorn
    import uvicorn  # noqa: F401

    sys.path[0] = ""
    # What the imports made is never garbage: out of the collector's sight (as coretools' `settle_heap` puts it),
    # a forked server's collections do not walk it and so do not copy its pages: ~0.5 s of CPU less for each.
    gc.collect()
    gc.freeze()
    _run(_serve(sys.argv[1]))
