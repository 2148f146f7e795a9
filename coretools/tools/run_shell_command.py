"""run_shell_command: `bash -c <command>` in the workspace, bounded in time, output and lifetime.

The process rules (own process group, stdin from /dev/null, scrubbed environment, timeouts, output cap,
kill and reap, registry of what is left running) are in `sandbox/runner.py`; the allow/deny lists in
`shell_policy.py`, with the argument policy of programs that can run programs in `exec_policy`. Under an
allowlist the command's environment is hardened (`hardened_env.py`: git ignores system and global
configuration, hooks, fsmonitor, pagers and local transports). This module checks the call, picks the
directory and formats what the model reads.

Working directory and races: `directory` is resolved through the workspace gateway (`locate` +
`open_node`, which must give a directory inside a root), and the child changes into *that open
descriptor* (`/proc/self/fd/N` as its cwd), so a path component swapped for a symlink between the check
and the spawn cannot send it elsewhere. Where `/proc` is missing (macOS), the canonical path of the
checked directory is used instead, which leaves that small window open. With the bubblewrap sandbox,
bwrap itself starts in the descriptor and is told to `--chdir` to the canonical path inside a namespace
where only the roots are writable.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from typing import Any

from coretools.errors import ConfigurationError, ErrorKind, ToolError
from coretools.tools.base import Tool, ToolContext, ToolResult
from coretools.sandbox.process_settings import (
    DEFAULT_INACTIVITY_TIMEOUT,
    DEFAULT_WALL_TIMEOUT,
    signal_name,
    stop_message,
)
from coretools.sandbox.runner import Outcome, Runner
from coretools.sandbox.exec_policy import runs_programs
from coretools.sandbox.shell_policy import Refused, ShellPolicy
from coretools.tools.process_options import ProcessOptions

MAX_SHOWN_CHARS = 30_000  # per stream; the rest is in a saved file
logger = logging.getLogger("coretools")


@dataclass(frozen=True)
class ShellOptions(ProcessOptions):
    no_shell: bool = False
    allow_command: tuple[str, ...] = ()
    deny_command: tuple[str, ...] = ()


class RunShellCommand(Tool):
    name = "run_shell_command"
    title = "Shell"
    hint = "run a bash command in the workspace: build, test, git, or anything the other tools cannot do."
    Options = ShellOptions
    options: ShellOptions
    read_only = False
    destructive = True
    idempotent = False
    open_world = True
    description = (
        "This tool executes a given shell command as `bash -c <command>`. Command can start background processes "
        "using `&`. Command is executed as a subprocess that leads its own process group. Command process group can "
        "be terminated as `kill -- -PGID` or signaled as `kill -s SIGNAL -- -PGID`.\n\n"
        "The following information is returned:\n\n"
        "Command: Executed command.\n"
        "Directory: Directory where the command was executed.\n"
        "Stdout: Output on stdout stream. Can be `(empty)` or partial on error and for any unwaited background "
        "processes.\n"
        "Stderr: Output on stderr stream. Can be `(empty)` or partial on error and for any unwaited background "
        "processes.\n"
        "Error: Error or `(none)` if no error was reported for the subprocess.\n"
        "Exit Code: Exit code or `(none)` if terminated by signal.\n"
        "Signal: Signal number or `(none)` if no signal was received.\n"
        "Background PIDs: List of background processes started or `(none)`.\n"
        "Process Group PGID: Process group started or `(none)`\n\n"
        "stdin is /dev/null: nothing can prompt for input, so pass non-interactive flags (e.g. `--yes`, `-m`). "
        "A command is stopped if it prints nothing for a while or runs too long; very long output is shortened to "
        "its head and tail, with the full text saved to a file whose path is given."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "Exact bash command to execute as `bash -c <command>`"},
            "description": {
                "type": "string",
                "description": "Brief description of the command for the user. Be specific and concise. Ideally a "
                "single sentence. Can be up to 3 sentences for clarity. No line breaks.",
            },
            "directory": {
                "type": "string",
                "description": "(OPTIONAL) Directory to run the command in, relative to the project root (or an "
                "absolute path inside the workspace). Must exist. Defaults to the project root.",
            },
        },
        "required": ["command"],
    }

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--no-shell", action="store_true", help="do not publish run_shell_command")
        parser.add_argument(
            "--allow-command",
            action="append",
            default=[],
            metavar="PREFIX",
            help="allow only shell commands starting with these words (repeatable; every sub-command of a "
            "pipeline or list must match; substitutions, eval, arithmetic and redirections to files are refused; "
            "programs that can run programs, such as git, sed or find, are held to an argument policy and git runs "
            "with hardened configuration)",
        )
        parser.add_argument(
            "--deny-command",
            action="append",
            default=[],
            metavar="PREFIX",
            help="refuse shell commands starting with these words (repeatable)",
        )
        parser.add_argument(
            "--shell-env",
            action="append",
            default=[],
            metavar="NAME",
            help="pass this environment variable to commands even though its name looks secret (repeatable)",
        )
        parser.add_argument(
            "--shell-timeout",
            type=float,
            default=DEFAULT_WALL_TIMEOUT,
            metavar="SECONDS",
            help=f"wall-clock limit per command, also for discovered tools; 0 disables (default: {DEFAULT_WALL_TIMEOUT:g})",
        )
        parser.add_argument(
            "--shell-inactivity-timeout",
            type=float,
            default=DEFAULT_INACTIVITY_TIMEOUT,
            metavar="SECONDS",
            help="stop a command after this long without output; 0 disables "
            f"(default: {DEFAULT_INACTIVITY_TIMEOUT:g})",
        )
        parser.add_argument(
            "--shell-sandbox",
            choices=["bwrap"],
            default=None,
            help="run every command in bubblewrap: system read-only, only the roots and a private /tmp writable",
        )
        parser.add_argument(
            "--shell-no-network",
            action="store_true",
            help="with --shell-sandbox: commands get no network",
        )
        parser.add_argument(
            "--discovery-command",
            metavar="CMD",
            help="at start, run CMD; it prints a JSON array of function declarations, each published as a tool",
        )
        parser.add_argument(
            "--call-command",
            metavar="CMD",
            help="run a discovered tool as `CMD <tool name>` with its JSON arguments on stdin",
        )

    def __init__(self, options: ShellOptions | None = None) -> None:
        super().__init__(options)
        self.settings = self.options.settings()
        try:
            self.policy = ShellPolicy.from_prefixes(list(self.options.allow_command), list(self.options.deny_command))
        except ValueError as exc:
            raise ConfigurationError(f"--allow-command/--deny-command: {exc}") from None
        self.runner = Runner("coretools-shell")
        if not self.options.no_shell:
            problem = self.settings.problem()
            if problem:
                raise ConfigurationError(f"--shell-sandbox: {problem}" if "bwrap" in problem else problem)
            self._warn_if_allowlist_is_not_a_boundary()

    def _warn_if_allowlist_is_not_a_boundary(self) -> None:
        """One start-up warning when allowed programs can start other programs and no OS sandbox bounds them."""
        if not self.policy.allow or self.options.shell_sandbox is not None:
            return
        programs = runs_programs(prefix[0] for prefix in self.policy.allow)
        if programs:
            logger.warning(
                "--allow-command: %s can run other programs, and --shell-sandbox is off. The shell policy refuses "
                "their known ways of doing so and git runs with hardened configuration, but the allowlist only "
                "decides which commands start: it is not a security boundary. Add --shell-sandbox bwrap to bound "
                "what they can reach.",
                ", ".join(programs),
            )

    def unavailable_reason(self) -> str | None:
        if self.options.no_shell:
            return "the operator turned the shell off (--no-shell)"
        return None

    async def aclose(self) -> None:
        await self.runner.aclose()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args["command"]
        if not command.strip():
            raise ToolError(
                "Command cannot be empty. Pass the bash command to run in 'command'.", ErrorKind.INVALID_TOOL_PARAMS
            )
        try:
            self.policy.check(command)
        except Refused as exc:
            raise ToolError(
                f"Command refused by the shell policy: {exc.message}. The operator limits which commands may run "
                f"({self.policy.describe()}); use only those, as plain commands.",
                ErrorKind.POLICY_VIOLATION,
            ) from None
        ws = ctx.workspace
        node = ws.open_node(ws.locate(args.get("directory") or "."))
        try:
            if not node.is_dir:
                raise ToolError(
                    f"Directory is not a directory: {node.path}. Pass an existing directory (or omit 'directory' to "
                    "use the project root).",
                    ErrorKind.PATH_IS_NOT_A_DIRECTORY,
                )
            root_path = ws.roots[node.root].path
            cwd = os.path.join(root_path, node.rel) if node.rel else root_path
            roots = [r.path for r in ws.roots]
            spec = self.settings.spec(
                self.runner, ["bash", "-c", command], cwd=cwd, roots=roots, hardened=bool(self.policy.allow)
            )
            sent = 0

            async def live(text: str) -> None:
                nonlocal sent
                sent += len(text)
                await ctx.progress(sent, None, text[-4000:])

            outcome = await self.runner.run(spec, live, cwd_fd=node.fd)
        finally:
            node.close()
        return self._result(command, node.path, outcome)

    def _result(self, command: str, directory: str, outcome: Outcome) -> ToolResult:
        saved: dict[str, str] = {}
        shown = {}
        for stream in (outcome.stdout, outcome.stderr):
            shown[stream.name], path = self.runner.present(outcome, stream, MAX_SHOWN_CHARS)
            if path:
                saved[stream.name] = path
        error = stop_message(outcome, self.settings.output_cap)
        sig = outcome.signal
        fields = [
            ("Command", command),
            ("Directory", directory),
            ("Stdout", shown["stdout"] or "(empty)"),
            ("Stderr", shown["stderr"] or "(empty)"),
            ("Error", error or "(none)"),
            ("Exit Code", "(none)" if outcome.exit_code is None else str(outcome.exit_code)),
            ("Signal", "(none)" if sig is None else f"{sig} ({signal_name(sig)})"),
            ("Background PIDs", ", ".join(map(str, outcome.background_pids)) or "(none)"),
            ("Process Group PGID", "(none)" if outcome.pgid is None else str(outcome.pgid)),
        ]
        text = "\n".join(f"{k}: {v}" for k, v in fields)
        kind = ErrorKind.SHELL_EXECUTE_ERROR
        structured: dict[str, Any] = {
            "command": command,
            "directory": directory,
            "stdout": shown["stdout"],
            "stderr": shown["stderr"],
            "error": {"kind": kind.value, "message": error} if error else None,
            "exit_code": outcome.exit_code,
            "signal": sig,
            "background_pids": outcome.background_pids,
            "pgid": outcome.pgid,
        }
        if saved:
            structured["saved_output"] = saved
        result = ToolResult.text(text, structured)
        result.is_error = error is not None
        return result


TOOL = RunShellCommand
