"""The per-run reaper: the first process of every shell command that bubblewrap does not run.

It is started as `python -I -S reaper.py PARENT RULESET SECCOMP -- ARGV...` (see `Confinement.argv`). It
imports nothing from coretools and nothing heavy, so that it starts in a few milliseconds, and it runs in
its own session and process group, which the runner signals as a whole.

What it does, in order:

1. Becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): every orphan of the command (a double fork,
   `setsid`, `nohup`, `disown`, a dropped environment) is re-parented to it, so the whole run stays in its
   tree, where the server finds it (`process_groups.scan`).
2. Asks the kernel for a signal when the server dies (`PR_SET_PDEATHSIG`, SIGUSR1) and then kills its
   whole tree: a server killed with SIGKILL leaves nothing behind. The signal also comes when the server
   *thread* that started it ends, so it acts only when its parent process really changed.
3. Forks the command. The child drops every capability (a root server's command keeps none), sets
   `no_new_privs`, installs the seccomp filter and enters the Landlock domain (`landlock_restrict_self` on the ruleset descriptor the server built, `landlock.Ruleset`), then
   execs ARGV. The reaper itself stays outside the domain: with Landlock's signal scoping (ABI 6), the
   command cannot signal it, nor the server.
4. Waits. When the command's first process exits, every process left in the tree is killed (a foreground
   command ends with everything it started; long-running work uses `is_background`, whose reaper is the
   job itself), and the reaper exits with the command's status, or dies of the same signal.

`RULESET` and `SECCOMP` are descriptor numbers, or -1 for none (the `none` sandbox mode uses the reaper
for lifetimes alone). A failure to confine exits with status 126 and a message on standard error, never
running the command unconfined.
"""

import _signal as signal  # the C module: `signal` itself imports enum, a third of the start-up time
import errno
import os
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_SYS_LANDLOCK_RESTRICT_SELF = 446  # the same number on x86_64 and aarch64
CONFINE_FAILED = 126


def _descendants(root):
    """Every live process below `root` in the kernel's process tree."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:  # zombies too: one whose main thread exited may have live threads and children
            children.setdefault(int(fields[1]), []).append(int(name))
    found, stack = [], list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _kill_tree(signum):
    try:
        found = _descendants(os.getpid())
    except OSError:  # no descriptor left: the server, a subreaper too, ends what this one cannot find
        found = []
    for pid in found:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return ctypes, libc


def _drop_capabilities(ctypes, libc):
    """Leave the command no capability, even as root: none in its bounding set (so no exec regains them),
    none ambient, none effective, permitted or inheritable. A process without CAP_SETPCAP has none to drop."""
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err in (errno.EINVAL, errno.EPERM):  # past the last capability, or none to drop
                break
            raise OSError(err, "prctl(PR_CAPBSET_DROP)")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _confine(ruleset_fd, seccomp_fd):
    """In the command's process, before exec: no capabilities, no new privileges, the seccomp filter, the
    Landlock domain."""
    ctypes, libc = _libc()
    _drop_capabilities(ctypes, libc)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if seccomp_fd >= 0:
        program = b""
        while True:
            chunk = os.read(seccomp_fd, 65536)
            if not chunk:
                break
            program += chunk
        os.close(seccomp_fd)
        filters = ctypes.create_string_buffer(program, len(program))

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        fprog = SockFprog(len(program) // 8, ctypes.cast(filters, ctypes.c_void_p))
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    if ruleset_fd >= 0:
        libc.syscall.restype = ctypes.c_long
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset_fd), ctypes.c_uint(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        os.close(ruleset_fd)


def _exec(argv, ruleset_fd, seccomp_fd):
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    if ruleset_fd >= 0 or seccomp_fd >= 0:  # not the `none` mode, which uses the reaper for lifetimes only
        try:
            _confine(ruleset_fd, seccomp_fd)
        except OSError as exc:
            os.write(2, ("coretools: the command was not run: its sandbox could not be set up (%s)\n" % exc).encode())
            os._exit(CONFINE_FAILED)
    _run(argv)


def _run(argv):
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, ("coretools: could not run %s: %s\n" % (argv[0], exc.strerror)).encode())
        os._exit(127)


def main():
    parent, ruleset_fd, seccomp_fd = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    argv = sys.argv[5:]
    _, libc = _libc()
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def on_parent_death(signum, frame):
        if os.getppid() != parent:
            _kill_tree(signal.SIGKILL)
            os._exit(128 + signal.SIGKILL)

    def forward(signum, frame):
        _kill_tree(signum)

    signal.signal(signal.SIGUSR1, on_parent_death)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1, 0, 0, 0)
    if os.getppid() != parent:  # the server died before the request for a signal was made
        os._exit(128 + signal.SIGKILL)
    child = os.fork()
    if child == 0:
        _exec(argv, ruleset_fd, seccomp_fd)
    for fd in (ruleset_fd, seccomp_fd):
        if fd >= 0:
            os.close(fd)
    # The command's output pipes must close when the command's processes close them, not when the reaper ends.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    status = None
    while True:
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            status = wait_status
        if status is not None:  # again after each exit: a process forked during the last sweep is seen now
            _kill_tree(signal.SIGKILL)
    if status is None:
        os._exit(CONFINE_FAILED)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            signal.signal(signum, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP keep their action anyway
            pass
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
