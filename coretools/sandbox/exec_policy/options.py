"""Entries of the argument policy for programs judged by their options (tar, rsync, zip, less, sort, ssh,
scp, sftp, man, sdiff): options that carry a command or write files are refused, abbreviated or in a
cluster too; and for `cd`/`pushd`, whose directory must stay below the working one."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from coretools.sandbox.exec_policy.words import (
    STRICT,
    Entry,
    Launch,
    Word,
    abbreviates,
    below,
    cluster_letters,
    cluster_value,
    literal_args,
    long_name,
    refuse,
    short_letters,
)

@dataclass(frozen=True)
class Options:
    """A program's options that carry a command: long names (abbreviations count) and short letters; `valued`
    are the short options that take the rest of their cluster as a value; `extra` checks the rest."""

    long: tuple[str, ...] = ()
    short: str = ""
    valued: str = ""
    extra: Callable[[str, list[str], bool], None] | None = None


def _options(spec: Options) -> Entry:
    def entry(name: str, args: list[Word], strict: bool) -> list[Launch]:
        if strict:
            literal_args(name, args)
        words = [w for w in args if w is not None]
        for word in words:
            given = long_name(word)
            refused = abbreviates(given, spec.long) if given is not None else None
            hit = next((c for c in cluster_letters(word, spec.valued) if c in spec.short), None)
            if refused or hit:
                part = f"--{refused}" if refused else f"-{hit}"
                raise refuse(f"{name} {part} can run commands or write files and is refused by the shell policy "
                             f"(`{word}`)")  # fmt: skip
        if spec.extra is not None:
            spec.extra(name, words, strict)
        return []

    return entry


def _tar_extra(name: str, words: list[str], strict: bool) -> None:
    """Old-style `tar xvf`: the first word is a cluster without a dash."""
    first = words[0] if words else ""
    bundle = first if first and not first.startswith("-") else ""
    if any(c in bundle for c in "IF"):
        raise refuse(f"tar {bundle}: the I and F options run programs and are refused by the shell policy")
    if not strict:
        return
    clusters = [bundle, *(short_letters(w) for w in words)]
    longs = [g for g in (long_name(w) for w in words) if g]
    if any("x" in c for c in clusters) or any(g == "get" or "extract".startswith(g) for g in longs):
        raise refuse(f"tar extraction is refused {STRICT}: an archive names its own paths, .git/ included")
    if "--force-local" not in words:
        remote = next((w for w in words if ":" in w and not w.startswith("-")), None)
        if remote is not None:
            raise refuse(f"tar `{remote}`: an archive name with a colon names a remote host, reached through a "
                         f"remote shell; add --force-local if it is a local file ({STRICT})")  # fmt: skip


SSH_COMMAND_KEYS = ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match", "include",
                    "remotecommand", "proxyusefdpass")  # fmt: skip


def _ssh_extra(name: str, words: list[str], strict: bool) -> None:
    for index, word in enumerate(words):
        if "o" in short_letters(word):
            value = cluster_value(list(words), index, "o") or ""
            key = re.split(r"[=\s]", value.strip(), maxsplit=1)[0].lower()
            if key in SSH_COMMAND_KEYS or not key:
                raise refuse(f"{name} -o {key or value} can run a local command and is refused by the shell policy")


def _less_extra(name: str, words: list[str], strict: bool) -> None:
    for word in words:
        if word.startswith("+"):
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


OPTION_PROGRAMS: dict[str, Entry] = {
    "tar": _options(Options(long=("checkpoint-action", "to-command", "use-compress-program", "info-script",
                                  "new-volume-script", "rsh-command", "rmt-command"),
                            short="IF", valued="bCfFgHIKLNTVX", extra=_tar_extra)),  # fmt: skip
    "rsync": _options(Options(long=("rsh", "rsync-path"), short="e", valued="efBTM")),
    "zip": _options(Options(long=("unzip-command",), short="T", valued="bntP")),
    "less": _options(Options(long=("log-file", "LOG-FILE", "lesskey-file", "lesskey-src", "lesskey-content"),
                             short="oOk", valued="bhjkoOpPtTxyz", extra=_less_extra)),  # fmt: skip
    "sort": _options(Options(long=("compress-program",))),
    "ssh": _options(Options(short="F", valued="bcDEeFIiJLlmOopQRSWw", extra=_ssh_extra)),
    "scp": _options(Options(short="SF", valued="cFiJloPSX", extra=_ssh_extra)),
    "sftp": _options(Options(short="SFD", valued="BbcDFiJlPRSs", extra=_ssh_extra)),
    "man": _options(Options(long=("pager", "html", "config-file", "local-file"), short="PHCl",
                            valued="CELmMpPrRsSTeH")),  # fmt: skip
    "sdiff": _options(Options(long=("diff-program",))),
}
