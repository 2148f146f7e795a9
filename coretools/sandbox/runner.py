"""A bounded process runner: the one way coretools starts a program on the model's behalf (the shell,
discovered tools) and for its own searches (ripgrep).

Every run gets its own session and process group (one signal reaches the group; the members found from
the kernel's process tree get it too, see `process_groups`), stdin from `/dev/null` (or a temp file holding
the bytes the caller passes; or, for `spawn` with `RunSpec.pty`, a new pseudo-terminal as all three
streams, which `terminal_argv` makes the program's controlling terminal), the environment the caller
built (`process_settings.child_env` for the shell), and bounds: a wall-clock timeout, an output cap, and for
`run` an inactivity timeout. Two ways to consume a run:

* `Runner.run` (async): output is kept as bytes (both streams share the cap), checked for binary content,
  decoded as UTF-8 with replacement, and streamed as text to an optional live callback. When a bound is
  hit the group gets SIGTERM, then SIGKILL after a short grace, and the leader is reaped. Cancellation
  (anyio) kills the group at once.
* `Runner.stream` (synchronous, for a worker thread): standard output is handed over chunk by chunk as it
  arrives and not kept (ripgrep's records); a `check` callback (cancellation) is polled while waiting.
  When the iteration ends, however it ends, the group is killed and the leader reaped.
"""

from __future__ import annotations

import codecs
import errno
import logging
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import anyio

from coretools.sandbox.scratch import ScratchArea
from coretools.sandbox.process_groups import (
    Group,
    reap_orphans,
    kill_group,
    register,
    registered,
    scan,
    signal_group,
    unregister,
)

logger = logging.getLogger("coretools")

DEFAULT_OUTPUT_CAP = 16 * 1024 * 1024
DEFAULT_KILL_GRACE = 0.5
DRAIN_GRACE = 0.2  # after the leader exits, how long to wait for pipes held open by background children
BINARY_SNIFF = 8192
STREAM_STDERR_KEPT = 20_000  # bytes of stderr a streamed run keeps (ripgrep's error messages)
# Terminal controls, in their 7-bit (ESC) and 8-bit (C1, U+0080-U+009F) forms: the strings OSC, DCS, SOS, PM
# and APC open, up to BEL or ST (their body stops at any control, so an unterminated one costs one scan to
# the next control and only its opener is dropped: linear in all cases); CSI sequences; other escapes; a
# lone ESC; any other C1 control.
_ANSI = re.compile(
    r"(?:\x1b[P\]X^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x80-\x9f]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x80-\x9f]"
)
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")  # embeddings, overrides, isolates: they reorder text shown
# Every character either pattern above can start at: most output has none, and looking for them costs a
# fraction of the alternation's scan (which tries each branch at every character: ~0.1 s of CPU per MB).
_STRIPPED = re.compile("[\x1b\x80-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _named(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def strip_ansi(text: str) -> str:
    """Output as the model may read it: terminal controls removed (a program's colours, and an OSC that
    would set the reader's clipboard or title), bidi controls shown by name (`<U+202E>`), since they make
    text read in another order than it runs."""
    if "\x1b" not in text and (text.isascii() or _STRIPPED.search(text) is None):
        return text  # nothing to strip (in ASCII only ESC starts a control)
    return _BIDI.sub(_named, _ANSI.sub("", text))


def show_controls(text: str) -> str:
    """A command echoed to the model: every control character (but tab and line end) and bidi control shown
    by name, so the echo reads as what runs and carries nothing a terminal acts on."""
    return _CONTROLS.sub(_named, text)


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
    data_limit: int | None = None  # bytes of private memory the program may map (see `_limit_memory`)
    pipe_size: int | None = None  # standard output's pipe buffer, in bytes (see `_widen_pipe`)
    pty: tuple[int, int] | None = None  # (rows, columns): run in a new pseudo-terminal (`_start_in_terminal`)


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


# -- the runner ------------------------------------------------------------------------------------------


class Runner:
    """Runs processes for one owner (a tool instance) and kills what is left of them on `aclose()`."""

    def __init__(self, label: str = "coretools", *, base: str | None = None, owner: object = None,
                 hide: str | None = None) -> None:  # fmt: skip
        self.label = label
        self._owner = id(self)
        self._base = base
        self._hide = hide
        self._area_owner = owner
        self._dir: str | None = None
        self._area: ScratchArea | None = None

    @property
    def scratch_dir(self) -> str:
        """A private directory for this owner (saved outputs, the command's temporary directory), inside
        `scratch_base` when the runner has one; removed on close."""
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix=f"{self.label}-", dir=self._base)
        return self._dir

    @property
    def scratch_base(self) -> str:
        """The directory that holds this runner's scratch directory and its siblings' (other sessions', other
        servers' with `hide`): what a sandbox hides from commands, granting back only `scratch_dir`."""
        return self._hide or self._base or self.scratch_dir

    @property
    def private_tmp(self) -> str:
        """The temporary directory of this owner's commands (`TMPDIR`; `/tmp` inside bubblewrap)."""
        path = os.path.join(self.scratch_dir, "tmp")
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    @property
    def saved(self) -> ScratchArea:
        """Where full outputs and background logs go (`output` in the scratch directory, which the sandbox
        shows read-only): a scratch area the file tools can read, never write (see `scratch`)."""
        if self._area is None:
            self._area = ScratchArea(os.path.join(self.scratch_dir, "output"), owner=self._area_owner)
        return self._area

    def save_output(self, name: str, data: bytes) -> str:
        """Write a command's full output to a new file of the scratch area; return its path."""
        return self.saved.save(name, data)

    def spawn(self, spec: RunSpec, *, cwd_fd: int | None = None) -> tuple[subprocess.Popen, Group]:
        """Start `spec.argv` as `run` would (own session and group, registered to be killed on close) and
        hand the process over; its pipes and bounds are the caller's business (background commands). With
        `spec.pty`, `process.stdout` is the terminal's master side, read and written, and `process.stderr`
        is None."""
        return _start(spec, self._owner, cwd_fd)

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

    def close_now(self) -> None:
        """SIGKILL every group this owner left running and remove its directory, at once (a session that
        ended without a chance to wait, see `session.SessionScope`)."""
        for group in registered(self._owner):
            kill_group(group, signal.SIGKILL)
            unregister(group.pgid)
        self._remove()

    def _remove(self) -> None:
        if self._area is not None:
            self._area.close()
            self._area = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def aclose(self) -> None:
        """SIGTERM every group this owner left running, SIGKILL what survives a short grace, clean up."""
        groups = registered(self._owner)
        for group in groups:
            kill_group(group, signal.SIGTERM)
        deadline = time.monotonic() + DEFAULT_KILL_GRACE
        while groups and time.monotonic() < deadline and any(scan(g) for g in groups):
            await anyio.sleep(0.02)
        for group in groups:
            kill_group(group, signal.SIGKILL)
            unregister(group.pgid)
        self._remove()

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
        started = time.monotonic()
        try:
            process, group = _start(spec, self._owner, cwd_fd)
        except OSError as exc:
            outcome.error = _spawn_error(exc, spec)
            return outcome
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
                    kill_group(group, signal.SIGKILL)
                    unregister(group.pgid)
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
        reap_orphans()
        remaining = [p for p in scan(group) if p != process.pid]
        if remaining and spec.keep_background and outcome.stopped is None:
            outcome.background_pids = remaining
        else:
            if remaining:
                kill_group(group, signal.SIGKILL)
            unregister(group.pgid)
        return outcome


    def stream(
        self,
        spec: RunSpec,
        *,
        check: Callable[[], None] | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
    ) -> Streamed:
        """A run whose standard output is consumed as it arrives (`Streamed.chunks`), from synchronous code
        in a worker thread. Its bounds are `spec.wall_timeout` and `spec.output_cap` (standard output only,
        which is not kept); `check` is called while waiting and may raise (cancellation) to end the run;
        `on_stderr` gets standard error chunk by chunk (its first `STREAM_STDERR_KEPT` bytes are kept)."""
        return Streamed(spec, self._owner, check, on_stderr)


