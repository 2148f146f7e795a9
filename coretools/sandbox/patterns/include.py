"""search_file_content's `include` dialect: ripgrep's `--glob` reading of it (no slash: the file name
at any depth; a slash: anchored at the searched directory)."""

from __future__ import annotations

from coretools.sandbox.patterns.tree import (
    ANY,
    NOT_SLASH,
    Node,
    PatternError,
    Repeat,
    Text,
    alt,
    python_class,
    seq,
    star,
)


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
