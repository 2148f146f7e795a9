"""The gitignore dialect: one line of a `.gitignore`, `.geminiignore` or `.git/info/exclude`, with git's
anchoring, a trailing `/` (directories only), `!` negation, `**` and escapes."""

from __future__ import annotations

from coretools.sandbox.patterns.tree import (
    ANY,
    NOT_NEWLINE,
    NOT_SLASH,
    DirMark,
    End,
    IgnoreLine,
    Node,
    PatternError,
    Repeat,
    Text,
    alt,
    python_class,
    seq,
    star,
)


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
