"""How the shell and discovered tools run their programs: the environment a child gets (`child_env`: the
server's minus secrets and start-up hooks, never waiting for a human, and hardened for git under an
allowlist), the process settings (`ProcessSettings`: timeouts, passed-through variables, the bubblewrap
sandbox), and what a failed run is reported as (`stop_message`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass

from coretools.sandbox.bwrap import bwrap_problem, prepare_sandbox
from coretools.sandbox.hardened_env import neutralise
from coretools.sandbox.runner import DEFAULT_OUTPUT_CAP, Outcome, Runner, RunSpec

SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")
# Variables that make a non-interactive shell run code or that a host set for its own prompts.
DROP_VARS = ("BASH_ENV", "ENV", "PROMPT_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "PS4")
NON_INTERACTIVE = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "SSH_ASKPASS_REQUIRE": "never",
    "GCM_INTERACTIVE": "never",
    "GH_PROMPT_DISABLED": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "TERM": "dumb",
    "CORETOOLS": "1",
}


def child_env(
    passthrough: Iterable[str] = (), base: dict[str, str] | None = None, *, hardened: bool = False
) -> dict[str, str]:
    """The server's environment minus obvious secrets (unless passed through by name), minus variables
    that make bash run code at start-up, plus settings that keep every program from waiting for a human.
    `hardened`: also neutralise the ways git runs programs named in its configuration (`hardened_env`), for
    a command that runs under an allowlist."""
    keep = set(passthrough)
    env = {}
    for name, value in (os.environ if base is None else base).items():
        upper = name.upper()
        if name not in keep and any(word in upper for word in SECRET_WORDS):
            continue
        if name in DROP_VARS or name.startswith("BASH_FUNC_"):
            continue
        env[name] = value
    env.update(NON_INTERACTIVE)
    return neutralise(env) if hardened else env


DEFAULT_WALL_TIMEOUT = 600.0  # Gemini CLI's default MCP request timeout: a client has given up by then
DEFAULT_INACTIVITY_TIMEOUT = 300.0  # Gemini CLI's tools.shell.inactivityTimeout


@dataclass
class ProcessSettings:
    """How the processes of a tool run: timeouts, environment pass-through, sandbox, output cap. The tools
    build it from the operator's options (`--shell-timeout`, `--shell-env`, `--shell-sandbox`...)."""

    wall_timeout: float | None = DEFAULT_WALL_TIMEOUT
    inactivity_timeout: float | None = DEFAULT_INACTIVITY_TIMEOUT
    passthrough: tuple[str, ...] = ()
    sandbox: str | None = None
    network: bool = True
    output_cap: int = DEFAULT_OUTPUT_CAP

    def problem(self) -> str | None:
        """A configuration error to report at start-up, or None."""
        if not self.network and self.sandbox is None:
            return "--shell-no-network needs --shell-sandbox bwrap (without a sandbox there is no way to cut the network)"
        if self.sandbox == "bwrap":
            return bwrap_problem()
        return None

    def spec(
        self, runner: Runner, argv: list[str], *, cwd: str, roots: list[str], hardened: bool = False, **extra
    ) -> RunSpec:
        """A run of `argv` in `cwd` with these settings (in the sandbox if one is set, which sees `roots`);
        `hardened`: in the hardened environment (see `child_env`)."""
        env = child_env(self.passthrough, hardened=hardened)
        env["PWD"] = cwd
        if self.sandbox == "bwrap":
            sandboxed = prepare_sandbox(argv, scratch=runner.scratch_dir, cwd=cwd, roots=roots, network=self.network)
            argv = sandboxed.argv
            extra.update(pass_fds=sandboxed.pass_fds, on_exit=sandboxed.on_exit)
            env["TMPDIR"] = "/tmp"
        return RunSpec(
            argv,
            cwd=cwd,
            env=env,
            wall_timeout=self.wall_timeout,
            inactivity_timeout=self.inactivity_timeout,
            output_cap=self.output_cap,
            **extra,
        )


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def stop_message(outcome: Outcome, cap: int) -> str | None:
    """Why a run failed at the process level (not a non-zero exit), with what to do about it; or None."""
    if outcome.error:
        return f"{outcome.error}. Check that the program is installed and the directory exists."
    how = "its process group was sent SIGTERM, then SIGKILL"
    if outcome.stopped == "timeout":
        return (
            f"Command was stopped after {outcome.seconds:.1f} s, the wall-clock limit (--shell-timeout); {how}. "
            "Run long jobs in the background with output to a file (`cmd > log 2>&1 &`) and check on them later."
        )
    if outcome.stopped == "inactivity":
        return (
            f"Command was stopped because it printed nothing for too long (--shell-inactivity-timeout); {how}. "
            "If it was waiting for input, pass non-interactive flags; stdin is not a terminal."
        )
    if outcome.stopped == "output_cap":
        return (
            f"Command was stopped because its output exceeded {cap:,} bytes; {how}. Redirect large output to a "
            "file and read parts of it (head, tail, grep)."
        )
    return None
