"""The seccomp filter of the bubblewrap sandbox: a short classic-BPF program that bwrap installs (through
`--seccomp FD`) just before it runs the command.

It refuses, with EPERM, the system calls a shell command has no business making and that widen the
kernel's attack surface or undo the sandbox:

- `ptrace` (tamper with another process of the sandbox);
- `io_uring_setup/enter/register` (a second system-call interface that seccomp cannot see into);
- `keyctl`, `add_key`, `request_key` (the kernel keyring, shared with the host);
- `bpf`, `userfaultfd` (frequent kernel-exploit primitives);
- `unshare` and `clone` with a namespace flag, `setns`, `mount`, `umount2`, `pivot_root` and the new mount
  API (`open_tree`, `move_mount`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr`): no nested
  namespace, no change to the mount table.

`clone3` gets ENOSYS: its flags are in memory where the filter cannot read them, and ENOSYS makes libc fall
back to `clone`, whose flags it can. A 32-bit or x32 system call on x86_64 (other numbers for the same
calls) is refused too: the process is killed for a foreign architecture, x32 calls get EPERM.

Only x86_64 and aarch64 are covered; elsewhere `filter_program()` returns None and the sandbox runs
without the filter (the namespaces and the dropped capabilities still hold).
"""

from __future__ import annotations

import platform
import struct

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000
_EPERM = 1
_ENOSYS = 38

# Offsets in struct seccomp_data: nr, arch, instruction_pointer, args[6]; args[0]'s low word (little endian).
_NR, _ARCH, _ARG0 = 0, 4, 16

_X32_BIT = 0x40000000
_SYSV_IPC = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop", "msgget", "msgsnd",
             "msgrcv", "msgctl")  # fmt: skip
_AF_UNIX = 1
_CLONE_NAMESPACES = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_UNSHARE_NAMESPACES = _CLONE_NAMESPACES | 0x80  # and NEWTIME, which clone() cannot take (CSIGNAL there)

_DENIED = ("ptrace", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
           "bpf", "userfaultfd", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
           "fsconfig", "fsmount", "fspick", "mount_setattr")  # fmt: skip

_X86_64 = {
    "ptrace": 101, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250,
    "add_key": 248, "request_key": 249, "bpf": 321, "userfaultfd": 323, "setns": 308, "mount": 165,
    "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "clone": 56, "unshare": 272, "clone3": 435,
    "socket": 41, "prlimit64": 302, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64,
    "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
}  # fmt: skip
_AARCH64 = {
    "ptrace": 117, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219,
    "add_key": 217, "request_key": 218, "bpf": 280, "userfaultfd": 282, "setns": 268, "mount": 40,
    "umount2": 39, "pivot_root": 41, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "clone": 220, "unshare": 97, "clone3": 435,
    "socket": 198, "prlimit64": 261, "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190,
    "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187,
}  # fmt: skip
# AUDIT_ARCH_* values and the system call numbers of each architecture covered.
ARCHITECTURES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}


def filter_program(machine: str | None = None, *, network: bool = True, shared_host: bool = False) -> bytes | None:
    """The filter as bwrap reads it (an array of struct sock_filter), or None for an uncovered machine.
    `network=False` also refuses every socket but a unix one (`--shell-no-network` where no network
    namespace cuts it: under Landlock, whose own rules cover TCP only). `shared_host`, for a command that
    shares the host's IPC and PID namespaces (Landlock): System V IPC is refused (its objects are shared by
    every session and outlive them), and so is `prlimit64` on another process (setting the server's or the
    reaper's limits is neither a signal nor ptrace, which Landlock governs)."""
    machine = machine or platform.machine()
    if machine == "arm64":
        machine = "aarch64"
    if machine not in ARCHITECTURES:
        return None
    return b"".join(struct.pack("=HBBI", *ins) for ins in _assemble(_program(machine, network, shared_host)))


def _program(machine: str, network: bool = True, shared_host: bool = False) -> list[tuple]:
    """Instructions as (code, jump-if-true label, jump-if-false label, k); labels are resolved later."""
    audit_arch, numbers = ARCHITECTURES[machine]
    prog: list[tuple] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ_K, None, "kill", audit_arch),
        (_LD_W_ABS, None, None, _NR),
    ]
    if machine == "x86_64":
        prog.append((_JGE_K, "deny", None, _X32_BIT))
    prog += [(_JEQ_K, "deny", None, numbers[name]) for name in _DENIED]
    prog += [
        (_JEQ_K, "clone", None, numbers["clone"]),
        (_JEQ_K, "unshare", None, numbers["unshare"]),
        (_JEQ_K, "enosys", None, numbers["clone3"]),
        *([] if network else [(_JEQ_K, "socket", None, numbers["socket"])]),
        *([(_JEQ_K, "deny", None, numbers[name]) for name in _SYSV_IPC] if shared_host else []),
        *([(_JEQ_K, "prlimit", None, numbers["prlimit64"])] if shared_host else []),
        (_RET_K, None, None, _ALLOW),
        "prlimit",
        (_LD_W_ABS, None, None, _ARG0),
        (_JEQ_K, "allow", "deny", 0),
        "socket",
        (_LD_W_ABS, None, None, _ARG0),
        (_JEQ_K, "allow", "deny", _AF_UNIX),
        "allow",
        (_RET_K, None, None, _ALLOW),
        "clone",
        (_LD_W_ABS, None, None, _ARG0),
        (_JSET_K, "deny", None, _CLONE_NAMESPACES),
        (_RET_K, None, None, _ALLOW),
        "unshare",
        (_LD_W_ABS, None, None, _ARG0),
        (_JSET_K, "deny", None, _UNSHARE_NAMESPACES),
        (_RET_K, None, None, _ALLOW),
        "deny",
        (_RET_K, None, None, _ERRNO | _EPERM),
        "enosys",
        (_RET_K, None, None, _ERRNO | _ENOSYS),
        "kill",
        (_RET_K, None, None, _KILL_PROCESS),
    ]
    return prog


def _assemble(prog: list) -> list[tuple[int, int, int, int]]:
    """Turn labels (strings in the list, names in the jump fields) into relative jump offsets."""
    labels: dict[str, int] = {}
    code: list[tuple] = []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)

    def offset(target: str | None, at: int) -> int:
        if target is None:
            return 0
        distance = labels[target] - at - 1
        if not 0 <= distance <= 255:
            raise ValueError(f"jump to {target} out of range")
        return distance

    return [(op, offset(jt, i), offset(jf, i), k) for i, (op, jt, jf, k) in enumerate(code)]

