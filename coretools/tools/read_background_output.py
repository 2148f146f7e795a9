"""read_background_output: what a background command wrote, incrementally, fitted to the result budget.

Gemini CLI's tool of this name (@google/gemini-cli-core 0.61.0: parameters `pid`, `lines`, `delay_ms`)
reads the tail of a background process's log. Here the same call without `lines` reads what is new since
the session's last read, so a model following a dev server or a test watcher sees each line once; `lines`
gives Gemini CLI's tail, `offset` any part of the log again. `delay_ms` waits for the next output (or the
end) rather than sleeping it out. A command in a terminal (`--background-tty`) is read as its screen shows
it.
"""

from __future__ import annotations

from typing import Any

from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.processes import MAX_DELAY_MS, PID_SCHEMA, as_dict, find, footer, reading, settle, status, tail

DEFAULT_TAIL_LINES = 100


class ReadBackgroundOutput(Tool):
    name = "read_background_output"
    title = "Read Background Output"
    description = (
        "Reads the output of a background process this session started (run_shell_command with is_background). "
        "By default it returns what is new since your last read of that process, so call it again to follow a "
        "server or watcher; `lines` returns the last N lines instead, `offset` the output from that byte "
        "offset. Each answer gives the process's state, the true output sizes and the offset to continue from. "
        "A process running in a terminal is shown as its screen would show it, and the answer says when it "
        "is probably waiting for input (answer it with write_background_input)."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pid": PID_SCHEMA,
            "lines": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional. Number of lines to read from the end of the output, instead of what is new "
                "since the last read.",
            },
            "delay_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_DELAY_MS,
                "description": "Optional. Wait up to this many milliseconds for new output (returning once it pauses) "
                "or for the process to exit before reading. Useful to let the process start and produce output.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Optional. Read the output from this byte offset (an earlier answer's 'next offset'), "
                "instead of from the end of the last read.",
            },
        },
        "required": ["pid"],
    }
    hint = "follow a background command's output (what is new since the last read, or its tail)."
    narrowing = "pass `lines` for fewer lines, or read on from the offset the answer gives"
    opt_in = True
    core_in = ("latest",)  # Gemini CLI 0.61 offers it by default

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        job = find(ctx, args["pid"])
        offset = args.get("offset")
        await settle(job, args.get("delay_ms", 0), job.read_mark if offset is None else offset)
        if args.get("lines") is not None:
            lines, total = tail(job, args["lines"], ctx.result_chars)
            head = f"Showing last {len(lines)} of {total} lines:" if len(lines) < total else "Full Log Output:"
            body = "\n".join(lines) if lines else "(no output yet)"
            text = f"{status(job)}\n{head}\n{body}\n{footer(job)}"
            return ToolResult.text(text, {**as_dict(job), "lines": lines})
        return reading(job, offset, ctx.result_chars)


TOOL = ReadBackgroundOutput