class Streamed:
    """One run of `Runner.stream`. `outcome` says how it ended: `exit_code` (or `signal`) once the program
    closed its output and was reaped, `stopped` ("timeout", "output_cap") when a bound ended it."""

    def __init__(
        self,
        spec: RunSpec,
        owner: int,
        check: Callable[[], None] | None,
        on_stderr: Callable[[bytes], None] | None,
    ) -> None:
        self.spec, self._owner, self._check, self._on_stderr = spec, owner, check, on_stderr
        self.outcome = Outcome(list(spec.argv), Stream("stdout"), Stream("stderr"))

    def chunks(self) -> Iterator[bytes]:
        """Standard output as it arrives. The program starts with the iteration (OSError if it cannot), and
        its group is killed and the leader reaped when the iteration ends, however it ends."""
        started = time.monotonic()
        process, group = _start(self.spec, self._owner, None)
        self.outcome.pid = self.outcome.pgid = process.pid
        try:
            yield from self._read(process, started)
        finally:
            if process.poll() is None:
                signal_group(group.pgid, signal.SIGKILL)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            unregister(group.pgid)
            self.outcome.seconds = time.monotonic() - started

    def _read(self, process: subprocess.Popen, started: float) -> Iterator[bytes]:
        spec, outcome, check = self.spec, self.outcome, self._check
        assert process.stdout is not None and process.stderr is not None
        out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
        out, err = outcome.stdout, outcome.stderr
        deadline = started + spec.wall_timeout if spec.wall_timeout else None
        read_size = max(1 << 16, spec.pipe_size or 0)
        open_fds = {out_fd, err_fd}
        while open_fds:
            if check is not None:
                check()
            wait = _STREAM_POLL
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    outcome.stopped = "timeout"
                    return
                wait = min(left, _STREAM_POLL)
            ready, _, _ = select.select(list(open_fds), [], [], wait)
            for fd in ready:
                chunk = os.read(fd, read_size if fd == out_fd else 1 << 16)
                if not chunk:
                    open_fds.discard(fd)
                    continue
                if fd == err_fd:
                    err.received += len(chunk)
                    if len(err.data) < STREAM_STDERR_KEPT:
                        err.data += chunk[: STREAM_STDERR_KEPT - len(err.data)]
                    if self._on_stderr is not None:
                        self._on_stderr(chunk)
                    continue
                out.received += len(chunk)
                if out.received > spec.output_cap:
                    outcome.stopped = "output_cap"
                    return
                yield chunk
        code = process.wait()
        if code < 0:
            outcome.signal = -code
        else:
            outcome.exit_code = code


