"""What the background-process tools share: finding one of the session's background commands by PID, the
line that describes one, and reading its output to the result budget.

The tools (`list_background_processes`, `read_background_output`, `write_background_input`,
`stop_background_process`) work on the jobs `run_shell_command` started with `is_background`, which are
kept per session (`workspace.SessionJobs`): a PID that is not one of the calling session's is answered as
not found, never as another session's.

Output is read from the job's log by byte offset, so a read can continue exactly where the last one ended
(`Job.read_mark`, per job and so per session) or where the model says (`offset`), and every answer gives the
true sizes and the offset to go on from. A job in a terminal also has a live screen: its lines are not in
the log until they scroll off or the program ends, so reads show it apart, once per change.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import show_controls, strip_ansi
from coretools.tools.base import ToolContext, ToolResult
from coretools.tools.budget import RESERVE_CHARS, room
from coretools.workspace import JOBS_KEY, BackgroundJob, SessionJobs

MAX_DELAY_MS = 30_000
SETTLE = 0.2  # seconds of quiet after new output before a waiting read returns
PID_SCHEMA = {"type": "integer", "description": "The process ID (PID) of the background process to inspect."}


def session_jobs(ctx: ToolContext) -> SessionJobs:
    """The calling session's jobs; a ToolError that says why for a client without a session, whose calls
    each end everything they started (run_shell_command refuses is_background there)."""
    if ctx.session.per_call:
        raise ToolError(
            "This client's calls have no session (stateless HTTP: the server runs with --stateless, or the client "
            "speaks the 2026-07-28 protocol, which has no sessions), and whatever a call starts ends with it, so "
            "there are no background processes to list, read, answer or stop. Run commands with "
            "run_shell_command without is_background, or connect over stdio or stateful HTTP for background "
            "commands.",
            ErrorKind.INVALID_TOOL_PARAMS,
        )
    return ctx.session.get(JOBS_KEY, SessionJobs)


def find(ctx: ToolContext, pid: int) -> BackgroundJob:
    """The calling session's background process `pid`, or a ToolError that lists the session's own."""
    job = session_jobs(ctx).find(pid)
    if job is None:
        known = ", ".join(str(j.pid) for j in session_jobs(ctx).every())
        raise ToolError(
            f"No background process with PID {pid} in this session"
            + (f" (its background processes: {known})." if known else " (it has started none).")
            + " Start one with run_shell_command and is_background: true; list_background_processes lists them.",
            ErrorKind.INVALID_TOOL_PARAMS,
        )
    job.touch()
    return job


def describe(job: BackgroundJob) -> str:
    """One line of a listing, Gemini CLI's (`- [PID n] STATE: `command``), with age, sizes and whether it is
    in a terminal and probably waiting for input."""
    end = f" (Exit Code: {job.exit_code})" if job.exit_code is not None else ""
    end += f" (Signal: {job.signal})" if job.signal is not None else ""
    end += f" (stopped: the server failed to follow it: {job.failure})" if job.failure is not None else ""
    age = (job.ended if job.ended is not None else time.monotonic()) - job.started
    notes = [f"ran {age:.1f} s" if job.ended is not None else f"running for {age:.1f} s",
             f"output {job.received:,} bytes, log {job.log_size:,} bytes ({job.log_size - job.read_mark:,} unread)"]
    if job.terminal is not None:
        notes.append("in a terminal")
    if job.waiting_for_input():
        notes.append("probably waiting for input")
    return f"- [PID {job.pid}] {job.state.upper()}: `{shorten_command(job.label)}`{end} ({'; '.join(notes)})"


def shorten_command(command: str, limit: int = 200) -> str:
    command = show_controls(" ".join(command.split()))
    return command if len(command) <= limit else command[: limit - 3] + "..."


def as_dict(job: BackgroundJob) -> dict:
    return {
        "pid": job.pid,
        "command": job.label,
        "status": job.state,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "seconds": round((job.ended or time.monotonic()) - job.started, 3),
        "output_bytes": job.received,
        "log_bytes": job.log_size,
        "unread_bytes": job.log_size - job.read_mark,
        "terminal": job.terminal is not None,
        "waiting_for_input": job.waiting_for_input(),
        "failure": job.failure,
    }


def signal_number(name: str) -> int:
    return int(getattr(signal, f"SIG{name}"))


async def settle(job: BackgroundJob, delay_ms: int, since: int) -> None:
    """Wait up to `delay_ms` for the job to end, or for output past log offset `since` (or a screen that
    changed) followed by `SETTLE` seconds of quiet."""
    end = time.monotonic() + min(max(delay_ms, 0), MAX_DELAY_MS) / 1000
    screen = job.screen()
    while time.monotonic() < end and not job.exited.is_set():
        moved = job.log_size > since or job.screen() != screen
        if moved and time.monotonic() - job.last_output >= SETTLE:
            return
        await anyio.sleep(0.02)
    if job.exited.is_set():  # its last lines and the note of how it ended are written just after
        with anyio.move_on_after(0.5):
            while not job.done.is_set() and job.log_size == since:
                await anyio.sleep(0.02)


@dataclass
class Reading:
    """What one read shows: the log's text from byte `start` to `end`, and a terminal's screen lines."""

    text: str
    start: int
    end: int
    size: int  # the log's size when it was read
    screen: list[str] | None = None
    gone: bool = False  # the log was removed


def log_text(job: BackgroundJob, start: int, size: int, space: int | None) -> tuple[str, int]:
    """The log from `start` up to `size` bytes, at most `space` characters ending on a whole character, and
    the offset where it ends. OSError when the log is gone."""
    start = min(max(start, 0), size)
    want = size - start if space is None else min(size - start, space * 4 + 4)
    data = job.read_log(start, want)
    text = data.decode("utf-8", "surrogateescape")
    if space is not None and len(text) > space:
        text = text[:space]
    trailing = 0
    while trailing < 3 and text and "\udc80" <= text[-1 - trailing] <= "\udcff":
        trailing += 1
    if trailing and start + len(data) == size and not job.exited.is_set():
        text = text[:-trailing]  # a character cut where the writing stopped for now: the next read has it whole
    raw = text.encode("utf-8", "surrogateescape")
    shown = raw.decode("utf-8", "replace")
    return (shown if job.terminal is not None else strip_ansi(shown)), start + len(raw)


def read_from(job: BackgroundJob, start: int, budget: int) -> Reading:
    """The log from `start` as much as fits, and a running terminal job's whole screen; no mark moves."""
    shot = job.snapshot()
    size = shot.log_size if shot else job.log_size
    screen = shot.lines if shot else None
    try:
        text, end = log_text(job, start, size, room(budget, RESERVE_CHARS + _chars(screen), least=1000))
    except OSError:
        return Reading("", start, start, size, screen, gone=True)
    return Reading(text, min(start, size), end, size, screen)


