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
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from coretools.sandbox import diskio
from coretools.sandbox.process_groups import Group, kill_group, scan, unregister
from coretools.sandbox.runner import DEFAULT_KILL_GRACE, BINARY_SNIFF, Outcome, Runner, RunSpec, Stream, strip_ansi
from coretools.sandbox.scratch import ScratchArea

DEFAULT_MAX_JOBS = 8
DEFAULT_LIFETIME = 3600.0
INITIAL_KEPT = 256 * 1024  # bytes of combined output kept in memory for the reply, while the call waits
LEFTOVER_POLL = 1.0  # seconds between two looks for group members left after the leader exited
ABANDON_AFTER = 5.0  # seconds after the kill to stop waiting for the end of output that never comes
logger = logging.getLogger("coretools")


@dataclass(frozen=True)
class Limits:
    max_jobs: int = DEFAULT_MAX_JOBS
    lifetime: float | None = DEFAULT_LIFETIME
    log_cap: int = 16 * 1024 * 1024


class TooManyJobs(Exception):
    def __init__(self, jobs: list[BackgroundJob]) -> None:
        super().__init__(f"{len(jobs)} background commands are running")
        self.jobs = jobs


class BackgroundJob:
    """One background command: its process, its log, and the thread that serves them."""

    def __init__(self, process: subprocess.Popen, group: Group, spec: RunSpec, area: ScratchArea,
                 log: tuple[int, str], limits: Limits, on_done: Callable[[BackgroundJob], None],
                 epilogue: Callable[[], str] | None = None) -> None:  # fmt: skip
        self.argv = list(spec.argv)
        self.label = " ".join(self.argv)
        self.pid, self.pgid = process.pid, group.pgid
        self.log_fd, self.log_path = log
        self.started = time.monotonic()
        self.stdout, self.stderr = Stream("stdout"), Stream("stderr")
        self.initial = bytearray()
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.stopped: str | None = None  # "lifetime" | "shutdown" | "cancelled"
        self.exited = threading.Event()  # the leader is reaped and both streams are closed
        self.done = threading.Event()  # nothing of the command is left and the log is closed
        self._process, self._group, self._spec, self._area = process, group, spec, area
        self._limits, self._on_done, self._epilogue = limits, on_done, epilogue
        self._attached = True
        self._terminated_at: float | None = None
        self._logged = 0
        self._lock = threading.Lock()
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
        return text

    def outcome(self) -> Outcome:
        """The result of a command that finished while the call waited, as a foreground run gives it."""
        outcome = Outcome(self.argv, self.stdout, self.stderr, pid=self.pid, pgid=self.pgid)
        outcome.exit_code, outcome.signal = self.exit_code, self.signal
        outcome.seconds = time.monotonic() - self.started
        outcome.stopped = "timeout" if self.stopped == "lifetime" else None
        outcome.background_pids = [p for p in scan(self._group) if p != self.pid]
        return outcome

    def stop(self, reason: str) -> None:
        """Ask the thread to stop the command (SIGTERM, then SIGKILL); returns at once."""
        if self.stopped is None:
            self.stopped = reason
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

    # -- the thread ------------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            self._copy_output()
            self._note_end()
            self._watch_leftovers()
            self._note_epilogue()
        finally:
            self._finish()

    def _deadline(self) -> float | None:
        return self.started + self._limits.lifetime if self._limits.lifetime else None

    def _copy_output(self) -> None:
        process = self._process
        assert process.stdout is not None and process.stderr is not None
        sinks = {process.stdout.fileno(): self.stdout, process.stderr.fileno(): self.stderr}
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
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    self._take(chunk, sinks[fd])
                else:
                    del sinks[fd]
        code = process.wait()
        self.exit_code, self.signal = (None, -code) if code < 0 else (code, None)
        self.exited.set()

    def _stop_due(self) -> bool:
        deadline = self._deadline()
        if self.stopped is None and deadline is not None and time.monotonic() >= deadline:
            self.stopped = "lifetime"
        return self.stopped is not None and self._terminated_at is None

    def _until_deadline(self) -> float | None:
        deadline = self._deadline()
        return None if deadline is None or self.stopped else max(deadline - time.monotonic(), 0.0)

    def _terminate(self) -> None:
        """SIGTERM to the group, SIGKILL to whatever is left after the grace (reaping the leader meanwhile)."""
        self._terminated_at = time.monotonic()
        kill_group(self._group, signal.SIGTERM)
        end = time.monotonic() + DEFAULT_KILL_GRACE
        while time.monotonic() < end and (self._process.poll() is None or scan(self._group)):
            time.sleep(0.02)
        kill_group(self._group, signal.SIGKILL)

    def _take(self, chunk: bytes, sink: Stream) -> None:
        with self._lock:
            if self._attached:
                sink.received += len(chunk)
                sniffed = chunk[: max(BINARY_SNIFF - len(sink.data), 0)]
                sink.binary = sink.binary or b"\0" in sniffed
                room = self._spec.output_cap - len(self.stdout.data) - len(self.stderr.data)
                sink.data += chunk[: max(room, 0)]
                self.initial += chunk[: max(INITIAL_KEPT - len(self.initial), 0)]
        room = self._limits.log_cap - self._logged
        if room > 0:
            self._log(chunk[:room])
            self._logged += min(len(chunk), room)
            if len(chunk) > room:
                self._log(f"\n[coretools: the log reached its cap of {self._limits.log_cap:,} bytes; further output "
                          "is discarded while the command runs on]\n".encode())  # fmt: skip

    def _log(self, data: bytes) -> None:
        try:
            diskio.write_all(self.log_fd, data)
        except OSError:  # a full disk must not stop the command: its output is then lost
            pass

    def _note_end(self) -> None:
        seconds = time.monotonic() - self.started
        how = f"exited with code {self.exit_code}" if self.signal is None else f"was ended by signal {self.signal}"
        why = {
            "lifetime": f"; it was stopped after {self._limits.lifetime:g} s, the limit for background commands "
            "(--background-timeout): its process group was sent SIGTERM, then SIGKILL",
            "shutdown": "; it was stopped because the server shut down",
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
    """The background commands of one owner (the shell tool of a server)."""

    def __init__(self, runner: Runner, limits: Limits) -> None:
        self.runner, self.limits = runner, limits
        self._jobs: dict[int, BackgroundJob] = {}
        self._lock = threading.Lock()
        self._reserved = 0

    def running(self) -> list[BackgroundJob]:
        with self._lock:
            return list(self._jobs.values())

    def start(self, spec: RunSpec, *, cwd_fd: int | None = None, label: str = "",
              epilogue: Callable[[], str] | None = None) -> BackgroundJob:  # fmt: skip
        """Start `spec` in the background (its own timeouts are ignored: the job's lifetime applies);
        `label` is what reports call it, `epilogue` gives the text that ends its log. `TooManyJobs` at the
        limit; OSError when it cannot be started."""
        with self._lock:
            if len(self._jobs) + self._reserved >= self.limits.max_jobs:
                raise TooManyJobs(list(self._jobs.values()))
            self._reserved += 1
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
                os.set_blocking(pipe.fileno(), True)
            job = BackgroundJob(process, group, spec, area, log, self.limits, self._forget, epilogue)
            job.label = label or " ".join(spec.argv)
            with self._lock:
                if not job.done.is_set():
                    self._jobs[job.pid] = job
            return job
        finally:
            with self._lock:
                self._reserved -= 1

    def _forget(self, job: BackgroundJob) -> None:
        with self._lock:
            self._jobs.pop(job.pid, None)

    def kill_all(self) -> None:
        """SIGKILL every job at once (its session ended without a chance to wait)."""
        for job in self.running():
            job.kill_now("shutdown")

    async def aclose(self) -> None:
        """Stop every job (the log says the server shut down) and wait for their threads, briefly."""
        jobs = self.running()
        for job in jobs:
            job.stop("shutdown")
        end = time.monotonic() + DEFAULT_KILL_GRACE + 2
        for job in jobs:
            await anyio.to_thread.run_sync(job.join, max(end - time.monotonic(), 0.0))
