"""How the shell and discovered tools run their programs: the environment a child gets (`child_env`: the
server's minus secrets and start-up hooks, never waiting for a human, and hardened for git under an
allowlist), the process settings (`ProcessSettings`: timeouts, passed-through variables, the OS sandbox),
and what a failed run is reported as (`stop_message`).

The OS sandbox (`--shell-sandbox`) is one of:

* `bwrap`: bubblewrap (namespaces; `bwrap.py`), the strongest: the system read-only, `.git` internals
  read-only, secret files masked, a private `/tmp`, a PID namespace;
* `landlock`: the kernel's Landlock access control (`landlock.py`), for hosts where user namespaces are
  refused: writes only to the roots, a private temporary directory and the package caches;
* `none`: no confinement (only when asked for);
* `auto`, the default: `bwrap` where it works here, else `landlock`, else `none` with a warning at start
  and in the server's instructions.

Whatever the mode, a command's processes live in a tree the kernel keeps (`process_groups`): outside
bubblewrap each command runs under its own reaper process (`reaper.py`), which is also where Landlock and
the seccomp filter are applied.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import stat
import sys
import sysconfig
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from coretools.sandbox import landlock, reaper
from coretools.sandbox.bwrap import bwrap_binary, bwrap_problem, prepare_sandbox
from coretools.sandbox.hardened_env import neutralise
from coretools.sandbox.paths import within
from coretools.sandbox.runner import DEFAULT_OUTPUT_CAP, Outcome, Runner, RunSpec
from coretools.sandbox.ripgrep import find_rg
from coretools.sandbox.seccomp import filter_program

logger = logging.getLogger("coretools")
SANDBOX_MODES = ("auto", "bwrap", "landlock", "none")

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


_server_secrets: dict[str, str] = {}  # variable name -> value, of the credentials the server itself holds
_secrets_lock = threading.Lock()


def hold_secret(name: str, value: str | None = None) -> None:
    """Record that the server holds a credential in the variable `name` (the bearer token of
    `--auth-token-env`, an OAuth token...): no command ever gets that variable, nor any other variable
    with the same value, whatever its name and whatever `--shell-env` passes through."""
    value = os.environ.get(name) if value is None else value
    with _secrets_lock:
        _server_secrets[name] = value or ""


def child_env(
    passthrough: Iterable[str] = (), base: dict[str, str] | None = None, *, hardened: bool = False
) -> dict[str, str]:
    """The server's environment minus obvious secrets (unless passed through by name) and minus the
    server's own credentials (`hold_secret`, never passed through), minus variables that make bash run
    code at start-up, plus settings that keep every program from waiting for a human. `hardened`: also
    neutralise the ways git runs programs named in its configuration (`hardened_env`), for a command that
    runs under an allowlist."""
    keep = set(passthrough)
    with _secrets_lock:
        held_names = set(_server_secrets)
        held_values = {v for v in _server_secrets.values() if len(v) >= 8}
    env = {}
    for name, value in (os.environ if base is None else base).items():
        upper = name.upper()
        if name in held_names or value in held_values:
            continue
        if name not in keep and any(word in upper for word in SECRET_WORDS):
            continue
        if name in DROP_VARS or name.startswith("BASH_FUNC_"):
            continue
        env[name] = value
    env.update(NON_INTERACTIVE)
    return neutralise(env) if hardened else env


DEFAULT_WALL_TIMEOUT = 600.0  # Gemini CLI's default MCP request timeout: a client has given up by then
DEFAULT_INACTIVITY_TIMEOUT = 300.0  # Gemini CLI's tools.shell.inactivityTimeout


@dataclass(frozen=True)
class Sandbox:
    """The sandbox mode in force (`bwrap`, `landlock` or `none`) and why it was chosen."""

    mode: str
    reason: str

    def describe(self) -> str:
        return {
            "bwrap": "bubblewrap: only the roots, a private /tmp and the package caches are writable; the system, "
            "your home directory and .git internals are read-only",
            "landlock": "Landlock: only the roots, a private temporary directory ($TMPDIR) and the package caches "
            "are writable",
            "none": "no sandbox: commands can do anything the server's user can",
        }[self.mode]


def default_caches(home: str | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The package caches common toolchains write to, where they exist: the XDG cache (pip, uv, go's build
    cache, yarn, pre-commit...), npm, cargo's registry and git checkouts, go's module cache, maven and
    gradle. Existing directories only: nothing is created in the user's home."""
    env = os.environ if env is None else env
    home = home or env.get("HOME") or os.path.expanduser("~")
    gopath = env.get("GOPATH", os.path.join(home, "go")).split(os.pathsep)[0]
    candidates = [
        env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"),
        os.path.join(home, ".npm"),
        os.path.join(env.get("CARGO_HOME", os.path.join(home, ".cargo")), "registry"),
        os.path.join(env.get("CARGO_HOME", os.path.join(home, ".cargo")), "git"),
        os.path.join(gopath, "pkg", "mod"),
        os.path.join(home, ".m2", "repository"),
        os.path.join(home, ".gradle", "caches"),
        os.path.join(home, ".gradle", "wrapper"),
    ]
    return [path for path in dict.fromkeys(candidates) if os.path.isdir(path)]


