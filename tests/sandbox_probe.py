"""Shared by the bubblewrap attack suites (tests/attacks/test_bwrap_*.py): a probe that calls the system
calls the sandbox's seccomp filter covers and prints what each returned, and the one reason a sandbox test
may skip."""

from __future__ import annotations


def namespaces_forbidden() -> str | None:
    """Why this machine refuses the sandbox's namespaces, or None."""
    from coretools.sandbox.bwrap import bwrap_problem

    problem = bwrap_problem()
    return problem if problem and "namespace" in problem else None


SYSCALL_PROBE = r'''
import ctypes, errno, os, signal, subprocess
libc = ctypes.CDLL(None, use_errno=True)
x86 = os.uname().machine == "x86_64"
NR = dict(ptrace=(101, 117), io_uring_setup=(425, 425), keyctl=(250, 219), bpf=(321, 280),
          userfaultfd=(323, 282), unshare=(272, 97), mount=(165, 40), setns=(308, 268),
          clone=(56, 220), clone3=(435, 435))
keep = []
def c_str(text):
    keep.append(ctypes.create_string_buffer(text.encode()))
    return ctypes.addressof(keep[-1])
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(NR[name][0 if x86 else 1], *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    if r == 0 and name == "clone":
        os._exit(0)
    if r > 0 and name == "clone":
        os.waitpid(r, 0)
    return "ok" if r >= 0 else errno.errorcode.get(e, str(e))
sleeper = subprocess.Popen(["sleep", "5"])
buf = ctypes.create_string_buffer(256)
os.makedirs("/tmp/mnt", exist_ok=True)
uts = os.open("/proc/self/ns/uts", os.O_RDONLY)
results = {}
results["ptrace"] = call("ptrace", 0x4206, sleeper.pid, 0, 0)
results["io_uring_setup"] = call("io_uring_setup", 1, ctypes.addressof(buf))
results["keyctl"] = call("keyctl", 0, -3, 0)
results["bpf"] = call("bpf", 0, 0, 0)
results["userfaultfd"] = call("userfaultfd", 1)
results["setns"] = call("setns", uts, 0)
results["clone_newuser"] = call("clone", 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0)
results["clone3"] = call("clone3", 0, 0)
results["mount"] = call("mount", c_str("none"), c_str("/tmp/mnt"), c_str("tmpfs"), 0, 0)
results["unshare_mnt"] = call("unshare", 0x00020000)
results["unshare"] = call("unshare", 0x10000000)
sleeper.kill()
print(" ".join(f"{k}={v}" for k, v in results.items()))
'''


def probe_results(stdout: str) -> dict[str, str]:
    line = stdout.strip().splitlines()[-1]
    return dict(pair.split("=") for pair in line.split())


BLOCKED = {"ptrace", "io_uring_setup", "keyctl", "bpf", "userfaultfd", "unshare", "unshare_mnt", "mount",
           "setns", "clone_newuser"}  # fmt: skip


