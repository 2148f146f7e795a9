"""Argument policy for programs that can run other programs: one table, one entry per program.

`shell_policy` finds every command a bash line would run; this module decides, for the programs in
`TABLE`, whether their arguments make them run something else, write somewhere they should not, or do
something the policy cannot account for. An entry raises `ArgumentRefused` with a message that names the
refused part, or returns the commands the program would launch (for `env`, `xargs`, `nice`, `find -exec`
under a denylist...), which the caller checks in turn.

Two levels, by what the operator set:

- always (allowlist or denylist): options that carry a command line are refused, because they would hide
  which command runs: `git -c`, `--config-env`, `--exec-path`, `--upload-pack`/`--receive-pack`/`--exec`,
  `grep -O`, `rebase -x`, `difftool -x`, `clone -c`/`-u`, `bisect run`, `submodule foreach`,
  `filter-branch`, `env -S`/`--split-string` (also abbreviated or in a cluster), `tar --to-command`...,
  `rsync -e`, `zip -T`, `less -o`, `ssh -o ProxyCommand`, `scp -S`...; launchers and `find -exec` are
  followed to the command they run.
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
  program must be literal, and a glob or brace expansion may not start the word (it could expand to a file
  name that starts with `-` and becomes an option).

`check_paths` applies to every program with an allowlist: no argument may name a path inside a `.git`
directory (any case, or a glob that could match one), except the values of name-pattern options such as
`find -path` or `grep --exclude-dir`. Together with the hardened environment (`hardened_env.py`) this keeps
the model from writing git configuration, which is what keys like `alias.*` or `filter.<driver>.*` need.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Word = str | None  # None: a word whose value the parse cannot know


class Pattern(str):
    """A literal word with unquoted glob or brace characters: bash may expand it into other words."""


class ArgumentRefused(Exception):
    """An argument of a table program is refused; `why` names the part."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class Launch:
    """A command a program would run; `clean_env` when it runs without the caller's environment."""

    argv: list[Word]
    clean_env: bool = False


Entry = Callable[[str, list[Word], bool], list[Launch]]
EXPANDS_FIRST = set("*?[{")
STRICT = "while an allowlist is active"


def check(base: str, argv: list[Word], strict: bool) -> list[Launch]:
    """Raise `ArgumentRefused` or return the commands `argv` would launch (empty for most programs)."""
    entry = TABLE.get(base)
    return entry(base, list(argv[1:]), strict) if entry else []


def runs_programs(names: Iterable[str]) -> list[str]:
    """The programs among `names` (command names, possibly paths) that can run other programs."""
    found = []
    for name in names:
        base = os.path.basename(name)
        if (base in TABLE or base in INTERPRETERS or _VERSIONED.fullmatch(base)) and base not in found:
            found.append(base)
    return found


# -- helpers -----------------------------------------------------------------------------------------------


def _refuse(why: str) -> ArgumentRefused:
    return ArgumentRefused(why)


def _literal_args(name: str, args: list[Word]) -> None:
    """Every argument must be known, and may not expand into an option."""
    for word in args:
        if word is None:
            raise _refuse(f"an argument of {name} is not literal (an expansion), so what {name} would do cannot be "
                          f"checked; write it out {STRICT}")  # fmt: skip
        if isinstance(word, Pattern) and word[:1] in EXPANDS_FIRST | {"-"}:
            raise _refuse(f"{name} argument `{word}` is a glob or brace expansion that could expand to an option; "
                          "quote it, or start it with ./")  # fmt: skip


def _long(word: str) -> str | None:
    """`name` for `--name` or `--name=value`, else None."""
    if word.startswith("--") and len(word) > 2:
        return word[2:].split("=", 1)[0]
    return None


def _short(word: str) -> str:
    """The letters of a short-option cluster (`-abc`), else ''."""
    if word.startswith("-") and not word.startswith("--") and len(word) > 1:
        return word[1:]
    return ""


def _letters(word: str, valued: str) -> str:
    """The option letters of a short cluster, up to the first one that takes the rest as its value."""
    letters = _short(word)
    for index, letter in enumerate(letters):
        if letter in valued:
            return letters[: index + 1]
    return letters


def _abbreviates(given: str, names: Iterable[str], exact: frozenset[str] = frozenset()) -> str | None:
    """The refused long option `given` spells or abbreviates (getopt and git accept unique prefixes)."""
    if given in exact:
        return None
    for name in names:
        if name == given or (given and name.startswith(given)):
            return name
    return None


def _cluster_value(args: list[Word], index: int, letter: str) -> str | None:
    """The value of `letter` inside the cluster at `index`: the rest of the cluster, or the next word."""
    word = args[index] or ""
    rest = word[word.index(letter) + 1 :]
    if rest:
        return rest
    return args[index + 1] if index + 1 < len(args) else None


