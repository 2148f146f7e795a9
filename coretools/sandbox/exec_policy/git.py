"""git's entry in the argument policy: options that carry a command are refused always; with an allowlist,
only the built-in subcommands of `GIT_SUBCOMMANDS`, no global options but `-C` below the working
directory, read-only `config` and `remote`, built-in merge strategies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coretools.sandbox.exec_policy.getopt import Option, Parsed, Spec, parse
from coretools.sandbox.exec_policy.words import STRICT, Launch, Pattern, Word, below, literal_args, refuse

GIT_INLINE_GLOBAL = {"-c": "sets configuration, which can name programs to run",
                     "--config-env": "sets configuration, which can name programs to run",
                     "--exec-path": "runs git commands from another directory"}  # fmt: skip
GIT_GLOBAL_FLAGS = frozenset({"-p", "--paginate", "-P", "--no-pager", "--no-replace-objects", "--literal-pathspecs",
                              "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks",
                              "--version"})  # fmt: skip
GIT_GLOBAL_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env",
                               "--attr-source"})  # fmt: skip
# long options that carry a command (any subcommand): refused with or without an allowlist
GIT_INLINE_LONG = ("upload-pack", "receive-pack", "exec", "extcmd", "tool", "open-files-in-pager", "ext-diff",
                   "sendmail-cmd", "to-cmd", "cc-cmd", "header-cmd", "tree-filter", "index-filter", "msg-filter",
                   "env-filter", "parent-filter", "commit-filter", "tag-name-filter")  # fmt: skip
# git's parse-options takes an exact name over an abbreviation: the real options that are also prefixes of a
# refused name (`--cc`, `--index`...) are in the table as flags, so they are not read as abbreviations
GIT_LONG = ("upload-pack: receive-pack: exec: extcmd: tool: open-files-in-pager:: ext-diff sendmail-cmd: to-cmd: "
            "cc-cmd: header-cmd: tree-filter: index-filter: msg-filter: env-filter: parent-filter: commit-filter: "
            "tag-name-filter: cc to index commit tag config: output: template: separate-git-dir: "
            "recurse-submodules::")  # fmt: skip
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


GIT_CONFIG = Spec("f:lz", "get get-all get-regexp get-urlmatch get-color get-colorbool list=l global system local "
                 "worktree show-origin show-scope name-only null=z includes no-includes bool int bool-or-int path "
                 "expiry-date file:=f blob: type: default:")  # fmt: skip
GIT_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
                              "--get-colorbool", "-l"})  # fmt: skip


def _git_config_read_only(args: list[str]) -> None:
    parsed = parse("git config", GIT_CONFIG, list(args))
    for option in parsed.options:
        if not option.known:
            raise refuse(f"git config {option.word} is refused {STRICT}: configuration can name programs to run; "
                         "reading with --get, --get-all, --get-regexp or --list is allowed")  # fmt: skip
    if not any(option.name in GIT_CONFIG_READS for option in parsed.options):
        raise refuse(f"git config without --get/--get-all/--get-regexp/--list is refused {STRICT} (writing "
                     "configuration can name programs to run)")  # fmt: skip


GIT_REMOTE = Spec("vn", "verbose=v push all")


def _git_remote_read_only(args: list[str]) -> None:
    parsed = parse("git remote", GIT_REMOTE, list(args))
    for option in parsed.options:
        if not option.known:
            raise refuse(f"git remote {option.word} is refused {STRICT}")
    operands = parsed.operands
    if operands and operands[0] not in ("show", "get-url"):
        raise refuse(f"git remote {operands[0]} is refused {STRICT}: it writes configuration (reading with "
                     "`git remote -v`, `show` or `get-url` is allowed)")  # fmt: skip


def _git_bisect(args: list[str]) -> None:
    allowed = {"start", "good", "bad", "new", "old", "skip", "reset", "log", "terms", "help"}
    if args and args[0] not in allowed:
        raise refuse(f"git bisect {args[0]} is refused {STRICT} (allowed: {', '.join(sorted(allowed))})")


GIT_NEW_REPOSITORY = {
    "clone": Spec("o:b:j:u:c:", "origin:=o branch:=b reference: reference-if-able: depth: shallow-since: "
                  "shallow-exclude: server-option: jobs:=j filter: bundle-uri: upload-pack:=u config:=c template: "
                  "separate-git-dir:"),  # fmt: skip
    "init": Spec("b:", "initial-branch:=b object-format: template: separate-git-dir:"),
}


def _git_new_repository(subcommand: str) -> Callable[[list[str]], None]:
    """init and clone: the directory they create must be below the working directory."""

    def check_operands(args: list[str]) -> None:
        operands = parse(f"git {subcommand}", GIT_NEW_REPOSITORY[subcommand], list(args)).operands
        for path in operands[1:] if subcommand == "clone" else operands:
            below(f"git {subcommand}", "directory", path or "")

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
    i = subcommand_index(args)
    for index, word in enumerate(args[:i]):
        option = (word or "").split("=", 1)[0]
        if option in GIT_INLINE_GLOBAL:
            raise refuse(f"git {option} {GIT_INLINE_GLOBAL[option]} and is refused by the shell policy")
        if strict and word == "-C":
            below("git", "-C directory", (args[index + 1] if index + 1 < len(args) else "") or "")
        elif strict and option.startswith("-") and word not in GIT_GLOBAL_FLAGS and args[index - 1 : index] != ["-C"]:
            raise refuse(f"git {option} is refused {STRICT} (it points git at other repositories, configuration "
                         "or programs)")  # fmt: skip
    if i >= len(args) or args[i] is None:
        return []
    subcommand = args[i] or ""
    rest = [w for w in args[i + 1 :] if w is not None]
    if subcommand == "filter-branch":
        raise refuse("git filter-branch runs its filters as shell commands and is refused by the shell policy")
    inline = GIT_INLINE_SUBCOMMANDS.get(subcommand)
    if inline and rest[:1] == [inline]:
        raise refuse(f"git {subcommand} {inline} runs a command and is refused by the shell policy")
    parsed = parse(f"git {subcommand}", _subcommand_spec(subcommand), list(rest))
    for option in parsed.options:
        _git_inline(subcommand, option)
    if strict:
        _git_strict(subcommand, parsed, rest)
    return []


def subcommand_index(args: list[Word]) -> int:
    """Where git's subcommand is among its arguments: git reads its global options itself, by exact name,
    each valued one taking the next word unless written `--name=value`."""
    i = 0
    while i < len(args) and args[i] is not None and (args[i] or "").startswith("-"):
        i += 2 if args[i] in GIT_GLOBAL_VALUED else 1
    return i


def _subcommand_spec(subcommand: str) -> Spec:
    """A subcommand's options as the policy knows them: parse-options reads clusters, attached values and
    abbreviations like getopt_long; a merge strategy's `--strategy` is `-s`."""
    valued = GIT_VALUED_SHORT.get(subcommand, "")
    strategy = " strategy:=s" if subcommand in ("merge", "pull", "rebase") else " strategy:"
    return Spec("".join(f"{letter}:" for letter in valued), GIT_LONG + strategy)