_STREAM_POLL = 0.1  # seconds between two calls of a streamed run's `check`


def _start(spec: RunSpec, owner: int, cwd_fd: int | None) -> tuple[subprocess.Popen, Group]:
    """Start `spec.argv` in a session (and process group) of its own and register the group for `owner`.
    OSError when it cannot be started. `cwd_fd`: see `Runner.run`."""
    env = dict(os.environ if spec.env is None else spec.env)
    cwd = spec.cwd
    if cwd_fd is not None and os.path.isdir(f"/proc/self/fd/{cwd_fd}"):
        cwd = f"/proc/self/fd/{cwd_fd}"
    if spec.pty is not None:
        return _start_in_terminal(spec, owner, env, cwd)
    stdin_file = None
    try:
        if spec.stdin_data is not None:
            stdin_file = tempfile.TemporaryFile()
            stdin_file.write(spec.stdin_data)
            stdin_file.seek(0)
        # Popen rather than the event loop's subprocess support: asyncio's wait() only returns once every
        # pipe is closed, which a background child (`cmd &`) can delay forever.
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
    finally:
        if stdin_file is not None:
            stdin_file.close()
    group = Group(process.pid, owner)
    register(group)
    if spec.data_limit is not None:
        _limit_memory(process.pid, spec.data_limit)
    if spec.pipe_size is not None and process.stdout is not None:
        _widen_pipe(process.stdout.fileno(), spec.pipe_size)
    return process, group


def terminal_argv(argv: list[str]) -> list[str]:
    """`argv` made the session leader of the terminal it is given as stdin (`setsid --ctty`), so that what
    opens /dev/tty (a password prompt, `read -s`) finds it and Ctrl-C written to the terminal reaches it.
    Meant for the innermost command, inside any sandbox wrapper (bubblewrap starts a session of its own,
    which has no terminal); `setsid` forks as the group leader it is, waits (`--wait`) and passes on the
    exit status, and stays in the run's process tree. Where util-linux's setsid is missing, `argv` as it
    is: the program still reads and writes the terminal, only /dev/tty is missing."""
    setsid = shutil.which("setsid")
    return [setsid, "--ctty", "--wait", *argv] if setsid else list(argv)


def _start_in_terminal(spec: RunSpec, owner: int, env: dict[str, str],
                       cwd: str | None) -> tuple[subprocess.Popen, Group]:  # fmt: skip
    """`_start` with a new pseudo-terminal as stdin, stdout and stderr, of `spec.pty`'s size."""
    import fcntl
    import struct
    import termios

    assert spec.pty is not None
    rows, columns = spec.pty
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env["TERM"] = "xterm"
        env["COLUMNS"], env["LINES"] = str(columns), str(rows)
        process = subprocess.Popen(spec.argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                   start_new_session=True, pass_fds=spec.pass_fds)  # fmt: skip
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    os.set_inheritable(master, False)
    os.set_blocking(master, False)
    process.stdout = open(master, "r+b", buffering=0)  # noqa: SIM115 - closed with the process's pipes
    group = Group(process.pid, owner)
    register(group)
    if spec.data_limit is not None:
        _limit_memory(process.pid, spec.data_limit)
    return process, group


def _widen_pipe(fd: int, size: int) -> None:
    """Give the pipe at `fd` a buffer of `size` bytes where the kernel allows (Linux): a program that writes
    much (ripgrep) blocks less often, and each read takes more at once. Best effort: the system's limits
    (`/proc/sys/fs/pipe-max-size`, a user's total) may refuse it."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError):
        pass


def _limit_memory(pid: int, data_limit: int) -> None:
    """Cap the private memory of the program just started (`RLIMIT_DATA`: since Linux 4.7 its private
    writable mappings, the heap and anonymous maps, not the files it maps to read), and leave no core dump
    when it aborts on a failed allocation.

    Set with `prlimit` once `Popen` returns (the exec has happened) rather than in the child before the
    exec: `preexec_fn` is unsafe in a threaded server and turns every spawn into a full fork (2-5 ms against
    about 1 ms here). The window is the few microseconds between the two, which the program spends starting
    up; from then on each mapping past the cap fails."""
    try:
        resource.prlimit(pid, resource.RLIMIT_DATA, (data_limit, data_limit))
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
    except ProcessLookupError:  # already gone: nothing left to bound
        pass


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


async def _watch(process: subprocess.Popen, group: Group, spec: RunSpec, state: _State) -> None:
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
    kill_group(group, signal.SIGTERM)
    with anyio.move_on_after(spec.kill_grace):
        while process.poll() is None or scan(group):
            await anyio.sleep(0.02)
    kill_group(group, signal.SIGKILL)
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
