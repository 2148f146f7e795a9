"""The text tools' entries in the argument policy, with an allowlist: sed's script is scanned for the
commands and flags that run programs or write files, and awk's program for `system`, pipes and
redirections."""

from __future__ import annotations

import re

from coretools.sandbox.exec_policy.getopt import Spec, parse
from coretools.sandbox.exec_policy.words import STRICT, Launch, Word, below, literal_args, refuse

# -- sed ---------------------------------------------------------------------------------------------------

SED = Spec("e:f:l:i::nrEsuzb", "expression:=e file:=f in-place::=i line-length:=l quiet=n silent=n "
           "regexp-extended=r separate=s unbuffered=u null-data=z zero-terminated=z posix debug sandbox binary=b "
           "follow-symlinks help version", strict_options=True)  # fmt: skip
SED_SIMPLE = set("=dDgGhHlnNpPxzF")  # commands that take no argument (l takes an optional number)
SED_SUFFIX = re.compile(r"[A-Za-z0-9._~+-]*")


def check_sed(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if not strict:
        return []
    literal_args(name, args)
    parsed = parse(name, SED, args)
    scripts: list[str] = []
    in_place = False
    for option in parsed.options:
        in_place = _sed_option(option.name, option.value, scripts) or in_place
    operands = [w or "" for w in parsed.operands]
    if not scripts:
        if not operands:
            return []
        scripts.append(operands.pop(0))
    _sed_script("\n".join(scripts))
    if in_place:
        for path in operands:
            below("sed -i", "file", path)
    return []


def _sed_option(option: str, value: str | None, scripts: list[str]) -> bool:
    """Record one option; True when it turns on in-place editing."""
    if option == "-e":
        scripts.append(value or "")
    elif option == "-f":
        raise refuse(f"sed -f reads its script from a file the shell policy cannot see; pass the script with -e "
                     f"{STRICT}")  # fmt: skip
    elif option == "--follow-symlinks":
        raise refuse(f"sed --follow-symlinks is refused {STRICT} (an in-place edit would write where a link points)")
    elif option == "-i":
        if value and not SED_SUFFIX.fullmatch(value):
            raise refuse(f"sed -i backup suffix `{value}` is refused {STRICT}: a suffix with / or * names another "
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
            raise refuse("the sed script ends after an address without a command")
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
                raise refuse("a sed address uses a delimiter the shell policy does not follow")
        i = _sed_part_end(script, i + 1, delim, regex=True) + 1
        while i < n and script[i] in "IM":
            i += 1
    return i


def _sed_command(script: str, i: int) -> int:
    c = script[i]
    if c == "e":
        raise refuse("the sed `e` command runs a shell command and is refused by the shell policy")
    if c in "wW":
        raise refuse(f"the sed `{c}` command writes to a file and is refused {STRICT}")
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
            raise refuse("a sed `y` command the shell policy does not follow")
        end = _sed_part_end(script, i + 2, delim, regex=False)
        return _sed_part_end(script, end + 1, delim, regex=False) + 1
    raise refuse(f"the sed command `{c}` is not one the shell policy knows")


def _sed_substitute(script: str, i: int) -> int:
    n = len(script)
    delim = script[i] if i < n else ""
    if delim in ("", "\n", "\\", "[", "]"):
        raise refuse("a sed `s` command uses a delimiter the shell policy does not follow")
    end = _sed_part_end(script, i + 1, delim, regex=True)
    i = _sed_part_end(script, end + 1, delim, regex=False) + 1
    while i < n and script[i] not in " \t\n;}#":
        flag = script[i]
        if flag == "e":
            raise refuse("the sed `e` flag of `s` runs the result as a shell command and is refused by the shell "
                         "policy")  # fmt: skip
        if flag == "w":
            raise refuse(f"the sed `w` flag of `s` writes to a file and is refused {STRICT}")
        if flag not in "gpiImM0123456789":
            raise refuse(f"the sed `s` flag `{flag}` is not one the shell policy knows")
        i += 1
    return i


def _sed_part_end(script: str, i: int, delim: str, *, regex: bool) -> int:
    """Index of the delimiter that ends a part of a sed command starting at `i`: a regex (`regex=True`,
    bracket expressions skipped as GNU sed does: a delimiter inside `[...]` does not end it, a backslash
    there is an ordinary character) or a replacement or `y` part (backslash escapes only)."""
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
        if regex and c == "[":
            i = _bracket_end(script, i)
            continue
        i += 1
    what = "regular expression" if regex else "replacement"
    raise refuse(f"a sed {what} is not terminated on its line")


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
    raise refuse("a sed bracket expression is not terminated on its line")


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


# -- awk ---------------------------------------------------------------------------------------------------

AWK_NOT_OPERANDS = frozenset({"print", "printf", "return", "case", "in", "do", "else", "BEGIN", "END", "getline",
                              "delete", "exit", "next", "nextfile", "function", "func", "if", "while",
                              "for"})  # fmt: skip


AWK = Spec("+F:v:f:e:E:i:l:W:", "field-separator:=F assign:=v file:=f source:=e exec:=E include:=i load:=l",
           strict_options=True)  # fmt: skip


def check_awk(name: str, args: list[Word], strict: bool) -> list[Launch]:
    if not strict:
        return []
    literal_args(name, args)
    parsed = parse(name, AWK, args)
    for option in parsed.options:
        if option.name not in ("-F", "-v"):
            raise refuse(f"{name} option `{option.word}` is refused {STRICT} (-f program files, extensions and "
                         "includes cannot be checked; -F and -v are allowed)")  # fmt: skip
    if parsed.operands:
        _awk_program(name, parsed.operands[0] or "")
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
                raise refuse(f"{name}: a / here could be a division or a regular expression; rewrite it")
            i, prev = _awk_regex_end(name, program, i), "operand"
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (program[j].isalnum() or program[j] == "_"):
                j += 1
            word = program[i:j]
            if word == "system":
                raise refuse(f"{name} system() runs a shell command and is refused {STRICT}")
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
            raise refuse(f"{name} `|` runs a shell command (a pipe to or from a command) and is refused {STRICT}")
        if c == "@":
            raise refuse(f"{name} `@` (includes, extensions, indirect calls) is refused {STRICT}")
        if c == ">" and print_depth is not None and len(parens) == print_depth:
            raise refuse(f"{name} print/printf output redirection (`>`) writes to a file and is refused {STRICT}; "
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
    raise refuse(f"{name}: a string is not terminated on its line")


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
    raise refuse(f"{name}: a regular expression the shell policy cannot follow (unterminated, or with a quote)")

