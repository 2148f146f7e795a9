"""Background commands: run_shell_command with `is_background`.

A background command starts exactly like any other run (`Runner.spawn`: its own session and process
group, the same environment, the same sandbox), and a thread of its own then copies both output streams,
in arrival order, to a log file in the runner's scratch area, where the file tools can read it. The call
that started it waits a short delay and either returns the normal result (the command already finished)
or reports the PID and the log (`BackgroundJob.detach`); the command runs on either way.

Bounds, because the server is a daemon that may run for weeks:

* at most `Limits.max_jobs` background commands at once per server (`TooManyJobs` beyond);
* a log file stops growing at `Limits.log_cap` bytes (the rest is read and discarded, and the log says so);
* a command is stopped after `Limits.lifetime` seconds (SIGTERM to its group, SIGKILL after a grace; the
  log says so), and so is anything of its group still running after it exited;
* the runner's owner stops every job when it closes (`BackgroundJobs.aclose`), and the process-group
  safety net kills what is left if the server dies.

The leader is reaped by its thread; the log records how it ended, and then what the job's `epilogue` says
once nothing of the command is left (the shell tool names the git settings it changed).

A job is a first-class object of its session (`SessionJobs`, found in the session's scope under `JOBS_KEY`):
the tools that list, read, answer and stop background processes find it there by PID, and never find
another session's. A finished job's record stays, for at most `FINISHED_KEPT` jobs and `FINISHED_AGE`
seconds, so its end and output can still be read. Besides the lifetime, a job nobody has looked at (listed,
read, written to) for `Limits.idle` seconds is stopped, and the server as a whole runs at most
`Slots.limit` jobs of all its sessions.

In a terminal (`RunSpec.pty`, the shell's `--background-tty`), the command's stdin, stdout and stderr
are a pseudo-terminal, so it can prompt and be answered (`write`); its output goes through a terminal
emulator (`terminal.Terminal`) and the log holds the text a person would have seen, line by line as lines
scroll off the screen, while the screen itself is read live (`screen`). Reading never waits on the
program: the thread drains the terminal whether or not anyone reads it, and past the log cap (or
`SCREEN_CAP_FACTOR` times as much raw output, for a screen redrawn in place) stops rendering and discards.
Emulation costs CPU by the byte: past `Limits.render_cpu` CPU-seconds a job's output goes to the log as plain
text (`strip_ansi`), as a command without a terminal's does, and the log says so.
"""

from __future__ import annotations

import codecs
import logging
import os
import select
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from coretools.sandbox import diskio
from coretools.sandbox.process_groups import Group, kill_group, scan, unregister
from coretools.sandbox.runner import DEFAULT_KILL_GRACE, BINARY_SNIFF, Outcome, Runner, RunSpec, Stream, strip_ansi
from coretools.sandbox.scratch import ScratchArea

if TYPE_CHECKING:
    from coretools.workspace.terminal import Terminal

DEFAULT_MAX_JOBS = 8
DEFAULT_MAX_SERVER_JOBS = 32
DEFAULT_LIFETIME = 3600.0
FINISHED_KEPT = 16  # finished jobs whose record a session keeps
FINISHED_AGE = 3600.0  # seconds a finished job's record is kept
QUIET = 0.5  # seconds without output after which a prompt on the screen is taken to wait for input
INPUT_WAIT = 2.0  # seconds a write waits for a program that does not read its terminal
JOBS_KEY = "background-jobs"
TERMINAL_SIZE = (30, 120)  # rows and columns of a job's pseudo-terminal
SCREEN_CAP_FACTOR = 4  # a terminal's screen follows at most this many times the log cap of raw output
DEFAULT_RENDER_CPU = 2.0  # CPU-seconds a job's terminal emulator may spend; then its output is logged as plain text
INITIAL_KEPT = 256 * 1024  # bytes of combined output kept in memory for the reply, while the call waits
LEFTOVER_POLL = 1.0  # seconds between two looks for group members left after the leader exited
ABANDON_AFTER = 5.0  # seconds after the kill to stop waiting for the end of output that never comes
CANONICAL_LINE = 4095  # bytes of one line a terminal in canonical mode keeps (Linux's N_TTY_BUF_SIZE - 1)
logger = logging.getLogger("coretools")


