"""git's entry in the argument policy: options that carry a command are refused always; with an allowlist,
only the built-in subcommands of `GIT_SUBCOMMANDS`, no global options but `-C` below the working
directory, read-only `config` and `remote`, built-in merge strategies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coretools.sandbox.exec_policy.words import (
    STRICT,
    Launch,
    Pattern,
    Word,
    abbreviates,
    below,
    cluster_letters,
    cluster_value,
    literal_args,
    long_name,
    refuse,
)

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
            raise refuse(f"git config {word} is refused {STRICT}: configuration can name programs to run; "
                         "reading with --get, --get-all, --get-regexp or --list is allowed")  # fmt: skip
    if not found_read:
        raise refuse(f"git config without --get/--get-all/--get-regexp/--list is refused {STRICT} (writing "
                     "configuration can name programs to run)")  # fmt: skip


def _git_remote_read_only(args: list[str]) -> None:
    operands = [w for w in args if not w.startswith("-")]
    if operands and operands[0] not in ("show", "get-url"):
        raise refuse(f"git remote {operands[0]} is refused {STRICT}: it writes configuration (reading with "
                     "`git remote -v`, `show` or `get-url` is allowed)")  # fmt: skip
    for word in args:
        if word.startswith("-") and word not in ("-v", "--verbose", "-n", "--push", "--all"):
            raise refuse(f"git remote {word} is refused {STRICT}")


def _git_bisect(args: list[str]) -> None:
    allowed = {"start", "good", "bad", "new", "old", "skip", "reset", "log", "terms", "help"}
    if args and args[0] not in allowed:
        raise refuse(f"git bisect {args[0]} is refused {STRICT} (allowed: {', '.join(sorted(allowed))})")


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
            below(f"git {subcommand}", "directory", path)

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


def check_git(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if strict:
        literal_args(name, args)
    i = 0
    while i < len(args) and args[i] is not None and (args[i] or "").startswith("-"):
        word = args[i] or ""
        option = word.split("=", 1)[0]
        if option in GIT_INLINE_GLOBAL:
            raise refuse(f"git {option} {GIT_INLINE_GLOBAL[option]} and is refused by the shell policy")
        if strict and word == "-C":
            below("git", "-C directory", (args[i + 1] if i + 1 < len(args) else "") or "")
        elif strict and word not in GIT_GLOBAL_FLAGS:
            raise refuse(f"git {option} is refused {STRICT} (it points git at other repositories, configuration "
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
        raise refuse("git filter-branch runs its filters as shell commands and is refused by the shell policy")
    inline = GIT_INLINE_SUBCOMMANDS.get(subcommand)
    if inline and rest[:1] == [inline]:
        raise refuse(f"git {subcommand} {inline} runs a command and is refused by the shell policy")
    letters = GIT_INLINE_SHORT.get(subcommand, "")
    valued = GIT_VALUED_SHORT.get(subcommand, "")
    for word in rest:
        given = long_name(word)
        refused = abbreviates(given, GIT_INLINE_LONG, GIT_EXACT) if given is not None else None
        if refused is None and subcommand == "clone" and given is not None:
            refused = abbreviates(given, ("config",))
        if refused:
            raise refuse(f"git {subcommand} --{refused} can run arbitrary commands and is refused by the shell "
                         f"policy (`{word}`)")  # fmt: skip
        hit = next((c for c in cluster_letters(word, valued) if c in letters), None)
        if hit:
            raise refuse(f"git {subcommand} -{hit} can run arbitrary commands and is refused by the shell policy "
                         f"(`{word}`)")  # fmt: skip


def _git_strict(subcommand: str, rest: list[str]) -> None:
    if isinstance(subcommand, Pattern) or subcommand not in GIT_SUBCOMMANDS:
        raise refuse(f"git {subcommand} is refused {STRICT}: only built-in subcommands the shell policy knows may "
                     "run (not aliases or other commands)")  # fmt: skip
    rule = GIT_SUBCOMMANDS[subcommand]
    for word in rest:
        given = long_name(word)
        refused = abbreviates(given, ("output", *rule.long), GIT_EXACT) if given is not None else None
        if refused:
            raise refuse(f"git {subcommand} --{refused} is refused {STRICT} (`{word}`)")
    if subcommand in GIT_STRATEGY_USERS:
        _git_strategies(subcommand, rest)
    if rule.check is not None:
        rule.check(rest)


def _git_strategies(subcommand: str, rest: list[str]) -> None:
    """A merge strategy runs the program `git-merge-<name>`: only the built-in ones may be named."""
    for index, word in enumerate(rest):
        given = long_name(word)
        if given is not None and given and "strategy".startswith(given):
            value = word.split("=", 1)[1] if "=" in word else (rest[index + 1] if index + 1 < len(rest) else "")
        elif subcommand in ("merge", "pull", "rebase") and cluster_letters(word, GIT_VALUED_SHORT[subcommand]).endswith("s"):
            value = cluster_value(list(rest), index, "s") or ""
        else:
            continue
        if value not in GIT_STRATEGIES:
            raise refuse(f"git {subcommand} strategy `{value}` is refused {STRICT} (a strategy runs the program "
                         f"git-merge-<name>; built-in: {', '.join(sorted(GIT_STRATEGIES))})")  # fmt: skip

