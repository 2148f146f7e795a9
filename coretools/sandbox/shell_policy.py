"""Allow/deny lists for run_shell_command, checked on a real parse of the command.

The parser is tree-sitter-bash (MIT, maintained by the tree-sitter project, and the one Gemini CLI uses
for the same job), through the `tree_sitter` bindings. The checker walks the whole syntax tree and finds
every command that would run: the parts of `;`, `&&`, `||`, `&`, pipes and newlines, subshells and
groups, bodies of `if`/`while`/`for`/`case` and functions, the script of `bash -c '...'` (parsed again)
and the command behind launchers such as `env`, `xargs`, `nice`, `timeout`, `sudo`, `nohup`.

Every word of a simple command is an argument, wherever redirections stand: tree-sitter-bash hangs the
words that follow a redirection's destination (`git >/dev/null -c x status`) on the redirection node, and
the checker gives them back to the command they belong to (the last simple command before the
redirection; words after a redirection of a compound command are refused).

Prefix rule (as Gemini CLI's `run_shell_command(git)` entries): a command matches a prefix when its first
words equal the prefix's words. On the allowlist a command name containing `/` matches only a prefix
spelling that exact path (`./ls` is not `ls`); on the denylist the base name is used (`/usr/bin/sudo`
is `sudo`).

It fails closed. With an allowlist active, anything whose effect the parse cannot fully account for is
refused, and the message names the part: command and process substitution, arithmetic (its variable
references can run command substitutions), `[[ ]]`, `eval`, parameter expansions other than `$NAME` and
`${NAME}`, variable assignments (PATH, LD_PRELOAD...), redirections other than to /dev/null or between
descriptors, command names that are not literal words, `$_` (its value is the previous command's last
argument, so the model sets it), and arguments naming a protected path (`.git` and what is in it, secret
env files: literally, or with expansions around the literal part). Programs that can run programs are
checked against the argument table in `exec_policy` (git, sed, awk, find, env, xargs and the other
launchers, tar, ...), and an allowlisted command runs in the hardened environment of
`coretools/sandbox/hardened_env.py`. With only a denylist, substitutions, `eval` strings and `trap`
actions are looked into rather than refused, but anything that hides which command runs is still refused,
including the table's options that carry a command line. Parse errors are always refused.

Words are what bash makes of them, in both modes: each is judged after bash's brace, tilde and `$'…'`
expansion (`exec_policy/expansion.py`: `.{g..g}it`, `{-c,x}` and `$'\x2egit'` are what they expand to,
never their spelling), a shell's own options are read as bash reads them (`bash -c -e 'x'` runs `x`), and a
script in which the grammar and bash would split words differently (a byte the grammar drops, a
backslash-newline inside a word) is refused.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from coretools.sandbox import exec_policy
from coretools.sandbox.exec_policy.expansion import Budget, Expanded, command_name, expand_words
from coretools.sandbox.exec_policy.words import ArgumentRefused, Pattern, protected_refusal
from coretools.sandbox.paths import word_protected_reason
from coretools.sandbox.grammar_input import MAX_PIPELINE, ascii_view, longest_pipeline

MAX_SUBCOMMANDS = 100
MAX_DEPTH = 8  # nested `bash -c` / `eval` / launcher levels
SUSPICIOUS_CHARS = {"\r": "carriage return", "\0": "NUL", "\u00a0": "no-break space", "\u2028": "line separator",
                    "\u2029": "paragraph separator", "\ufeff": "zero-width no-break space", "\u200b": "zero-width space",
                    "\u3000": "ideographic space", "\x0b": "vertical tab", "\x0c": "form feed"}  # fmt: skip

SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh"}
SHELL_FLAG_LETTERS = set("euxvcfC")  # `bash -euxc '...'`; -l/-i/-O/--rcfile read start-up files or options
ARITHMETIC_TESTS = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"}
ALWAYS_REFUSED_WITH_ALLOWLIST = {"eval": "eval runs a string as a new command"}
STRUCTURE = {"program", "list", "pipeline", "subshell", "compound_statement", "redirected_statement",
             "negated_command", "if_statement", "elif_clause", "else_clause", "while_statement", "do_group",
             "for_statement", "case_statement", "case_item", "function_definition", "comment"}  # fmt: skip
WORDS = {"word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation", "number",
         "simple_expansion", "expansion", "string_content", "variable_name", "special_variable_name",
         "brace_expression"}  # fmt: skip
REDIRECTS = ("file_redirect", "heredoc_redirect", "herestring_redirect")
HEREDOC_PARTS = ("heredoc_start", "heredoc_body", "heredoc_end", "heredoc_content")
HEREDOC_LEAVES = ("heredoc_body", "heredoc_content", "comment")
NAME_TABLES = re.compile(r"BASH_(CMDS|ALIASES)")
MODEL_SET_VARIABLES = {"_": "$_ is the last argument of the previous command, which the model chose"}


# The bytes of the script whose tree is being walked; a nested script (`bash -c '...'`) is walked to the
# end before its parent's walk goes on, so the innermost script is always the one whose nodes are seen.
_SOURCE: ContextVar[bytes] = ContextVar("shell_policy_source")


class CommandRefused(Exception):
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

    @property
    def strict(self) -> bool:
        """Whether an allowlist is in force: then only what the policy can account for runs, and allowlisted
        commands run in the hardened environment (`hardened_env`)."""
        return bool(self.allow)

    def describe(self) -> str:
        parts = []
        if self.allow:
            parts.append("allowed: " + ", ".join(" ".join(w) for w in self.allow))
        if self.deny:
            parts.append("denied: " + ", ".join(" ".join(w) for w in self.deny))
        return "; ".join(parts)

    def check(self, command: str) -> list[list[str]]:
        """Raise `CommandRefused` unless every command in `command` passes; return the commands found (argv with
        None for words that are not literal), for reports and tests."""
        if not self.active:
            return []
        stages = longest_pipeline(command)
        if stages > MAX_PIPELINE:
            raise _refuse(command, f"a pipeline of {stages + 1:,} commands is more than the shell policy checks "
                          f"({MAX_PIPELINE + 1:,}); split it up")  # fmt: skip
        if NAME_TABLES.search(command):
            raise _refuse(command, "BASH_CMDS and BASH_ALIASES are refused by the shell policy (they change which "
                          "program a command name runs)")  # fmt: skip
        checker = _Checker(self)
        checker.script(command, 0)
        return checker.found


def _refuse(part: str, why: str) -> CommandRefused:
    shown = part if len(part) <= 120 else part[:117] + "..."
    return CommandRefused(f"`{shown}`: {why}")


class _Checker:
    def __init__(self, policy: ShellPolicy) -> None:
        self.policy = policy
        self.strict = policy.strict
        self.found: list[list[str]] = []
        self.trailing: dict[tuple[int, int], list[Any]] = {}  # command -> its words that follow a redirection
        self.budget = Budget()  # brace expansion's, for the whole command

    # -- scripts and structure ---------------------------------------------------------------------

    def script(self, source: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _refuse(source, f"nested more than {MAX_DEPTH} levels deep")
        for ch, name in SUSPICIOUS_CHARS.items():
            if ch in source:
                raise _refuse(source, f"contains a {name} character, which bash and the checker could read "
                              "differently; remove it")  # fmt: skip
        data = source.encode("utf-8", "surrogateescape")
        outer, outer_trailing = _SOURCE.set(data), self.trailing
        self.trailing = {}  # keyed by byte ranges, which only mean something within one script
        try:
            tree = _parser().parse(ascii_view(data))
            if tree.root_node.has_error:
                bad = _first_error(tree.root_node)
                raise _refuse(_text(bad) or source, "the command could not be parsed completely, so it cannot "
                              "be checked; simplify it")  # fmt: skip
            _check_gaps(tree.root_node, data)
            self.node(tree.root_node, depth)
        finally:
            _SOURCE.reset(outer)
            self.trailing = outer_trailing

    def node(self, node: Any, depth: int) -> None:
        kind = node.type
        if self.strict and kind in ("function_definition", "for_statement"):
            what = "function definitions" if kind == "function_definition" else "for loops (they assign a variable)"
            raise _refuse(_text(node), f"{what} are refused while an allowlist is active")
        if kind == "redirected_statement":
            self.attach_trailing_words(node)
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

    def attach_trailing_words(self, node: Any) -> None:
        """Words after a redirection's destination belong to the simple command before the redirection."""
        words = [w for r in node.named_children if r.type in REDIRECTS for w in _redirect_words(r)]
        if not words:
            return
        target = _last_command(node.child_by_field_name("body"))
        if target is None:
            raise _refuse(_text(node), "words after a redirection of a compound command cannot be checked")
        self.trailing.setdefault(_key(target), []).extend(words)

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
            elif kind == "special_variable_name" and self.strict and _text(child) in MODEL_SET_VARIABLES:
                raise _refuse(_text(node), f"{MODEL_SET_VARIABLES[_text(child)]}; it is refused while an allowlist "
                              "is active")  # fmt: skip
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
            _check_heredoc_end(node)
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
        expanded = self.expand(targets[:1]) if targets else []
        literal = expanded[0].value if len(expanded) == 1 and not isinstance(expanded[0].value, Pattern) else None
        if operator in (">&", "<&") and literal is not None and (_ascii_digits(literal) or literal == "-"):
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
                argv.extend(e.value for e in self.expand([child]))
        self.check_argv(argv, _text(node), depth, launched=False)

    def expand(self, nodes: list[Any]) -> list[Expanded]:
        try:
            return expand_words(nodes, _text, self.budget)
        except ArgumentRefused as exc:
            raise _refuse(" ".join(_text(n) for n in nodes), exc.why) from None

    # -- commands ------------------------------------------------------------------------------------

    def command(self, node: Any, depth: int) -> None:
        argv: list[str | None] = []
        name_node = None
        words = []
        for child in node.children:
            if not child.is_named and child.type != "$":  # a `$` before a string makes it `$"…"`
                raise _refuse(_text(node), f"`{_text(child)}` here is read differently by the grammar and by bash; "
                              "quote it")  # fmt: skip
            if child.type == "variable_assignment":
                self.assignment(child, depth)
            elif child.type in REDIRECTS:
                self.redirect(child, depth)
                words.extend(_redirect_words(child))
            elif child.type == "command_name":
                name_node = child.named_children[0] if child.named_child_count else child
                self.value(name_node, depth)
                argv.append(command_name(name_node, _text))
            else:
                words.append(child)
        words.extend(self.trailing.get(_key(node), ()))
        words.sort(key=lambda w: w.start_byte)
        for word in words:
            self.value(word, depth)
        for group in _spelled_words(words):
            for expanded in self.expand(group):
                argv.append(expanded.value)
                reason = word_protected_reason(expanded.shape) if expanded.value is None and self.strict else None
                if reason is not None:
                    shown = " ".join(_text(w) for w in group)
                    raise _refuse(shown, protected_refusal(shown, reason))
        if name_node is None:
            if words:
                raise _refuse(_text(node), "a command whose name follows a redirection's words cannot be checked")
            return
        trailing = self.trailing.get(_key(node), ())
        text = " ".join([_text(node), *(_text(w) for w in trailing)])
        self.check_argv(argv, text, depth, launched=False)

    def check_argv(self, argv: list[str | None], text: str, depth: int, *, launched: bool) -> None:
        self.found.append(argv)
        if len(self.found) > MAX_SUBCOMMANDS:
            raise _refuse(text, f"more than {MAX_SUBCOMMANDS} commands in one call; split it up")
        name = argv[0]
        if name is None or isinstance(name, Pattern):
            raise _refuse(text, "the command name is not a literal word (it comes from an expansion, quoting "
                          "tricks or a glob), so the policy cannot tell what would run")  # fmt: skip
        base = os.path.basename(name)
        if self.strict and base in ALWAYS_REFUSED_WITH_ALLOWLIST:
            raise _refuse(text, ALWAYS_REFUSED_WITH_ALLOWLIST[base] + " and is refused while an allowlist is active")
        self.check_deny(argv, text)
        if base in SHELLS and "c" in _shell_options(argv)[0]:
            self.shell_wrapper(argv, text, depth)
            return
        if base == "trap":
            self.trap(argv, text, depth)
        if base == "eval":
            words = argv[1:]
            if any(w is None for w in words):
                raise _refuse(text, "eval of a string that is not literal cannot be checked")
            self.script(" ".join(w for w in words if w is not None), depth + 1)
            return
        if self.strict and not self.allowed(argv):
            raise _refuse(text, f"`{_shown(argv)}` is not on the allowlist ({self.policy.describe()})")
        try:
            if self.strict:
                exec_policy.check_paths(base, argv)
            launches = exec_policy.check(base, argv, self.strict)
        except ArgumentRefused as exc:
            raise _refuse(text, exc.why) from None
        for launch in launches:
            inner = launch.argv
            inner_base = os.path.basename(inner[0] or "") if inner else ""
            if self.strict and launch.clean_env and exec_policy.runs_programs([inner_base]):
                raise _refuse(text, f"{base} would run {inner_base} without the hardened environment (it clears or "
                              "resets variables), which is refused while an allowlist is active")  # fmt: skip
            self.check_argv(inner, text, depth + 1, launched=True)

    def shell_wrapper(self, argv: list[str | None], text: str, depth: int) -> None:
        _, first = _shell_options(argv)
        for word in argv[1:first]:
            if word not in ("--", "-") and (word is None or word[1:2] == "-" or not set(word[1:]) <= SHELL_FLAG_LETTERS):
                raise _refuse(text, f"shell option {word} is not allowed in a checked `{argv[0]} -c`")
        script = argv[first] if first < len(argv) else None
        if script is None:
            raise _refuse(text, f"`{argv[0]} -c` needs its script as a literal argument")
        self.script(script, depth + 1)

    def trap(self, argv: list[str | None], text: str, depth: int) -> None:
        """`trap ACTION SIGNAL...`: the action is a script bash runs later, checked like `eval`'s."""
        args = argv[1:]
        while args and args[0] in ("-l", "-p", "-lp", "-pl"):
            args = args[1:]
        if args[:1] == ["--"]:
            args = args[1:]
        if len(args) < 2 or args[0] in ("", "-"):
            return
        if args[0] is None:
            raise _refuse(text, "a trap action that is not literal cannot be checked")
        self.script(args[0], depth + 1)

    def allowed(self, argv: list[str | None]) -> bool:
        return any(_matches(argv, prefix, use_basename=False) for prefix in self.policy.allow)

    def check_deny(self, argv: list[str | None], text: str) -> None:
        base = os.path.basename(argv[0] or "")
        for candidate in (argv, exec_policy.without_global_options(base, argv)):
            for prefix in self.policy.deny:
                words = candidate[: len(prefix)]
                if len(words) < len(prefix):
                    continue
                if None in words[1:] and base == os.path.basename(prefix[0]):
                    raise _refuse(text, f"cannot tell whether this is the denied command `{' '.join(prefix)}` "
                                  "(an argument it depends on is not literal)")  # fmt: skip
                if _matches(candidate, prefix, use_basename=True):
                    raise _refuse(text, f"`{' '.join(prefix)}` is on the denylist")


