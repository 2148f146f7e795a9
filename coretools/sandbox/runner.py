"""A bounded process runner: the one way coretools starts a program on the model's behalf.

Every run gets its own session and process group (so one signal reaches the whole tree), stdin from
`/dev/null` (or a temp file holding the bytes the caller passes), a scrubbed environment carrying a
per-run marker variable, an inactivity timeout and a wall-clock timeout, and an output cap. When a bound
is hit the group gets SIGTERM, then SIGKILL after a short grace, and the leader is reaped. Cancellation
(anyio) kills the group at once. Output is kept as bytes (both streams share the cap), checked for
binary content, decoded as UTF-8 with replacement, and streamed as text to an optional live callback.

A process-wide registry remembers every group that may still have members (a command that leaves
`cmd &` behind keeps running after the call returns, as in Gemini CLI). Each owner (a tool) kills its
groups in `aclose()`; an atexit hook and SIGTERM/SIGHUP handlers kill everything that is left, so the
server never leaves orphans behind, even when it is stopped by a signal. A process that leaves the
group (`setsid`, a double fork) is still found through the marker in its environment, unless it also
wipes its environment (`env -i`): that and SIGKILL of the server itself are the limits (the bubblewrap
sandbox's `--die-with-parent` + PID namespace covers both).
"""

from __future__ import annotations

import atexit
import codecs
import errno
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import anyio

from coretools.sandbox.bwrap import bwrap_argv, bwrap_problem, prepare_sandbox  # noqa: F401 - bwrap_* re-exported
from coretools.sandbox.hardened_env import harden

logger = logging.getLogger("coretools")

