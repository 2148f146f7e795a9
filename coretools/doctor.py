"""`coretools-mcp doctor`: what is wrong with this setup, and how to fix it, one finding a line.

It reads the options `serve` takes, with `serve`'s own parser, and checks what a server started with them
would meet here:

- the roots, by the server's own rules: `Workspace.check_root` (exists, is a directory, not `/` or the home
  directory itself) and the protected names (`protected_reason`, as the server reads a client's roots);
- ripgrep: the binary `find_rg` picks (`CORETOOLS_RG` included) and its version;
- the shell sandbox `--shell-sandbox` gives here and why, from the sandbox's own probes (`ProcessSettings`:
  bubblewrap works, or why not; the kernel's Landlock ABI);
- the edit journal's state directory (`CORETOOLS_STATE_DIR`, `XDG_STATE_HOME`): writable, private, outside
  the roots;
- with `--transport http`, the HTTP settings as `serve` checks them, and whether the port is free;
- whether the tools build with these options, as the server builds them at start;
- every host configuration file it finds that registers coretools (Gemini CLI, Claude Desktop, Claude Code,
  Cursor, VS Code, Zed, under `$HOME`, `$XDG_CONFIG_HOME` and the current directory): is the command an
  absolute path to an executable, do its arguments parse (the same parser, nothing started), do its roots
  pass the same root checks.

Doctor reads host files and never runs what they name (a project's files come with the repository): their
arguments are parsed, not served, and its output shows their control characters escaped.

Nothing imports the CLI, so the CLI hands doctor its parser (`parse_serve`) and its configuration step
(`config_of`). Doctor changes nothing: it creates no directory and starts no server; it binds the HTTP port
for a moment, and closes it, to see that it is free. Its exit status is 1 when a finding is an error, else
0: warnings are printed and pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from coretools.errors import ConfigurationError

OK, INFO, WARNING, ERROR = "ok", "info", "warning", "error"
EXIT_OK, EXIT_FAILED = 0, 1
# What a host entry runs when it runs coretools: the console scripts, or `python -m coretools`.
PROGRAMS = ("coretools-mcp", "coretools")
# uv's options that take a value before the program it runs (`uvx --from /clone coretools-mcp`).
LAUNCHER_VALUE_OPTIONS = ("--from", "--with", "--directory", "--project", "--python", "-p", "-w", "--with-editable")
VARIABLE = re.compile(r"\$\{([^}]*)\}")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

ParseServe = Callable[[list[str]], "tuple[argparse.Namespace | None, str | None]"]
ConfigOf = Callable[[argparse.Namespace], Any]


@dataclass(frozen=True)
class Finding:
    """One thing doctor found: its level (`ok`, `info`, `warning`, `error`), what it is about, what is the
    matter and, for a problem, how to fix it."""

    level: str
    topic: str
    message: str
    fix: str = ""

    def line(self) -> str:
        """The finding on one line, control characters shown escaped: a project's host file comes with the
        repository, and its names and arguments must not move the cursor or colour the terminal."""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return CONTROL.sub(lambda m: repr(m.group(0))[1:-1], f"{self.level:<7}  {self.topic}: {self.message}{fix}")


def run(args: argparse.Namespace, *, parse_serve: ParseServe, config_of: ConfigOf, out: TextIO | None = None) -> int:
    """Check everything, print one line a finding and a summary; the exit status."""
    out = sys.stdout if out is None else out
    findings = diagnose(args, parse_serve=parse_serve, config_of=config_of)
    for finding in findings:
        out.write(finding.line() + "\n")
    errors = sum(f.level == ERROR for f in findings)
    warnings = sum(f.level == WARNING for f in findings)
    out.write(f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}\n")
    return EXIT_FAILED if errors else EXIT_OK


def diagnose(args: argparse.Namespace, *, parse_serve: ParseServe, config_of: ConfigOf) -> list[Finding]:
    """Every finding, in the order of the module docstring. The checks past the roots get the usable roots
    only: a bad root is reported once, by the roots' check."""
    roots = root_findings("roots", args.roots, allow_broad=args.allow_broad_root,
                          allow_protected=args.allow_protected, explicit=True)  # fmt: skip
    usable = [r for r in args.roots if _usable_root(r, args.allow_broad_root)]
    checked = argparse.Namespace(**{**vars(args), "roots": usable})
    findings = [*roots, *ripgrep(args), *shell_sandbox(args), *state_directory(args, usable)]
    try:
        config = config_of(checked)
    except ConfigurationError as exc:
        return [*findings, Finding(ERROR, "options", str(exc)), *hosts(parse_serve)]
    findings += tool_set(config)
    findings += http(args, config)
    return [*findings, *hosts(parse_serve)]


