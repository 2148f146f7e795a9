"""The Landlock sandbox (`--shell-sandbox landlock`, and `auto` where bubblewrap cannot make namespaces).

Landlock (Linux ≥ 5.13) is access control any process may impose on itself: no namespaces, no privileges,
so it works under Ubuntu's AppArmor restriction of user namespaces, Docker's default seccomp profile and
hardened kernels, where bubblewrap cannot start. The server builds a ruleset per run (`Ruleset.build`,
three system calls through ctypes) and hands its descriptor to the per-run reaper (`reaper.py`), whose
child enters the domain just before it execs the command; the server itself is never restricted.

The model is allow-only: the ruleset *handles* every file-system right the kernel's ABI knows (except
device ioctls, so terminals work) and grants them beneath a few hierarchies:

* read and execute: everything, except the server's scratch base (`hidden`: every session's private
  directories, saved outputs and logs), which is carved out by granting each of its siblings, level by
  level from `/`, instead of `/` itself; the session's own directory is granted back;
* everything but device nodes (write, create, remove, rename, truncate): the roots, the session's private temporary
  directory, the package caches (`process_settings.default_caches`) and what the operator adds
  (`--shell-writable`);
* read and write: the character devices a shell needs (`/dev/null`, `/dev/tty`; not the user's terminals
  in `/dev/pts`); in `/dev/shm`, files may be made, used and removed but the directory not listed.

What it cannot express, and so does not do: a file inside a writable root cannot be taken back out (a
right granted on a directory covers everything beneath it), so a repository's `.git/config` and hooks are
writable under Landlock, where bubblewrap binds them read-only (the shell tool reports a change that would
run a program on the host instead); secret env files cannot be masked (reads are granted by hierarchy
too); `/tmp` itself is read-only (commands get `TMPDIR`). Later ABIs add: `REFER` (2: links and renames
across directories), `TRUNCATE` (3), TCP `bind`/`connect` (4: `--shell-no-network`, TCP only), device
ioctls (5), and the scoping of signals and abstract unix sockets to the domain (6: a command cannot signal
the server, its reaper or another session's processes). Landlock's network rules cover TCP only: without
the network, the reaper's seccomp filter refuses every socket but a unix one, whatever the ABI.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat
from dataclasses import dataclass

from coretools.sandbox.paths import within
from coretools.sandbox.seccomp import filter_program

_SYS_CREATE_RULESET = 444  # the same numbers on x86_64 and aarch64
_SYS_ADD_RULE = 445
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14

BIND_TCP = 1 << 0
CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a non-directory may carry

# Not /dev/pts, not even to read: its terminals are the user's (a command could read what is typed there).
TERMINALS = "/dev/pts"
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx")
# POSIX shared memory and semaphores (Python's multiprocessing locks) live in /dev/shm, which every session
# and the host share: a command may make, use and remove a file there, but not list the directory, so it
# cannot find another session's names.
SHARED_MEMORY = "/dev/shm"
SHARED_MEMORY_RIGHTS = READ_FILE | WRITE_FILE | MAKE_REG | REMOVE_FILE | TRUNCATE


# -- the kernel interface ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


@functools.lru_cache(maxsize=1)
def abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is missing, off, or filtered out (seccomp)."""
    if not platform.system() == "Linux" or platform.machine() not in ("x86_64", "aarch64", "arm64"):
        return 0
    try:
        version = _libc().syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))  # fmt: skip
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_fs(version: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _attr_size(version: int) -> int:
    return 8 if version < 4 else 16 if version < 6 else 24


class LandlockError(OSError):
    pass


# -- a ruleset --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grants:
    """What one run may reach (see the module docstring)."""

    writable: tuple[str, ...]
    readable: tuple[str, ...] = ()  # granted back inside `hidden` (the session's own directory)
    hidden: tuple[str, ...] = ()
    network: bool = True
    read_only: tuple[str, ...] = ()  # inside a writable directory, left read-only (the server's installation)


class Ruleset:
    """A Landlock ruleset descriptor, built in the server, closed once the run has started."""

    def __init__(self, grants: Grants, version: int | None = None) -> None:
        self.version = abi() if version is None else version
        if self.version < 1:
            raise LandlockError(errno.ENOSYS, "Landlock is not available on this kernel")
        self.fs = handled_fs(self.version)
        attr = _RulesetAttr(self.fs, 0, 0)
        if not grants.network and self.version >= 4:
            attr.handled_access_net = BIND_TCP | CONNECT_TCP
        if self.version >= 6:
            attr.scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
        fd = _libc().syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr),
                             ctypes.c_size_t(_attr_size(self.version)), ctypes.c_uint32(0))  # fmt: skip
        if fd < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_create_ruleset: {os.strerror(err)}")
        self.fd = int(fd)
        try:
            self._grant_except("/", [os.path.realpath(h) for h in (*grants.hidden, SHARED_MEMORY, TERMINALS)], READ)
            for path in grants.readable:
                self.grant(path, READ)
            for path in DEVICES:
                self.grant(path, READ_FILE | WRITE_FILE, missing_ok=True)
            self.grant(SHARED_MEMORY, SHARED_MEMORY_RIGHTS, missing_ok=True)
            write = self.fs & ~(MAKE_CHAR | MAKE_BLOCK)
            for path in grants.writable:
                inside = [r for r in grants.read_only if within(r, path)]
                if inside:  # every entry but those (the directory's own entries can then not be added to)
                    self._grant_except(path, inside, write)
                else:
                    self.grant(path, write)
        except BaseException:
            self.close()
            raise

    def grant(self, path: str, rights: int, *, missing_ok: bool = False) -> None:
        """Grant `rights` beneath `path` (on the file itself, for a non-directory)."""
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            if missing_ok:
                return
            raise
        try:
            if not stat.S_ISDIR(os.fstat(target).st_mode):
                rights &= FILE_ONLY
            rights &= self.fs
            if not rights:
                return
            rule = _PathBeneath(rights, target)
            done = _libc().syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                   ctypes.byref(rule), ctypes.c_uint32(0))  # fmt: skip
            if done != 0:
                err = ctypes.get_errno()
                raise LandlockError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
        finally:
            os.close(target)

    def _grant_except(self, directory: str, hidden: list[str], rights: int) -> None:
        """Grant `rights` beneath `directory` but not beneath any of `hidden`: the directory itself when
        nothing hidden is inside it, else each of its entries the same way (symbolic links are left out:
        what they point to is granted or not on its own)."""
        inside = [h for h in hidden if within(h, directory)]
        if not inside:
            self.grant(directory, rights, missing_ok=True)
            return
        if directory in inside:
            return
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            if entry.is_symlink():
                continue
            self._grant_except(entry.path, inside, rights)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def landlock_problem(network: bool = True) -> str | None:
    """Why the Landlock sandbox cannot hold here, or None."""
    version = abi()
    if version < 1:
        return ("Landlock is not available (Linux 5.13 or newer with the landlock LSM enabled is needed: check "
                "`cat /sys/kernel/security/lsm`; a container's seccomp profile may also filter its system calls)")  # fmt: skip
    if not network and version < 4 and filter_program(network=False) is None:
        return (f"--shell-no-network needs Landlock ABI 4 (Linux 6.7) or the seccomp filter (x86_64, aarch64) to "
                f"cut the network without bubblewrap; this kernel has ABI {version} on {platform.machine()}")  # fmt: skip
    return None
