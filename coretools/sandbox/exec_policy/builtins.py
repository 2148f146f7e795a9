"""Entries of the argument policy for bash builtins that run a command given as a string, or change what a
command name runs: `hash -p PATH NAME` (NAME then runs PATH), `enable -f` (loads a shared object),
`mapfile`/`readarray -C` and `compgen`/`complete -C` (run a command), `bind -x`/`-f`, and alias definitions
(with `expand_aliases` or in POSIX mode, `alias ls=rm` makes `ls` run rm). They are refused with an allowlist
and with a denylist alike. `trap`'s action is a script: `shell_policy` checks it as it checks `eval`'s."""

from __future__ import annotations

from coretools.sandbox.exec_policy.getopt import Spec, parse
from coretools.sandbox.exec_policy.words import Entry, Launch, Word, refuse

CHANGES_NAMES = "changes which program a command name runs"


def _refusing(spec: Spec, refused: dict[str, str]) -> Entry:
    def entry(name: str, args: list[Word], strict: bool) -> list[Launch]:
        for option in parse(name, spec, args).options:
            if option.name in refused:
                raise refuse(f"{name} {option.name} {refused[option.name]} and is refused by the shell policy")
        return []

    return entry


def check_alias(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if any(word is None or "=" in word for word in args):
        raise refuse(f"alias definitions are refused by the shell policy: an alias {CHANGES_NAMES}")
    return []


MAPFILE = Spec("d:n:O:s:tu:C:c:")
COMPLETE = Spec("o:A:G:W:F:C:X:P:S:abcdefgjksuvDEI")
BUILTINS: dict[str, Entry] = {
    "hash": _refusing(Spec("p:dtrl"), {"-p": CHANGES_NAMES}),
    "enable": _refusing(Spec("f:adnps"), {"-f": "loads a shared object as a builtin"}),
    "mapfile": _refusing(MAPFILE, {"-C": "runs a command for every few lines"}),
    "readarray": _refusing(MAPFILE, {"-C": "runs a command for every few lines"}),
    "compgen": _refusing(COMPLETE, {"-C": "runs a command"}),
    "complete": _refusing(COMPLETE, {"-C": "runs a command"}),
    "bind": _refusing(Spec("m:f:q:u:r:x:lpsvPSVX"), {"-x": "binds a key to a command",
                                                     "-f": "reads key bindings, which can run commands"}),  # fmt: skip
    "alias": check_alias,
}