def read_new(job: BackgroundJob, budget: int) -> Reading:
    """What is new since the session's last read, as much as fits: the log from the read mark, and of a
    running terminal job's screen the lines not shown yet and those from the cursor's line down (a prompt,
    a line the program still writes). Lines a read showed on the screen are left out when they reach the log."""
    shot = job.snapshot()
    size = shot.log_size if shot else job.log_size
    start = job.read_mark
    try:
        text, end = log_text(job, start, size, room(budget, RESERVE_CHARS + _chars(shot.lines if shot else None),
                                                    least=1000))  # fmt: skip
    except OSError:
        return Reading("", start, start, size, gone=True)
    if job.terminal is not None:
        lines = text.split("\n")
        complete = len(lines) - 1
        skip = min(max(job.shown_line - job.read_line, 0), complete)
        text = "\n".join(lines[skip:])
        job.read_line += complete
    job.read_mark = end
    screen = None
    if shot is not None and end >= size:
        first = max(job.shown_line - shot.scrolled, 0)
        screen = [line for k, line in enumerate(shot.lines) if k >= first or k >= shot.cursor_row]
        job.shown_line = max(job.shown_line, shot.scrolled + shot.cursor_row)
        job.read_line = shot.scrolled
    return Reading(text, start, end, size, screen)


