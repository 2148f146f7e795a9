"""Allow/deny lists for run_shell_command, checked on a real parse of the command.

The parser is tree-sitter-bash (MIT, maintained by the tree-sitter project, and the one Gemini CLI uses
for the same job), through the `tree_sitter` bindings. The checker walks the whole syntax tree and finds
every command that would run: the parts of `;`, `&&`, `||`, `&`, pipes and newlines, subshells and
groups, bodies of `if`/`while`/`for`/`case` and functions, the script of `bash -c '...'` (parsed again)
and the command behind launchers such as `env`, `xargs`, `nice`, `timeout`, `sudo`, `nohup`.

Prefix rule (as Gemini CLI's `run_shell_command(git)` entries): a command matches a prefix when its first
words equal the prefix's words. On the allowlist a command name containing `/` matches only a prefix
spelling that exact path (`./ls` is not `ls`); on the denylist the base name is used (`/usr/bin/sudo`
is `sudo`).

It fails closed. With an allowlist active, anything whose effect the parse cannot fully account for is
refused, and the message names the part: command and process substitution, arithmetic (its variable
references can run command substitutions), `[[ ]]`, `eval`, parameter expansions other than `$NAME` and
`${NAME}`, variable assignments (PATH, LD_PRELOAD...), redirections other than to /dev/null or between
descriptors, command names that are not literal words, launcher forms it does not know, and options of
allowed programs that run other commands (`git -c`, `find -exec`, `tar --to-command`...). With only a
denylist, substitutions and `eval` strings are looked into rather than refused, but anything that hides
which command runs is still refused. Parse errors are always refused.
"""

from __future__ import annotations

import functools
import os
import shlex
from dataclasses import dataclass
from typing import Any

MAX_SUBCOMMANDS = 100
MAX_DEPTH = 8  # nested `bash -c` / `eval` / launcher levels
SUSPICIOUS_CHARS = {"\r": "carriage return", "\0": "NUL", "\u00a0": "no-break space", "\u2028": "line separator",
                    "\u2029": "paragraph separator", "\ufeff": "zero-width no-break space", "\u200b": "zero-width space",
                    "\u3000": "ideographic space", "\x0b": "vertical tab", "\x0c": "form feed"}  # fmt: skip

SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh"}
SHELL_FLAG_LETTERS = set("euxvcfC")  # `bash -euxc '...'`; -l/-i/-O/--rcfile read start-up files or options
# Launchers: name -> (options that take a value, number of positional words before the command).
LAUNCHERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
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
    "xargs": (frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P",
                         "--max-procs", "-s", "--max-chars"}), 0),  # fmt: skip
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata"}), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "busybox": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "caffeinate": (frozenset(), 0),
    "proxychains": (frozenset({"-f"}), 0),
    "torsocks": (frozenset(), 0),
}
# Programs that run other programs in ways this checker cannot follow: refused unless allowed as such,
# and even then their command-running options are refused below.
OPAQUE_LAUNCHERS = {"watch", "flock", "strace", "ltrace", "script", "su", "runuser", "chroot", "nsenter", "unshare",
                    "firejail", "parallel", "systemd-run", "at", "batch", "gdb"}  # fmt: skip