# -- roots ---------------------------------------------------------------------------------------------


def _usable_root(raw: str, allow_broad: bool) -> bool:
    from coretools.sandbox.gateway import Workspace

    try:
        Workspace.check_root(raw, allow_broad=allow_broad)
    except ConfigurationError:
        return False
    return True


def root_findings(
    topic: str, roots: list[str], *, allow_broad: bool, allow_protected: bool, explicit: bool, where: str = ""
) -> list[Finding]:
    """Each root read by the server's rules. `explicit`: doctor's own command line (no root then means the
    current directory, which doctor can check); else a host's entry, started in a directory doctor cannot
    know. `where`: the host's entry, named in a fix."""
    from coretools.sandbox.gateway import Workspace
    from coretools.sandbox.paths import protected_reason

    in_entry = f" in {where}" if where else ""
    if not roots:
        if explicit:
            try:
                cwd = Workspace.check_root(os.getcwd(), allow_broad=allow_broad)
            except ConfigurationError as exc:
                return [Finding(WARNING, topic, f"no --root, and the current directory cannot serve as one ({exc}): "
                                "a client without roots gets no workspace", "pass --root /path/to/project")]  # fmt: skip
            return [Finding(INFO, topic, f"no --root: the client's roots, else the current directory ({cwd})")]
        return [Finding(WARNING, topic, "no --root: the server takes the client's roots, else the directory the "
                        "host starts it in", f"add \"--root\", \"/path/to/project\" to the arguments{in_entry}")]
    found = []
    for raw in roots:
        if not os.path.isabs(os.path.expanduser(raw)) and not explicit:
            found.append(Finding(WARNING, topic, f"root {raw} is relative: hosts start servers in a directory of "
                                 "their own", f"give its absolute path{in_entry}"))  # fmt: skip
            continue
        try:
            path = Workspace.check_root(raw, allow_broad=allow_broad)
        except ConfigurationError as exc:
            found.append(Finding(ERROR, topic, str(exc), f"correct the root{in_entry}" if where else ""))
            continue
        reason = None if allow_protected else protected_reason(os.path.realpath(path))
        if reason:
            found.append(Finding(WARNING, topic, f"root {raw} is {reason}, a protected path: the tools may change "
                                 "what the protected-path rules keep them from elsewhere",
                                 f"use the project directory itself as the root{in_entry}"))  # fmt: skip
        else:
            found.append(Finding(OK, topic, f"root {path}"))
    return found


# -- ripgrep, the shell sandbox, the state directory -----------------------------------------------------


def ripgrep(args: argparse.Namespace) -> list[Finding]:
    from coretools.sandbox import find_rg
    from coretools.sandbox import settings

    engine = getattr(args, "search_engine", "auto")
    if engine == "python":
        return [Finding(INFO, "ripgrep", "not used: --search-engine python")]
    override = settings.rg_override()
    binary = find_rg()
    level = ERROR if engine == "ripgrep" else WARNING
    slower = "search runs on the pure-Python engine, several times slower on large trees"
    if binary is not None:
        via = f" ({settings.RG}={override})" if override else ""
        return [Finding(OK, "ripgrep", f"{_rg_version(binary)} at {binary}{via}")]
    if override == "":
        return [Finding(level, "ripgrep", f"turned off by {settings.RG}={os.environ.get(settings.RG, '')}: {slower}",
                        f"unset {settings.RG}")]  # fmt: skip
    if override:
        return [Finding(level, "ripgrep", f"{settings.RG}={override} is not a ripgrep binary that runs: {slower}",
                        f"point {settings.RG} at an rg binary, or unset it")]  # fmt: skip
    return [Finding(level, "ripgrep", f"no rg beside {sys.executable} or on PATH: {slower}",
                    "reinstall coretools-mcp (its ripgrep dependency brings rg), or install ripgrep")]  # fmt: skip


def _rg_version(binary: str) -> str:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "ripgrep"
    return (done.stdout.splitlines() or ["ripgrep"])[0].strip()