def _below(name: str, what: str, path: str) -> None:
    """A directory or file to write must be a relative path below the working directory."""
    parts = path.split("/")
    if path.startswith(("/", "~")) or ".." in parts:
        raise _refuse(f"{name} {what} `{path}` leaves the working directory; use a relative path below it {STRICT} "
                      "(or the tool's `directory` argument)")  # fmt: skip
    if names_git_dir(path):
        raise _refuse(f"{name} {what} `{path}` is inside a .git directory")


def _is_git_dir(component: str, pattern: bool) -> bool:
    lowered = component.lower()
    if lowered.rstrip(". ") == ".git":
        return True
    globbed = pattern and lowered.startswith(".") and any(c in lowered for c in "*?[")
    return globbed and fnmatch.fnmatchcase(".git", lowered)


def names_git_dir(word: str) -> bool:
    """Does `word` (or the value of `--opt=value`) name a path inside, or at, a `.git` directory?"""
    pattern = isinstance(word, Pattern)
    for piece in re.split(r"[=:]", word):
        if any(_is_git_dir(part, pattern) for part in piece.split("/")):
            return True
    return False


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
    """With an allowlist, no argument may name a path inside a `.git` directory (see the module docstring)."""
    exempt = PATTERN_OPTIONS.get(base, frozenset())
    previous = ""
    for word in argv[1:]:
        if word is not None and previous not in exempt and word.split("=", 1)[0] not in exempt:
            if names_git_dir(word):
                raise _refuse(f"`{word}` names a path inside a .git directory; writes there would plant git "
                              f"configuration, so {base} may not name it {STRICT}")  # fmt: skip
        previous = word or ""


# -- git -----------------------------------------------------------------------------------------------------

GIT_INLINE_GLOBAL = {"-c": "sets configuration, which can name programs to run",
                     "--config-env": "sets configuration, which can name programs to run",
                     "--exec-path": "runs git commands from another directory"}  # fmt: skip
GIT_GLOBAL_FLAGS = frozenset({"-p", "--paginate", "-P", "--no-pager", "--no-replace-objects", "--literal-pathspecs",
                              "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks",
                              "--version"})  # fmt: skip
GIT_GLOBAL_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"})
# long options that carry a command (any subcommand): refused with or without an allowlist
GIT_INLINE_LONG = ("upload-pack", "receive-pack", "exec", "extcmd", "tool", "open-files-in-pager", "ext-diff",
                   "sendmail-cmd", "to-cmd", "cc-cmd", "header-cmd", "tree-filter", "index-filter", "msg-filter",
                   "env-filter", "parent-filter", "commit-filter", "tag-name-filter")  # fmt: skip
# real options that are also prefixes of a refused name (git takes an exact match over an abbreviation)
GIT_EXACT = frozenset({"cc", "to", "index", "commit", "tag"})
GIT_INLINE_SHORT = {"grep": "O", "rebase": "x", "clone": "cu", "difftool": "xt"}
# short options that take the rest of their cluster (or the next word) as their value
GIT_VALUED_SHORT = {"grep": "efABCmO", "rebase": "xXsSC", "clone": "cuboj", "difftool": "xt", "merge": "sXmFS",
                    "pull": "sXSo"}  # fmt: skip
GIT_INLINE_SUBCOMMANDS = {"bisect": "run", "submodule": "foreach"}
GIT_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})


@dataclass(frozen=True)
class GitRule:
    """What one built-in subcommand may not be given with an allowlist (beyond the refusals for all)."""

    long: tuple[str, ...] = ()
    check: Callable[[list[str]], None] | None = None


def _git_config_read_only(args: list[str]) -> None:
    reads = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool", "-l", "--list"}
    modifiers = {"--global", "--system", "--local", "--worktree", "--show-origin", "--show-scope", "--name-only",
                 "-z", "--null", "--includes", "--no-includes", "--bool", "--int", "--bool-or-int", "--path",
                 "--expiry-date"}  # fmt: skip
    valued = {"-f", "--file", "--blob", "--type", "--default"}
    found_read = False
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        option = word.split("=", 1)[0]
        if word in reads:
            found_read = True
        elif option in valued:
            skip = "=" not in word
        elif word.startswith("-") and word not in modifiers:
            raise _refuse(f"git config {word} is refused {STRICT}: configuration can name programs to run; "
                          "reading with --get, --get-all, --get-regexp or --list is allowed")  # fmt: skip
    if not found_read:
        raise _refuse(f"git config without --get/--get-all/--get-regexp/--list is refused {STRICT} (writing "
                      "configuration can name programs to run)")  # fmt: skip


def _git_remote_read_only(args: list[str]) -> None:
    operands = [w for w in args if not w.startswith("-")]
    if operands and operands[0] not in ("show", "get-url"):
        raise _refuse(f"git remote {operands[0]} is refused {STRICT}: it writes configuration (reading with "
                      "`git remote -v`, `show` or `get-url` is allowed)")  # fmt: skip
    for word in args:
        if word.startswith("-") and word not in ("-v", "--verbose", "-n", "--push", "--all"):
            raise _refuse(f"git remote {word} is refused {STRICT}")


