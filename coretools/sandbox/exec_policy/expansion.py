"""A word of a command as bash will pass it to the program: the argument policy judges what bash makes of a
word, never how it is spelled.

A word (a tree-sitter-bash node) becomes a run of characters, each unquoted, quoted (by `'…'`, `"…"`,
`$'…'` with its escapes decoded, or a backslash) or unknown (a parameter, command or arithmetic expansion,
a translated `$"…"` string, a tilde prefix): what bash computes when the command runs. Then, as bash does:

1. brace expansion, on unquoted `{`, `,` and `}`: `{a,b}` lists and `{x..y[..step]}` sequences of
   integers or letters, nested, each word expanded in turn; `.{g..g}it` is `.git`. It is bounded: at most
   `MAX_WORDS` words and `MAX_CHARS` characters from one word, a sequence's length is computed before it
   is made, and the rest is refused, so a hostile `{1..99999999}` costs nothing;
2. tilde expansion (`~`, `~user`, `~+`, `~-` at the start, and after `=` or `:` in a word shaped like an
   assignment): an unknown directory;
3. what is left: a literal value (`str`), a `Pattern` when unquoted `*`, `?` or `[` let bash replace it by
   file names, or None when a part is unknown. `Expanded.shape` keeps the known text of an unknown word
   (`$PWD/.git` is `/.git`), so that a protected name in it is still seen."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coretools.sandbox.exec_policy.words import ArgumentRefused, Pattern, Word

MAX_WORDS = 1024
MAX_CHARS = 1 << 20
MAX_STEPS = 1 << 18

PLAIN, QUOTED, ESCAPED, UNKNOWN = 0, 1, 2, 3  # ESCAPED: quoted by a backslash
Char = tuple[str, int]  # one character and how bash sees it; an UNKNOWN entry holds its known text, if any
Text = Callable[[Any], str]

_GLOB = "*?["
_SEQUENCE = re.compile(r"([+-]?[0-9]+|[A-Za-z])\.\.([+-]?[0-9]+|[A-Za-z])(?:\.\.([+-]?[0-9]+))?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


@dataclass(frozen=True)
class Expanded:
    value: Word  # None: bash computes part of it when the command runs
    shape: str  # the known characters, for the protected-path rule


def expand_words(nodes: list[Any], text: Text, budget: Budget | None = None) -> list[Expanded]:
    """The words bash makes of one word, given as the nodes that spell it (the grammar sometimes splits a
    word in two where nothing separates them: `a'{'{b`), in order. Brace expansion can make several."""
    chars = [c for node in nodes for c in characters(node, text)]
    words = brace_expand(chars, budget or Budget())
    return [_finish(_tilde(word)) for word in words if word or len(words) == 1]  # `{,}` makes no words


def characters(node: Any, text: Text) -> list[Char]:
    kind = node.type
    raw = text(node)
    if kind in ("word", "number", "brace_expression"):
        chars = _unescaped(raw)
        if any(kind == PLAIN and c in " \t\n" for c, kind in chars):
            raise ArgumentRefused(f"`{raw}` is one word for the grammar and several for bash; quote it")
        return chars
    if kind == "raw_string":
        return [("", QUOTED), *((c, QUOTED) for c in raw[1:-1])]  # `''` is an empty word, not no word
    if kind == "ansi_c_string":
        return [("", QUOTED), *((c, QUOTED) for c in ansi_c(raw[2:-1]))]
    if kind == "string":
        return _double_quoted(node, text)
    if kind == "translated_string":
        return [(raw, UNKNOWN)]
    if kind == "concatenation":
        out: list[Char] = []
        translated = False
        for child in node.children:
            if child.type == "$":  # `$"…"`: the string as a message catalogue may translate it
                translated = True
                continue
            part = characters(child, text)
            out.extend([("".join(c for c, _ in part), UNKNOWN)] if translated else part)
            translated = False
        return out
    return [("", UNKNOWN)]


def command_name(node: Any, text: Text) -> str | None:
    """A command name's value when it is one plain word exactly as written: no quotes, escapes, globs,
    braces or tildes (what runs must be what the allowlist and denylist compare)."""
    raw = text(node)
    if node.type == "number" or (node.type == "word" and not (set(raw) & set("\\*?[{}~'\""))):
        return raw
    return None


def ansi_c(body: str) -> str:
    """The value of `$'body'`, decoded as bash does (`\\x2e` is `.`)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 == len(body):
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        i += 2
        if e in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[e])
        elif e in "01234567":
            digits = re.match(r"[0-7]{1,2}", body[i:])
            number = e + (digits.group() if digits else "")
            out.append(chr(int(number, 8) & 0xFF))
            i += len(number) - 1
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = re.match(r"[0-9A-Fa-f]{1,%d}" % width, body[i:])
            if digits is None:
                out.append("\\" + e)
                continue
            code = int(digits.group(), 16)
            if e != "x" and code > 0x7F:
                raise ArgumentRefused(f"`$'{body}'`: what a \\{e} escape beyond ASCII becomes depends on the locale; "
                                      "write the character itself")  # fmt: skip
            out.append(chr(code))
            i += len(digits.group())
        elif e == "c" and i < len(body):
            out.append(chr(ord(body[i].upper()) ^ 0x40) if body[i] != "\\" else "\x1c")
            i += 1
        else:
            out.append("\\" + e)
    return "".join(out).split("\0", 1)[0]  # bash ends the string at a NUL