def shell_sandbox(args: argparse.Namespace) -> list[Finding]:
    """What `--shell-sandbox` gives on this machine and why, from the probes the server runs at start."""
    from coretools.sandbox.landlock import abi
    from coretools.tools.base import options_from
    from coretools.tools.process_options import ProcessOptions

    settings = options_from(ProcessOptions, args).settings()
    asked = settings.sandbox
    chosen = settings.chosen
    version = abi()
    landlock = f"Landlock ABI {version}" if version else "no Landlock"
    problem = settings.problem()
    topic = "shell sandbox"
    if problem:
        return [Finding(ERROR, topic, f"--shell-sandbox {asked}: {problem}")]
    if chosen.mode == "none":
        if asked == "none":
            return [Finding(WARNING, topic, "none (--shell-sandbox none): commands can do anything the server's "
                            "user can", "drop --shell-sandbox none where bubblewrap or Landlock works")]  # fmt: skip
        return [Finding(WARNING, topic, f"{asked} gives none here: {chosen.reason}",
                        "make bubblewrap work (the reason above says how), or run on Linux 5.13+ with Landlock")]  # fmt: skip
    return [Finding(OK, topic, f"{asked} gives {chosen.mode} here ({chosen.reason}; {landlock})")]


def state_directory(args: argparse.Namespace, roots: list[str]) -> list[Finding]:
    """The private directory of the edit journal and the recovery records: writable, this user's alone,
    and outside every root (a root containing it turns the journal off)."""
    from coretools.sandbox import settings
    from coretools.sandbox.paths import within
    from coretools.server.toolset import journal_settings

    path = settings.state_dir()
    source = next((n for n in (settings.STATE_DIR, "XDG_STATE_HOME") if os.environ.get(n)), "the default")
    topic = "state directory"
    fix_elsewhere = f"set {settings.STATE_DIR} to a private directory of yours"
    found = []
    if not journal_settings(args).enabled:
        found.append(Finding(INFO, "edit journal", "off (--no-journal): edits cannot be undone"))
    if os.path.lexists(path):
        if not os.path.isdir(path):
            return [*found, Finding(ERROR, topic, f"{path} (from {source}) is not a directory", fix_elsewhere)]
        st = os.stat(path)
        if st.st_uid != os.geteuid():
            return [*found, Finding(ERROR, topic, f"{path} belongs to another user (uid {st.st_uid})", fix_elsewhere)]
        if not os.access(path, os.W_OK | os.X_OK):
            return [*found, Finding(ERROR, topic, f"{path} is not writable", f"chmod 700 {path}, or {fix_elsewhere}")]
        open_ = [p for p in _subdirectories(path) if os.stat(p).st_mode & 0o077]
        if open_:
            shown = " ".join(open_)
            found.append(Finding(WARNING, topic, f"{shown} open to other users: they could read what the journal "
                                 "keeps of edited files", f"chmod 700 {shown}"))  # fmt: skip
        else:
            found.append(Finding(OK, topic, f"{path} (from {source}), writable, its contents private"))
    else:
        parent = os.path.dirname(os.path.abspath(path))
        while parent != os.path.dirname(parent) and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.access(parent, os.W_OK | os.X_OK):
            return [*found, Finding(ERROR, topic, f"{path} (from {source}) cannot be created: {parent} is not "
                                    "writable", fix_elsewhere)]  # fmt: skip
        found.append(Finding(OK, topic, f"{path} (from {source}) will be created, private, at the first edit"))
    real = os.path.realpath(path)
    for root in roots:
        if within(real, os.path.realpath(root)):
            found.append(Finding(WARNING, topic, f"the root {root} contains {path}: the tools could read the "
                                 "journal, so the server keeps none for it", f"{fix_elsewhere}, outside the roots"))
    return found


