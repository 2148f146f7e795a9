"""write_background_input: type into a background command's terminal, and see what it answers.

Only a command that runs in a pseudo-terminal reads input (the server's `--background-tty`; otherwise its
stdin is /dev/null). The text is typed as a person would type it: a line end is the Enter key (carriage
return, which the terminal turns into the line end a program reading lines expects), and `keys` names the
keys that are not text (Ctrl-C, Ctrl-D, arrows...), sent after it. The call then waits briefly for the
program's answer and returns what is new, as read_background_output would, saving the model a call.

A program that reads its terminal in canonical mode (a shell's `read`, `cat`) gets its input from the
terminal's line editor, which keeps at most 4,095 bytes of a line and silently drops the rest. A longer line
is refused, nothing typed: a line cut short and then entered would run what is left of it, which is not what
was asked (`BackgroundJob.line_room`).
"""

from __future__ import annotations

from typing import Any

import anyio

from coretools.errors import ErrorKind, ToolError
from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.processes import MAX_DELAY_MS, find, reading, settle
MAX_INPUT_CHARS = 64 * 1024
DEFAULT_DELAY_MS = 1000
KEYS = {
    "enter": b"\r", "tab": b"\t", "escape": b"\x1b", "backspace": b"\x7f", "space": b" ",
    "up": b"\x1b[A", "down": b"\x1b[B", "right": b"\x1b[C", "left": b"\x1b[D",
    "ctrl-c": b"\x03", "ctrl-d": b"\x04", "ctrl-z": b"\x1a", "ctrl-u": b"\x15", "ctrl-l": b"\x0c",
}  # fmt: skip


class WriteBackgroundInput(Tool):
    name = "write_background_input"
    title = "Write Background Input"
    description = (
        "Types input into a background process this session started, when it runs in a terminal (a prompt, a "
        "REPL, an installer's question). `input` is typed as text; each line end in it is sent as the Enter key, "
        "so end a line with \\n to submit it. `keys` sends keys that are not text after it, in order: "
        + ", ".join(KEYS) + " (ctrl-c interrupts, ctrl-d ends the input). Then waits up to `delay_ms` for the "
        "program's answer and returns what is new in its output and its screen."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pid": {"type": "integer", "description": "The process ID (PID) of the background process to write to."},
            "input": {
                "type": "string",
                "maxLength": MAX_INPUT_CHARS,
                "description": "Text to type. A line end (\\n) is sent as the Enter key.",
            },
            "keys": {
                "type": "array",
                "items": {"type": "string", "enum": list(KEYS)},
                "maxItems": 100,
                "description": "Optional. Keys to press after the text, in order (e.g. [\"ctrl-c\"]).",
            },
            "delay_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_DELAY_MS,
                "description": f"Optional. Wait up to this many milliseconds for the answer (default "
                f"{DEFAULT_DELAY_MS}); returns as soon as the output pauses.",
            },
        },
        "required": ["pid"],
    }
    hint = "answer a background command's prompt (a REPL, an installer's question) or send it Ctrl-C."
    opt_in = True
    read_only = False
    # What is typed runs as the command's own input: a shell, a REPL or an installer can do anything with it.
    destructive = True
    idempotent = False
    open_world = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        job = find(ctx, args["pid"])
        text, keys = args.get("input") or "", args.get("keys") or []
        if not text and not keys:
            raise ToolError("Nothing to send: pass `input` (text) or `keys` (such as [\"enter\"] or [\"ctrl-c\"]).",
                            ErrorKind.INVALID_TOOL_PARAMS)
        if job.terminal is None:
            raise ToolError(
                f"Background process {job.pid} does not read input: it was started without a terminal, so its "
                "stdin is /dev/null. This server runs background commands in a terminal only with "
                "--background-tty; otherwise pass the answers as arguments or non-interactive flags (--yes), or "
                "pipe them in (`printf 'y\\n' | cmd`).",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        if job.exited.is_set():
            raise ToolError(f"Background process {job.pid} has already ended; nothing was sent. "
                            "read_background_output shows its output.", ErrorKind.INVALID_TOOL_PARAMS)  # fmt: skip
        typed = text.replace("\r\n", "\n").replace("\n", "\r").encode("utf-8", "replace")
        room = job.line_room()
        long = too_long(typed, room)
        if long:
            raise ToolError(
                f"Nothing was sent to background process {job.pid}: it reads its terminal in canonical mode (the "
                f"terminal edits each line), which keeps at most {room:,} bytes of a line and drops the rest, and "
                + ", ".join(f"line {n} is {size:,} bytes" for n, size in long)
                + ". A line cut short and then entered would run what is left of it. To pass longer text, write it "
                "to a file (write_file) and have the program read the file.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        pressed = b"".join(KEYS[key] for key in keys)
        data = typed + pressed
        sent = await anyio.to_thread.run_sync(job.write, data)
        await settle(job, args.get("delay_ms", DEFAULT_DELAY_MS), job.read_mark)
        if sent < len(data):
            first = (f"Sent {sent:,} of {len(data):,} bytes: the program stopped reading its input (the terminal's "
                     "buffer is full) or ended. ")  # fmt: skip
        else:
            first = f"Sent {sent:,} bytes. "
        return reading(job, None, ctx.result_chars, prefix=first)


def too_long(typed: bytes, room: int | None) -> list[tuple[int, int]]:
    """The (number, size) of each line of `typed` (split at each Enter) longer than `room` bytes; none where
    `room` is None (the terminal does not edit lines)."""
    if room is None:
        return []
    return [(n + 1, len(line)) for n, line in enumerate(typed.split(b"\r")) if len(line) > room]


TOOL = WriteBackgroundInput
