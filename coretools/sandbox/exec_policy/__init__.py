"""Argument policy for programs that can run other programs: one table, one entry per program.

`shell_policy` finds every command a bash line would run; this package decides, for the programs in
`TABLE`, whether their arguments make them run something else, write somewhere they should not, or do
something the policy cannot account for. An entry raises `ArgumentRefused` with a message that names the
refused part, or returns the commands the program would launch (for `env`, `xargs`, `nice`, `find -exec`
under a denylist...), which the caller checks in turn.

The words an entry sees are the ones bash will pass (`expansion.py`: brace, tilde and `$'…'` expansion
done, globs kept as `Pattern`, what bash computes at run time None), and every entry reads its options with
the one parser (`getopt.py`), the way the program does: clusters (`-0a FILE`), attached or separate values,
`--long=value`, unique prefixes (`--sig`), `--`, permutation. Launchers refuse an option they do not know,
since whether it takes a value decides which word is the command. git's global options are read as git
reads them (exact names only); its subcommands' options through the same parser.

Two levels, by what the operator set:

- always (allowlist or denylist): options that carry a command line are refused, because they would hide
  which command runs: `git -c`, `--config-env`, `--exec-path`, `--upload-pack`/`--receive-pack`/`--exec`,
  `grep -O`, `rebase -x`, `difftool -x`, `clone -c`/`-u`, `bisect run`, `submodule foreach`,
  `filter-branch`, `env -S`, tar's `-I`/`-F`/`--to-command`/`--checkpoint-action`/`--rsh-command`...,
  `rsync -e`/`--rsync-path`, `zip -T`/`-TT`, `less -o`/`-k`, `sort --compress-program`, `ssh -F`/`-I`/
  `-o ProxyCommand` (and the other command keys), `scp -S`/`-D`, `sftp -S`/`-D`/`-b`, `man -P`/`-H`/`-C`,
  `sdiff --diff-program`, `rg --pre`, `fd -x`/`-X`, `split --filter`, `wget --use-askpass`/`-e`/`--config`;
  launchers and `find -exec` are followed to the command they run, and the launchers that cannot be
  followed (`OPAQUE_LAUNCHERS`: watch, parallel, tmux...) are refused with arguments; so are the bash
  builtins that run a command or change what a name runs (`builtins.py`: `hash -p`, `enable -f`,
  `mapfile -C`, `compgen -C`, `bind -x`, alias definitions), and `trap`'s action is checked as a script.
- with an allowlist (strict), everything the entry cannot account for is refused as well. git may run only
  the built-in subcommands listed in `GIT_SUBCOMMANDS` (an alias or any other command is refused, naming
  it), with no global options other than `-C` into a directory below the working one, no `--output`, no
  `config` writes (reads with `--get`/`--list` pass), no `remote` changes, no `--template`, no
  `--git-dir`/`--work-tree`, no strategies other than the built-in ones. sed's script is scanned: the `e`
  command, the `e` and `w` flags of `s`, the `w`/`W` commands, `-f` script files, `--follow-symlinks`, and
  in-place edits of paths outside the working directory or with backup suffixes that name a directory are
  refused. awk programs may not call `system`, use `|` (pipes, `getline` from commands), redirect `print`
  output, or come from `-f` files. find may not `-exec`/`-ok` (any form), write with `-fprint*`/`-fls`, or
  `-delete`: deletion reaches wherever the starting points do, `.git` included, and an operator who wants
  the model to delete files can allowlist `rm`. tar may not extract (an archive names its own paths,
  `.git/` included). Launchers may not reset the environment (`env -i`/`-u`, `exec -c`, `sudo`, `doas`)
  for a program that can run programs: that would drop the hardened environment. Every argument of a table
  program must be literal, and a glob may not start the word (it could expand to a file name that starts
  with `-` and becomes an option).

Programs that run programs by design (`INTERPRETERS`: shells, interpreters and their `-c`/`-e`, build tools
such as make, editors, pagers such as less and more) are opaque: no argument policy can make them safe, so
allowing one allows everything it can do. So is any program the table does not know.

`check_paths` applies to every program with an allowlist: no argument may name a protected path
(`paths.word_protected_reason`, the rule of the file tools and the sandbox's mount scan too): a `.git`
directory or anything in it, a secret env file, in any case, or a glob that could match one; except the
values of name-pattern options such as `find -path` or `grep --exclude-dir`. Together with the hardened
environment (`hardened_env.py`) this keeps the model from writing git configuration, which is what keys
like `alias.*` or `filter.<driver>.*` need, and from reading secrets the file tools hide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from coretools.sandbox.exec_policy.builtins import BUILTINS
from coretools.sandbox.exec_policy.git import check_git, subcommand_index
from coretools.sandbox.exec_policy.launchers import (
    LAUNCHERS,
    OPAQUE_LAUNCHERS,
    check_env,
    check_find,
    check_launcher,
    check_opaque,
    check_xargs,
)
from coretools.sandbox.exec_policy.options import OPTION_PROGRAMS, check_directory
from coretools.sandbox.exec_policy.text_tools import check_awk, check_sed
from coretools.sandbox.exec_policy.words import Entry, Launch, Word, protected, protected_refusal, refuse


def check(base: str, argv: list[Word], strict: bool) -> list[Launch]:
    """Raise `ArgumentRefused` or return the commands `argv` would launch (empty for most programs)."""
    entry = TABLE.get(base)
    return entry(base, list(argv[1:]), strict) if entry else []


def without_global_options(base: str, argv: list[Word]) -> list[Word]:
    """`argv` as a denylist prefix of a subcommand sees it: git's global options before the subcommand are
    dropped, so `git -C . push` matches `git push`."""
    if base != "git":
        return argv
    return [argv[0], *argv[1 + subcommand_index(argv[1:]) :]]


def runs_programs(names: Iterable[str]) -> list[str]:
    """The programs among `names` (command names, possibly paths) that can run other programs."""
    found = []
    for name in names:
        base = os.path.basename(name)
        if (base in TABLE or base in INTERPRETERS or _VERSIONED.fullmatch(base)) and base not in found:
            found.append(base)
    return found


# name-pattern options: their values are patterns matched against names, not paths that are opened
PATTERN_OPTIONS: dict[str, frozenset[str]] = {
    "find": frozenset({"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
                       "-lname", "-ilname"}),  # fmt: skip
    "grep": frozenset({"--exclude-dir", "--exclude", "--include"}),
    "egrep": frozenset({"--exclude-dir", "--exclude", "--include"}),
    "rg": frozenset({"-g", "--glob", "--iglob"}),
    "fd": frozenset({"-E", "--exclude"}),
    "tar": frozenset({"--exclude"}),
    "rsync": frozenset({"--exclude", "--include"}),
    "ls": frozenset({"-I", "--ignore", "--hide"}),
    "tree": frozenset({"-I"}),
}


def check_paths(base: str, argv: list[Word]) -> None:
    """With an allowlist, no argument may name a protected path: `.git` or anything in it, a secret env file
    (`paths.word_protected_reason`, the rule of the file tools and the sandbox too), except the values of
    name-pattern options such as `find -path` or `grep --exclude-dir`."""
    exempt = PATTERN_OPTIONS.get(base, frozenset())
    previous = ""
    for word in argv[1:]:
        if word is not None and previous not in exempt and word.split("=", 1)[0] not in exempt:
            reason = protected(word)
            if reason is not None:
                raise refuse(protected_refusal(word, reason))
        previous = word or ""


TABLE: dict[str, Entry] = {
    "git": check_git,
    "sed": check_sed,
    "gsed": check_sed,
    "awk": check_awk,
    "gawk": check_awk,
    "mawk": check_awk,
    "nawk": check_awk,
    "find": check_find,
    "env": check_env,
    "xargs": check_xargs,
    **{name: check_launcher for name in LAUNCHERS},
    **{name: check_opaque for name in OPAQUE_LAUNCHERS},
    **OPTION_PROGRAMS,
    **BUILTINS,
    "cd": check_directory,
    "pushd": check_directory,
}
# Programs that run other programs by design (interpreters, build tools, shells, editors, pagers): no
# argument policy can make them safe, so the table does not try (allowing one allows everything it can do),
# and an allowlist holding one of them gets the start-up warning.
INTERPRETERS = frozenset({
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh", "fish", "csh", "tcsh", "source", ".", "eval",
    "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua",
    "luajit", "tclsh", "wish", "expect", "Rscript", "R", "julia", "java", "jshell", "groovy", "scala", "go", "cargo",
    "rustc", "gcc", "cc", "clang", "g++", "c++", "make", "gmake", "cmake", "ninja", "meson", "bazel", "npm", "npx",
    "yarn", "pnpm", "pip", "pip3", "pipx", "uv", "uvx", "poetry", "pdm", "hatch", "pytest", "tox", "nox", "gradle",
    "gradlew", "mvn", "ant", "rake", "bundle", "gem", "dotnet", "docker", "podman", "kubectl", "vim", "vi", "nvim",
    "emacs", "ed", "ex", "patch", "osascript", "pwsh", "powershell", "nano", "pico", "micro", "joe", "mg", "kak",
    "hx", "more", "most", "gpg", "xdg-open", "open", "gmake", "just", "task",
})  # fmt: skip
_VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|node|lua)[0-9.]+")