def tail(job: BackgroundJob, lines: int, budget: int, reserve: int = RESERVE_CHARS) -> tuple[list[str], int]:
    """The last `lines` lines of the output (the log, then a running terminal job's screen), as many as fit
    the budget, and how many lines the part read holds; moves the read marks to the end."""
    shot = job.snapshot()
    size = shot.log_size if shot else job.log_size
    space = room(budget, reserve)
    want = size if space is None else min(size, max(space, 1) * 4)
    try:
        data = job.read_log(size - want, want)
    except OSError:
        data = b""
    found = data.decode("utf-8", "replace").split("\n")
    if found and found[-1] == "":
        found.pop()
    if want < size and found:
        found.pop(0)  # started mid-line
    if job.terminal is None:
        found = [strip_ansi(line) for line in found]
    if shot is not None:
        found += shot.lines
        job.shown_line, job.read_line = shot.scrolled + shot.cursor_row, shot.scrolled
    shown = found[-lines:]
    if space is not None and shown:
        used, keep = 0, 0
        for line in reversed(shown):
            used += len(line) + 1
            if used > space:
                break
            keep += 1
        shown = shown[len(shown) - max(keep, 1):]
        if len(shown[0]) > space:
            shown[0] = "..." + shown[0][-space:]
    job.read_mark = size
    return shown, len(found)


def _chars(lines: list[str] | None) -> int:
    return sum(len(line) + 1 for line in lines or ())


def status(job: BackgroundJob) -> str:
    if job.exit_code is not None:
        how = f"exited with code {job.exit_code}"
    elif job.signal is not None:
        how = f"was ended by signal {job.signal}"
    else:
        how = "is running" + (" in a terminal" if job.terminal is not None else "")
    if job.failure is not None:
        how += f"; the server failed to follow it ({job.failure}) and stopped it, so its output after that is lost"
    return f"Background process {job.pid} (`{shorten_command(job.label)}`) {how}."


def footer(job: BackgroundJob) -> str:
    scrolled = job.terminal is not None and not job.exited.is_set()
    notes = [f"[Output so far: {job.received:,} bytes written by the process; its log holds {job.log_size:,} bytes"
             + (" (the lines that left the screen)" if scrolled else "") + ".]"]
    if job.waiting_for_input():
        notes.append("[The process is probably waiting for input: its last line looks like a prompt and it has "
                     "written nothing since. Answer with write_background_input.]")
    return "\n".join(notes)


def reading(job: BackgroundJob, offset: int | None, budget: int, prefix: str = "") -> ToolResult:
    """The answer of a read of what is new (`offset` None) or from `offset` (also write_background_input's)."""
    got = read_new(job, budget) if offset is None else read_from(job, offset, budget)
    parts = [prefix + status(job)]
    if got.gone:
        parts.append("Its output is no longer kept (the oldest saved outputs are removed as new ones are made).")
    elif got.text.strip("\n"):
        parts.append(f"Output (bytes {got.start:,} to {got.end:,} of {got.size:,}):\n{got.text.rstrip(chr(10))}")
    elif not got.screen:
        parts.append("No new output" + (f" since byte {got.start:,}." if got.start else "."))
    if got.end < got.size:
        parts.append(f"[{got.size - got.end:,} more bytes of output follow: read again for them (offset {got.end}), "
                     "or pass `lines` for the latest lines.]")
    if got.screen:
        parts.append(("Screen:\n" if offset is not None else "On the screen (new lines, and the cursor's line "
                      "down):\n") + "\n".join(got.screen))  # fmt: skip
    parts.append(footer(job))
    structured = {**as_dict(job), "offset": got.start, "next_offset": got.end, "output": got.text,
                  "screen": got.screen}  # fmt: skip
    return ToolResult.text("\n".join(parts), structured)
