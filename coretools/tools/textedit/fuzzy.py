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
for windows whose length bound passes, each abandoned as soon as it exceeds its budget. A window only matters
if it can come within MARGIN of the best seen so far, so the budget of later windows shrinks as better ones
are found; the few windows that share the most whole lines with the block are therefore measured first. The
distances of one search together may cost at most MAX_DISTANCE_WORK (see `distance_cost`,
about half a second); a search that would need more is given up, and nothing is edited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

ACCEPT = 0.9
MARGIN = 0.05
FLOOR = ACCEPT - MARGIN
MIN_LINES = 3
MIN_CHARS = 40
MAX_CELLS = 6_000_000
MAX_DISTANCE_WORK = 400_000
FIRST_TRIED = 8
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


def similarity(a: list[str], b: list[str]) -> float:
    """The line-aligned similarity of two blocks of stripped lines (see the module docstring); blocks of
    different lengths are compared over the shorter, the missing lines counted as wholly different."""
    dist = sum(levenshtein(x, y) for x, y in zip(a, b)) + sum(len(x) for x in (a[len(b):] or b[len(a):]))
    return 1 - dist / max(sum(map(len, a)), sum(map(len, b)), 1)


def distance_cost(a: str, b: str) -> int:
    """What `levenshtein(a, b)` costs, in units of about half a microsecond: a step per character of the
    longer string, each step a few operations on integers as wide as the shorter one."""
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return len(longer) * (1 + len(shorter) // 2048)


class _Budget:
    """The distance work left to one search."""

    def __init__(self, work: int) -> None:
        self.left = work

    def spend(self, cost: int) -> bool:
        """Take `cost` from what is left; False (nothing taken) when it is not there."""
        if cost > self.left:
            return False
        self.left -= cost
        return True


class _OutOfWork(Exception):
    pass


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
    budget, floor = _Budget(MAX_DISTANCE_WORK), FLOOR
    for n, start in enumerate(_order(keys, want, len(lines) - m + 1)):
        if check is not None and not n % CHECK_EVERY:
            check()
        try:
            sim = _similarity(keys, lens, start, want, want_len, total, memo, floor, budget)
        except _OutOfWork:
            return Verdict(None, None, "telling the closest place apart would take too long (old_string and the "
                                       "file's lines are too long or too many)")
        if sim is not None:
            scored.append(Scored(start, sim))
            floor = max(floor, sim - MARGIN)
    scored = [s for s in scored if s.similarity >= floor]
    scored.sort(key=lambda s: (-s.similarity, s.start))
    return Verdict(scored[0] if scored else None, scored[1] if len(scored) > 1 else None)


def _order(keys: list[str], want: list[str], windows: int) -> Iterator[int]:
    """Every window start once: first the FIRST_TRIED windows with the most lines equal to the block's line
    at the same place (ties by position), then the rest in file order."""
    where: dict[str, list[int]] = {}
    for k, key in enumerate(want):
        if key:
            where.setdefault(key, []).append(k)
    votes: Counter[int] = Counter()
    for i, key in enumerate(keys):
        for k in where.get(key, ())[:FIRST_TRIED]:
            if 0 <= i - k < windows:
                votes[i - k] += 1
    first = sorted(votes, key=lambda s: (-votes[s], s))[:FIRST_TRIED]
    yield from first
    tried = set(first)
    yield from (s for s in range(windows) if s not in tried)


def _similarity(keys: list[str], lens: list[int], start: int, want: list[str], want_len: list[int], total: int,
                memo: dict[tuple[int, str], int], floor: float, work: _Budget) -> float | None:
    """The window's similarity if it is at least `floor`, else None (decided as cheaply as possible). Raises
    `_OutOfWork` when a distance it needs is beyond the work left."""
    m = len(want)
    window_total = sum(lens[start : start + m])
    budget = int((1 - floor) * max(total, window_total))
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
                if not work.spend(distance_cost(key, want[k])):
                    raise _OutOfWork
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