_VALUE_INNER = {"subscript", "command_substitution", "process_substitution", "arithmetic_expansion",
                "heredoc_body", "heredoc_content", "test_operator", "binary_expression", "unary_expression",
                "parenthesized_expression", "regex", "extglob_pattern"}  # fmt: skip


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


def _shell_options(argv: list[str | None]) -> tuple[str, int]:
    """A shell's option letters as bash reads them (every word that starts with `-` or `+`, up to the first
    other word, `--` or `-`: `bash -c -e 'x'` and `bash +x -c 'x'` both run `x`) and the index of the first
    operand, the script when `c` is among them. Long options (`--norc`) are skipped, not read as letters;
    `-o NAME` and `-O NAME` take the next word (`bash -o posix -c 'x'` runs `x`)."""
    letters = ""
    index = 1
    while index < len(argv):
        word = argv[index]
        if word in ("--", "-"):
            return letters, index + 1
        if word is None or len(word) < 2 or word[0] not in "-+":
            return letters, index
        letters += "" if word[1] == "-" else word[1:]
        index += 2 if word[1] != "-" and set(word) & set("oO") else 1  # -o/-O take the next word
    return letters, len(argv)


def _shown(argv: list[str | None]) -> str:
    return " ".join(w if w is not None else "<expansion>" for w in argv[:3]) + (" ..." if len(argv) > 3 else "")