def _unescaped(raw: str) -> list[Char]:
    """An unquoted word: a backslash quotes the next character; a backslash-newline disappears."""
    out: list[Char] = []
    i = 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            if raw[i + 1] != "\n":
                out.append((raw[i + 1], ESCAPED))
            i += 2
            continue
        out.append((raw[i], PLAIN))
        i += 1
    return out


def _double_quoted(node: Any, text: Text) -> list[Char]:
    """`"…"`: the text between the expansions is quoted (backslash escapes only `$`, `` ` ``, `"`, `\\` and
    a newline); every expansion in it is unknown."""
    source = text(node)
    start = node.start_byte
    out: list[Char] = [("", QUOTED)]
    position = 1
    for child in node.named_children:
        if child.type == "string_content":
            continue
        out.extend(_in_quotes(source[position : child.start_byte - start]))
        out.append(("", UNKNOWN))
        position = child.end_byte - start
    out.extend(_in_quotes(source[position:-1]))
    return out


def _in_quotes(raw: str) -> list[Char]:
    out: list[Char] = []
    i = 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw) and raw[i + 1] in '$`"\\\n':
            if raw[i + 1] != "\n":
                out.append((raw[i + 1], QUOTED))
            i += 2
            continue
        out.append((raw[i], QUOTED))
        i += 1
    return out


# -- brace expansion -----------------------------------------------------------------------------------------


def brace_expand(chars: list[Char], budget: Budget) -> list[list[Char]]:
    """Bash's brace expansion of one word (bash 5's braces.c, step by step), bounded (see the module
    docstring)."""
    return _expand(chars, 0, len(chars), budget)


class Budget:
    """What brace expansion may still spend on one command: words made, characters made, steps taken."""

    def __init__(self) -> None:
        self.chars = 0
        self.steps = 0

    def words(self, count: int) -> None:
        if count > MAX_WORDS:
            raise ArgumentRefused(f"a brace expansion makes more than {MAX_WORDS} words; write the words out or "
                                  "use fewer")  # fmt: skip

    def spend(self, chars: int = 0, steps: int = 0) -> None:
        self.chars += chars
        self.steps += steps
        if self.chars > MAX_CHARS or self.steps > MAX_STEPS:
            raise ArgumentRefused("a word with this many braces cannot be checked; write its words out")


def _expand(chars: list[Char], lo: int, hi: int, budget: Budget) -> list[list[Char]]:
    """chars[lo:hi] expanded: the first brace expression with its preamble, then the rest in turn."""
    i = lo
    while True:
        i = _open_brace(chars, i, lo, hi, budget)
        if i < 0:
            budget.spend(chars=hi - lo)
            return [chars[lo:hi]]
        close = _close_brace(chars, i + 1, hi, budget)
        if close >= 0:
            break
        i += 1
    preamble = chars[lo:i]
    if any(c == "," and kind != ESCAPED for c, kind in chars[i + 1 : close]):
        if not any(c == "," and kind == PLAIN for c, kind in chars[i + 1 : close]):
            raise ArgumentRefused("a brace expression whose only commas are quoted cannot be checked (bash still "
                                  "reads it as a list); quote the braces too, or write the words out")  # fmt: skip
        middle: list[list[Char]] = []
        bounds = [i, *_top_commas(chars, i + 1, close, budget), close]
        for start, end in zip(bounds, bounds[1:]):
            middle.extend(_expand(chars, start + 1, end, budget))
            budget.words(len(middle))
    else:
        middle = _sequence(chars[i + 1 : close], budget)
        if middle is None:
            middle = [chars[i : close + 1]]
    rest = _expand(chars, close + 1, hi, budget) if close + 1 < hi else [[]]
    budget.words(len(middle) * len(rest))
    out = []
    for m in middle:
        for r in rest:
            budget.spend(chars=len(preamble) + len(m) + len(r))
            out.append([*preamble, *m, *r])
    return out