def _git_inline(subcommand: str, option: Option) -> None:
    name = option.name
    refused = name[2:] in GIT_INLINE_LONG or (subcommand == "clone" and name == "--config")
    if refused or (len(name) == 2 and name[1] in GIT_INLINE_SHORT.get(subcommand, "")):
        raise refuse(f"git {subcommand} {name} can run arbitrary commands and is refused by the shell policy "
                     f"(`{option.word}`)")  # fmt: skip


def _git_strict(subcommand: str, parsed: Parsed, rest: list[str]) -> None:
    if isinstance(subcommand, Pattern) or subcommand not in GIT_SUBCOMMANDS:
        raise refuse(f"git {subcommand} is refused {STRICT}: only built-in subcommands the shell policy knows may "
                     "run (not aliases or other commands)")  # fmt: skip
    rule = GIT_SUBCOMMANDS[subcommand]
    for option in parsed.options:
        if option.name[2:] in ("output", *rule.long):
            raise refuse(f"git {subcommand} {option.name} is refused {STRICT} (`{option.word}`)")
        strategy = option.name == "--strategy" or (option.name == "-s" and "s" in GIT_VALUED_SHORT.get(subcommand, ""))
        if strategy and subcommand in GIT_STRATEGY_USERS and option.value not in GIT_STRATEGIES:
            raise refuse(f"git {subcommand} strategy `{option.value}` is refused {STRICT} (a strategy runs the "
                         f"program git-merge-<name>; built-in: {', '.join(sorted(GIT_STRATEGIES))})")  # fmt: skip
    if rule.check is not None:
        rule.check(rest)
