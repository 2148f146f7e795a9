"""Brace expansion of Gemini globs, as bash does it: `{a,b}` lists, `{1..5}`, `{01..10..2}` and `{a..e}`
sequences, nested; bounded (`MAX_EXPANSIONS` patterns, `MAX_EXPANDED_CHARS` in all)."""

from __future__ import annotations

from coretools.sandbox.patterns.tree import PatternError, shortened

MAX_EXPANSIONS = 1000  # patterns one brace expression may expand to
MAX_EXPANDED_CHARS = 200_000  # their total length


def expand_braces(pattern: str) -> list[str]:
    """The patterns a brace expression stands for, in order (escapes kept, `{a}` and unbalanced braces
    literal, `{1..5}`, `{01..10..2}`, `{a..e}` sequences). At most `MAX_EXPANSIONS`, else PatternError."""
    if "{" not in pattern:
        return [pattern]
    tree = _brace_tree(pattern, 0, len(pattern))
    count = _count(tree)
    if count > MAX_EXPANSIONS or count * len(pattern) > MAX_EXPANDED_CHARS * 4:
        raise PatternError(
            f"The pattern '{shortened(pattern)}' expands (through its braces) to {count} patterns; the limit is "
            f"{MAX_EXPANSIONS}. Use fewer or shorter brace lists."
        )
    out = _expand(tree)
    if sum(map(len, out)) > MAX_EXPANDED_CHARS:
        raise PatternError(
            f"The pattern '{shortened(pattern)}' expands (through its braces) to over {MAX_EXPANDED_CHARS} "
            "characters of patterns. Use fewer or shorter brace lists."
        )
    return out


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
        raise PatternError(f"The brace sequence '{{{shortened(body)}}}' has more than {MAX_EXPANSIONS} items.")
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