@dataclass(frozen=True)
class Limits:
    max_jobs: int = DEFAULT_MAX_JOBS  # per session
    lifetime: float | None = DEFAULT_LIFETIME
    log_cap: int = 16 * 1024 * 1024
    idle: float | None = None  # stop a job nobody looked at for this long
    render_cpu: float = DEFAULT_RENDER_CPU  # CPU-seconds of terminal emulation per job (`BackgroundJob._take`)


class TooManyJobs(Exception):
    def __init__(self, jobs: list[BackgroundJob], server_limit: int | None = None) -> None:
        super().__init__(f"{len(jobs)} background commands are running")
        self.jobs = jobs
        self.server_limit = server_limit  # set when the server's limit, not the session's, was reached


class Slots:
    """The server's count of live background jobs, shared by its sessions (at most `limit`)."""

    def __init__(self, limit: int = DEFAULT_MAX_SERVER_JOBS) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._used >= self.limit:
                return False
            self._used += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._used = max(self._used - 1, 0)


@dataclass(frozen=True)
class Snapshot:
    """A terminal job's screen (`lines`, down to the last with text; the cursor on `cursor_row`) and the
    log it continues: `scrolled` lines, `log_size` bytes."""

    lines: list[str]
    cursor_row: int
    scrolled: int
    log_size: int


