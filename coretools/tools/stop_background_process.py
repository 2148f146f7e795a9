"""stop_background_process: end one of the session's background commands, and everything it started.

The signal (SIGTERM unless asked otherwise) goes to the whole process tree of the command (its group and
every descendant, see `sandbox.process_groups`); whatever is left after `GRACE` seconds gets SIGKILL, so a
program that traps or ignores the signal ends too. The answer says how it ended and shows the output's
last lines.
"""

from __future__ import annotations

from typing import Any

import anyio

from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.processes import as_dict, find, signal_number, status, tail

GRACE = 2.0
SIGNALS = ("TERM", "INT", "HUP", "QUIT", "KILL")
LAST_LINES = 20


class StopBackgroundProcess(Tool):
    name = "stop_background_process"
    title = "Stop Background Process"
    description = (
        "Stops a background process this session started (run_shell_command with is_background), with "
        "everything it started: `signal` (default TERM) goes to its whole process tree, and whatever is still "
        f"running {GRACE:g} seconds later is killed (SIGKILL). Returns how it ended and its last lines of output."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pid": {"type": "integer", "description": "The process ID (PID) of the background process to stop."},
            "signal": {
                "type": "string",
                "enum": list(SIGNALS),
                "description": "Optional. The signal to send first (default TERM; INT is Ctrl-C). SIGKILL follows "
                f"after {GRACE:g} seconds for whatever is left.",
            },
        },
        "required": ["pid"],
    }
    hint = "stop a background command and everything it started."
    opt_in = True
    read_only = False
    destructive = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        job = find(ctx, args["pid"])
        name = args.get("signal") or "TERM"
        already = job.exited.is_set()
        if not already:
            job.stop("requested", signal_number(name), GRACE)
            await anyio.to_thread.run_sync(job.join, GRACE + 3)
        lines, _ = tail(job, LAST_LINES, ctx.result_chars)
        first = "It had already ended." if already else f"Sent SIG{name} to its process tree."
        text = f"{first} {status(job)}\nLast lines of its output:\n" + ("\n".join(lines) or "(none)")
        return ToolResult.text(text, as_dict(job))


TOOL = StopBackgroundProcess
