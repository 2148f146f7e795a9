"""The pattern engine's syntax tree: what every dialect parses into and every back-end compiles (see
the package's docstring), with the error a refused pattern raises."""

from __future__ import annotations

from dataclasses import dataclass

from coretools.errors import ErrorKind, ToolError


class PatternError(ToolError):
    """A pattern the engine refuses; the message names it and says why (a tool's caller sees it as is)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorKind.INVALID_TOOL_PARAMS)


def shortened(pattern: str) -> str:
    """A pattern as error messages quote it: at most 200 characters."""
    return pattern if len(pattern) <= 200 else pattern[:200] + "..."


# -- the tree -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Chars:
    """One character out of `ranges` (inclusive code point pairs), or, `negated`, out of all others."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    item: Node
    min: int
    max: int | None  # None: unbounded


@dataclass(frozen=True)
class DirMark:
    """A gitignore pattern's `/` that matched because the pattern named a directory above the path (git's
    lower precedence for such a match; see `coretools.sandbox.matcher.RuleSet`)."""

    item: Node


@dataclass(frozen=True)
class End:
    """The end of the path; `newline`: a final newline may stand before it (Python's `$`)."""

    newline: bool = False


@dataclass(frozen=True)
class Exclude:
    """Any text of one segment that `item` does not match as a whole."""

    item: Node


Node = Text | Chars | Seq | Alt | Repeat | DirMark | End | Exclude

SLASH = ord("/")
NOT_SLASH = Chars(((SLASH, SLASH),), negated=True)
ANY = Chars(((0, 0x10FFFF),))
NOT_NEWLINE = Chars(((10, 10),), negated=True)
NOTHING = Chars(())
GLOBSTAR = "**"  # a segment of `Glob.segments` that matches any number of whole segments


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for item in items:
        if isinstance(item, Seq):
            flat.extend(item.items)
        elif not (isinstance(item, Text) and not item.text):
            flat.append(item)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Node) -> Node:
    return items[0] if len(items) == 1 else Alt(tuple(items))


def star(item: Node = NOT_SLASH) -> Repeat:
    return Repeat(item, 0, None)


def has_exclude(node: Node) -> bool:
    if isinstance(node, Exclude):
        return True
    if isinstance(node, (Seq, Alt)):
        return any(map(has_exclude, node.items))
    if isinstance(node, (Repeat, DirMark)):
        return has_exclude(node.item)
    return False


@dataclass(frozen=True)
class Glob:
    """A Gemini glob after brace expansion: path segments (a `Node` each, or `GLOBSTAR`), matched against a
    whole relative path; `negative`: an exclusion (`!pattern`)."""

    source: str
    segments: tuple[Node | str, ...]
    negative: bool = False

    def node(self) -> Node:
        """The whole-path tree: segments joined by `/`, `**` as any number of directories."""
        segs = self.segments
        if segs == (GLOBSTAR,):
            return star(ANY)
        parts: list[Node] = []
        for index, segment in enumerate(segs):
            last = index == len(segs) - 1
            if segment == GLOBSTAR:
                if index == 0:
                    parts.append(Repeat(seq(star(ANY), Text("/")), 0, 1))  # zero or more directories
                else:
                    parts.append(Text("/"))
                    parts.append(Repeat(ANY, 1, None) if last else Repeat(seq(star(ANY), Text("/")), 0, 1))
                continue
            if index and segs[index - 1] != GLOBSTAR:
                parts.append(Text("/"))
            parts.append(segment)  # type: ignore[arg-type]
        return seq(*parts)


@dataclass(frozen=True)
class IgnoreLine:
    """One gitignore line: `node` is matched from the start of a path (a prefix suffices), `include`: the
    line hides what it matches (False: a `!` line that brings it back)."""

    source: str
    node: Node
    include: bool


def python_class(content: str, negated: bool) -> Chars:
    """A bracket expression's inside, every character literal (backslashes too), read as Python's `re`
    reads a class: `a-z` ranges, `-` first or last literal, a first `]` literal. A reversed range makes the
    class invalid (PatternError). A negated class, as there, also matches `/`."""
    if not content:
        raise PatternError("An empty bracket expression.")
    ranges: list[tuple[int, int]] = []
    i, n = 0, len(content)
    while i < n:
        lo = ord(content[i])
        if i + 2 < n and content[i + 1] == "-":
            hi = ord(content[i + 2])
            if hi < lo:
                raise PatternError(f"The bracket expression '[{content}]' has a reversed range.")
            ranges.append((lo, hi))
            i += 3
            continue
        ranges.append((lo, lo))
        i += 1
    return Chars(tuple(ranges), negated)