DEFAULT_OUTPUT_CAP = 16 * 1024 * 1024
DEFAULT_KILL_GRACE = 0.5
DRAIN_GRACE = 0.2  # after the leader exits, how long to wait for pipes held open by background children
BINARY_SNIFF = 8192
MARKER_VAR = "CORETOOLS_RUN_ID"
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")
# Variables that make a non-interactive shell run code or that a host set for its own prompts.
DROP_VARS = ("BASH_ENV", "ENV", "PROMPT_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "PS4")
NON_INTERACTIVE = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "SSH_ASKPASS_REQUIRE": "never",
    "GCM_INTERACTIVE": "never",
    "GH_PROMPT_DISABLED": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "TERM": "dumb",
    "CORETOOLS": "1",
}
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def child_env(passthrough: Iterable[str] = (), base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment minus obvious secrets (unless passed through by name), minus variables
    that make bash run code at start-up, plus settings that keep every program from waiting for a human."""
    keep = set(passthrough)
    env = {}
    for name, value in (os.environ if base is None else base).items():
        upper = name.upper()
        if name not in keep and any(word in upper for word in SECRET_WORDS):
            continue
        if name in DROP_VARS or name.startswith("BASH_FUNC_"):
            continue
        env[name] = value
    env.update(NON_INTERACTIVE)
    return harden(env)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# -- results ---------------------------------------------------------------------------------------------


@dataclass
class Stream:
    """What one output stream produced: the bytes kept, how many arrived, and whether it looks binary."""

    name: str
    data: bytearray = field(default_factory=bytearray)
    received: int = 0
    binary: bool = False

    @property
    def dropped(self) -> int:
        return self.received - len(self.data)

    def text(self) -> str:
        return strip_ansi(bytes(self.data).decode("utf-8", "replace"))


@dataclass
class RunSpec:
    argv: list[str]
    cwd: str | None = None
    env: dict[str, str] | None = None
    stdin_data: bytes | None = None  # None: /dev/null
    wall_timeout: float | None = None
    inactivity_timeout: float | None = None
    output_cap: int = DEFAULT_OUTPUT_CAP
    kill_grace: float = DEFAULT_KILL_GRACE
    keep_background: bool = True  # leave `cmd &` children running after a normal exit (killed at close)
    pass_fds: tuple[int, ...] = ()  # descriptors the child inherits (the sandbox's seccomp filter)
    on_exit: Callable[[Outcome | None], None] | None = None  # called once the run is over, even if cancelled


@dataclass
class Outcome:
    argv: list[str]
    stdout: Stream
    stderr: Stream
    pid: int | None = None
    pgid: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    stopped: str | None = None  # "timeout" | "inactivity" | "output_cap" when we killed it
    error: str | None = None  # spawn failure
    background_pids: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.stopped is None and self.exit_code == 0


LiveFn = Callable[[str], Awaitable[None]]


# -- the registry ----------------------------------------------------------------------------------------


@dataclass
class _Group:
    pgid: int
    marker: str
    owner: int


_registry: dict[int, _Group] = {}
_registry_lock = threading.Lock()
_safety_net_installed = False


def _register(group: _Group) -> None:
    with _registry_lock:
        _registry[group.pgid] = group
    _install_safety_net()


def _unregister(pgid: int) -> None:
    with _registry_lock:
        _registry.pop(pgid, None)


def _groups(owner: int | None = None) -> list[_Group]:
    with _registry_lock:
        return [g for g in _registry.values() if owner is None or g.owner == owner]


def kill_everything() -> None:
    """SIGKILL every group (and marked escapee) any runner in this process started. Safe at exit."""
    for group in _groups():
        _kill_group(group, signal.SIGKILL)
        _unregister(group.pgid)


def _install_safety_net() -> None:
    global _safety_net_installed
    if _safety_net_installed:
        return
    _safety_net_installed = True
    atexit.register(kill_everything)
    if threading.current_thread() is not threading.main_thread():
        return
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


def _scan(pgid: int, marker: str | None) -> list[int]:
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


def _kill_group(group: _Group, signum: int) -> list[int]:
    """Signal the group and every marked process outside it; return the pids that were still alive."""
    try:
        os.killpg(group.pgid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:  # the pgid was recycled by someone else's group: never touch it
        pass
    alive = _scan(group.pgid, group.marker)
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


# -- the runner ------------------------------------------------------------------------------------------


class Runner:
    """Runs processes for one owner (a tool instance) and kills what is left of them on `aclose()`."""

    def __init__(self, label: str = "coretools") -> None:
        self.label = label
        self._owner = id(self)
        self._dir: str | None = None

    @property
    def scratch_dir(self) -> str:
        """A private directory for this owner (saved outputs, the sandbox's /tmp); removed on close."""
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix=f"{self.label}-")
        return self._dir

    def save_output(self, name: str, data: bytes) -> str:
        """Write a command's full output to a file in the scratch directory; return its path."""
        out_dir = os.path.join(self.scratch_dir, "output")
        os.makedirs(out_dir, mode=0o700, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".txt", dir=out_dir)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return path

    def present(self, outcome: Outcome, stream: Stream, limit: int) -> tuple[str, str | None]:
        """What the model sees of one stream, and where its full (kept) output was saved if it was cut:
        binary output is summarised, long text cut to a head and a tail, bytes beyond the cap noted."""
        name = f"{outcome.pid}-{stream.name}"
        if stream.binary:
            path = self.save_output(name, bytes(stream.data))
            return f"[binary output: {stream.received:,} bytes, not shown; saved to {path}]", path
        text = stream.text().rstrip("\n")
        if len(text) <= limit and not stream.dropped:
            return text, None
        path = self.save_output(name, bytes(stream.data))
        text, _ = shorten(text, limit, saved_to=path)
        if stream.dropped:
            text += (
                f"\n[... {stream.dropped:,} more bytes were discarded after the output cap; the first "
                f"{len(stream.data):,} bytes are in {path}]"
            )
        return text, path

    async def aclose(self) -> None:
        """SIGTERM every group this owner left running, SIGKILL what survives a short grace, clean up."""
        groups = _groups(self._owner)
        for group in groups:
            _kill_group(group, signal.SIGTERM)
        deadline = time.monotonic() + DEFAULT_KILL_GRACE
        while groups and time.monotonic() < deadline and any(_scan(g.pgid, g.marker) for g in groups):
            await anyio.sleep(0.02)
        for group in groups:
            _kill_group(group, signal.SIGKILL)
            _unregister(group.pgid)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def run(self, spec: RunSpec, live: LiveFn | None = None, *, cwd_fd: int | None = None) -> Outcome:
        """Run `spec.argv` to completion or until a bound is hit. Never raises for the process's own
        failures (they are in the outcome); cancellation propagates after the group is killed.

        `cwd_fd`, when given, is an open descriptor of the working directory: the child changes into it
        through `/proc/self/fd/N` (where that exists), so the directory that was checked is the one used."""
        outcome = None
        try:
            outcome = await self._run(spec, live, cwd_fd)
            return outcome
        finally:
            if spec.on_exit is not None:
                spec.on_exit(outcome)

    async def _run(self, spec: RunSpec, live: LiveFn | None, cwd_fd: int | None) -> Outcome:
        out, err = Stream("stdout"), Stream("stderr")
        outcome = Outcome(list(spec.argv), out, err)
        marker = secrets.token_hex(8)
        env = dict(os.environ if spec.env is None else spec.env)
        env[MARKER_VAR] = marker
        cwd = spec.cwd
        if cwd_fd is not None and os.path.isdir(f"/proc/self/fd/{cwd_fd}"):
            cwd = f"/proc/self/fd/{cwd_fd}"
        started = time.monotonic()
        stdin_file = None
        try:
            if spec.stdin_data is not None:
                stdin_file = tempfile.TemporaryFile()
                stdin_file.write(spec.stdin_data)
                stdin_file.seek(0)
            try:
                # Popen rather than the event loop's subprocess support: asyncio's wait() only returns once
                # every pipe is closed, which a background child (`cmd &`) can delay forever.
                process = subprocess.Popen(
                    spec.argv,
                    stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                    pass_fds=spec.pass_fds,
                )
            except OSError as exc:
                outcome.error = _spawn_error(exc, spec)
                return outcome
        finally:
            if stdin_file is not None:
                stdin_file.close()
        group = _Group(process.pid, marker, self._owner)
        _register(group)
        outcome.pid = outcome.pgid = process.pid
        state = _State(started)
        pipes = [process.stdout, process.stderr]
        finished = False
        try:
            async with anyio.create_task_group() as tg:
                for pipe, sink in zip(pipes, (out, err)):
                    os.set_blocking(pipe.fileno(), False)
                    tg.start_soon(_read, pipe.fileno(), sink, spec, state, live)
                if live is not None:
                    tg.start_soon(_pump, state, live)
                tg.start_soon(_watch, process, group, spec, state)
                await _wait_exit(process)
                if state.stopped is not None:
                    await state.terminated.wait()
                else:
                    with anyio.move_on_after(DRAIN_GRACE):
                        await state.eof.wait()
                tg.cancel_scope.cancel()
            finished = True
        finally:
            with anyio.CancelScope(shield=True):
                if not finished:  # cancelled (or a bug): no grace, kill the whole tree now
                    _kill_group(group, signal.SIGKILL)
                    _unregister(group.pgid)
                    with anyio.move_on_after(5):
                        await _wait_exit(process)
                for pipe in pipes:
                    pipe.close()
                if live is not None and finished:
                    await _flush(state, live)
        outcome.seconds = time.monotonic() - started
        outcome.stopped = state.stopped
        code = process.returncode
        if code is not None and code < 0:
            outcome.signal = -code
        else:
            outcome.exit_code = code
        remaining = [p for p in _scan(group.pgid, marker) if p != process.pid]
        if remaining and spec.keep_background and outcome.stopped is None:
            outcome.background_pids = remaining
        else:
            if remaining:
                _kill_group(group, signal.SIGKILL)
            _unregister(group.pgid)
        return outcome


async def _wait_exit(process: subprocess.Popen) -> int:
    """Wait for the leader to exit and reap it (polling: cheap, and independent of the pipes)."""
    delay = 0.002
    while process.poll() is None:
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return process.returncode


async def _read(fd: int, sink: Stream, spec: RunSpec, state: _State, live: LiveFn | None) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while True:
            await anyio.wait_readable(fd)
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                break
            if not chunk:
                break
            state.last_output = time.monotonic()
            sink.received += len(chunk)
            if not sink.binary and len(sink.data) < BINARY_SNIFF and b"\0" in chunk[: BINARY_SNIFF - len(sink.data)]:
                sink.binary = True
            room = spec.output_cap - state.kept
            if room > 0:
                kept = chunk[:room]
                sink.data += kept
                state.kept += len(kept)
                if live is not None and not sink.binary:
                    state.pending.append(decoder.decode(kept))
            if len(chunk) > room and state.stopped is None:
                state.stopped = "output_cap"
                state.stop.set()
    finally:
        state.open_streams -= 1
        if state.open_streams == 0:
            state.eof.set()


@dataclass
class _State:
    started: float
    last_output: float = 0.0
    kept: int = 0
    stopped: str | None = None
    open_streams: int = 2
    pending: list[str] = field(default_factory=list)
    stop: anyio.Event = field(default_factory=anyio.Event)
    eof: anyio.Event = field(default_factory=anyio.Event)
    terminated: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        self.last_output = self.started


async def _watch(process: subprocess.Popen, group: _Group, spec: RunSpec, state: _State) -> None:
    """Enforce the bounds: when a timeout fires or the output cap is hit (the reader sets `stop`), SIGTERM
    the group, SIGKILL whatever is left after the grace period, and say so through `terminated`."""
    while state.stopped is None:
        now = time.monotonic()
        deadlines = []
        if spec.wall_timeout:
            deadlines.append((state.started + spec.wall_timeout, "timeout"))
        if spec.inactivity_timeout:
            deadlines.append((state.last_output + spec.inactivity_timeout, "inactivity"))
        due = [reason for when, reason in deadlines if when <= now]
        if due:
            state.stopped = due[0]
            break
        wait = min((when for when, _ in deadlines), default=now + 3600) - now
        with anyio.move_on_after(max(wait, 0.005)):
            await state.stop.wait()
    _kill_group(group, signal.SIGTERM)
    with anyio.move_on_after(spec.kill_grace):
        while process.poll() is None or _scan(group.pgid, group.marker):
            await anyio.sleep(0.02)
    _kill_group(group, signal.SIGKILL)
    state.terminated.set()


async def _pump(state: _State, live: LiveFn) -> None:
    while True:
        await anyio.sleep(0.25)
        await _flush(state, live)


async def _flush(state: _State, live: LiveFn) -> None:
    if state.pending:
        text, state.pending[:] = "".join(state.pending), []
        if text:
            try:
                await live(strip_ansi(text))
            except Exception:  # noqa: BLE001 - live output is best effort
                logger.debug("live output callback failed", exc_info=True)


def _spawn_error(exc: OSError, spec: RunSpec) -> str:
    if exc.errno == errno.ENOENT and spec.cwd and not os.path.isdir(spec.cwd):
        return f"Working directory does not exist: {spec.cwd}"
    if exc.errno == errno.ENOENT:
        return f"Program not found: {spec.argv[0]} ({exc.strerror})"
    return f"Could not start {spec.argv[0]}: {exc.strerror or exc}"


def run_blocking(runner: Runner, spec: RunSpec) -> Outcome:
    """Run one process to completion from synchronous code, even inside a running event loop (start-up
    discovery): the runner gets its own loop in a helper thread."""
    result: list[Outcome] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(anyio.run(runner.run, spec))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=target, name="coretools-run-blocking", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def shorten(text: str, limit: int, *, saved_to: str | None = None) -> tuple[str, bool]:
    """Cut `text` to a head and a tail around a note saying how much was left out; returns (text, cut)."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 5
    tail = limit - head
    omitted = len(text) - head - tail
    where = f"; the full output is in {saved_to}" if saved_to else ""
    return f"{text[:head]}\n\n... {omitted:,} characters omitted{where} ...\n\n{text[-tail:]}", True


# -- the bubblewrap sandbox ------------------------------------------------------------------------------


# `bwrap_problem` and `bwrap_argv` live in bwrap.py with the rest of the sandbox; re-exported here.


# -- settings shared by the shell tool and project-discovered tools ---------------------------------------

DEFAULT_WALL_TIMEOUT = 600.0  # Gemini CLI's default MCP request timeout: a client has given up by then
DEFAULT_INACTIVITY_TIMEOUT = 300.0  # Gemini CLI's tools.shell.inactivityTimeout


@dataclass
class ProcessSettings:
    """The operator's process options (`--shell-timeout`, `--shell-env`, `--shell-sandbox`...)."""

    wall_timeout: float | None = DEFAULT_WALL_TIMEOUT
    inactivity_timeout: float | None = DEFAULT_INACTIVITY_TIMEOUT
    passthrough: tuple[str, ...] = ()
    sandbox: str | None = None
    network: bool = True
    output_cap: int = DEFAULT_OUTPUT_CAP

    @classmethod
    def from_config(cls, config) -> ProcessSettings:
        def seconds(name: str, default: float) -> float | None:
            value = config.opt(name, default)
            return None if value is None or value <= 0 else float(value)

        return cls(
            wall_timeout=seconds("shell_timeout", DEFAULT_WALL_TIMEOUT),
            inactivity_timeout=seconds("shell_inactivity_timeout", DEFAULT_INACTIVITY_TIMEOUT),
            passthrough=tuple(config.opt("shell_env", None) or ()),
            sandbox=config.opt("shell_sandbox", None),
            network=not config.opt("shell_no_network", False),
        )

    def problem(self) -> str | None:
        """A configuration error to report at start-up, or None."""
        if not self.network and self.sandbox is None:
            return "--shell-no-network needs --shell-sandbox bwrap (without a sandbox there is no way to cut the network)"
        if self.sandbox == "bwrap":
            return bwrap_problem()
        return None

    def spec(self, runner: Runner, argv: list[str], *, cwd: str, roots: list[str], **extra) -> RunSpec:
        env = child_env(self.passthrough)
        env["PWD"] = cwd
        if self.sandbox == "bwrap":
            sandboxed = prepare_sandbox(argv, scratch=runner.scratch_dir, cwd=cwd, roots=roots, network=self.network)
            argv = sandboxed.argv
            extra.update(pass_fds=sandboxed.pass_fds, on_exit=sandboxed.on_exit)
            env["TMPDIR"] = "/tmp"
        return RunSpec(
            argv,
            cwd=cwd,
            env=env,
            wall_timeout=self.wall_timeout,
            inactivity_timeout=self.inactivity_timeout,
            output_cap=self.output_cap,
            **extra,
        )


def startup_error(message: str) -> SystemExit:
    """A configuration problem found while building the tools: say it on stderr and exit with status 2."""
    import sys

    sys.stderr.write(f"coretools-mcp: error: {message}\n")
    return SystemExit(2)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def stop_message(outcome: Outcome, cap: int) -> str | None:
    """Why a run failed at the process level (not a non-zero exit), with what to do about it; or None."""
    if outcome.error:
        return f"{outcome.error}. Check that the program is installed and the directory exists."
    how = "its process group was sent SIGTERM, then SIGKILL"
    if outcome.stopped == "timeout":
        return (
            f"Command was stopped after {outcome.seconds:.1f} s, the wall-clock limit (--shell-timeout); {how}. "
            "Run long jobs in the background with output to a file (`cmd > log 2>&1 &`) and check on them later."
        )
    if outcome.stopped == "inactivity":
        return (
            f"Command was stopped because it printed nothing for too long (--shell-inactivity-timeout); {how}. "
            "If it was waiting for input, pass non-interactive flags; stdin is not a terminal."
        )
    if outcome.stopped == "output_cap":
        return (
            f"Command was stopped because its output exceeded {cap:,} bytes; {how}. Redirect large output to a "
            "file and read parts of it (head, tail, grep)."
        )
    return None