@functools.lru_cache(maxsize=1)
def installation() -> tuple[str, ...]:
    """What the server runs from and what a command must never write, even inside a writable directory:
    the interpreter and its environment, the installed packages (coretools, the bundled bwrap and rg), and
    uv's cache, whose files uv hard-links into environments (a write there is a write to them)."""
    home = os.environ.get("HOME") or os.path.expanduser("~")
    uv_cache = os.environ.get("UV_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                              os.path.join(home, ".cache"), "uv")  # fmt: skip
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    programs = [p for p in (bwrap_binary(), find_rg()) if p]
    paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), uv_cache,
             _installed_in(package),
             *(os.path.dirname(os.path.dirname(os.path.realpath(p))) for p in programs),  # their packages
             *(sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib", "scripts"))]  # fmt: skip
    return tuple(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.isdir(p)))


def _installed_in(package: str) -> str:
    """The site-packages coretools was imported from, wherever it is (a project's own environment inside a
    root), or the package alone when it runs from a checkout."""
    parent = os.path.dirname(package)
    return parent if os.path.basename(parent) in ("site-packages", "dist-packages") else package


def carved(writable: list[str]) -> list[str]:
    """The parts of `installation()` that lie inside one of `writable`: bound read-only over it."""
    return [p for p in installation() if any(within(p, w) for w in writable)]


@functools.lru_cache(maxsize=8)
def choose_sandbox(asked: str, network: bool) -> Sandbox:
    """The mode that `asked` means on this machine (probing bubblewrap and Landlock once)."""
    if asked in ("bwrap", "landlock", "none"):
        return Sandbox(asked, "asked for (--shell-sandbox)")
    problem = bwrap_problem()
    if problem is None:
        return Sandbox("bwrap", "bubblewrap works here")
    problem_ll = landlock.landlock_problem(network)
    if problem_ll is None:
        return Sandbox("landlock", f"bubblewrap cannot run here ({problem})")
    return Sandbox("none", f"bubblewrap cannot run here ({problem}); {problem_ll}")