def _open_brace(chars: list[Char], i: int, lo: int, hi: int, budget: Budget) -> int:
    """The next unquoted `{` from i, or -1; a `{` right before a `}` at the start of the text or after
    white space is not one."""
    while i < hi:
        budget.spend(steps=1)
        if chars[i] == ("{", PLAIN):
            if i + 1 < hi and chars[i + 1] == ("}", PLAIN):
                if i == lo:
                    i += 1
                    continue
                if chars[i - 1][0].isspace():
                    raise ArgumentRefused("`{}` after quoted white space cannot be checked; quote the braces")
            return i
        i += 1
    return -1


def _close_brace(chars: list[Char], i: int, hi: int, budget: Budget) -> int:
    """The `}` that closes a brace expression opened before i: at nesting level 0, after a comma or a `..`
    at level 0 (a `}` before either is kept as a character); -1 when there is none."""
    level = commas = 0
    while i < hi:
        budget.spend(steps=1)
        c, kind = chars[i]
        if kind == PLAIN:
            if c == "}" and level == 0 and commas:
                return i
            if c == "{":
                level += 1
            elif c == "}" and level:
                level -= 1
            elif level == 0 and c == ",":
                commas += 1
            elif level == 0 and c == "." and chars[i + 1 : i + 2] == [(".", PLAIN)] and \
                    chars[i + 2 : i + 3] != [("}", PLAIN)]:  # fmt: skip
                commas += 1
        i += 1
    return -1


def _top_commas(chars: list[Char], lo: int, hi: int, budget: Budget) -> list[int]:
    commas = []
    level = 0
    for i in range(lo, hi):
        budget.spend(steps=1)
        c, kind = chars[i]
        if kind != PLAIN:
            continue
        if c == "{":
            level += 1
        elif c == "}" and level:
            level -= 1
        elif c == "," and level == 0:
            commas.append(i)
    return commas


def _sequence(amble: list[Char], budget: Budget) -> list[list[Char]] | None:
    """`x..y[..step]` of integers or of single letters, or None when it is not one (then bash leaves the
    braces as they are)."""
    if any(kind != PLAIN for _, kind in amble):
        return None
    found = _SEQUENCE.fullmatch("".join(c for c, _ in amble))
    if found is None:
        return None
    first, last, step_text = found.groups()
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    numeric = first.lstrip("+-").isdigit()
    if numeric != last.lstrip("+-").isdigit():
        return None
    start, end = (int(first), int(last)) if numeric else (ord(first), ord(last))
    count = abs(end - start) // step + 1
    budget.words(count)
    direction = step if end >= start else -step
    values = range(start, end + (1 if direction > 0 else -1), direction)
    if not numeric:
        if any(v == ord("\\") for v in values):
            raise ArgumentRefused(f"the brace sequence `{{{first}..{last}}}` passes through a backslash; list the "
                                  "words instead")  # fmt: skip
        return [[(chr(v), PLAIN)] for v in values]
    width = max([len(t) for t in (first, last) if re.match(r"-?0[0-9]", t)] or [0])
    return [[(c, PLAIN) for c in f"{v:0{width}d}"] for v in values]


# -- tilde expansion and the result ----------------------------------------------------------------------------


def _tilde(chars: list[Char]) -> list[Char]:
    """`~`, `~user`, `~+`... at the start of the word, or after `=` and `:` in an assignment-shaped word,
    become an unknown directory."""
    plain = "".join(c if kind == PLAIN else "\0" for c, kind in chars)
    starts = [0] if plain.startswith("~") else []
    assignment = _ASSIGNMENT.match(plain)
    if assignment:
        starts += [i + 1 for i, c in enumerate(plain) if c in "=:" and i >= assignment.end() - 1
                   and plain[i + 1 : i + 2] == "~"]  # fmt: skip
    for start in reversed(starts):
        ends = "/:" if assignment else "/"
        end = start + 1
        while end < len(chars) and not (chars[end][1] == PLAIN and chars[end][0] in ends):
            end += 1
        if any(kind != PLAIN for _, kind in chars[start + 1 : end]):
            continue  # a tilde-prefix with a quoted character is not expanded
        chars = [*chars[:start], ("", UNKNOWN), *chars[end:]]
    return chars


def _finish(chars: list[Char]) -> Expanded:
    shape = "".join(c for c, _ in chars)
    if any(kind == UNKNOWN for _, kind in chars):
        return Expanded(None, shape)
    value = "".join(c for c, _ in chars)
    if not any(kind == PLAIN and c in _GLOB for c, kind in chars):
        return Expanded(value, shape)
    glob = "".join(f"[{c}]" if kind in (QUOTED, ESCAPED) and c and c in _GLOB + "]\\" else c for c, kind in chars)
    return Expanded(Pattern(value, glob), shape)