def _subdirectories(path: str) -> list[str]:
    """The directories the server keeps in the state directory (journal, locks, recovery records), each
    created 0700; the state directory itself may be as open as its parent's defaults."""
    try:
        with os.scandir(path) as entries:
            return sorted(e.path for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


# -- the server's own start-up checks --------------------------------------------------------------------


def tool_set(config: Any) -> list[Finding]:
    """Whether the tools build with these options, as the server builds them at start."""
    from coretools.server.toolset import ToolSet

    try:
        toolset = ToolSet(config)
    except ConfigurationError as exc:
        return [Finding(ERROR, "tools", str(exc))]
    published = len(toolset.definitions())
    return [Finding(OK, "tools", f"{published} published (`coretools-mcp tools` lists them, and why any other is not)")]


def http(args: argparse.Namespace, config: Any) -> list[Finding]:
    """`--transport http`: the settings `serve` would refuse, and a port something else holds."""
    if getattr(args, "transport", "stdio") != "http":
        return []
    from coretools.server.http import bind_socket, settings_from

    try:
        settings = settings_from(config)
        bind_socket(settings.host, settings.port).close()
    except ConfigurationError as exc:
        fix = "stop what listens there, or choose another --port" if "cannot listen" in str(exc) else ""
        return [Finding(ERROR, "http", str(exc), fix)]
    found = [Finding(OK, "http", f"{settings.url()} is free to listen on")]
    if not settings.loopback and settings.token is None:
        found.append(Finding(WARNING, "http", f"{settings.host} is not a loopback address and --insecure-no-auth "
                             "serves it without a token: anyone who reaches it can read and change the workspace",
                             "pass --auth-token-env NAME, or bind 127.0.0.1"))  # fmt: skip
    if settings.token is not None and len(settings.token) < 32:
        found.append(Finding(WARNING, "http", f"the token in {args.auth_token_env} has {len(settings.token)} "
                             "characters: easy to guess", f"export {args.auth_token_env}=$(openssl rand -hex 32)"))
    if not settings.loopback and not settings.allowed_hosts:
        found.append(Finding(WARNING, "http", f"bound to {settings.host} without --allowed-host: requests whose "
                             "Host header is not a loopback name are refused",
                             "add --allowed-host with the name clients use"))  # fmt: skip
    return found


# -- host configuration files ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HostFile:
    """Where a host keeps MCP servers: the file, the key of its server map (dotted), and the folder a
    project file belongs to (VS Code's `${workspaceFolder}`), None for a user file."""

    host: str
    path: str
    key: str
    project: str | None = None


def host_files(home: str | None = None, config_home: str | None = None, cwd: str | None = None) -> list[HostFile]:
    """The host configuration files doctor reads, user files first (`$HOME`, `$XDG_CONFIG_HOME`), then the
    current directory's project files; each once."""
    home = home or os.path.expanduser("~")
    config_home = config_home or os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    cwd = cwd or os.getcwd()
    support = os.path.join(home, "Library", "Application Support")  # macOS
    user = [
        HostFile("Gemini CLI", os.path.join(home, ".gemini", "settings.json"), "mcpServers"),
        HostFile("Claude Desktop", os.path.join(config_home, "Claude", "claude_desktop_config.json"), "mcpServers"),
        HostFile("Claude Desktop", os.path.join(support, "Claude", "claude_desktop_config.json"), "mcpServers"),
        HostFile("Claude Code", os.path.join(home, ".claude.json"), "mcpServers"),
        HostFile("Cursor", os.path.join(home, ".cursor", "mcp.json"), "mcpServers"),
        HostFile("VS Code", os.path.join(config_home, "Code", "User", "mcp.json"), "servers"),
        HostFile("VS Code", os.path.join(config_home, "Code", "User", "settings.json"), "mcp.servers"),
        HostFile("VS Code", os.path.join(support, "Code", "User", "mcp.json"), "servers"),
        HostFile("VS Code", os.path.join(support, "Code", "User", "settings.json"), "mcp.servers"),
        HostFile("Zed", os.path.join(config_home, "zed", "settings.json"), "context_servers"),
    ]
    project = [
        HostFile("Gemini CLI", os.path.join(cwd, ".gemini", "settings.json"), "mcpServers", cwd),
        HostFile("Claude Code", os.path.join(cwd, ".mcp.json"), "mcpServers", cwd),
        HostFile("Cursor", os.path.join(cwd, ".cursor", "mcp.json"), "mcpServers", cwd),
        HostFile("VS Code", os.path.join(cwd, ".vscode", "mcp.json"), "servers", cwd),
        HostFile("Zed", os.path.join(cwd, ".zed", "settings.json"), "context_servers", cwd),
    ]
    seen: set[str] = set()
    unique = []
    for spec in user + project:
        real = os.path.realpath(spec.path)
        if real not in seen:
            seen.add(real)
            unique.append(spec)
    return unique


def hosts(parse_serve: ParseServe, files: list[HostFile] | None = None) -> list[Finding]:
    files = host_files() if files is None else files
    found: list[Finding] = []
    registered = 0
    for spec in files:
        if not os.path.isfile(spec.path):
            continue
        shown = _shown(spec.path)
        try:
            with open(spec.path, encoding="utf-8") as f:
                data = loads_jsonc(f.read())
        except (OSError, UnicodeDecodeError) as exc:
            found.append(Finding(WARNING, f"{spec.host} {shown}", f"cannot be read ({exc})"))
            continue
        except ValueError as exc:
            found.append(Finding(ERROR, f"{spec.host} {shown}", f"is not valid JSON ({exc}): the host reads none "
                                 "of its servers", "correct the file"))  # fmt: skip
            continue
        for key, entry in server_entries(data, spec):
            launch = _launch(entry)
            if launch is None or entry.get("disabled") is True:
                continue
            command, args = launch
            serve_args = _serve_args(command, args)
            if serve_args is None:
                continue
            registered += 1
            topic = f"{spec.host} {shown} {key}"
            found += entry_findings(topic, spec, command, args, serve_args, entry, parse_serve)
    if not registered:
        found.append(Finding(INFO, "hosts", "no host configuration file found that registers coretools (looked for "
                             "Gemini CLI, Claude Desktop, Claude Code, Cursor, VS Code and Zed's, in the home "
                             "directory and here)"))  # fmt: skip
    return found


def server_entries(data: Any, spec: HostFile) -> Iterator[tuple[str, dict]]:
    """(dotted key, entry) of each server the file declares under `spec.key`, and, in Claude Code's
    `~/.claude.json`, under each project's `mcpServers` too (its local scope)."""
    maps: list[tuple[str, Any]] = [(spec.key, _dig(data, spec.key))]
    if spec.host == "Claude Code" and spec.project is None and isinstance(data, dict):
        projects = data.get("projects")
        if isinstance(projects, dict):
            maps += [(f"projects[{json.dumps(p)}].mcpServers", _dig(v, "mcpServers")) for p, v in projects.items()]
    for key, servers in maps:
        if isinstance(servers, dict):
            for alias, entry in servers.items():
                if isinstance(entry, dict):
                    yield f"{key}.{alias}", entry


def _dig(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _launch(entry: dict) -> tuple[str, list[str]] | None:
    """The command and arguments of a stdio entry; Zed's older form nests them (`command: {path, args}`)."""
    command, args = entry.get("command"), entry.get("args", [])
    if isinstance(command, dict):
        command, args = command.get("path"), command.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    return command, args


def _serve_args(command: str, args: list[str]) -> list[str] | None:
    """The arguments coretools gets when this command runs it (`coretools-mcp ...`, `uvx --from X
    coretools-mcp ...`, `uv run coretools-mcp ...`, `python -m coretools ...`), or None for another server."""
    if os.path.basename(command) in PROGRAMS:
        return args
    for i, arg in enumerate(args):
        if i and args[i - 1] in LAUNCHER_VALUE_OPTIONS:
            continue
        if _program(arg) in PROGRAMS:
            return args[i + 1:]
        if arg == "-m" and args[i + 1:i + 2] == ["coretools"]:
            return args[i + 2:]
    return None


def _program(arg: str) -> str:
    """The program a launcher's argument names, without a version (`coretools-mcp@latest`, `==0.3`)."""
    return re.split(r"[@=<>~]", arg, maxsplit=1)[0]


def entry_findings(
    topic: str, spec: HostFile, command: str, args: list[str], serve_args: list[str], entry: dict,
    parse_serve: ParseServe,
) -> list[Finding]:  # fmt: skip
    where = f"{_shown(spec.path)} ({topic.rsplit(' ', 1)[-1]})"
    found = []
    expanded = _expand(command, spec)
    if expanded is None:
        found.append(Finding(INFO, topic, f"command {command} names a variable the host fills in: not checked"))
    elif not os.path.isabs(expanded):
        which = shutil.which(expanded)
        found.append(Finding(WARNING if which else ERROR, topic,
                             f"command {command} is not an absolute path: hosts start servers with a PATH of their "
                             "own, often without ~/.local/bin" + ("" if which else f", and {command} is not on "
                                                                   "this PATH either"),
                             f"use {which if which else 'its absolute path'} as the command in {where} "
                             "(`echo \"$(uv tool dir --bin)/coretools-mcp\"` prints the installed one)"))  # fmt: skip
    elif not os.path.isfile(expanded):
        found.append(Finding(ERROR, topic, f"command {expanded} does not exist",
                             f"install coretools (`uv tool install /path/to/clone`) or correct the path in {where}"))
    elif not os.access(expanded, os.X_OK):
        found.append(Finding(ERROR, topic, f"command {expanded} is not executable", f"chmod +x {expanded}"))
    launcher = os.path.basename(expanded or command)
    before = args[: len(args) - len(serve_args)]
    if launcher == "uv" and before[:1] == ["run"] and not _has_option(before, "--directory", "--project") \
            and not entry.get("cwd"):
        found.append(Finding(WARNING, topic, "uv run without --directory runs in the directory the host starts it "
                             "in, where there is no coretools project", f"add \"--directory\", \"/path/to/clone\" "
                             f"after \"run\" in {where}, or use the installed command"))  # fmt: skip
    if launcher == "uvx" or before[:2] == ["tool", "run"]:
        if not _has_option(before, "--from"):
            found.append(Finding(ERROR, topic, "uvx without --from looks coretools-mcp up in the package registry, "
                                 "where it is not published", f"add \"--from\", \"/path/to/clone\" before "
                                 f"{before[-1] if before else 'coretools-mcp'} in {where}, or use the installed "
                                 "command"))  # fmt: skip
    resolved = [_expand(a, spec) for a in serve_args]
    if any(a is None for a in resolved):
        unresolved = [a for a, r in zip(serve_args, resolved) if r is None]
        found.append(Finding(INFO, topic, f"arguments {' '.join(unresolved)} name variables the host fills in: "
                             "those are not checked"))  # fmt: skip
        resolved = [r if r is not None else a for a, r in zip(serve_args, resolved)]
    namespace, error = parse_serve([a for a in resolved if a is not None])
    if namespace is None:
        found.append(Finding(ERROR, topic, f"its arguments do not parse: {error}", f"correct the arguments in {where}"))
        return found
    cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
    roots = [os.path.join(cwd, r) if cwd and not os.path.isabs(r) else r
             for r in namespace.roots if not VARIABLE.search(r)]  # fmt: skip
    if roots or not namespace.roots:  # (roots the host fills in are not checked; said above)
        found += root_findings(topic, roots, allow_broad=namespace.allow_broad_root,
                               allow_protected=namespace.allow_protected, explicit=False, where=where)  # fmt: skip
    if not [f for f in found if f.level in (WARNING, ERROR)]:
        found = [*(f for f in found if f.level == INFO), Finding(OK, topic, f"runs {' '.join([command, *args])}")]
    return found


def _has_option(args: list[str], *names: str) -> bool:
    return any(a in names or a.split("=", 1)[0] in names for a in args)


def _expand(text: str, spec: HostFile) -> str | None:
    """`text` with the variables hosts expand (`${workspaceFolder}` of a project file, `${userHome}`,
    `${env:NAME}`, `${NAME}`, `${NAME:-default}`) filled in from here; None when one cannot be known here."""
    unknown = False

    def value(match: re.Match) -> str:
        nonlocal unknown
        name, has_default, default = match.group(1).partition(":-")
        if name == "workspaceFolder" and spec.project is not None:
            return spec.project
        if name == "userHome":
            return os.path.expanduser("~")
        name = name.removeprefix("env:")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and (os.environ.get(name) or has_default):
            return os.environ.get(name) or default
        unknown = True
        return match.group(0)

    expanded = VARIABLE.sub(value, text)
    return None if unknown else expanded


def _shown(path: str) -> str:
    """A path as a person writes it: under the home directory as `~/...`."""
    from coretools.sandbox import strip_prefix

    home = os.path.expanduser("~")
    rest = strip_prefix(path, home) if home != "/" else None
    return path if rest is None else ("~/" + rest if rest else "~")


_JSONC = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/|,(\s*[}\]])', re.S)


def loads_jsonc(text: str) -> Any:
    """JSON with the comments and trailing commas VS Code, Zed and Gemini CLI accept in their settings."""
    return json.loads(_JSONC.sub(lambda m: m.group(1) or m.group(2) or "", text))
