"""The guarded fuzzy match, the last near-miss strategy: the one window of the file's lines that is clearly
closest to a block of `old_string` lines, or nothing.

Similarity of a window of m file lines to the m lines of the block is line-aligned: 1 - D / max(Lo, Lw), where
D is the sum over aligned lines of the Levenshtein distance of the lines stripped of surrounding whitespace,
and Lo, Lw are the summed lengths of those stripped lines. Aligning lines (rather than comparing the blocks as
one string) keeps an edit from borrowing text across lines, and makes the usual window cheap: equal lines
cost nothing, and a window whose line lengths alone differ by too much is skipped before any distance is
computed.

Thresholds, tuned on the near-miss corpus (`benchmarks/nearmiss_corpus.py`): a window is accepted at
similarity >= ACCEPT (0.9) only if no other window is within MARGIN (0.05) of it; the block must have at least
MIN_LINES (3) non-blank lines and MIN_CHARS (40) non-blank characters. On the corpus every one-character typo
in a block of 3+ lines scores >= 0.97, while the nearest other window of real code (runner-up) stays below
0.8 except in the ambiguous negatives, which the margin refuses; the too-distant negatives (a quarter of
the block rewritten) score below 0.85. Windows under FLOOR = ACCEPT - MARGIN are never measured exactly:
they can neither be accepted nor threaten the margin.

Work is bounded: at most MAX_CELLS (file lines x block lines) length comparisons, and an exact distance only
for windows whose length bound passes, each abandoned as soon as it exceeds its budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ACCEPT = 0.9
MARGIN = 0.05
FLOOR = ACCEPT - MARGIN
MIN_LINES = 3
MIN_CHARS = 40
MAX_CELLS = 6_000_000
CHECK_EVERY = 2048


@dataclass(frozen=True)
class Scored:
    start: int  # 0-based index of the window's first line
    similarity: float


@dataclass(frozen=True)
class Verdict:
    """The outcome of a fuzzy search: `best` when one window is clearly closest; else why not."""

    best: Scored | None
    runner_up: Scored | None
    skipped: str = ""  # why the search did not run ("" if it did)


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute), bit-parallel (Myers/Hyyrö): one pass over the longer
    string, each step a few integer operations on a bit vector as long as the shorter one."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if not m:
        return len(a)
    peq: dict[str, int] = {}
    bit = 1
    for ch in b:
        peq[ch] = peq.get(ch, 0) | bit
        bit <<= 1
    mask = (1 << m) - 1
    last = 1 << (m - 1)
    pv, mv, score = mask, 0, m
    for ch in a:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & last:
            score += 1
        elif mh & last:
            score -= 1
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
    return score


def eligible(block: list[str]) -> bool:
    keys = [line.strip() for line in block]
    return sum(1 for k in keys if k) >= MIN_LINES and sum(map(len, keys)) >= MIN_CHARS


def closest(lines: list[str], block: list[str], check: Callable[[], None] | None = None) -> Verdict:
    """The window of `lines` (as many lines as `block`) clearly closest to `block`, if any."""
    m = len(block)
    if len(lines) * m > MAX_CELLS:
        return Verdict(None, None, f"the file has too many lines ({len(lines):,}) for a fuzzy search of "
                                   f"{m} lines")
    want = [line.strip() for line in block]
    want_len = [len(k) for k in want]
    total = sum(want_len)
    keys = [line.strip() for line in lines]
    lens = [len(k) for k in keys]
    memo: dict[tuple[int, str], int] = {}
    scored: list[Scored] = []
    for start in range(len(lines) - m + 1):
        if check is not None and not start % CHECK_EVERY:
            check()
        sim = _similarity(keys, lens, start, want, want_len, total, memo)
        if sim is not None:
            scored.append(Scored(start, sim))
    scored.sort(key=lambda s: (-s.similarity, s.start))
    return Verdict(scored[0] if scored else None, scored[1] if len(scored) > 1 else None)


def _similarity(keys: list[str], lens: list[int], start: int, want: list[str], want_len: list[int], total: int,
                memo: dict[tuple[int, str], int]) -> float | None:
    """The window's similarity if it is at least FLOOR, else None (decided as cheaply as possible)."""
    m = len(want)
    window_total = sum(lens[start : start + m])
    budget = int((1 - FLOOR) * max(total, window_total))
    bound = 0
    for k in range(m):
        bound += abs(lens[start + k] - want_len[k])
        if bound > budget:
            return None
    dist = 0
    for k in range(m):
        key = keys[start + k]
        if key != want[k]:
            cached = memo.get((k, key))
            if cached is None:
                cached = memo[(k, key)] = levenshtein(key, want[k])
            dist += cached
            if dist > budget:
                return None
    return 1 - dist / max(total, window_total, 1)


def decide(verdict: Verdict) -> Scored | None:
    """The accepted window: similar enough, and clear of the runner-up by the margin."""
    best, second = verdict.best, verdict.runner_up
    if best is None or best.similarity < ACCEPT:
        return None
    if second is not None and best.similarity - second.similarity < MARGIN:
        return None
    return best
