"""Recovery from a failed match: where the file has lines like the `old_string` that was not found, so the
model can copy the exact text. Bounded in work whatever the file and the needle."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator

from coretools.tools.textedit.codec import to_lf

# Work the "did you mean" report may do on one file: alignment votes counted, and characters compared by difflib
# (each candidate line's length times the probe's, summed). Past either, it reports from what it has seen.
MAX_VOTES = 2_000_000
MAX_FUZZY_WORK = 50_000_000
MAX_FUZZY_CHECKS = 4_000_000  # (file line, needle line) pairs given difflib's quick filters
CHECK_EVERY = 8192  # lines between cancellation checks


def similar_lines(text: str, needle: str, shown_max: int = 3, fuzzy_max_lines: int = 200_000,
                  check: Callable[[], None] | None = None) -> str:
    """A short report of where the file has text like `needle` (whitespace-insensitive line matches first,
    else close matches of its most distinctive line), with 1-based line numbers; '' if nothing is close.

    Bounded whatever the file and needle (see MAX_VOTES, MAX_FUZZY_WORK), never holds all the lines of the
    file at once, and calls `check` (which may raise to cancel) every few thousand lines."""
    wanted = [line.strip() for line in to_lf(needle).strip("\n").split("\n")]
    keys: dict[str, list[int]] = {}
    for k, line in enumerate(wanted):
        if line:
            keys.setdefault(line, []).append(k)
    if not keys:
        return ""
    count = text.count("\n") + 1  # lines, as text.split("\n") would make them
    votes = _votes(text, keys, check)
    width = len(wanted)
    if votes:
        picked = _apart(votes, width, shown_max)
        total = sum(len(v) for v in keys.values())
        ranges = [(max(start, 0), min(start + width, count)) for start in picked]
        shown = _lines_in(text, ranges)
        parts = []
        for start, (lo, hi) in zip(picked, ranges):
            note = (" (the same lines, differing only in whitespace or indentation)"
                    if votes[start] == total else f" ({votes[start]} of {total} lines match ignoring whitespace)")
            parts.append(f"Lines {lo + 1}-{hi}{note}:\n" + _numbered(shown, lo, hi))
        return "The most similar text in the file:\n" + "\n".join(parts)
    if count > fuzzy_max_lines:
        return ""
    if len(keys) > 1:
        return _similar_blocks(text, keys, width, count, shown_max, check)
    probe = max(keys, key=len)
    scored = _fuzzy(text, {probe: [0]}, check)
    if not scored:
        return ""
    top = sorted(scored, key=lambda start: (-scored[start], start))[:shown_max]
    shown = _lines_in(text, [(i, i + 1) for i in top])
    parts = [_numbered(shown, i, i + 1) for i in top]
    return f"No line matches exactly; the lines most similar to {_short(probe)!r} are:\n" + "\n".join(parts)


def _similar_blocks(text: str, keys: dict[str, list[int]], width: int, count: int, shown_max: int,
                    check: Callable[[], None] | None) -> str:
    """For a needle of several lines none of which the file has: the blocks of the file whose lines, taken
    together, are most like the needle's (each needle line's close lines vote for an alignment with their
    similarity), so the model sees the block it meant, not lines like one of its lines."""
    scored = _fuzzy(text, keys, check)
    if not scored:
        return ""
    picked = _apart(scored, width, shown_max)
    total = sum(len(v) for v in keys.values())
    ranges = [(max(start, 0), min(start + width, count)) for start in picked]
    shown = _lines_in(text, ranges)
    parts = [f"Lines {lo + 1}-{hi} (about {_pct(scored[start] / total)} like your lines):\n" + _numbered(shown, lo, hi)
             for start, (lo, hi) in zip(picked, ranges)]
    return "No line matches exactly; the blocks most like old_string are:\n" + "\n".join(parts)


def _apart(scores: dict[int, float], width: int, shown_max: int) -> list[int]:
    """Up to `shown_max` alignments, best score first (the earlier on a tie), none within `width` lines of
    one already taken."""
    picked: list[int] = []
    for start in sorted(scores, key=lambda start: (-scores[start], start)):
        if all(abs(start - p) >= width for p in picked):
            picked.append(start)
            if len(picked) == shown_max:
                break
    return picked


def _votes(text: str, keys: dict[str, list[int]], check: Callable[[], None] | None) -> dict[int, int]:
    """For each alignment of the needle's lines with the file's (needle line k at file line i votes for
    i - k), how many lines agree ignoring whitespace."""
    votes: dict[int, int] = {}
    left = MAX_VOTES
    for i, line in enumerate(_lines_lazily(text)):
        if check is not None and not i % CHECK_EVERY:
            check()
        ks = keys.get(line.strip())
        if ks:
            left -= len(ks)
            if left < 0:
                break
            for k in ks:
                votes[i - k] = votes.get(i - k, 0) + 1
    return votes


def _fuzzy(text: str, probes: dict[str, list[int]], check: Callable[[], None] | None) -> dict[int, float]:
    """Alignments of the needle with the file, scored: each file line close to a probe (a needle line; difflib
    ratio of at least 0.6) adds its similarity to the alignment that puts that probe on it (file line i, needle
    line k: alignment i - k). All probes share one budget of work (MAX_FUZZY_WORK, MAX_FUZZY_CHECKS); past it,
    the scores are those of the lines seen."""
    matchers = []
    for probe, at in probes.items():
        matcher = difflib.SequenceMatcher(autojunk=False)
        matcher.set_seq2(probe)
        matchers.append((matcher, len(probe), at))
    scored: dict[int, float] = {}
    left = MAX_FUZZY_WORK
    pairs = MAX_FUZZY_CHECKS
    for i, line in enumerate(_lines_lazily(text)):
        if check is not None and not i % CHECK_EVERY:
            check()
        cand = line.strip()
        if not cand:
            continue
        pairs -= len(matchers)
        if pairs < 0:
            return scored
        for matcher, size, at in matchers:
            matcher.set_seq1(cand)
            if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
                left -= len(cand) * size
                if left < 0:
                    return scored
                ratio = matcher.ratio()
                if ratio >= 0.6:
                    for k in at:
                        scored[i - k] = scored.get(i - k, 0.0) + ratio
    return scored


def _pct(value: float) -> str:
    return f"{min(value, 1.0) * 100:.0f}%"


def _lines_lazily(text: str, block: int = 1 << 20) -> Iterator[str]:
    """The lines of `text.split("\\n")`, split a block of about `block` characters at a time."""
    start = 0
    while len(text) - start > block:
        cut = text.rfind("\n", start, start + block)
        if cut < 0:
            cut = text.find("\n", start + block)
            if cut < 0:
                break
        yield from text[start:cut].split("\n")
        start = cut + 1
    yield from text[start:].split("\n")


def _lines_in(text: str, ranges: list[tuple[int, int]]) -> dict[int, str]:
    """The lines of `text` with an index in one of the half-open `ranges`."""
    needed = {n for lo, hi in ranges for n in range(lo, hi)}
    last = max(needed, default=-1)
    found: dict[int, str] = {}
    for n, line in enumerate(_lines_lazily(text)):
        if n > last:
            break
        if n in needed:
            found[n] = line
    return found


def _numbered(lines: dict[int, str], lo: int, hi: int) -> str:
    return "\n".join(f"{n + 1:>6}| {_short(lines[n].rstrip(chr(13)), 200)}" for n in range(lo, hi))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
