"""One parser for every glob-like pattern the tools take, into one small syntax tree.

Dialects, each a function here:

* `parse_glob`: the Gemini glob of glob's `pattern` and read_many_files' paths, include and exclude (and,
  with `globstar=False, negate=False`, list_directory's `ignore`, matched against an entry's name): `*`,
  `?`, `[...]` (ranges, `!`/`^`, POSIX `[:alpha:]`), `\\` escapes, `**` as a whole segment (any number of
  directories), braces `{a,b}` and `{1..3}` expanded first (at most `MAX_EXPANSIONS` patterns), extglob
  `@(a|b)`, `*(..)`, `+(..)`, `?(..)` and `!(..)`, and a leading `!` that makes the pattern an exclusion.
* `parse_gitignore`: one line of a `.gitignore`, `.geminiignore` or `.git/info/exclude`, with git's
  anchoring (a slash before the end anchors at the file's directory), a trailing `/` (directories only),
  `!` negation, `**` and escapes.
* `parse_include`: search_file_content's `include` filter: ripgrep's `--glob` reading of it (no slash:
  the file name at any depth; a slash: anchored at the searched directory).

The tree (`Node`) is a regular expression over a path: text, one character of a set, sequence,
alternation, bounded or unbounded repetition, the gitignore "matched through a directory" mark, the end,
and `Exclude`: one path segment that matches except where the inner pattern does. Back-ends:
`coretools.sandbox.matcher` (in-process, linear time: RE2, and a segment-by-segment automaton for
`Exclude`) and `coretools.sandbox.rgglobs` (ripgrep arguments).

Extglob negation `!(P)` cannot be a linear-time regex (it needs look-ahead), so it is matched then
excluded on its own segment: `A!(P)B` matches a name made of a part A matches, then any text that P does
not match as a whole, then a part B matches. It may stand once in a segment, outside other groups; any
other use is refused with a `PatternError` that names the pattern.
"""

from __future__ import annotations

from dataclasses import dataclass

from coretools.errors import ToolError

MAX_EXPANSIONS = 1000  # patterns one brace expression may expand to
MAX_EXPANDED_CHARS = 200_000  # their total length


