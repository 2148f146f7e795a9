"""Entries of the argument policy for programs that run a command given in their arguments: launchers
(`nice`, `timeout`, `sudo`...), `env`, `xargs`, `find -exec`, and the programs whose way of running
commands cannot be checked at all. Each returns the command it would launch, for the caller to check."""

from __future__ import annotations

from coretools.sandbox.exec_policy.words import (
    STRICT,
    ArgumentRefused,
    Launch,
    Word,
    below,
    literal_args,
    long_name,
    refuse,
    short_letters,
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

# name -> (options that take a value, number of positional words before the command)
LAUNCHERS: dict[str, tuple[frozenset[str], int]] = {
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "setsid": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "sudo": (frozenset({"-u", "--user", "-g", "--group", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata"}), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "busybox": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "caffeinate": (frozenset(), 0),
    "proxychains": (frozenset({"-f"}), 0),
    "torsocks": (frozenset(), 0),
}
CLEAN_ENV_LAUNCHERS = frozenset({"sudo", "doas"})
ENV_LONG = {"ignore-environment": "flag", "null": "flag", "unset": "value", "chdir": "value",
            "split-string": "value", "debug": "flag", "block-signal": "optional", "default-signal": "optional",
            "ignore-signal": "optional", "list-signal-handling": "flag", "help": "flag", "version": "flag"}  # fmt: skip
XARGS_VALUED = frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P",
                          "--max-procs", "-s", "--max-chars", "--process-slot-var"})  # fmt: skip


def not_literal(name: str) -> ArgumentRefused:
    return refuse(f"an argument of {name} is not literal, so the command it runs cannot be checked")


def check_launcher(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """nice, timeout, sudo...: skip the launcher's own options and return the command it runs."""
    valued, positional = LAUNCHERS[name]
    clean = name in CLEAN_ENV_LAUNCHERS
    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise not_literal(name)
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or len(word) == 1:
            break
        if name == "exec" and "c" in short_letters(word):
            clean = True
        if strict and name == "time" and (word.split("=", 1)[0] in ("-o", "--output") or "o" in short_letters(word)):
            raise refuse(f"time -o writes to a file and is refused {STRICT}")
        if word in valued:
            i += 2
        else:
            i += 1  # a flag, `-n5`, `--signal=KILL`, or a number such as `nice -5`
    rest = args[i:]  # its first word was checked above; a positional word (timeout's duration) is a number
    if len(rest) < positional:
        return []
    inner = rest[positional:]
    return [Launch(inner, clean_env=clean)] if inner else []


def check_env(name: str, args: list[Word], strict: bool) -> list[Launch]:
    clean = False
    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise not_literal(name)
        if word == "--":
            i += 1
            break
        if word == "-":
            clean, i = True, i + 1
            continue
        if word.startswith("--"):
            i, cleans = _env_long(args, i, strict)
        elif word.startswith("-") and len(word) > 1:
            i, cleans = _env_cluster(args, i, strict)
        elif "=" in word:
            raise refuse("env VAR=value assignments are refused by the shell policy (they can change what the "
                         "launched command does)")  # fmt: skip
        else:
            break
        clean = clean or cleans
    inner = args[i:]
    return [Launch(inner, clean_env=clean)] if inner else []


def _env_long(args: list[Word], i: int, strict: bool) -> tuple[int, bool]:
    """One long option of env (getopt accepts unique prefixes); returns the next index and whether it
    removes variables from the environment."""
    word = args[i] or ""
    given = long_name(word) or ""
    matches = [n for n in ENV_LONG if n == given] or [n for n in ENV_LONG if n.startswith(given)]
    option = matches[0] if len(matches) == 1 else None
    if option is None or option == "split-string":
        raise refuse(f"env {word} is refused by the shell policy (-S/--split-string splits a string into a command "
                     "that cannot be checked; unknown options too)")  # fmt: skip
    value = word.split("=", 1)[1] if "=" in word else None
    if ENV_LONG[option] == "value" and value is None:
        value, i = (args[i + 1] if i + 1 < len(args) else "") or "", i + 1
    if strict and option == "chdir":
        below("env", "--chdir directory", value or "")
    return i + 1, option in ("ignore-environment", "unset")


def _env_cluster(args: list[Word], i: int, strict: bool) -> tuple[int, bool]:
    """One short-option cluster of env (`-i`, `-0v`, `-uNAME`, `-C dir`); returns the next index and whether
    it removes variables from the environment."""
    letters = (args[i] or "")[1:]
    clean = False
    for index, letter in enumerate(letters):
        if letter == "S":
            raise refuse(f"env -S splits a string into a command that cannot be checked (`{args[i]}`)")
        clean = clean or letter in "iu"
        if letter in "uC":
            attached = letters[index + 1 :]
            value = attached or (args[i + 1] if i + 1 < len(args) else "") or ""
            if strict and letter == "C":
                below("env", "-C directory", value)
            return i + (1 if attached else 2), clean
        if letter not in "i0v":
            raise refuse(f"env option -{letter} is not one the shell policy knows")
    return i + 1, clean


def check_xargs(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """The command xargs runs gets arguments the policy cannot see: they are marked as unknown (None)."""
    replace: str | None = None
    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise not_literal(name)
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or len(word) == 1:
            break
        option = word.split("=", 1)[0]
        if strict and option.startswith("--p") and "--process-slot-var".startswith(option):
            raise refuse(f"xargs --process-slot-var sets an environment variable of the command and is refused "
                         f"{STRICT}")  # fmt: skip
        if word == "-I":
            replace = (args[i + 1] if i + 1 < len(args) else None) or "{}"
        elif word.startswith(("-I", "-i")):
            replace = word[2:] or "{}"
        elif option == "--replace":
            replace = word.partition("=")[2] or "{}"
        i += 2 if word in XARGS_VALUED else 1
    inner: list[Word] = list(args[i:]) or ["echo"]
    if replace is None:
        inner.append(None)
    else:
        inner = [inner[0], *(None if w is not None and replace in w else w for w in inner[1:])]
    return [Launch(inner)]


def check_opaque(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if args:
        raise refuse(f"{name} runs other commands in a way the policy cannot check")
    return []