# Options of common programs that make them run arbitrary commands.
EXEC_OPTIONS: dict[str, tuple[str, ...]] = {
    "git": ("-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "--ext-diff", "--extcmd",
            "--exec", "--tool"),  # fmt: skip
    "tar": ("--checkpoint-action", "--to-command", "--use-compress-program", "-I", "--info-script",
            "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),  # fmt: skip
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "zip": ("-T", "--unzip-command", "-TT"),
    "less": ("-o", "--log-file"),
}
ARITHMETIC_TESTS = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"}
ALWAYS_REFUSED_WITH_ALLOWLIST = {"eval": "eval runs a string as a new command"}
STRUCTURE = {"program", "list", "pipeline", "subshell", "compound_statement", "redirected_statement",
             "negated_command", "if_statement", "elif_clause", "else_clause", "while_statement", "do_group",
             "for_statement", "case_statement", "case_item", "function_definition", "comment"}  # fmt: skip
WORDS = {"word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation", "number",
         "simple_expansion", "expansion", "string_content", "variable_name", "special_variable_name",
         "brace_expression"}  # fmt: skip


class Refused(Exception):
    """The command may not run; `message` names the part and why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def _words(prefix: str) -> tuple[str, ...]:
    try:
        words = tuple(shlex.split(prefix))
    except ValueError:
        words = tuple(prefix.split())
    if not words:
        raise ValueError(f"empty command prefix: {prefix!r}")
    return words


@dataclass
class ShellPolicy:
    allow: tuple[tuple[str, ...], ...] = ()
    deny: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def from_prefixes(cls, allow: list[str] | None, deny: list[str] | None) -> ShellPolicy:
        return cls(tuple(_words(p) for p in allow or ()), tuple(_words(p) for p in deny or ()))

    @property
    def active(self) -> bool:
        return bool(self.allow or self.deny)

    def describe(self) -> str:
        parts = []
        if self.allow:
            parts.append("allowed: " + ", ".join(" ".join(w) for w in self.allow))
        if self.deny:
            parts.append("denied: " + ", ".join(" ".join(w) for w in self.deny))
        return "; ".join(parts)

    def check(self, command: str) -> list[list[str]]:
        """Raise `Refused` unless every command in `command` passes; return the commands found (argv with
        None for words that are not literal), for reports and tests."""
        if not self.active:
            return []
        checker = _Checker(self)
        checker.script(command, 0)
        return checker.found


def _refuse(part: str, why: str) -> Refused:
    shown = part if len(part) <= 120 else part[:117] + "..."
    return Refused(f"`{shown}`: {why}")


class _Checker:
    def __init__(self, policy: ShellPolicy) -> None:
        self.policy = policy
        self.strict = bool(policy.allow)
        self.found: list[list[str]] = []

    # -- scripts and structure ---------------------------------------------------------------------

    def script(self, source: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _refuse(source, f"nested more than {MAX_DEPTH} levels deep")
        for ch, name in SUSPICIOUS_CHARS.items():
            if ch in source:
                raise _refuse(source, f"contains a {name} character, which bash and the checker could read "
                              "differently; remove it")  # fmt: skip
        tree = _parser().parse(source.encode("utf-8", "surrogateescape"))
        if tree.root_node.has_error:
            bad = _first_error(tree.root_node)
            raise _refuse(_text(bad) or source, "the command could not be parsed completely, so it cannot be "
                          "checked; simplify it")  # fmt: skip
        self.node(tree.root_node, depth)

    def node(self, node: Any, depth: int) -> None:
        kind = node.type
        if self.strict and kind in ("function_definition", "for_statement"):
            what = "function definitions" if kind == "function_definition" else "for loops (they assign a variable)"
            raise _refuse(_text(node), f"{what} are refused while an allowlist is active")
        if kind in STRUCTURE:
            if kind == "compound_statement" and node.child_count and node.children[0].type == "((":
                self.arithmetic(node)
            for child in node.named_children:
                self.node(child, depth)
        elif kind == "command":
            self.command(node, depth)
        elif kind == "declaration_command" or kind == "unset_command":
            self.declaration(node, depth)
        elif kind == "variable_assignment" or kind == "variable_assignments":
            self.assignment(node, depth)
        elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect(node, depth)
        elif kind == "test_command":
            if not self.strict and any(
                c.type == "test_operator" and _text(c) in ARITHMETIC_TESTS for c in _descendants(node)
            ) and any(c.type in ("simple_expansion", "expansion", "variable_name") for c in _descendants(node)):
                raise _refuse(_text(node), "[[ ]] arithmetic comparisons of variables are refused while a denylist "
                              "is active (a variable's value can run a command substitution); use [ ]")  # fmt: skip
            if self.strict:
                raise _refuse(_text(node), "[[ ]] is refused while an allowlist is active (it evaluates "
                              "arithmetic, which can run commands); use test or [ ]")  # fmt: skip
            self.value(node, depth)
        elif kind in ("arithmetic_expansion", "c_style_for_statement"):
            self.arithmetic(node)
            self.value(node, depth)
        elif kind in WORDS:
            self.value(node, depth)
        else:
            if self.strict:
                raise _refuse(_text(node), f"this shell construct ({kind.replace('_', ' ')}) is not supported "
                              "while an allowlist is active")  # fmt: skip
            for child in node.named_children:
                self.node(child, depth)

    def arithmetic(self, node: Any) -> None:
        if self.strict:
            raise _refuse(_text(node), "arithmetic is refused while an allowlist is active (variable "
                          "references in it can run command substitutions)")  # fmt: skip
        for child in _descendants(node):
            if child.type in ("variable_name", "simple_expansion", "expansion", "subscript", "string", "raw_string"):
                raise _refuse(_text(node), "arithmetic with variables is refused while a denylist is active "
                              "(a variable's value can run a command substitution)")  # fmt: skip

    # -- values --------------------------------------------------------------------------------------

    def value(self, node: Any, depth: int) -> None:
        """Check a word used as data: it may not hide a command the policy cannot see."""
        for child in [node, *_descendants(node)]:
            kind = child.type
            if kind in ("command_substitution", "process_substitution"):
                if self.strict:
                    what = "command substitution" if kind == "command_substitution" else "process substitution"
                    raise _refuse(_text(child), f"{what} is refused while an allowlist is active")
                for inner in child.named_children:
                    self.node(inner, depth)
                return
            if kind == "arithmetic_expansion":
                self.arithmetic(child)
            elif kind == "expansion" and self.strict and not _plain_expansion(child):
                raise _refuse(_text(child), "only $NAME and ${NAME} expansions are allowed while an allowlist is "
                              "active (operators, subscripts and transformations can run code)")  # fmt: skip
            elif kind == "expansion" and not self.strict and any(c.type == "@" for c in child.children):
                raise _refuse(_text(child), "${NAME@...} transformations are refused by the shell policy (@P runs "
                              "command substitutions found in the value)")  # fmt: skip
            elif kind == "subscript" and self.strict:
                raise _refuse(_text(child), "array subscripts are refused while an allowlist is active")
            elif self.strict and child.is_named and kind not in WORDS and kind not in _VALUE_INNER:
                raise _refuse(_text(child), f"this shell construct ({kind.replace('_', ' ')}) is not supported "
                              "while an allowlist is active")  # fmt: skip

    def assignment(self, node: Any, depth: int) -> None:
        if self.strict:
            raise _refuse(_text(node), "variable assignments are refused while an allowlist is active (they can "
                          "change what allowed commands do, e.g. PATH or LD_PRELOAD)")  # fmt: skip
        for child in node.named_children:
            if child.type not in ("variable_name", "subscript"):
                self.value(child, depth)

    def redirect(self, node: Any, depth: int) -> None:
        if node.type == "heredoc_redirect":
            for child in node.named_children:
                if child.type == "heredoc_body":
                    self.value(child, depth)
                elif child.type not in ("heredoc_start", "heredoc_end", "heredoc_content"):
                    self.node(child, depth)
            return
        targets = [c for c in node.named_children if c.type != "file_descriptor"]
        for target in targets:
            self.value(target, depth)
        if not self.strict or node.type == "herestring_redirect":
            return
        operator = next((c.type for c in node.children if not c.is_named), "")
        literal = _literal(targets[0]) if targets else None
        if operator in (">&", "<&") and literal is not None and (literal.isdigit() or literal == "-"):
            return
        if literal == "/dev/null":
            return
        raise _refuse(_text(node), "redirections to or from files are refused while an allowlist is active "
                      "(only /dev/null and descriptor copies such as 2>&1 are allowed)")  # fmt: skip

    def declaration(self, node: Any, depth: int) -> None:
        keyword = node.children[0].type if node.child_count else "declare"
        argv: list[str | None] = [keyword]
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assignment(child, depth)
                argv.append(None)
            else:
                self.value(child, depth)
                argv.append(_literal(child))
        self.check_argv(argv, _text(node), depth, launched=False)

    # -- commands ------------------------------------------------------------------------------------

    def command(self, node: Any, depth: int) -> None:
        argv: list[str | None] = []
        name_node = None
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assignment(child, depth)
            elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(child, depth)
            elif child.type == "command_name":
                name_node = child.named_children[0] if child.named_child_count else child
                self.value(name_node, depth)
                argv.append(_literal(name_node, command_name=True))
            else:
                self.value(child, depth)
                argv.append(_literal(child))
        if name_node is None:
            return
        self.check_argv(argv, _text(node), depth, launched=False)

    def check_argv(self, argv: list[str | None], text: str, depth: int, *, launched: bool) -> None:
        self.found.append(argv)
        if len(self.found) > MAX_SUBCOMMANDS:
            raise _refuse(text, f"more than {MAX_SUBCOMMANDS} commands in one call; split it up")
        name = argv[0]
        if name is None:
            raise _refuse(text, "the command name is not a literal word (it comes from an expansion, quoting "
                          "tricks or a glob), so the policy cannot tell what would run")  # fmt: skip
        base = os.path.basename(name)
        if self.strict and base in ALWAYS_REFUSED_WITH_ALLOWLIST:
            raise _refuse(text, ALWAYS_REFUSED_WITH_ALLOWLIST[base] + " and is refused while an allowlist is active")
        self.check_deny(argv, text)
        if base in SHELLS and "-c" in _short_flags(argv):
            self.shell_wrapper(argv, text, depth)
            return
        if base == "eval":
            words = argv[1:]
            if any(w is None for w in words):
                raise _refuse(text, "eval of a string that is not literal cannot be checked")
            self.script(" ".join(w for w in words if w is not None), depth + 1)
            return
        if self.strict and not self.allowed(argv):
            raise _refuse(text, f"`{_shown(argv)}` is not on the allowlist ({self.policy.describe()})")
        self.check_exec_options(base, argv, text)
        if base == "find":
            for inner in _find_exec(argv, text):
                self.check_argv(inner, text, depth + 1, launched=True)
        elif base in LAUNCHERS:
            inner = _launched(base, argv, text)
            if inner:
                self.check_argv(inner, text, depth + 1, launched=True)
        elif base in OPAQUE_LAUNCHERS and len(argv) > 1:
            raise _refuse(text, f"{base} runs other commands in a way the policy cannot check")

    def shell_wrapper(self, argv: list[str | None], text: str, depth: int) -> None:
        flags_done = False
        script = None
        for index, word in enumerate(argv[1:], start=1):
            if word is None:
                raise _refuse(text, "a shell's arguments must be literal to be checked")
            if not flags_done and word.startswith("-") and len(word) > 1:
                if word.startswith("--") or not set(word[1:]) <= SHELL_FLAG_LETTERS:
                    raise _refuse(text, f"shell option {word} is not allowed in a checked `{argv[0]} -c`")
                if "c" in word:
                    flags_done = True
                    script = argv[index + 1] if index + 1 < len(argv) else None
                continue
            break
        if script is None:
            raise _refuse(text, f"`{argv[0]} -c` needs its script as a literal argument")
        self.script(script, depth + 1)

    def allowed(self, argv: list[str | None]) -> bool:
        return any(_matches(argv, prefix, use_basename=False) for prefix in self.policy.allow)

    def check_deny(self, argv: list[str | None], text: str) -> None:
        for prefix in self.policy.deny:
            words = argv[: len(prefix)]
            if len(words) < len(prefix):
                continue
            if None in words[1:] and os.path.basename(words[0] or "") == os.path.basename(prefix[0]):
                raise _refuse(text, f"cannot tell whether this is the denied command `{' '.join(prefix)}` "
                              "(an argument it depends on is not literal)")  # fmt: skip
            if _matches(argv, prefix, use_basename=True):
                raise _refuse(text, f"`{' '.join(prefix)}` is on the denylist")

    def check_exec_options(self, base: str, argv: list[str | None], text: str) -> None:
        if base == "git" and "rebase" in argv and any(w == "-x" or (w or "").startswith("-x") for w in argv):
            raise _refuse(text, "git rebase -x can run arbitrary commands and is refused by the shell policy")
        options = EXEC_OPTIONS.get(base)
        if not options:
            return
        for word in argv[1:]:
            if word is None:
                continue
            for option in options:
                if word == option or (option.startswith("--") and word.startswith(option + "=")):
                    raise _refuse(text, f"{base} {option} can run arbitrary commands and is refused by the "
                                  "shell policy")  # fmt: skip
                if len(option) == 2 and word.startswith(option) and not word.startswith("--") and base != "git":
                    raise _refuse(text, f"{base} {option} can run arbitrary commands and is refused by the "
                                  "shell policy")  # fmt: skip


_VALUE_INNER = {"subscript", "command_substitution", "process_substitution", "arithmetic_expansion",
                "heredoc_body", "heredoc_content", "test_operator", "binary_expression", "unary_expression",
                "parenthesized_expression", "regex", "extglob_pattern"}  # fmt: skip


def _launched(base: str, argv: list[str | None], text: str) -> list[str | None]:
    """The command a launcher would run (may be empty: `env` alone prints the environment)."""
    valued, positional = LAUNCHERS[base]
    rest = argv[1:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word is None:
            raise _refuse(text, f"an argument of {base} is not literal, so the command it runs cannot be checked")
        if word == "--":
            i += 1
            break
        if base == "env" and "=" in word and not word.startswith("-"):
            raise _refuse(text, "env VAR=value assignments are refused by the shell policy (they can change what "
                          "the launched command does)")  # fmt: skip
        if word.startswith("-") and len(word) > 1:
            if base == "env" and word in ("-S", "--split-string") or word.startswith("--split-string="):
                raise _refuse(text, "env -S splits a string into a command and cannot be checked")
            if word in valued:
                i += 2
                continue
            if word.split("=", 1)[0] in valued or (len(word) > 2 and word[:2] in valued and not word.startswith("--")):
                i += 1
                continue
            if base in ("timeout", "nice") and word[1:].lstrip("-").replace(".", "").isdigit():
                i += 1  # `nice -5 cmd`, `timeout -9 ...` style numbers
                continue
            i += 1  # a flag without a value
            continue
        break
    rest = rest[i:]
    if len(rest) < positional:
        return []
    rest = rest[positional:]
    if base == "busybox" and rest:
        return rest
    if base == "xargs" and not rest:
        return ["echo"]
    return rest


def _matches(argv: list[str | None], prefix: tuple[str, ...], *, use_basename: bool) -> bool:
    if len(argv) < len(prefix):
        return False
    first = argv[0]
    if first is None:
        return False
    if use_basename:
        if os.path.basename(first) != os.path.basename(prefix[0]):
            return False
    elif first != prefix[0]:
        return False
    return all(a == p for a, p in zip(argv[1 : len(prefix)], prefix[1:]))


def _short_flags(argv: list[str | None]) -> set[str]:
    letters: set[str] = set()
    for word in argv[1:]:
        if word is None or not word.startswith("-") or word.startswith("--") or len(word) < 2:
            break
        letters |= {f"-{ch}" for ch in word[1:]}
    return letters


def _shown(argv: list[str | None]) -> str:
    return " ".join(w if w is not None else "<expansion>" for w in argv[:3]) + (" ..." if len(argv) > 3 else "")


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _descendants(node: Any):
    stack = list(reversed(node.named_children))
    while stack:
        child = stack.pop()
        yield child
        stack.extend(reversed(child.named_children))


def _first_error(node: Any) -> Any:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.is_error or current.is_missing:
            return current
        stack.extend(reversed(current.children))
    return node


def _find_exec(argv: list[str | None], text: str) -> list[list[str | None]]:
    """The commands `find ... -exec CMD ... ;` would run."""
    found = []
    i = 1
    while i < len(argv):
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+"):
                j += 1
            if j == len(argv):
                raise _refuse(text, f"find {argv[i]} without a closing ';' or '+' cannot be checked")
            found.append(argv[i + 1 : j] or [None])
            i = j
        i += 1
    return found


def _plain_expansion(node: Any) -> bool:
    """`${NAME}` and nothing else."""
    inner = [c for c in node.children if c.type not in ("${", "}")]
    return len(inner) == 1 and inner[0].type in ("variable_name", "special_variable_name")


_GLOB = set("*?[")
_WORD_SPECIAL = set("{}~")


def _unescape(raw: str, escapable: str | None = None) -> str:
    """Remove backslash escapes (all of them, or only before `escapable` characters as inside "...");
    a backslash-newline is a line continuation and disappears."""
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw) and (escapable is None or raw[i + 1] in escapable):
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return "".join(out)


def _literal(node: Any, *, command_name: bool = False) -> str | None:
    """The word's value if it is fully static, else None. A command name must also be free of glob,
    brace and tilde expansion and of ANSI-C quoting (what runs must be exactly what is written)."""
    kind = node.type
    text = _text(node)
    if kind == "word":
        unquoted_specials = {c for i, c in enumerate(text) if c in (_GLOB | _WORD_SPECIAL) and (i == 0 or text[i - 1] != "\\")}
        if unquoted_specials & _GLOB and command_name:
            return None
        if command_name and (unquoted_specials & _WORD_SPECIAL):
            return None
        if command_name and "\\" in text:
            return None  # `\rm`, `r\m`: spelled to slip past matching
        return _unescape(text)
    if kind == "number":
        return text
    if kind == "raw_string":
        return None if command_name else text[1:-1]
    if kind == "string":
        if any(c.type not in ("string_content", '"') for c in node.children):
            return None
        if command_name:
            return None  # `"r"m` and friends
        return _unescape(text[1:-1], '$`"\\\n')
    if kind == "concatenation":
        if command_name:
            return None
        parts = [_literal(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
    return None