def _text(node: Any) -> str:
    """A node's text, from the script being checked (the grammar saw only its ASCII view)."""
    if node is None:
        return ""
    return _SOURCE.get()[node.start_byte : node.end_byte].decode("utf-8", "replace")


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


def agreeing_locale(env: dict[str, str]) -> dict[str, str]:
    """`env` for a checked command: with a character set in which bash splits the command as the checker
    did. In a legacy multibyte locale (GBK, GB18030, Big5...) bash pairs the bytes of UTF-8 text differently:
    `中` is E4 B8 AD, and AD 5C is a GBK character, so in `中\\;` bash takes the backslash as half of a
    character and `;` ends the command. UTF-8 and C keep the checker's reading; anything else runs in
    C.UTF-8 (where the system has no C.UTF-8, bash falls back to C, which is also safe)."""
    name = env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or ""
    codeset = name.partition(".")[2].partition("@")[0].lower().replace("-", "").replace("_", "")
    if name in ("", "C", "POSIX") or codeset == "utf8":
        return env
    return {**env, "LC_ALL": "C.UTF-8"}


def _ascii_digits(text: str) -> bool:
    """A descriptor number as bash reads one: `str.isdigit` also takes `²` or `١`, which bash reads as a
    file name (`>&²` writes a file)."""
    return text.isascii() and text.isdigit()


