"""list_background_processes: the background commands of the calling session, running and finished.

Gemini CLI's tool of this name (@google/gemini-cli-core 0.61.0), with its (empty) parameters and its line
per process (`- [PID n] STATE: `command``, the exit code or signal); each line here also gives the age, the
output's true size and how much of it is unread, and whether the process runs in a terminal and probably
waits for input. Only the calling session's processes are listed (`processes.session_jobs`); a finished one
stays listed for a bounded time (`workspace.background.FINISHED_AGE`, at most `FINISHED_KEPT`).
"""

from __future__ import annotations

from typing import Any

from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.tools.budget import lines_that_fit
from coretools.tools.processes import as_dict, describe, session_jobs


class ListBackgroundProcesses(Tool):
    name = "list_background_processes"
    title = "List Background Processes"
    description = (
        "Lists the active and recently completed background shell processes of this session (started with "
        "run_shell_command and is_background), each with its PID, state, command, exit code, age and output "
        "size. Read a process's output with read_background_output, answer its prompts with "
        "write_background_input, end it with stop_background_process."
    )
    input_schema = {"type": "object", "properties": {}}
    hint = "see which background commands of this session run or ended, with their PIDs."
    opt_in = True
    core_in = ("latest",)  # Gemini CLI 0.61 offers it by default

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        jobs = session_jobs(ctx).every()
        if not jobs:
            return ToolResult.text("No background processes found.", {"processes": []})
        for job in jobs:
            job.touch()
        lines = [describe(job) for job in jobs]
        shown = lines_that_fit(lines, ctx.result_chars)
        text = "\n".join(lines[-shown:])
        if shown < len(lines):
            text = f"[{len(lines) - shown} older processes are not shown: the result budget is full.]\n{text}"
        return ToolResult.text(text, {"processes": [as_dict(job) for job in jobs]})


TOOL = ListBackgroundProcesses
