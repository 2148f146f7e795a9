"""Entries of the argument policy for programs judged by their options (tar, rsync, zip, less, sort, ssh, scp,
sftp, man, sdiff, rg, fd, split, wget): each program's option table, read by the one parser (`getopt.py`),
and the options it may not be given because they run a command, load code or write where they should not,
abbreviated, clustered or in their long spelling alike; and for `cd`/`pushd`, whose directory must stay
below the working one."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from coretools.sandbox.exec_policy.getopt import Parsed, Spec, parse
from coretools.sandbox.exec_policy.words import STRICT, Entry, Launch, Word, below, literal_args, refuse

RUNS = "runs a command"


@dataclass(frozen=True)
class Options:
    """A program's option table and the options it may not be given: canonical name (`-x`, or `--name` for
    a long option without a short one) -> what it does. `extra` judges the rest of the parse."""

    spec: Spec
    refused: dict[str, str] = field(default_factory=dict)
    extra: Callable[[str, Parsed, bool], None] | None = None


def _options(table: Options, prepare: Callable[[list[Word]], list[Word]] | None = None) -> Entry:
    def entry(name: str, args: list[Word], strict: bool) -> list[Launch]:
        if strict:
            literal_args(name, args)
        parsed = parse(name, table.spec, prepare(args) if prepare else args)
        for option in parsed.options:
            if option.name in table.refused:
                raise refuse(f"{name} {option.name} {table.refused[option.name]} and is refused by the shell "
                             f"policy (`{option.word}`)")  # fmt: skip
        if table.extra is not None:
            table.extra(name, parsed, strict)
        return []

    return entry


# -- tar -------------------------------------------------------------------------------------------------------

TAR = Spec("b:C:f:F:g:H:I:K:L:N:T:V:X:", "to-command: use-compress-program:=I checkpoint-action: info-script:=F "
           "new-volume-script:=F rsh-command: rmt-command: file:=f directory:=C files-from:=T exclude-from:=X "
           "blocking-factor:=b listed-incremental:=g format:=H starting-file:=K tape-length:=L newer:=N "
           "label:=V extract=x get=x force-local checkpoint::")  # fmt: skip
TAR_VALUED = "bCfFgHIKLNTVX"


def _tar_old_style(args: list[Word]) -> list[Word]:
    """`tar xvf a.tar` as tar reads it: each letter of the first word is an option, and the letters that
    take a value take the next words, in order."""
    first = args[0] if args else None
    if first is None or first.startswith("-") or not first:
        return args
    options: list[Word] = []
    rest = list(args[1:])
    for letter in first:
        options.append(f"-{letter}")
        if letter in TAR_VALUED and rest:
            options.append(rest.pop(0))
    return [*options, *rest]


def _tar_extra(name: str, parsed: Parsed, strict: bool) -> None:
    if not strict:
        return
    if any(o.name == "-x" for o in parsed.options):
        raise refuse(f"tar extraction is refused {STRICT}: an archive names its own paths, .git/ included")
    if any(o.name == "--force-local" for o in parsed.options):
        return
    archives = [o.value for o in parsed.options if o.name == "-f" and o.value]
    remote = next((a for a in archives if ":" in a), None)
    if remote is not None:
        raise refuse(f"tar `{remote}`: an archive name with a colon names a remote host, reached through a "
                     f"remote shell; add --force-local if it is a local file ({STRICT})")  # fmt: skip


# -- ssh, scp, sftp ----------------------------------------------------------------------------------------------

SSH_COMMAND_KEYS = ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match", "include",
                    "remotecommand", "proxyusefdpass", "pkcs11provider", "securitykeyprovider")  # fmt: skip


def _ssh_extra(name: str, parsed: Parsed, strict: bool) -> None:
    for option in parsed.options:
        if option.name == "-o":
            value = option.value or ""
            key = re.split(r"[=\s]", value.strip(), maxsplit=1)[0].lower()
            if key in SSH_COMMAND_KEYS or not key:
                raise refuse(f"{name} -o {key or value} can run a local command or load code and is refused by the "
                             "shell policy")  # fmt: skip


def _less_extra(name: str, parsed: Parsed, strict: bool) -> None:
    for word in parsed.operands:
        if word is not None and word.startswith("+"):
            raise refuse(f"{name} {word}: commands given with + are refused by the shell policy (`!` runs a shell)")


def check_directory(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """cd and pushd: later commands run there, so it must stay below the working directory."""
    if not strict:
        return []
    literal_args(name, args)
    targets = [w for w in args if w is not None and not (w.startswith("-") and len(w) > 1)]
    if not targets or targets[0] == "-":
        raise refuse(f"{name} without a relative directory is refused {STRICT}")
    below(name, "directory", targets[0])
    return []


CONFIG = "reads a configuration file that can name programs to run"
SSH_REFUSED = {"-F": CONFIG}
OPTION_PROGRAMS: dict[str, Entry] = {
    "tar": _options(Options(TAR, {"-I": RUNS, "-F": RUNS, "--to-command": RUNS, "--checkpoint-action": RUNS,
                                  "--rsh-command": RUNS, "--rmt-command": RUNS}, _tar_extra),
                    prepare=_tar_old_style),  # fmt: skip
    "rsync": _options(Options(Spec("e:B:f:T:M:@:", "rsh:=e rsync-path: block-size:=B filter:=f temp-dir:=T "
                                   "remote-option:=M modify-window:=@"),
                              {"-e": RUNS, "--rsync-path": RUNS})),  # fmt: skip
    "zip": _options(Options(Spec("b:n:t:P:T", "unzip-command:=T"), {"-T": "runs unzip, or the command given to -TT"})),
    "less": _options(Options(Spec("b:h:j:k:o:O:p:P:t:T:x:y:z:#:", "log-file:=o LOG-FILE:=O lesskey-file:=k "
                                  "lesskey-src: lesskey-content:"),
                             {"-o": "writes a file", "-O": "writes a file", "-k": CONFIG, "--lesskey-src": CONFIG,
                              "--lesskey-content": CONFIG}, _less_extra)),  # fmt: skip
    "sort": _options(Options(Spec("k:t:o:S:T:", "compress-program: key:=k field-separator:=t output:=o "
                                  "buffer-size:=S temporary-directory:=T"), {"--compress-program": RUNS})),
    "ssh": _options(Options(Spec("b:c:D:E:e:F:I:i:J:L:l:m:O:o:p:Q:R:S:W:w:"),
                            {**SSH_REFUSED, "-I": "loads a PKCS#11 library"}, _ssh_extra)),  # fmt: skip
    "scp": _options(Options(Spec("c:D:F:i:J:l:o:P:S:X:"), {**SSH_REFUSED, "-S": RUNS, "-D": RUNS}, _ssh_extra)),
    "sftp": _options(Options(Spec("B:b:c:D:F:i:J:l:o:P:R:S:s:X:"),
                             {**SSH_REFUSED, "-S": RUNS, "-D": RUNS, "-b": "runs a batch file, whose `!` lines are "
                              "shell commands"}, _ssh_extra)),  # fmt: skip
    "man": _options(Options(Spec("C:E:L:M:m:P:p:R:r:S:s:e:H::T::X::", "pager:=P html::=H config-file:=C "
                                 "local-file=l"), {"-P": RUNS, "-H": "runs a browser", "-C": CONFIG,
                                                   "-l": "renders a file the model may have written"})),  # fmt: skip
    "sdiff": _options(Options(Spec("o:w:I:", "diff-program: output:=o width:=w ignore-matching-lines:=I"),
                              {"--diff-program": RUNS})),  # fmt: skip
    "rg": _options(Options(Spec("A:B:C:d:E:e:f:g:j:M:m:r:t:T:", "pre: pre-glob: regexp:=e file:=f glob:=g"),
                           {"--pre": "runs a command on every file searched"})),  # fmt: skip
    "fd": _options(Options(Spec("c:d:E:e:j:o:S:t:x:X:", "exec:=x exec-batch:=X"),
                           {"-x": RUNS, "-X": RUNS})),  # fmt: skip
    "split": _options(Options(Spec("a:b:C:l:n:t:", "filter:"), {"--filter": "runs a command on every piece"})),
    "wget": _options(Options(Spec("a:A:B:D:e:i:I:l:n:o:O:P:Q:R:t:T:U:w:X:", "use-askpass: execute:=e config:"),
                             {"--use-askpass": RUNS, "-e": "runs a wgetrc command, which can name a program",
                              "--config": CONFIG})),  # fmt: skip
}
OPTION_PROGRAMS["fdfind"] = OPTION_PROGRAMS["fd"]  # Debian's name for fd
OPTION_PROGRAMS["gtar"] = OPTION_PROGRAMS["tar"]