def _check_heredoc_end(node: Any) -> None:
    """Refuse a here-document unless the line the grammar ended it at is, byte for byte, its delimiter.

    The grammar sees the ASCII view, where `é` and `ü` are both `xx`: it would end `<<é` at a line `ü` and
    read what follows as commands, while bash, comparing the real bytes, reads on to the end of the input as
    the document's body, expanding any `$(...)` in it."""
    start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
    end = next((c for c in node.named_children if c.type == "heredoc_end"), None)
    delimiter = _DELIMITER_QUOTES.sub(lambda m: m.group(1) or "", _text(start))
    if end is None or not delimiter or _text(end) != delimiter:
        raise _refuse(_text(node), "the here-document's end could not be matched to its delimiter exactly; end "
                      "it with a line that holds only the delimiter")  # fmt: skip


_DELIMITER_QUOTES = re.compile(r"""\\(.)|['"]""", re.DOTALL)


_CONTINUATION = re.compile(rb"\\\n")


def _check_gaps(root: Any, data: bytes) -> None:
    """Every byte of the script must belong to a token of the grammar, or be white space between tokens, as
    bash reads it: the grammar drops an escaped space inside a word (`{\\ .}` is one word for bash, two for
    the grammar) and splits a word at a backslash-newline that bash removes (`.g\\<newline>it` is `.git`)."""
    leaves = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.child_count and node.type not in HEREDOC_LEAVES:
            stack.extend(node.children)
        else:
            leaves.append((node.start_byte, node.end_byte))
    previous_end = 0
    for start, end in sorted(leaves):
        if start > previous_end:
            spaces = _CONTINUATION.sub(b"", data[previous_end:start])
            if spaces.strip(b" \t\n") or not spaces:
                shown = data[max(0, previous_end - 20) : start + 20].decode("utf-8", "replace")
                raise _refuse(shown, "a backslash here (an escaped space or a line continuation inside a word) is "
                              "read differently by the grammar and by bash; quote the word instead")  # fmt: skip
        previous_end = max(previous_end, end)


