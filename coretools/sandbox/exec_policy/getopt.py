"""The one option parser of the argument policy: a command line read the way glibc's `getopt_long` reads it,
driven by each program's option table (`Spec`).

What it follows, because the program does: clustered short options (`-0a FILE` is `-0 -a FILE`), a value
attached to its letter or in the next word, optional values that only attach (`-i{}`, `--eof=x`),
`--long=value` and `--long value`, unambiguous prefixes of long options (`--to-comm`), `--` and `-` as
operands, and GNU's permutation (options after operands still count) unless the table starts with `+`.

An option the table does not know is handled by `Spec.strict_options`:

- True (launchers such as `xargs`, `timeout`, `env`): refused, naming it. Whether it takes a value decides
  which word is the command, so guessing would let `-Q sh` slip a command past the policy. For the same
  reason a word before the command that is not literal, or a glob (it becomes any number of words:
  `timeout [5r]* x` is `timeout 5 rm x` where files `5` and `rm` exist), is refused.
- False (programs judged by the options they may not be given, such as `tar`, `rg`, `wget`): read as a
  flag, and the cluster and the next word are read on as options. That can only find more options than the
  program sees, never fewer: only the letters and names a table declares as taking a value hide the word
  after them, so a table lists those exactly and nothing else as valued.

A prefix that matches two options of the table is refused as ambiguous (the program would refuse it too, or
the table is incomplete and cannot say which one is meant)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from coretools.sandbox.exec_policy.words import ArgumentRefused, Pattern, Word

FLAG, VALUE, OPTIONAL = "flag", "value", "optional"
_NUMBER = re.compile(r"-[-+]?[0-9]")  # nice's `-5`, `--5`, `-+5`: read before its getopt


@dataclass(frozen=True)
class Spec:
    """A program's options in getopt's own notation.

    `short` is the optstring (`"+k:s:v"`: `k` and `s` take a value, `v` does not; `::` marks a value that
    can only be attached; a leading `+` stops at the first operand). `long` lists the long options
    separated by spaces, each spelled `name`, `name:` (takes a value) or `name::` (optional `=value`),
    followed by `=x` when it is another spelling of the short option `-x`: `"signal:=s verbose=v"`.
    `numbers`: a word `-5` is an option (`nice -5`)."""

    short: str = ""
    long: str = ""
    strict_options: bool = False
    numbers: bool = False
    shorts: dict[str, str] = field(init=False, repr=False, compare=False)
    longs: dict[str, tuple[str, str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shorts: dict[str, str] = {}
        letters = self.short.lstrip("+")
        i = 0
        while i < len(letters):
            letter = letters[i]
            colons = len(letters[i + 1 :]) - len(letters[i + 1 :].lstrip(":"))
            shorts[letter] = (FLAG, VALUE, OPTIONAL)[min(colons, 2)]
            i += 1 + colons
        longs: dict[str, tuple[str, str]] = {}
        for item in self.long.split():
            spelled, _, alias = item.partition("=")
            name = spelled.rstrip(":")
            kind = (FLAG, VALUE, OPTIONAL)[min(len(spelled) - len(name), 2)]
            longs[name] = (kind, f"-{alias}" if alias else f"--{name}")
        object.__setattr__(self, "shorts", shorts)
        object.__setattr__(self, "longs", longs)

    @property
    def permutes(self) -> bool:
        return not self.short.startswith("+")


@dataclass(frozen=True)
class Option:
    """One option as the program reads it: `name` is `-x` or `--name` (the short spelling when the long
    option is another name for it), `value` its value (None: none given, or a word that is not literal),
    `word` the word it was found in, for messages; `known` False for an option the table does not list."""

    name: str
    value: Word
    word: str
    known: bool = True


@dataclass
class Parsed:
    options: list[Option]
    operands: list[Word]  # for a `+` table: the first operand and every word after it


def parse(program: str, spec: Spec, args: list[Word]) -> Parsed:
    """Read `args` (the words after the program name) as `program` would."""
    options: list[Option] = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word is None or (spec.strict_options and not spec.permutes and isinstance(word, Pattern)):
            if spec.strict_options:
                raise ArgumentRefused(f"an argument of {program} is not literal (an expansion, or a glob that "
                                      "becomes any number of words), so which of its words is an option, a value or "
                                      "the command cannot be checked")  # fmt: skip
            operands.append(word)
            continue
        if word == "--":
            operands.extend(args[i:])
            break
        if not word.startswith("-") or word == "-":
            if not spec.permutes:
                operands.extend(args[i - 1 :])
                break
            operands.append(word)
            continue
        if spec.numbers and _NUMBER.match(word):
            options.append(Option(word, None, word))
            continue
        if word.startswith("--"):
            option, taken = _long(program, spec, word, args, i)
            options.append(option)
        else:
            taken = _cluster(program, spec, word, args, i, options)
        i += taken
    return Parsed(options, operands)


def _long(program: str, spec: Spec, word: str, args: list[Word], i: int) -> tuple[Option, int]:
    given, has_value, attached = word[2:].partition("=")
    found = _long_match(program, spec, given, word)
    if found is None:
        return Option(f"--{given}", attached if has_value else None, word, known=False), 0
    kind, name = found
    if has_value or kind != VALUE:
        return Option(name, attached if has_value else None, word), 0
    return Option(name, args[i] if i < len(args) else None, word), 1


def _long_match(program: str, spec: Spec, given: str, word: str) -> tuple[str, str] | None:
    if given in spec.longs:
        return spec.longs[given]
    matches = {spec.longs[n] for n in spec.longs if given and n.startswith(given)}
    if len(matches) > 1:
        names = sorted(n for n in spec.longs if n.startswith(given))
        raise ArgumentRefused(f"{program} `{word}` is an ambiguous abbreviation ({', '.join('--' + n for n in names)}); "
                              "spell the option out")  # fmt: skip
    if matches:
        return matches.pop()
    if spec.strict_options:
        raise ArgumentRefused(f"{program} option `--{given}` is not one the shell policy knows; it could take a value "
                              "and change which word is the command, so it is refused")  # fmt: skip
    return None


def _cluster(program: str, spec: Spec, word: str, args: list[Word], i: int, options: list[Option]) -> int:
    """The options of one short cluster; returns how many following words it took as a value."""
    letters = word[1:]
    for index, letter in enumerate(letters):
        kind = spec.shorts.get(letter)
        if kind is None:
            if spec.strict_options:
                raise ArgumentRefused(f"{program} option `-{letter}` (in `{word}`) is not one the shell policy knows; "
                                      "it could take a value and change which word is the command, so it is refused")  # fmt: skip
            options.append(Option(f"-{letter}", None, word, known=False))
            continue
        rest = letters[index + 1 :]
        if kind == FLAG:
            options.append(Option(f"-{letter}", None, word))
            continue
        if rest or kind == OPTIONAL:
            options.append(Option(f"-{letter}", rest or None, word))
            return 0
        options.append(Option(f"-{letter}", args[i] if i < len(args) else None, word))
        return 1
    return 0