class BackgroundJob:
    """One background command: its process, its log, and the thread that serves them."""

    def __init__(self, process: subprocess.Popen, group: Group, spec: RunSpec, area: ScratchArea,
                 log: tuple[int, str], limits: Limits, on_done: Callable[[BackgroundJob], None],
                 epilogue: Callable[[], str] | None = None) -> None:  # fmt: skip
        self.argv = list(spec.argv)
        self.label = " ".join(self.argv)
        self.pid, self.pgid = process.pid, group.pgid
        self.log_fd, self.log_path = log
        self.started = self.last_output = self.touched = time.monotonic()
        self.ended: float | None = None
        self.received = 0  # bytes the command wrote, all of them
        self.log_size = 0  # bytes in the log, its own notes included
        self.read_mark = 0  # where the session's last read of the log ended (a byte offset)
        self.read_line = 0  # the number of lines before `read_mark` (a terminal's)
        self.shown_line = 0  # a terminal's lines, counted from its first, that a read has shown
        self.scrolled = 0  # a terminal's lines that left its screen for the log
        self.reported = False  # its result was given whole (it ended while its call waited): keep no record
        self.terminal: Terminal | None = None
        if spec.pty is not None:
            from coretools.workspace.terminal import Terminal

            rows, columns = spec.pty
            self.terminal = Terminal(self._line, self._answer, rows=rows, columns=columns)
        self.stdout, self.stderr = Stream("stdout"), Stream("stderr")
        self.initial = bytearray()
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.stopped: str | None = None  # "lifetime" | "shutdown" | "cancelled" | "failed" ...
        self.failure: str | None = None  # why the server stopped following it (`_fail`)
        self.exited = threading.Event()  # the leader is reaped and both streams are closed
        self.done = threading.Event()  # nothing of the command is left and the log is closed
        self._process, self._group, self._spec, self._area = process, group, spec, area
        self._limits, self._on_done, self._epilogue = limits, on_done, epilogue
        self._attached = True
        self._terminated_at: float | None = None
        self._first_signal, self._grace = signal.SIGTERM, DEFAULT_KILL_GRACE
        self._logged = 0
        self._render_left = limits.render_cpu
        self._plain: codecs.IncrementalDecoder | None = None  # past the rendering budget: output decoded as is
        self._lock = threading.Lock()
        self._screen_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name=f"coretools-background-{self.pid}", daemon=True)
        self._thread.start()

    # -- what the caller sees --------------------------------------------------------------------------

    def detach(self) -> str:
        """Stop keeping output in memory (the log has it all); return the combined output so far."""
        with self._lock:
            self._attached = False
            text = strip_ansi(bytes(self.initial).decode("utf-8", "replace"))
            self.initial = bytearray()
            self.stdout.data, self.stderr.data = bytearray(), bytearray()
        shot = self.snapshot()
        self.read_mark = self.log_size
        if shot is not None:
            text += "\n".join(shot.lines)
            self.shown_line, self.read_line = shot.scrolled + shot.cursor_row, shot.scrolled
            self.read_mark = shot.log_size
        return text

    def outcome(self) -> Outcome:
        """The result of a command that finished while the call waited, as a foreground run gives it."""
        outcome = Outcome(self.argv, self.stdout, self.stderr, pid=self.pid, pgid=self.pgid)
        outcome.exit_code, outcome.signal = self.exit_code, self.signal
        outcome.seconds = time.monotonic() - self.started
        outcome.stopped = "timeout" if self.stopped == "lifetime" else None
        outcome.background_pids = [p for p in scan(self._group) if p != self.pid]
        return outcome

    def stop(self, reason: str, signum: int = signal.SIGTERM, grace: float = DEFAULT_KILL_GRACE) -> None:
        """Ask the thread to stop the command (`signum` to its whole process tree, SIGKILL to what is left
        after `grace` seconds); returns at once."""
        if self.stopped is None:
            self.stopped = reason
            self._first_signal, self._grace = signum, grace
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def kill_now(self, reason: str) -> None:
        """SIGKILL the whole group at once (the call that started it was cancelled)."""
        self.stopped = self.stopped or reason
        kill_group(self._group, signal.SIGKILL)
        self.stop(reason)

    def join(self, timeout: float) -> bool:
        return self.done.wait(timeout)

    def touch(self) -> None:
        """The session looked at the job (the idle limit counts from here)."""
        self.touched = time.monotonic()
        try:
            os.write(self._wake_w, b"t")  # the thread recomputes its deadline
        except OSError:
            pass

    @property
    def state(self) -> str:
        if not self.exited.is_set():
            return "stopping" if self._terminated_at is not None else "running"
        return "killed" if self.signal is not None or self.stopped is not None else "exited"

    def screen(self) -> str | None:
        """A running terminal job's screen as text, or None."""
        shot = self.snapshot()
        return None if shot is None else "\n".join(shot.lines)

    def snapshot(self) -> Snapshot | None:
        """A running terminal job's screen with the log it continues, taken together; None otherwise."""
        if self.terminal is None or self.exited.is_set() or self._plain is not None:
            return None
        with self._screen_lock:
            terminal = self.terminal
            return Snapshot(terminal.screen_lines(), terminal.cursor_row, self.scrolled, self.log_size)

    def waiting_for_input(self) -> bool:
        """Probably waiting for input: a terminal job, quiet for a while, its cursor after a prompt."""
        if self.terminal is None or self.exited.is_set() or time.monotonic() - self.last_output < QUIET:
            return False
        with self._screen_lock:
            return self.terminal.waiting_for_input()

    def read_log(self, start: int, limit: int) -> bytes:
        """Up to `limit` bytes of the log from `start`; OSError when the log is gone (removed with its
        area's oldest files, or the job's result was given whole)."""
        name = os.path.basename(self.log_path)
        fd = self._area.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            return os.pread(fd, max(limit, 0), max(start, 0))
        finally:
            os.close(fd)

    def line_room(self) -> int | None:
        """The bytes of one typed line the program can receive: `CANONICAL_LINE` while it reads its terminal
        in canonical mode (termios ICANON: the terminal edits the line and drops what does not fit, as for a
        shell's `read`), None otherwise (raw mode: a line editor, a REPL with readline, a full-screen
        program read every byte)."""
        pipe = self._process.stdout
        if self.terminal is None or pipe is None or self.exited.is_set():
            return None
        try:
            return CANONICAL_LINE if termios.tcgetattr(pipe.fileno())[3] & termios.ICANON else None
        except (termios.error, OSError, ValueError):  # the terminal is closed: the program ended
            return None

    def write(self, data: bytes) -> int:
        """Type `data` into the terminal; the bytes taken, fewer when the program has not read its input
        for `INPUT_WAIT` seconds (the terminal's buffer is full). ValueError without a terminal."""
        pipe = self._process.stdout
        if self.terminal is None or pipe is None:
            raise ValueError("not in a terminal")
        sent, end = 0, time.monotonic() + INPUT_WAIT
        while sent < len(data) and not self.exited.is_set() and time.monotonic() < end:
            try:
                sent += os.write(pipe.fileno(), data[sent : sent + 1024])
            except BlockingIOError:
                time.sleep(0.02)
            except (OSError, ValueError):  # the terminal is closed: the program ended
                break
        return sent

    # -- the thread ------------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            self._copy_output()
            self._note_end()
            self._watch_leftovers()
            self._note_epilogue()
        except Exception as exc:  # noqa: BLE001 - the job must end with a reason, never vanish
            self._fail(exc)
        finally:
            self._finish()

    def _fail(self, exc: Exception) -> None:
        """Following the command failed (a bug, not the command's doing): stop all of it and say why in
        the log and in `failure`, which the tools show, rather than leave a command nobody reads."""
        self.failure = f"{type(exc).__name__}: {str(exc)[:200]}"
        logger.error("background command %d: following it failed (%s); it was stopped", self.pid, self.failure)
        self.stopped = self.stopped or "failed"
        kill_group(self._group, signal.SIGKILL)
        code = self._process.wait()
        self.exit_code, self.signal = (None, -code) if code < 0 else (code, None)
        self.ended = self.ended or time.monotonic()
        self._log(f"\n[coretools: the server failed to follow the command ({self.failure}); it was stopped "
                  "(SIGKILL to its process group) and what it wrote after this point is lost]\n".encode())  # fmt: skip

    def _deadline(self) -> float | None:
        ends = [self.started + self._limits.lifetime if self._limits.lifetime else None,
                self.touched + self._limits.idle if self._limits.idle else None]  # fmt: skip
        return min((end for end in ends if end is not None), default=None)

    def _copy_output(self) -> None:
        process = self._process
        sinks = {pipe.fileno(): sink for pipe, sink in ((process.stdout, self.stdout), (process.stderr, self.stderr))
                 if pipe is not None}  # fmt: skip
        idle = 0.02
        while sinks or process.poll() is None:
            if self._stop_due():
                self._terminate()
            if self._terminated_at is not None and time.monotonic() - self._terminated_at > ABANDON_AFTER:
                break  # a killed command's pipe held open by something that escaped the group: stop reading
            if sinks:
                wait = self._until_deadline()
            else:  # output closed, leader still running: poll for its exit, less often as time goes by
                wait, idle = idle, min(idle * 2, LEFTOVER_POLL)
            if self._terminated_at is not None:
                wait = 0.1
            ready, _, _ = select.select([*sinks, self._wake_r], [], [], wait)
            for fd in ready:
                if fd == self._wake_r:
                    os.read(fd, 64)
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:  # a terminal whose every other end is closed (EIO): its end of output
                    chunk = b""
                if chunk:
                    self._take(chunk, sinks[fd])
                else:
                    del sinks[fd]
        if self.terminal is not None:
            with self._screen_lock:
                self.terminal.flush()
        code = process.wait()
        self.ended = time.monotonic()
        self.exit_code, self.signal = (None, -code) if code < 0 else (code, None)
        self.exited.set()

    def _stop_due(self) -> bool:
        deadline = self._deadline()
        if self.stopped is None and deadline is not None and time.monotonic() >= deadline:
            lifetime = self._limits.lifetime
            self.stopped = "lifetime" if lifetime and time.monotonic() >= self.started + lifetime else "idle"
        return self.stopped is not None and self._terminated_at is None

    def _until_deadline(self) -> float | None:
        deadline = self._deadline()
        return None if deadline is None or self.stopped else max(deadline - time.monotonic(), 0.0)

    def _terminate(self) -> None:
        """SIGTERM (or the signal `stop` was given) to the group, SIGKILL to whatever is left after the
        grace (reaping the leader meanwhile)."""
        self._terminated_at = time.monotonic()
        kill_group(self._group, self._first_signal)
        end = time.monotonic() + self._grace
        while time.monotonic() < end and (self._process.poll() is None or scan(self._group)):
            time.sleep(0.02)
        kill_group(self._group, signal.SIGKILL)

    def _take(self, chunk: bytes, sink: Stream) -> None:
        self.received += len(chunk)
        self.last_output = time.monotonic()
        if self.terminal is not None:  # what it draws is kept and logged, line by line (`_line`)
            cap = self._limits.log_cap
            if self._plain is not None:
                if self._logged < cap:
                    data = strip_ansi(self._plain.decode(chunk)).replace("\r\n", "\n").encode()
                    self._keep(data, self.stdout)
                    self._capped_log(data)
                return
            if self._logged < cap and self.received - len(chunk) <= cap * SCREEN_CAP_FACTOR:
                spent = time.thread_time()
                with self._screen_lock:
                    faults = self.terminal.faults
                    self.terminal.feed(chunk)
                self._render_left -= time.thread_time() - spent
                if faults == 0 and self.terminal.faults:
                    self._log(b"\n[coretools: the terminal emulator failed on the command's output; the rest of "
                              b"that piece of output is not shown (this is said once)]\n")  # fmt: skip
                if self._render_left <= 0:
                    self._stop_rendering()
                elif self.received > cap * SCREEN_CAP_FACTOR:  # a screen redrawn in place forever logs little
                    self._log(f"\n[coretools: the command wrote more than {cap * SCREEN_CAP_FACTOR:,} bytes to its "
                              "terminal; its screen is no longer followed while it runs on]\n".encode())  # fmt: skip
            return
        self._keep(chunk, sink)
        self._capped_log(chunk)

    def _stop_rendering(self) -> None:
        """The emulator spent the job's budget (`Limits.render_cpu`; it costs about a third of a CPU-microsecond
        a byte): the screen goes to the log, and the output after it as plain text, controls removed."""
        assert self.terminal is not None
        with self._screen_lock:
            self.terminal.flush()
        self._plain = codecs.getincrementaldecoder("utf-8")("replace")
        self._log(f"\n[coretools: following the command's terminal screen took {self._limits.render_cpu:g} "
                  "CPU-seconds, its budget; its output goes on to the log as plain text, escape sequences removed, "
                  "and the screen is no longer shown]\n".encode())  # fmt: skip

    def _keep(self, data: bytes, sink: Stream) -> None:
        with self._lock:
            if self._attached:
                sink.received += len(data)
                sniffed = data[: max(BINARY_SNIFF - len(sink.data), 0)]
                sink.binary = sink.binary or b"\0" in sniffed
                room = self._spec.output_cap - len(self.stdout.data) - len(self.stderr.data)
                sink.data += data[: max(room, 0)]
                self.initial += data[: max(INITIAL_KEPT - len(self.initial), 0)]

    def _capped_log(self, data: bytes) -> None:
        room = self._limits.log_cap - self._logged
        if room > 0:
            self._log(data[:room])
            self._logged += min(len(data), room)
            if len(data) > room:
                self._log(f"\n[coretools: the log reached its cap of {self._limits.log_cap:,} bytes; further output "
                          "is discarded while the command runs on]\n".encode())  # fmt: skip

    def _line(self, text: str) -> None:
        """A line the terminal's screen let go of (scrolled off, or left when the program ended)."""
        self.scrolled += 1
        data = f"{text}\n".encode("utf-8", "replace")
        self._keep(data, self.stdout)
        self._capped_log(data)

    def _answer(self, data: bytes) -> None:
        """The terminal's answer to a program's query (cursor position, device attributes)."""
        try:
            self.write(data)
        except ValueError:
            pass

    def _log(self, data: bytes) -> None:
        try:
            diskio.write_all(self.log_fd, data)
            self.log_size += len(data)
        except OSError:  # a full disk must not stop the command: its output is then lost
            pass

    def _note_end(self) -> None:
        seconds = time.monotonic() - self.started
        how = f"exited with code {self.exit_code}" if self.signal is None else f"was ended by signal {self.signal}"
        why = {
            "lifetime": f"; it was stopped after {self._limits.lifetime:g} s, the limit for background commands "
            "(--background-timeout): its process group was sent SIGTERM, then SIGKILL",
            "shutdown": "; it was stopped because the server shut down",
            "idle": f"; it was stopped because nothing looked at it for {self._limits.idle or 0:g} s, the idle "
            "limit for background commands (--background-idle-timeout)",
            "requested": f"; it was stopped on request (signal {int(self._first_signal)}, then SIGKILL after "
            f"{self._grace:g} s to what was left)",
            "cancelled": "; it was stopped because the call that started it was cancelled",
        }.get(self.stopped or "", "")
        self._log(f"\n[coretools: the command {how} after {seconds:.1f} s{why}]\n".encode())

    def _watch_leftovers(self) -> None:
        """Members of the group still running after the leader exited stay bounded by the lifetime."""
        while scan(self._group):
            if self._stop_due():
                self._terminate()
                return
            wait = self._until_deadline()
            wait = LEFTOVER_POLL if wait is None else min(wait, LEFTOVER_POLL)
            ready, _, _ = select.select([self._wake_r], [], [], wait)
            if ready:
                os.read(self._wake_r, 64)

    def _note_epilogue(self) -> None:
        """What the owner has to say once nothing of the command runs any more, at the log's end."""
        if self._epilogue is None:
            return
        try:
            text = self._epilogue()
        except Exception:  # the log must still be closed and the job forgotten
            logger.exception("background command %d: its epilogue failed", self.pid)
            return
        if text:
            self._log(f"\n[coretools: {text}]\n".encode())

    def _finish(self) -> None:
        if self._process.poll() is None:  # only after an unexpected error: never leave the leader behind
            kill_group(self._group, signal.SIGKILL)
            self._process.wait()
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()
        for fd in (self.log_fd, self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if not scan(self._group):
            unregister(self.pgid)
        if self._spec.on_exit is not None:
            self._spec.on_exit(None)
        self._area.release(self.log_path)
        self.exited.set()
        self.done.set()
        self._on_done(self)


class BackgroundJobs:
    """The background commands of one owner (the shell tool of a session): the running ones, and the
    records of those that finished (at most `FINISHED_KEPT`, for `FINISHED_AGE` seconds)."""

    def __init__(self, runner: Runner, limits: Limits, slots: Slots | None = None) -> None:
        self.runner, self.limits, self.slots = runner, limits, slots
        self._jobs: dict[int, BackgroundJob] = {}
        self._finished: dict[int, BackgroundJob] = {}
        self._lock = threading.Lock()
        self._reserved = 0
        self._closed = False  # its owner closed it: nothing more is kept or found

    def running(self) -> list[BackgroundJob]:
        with self._lock:
            return list(self._jobs.values())

    def every(self) -> list[BackgroundJob]:
        """The running jobs and the finished ones still on record, oldest first."""
        with self._lock:
            self._expire()
            jobs = [job for job in (*self._jobs.values(), *self._finished.values()) if not job.reported]
            if self._closed:
                return []
            return sorted(jobs, key=lambda job: job.started)

    def find(self, pid: int) -> BackgroundJob | None:
        with self._lock:
            self._expire()
            job = self._jobs.get(pid) or self._finished.get(pid)
            return None if job is None or job.reported or self._closed else job

    def start(self, spec: RunSpec, *, cwd_fd: int | None = None, label: str = "",
              epilogue: Callable[[], str] | None = None) -> BackgroundJob:  # fmt: skip
        """Start `spec` in the background (its own timeouts are ignored: the job's lifetime applies);
        `label` is what reports call it, `epilogue` gives the text that ends its log. `TooManyJobs` at the
        session's or the server's limit; OSError when it cannot be started."""
        with self._lock:
            if len(self._jobs) + self._reserved >= self.limits.max_jobs:
                raise TooManyJobs(list(self._jobs.values()))
            if self.slots is not None and not self.slots.take():
                raise TooManyJobs(list(self._jobs.values()), self.slots.limit)
            self._reserved += 1
        started = False
        try:
            area = self.runner.saved
            log = area.create("background", ".log")
            area.hold(log[1])
            try:
                process, group = self.runner.spawn(spec, cwd_fd=cwd_fd)
            except BaseException:
                os.close(log[0])
                area.release(log[1])
                os.unlink(log[1])
                raise
            for pipe in (process.stdout, process.stderr):
                if pipe is not None and spec.pty is None:
                    os.set_blocking(pipe.fileno(), True)
            job = BackgroundJob(process, group, spec, area, log, self.limits, self._forget, epilogue)
            started = True
            job.label = label or " ".join(spec.argv)
            with self._lock:
                if self._finished.get(job.pid) is not job:  # a finished job's PID the system gave again
                    self._finished.pop(job.pid, None)
                if not job.done.is_set():
                    self._jobs[job.pid] = job
            return job
        finally:
            with self._lock:
                self._reserved -= 1
            if not started and self.slots is not None:
                self.slots.give_back()

    def given_whole(self, job: BackgroundJob) -> None:
        """`job` ended while its call waited and its result was given whole: keep no record of it."""
        with self._lock:
            job.reported = True
            if self._finished.get(job.pid) is job:
                del self._finished[job.pid]

    def _forget(self, job: BackgroundJob) -> None:
        with self._lock:
            self._jobs.pop(job.pid, None)
            if not job.reported and not self._closed:
                self._finished[job.pid] = job
            while len(self._finished) > FINISHED_KEPT:
                del self._finished[next(iter(self._finished))]
        if self.slots is not None:
            self.slots.give_back()

    def _expire(self) -> None:
        now = time.monotonic()
        for pid, job in list(self._finished.items()):
            if job.ended is None or now - job.ended > FINISHED_AGE:
                del self._finished[pid]

    def kill_all(self) -> None:
        """SIGKILL every job at once (its session ended without a chance to wait)."""
        with self._lock:
            self._closed = True
            self._finished.clear()
        for job in self.running():
            job.kill_now("shutdown")

    async def aclose(self) -> None:
        """Stop every job (the log says the server shut down) and wait for their threads, briefly."""
        with self._lock:
            self._closed = True
            self._finished.clear()
        jobs = self.running()
        for job in jobs:
            job.stop("shutdown")
        end = time.monotonic() + DEFAULT_KILL_GRACE + 2
        for job in jobs:
            await anyio.to_thread.run_sync(job.join, max(end - time.monotonic(), 0.0))


class SessionJobs:
    """The background jobs of one session, kept in its scope under `JOBS_KEY`, where the tools that list,
    read, answer and stop them look (a session's scope is its own: no other session finds them). The shell
    that starts them adds its `BackgroundJobs` and closes them; this only finds them."""

    def __init__(self) -> None:
        self._owners: list[BackgroundJobs] = []
        self._lock = threading.Lock()

    def add(self, jobs: BackgroundJobs) -> None:
        with self._lock:
            if jobs not in self._owners:
                self._owners.append(jobs)

    def every(self) -> list[BackgroundJob]:
        with self._lock:
            owners = list(self._owners)
        return sorted((job for jobs in owners for job in jobs.every()), key=lambda job: job.started)

    def find(self, pid: int) -> BackgroundJob | None:
        with self._lock:
            owners = list(self._owners)
        return next((job for jobs in owners if (job := jobs.find(pid)) is not None), None)

    def close_now(self) -> None:
        with self._lock:
            self._owners.clear()

    async def aclose(self) -> None:
        self.close_now()
