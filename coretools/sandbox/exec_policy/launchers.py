"""Entries of the argument policy for programs that run a command given in their arguments: launchers
(`nice`, `timeout`, `sudo`...), `env`, `xargs`, `find -exec`, and the programs whose way of running
commands cannot be checked at all. Each returns the command it would launch, for the caller to check."""

from __future__ import annotations

from coretools.sandbox.exec_policy.getopt import Spec, parse
from coretools.sandbox.exec_policy.words import (
    STRICT,
    ArgumentRefused,
    Launch,
    Pattern,
    Word,
    below,
    literal_args,
    refuse,
)

# -- find --------------------------------------------------------------------------------------------------

FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
FIND_WRITES = {"-fprint": "writes to a file", "-fprint0": "writes to a file", "-fprintf": "writes to a file",
               "-fls": "writes to a file", "-delete": "deletes files wherever the starting points reach"}  # fmt: skip


def check_find(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if strict:
        literal_args(name, args)
        for word in args:
            if word in FIND_EXEC:
                raise refuse(f"find {word} runs a command and is refused {STRICT}")
            if word in FIND_WRITES:
                raise refuse(f"find {word} {FIND_WRITES[word]} and is refused {STRICT}")
        return []
    return [Launch(inner) for inner in _find_exec(args)]


def _find_exec(args: list[Word]) -> list[list[Word]]:
    found: list[list[Word]] = []
    i = 0
    while i < len(args):
        if args[i] in FIND_EXEC:
            j = i + 1
            while j < len(args) and args[j] not in (";", "+"):
                j += 1
            if j == len(args):
                raise refuse(f"find {args[i]} without a closing ';' or '+' cannot be checked")
            found.append(args[i + 1 : j] or [None])
            i = j
        i += 1
    return found


# -- launchers ---------------------------------------------------------------------------------------------

# name -> (its options, the number of operands before the command: timeout's duration, taskset's mask)
LAUNCHERS: dict[str, tuple[Spec, int]] = {
    "nice": (Spec("+n:", "adjustment:=n help version", strict_options=True, numbers=True), 0),
    "nohup": (Spec("+", "help version", strict_options=True), 0),
    "timeout": (Spec("+k:s:v", "kill-after:=k signal:=s verbose=v preserve-status foreground help version",
                     strict_options=True), 1),  # fmt: skip
    "stdbuf": (Spec("+i:o:e:", "input:=i output:=o error:=e help version", strict_options=True), 0),
    "setsid": (Spec("+cfwhV", "ctty=c fork=f wait=w help=h version=V", strict_options=True), 0),
    "time": (Spec("+af:o:pqvV", "append=a format:=f output:=o portability=p quiet=q verbose=v version=V help",
                  strict_options=True), 0),  # fmt: skip
    "command": (Spec("+pvV", strict_options=True), 0),
    "builtin": (Spec("+", strict_options=True), 0),
    "exec": (Spec("+cla:", strict_options=True), 0),
    "sudo": (Spec("+Aa:BbC:c:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv",
                  "askpass=A auth-type:=a background=b bell=B close-from:=C login-class:=c chdir:=D "
                  "preserve-env::=E edit=e group:=g set-home=H help host:=h login=i remove-timestamp=K "
                  "reset-timestamp=k list=l no-update=N non-interactive=n preserve-groups=P prompt:=p chroot:=R "
                  "role:=r stdin=S shell=s command-timeout:=T type:=t other-user:=U user:=u version=V validate=v",
                  strict_options=True), 0),  # fmt: skip
    "doas": (Spec("+a:C:Lnsu:", strict_options=True), 0),
    "ionice": (Spec("+c:n:p:P:u:thV", "class:=c classdata:=n pid:=p pgid:=P uid:=u ignore=t help=h version=V",
                    strict_options=True), 0),  # fmt: skip
    "chrt": (Spec("+abdD:fhimoP:pRrT:vV", "all-tasks=a batch=b deadline=d fifo=f help=h idle=i max=m other=o "
                  "pid=p reset-on-fork=R rr=r sched-runtime:=T sched-period:=P sched-deadline:=D verbose=v "
                  "version=V", strict_options=True), 1),  # fmt: skip
    "taskset": (Spec("+apchV", "all-tasks=a pid=p cpu-list=c help=h version=V", strict_options=True), 1),
    "busybox": (Spec("+", strict_options=True), 0),
    "toybox": (Spec("+", strict_options=True), 0),
    "unbuffer": (Spec("+p", strict_options=True), 0),
    "caffeinate": (Spec("+dimsut:w:", strict_options=True), 0),
    "proxychains": (Spec("+qf:", strict_options=True), 0),
    "torsocks": (Spec("+u:p:a:P:idqh", "user:=u pass:=p address:=a port:=P isolate=i debug=d quiet=q help=h "
                      "version", strict_options=True), 0),  # fmt: skip
}
CLEAN_ENV_LAUNCHERS = frozenset({"sudo", "doas"})
ENV = Spec("+0iC:S:u:v", "ignore-environment=i null=0 unset:=u chdir:=C split-string:=S debug=v block-signal:: "
           "default-signal:: ignore-signal:: list-signal-handling help version", strict_options=True)  # fmt: skip
XARGS = Spec("+0a:E:e::i::I:l::L:n:oprs:txP:d:", "null=0 arg-file:=a delimiter:=d eof::=e replace::=i "
             "max-lines::=l max-args:=n open-tty=o interactive=p no-run-if-empty=r max-chars:=s verbose=t "
             "show-limits exit=x max-procs:=P process-slot-var: version help", strict_options=True)  # fmt: skip


def check_launcher(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """nice, timeout, sudo...: read the launcher's own options as it does and return the command it runs."""
    spec, positional = LAUNCHERS[name]
    parsed = parse(name, spec, args)
    clean = name in CLEAN_ENV_LAUNCHERS or (name == "exec" and any(o.name == "-c" for o in parsed.options))
    if strict and name == "time" and any(o.name == "-o" for o in parsed.options):
        raise refuse(f"time -o writes to a file and is refused {STRICT}")
    if any(word is None or isinstance(word, Pattern) for word in parsed.operands[:positional]):
        raise not_literal(name)
    inner = parsed.operands[positional:]
    return [Launch(inner, clean_env=clean)] if inner else []


def check_env(name: str, args: list[Word], strict: bool) -> list[Launch]:
    parsed = parse(name, ENV, args)
    clean = False
    for option in parsed.options:
        if option.name == "-S":
            raise refuse(f"env -S/--split-string splits a string into a command that cannot be checked "
                         f"(`{option.word}`)")  # fmt: skip
        clean = clean or option.name in ("-i", "-u")
        if strict and option.name == "-C":
            below("env", "-C directory", option.value or "")
    inner = parsed.operands
    if inner[:1] == ["-"]:
        clean, inner = True, inner[1:]
    if inner and inner[0] is not None and "=" in inner[0]:
        raise refuse("env VAR=value assignments are refused by the shell policy (they can change what the "
                     "launched command does)")  # fmt: skip
    return [Launch(inner, clean_env=clean)] if inner else []


def check_xargs(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """The command xargs runs gets arguments the policy cannot see: they are marked as unknown (None)."""
    parsed = parse(name, XARGS, args)
    replace: str | None = None
    for option in parsed.options:
        if strict and option.name == "--process-slot-var":
            raise refuse(f"xargs --process-slot-var sets an environment variable of the command and is refused "
                         f"{STRICT}")  # fmt: skip
        if option.name == "-I":
            replace = option.value or "{}"
        elif option.name == "-i":
            replace = option.value or "{}"
    inner: list[Word] = list(parsed.operands) or ["echo"]
    if replace is None:
        inner.append(None)
    else:
        inner = [None if w is not None and replace in w else w for w in inner]  # BSD xargs replaces in the name
    return [Launch(inner)]


OPAQUE_LAUNCHERS = ("watch", "flock", "strace", "ltrace", "script", "su", "runuser", "chroot", "nsenter", "unshare",
                    "firejail", "parallel", "systemd-run", "at", "batch", "gdb", "xvfb-run", "dbus-run-session",
                    "ssh-agent", "sg", "setpriv", "prlimit", "numactl", "cgexec", "fakeroot", "eatmydata",
                    "faketime", "valgrind", "entr", "tmux", "screen", "pkexec", "chpst", "start-stop-daemon", "bwrap",
                    "hyperfine", "chronic", "ifne", "pee", "rlwrap", "mpirun", "mpiexec", "srun", "tini", "dumb-init",
                    "gosu", "su-exec", "daemonize", "cpulimit", "perf", "systemd-nspawn", "sem", "nq", "tsocks",
                    "winpty", "retry")  # fmt: skip


def not_literal(name: str) -> ArgumentRefused:
    return refuse(f"an argument of {name} is not literal, so the command it runs cannot be checked")


def check_opaque(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if args:
        raise refuse(f"{name} runs other commands in a way the policy cannot check")
    return []