class PatternError(ToolError):
    """A pattern the engine refuses; the message names it and says why (a tool's caller sees it as is)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "invalid_tool_params")


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


# -- braces ---------------------------------------------------------------------------------------------


def expand_braces(pattern: str) -> list[str]:
    """The patterns a brace expression stands for, in order (escapes kept, `{a}` and unbalanced braces
    literal, `{1..5}`, `{01..10..2}`, `{a..e}` sequences). At most `MAX_EXPANSIONS`, else PatternError."""
    if "{" not in pattern:
        return [pattern]
    tree = _brace_tree(pattern, 0, len(pattern))
    count = _count(tree)
    if count > MAX_EXPANSIONS or count * len(pattern) > MAX_EXPANDED_CHARS * 4:
        raise PatternError(
            f"The pattern '{_short(pattern)}' expands (through its braces) to {count} patterns; the limit is "
            f"{MAX_EXPANSIONS}. Use fewer or shorter brace lists."
        )
    out = _expand(tree)
    if sum(map(len, out)) > MAX_EXPANDED_CHARS:
        raise PatternError(
            f"The pattern '{_short(pattern)}' expands (through its braces) to over {MAX_EXPANDED_CHARS} "
            "characters of patterns. Use fewer or shorter brace lists."
        )
    return out


def _short(pattern: str) -> str:
    return pattern if len(pattern) <= 200 else pattern[:200] + "..."


# A brace tree is a list of parts: a str (literal text) or a list of alternatives (each a brace tree).
_Tree = list


def _brace_tree(p: str, start: int, end: int) -> _Tree:
    parts: _Tree = []
    text: list[str] = []
    i = start
    while i < end:
        ch = p[i]
        if ch == "\\" and i + 1 < end:
            text.append(p[i : i + 2])
            i += 2
            continue
        if ch == "{":
            close, commas = _brace_close(p, i, end)
            if close is not None:
                if commas:
                    bounds = [i + 1, *[c + 1 for c in commas], close + 1]
                    alts = [_brace_tree(p, bounds[k], bounds[k + 1] - 1) for k in range(len(bounds) - 1)]
                    parts.append("".join(text))
                    text = []
                    parts.append(alts)
                    i = close + 1
                    continue
                series = _sequence(p[i + 1 : close])
                if series is not None:
                    parts.append("".join(text))
                    text = []
                    parts.append([[item] for item in series])
                    i = close + 1
                    continue
        text.append(ch)
        i += 1
    parts.append("".join(text))
    return parts


def _brace_close(p: str, i: int, end: int) -> tuple[int | None, list[int]]:
    """The `}` closing the `{` at `i`, and the top-level commas inside it."""
    depth, commas, j = 0, [], i + 1
    while j < end:
        ch = p[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                return j, commas
            depth -= 1
        elif ch == "," and depth == 0:
            commas.append(j)
        j += 1
    return None, []


def _sequence(body: str) -> list[str] | None:
    parts = body.split("..")
    if len(parts) not in (2, 3):
        return None
    step = 1
    if len(parts) == 3:
        try:
            step = abs(int(parts[2])) or 1
        except ValueError:
            return None
    first, last = parts[0], parts[1]
    try:
        lo, hi = int(first), int(last)
    except ValueError:
        if len(first) == 1 and len(last) == 1 and not first.isdigit() and not last.isdigit():
            lo, hi = ord(first), ord(last)
            if abs(hi - lo) // step >= MAX_EXPANSIONS:
                return None
            way = 1 if hi >= lo else -1
            return [chr(c) for c in range(lo, hi + way, way * step)]
        return None
    if abs(hi - lo) // step >= MAX_EXPANSIONS:
        raise PatternError(f"The brace sequence '{{{_short(body)}}}' has more than {MAX_EXPANSIONS} items.")
    digits = lambda s: s.lstrip("+-")  # noqa: E731
    width = max(len(first), len(last)) if any(len(d) > 1 and d[0] == "0" for d in map(digits, (first, last))) else 0
    way = 1 if hi >= lo else -1
    out = []
    for n in range(lo, hi + way, way * step):
        text = str(abs(n)).zfill(width - (1 if n < 0 else 0)) if width else str(abs(n))
        out.append(("-" if n < 0 else "") + text)
    return out


def _count(tree: _Tree) -> int:
    total = 1
    for part in tree:
        if isinstance(part, list):
            total *= max(1, sum(_count(a) for a in part))
            if total > MAX_EXPANSIONS * 1000:
                return total
    return total


def _expand(tree: _Tree) -> list[str]:
    results = [""]
    for part in tree:
        if isinstance(part, str):
            results = [r + part for r in results]
        else:
            options = [x for a in part for x in _expand(a)]
            results = [r + o for r in results for o in options]
    return results


# -- Gemini globs ---------------------------------------------------------------------------------------

_POSIX = {
    "alnum": ((48, 57), (65, 90), (97, 122)),
    "alpha": ((65, 90), (97, 122)),
    "ascii": ((0, 127),),
    "blank": ((9, 9), (32, 32)),
    "cntrl": ((0, 31), (127, 127)),
    "digit": ((48, 57),),
    "graph": ((33, 126),),
    "lower": ((97, 122),),
    "print": ((32, 126),),
    "punct": ((33, 47), (58, 64), (91, 96), (123, 126)),
    "space": ((9, 13), (32, 32)),
    "upper": ((65, 90),),
    "word": ((48, 57), (65, 90), (95, 95), (97, 122)),
    "xdigit": ((48, 57), (65, 70), (97, 102)),
}
_EXT = "@*+?!"


def parse_globs(pattern: str, *, paths: bool = True, negate: bool = True) -> list[Glob]:
    """A Gemini glob (braces expanded) as one `Glob` per expansion."""
    return [parse_glob(p, paths=paths, negate=negate, source=pattern) for p in expand_braces(pattern)]


def parse_glob(pattern: str, *, paths: bool = True, negate: bool = True, source: str | None = None) -> Glob:
    """One brace-free Gemini glob. `negate`: a leading `!` (not `!(`) makes it an exclusion. `paths`: it
    is matched against paths (`**` segments span directories, `/` separates segments); else against a
    name (list_directory's `ignore`), where `**` is `*` and `/` an ordinary character."""
    source = pattern if source is None else source
    negative = negate and pattern.startswith("!") and not pattern.startswith("!(")
    body = pattern[1:] if negative else pattern
    if not paths:
        return Glob(source, (_Segment(body, source, paths=False).parse(),), negative)
    segments: list[Node | str] = []
    for raw in _split_segments(body):
        if raw in ("**", "***"):
            if not segments or segments[-1] != GLOBSTAR:
                segments.append(GLOBSTAR)
            continue
        segments.append(_Segment(raw, source).parse())
    return Glob(source, tuple(segments), negative)


def _split_segments(body: str) -> list[str]:
    """The pattern's segments: split at each `/` outside extglob groups and escapes; runs of `/` are one."""
    out, cur, depth, i = [], [], 0, 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch in _EXT and body[i + 1 : i + 2] == "(":
            depth += 1
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch == ")" and depth:
            depth -= 1
        if ch == "/" and not depth:
            if cur or not out:
                out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


class _Segment:
    """Parser of one glob segment (or of one alternative inside an extglob group)."""

    def __init__(self, text: str, source: str, paths: bool = True) -> None:
        self.s, self.source, self.i = text, source, 0
        self.paths = paths
        self.negations = 0

    def parse(self) -> Node:
        node = self._sequence(stop=None, depth=0)
        if self.negations > 1:
            raise self._refuse("more than one !(...) in a segment")
        return node

    def _refuse(self, why: str) -> PatternError:
        return PatternError(
            f"The pattern '{_short(self.source)}' uses extglob negation !(...) {why}, which is not supported "
            "(it is matched on one path segment, once per segment, outside other groups). Rewrite the pattern "
            "or use the 'exclude' list where there is one."
        )

    def _sequence(self, stop: str | None, depth: int) -> Node:
        s = self.s
        items: list[Node] = []
        text: list[str] = []

        def flush() -> None:
            if text:
                items.append(Text("".join(text)))
                text.clear()

        while self.i < len(s):
            ch = s[self.i]
            if stop is not None and ch in stop:
                break
            if ch == "\\":  # a lone backslash at the end stands for nothing
                text.append(s[self.i + 1 : self.i + 2])
                self.i += 2
                continue
            if ch in _EXT and s[self.i + 1 : self.i + 2] == "(" and self._group_end(self.i + 1) is not None:
                flush()
                items.append(self._group(ch, depth))
                continue
            if ch == "*":
                flush()
                while self.i < len(s) and s[self.i] == "*":
                    self.i += 1
                if not (items and items[-1] == star()):
                    items.append(star())
                continue
            if ch == "?":
                flush()
                items.append(NOT_SLASH)
                self.i += 1
                continue
            if ch == "[":
                parsed = self._class()
                if parsed is not None:
                    flush()
                    items.append(parsed)
                    continue
            if ch == "/" and self.paths:  # only inside a group: that alternative cannot match a path segment
                flush()
                items.append(NOTHING)
                self.i += 1
                continue
            text.append(ch)
            self.i += 1
        flush()
        return seq(*items)

    def _group_end(self, open_at: int) -> int | None:
        """Where the group opened at `open_at` closes (nested groups, escapes and classes skipped)."""
        s, depth, j = self.s, 0, open_at
        while j < len(s):
            ch = s[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "[":
                end = _class_end(s, j)
                if end is not None:
                    j = end + 1
                    continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return None

    def _group(self, kind: str, depth: int) -> Node:
        self.i += 2
        alternatives = []
        while True:
            alternatives.append(self._sequence(stop="|)", depth=depth + 1))
            if self.i >= len(self.s) or self.s[self.i] == ")":
                self.i += 1
                break
            self.i += 1  # the `|`
        body = alt(*alternatives)
        if kind == "@":
            return body
        if kind == "?":
            return Repeat(body, 0, 1)
        if kind == "*":
            return Repeat(body, 0, None)
        if kind == "+":
            return Repeat(body, 1, None)
        if depth:
            raise self._refuse("inside another group")
        self.negations += 1
        return Exclude(body)

    def _class(self) -> Node | None:
        """`[...]` at `self.i` as a `Chars`, or None (then `[` is literal): unclosed, or a `/` inside."""
        s = self.s
        j = self.i + 1
        negated = j < len(s) and s[j] in "!^"
        if negated:
            j += 1
        ranges: list[tuple[int, int]] = []
        first = True
        removed = False
        slash = "/" if self.paths else ""
        while True:
            if j >= len(s) or (s[j] == "/" and slash):
                return None
            ch = s[j]
            if ch == "]" and not first:
                break
            if ch == "[" and s[j + 1 : j + 2] == ":":
                end = s.find(":]", j + 2)
                name = s[j + 2 : end] if end > 0 else ""
                if name in _POSIX:
                    ranges.extend(_POSIX[name])
                    j = end + 2
                    first = False
                    continue
            if ch == "\\" and j + 1 < len(s):
                ch = s[j + 1]
                j += 1
                if ch == "/" and slash:
                    return None
            lo = ord(ch)
            j += 1
            first = False
            if j + 1 < len(s) and s[j] == "-" and s[j + 1] != "]":
                hi_ch = s[j + 1]
                step = 2
                if hi_ch == "\\" and j + 2 < len(s):
                    hi_ch, step = s[j + 2], 3
                if hi_ch == "/" and slash:
                    return None
                if hi_ch == "[" and s[j + 2 : j + 3] == ":":
                    ranges.append((lo, lo))
                    ranges.append((ord("-"), ord("-")))
                    j += 1
                    continue
                j += step
                if ord(hi_ch) >= lo:
                    ranges.append((lo, ord(hi_ch)))
                else:
                    removed = True
                continue
            ranges.append((lo, lo))
        self.i = j + 1
        if not ranges and removed:
            return (NOT_SLASH if slash else ANY) if negated else NOTHING
        if negated and slash:
            ranges.append((SLASH, SLASH))
        return Chars(tuple(ranges), negated)


def _class_end(s: str, j: int) -> int | None:
    k = j + 1
    if k < len(s) and s[k] in "!^":
        k += 1
    if k < len(s) and s[k] == "]":
        k += 1
    while k < len(s):
        if s[k] == "\\":
            k += 2
            continue
        if s[k] == "]":
            return k
        if s[k] == "/":
            return None
        k += 1
    return None


# -- gitignore lines ------------------------------------------------------------------------------------


def rule_lines(data: bytes | None) -> list[str]:
    """The lines of an ignore file as the rules read them: decoded (invalid UTF-8 replaced), split, leading
    whitespace trimmed (as Gemini CLI does)."""
    if not data:
        return []
    return [line.lstrip() for line in data.decode("utf-8", errors="replace").splitlines()]


def parse_gitignore(line: str) -> IgnoreLine | None:
    """One gitignore line, or None for a blank line, a comment, or a line git would discard (an unclosed
    `[`, a bad range, a trailing lone backslash)."""
    body = line if line.endswith("\\ ") else line.rstrip()
    if not body or body.startswith("#") or body == "/":
        return None
    include = not body.startswith("!")
    if not include:
        body = body[1:]
    segs = body.split("/")
    is_dir = not segs[-1]
    if not segs[0]:
        del segs[0]
    elif len(segs) == 1 or (len(segs) == 2 and not segs[1]):
        if segs[0] != "**":
            segs.insert(0, "**")
    if not segs:
        return None
    if not segs[-1]:
        segs[-1] = "**"
    for k in range(len(segs) - 1, 0, -1):
        if segs[k - 1] == "**" and segs[k] == "**":
            del segs[k]
    node = _gitignore_special(segs, is_dir)
    if node is None:
        try:
            node = _gitignore_segments(segs, is_dir)
        except PatternError:
            return None
    return IgnoreLine(line, node, include)


def _gitignore_special(segs: list[str], is_dir: bool) -> Node | None:
    """The whole-path shortcuts of git's rules (matched anywhere in the path)."""
    anywhere = star(ANY)
    if segs == ["**"]:
        return seq(anywhere, DirMark(Text("/")) if is_dir else NOT_NEWLINE)
    if segs == ["**", "*"]:
        return seq(anywhere, NOT_NEWLINE)
    if segs == ["**", "*", "**"]:
        return seq(anywhere, DirMark(Text("/")) if is_dir else Text("/"))
    return None


def _gitignore_segments(segs: list[str], is_dir: bool) -> Node:
    parts: list[Node] = []
    need_slash = False
    end = len(segs) - 1
    any_run = Repeat(NOT_NEWLINE, 1, None)
    for index, seg in enumerate(segs):
        if seg == "**":
            if index == 0:
                parts.append(Repeat(seq(any_run, Text("/")), 0, 1))
            elif index < end:
                parts.append(Repeat(seq(Text("/"), any_run), 0, 1))
                need_slash = True
            else:
                parts.append(DirMark(Text("/")) if is_dir else Text("/"))
            continue
        if need_slash:
            parts.append(Text("/"))
        parts.append(Repeat(NOT_SLASH, 1, None) if seg == "*" else gitignore_segment(seg))
        if index == end:
            parts.append(alt(DirMark(Text("/")), End(newline=True)))
        need_slash = True
    return seq(*parts)


def gitignore_segment(seg: str) -> Node:
    """One segment of a gitignore pattern (`*`, `?`, `[...]`, `\\x`); PatternError if git would discard
    the line."""
    parts: list[Node] = []
    text: list[str] = []
    i, n = 0, len(seg)

    def flush() -> None:
        if text:
            parts.append(Text("".join(text)))
            text.clear()

    while i < n:
        ch = seg[i]
        i += 1
        if ch == "\\":
            if i >= n:
                raise PatternError(f"The gitignore pattern segment '{seg}' ends with a lone backslash.")
            text.append(seg[i])
            i += 1
        elif ch == "*":
            flush()
            parts.append(star())
        elif ch == "?":
            flush()
            parts.append(NOT_SLASH)
        elif ch == "[":
            j = i
            if j < n and seg[j] in "!^":
                j += 1
            if j < n and seg[j] == "]":
                j += 1
            while j < n and seg[j] != "]":
                j += 1
            if j >= n:
                raise PatternError(f"The gitignore pattern segment '{seg}' has an unclosed '['.")
            negated = seg[i] in "!^"
            content = seg[i + 1 if negated else i : j]
            flush()
            parts.append(python_class(content, negated))
            i = j + 1
        else:
            text.append(ch)
    flush()
    return seq(*parts)


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


# -- search's include filter -----------------------------------------------------------------------------


def parse_include(glob: str) -> Node:
    """search_file_content's `include` over a path relative to the searched directory, as ripgrep's
    `--glob` reads it: without a slash it matches the file name at any depth, with one it is anchored;
    `**` segments, `*`, `?`, `[...]`, `{a,b}` within a segment."""
    anchored = "/" in glob.rstrip("/")
    body = glob.lstrip("/") if glob.startswith("/") else glob
    parts = body.split("/")
    out: list[Node] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(star(ANY) if last else Repeat(seq(star(ANY), Text("/")), 0, 1))
            continue
        out.append(_include_part(part))
        if not last:
            out.append(Text("/"))
    node = seq(*out)
    return node if anchored else seq(Repeat(seq(star(ANY), Text("/")), 0, 1), node)


def _include_part(part: str) -> Node:
    start = part.find("{")
    if start >= 0:
        depth = 0
        for j in range(start, len(part)):
            if part[j] == "{":
                depth += 1
            elif part[j] == "}":
                depth -= 1
                if depth == 0:
                    alts = [_include_part(a) for a in _split_top(part[start + 1 : j])]
                    return seq(_include_part(part[:start]), alt(*alts), _include_part(part[j + 1 :]))
    return _include_segment(part)


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _include_segment(seg: str) -> Node:
    """One component with ripgrep-glob wildcards; an invalid bracket expression makes it literal."""
    parts: list[Node] = []
    text: list[str] = []
    i = 0

    def flush() -> None:
        if text:
            parts.append(Text("".join(text)))
            text.clear()

    try:
        while i < len(seg):
            ch = seg[i]
            if ch == "\\" and i + 1 < len(seg):
                text.append(seg[i + 1])
                i += 2
                continue
            if ch == "*":
                while i + 1 < len(seg) and seg[i + 1] == "*":
                    i += 1
                flush()
                parts.append(star())
            elif ch == "?":
                flush()
                parts.append(NOT_SLASH)
            elif ch == "[" and (end := seg.find("]", i + 2 if seg[i + 1 : i + 2] in ("!", "^", "]") else i + 1)) >= 0:
                body = seg[i + 1 : end]
                negated = body[:1] in ("!", "^")
                flush()
                parts.append(python_class(body[1:] if negated else body, negated))
                i = end
            else:
                text.append(ch)
            i += 1
    except PatternError:
        return Text(seg)
    flush()
    return seq(*parts)