def _git_bisect(args: list[str]) -> None:
    allowed = {"start", "good", "bad", "new", "old", "skip", "reset", "log", "terms", "help"}
    if args and args[0] not in allowed:
        raise _refuse(f"git bisect {args[0]} is refused {STRICT} (allowed: {', '.join(sorted(allowed))})")


def _git_new_repository(subcommand: str) -> Callable[[list[str]], None]:
    """init and clone: the directory they create must be below the working directory."""
    valued = {"clone": {"-o", "--origin", "-b", "--branch", "--reference", "--reference-if-able", "--depth",
                        "--shallow-since", "--shallow-exclude", "--server-option", "-j", "--jobs", "--filter",
                        "--bundle-uri"},  # fmt: skip
              "init": {"-b", "--initial-branch", "--object-format"}}[subcommand]

    def check_operands(args: list[str]) -> None:
        operands: list[str] = []
        skip = False
        for word in args:
            if skip:
                skip = False
            elif word.startswith("-") and word != "-":
                skip = word in valued
            else:
                operands.append(word)
        for path in operands[1:] if subcommand == "clone" else operands:
            _below(f"git {subcommand}", "directory", path)

    return check_operands


GIT_SUBCOMMANDS: dict[str, GitRule] = {
    **{name: GitRule() for name in (
        "status", "log", "show", "diff", "grep", "add", "rm", "mv", "commit", "branch", "checkout", "switch",
        "restore", "reset", "stash", "tag", "rev-parse", "rev-list", "ls-files", "ls-tree", "cat-file", "blame",
        "annotate", "shortlog", "describe", "show-ref", "for-each-ref", "merge-base", "name-rev", "whatchanged",
        "reflog", "check-ignore", "check-attr", "count-objects", "diff-tree", "diff-files", "diff-index",
        "range-diff", "cherry", "show-branch", "clean", "version", "ls-remote")},  # fmt: skip
    "fetch": GitRule(long=("recurse-submodules",)),
    "push": GitRule(long=("recurse-submodules",)),
    "pull": GitRule(long=("recurse-submodules",)),
    "merge": GitRule(),
    "rebase": GitRule(),
    "cherry-pick": GitRule(),
    "revert": GitRule(),
    "clone": GitRule(long=("config", "template", "separate-git-dir", "recurse-submodules"),
                     check=_git_new_repository("clone")),  # fmt: skip
    "init": GitRule(long=("template", "separate-git-dir"), check=_git_new_repository("init")),
    "config": GitRule(check=_git_config_read_only),
    "remote": GitRule(check=_git_remote_read_only),
    "bisect": GitRule(check=_git_bisect),
}
GIT_STRATEGY_USERS = frozenset({"merge", "pull", "rebase", "cherry-pick", "revert"})


