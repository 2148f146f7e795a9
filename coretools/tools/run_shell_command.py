"""run_shell_command: `bash -c <command>` in the workspace, bounded in time, output and lifetime.

The process rules (own process group, stdin from /dev/null, scrubbed environment, timeouts, output cap,
kill and reap, registry of what is left running) are in `sandbox/runner.py`; the allow/deny lists in
`shell_policy.py`, with the argument policy of programs that can run programs in `exec_policy`. Under an
allowlist the command's environment is hardened (`hardened_env.py`: git ignores system and global
configuration, hooks, fsmonitor, pagers and local transports). This module checks the call, picks the
directory and formats what the model reads, ending with the git settings that run programs on the host which
appeared while the command ran (`git_watch.py`: no sandbox stops a command from making a new repository).

Working directory and races: `directory` is resolved through the workspace gateway (`locate` +
`open_node`, which must give a directory inside a root), and the child changes into *that open
descriptor* (`/proc/self/fd/N` as its cwd), so a path component swapped for a symlink between the check
and the spawn cannot send it elsewhere. Where `/proc` is missing (macOS), the canonical path of the
checked directory is used instead, which leaves that small window open. With the bubblewrap sandbox,
bwrap itself starts in the descriptor and is told to `--chdir` to the canonical path inside a namespace
where only the roots are writable.

Background commands in a terminal: `--background-tty` runs every `is_background` command with a new
pseudo-terminal as stdin, stdout and stderr (`RunSpec.pty`, made its controlling terminal inside any sandbox
by `terminal_argv`), so a program that prompts can be answered (write_background_input) and its screen read
as text (`workspace.terminal`). It is a server option rather than a parameter: a `tty` parameter would change
the schema Gemini CLI publishes for this tool, and a tool of its own to start such commands would repeat
every check this one makes. Foreground commands keep /dev/null: nothing could answer them while the call
runs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from coretools.errors import ConfigurationError, ErrorKind, ToolError
from coretools.tools.base import Tool, ToolContext, ToolResult, option, text_block
from coretools.sandbox import (
    PROCESS, CommandRefused, GitState, GitWatch, Outcome, RunSpec, Runner, ShellPolicy, agreeing_locale,
    SessionScope, changes, limit_option, read_only_error, runs_programs, shorten, show_controls, signal_name,
    stop_message, terminal_argv, user_parent, warning,
)
from coretools.workspace import (
    DEFAULT_LIFETIME, DEFAULT_MAX_JOBS, DEFAULT_MAX_SERVER_JOBS, JOBS_KEY, TERMINAL_SIZE, BackgroundJob,
    BackgroundJobs, Limits, SessionJobs, Slots, TooManyJobs,
)
from coretools.tools.process_options import ProcessOptions

MAX_SHOWN_CHARS = 30_000  # per stream; the rest is in a saved file
DEFAULT_DELAY_MS = 200  # Gemini CLI's wait before a command is backgrounded
TERMINAL_NOTE = (
    "It runs in a terminal (--background-tty): its log holds the lines that left the screen, as text. Where this "
    "server publishes them, read_background_output shows what is new and the screen, write_background_input "
    "answers its prompts, stop_background_process stops it.\n"
)
MAX_DELAY_MS = 60_000
logger = logging.getLogger("coretools")


@dataclass(frozen=True)
class ShellOptions(ProcessOptions):
    no_shell: bool = option(False, "--no-shell", "do not publish run_shell_command")
    allow_command: tuple[str, ...] = option(
        (),
        "--allow-command",
        "allow only shell commands starting with these words (repeatable; every sub-command of a pipeline or "
        "list must match; substitutions, eval, arithmetic and redirections to files are refused; programs that "
        "can run programs, such as git, sed or find, are held to an argument policy and git runs with hardened "
        "configuration)",
        metavar="PREFIX",
    )
    deny_command: tuple[str, ...] = option(
        (), "--deny-command", "refuse shell commands starting with these words (repeatable)", metavar="PREFIX"
    )
    max_background_commands: int = option(
        DEFAULT_MAX_JOBS,
        "--max-background-commands",
        "at most N commands started with is_background run at once per session; 0 turns is_background off "
        f"(default: {DEFAULT_MAX_JOBS})",
        metavar="N",
    )
    background_timeout: float | None = option(
        DEFAULT_LIFETIME,
        "--background-timeout",
        f"stop a background command (is_background) after this long; 0 disables (default: {DEFAULT_LIFETIME:g})",
        metavar="SECONDS",
    )
    background_idle_timeout: float | None = option(
        0.0,
        "--background-idle-timeout",
        "stop a background command that no tool call has listed, read or written to for this long; 0 disables "
        "(default: 0)",
        metavar="SECONDS",
    )
    max_background_total: int = option(
        DEFAULT_MAX_SERVER_JOBS,
        "--max-background-total",
        "at most N background commands run at once on the whole server, all sessions together "
        f"(--max-background-commands is per session); 0: no limit (default: {DEFAULT_MAX_SERVER_JOBS})",
        metavar="N",
    )
    background_tty: bool = option(
        False,
        "--background-tty",
        "run background commands (is_background) in a pseudo-terminal, so that programs that prompt (npm create, "
        "a REPL, ssh-keygen, git add -p) can be answered with write_background_input; their output is rendered "
        "as the screen a person would see",
    )


class RunShellCommand(Tool):
    name = "run_shell_command"
    title = "Shell"
    hint = "run a bash command in the workspace: build, test, git, or anything the other tools cannot do."
    Options = ShellOptions
    options: ShellOptions
    narrowing = (
        "run a shorter command, or start a long one in the background with its output redirected to a file "
        "(`cmd > out.log 2>&1 &`) and read that file in a later call"
    )
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
    aliases = {"dir_path": "directory"}
    extra_properties = {
        "is_background": {
            "type": "boolean",
            "description": "Run the command in the background: the call returns after `delay_ms` with its PID, its "
            "process group and the log file its output goes to (readable with read_file), while it runs on. Use "
            "it for servers and watchers, instead of `&`. If it finished within the delay, the normal result "
            "is returned.",
        },
        "delay_ms": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_DELAY_MS,
            "description": f"With is_background: how long to wait, in milliseconds, before returning (default "
            f"{DEFAULT_DELAY_MS}), so early output and quick failures are seen.",
        },
    }
    latest_schema = {
        "type": "object",
        "properties": {
            "command": input_schema["properties"]["command"],
            "description": input_schema["properties"]["description"],
            "dir_path": {
                "type": "string",
                "description": "(OPTIONAL) The directory to run the command in: a path relative to the project "
                "root, or an absolute path inside the workspace. It must already exist. Defaults to the project "
                "root.",
            },
            **extra_properties,
        },
        "required": ["command"],
    }

    def __init__(self, options: ShellOptions | None = None) -> None:
        super().__init__(options)
        self.settings = self.options.settings()
        try:
            self.policy = ShellPolicy.from_prefixes(list(self.options.allow_command), list(self.options.deny_command))
        except ValueError as exc:
            raise ConfigurationError(f"--allow-command/--deny-command: {exc}") from None
        self.git_watch = GitWatch()
        lifetime = limit_option(self.options.background_timeout, "--background-timeout")
        idle = limit_option(self.options.background_idle_timeout, "--background-idle-timeout")
        self.limits = Limits(
            max_jobs=self.options.max_background_commands,
            lifetime=None if lifetime is None else float(lifetime),
            log_cap=self.settings.output_cap,
            idle=None if idle is None else float(idle),
        )
        total = limit_option(self.options.max_background_total, "--max-background-total")
        self.slots = None if total is None else Slots(int(total))
        self._base: str | None = None
        if not self.options.no_shell:
            problem = self.settings.problem()
            if problem:
                raise ConfigurationError(problem if problem.startswith("--") else f"--shell-sandbox: {problem}")
            self._warn_if_allowlist_is_not_a_boundary()
            if self.policy.strict and self.options.background_tty:
                logger.warning(
                    "--background-tty with --allow-command: what write_background_input types into a background "
                    "command is not checked by the allowlist, so an allowed program that reads commands (a shell, a "
                    "REPL, an interactive installer) runs what is typed. The shell sandbox still bounds it."
                )
            self.hint = self._hint_with_sandbox()

    def _hint_with_sandbox(self) -> str:
        """The instructions' line for this server: the class's hint, and which sandbox commands run in."""
        sandbox = self.settings.chosen
        if sandbox.mode == "none":
            return f"{self.hint.rstrip('.')}; WARNING: commands run unsandboxed, with every right of the server's user."
        return f"{self.hint.rstrip('.')}; commands run sandboxed ({sandbox.describe()})."

    def _warn_if_allowlist_is_not_a_boundary(self) -> None:
        """One start-up warning when allowed programs can start other programs and no OS sandbox bounds them."""
        if not self.policy.strict or self.settings.chosen.mode != "none":
            return
        programs = runs_programs(prefix[0] for prefix in self.policy.allow)
        if programs:
            logger.warning(
                "--allow-command: %s can run other programs, and commands run without a sandbox. The shell policy "
                "refuses their known ways of doing so and git runs with hardened configuration, but the allowlist "
                "only decides which commands start: it is not a security boundary. Use --shell-sandbox bwrap or "
                "landlock to bound what they can reach.",
                ", ".join(programs),
            )

    def unavailable_reason(self) -> str | None:
        if self.options.no_shell:
            return "the operator turned the shell off (--no-shell)"
        return None

    async def start(self) -> None:
        if self.options.no_shell:
            return
        sandbox = self.settings.chosen
        if sandbox.mode == "none" and self.settings.sandbox == "auto":
            logger.warning("run_shell_command: commands run UNSANDBOXED: %s. Install bubblewrap or use a kernel "
                           "with Landlock (5.13+), or pass --shell-sandbox none to say this is intended.",
                           sandbox.reason)  # fmt: skip
        else:
            logger.info("run_shell_command: sandbox %s (%s)", sandbox.mode, sandbox.reason)

    def _session(self, ctx: ToolContext) -> ShellSession:
        """The calling session's runner and background jobs (its own temporary directory and logs)."""
        if self._base is None:
            self._base = tempfile.mkdtemp(prefix="shell-", dir=user_parent())
        shell = ctx.session.get(self._key, lambda: ShellSession(self._base, ctx.session, self.limits, self.slots))
        ctx.session.get(JOBS_KEY, SessionJobs).add(shell.jobs)  # where the background-process tools look
        return shell

    @property
    def _key(self) -> str:
        return f"{self.name}:{id(self)}"

    async def aclose(self) -> None:
        own = PROCESS.pop(self._key)  # other sessions' are closed by the server before its tools
        if own is not None:
            await own.aclose()
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args["command"]
        if not command.strip():
            raise ToolError(
                "Command cannot be empty. Pass the bash command to run in 'command'.", ErrorKind.INVALID_TOOL_PARAMS
            )
        try:
            command.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(
                f"The command contains {command[exc.start:exc.end]!r}, a lone surrogate that is not text and "
                "cannot be passed to bash; remove it.",
                ErrorKind.INVALID_TOOL_PARAMS,
            ) from None
        try:
            self.policy.check(command)
        except CommandRefused as exc:
            raise ToolError(
                f"Command refused by the shell policy: {exc.message}. The operator limits which commands may run "
                f"({self.policy.describe()}); use only those, as plain commands.",
                ErrorKind.POLICY_VIOLATION,
            ) from None
        if args.get("is_background") and ctx.session.per_call:
            raise ToolError(
                "is_background needs a session, and this client's calls have none (stateless HTTP: the server runs "
                "with --stateless, or the client speaks the 2026-07-28 protocol, which has no sessions): whatever "
                "a call starts is stopped when the call ends, so a background command would be killed as soon as "
                "this answer is sent. Run the command without is_background (it may run up to the shell timeout), "
                "or connect over stdio or stateful HTTP (a 2025-era client with an Mcp-Session-Id) for background "
                "commands.",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        ws = ctx.workspace
        node = ws.open_node(ws.locate(args.get("directory") or "."))
        try:
            if ws.is_scratch(node.root):
                raise read_only_error(node.path, ws.root_list())
            if not node.is_dir:
                raise ToolError(
                    f"Directory is not a directory: {node.path}. Pass an existing directory (or omit 'directory' to "
                    "use the project root).",
                    ErrorKind.PATH_IS_NOT_A_DIRECTORY,
                )
            root_path = ws.roots[node.root].path
            cwd = os.path.join(root_path, node.rel) if node.rel else root_path
            roots = [r.path for r in ws.roots]
            watched = [cwd, *roots]
            before = await anyio.to_thread.run_sync(self.git_watch.snapshot, watched)
            shell = self._session(ctx)
            tty = bool(args.get("is_background")) and self.options.background_tty
            argv = terminal_argv(["bash", "-c", command]) if tty else ["bash", "-c", command]
            # Off the event loop: the sandbox looks through the roots (git directories, secret files).
            spec = await anyio.to_thread.run_sync(
                functools.partial(self.settings.spec, shell.runner, argv, cwd=cwd, roots=roots,
                                  hardened=self.policy.strict)  # fmt: skip
            )
            if tty:
                spec.pty = TERMINAL_SIZE
            if self.policy.active:
                spec.env = agreeing_locale(spec.env)
            if args.get("is_background"):
                job = self._start_background(shell.jobs, command, spec, node.fd, self._git_note(watched, before))
            else:
                job = None
            sent = 0

            async def live(text: str) -> None:
                nonlocal sent
                sent += len(text)
                await ctx.progress(sent, None, text[-4000:])

            if job is None:
                outcome = await shell.runner.run(spec, live, cwd_fd=node.fd)
        finally:
            node.close()
        if job is not None:
            result = await self._background(shell, command, node.path, job, args.get("delay_ms", DEFAULT_DELAY_MS))
            return result if result.structured.get("background") else await self._git_warned(result, watched, before)
        result = self._result(shell.runner, command, node.path, outcome, links=not ctx.session.per_call)
        return await self._git_warned(result, watched, before)

    async def _git_warned(self, result: ToolResult, watched: list[str], before: GitState) -> ToolResult:
        """`result`, and the git settings that run programs on the host which appeared under `watched` (the
        command's directory and the roots) while the command ran: a sandbox keeps existing repositories'
        configuration read-only, not a repository the command makes."""
        found = changes(before, await anyio.to_thread.run_sync(self.git_watch.snapshot, watched))
        if found:
            links = [block for block in result.content if block.type != "text"]
            result.content = [text_block(f"{result.text_content}\n{warning(found)}"), *links]
            result.structured = {**(result.structured or {}), "git_programs": [f.as_dict() for f in found]}
        return result

    def _git_note(self, watched: list[str], before: GitState) -> Callable[[], str]:
        """The same warning, for the end of a background command's log once nothing of it runs any more."""
        return lambda: warning(changes(before, self.git_watch.snapshot(watched)))

    def _start_background(self, jobs: BackgroundJobs, command: str, spec: RunSpec, cwd_fd: int,
                          epilogue: Callable[[], str]) -> BackgroundJob:  # fmt: skip
        spec = dataclasses.replace(spec, wall_timeout=None, inactivity_timeout=None)
        try:
            return jobs.start(spec, cwd_fd=cwd_fd, label=command, epilogue=epilogue)
        except TooManyJobs as exc:
            raise ToolError(_too_many(exc, jobs.limits.max_jobs), ErrorKind.SHELL_EXECUTE_ERROR) from None
        except OSError as exc:
            raise ToolError(
                f"Could not start the command in the background: {exc.strerror or exc}.", ErrorKind.SHELL_EXECUTE_ERROR
            ) from None

    async def _background(
        self, shell: ShellSession, command: str, directory: str, job: BackgroundJob, delay_ms: int
    ) -> ToolResult:
        """Wait up to the delay: the normal result if the command finished by then, else where it runs.
        A call cancelled while waiting takes the command with it (its caller never learnt its PID)."""
        end = time.monotonic() + min(delay_ms, MAX_DELAY_MS) / 1000
        try:
            while not job.exited.is_set() and time.monotonic() < end:
                await anyio.sleep(min(0.01, max(end - time.monotonic(), 0)))
        except BaseException:
            job.kill_now("cancelled")
            raise
        if job.exited.is_set() and job.failure is not None:
            message = (f"The server failed to follow the background command ({job.failure}) and stopped it. What "
                       f"it wrote is in {job.log_path}.")  # fmt: skip
            return _link_log(ToolResult.error(message, ErrorKind.SHELL_EXECUTE_ERROR), job)
        if job.exited.is_set():
            shell.jobs.given_whole(job)
            try:
                os.unlink(job.log_path)
            except OSError:
                pass
            return self._result(shell.runner, command, directory, job.outcome(), links=True)
        return self._background_result(command, directory, job, job.detach())

    def _background_result(self, command: str, directory: str, job: BackgroundJob, initial: str) -> ToolResult:
        lifetime = self.limits.lifetime
        limit = f"after {lifetime:g} s (--background-timeout)" if lifetime else "only when the session ends"
        if self.settings.chosen.mode == "none":
            stop = f"Stop it with `kill -- -{job.pgid}`; it is stopped anyway {limit}."
        else:
            stop = (f"It runs in the sandbox, out of reach of other commands' signals: it ends by itself, or is "
                    f"stopped {limit}.")  # fmt: skip
        shown = shorten(initial.rstrip("\n"), MAX_SHOWN_CHARS, saved_to=job.log_path)[0]
        text = (
            f"Command is running in background. PID: {job.pid}. Process Group PGID: {job.pgid}. Its output "
            f"(stdout and stderr together) goes to {job.log_path}, which read_file can read; the log grows while "
            f"it runs and ends with how it exited. {stop}\n"
            + (TERMINAL_NOTE if job.terminal is not None else "")
            + (f"Initial output:\n{shown}" if shown else "No output yet.")
        )
        structured = {
            "command": command,
            "directory": directory,
            "background": True,
            "pid": job.pid,
            "pgid": job.pgid,
            "log_path": job.log_path,
            "initial_output": shown,
        }
        return _link_log(ToolResult.text(text, structured), job)

    def _result(self, runner: Runner, command: str, directory: str, outcome: Outcome, *, links: bool) -> ToolResult:
        """The answer of a command that ended; `links`: link the saved outputs (not where they end with the
        call, a session of one call)."""
        saved: dict[str, str] = {}
        shown = {}
        linked = []
        for stream in (outcome.stdout, outcome.stderr):
            shown[stream.name], path = runner.present(outcome, stream, MAX_SHOWN_CHARS)
            if path:
                saved[stream.name] = path
                linked.append((path, stream.name, len(stream.data), stream.binary))
        error = stop_message(outcome, self.settings.output_cap)
        sig = outcome.signal
        fields = [
            ("Command", show_controls(command)),
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
        for saved_output in linked if links else ():
            _link_saved(result, *saved_output)
        return result


def _link_saved(result: ToolResult, path: str, stream: str, size: int, binary: bool) -> ToolResult:
    """`result`, linked to the `size` bytes of a stream that were saved."""
    if binary:
        return result.link(path, f"Command {stream} (binary)", f"The command's {stream}: {size:,} bytes of binary "
                           "output, not shown in the result. Readable by this session only.", size=size,
                           mime="application/octet-stream")  # fmt: skip
    return result.link(path, f"Full command {stream}", f"The command's {stream} as the server kept it ({size:,} "
                       "bytes); the result shows part of it. Readable by this session only.", size=size)  # fmt: skip


def _link_log(result: ToolResult, job: BackgroundJob) -> ToolResult:
    """`result`, linked to a background command's log."""
    return result.link(job.log_path, f"Log of background process {job.pid}", "The command's output (stdout and "
                       "stderr together); it grows while the command runs and ends with how it exited. Readable by "
                       "this session only.")  # fmt: skip


def _too_many(exc: TooManyJobs, limit: int) -> str:
    jobs = exc.jobs
    if limit == 0:
        return (
            "Background commands are turned off on this server (--max-background-commands 0). Run the command "
            "without is_background."
        )
    listed = "; ".join(f"PID {j.pid} (`{j.label[:80]}`)" for j in jobs)
    if exc.server_limit is not None:
        return (
            f"Too many background commands are running on this server ({exc.server_limit}, the limit of "
            f"--max-background-total, counts every session's). This session's: {listed or '(none)'}. Wait for one "
            "to finish or stop one, or run this command without is_background."
        )
    return (
        f"Too many background commands are running ({len(jobs)}, the limit of --max-background-commands): "
        f"{listed}. Wait for one to finish or stop one (`kill -- -PGID`), or run this command without "
        "is_background."
    )


class ShellSession:
    """One session's shell: its runner (private temporary directory, saved outputs) and background jobs,
    inside the tool's scratch base, which every sandbox hides from the other sessions' commands."""

    def __init__(self, base: str, owner: SessionScope, limits: Limits, slots: Slots | None) -> None:
        self.runner = Runner("session", base=base, owner=owner, hide=os.path.dirname(base))
        self.jobs = BackgroundJobs(self.runner, limits, slots)

    def close_now(self) -> None:
        self.jobs.kill_all()
        self.runner.close_now()

    async def aclose(self) -> None:
        await self.jobs.aclose()
        await self.runner.aclose()


TOOL = RunShellCommand