def _key(node: Any) -> tuple[int, int]:
    return node.start_byte, node.end_byte


def _redirect_words(node: Any) -> list[Any]:
    """The argv words a redirection node holds: everything after a file or here-string destination, the
    words of a here-document line, and those of redirections nested in it."""
    if node.type == "heredoc_redirect":
        words = []
        for child in node.named_children:
            if child.type in REDIRECTS:
                words.extend(_redirect_words(child))
            elif child.type not in HEREDOC_PARTS and child.type not in STRUCTURE and child.type != "command":
                words.append(child)
        return words
    return [c for c in node.named_children if c.type != "file_descriptor"][1:]


def _last_command(node: Any) -> Any:
    """The simple command that ends `node` (the one a trailing redirection's words belong to), or None."""
    while node is not None:
        if node.type == "command":
            return node
        if node.type == "redirected_statement":
            node = node.child_by_field_name("body")
        elif node.type in ("list", "pipeline", "negated_command"):
            children = [c for c in node.named_children if c.type != "comment"]
            node = children[-1] if children else None
        else:
            return None
    return None


def _plain_expansion(node: Any) -> bool:
    """`${NAME}` and nothing else."""
    inner = [c for c in node.children if c.type not in ("${", "}")]
    return len(inner) == 1 and inner[0].type in ("variable_name", "special_variable_name")


def _spelled_words(nodes: list[Any]) -> list[list[Any]]:
    """Argument nodes grouped into the words bash sees: the grammar can split one word where nothing
    separates the parts (`a'{'{b`), and bash reads them as one."""
    groups: list[list[Any]] = []
    for node in nodes:
        if groups and groups[-1][-1].end_byte == node.start_byte:
            groups[-1].append(node)
        else:
            groups.append([node])
    return groups