def _git(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if strict:
        _literal_args(name, args)
    i = 0
    while i < len(args) and args[i] is not None and (args[i] or "").startswith("-"):
        word = args[i] or ""
        option = word.split("=", 1)[0]
        if option in GIT_INLINE_GLOBAL:
            raise _refuse(f"git {option} {GIT_INLINE_GLOBAL[option]} and is refused by the shell policy")
        if strict and word == "-C":
            _below("git", "-C directory", (args[i + 1] if i + 1 < len(args) else "") or "")
        elif strict and word not in GIT_GLOBAL_FLAGS:
            raise _refuse(f"git {option} is refused {STRICT} (it points git at other repositories, configuration "
                          "or programs)")  # fmt: skip
        i += 2 if word in GIT_GLOBAL_VALUED else 1
    if i >= len(args) or args[i] is None:
        return []
    subcommand = args[i] or ""
    rest = [w for w in args[i + 1 :] if w is not None]
    _git_inline(subcommand, rest)
    if strict:
        _git_strict(subcommand, rest)
    return []


def _git_inline(subcommand: str, rest: list[str]) -> None:
    if subcommand == "filter-branch":
        raise _refuse("git filter-branch runs its filters as shell commands and is refused by the shell policy")
    inline = GIT_INLINE_SUBCOMMANDS.get(subcommand)
    if inline and rest[:1] == [inline]:
        raise _refuse(f"git {subcommand} {inline} runs a command and is refused by the shell policy")
    letters = GIT_INLINE_SHORT.get(subcommand, "")
    valued = GIT_VALUED_SHORT.get(subcommand, "")
    for word in rest:
        given = _long(word)
        refused = _abbreviates(given, GIT_INLINE_LONG, GIT_EXACT) if given is not None else None
        if refused is None and subcommand == "clone" and given is not None:
            refused = _abbreviates(given, ("config",))
        if refused:
            raise _refuse(f"git {subcommand} --{refused} can run arbitrary commands and is refused by the shell "
                          f"policy (`{word}`)")  # fmt: skip
        hit = next((c for c in _letters(word, valued) if c in letters), None)
        if hit:
            raise _refuse(f"git {subcommand} -{hit} can run arbitrary commands and is refused by the shell policy "
                          f"(`{word}`)")  # fmt: skip


def _git_strict(subcommand: str, rest: list[str]) -> None:
    if isinstance(subcommand, Pattern) or subcommand not in GIT_SUBCOMMANDS:
        raise _refuse(f"git {subcommand} is refused {STRICT}: only built-in subcommands the shell policy knows may "
                      "run (not aliases or other commands)")  # fmt: skip
    rule = GIT_SUBCOMMANDS[subcommand]
    for word in rest:
        given = _long(word)
        refused = _abbreviates(given, ("output", *rule.long), GIT_EXACT) if given is not None else None
        if refused:
            raise _refuse(f"git {subcommand} --{refused} is refused {STRICT} (`{word}`)")
    if subcommand in GIT_STRATEGY_USERS:
        _git_strategies(subcommand, rest)
    if rule.check is not None:
        rule.check(rest)


def _git_strategies(subcommand: str, rest: list[str]) -> None:
    """A merge strategy runs the program `git-merge-<name>`: only the built-in ones may be named."""
    for index, word in enumerate(rest):
        given = _long(word)
        if given is not None and given and "strategy".startswith(given):
            value = word.split("=", 1)[1] if "=" in word else (rest[index + 1] if index + 1 < len(rest) else "")
        elif subcommand in ("merge", "pull", "rebase") and _letters(word, GIT_VALUED_SHORT[subcommand]).endswith("s"):
            value = _cluster_value(list(rest), index, "s") or ""
        else:
            continue
        if value not in GIT_STRATEGIES:
            raise _refuse(f"git {subcommand} strategy `{value}` is refused {STRICT} (a strategy runs the program "
                          f"git-merge-<name>; built-in: {', '.join(sorted(GIT_STRATEGIES))})")  # fmt: skip


# -- sed -----------------------------------------------------------------------------------------------------

SED_LONG = {"expression": "value", "file": "value", "in-place": "optional", "line-length": "value", "quiet": "flag",
            "silent": "flag", "regexp-extended": "flag", "separate": "flag", "unbuffered": "flag",
            "null-data": "flag", "posix": "flag", "debug": "flag", "sandbox": "flag", "binary": "flag",
            "follow-symlinks": "flag", "zero-terminated": "flag", "help": "flag", "version": "flag"}  # fmt: skip
SED_SHORT_VALUED = "efl"
SED_SHORT_FLAGS = "nrEsuzb"
SED_SIMPLE = set("=dDgGhHlnNpPxzF")  # commands that take no argument (l takes an optional number)
SED_SUFFIX = re.compile(r"[A-Za-z0-9._~+-]*")


def _sed(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if not strict:
        return []
    _literal_args(name, args)
    scripts: list[str] = []
    operands: list[str] = []
    in_place = False
    only_operands = False
    i = 0
    while i < len(args):
        word = args[i] or ""
        i += 1
        if only_operands or word == "-" or not word.startswith("-"):
            operands.append(word)
            continue
        if word == "--":
            only_operands = True
            continue
        given = _long(word)
        if given is not None:
            matches = [n for n in SED_LONG if n == given] or [n for n in SED_LONG if n.startswith(given)]
            if len(matches) != 1:
                raise _refuse(f"sed option `{word}` is not one the shell policy knows")
            option, kind, value = matches[0], SED_LONG[matches[0]], word.split("=", 1)[1] if "=" in word else None
            if kind == "value" and value is None:
                value, i = (args[i] if i < len(args) else "") or "", i + 1
            in_place = _sed_option(option, value, scripts) or in_place
            continue
        letters = word[1:]
        for index, letter in enumerate(letters):
            if letter in SED_SHORT_FLAGS:
                continue
            rest = letters[index + 1 :]
            if letter == "i":
                in_place = _sed_option("in-place", rest, scripts) or in_place
                break
            if letter in SED_SHORT_VALUED:
                if not rest:
                    rest, i = (args[i] if i < len(args) else "") or "", i + 1
                _sed_option({"e": "expression", "f": "file", "l": "line-length"}[letter], rest, scripts)
                break
            raise _refuse(f"sed option -{letter} is not one the shell policy knows (`{word}`)")
    if not scripts:
        if not operands:
            return []
        scripts.append(operands.pop(0))
    _sed_script("\n".join(scripts))
    if in_place:
        for path in operands:
            _below("sed -i", "file", path)
    return []


def _sed_option(option: str, value: str | None, scripts: list[str]) -> bool:
    """Record one option; True when it turns on in-place editing."""
    if option == "expression":
        scripts.append(value or "")
    elif option == "file":
        raise _refuse(f"sed -f reads its script from a file the shell policy cannot see; pass the script with -e "
                      f"{STRICT}")  # fmt: skip
    elif option == "follow-symlinks":
        raise _refuse(f"sed --follow-symlinks is refused {STRICT} (an in-place edit would write where a link points)")
    elif option == "in-place":
        if value and not SED_SUFFIX.fullmatch(value):
            raise _refuse(f"sed -i backup suffix `{value}` is refused {STRICT}: a suffix with / or * names another "
                          "file to write; use a plain suffix such as -i.bak")  # fmt: skip
        return True
    return False


def _sed_script(script: str) -> None:
    """Scan a GNU sed script; refuse what executes or writes, and anything the scanner does not follow."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;}":
            i += 1
            continue
        if c == "#":
            i = _line_end(script, i)
            continue
        i = _sed_address(script, i)
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            raise _refuse("the sed script ends after an address without a command")
        i = _sed_command(script, i)


def _sed_address(script: str, i: int) -> int:
    """Skip an optional address or address range; return the index after it."""
    i = _sed_one_address(script, i)
    if i < len(script) and script[i] == ",":
        i += 1
        while i < len(script) and script[i] in " \t":
            i += 1
        i = _sed_one_address(script, i)
    return i


def _sed_one_address(script: str, i: int) -> int:
    n = len(script)
    if i < n and script[i] in "0123456789$+~":
        while i < n and script[i] in "0123456789$+~":
            i += 1
    elif i < n and script[i] in "/\\":
        delim = script[i]
        if delim == "\\":
            i += 1
            delim = script[i] if i < n else ""
            if delim in ("", "\n", "\\", "[", "]"):
                raise _refuse("a sed address uses a delimiter the shell policy does not follow")
        i = _sed_regex_end(script, i + 1, delim) + 1
        while i < n and script[i] in "IM":
            i += 1
    return i


def _sed_command(script: str, i: int) -> int:
    c = script[i]
    if c == "e":
        raise _refuse("the sed `e` command runs a shell command and is refused by the shell policy")
    if c in "wW":
        raise _refuse(f"the sed `{c}` command writes to a file and is refused {STRICT}")
    if c in "{}" or c in SED_SIMPLE:
        i += 1
        if c == "l":
            while i < len(script) and script[i].isdigit():
                i += 1
        return i
    if c in "qQ":
        i += 1
        while i < len(script) and (script[i].isdigit() or script[i] in " \t"):
            i += 1
        return i
    if c in "aic":
        return _sed_text(script, i + 1)
    if c in "rR":
        return _line_end(script, i)  # reads a file: its name runs to the end of the line
    if c in ":btTv":
        i += 1
        while i < len(script) and script[i] in " \t":
            i += 1
        while i < len(script) and script[i] not in " \t\n;":
            i += 1
        return i
    if c == "s":
        return _sed_substitute(script, i + 1)
    if c == "y":
        delim = script[i + 1] if i + 1 < len(script) else ""
        if delim in ("", "\n", "\\"):
            raise _refuse("a sed `y` command the shell policy does not follow")
        end = _sed_plain_end(script, i + 2, delim)
        return _sed_plain_end(script, end + 1, delim) + 1
    raise _refuse(f"the sed command `{c}` is not one the shell policy knows")


def _sed_substitute(script: str, i: int) -> int:
    n = len(script)
    delim = script[i] if i < n else ""
    if delim in ("", "\n", "\\", "[", "]"):
        raise _refuse("a sed `s` command uses a delimiter the shell policy does not follow")
    end = _sed_regex_end(script, i + 1, delim)
    i = _sed_plain_end(script, end + 1, delim) + 1
    while i < n and script[i] not in " \t\n;}#":
        flag = script[i]
        if flag == "e":
            raise _refuse("the sed `e` flag of `s` runs the result as a shell command and is refused by the shell "
                          "policy")  # fmt: skip
        if flag == "w":
            raise _refuse(f"the sed `w` flag of `s` writes to a file and is refused {STRICT}")
        if flag not in "gpiImM0123456789":
            raise _refuse(f"the sed `s` flag `{flag}` is not one the shell policy knows")
        i += 1
    return i


def _sed_regex_end(script: str, i: int, delim: str) -> int:
    """Index of the delimiter that ends a regex starting at `i`. Bracket expressions are skipped as GNU sed
    does (a delimiter inside `[...]` does not end the regex; a backslash there is an ordinary character)."""
    n = len(script)
    while i < n:
        c = script[i]
        if c == "\n":
            break
        if c == "\\":
            i += 2
            continue
        if c == delim:
            return i
        if c == "[":
            i = _bracket_end(script, i)
            continue
        i += 1
    raise _refuse("a sed regular expression is not terminated on its line")


def _bracket_end(script: str, i: int) -> int:
    n = len(script)
    i += 1
    if i < n and script[i] == "^":
        i += 1
    if i < n and script[i] == "]":
        i += 1
    while i < n:
        c = script[i]
        if c == "\n":
            break
        if c == "[" and i + 1 < n and script[i + 1] in ":.=":
            close = script.find(script[i + 1] + "]", i + 2)
            if close < 0:
                break
            i = close + 2
            continue
        if c == "]":
            return i + 1
        i += 1
    raise _refuse("a sed bracket expression is not terminated on its line")


def _sed_plain_end(script: str, i: int, delim: str) -> int:
    """Index of the delimiter ending a replacement or `y` part (backslash escapes, no brackets)."""
    n = len(script)
    while i < n:
        c = script[i]
        if c == "\n":
            break
        if c == "\\":
            i += 2
            continue
        if c == delim:
            return i
        i += 1
    raise _refuse("a sed replacement is not terminated on its line")


def _sed_text(script: str, i: int) -> int:
    """Skip the text of `a`, `i`, `c`: to the end of the line, continued by a backslash before a newline."""
    n = len(script)
    while i < n and script[i] in " \t":
        i += 1
    if i < n and script[i] == "\\":
        i += 1
        if i < n and script[i] == "\n":
            i += 1
    while i < n and script[i] != "\n":
        i += 2 if script[i] == "\\" else 1
    return i


def _line_end(script: str, i: int) -> int:
    end = script.find("\n", i)
    return len(script) if end < 0 else end


# -- awk -----------------------------------------------------------------------------------------------------

AWK_NOT_OPERANDS = frozenset({"print", "printf", "return", "case", "in", "do", "else", "BEGIN", "END", "getline",
                              "delete", "exit", "next", "nextfile", "function", "func", "if", "while",
                              "for"})  # fmt: skip


def _awk(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if not strict:
        return []
    _literal_args(name, args)
    i = 0
    while i < len(args):
        word = args[i] or ""
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        if word in ("-F", "-v"):
            i += 2
            continue
        if word.startswith(("-F", "-v")) or word.startswith(("--field-separator=", "--assign=")):
            i += 1
            continue
        raise _refuse(f"{name} option `{word}` is refused {STRICT} (-f program files, extensions and includes "
                      "cannot be checked; -F and -v are allowed)")  # fmt: skip
    if i < len(args):
        _awk_program(name, args[i] or "")
    return []


def _awk_program(name: str, program: str) -> None:
    """Lex the program (strings, regex literals, parentheses) and refuse commands and output redirection.

    A `/` is a regular expression where an operand is expected and a division after one, as in gawk and
    mawk; where that depends on the grammar (after `getline`, `$`, `++`, `--`) it is refused."""
    i, n = 0, len(program)
    prev = "start"  # the previous token: operand, keyword, getline, if/while/for, ambiguous or other
    parens: list[bool] = []  # per open parenthesis: does it hold an if/while/for condition?
    print_depth: int | None = None
    while i < n:
        c = program[i]
        if program[i : i + 2] == "\\\n" or (c.isspace() and c != "\n"):
            i += 2 if c == "\\" else 1  # a backslash before a newline continues the line
            continue
        if c == "\n":
            i, prev = i + 1, "other"  # ends a statement, so a / after it starts a regular expression
            continue
        if c == "#":
            i = _line_end(program, i)
            continue
        if c == '"':
            i, prev = _awk_string_end(name, program, i), "operand"
            continue
        if c == "/" and prev != "operand":
            if prev in ("ambiguous", "getline"):
                raise _refuse(f"{name}: a / here could be a division or a regular expression; rewrite it")
            i, prev = _awk_regex_end(name, program, i), "operand"
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (program[j].isalnum() or program[j] == "_"):
                j += 1
            word = program[i:j]
            if word == "system":
                raise _refuse(f"{name} system() runs a shell command and is refused {STRICT}")
            if word in ("print", "printf"):
                print_depth = len(parens)
            prev = "getline" if word == "getline" else word if word in ("if", "while", "for") else \
                "keyword" if word in AWK_NOT_OPERANDS else "operand"  # fmt: skip
            i = j
            continue
        if c.isdigit() or (c == "." and program[i + 1 : i + 2].isdigit()):
            while i < n and (program[i].isalnum() or program[i] == "."):
                i += 1
            prev = "operand"
            continue
        if c == "|":
            if program[i : i + 2] == "||" and program[i + 2 : i + 3] != "|":
                i, prev = i + 2, "other"
                continue
            raise _refuse(f"{name} `|` runs a shell command (a pipe to or from a command) and is refused {STRICT}")
        if c == "@":
            raise _refuse(f"{name} `@` (includes, extensions, indirect calls) is refused {STRICT}")
        if c == ">" and print_depth is not None and len(parens) == print_depth:
            raise _refuse(f"{name} print/printf output redirection (`>`) writes to a file and is refused {STRICT}; "
                          "put a comparison inside print in parentheses")  # fmt: skip
        if c in ";}" and print_depth is not None and len(parens) <= print_depth:
            print_depth = None  # a newline may continue a print (after `,`, `&&`...), so only ; and } end it
        if program[i : i + 2] in ("++", "--"):
            i, prev = i + 2, "ambiguous"
            continue
        if c == "(":
            parens.append(prev in ("if", "while", "for"))
            prev = "other"
        elif c == ")":
            prev = "other" if (parens.pop() if parens else False) else "operand"
        elif c == "]":
            prev = "operand"
        elif c == "$":
            prev = "ambiguous"
        else:
            prev = "other"
        i += 1


def _awk_string_end(name: str, program: str, i: int) -> int:
    i += 1
    while i < len(program):
        c = program[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "\n":
            break
        i += 1
    raise _refuse(f"{name}: a string is not terminated on its line")


def _awk_regex_end(name: str, program: str, i: int) -> int:
    i += 1
    while i < len(program):
        c = program[i]
        if c == "\\":
            i += 2
            continue
        if c == "/":
            return i + 1
        if c == "[":
            i = _bracket_end(program, i)
            continue
        if c in '\n"':
            break  # a quote inside a regular expression could be read as a string by another lexer: refuse
        i += 1
    raise _refuse(f"{name}: a regular expression the shell policy cannot follow (unterminated, or with a quote)")


# -- find ----------------------------------------------------------------------------------------------------

FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
FIND_WRITES = {"-fprint": "writes to a file", "-fprint0": "writes to a file", "-fprintf": "writes to a file",
               "-fls": "writes to a file", "-delete": "deletes files wherever the starting points reach"}  # fmt: skip


def _find(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if strict:
        _literal_args(name, args)
        for word in args:
            if word in FIND_EXEC:
                raise _refuse(f"find {word} runs a command and is refused {STRICT}")
            if word in FIND_WRITES:
                raise _refuse(f"find {word} {FIND_WRITES[word]} and is refused {STRICT}")
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
                raise _refuse(f"find {args[i]} without a closing ';' or '+' cannot be checked")
            found.append(args[i + 1 : j] or [None])
            i = j
        i += 1
    return found


# -- launchers -------------------------------------------------------------------------------------------------

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


def _not_literal(name: str) -> ArgumentRefused:
    return _refuse(f"an argument of {name} is not literal, so the command it runs cannot be checked")


def _launcher(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """nice, timeout, sudo...: skip the launcher's own options and return the command it runs."""
    valued, positional = LAUNCHERS[name]
    clean = name in CLEAN_ENV_LAUNCHERS
    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise _not_literal(name)
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or len(word) == 1:
            break
        if name == "exec" and "c" in _short(word):
            clean = True
        if strict and name == "time" and (word.split("=", 1)[0] in ("-o", "--output") or "o" in _short(word)):
            raise _refuse(f"time -o writes to a file and is refused {STRICT}")
        if word in valued:
            i += 2
        else:
            i += 1  # a flag, `-n5`, `--signal=KILL`, or a number such as `nice -5`
    rest = args[i:]  # its first word was checked above; a positional word (timeout's duration) is a number
    if len(rest) < positional:
        return []
    inner = rest[positional:]
    return [Launch(inner, clean_env=clean)] if inner else []


def _env(name: str, args: list[Word], strict: bool) -> list[Launch]:
    clean = False
    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise _not_literal(name)
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
            raise _refuse("env VAR=value assignments are refused by the shell policy (they can change what the "
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
    given = _long(word) or ""
    matches = [n for n in ENV_LONG if n == given] or [n for n in ENV_LONG if n.startswith(given)]
    option = matches[0] if len(matches) == 1 else None
    if option is None or option == "split-string":
        raise _refuse(f"env {word} is refused by the shell policy (-S/--split-string splits a string into a command "
                      "that cannot be checked; unknown options too)")  # fmt: skip
    value = word.split("=", 1)[1] if "=" in word else None
    if ENV_LONG[option] == "value" and value is None:
        value, i = (args[i + 1] if i + 1 < len(args) else "") or "", i + 1
    if strict and option == "chdir":
        _below("env", "--chdir directory", value or "")
    return i + 1, option in ("ignore-environment", "unset")


def _env_cluster(args: list[Word], i: int, strict: bool) -> tuple[int, bool]:
    """One short-option cluster of env (`-i`, `-0v`, `-uNAME`, `-C dir`); returns the next index and whether
    it removes variables from the environment."""
    letters = (args[i] or "")[1:]
    clean = False
    for index, letter in enumerate(letters):
        if letter == "S":
            raise _refuse(f"env -S splits a string into a command that cannot be checked (`{args[i]}`)")
        clean = clean or letter in "iu"
        if letter in "uC":
            attached = letters[index + 1 :]
            value = attached or (args[i + 1] if i + 1 < len(args) else "") or ""
            if strict and letter == "C":
                _below("env", "-C directory", value)
            return i + (1 if attached else 2), clean
        if letter not in "i0v":
            raise _refuse(f"env option -{letter} is not one the shell policy knows")
    return i + 1, clean


def _xargs(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """The command xargs runs gets arguments the policy cannot see: they are marked as unknown (None)."""
    replace: str | None = None
    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise _not_literal(name)
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or len(word) == 1:
            break
        option = word.split("=", 1)[0]
        if strict and option.startswith("--p") and "--process-slot-var".startswith(option):
            raise _refuse(f"xargs --process-slot-var sets an environment variable of the command and is refused "
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


def _opaque(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if args:
        raise _refuse(f"{name} runs other commands in a way the policy cannot check")
    return []


# -- other programs with command-running or file-writing options ------------------------------------------


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
            _literal_args(name, args)
        words = [w for w in args if w is not None]
        for word in words:
            given = _long(word)
            refused = _abbreviates(given, spec.long) if given is not None else None
            hit = next((c for c in _letters(word, spec.valued) if c in spec.short), None)
            if refused or hit:
                part = f"--{refused}" if refused else f"-{hit}"
                raise _refuse(f"{name} {part} can run commands or write files and is refused by the shell policy "
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
        raise _refuse(f"tar {bundle}: the I and F options run programs and are refused by the shell policy")
    if not strict:
        return
    clusters = [bundle, *(_short(w) for w in words)]
    longs = [g for g in (_long(w) for w in words) if g]
    if any("x" in c for c in clusters) or any(g == "get" or "extract".startswith(g) for g in longs):
        raise _refuse(f"tar extraction is refused {STRICT}: an archive names its own paths, .git/ included")
    if "--force-local" not in words:
        remote = next((w for w in words if ":" in w and not w.startswith("-")), None)
        if remote is not None:
            raise _refuse(f"tar `{remote}`: an archive name with a colon names a remote host, reached through a "
                          f"remote shell; add --force-local if it is a local file ({STRICT})")  # fmt: skip


SSH_COMMAND_KEYS = ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match", "include",
                    "remotecommand", "proxyusefdpass")  # fmt: skip


def _ssh_extra(name: str, words: list[str], strict: bool) -> None:
    for index, word in enumerate(words):
        if "o" in _short(word):
            value = _cluster_value(list(words), index, "o") or ""
            key = re.split(r"[=\s]", value.strip(), maxsplit=1)[0].lower()
            if key in SSH_COMMAND_KEYS or not key:
                raise _refuse(f"{name} -o {key or value} can run a local command and is refused by the shell policy")


def _less_extra(name: str, words: list[str], strict: bool) -> None:
    for word in words:
        if word.startswith("+"):
            raise _refuse(f"{name} {word}: commands given with + are refused by the shell policy (`!` runs a shell)")


def _directory(name: str, args: list[Word], strict: bool) -> list[Launch]:
    """cd and pushd: later commands run there, so it must stay below the working directory."""
    if not strict:
        return []
    _literal_args(name, args)
    targets = [w for w in args if w is not None and not (w.startswith("-") and len(w) > 1)]
    if not targets or targets[0] == "-":
        raise _refuse(f"{name} without a relative directory is refused {STRICT}")
    _below(name, "directory", targets[0])
    return []


TABLE: dict[str, Entry] = {
    "git": _git,
    "sed": _sed,
    "gsed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "find": _find,
    "env": _env,
    "xargs": _xargs,
    **{name: _launcher for name in LAUNCHERS},
    **{name: _opaque for name in ("watch", "flock", "strace", "ltrace", "script", "su", "runuser", "chroot", "nsenter",
                                  "unshare", "firejail", "parallel", "systemd-run", "at", "batch", "gdb")},  # fmt: skip
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
    "cd": _directory,
    "pushd": _directory,
}

# Programs that run other programs by design (interpreters, build tools, shells): no argument policy can
# make them safe, so an allowlist holding one of them gets the start-up warning.
INTERPRETERS = frozenset({
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh", "fish", "csh", "tcsh", "source", ".", "eval",
    "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua",
    "luajit", "tclsh", "wish", "expect", "Rscript", "R", "julia", "java", "jshell", "groovy", "scala", "go", "cargo",
    "rustc", "gcc", "cc", "clang", "g++", "c++", "make", "gmake", "cmake", "ninja", "meson", "bazel", "npm", "npx",
    "yarn", "pnpm", "pip", "pip3", "pipx", "uv", "uvx", "poetry", "pdm", "hatch", "pytest", "tox", "nox", "gradle",
    "gradlew", "mvn", "ant", "rake", "bundle", "gem", "dotnet", "docker", "podman", "kubectl", "vim", "vi", "nvim",
    "emacs", "ed", "ex", "patch", "osascript", "pwsh", "powershell",
})  # fmt: skip
_VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|node|lua)[0-9.]+")