@dataclass
class ProcessSettings:
    """How the processes of a tool run: timeouts, environment pass-through, sandbox, output cap. The tools
    build it from the operator's options (`--shell-timeout`, `--shell-env`, `--shell-sandbox`...)."""

    wall_timeout: float | None = DEFAULT_WALL_TIMEOUT
    inactivity_timeout: float | None = DEFAULT_INACTIVITY_TIMEOUT
    passthrough: tuple[str, ...] = ()
    sandbox: str = "auto"
    network: bool = True
    output_cap: int = DEFAULT_OUTPUT_CAP
    writable: tuple[str, ...] = ()
    caches: bool = True
    # The extra writable directories as resolved at start, with their identities (see `extra_writable`).
    _granted: list[tuple[str, int, int]] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        paths = [os.path.realpath(p) for p in self.writable]
        if self.caches:
            paths += [os.path.realpath(p) for p in default_caches()]
        for path in dict.fromkeys(paths):
            try:
                st = os.stat(path)
            except OSError:
                continue
            self._granted.append((path, st.st_dev, st.st_ino))

    @property
    def chosen(self) -> Sandbox:
        return choose_sandbox(self.sandbox or "none", self.network)

    def problem(self) -> str | None:
        """A configuration error to report at start-up, or None."""
        for path in self.writable:
            if not os.path.isdir(path):
                return f"--shell-writable {path}: not an existing directory"
        mode = self.chosen.mode
        if not self.network and mode == "none":
            if self.sandbox == "auto":
                return f"--shell-no-network: neither sandbox can cut the network here ({self.chosen.reason})"
            return "--shell-no-network needs a sandbox (--shell-sandbox auto, bwrap or landlock); with none there is no way to cut the network"
        if mode == "bwrap":
            return bwrap_problem()
        if mode == "landlock":
            return landlock.landlock_problem(self.network)
        return None

    def extra_writable(self) -> list[str]:
        """The directories a command may write besides the roots and its temporary directory: those resolved
        at start that are still the same directory. One a command replaced by a link (inside a root, say)
        is dropped, so that a link cannot aim a grant elsewhere."""
        kept = []
        for path, dev, ino in self._granted:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (dev, ino):
                kept.append(path)
            else:
                logger.warning("shell sandbox: %s changed since start (now a link or another directory); "
                               "commands may no longer write it", path)  # fmt: skip
        return kept

    def spec(
        self,
        runner: Runner,
        argv: list[str],
        *,
        cwd: str,
        roots: list[str],
        hardened: bool = False,
        readable: Iterable[str] = (),
        **extra,
    ) -> RunSpec:
        """A run of `argv` in `cwd` with these settings (in the sandbox if one is set, which sees `roots`);
        `hardened`: in the hardened environment (see `child_env`); `readable`: directories the operator's
        own programs live in (a discovery or call command), shown read-only even where the sandbox hides
        them (bubblewrap's private `/tmp`)."""
        env = child_env(self.passthrough, hardened=hardened)
        env["PWD"] = cwd
        mode = self.chosen.mode
        if mode == "bwrap":
            extra_writable = self.extra_writable()
            sandboxed = prepare_sandbox(argv, scratch=runner.scratch_dir, cwd=cwd, roots=roots, network=self.network,
                                        writable=extra_writable, hidden=runner.scratch_base,
                                        readable=[os.path.realpath(p) for p in readable],
                                        keep_read_only=carved([*map(os.path.realpath, roots), *extra_writable]))  # fmt: skip
            argv = sandboxed.argv
            extra.update(pass_fds=sandboxed.pass_fds, on_exit=sandboxed.on_exit)
            env["TMPDIR"] = "/tmp"
        else:
            tmp = runner.private_tmp
            env["TMPDIR"] = tmp
            ruleset = None
            if mode == "landlock":
                writable = [*map(os.path.realpath, roots), tmp, *self.extra_writable()]
                grants = landlock.Grants(
                    writable=tuple(writable),
                    readable=(runner.scratch_dir,),
                    hidden=(runner.scratch_base,),
                    network=self.network,
                    read_only=tuple(carved(writable)),
                )
                ruleset = landlock.Ruleset(grants)
            argv, pass_fds, on_exit = _reaped(argv, ruleset, seccomp=mode == "landlock", network=self.network)
            extra.update(pass_fds=pass_fds, on_exit=_chain(extra.get("on_exit"), on_exit))
        return RunSpec(
            argv,
            cwd=cwd,
            env=env,
            wall_timeout=self.wall_timeout,
            inactivity_timeout=self.inactivity_timeout,
            output_cap=self.output_cap,
            **extra,
        )


def _reaped(argv: list[str], ruleset: landlock.Ruleset | None, *, seccomp: bool, network: bool = True):
    """`argv` run under the per-run reaper (`reaper.py`), confined by `ruleset` and the seccomp filter
    (which also refuses every socket but a unix one without `network`)."""
    seccomp_fd = -1
    program = filter_program(network=network, shared_host=True) if seccomp else None
    if program is not None:
        seccomp_fd, write = os.pipe()
        try:
            os.write(write, program)
        finally:
            os.close(write)
    ruleset_fd = ruleset.fd if ruleset is not None else -1
    wrapped = [sys.executable, "-I", "-S", reaper.__file__, str(os.getpid()), str(ruleset_fd), str(seccomp_fd),
               "--", *argv]  # fmt: skip
    fds = tuple(fd for fd in (ruleset_fd, seccomp_fd) if fd >= 0)

    def on_exit(outcome: object = None) -> None:
        if ruleset is not None:
            ruleset.close()
        if seccomp_fd >= 0:
            try:
                os.close(seccomp_fd)
            except OSError:
                pass

    return wrapped, fds, on_exit


def _chain(first, second):
    if first is None:
        return second

    def both(outcome: object = None) -> None:
        try:
            first(outcome)
        finally:
            second(outcome)

    return both


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
