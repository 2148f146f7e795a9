"""Case-insensitive character sets exactly as Python's `re` pairs characters under IGNORECASE.

The patterns' regexes run on RE2, whose case folding (Unicode simple folding) differs from Python's for a
few characters: Python also pairs `i` with the dotless `ı` and `İ`, `s` with `ſ`, `k` with the Kelvin sign,
and a handful more. Glob patterns ignore case the way Python's `re` does, so a case-insensitive literal or
class is written out as the explicit set of characters Python would accept, and RE2 runs case-sensitively.

Python's rule: a character x matches the pattern character c when lower(x) is lower(c) or one of its extra
equivalents (`re._casefix`), with `lower` the simple lowercase mapping of `_sre`.
"""

from __future__ import annotations

import bisect
import functools

import _sre

try:  # Python 3.11+
    from re._casefix import _EXTRA_CASES as _EXTRA
except ImportError:  # pragma: no cover - Python 3.10
    from sre_compile import _ignorecase_fixes as _EXTRA  # type: ignore[no-redef]

_LOWER = _sre.unicode_tolower
_SMALL_SET = 64  # a set of at most this many characters is folded character by character


@functools.lru_cache(maxsize=1)
def _inverse() -> dict[int, tuple[int, ...]]:
    """lower -> every cased character with that lowercase (computed once, on first use: ~30 ms)."""
    table: dict[int, list[int]] = {}
    for code in range(0x110000):
        if _sre.unicode_iscased(code):
            table.setdefault(_LOWER(code), []).append(code)
    return {low: tuple(chars) for low, chars in table.items()}


@functools.lru_cache(maxsize=4096)
def equivalents(code: int) -> tuple[int, ...]:
    """Every character Python's IGNORECASE matching pairs with the character `code` (itself included),
    sorted."""
    if not _sre.unicode_iscased(code) and code not in _EXTRA:
        return (code,)
    low = _LOWER(code)
    out = {code}
    for target in (low, *_EXTRA.get(low, ())):
        if _LOWER(target) == target:
            out.add(target)
        out.update(_inverse().get(target, ()))
    return tuple(sorted(out))


def fold_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The (sorted, merged) ranges of every character whose case-insensitive match is in `ranges`."""
    size = sum(hi - lo + 1 for lo, hi in ranges)
    extra: set[int] = set()
    if size <= _SMALL_SET:
        for lo, hi in ranges:
            for code in range(lo, hi + 1):
                extra.update(equivalents(code))
    else:
        starts = [lo for lo, _ in ranges]

        def inside(code: int) -> bool:
            at = bisect.bisect_right(starts, code) - 1
            return at >= 0 and ranges[at][0] <= code <= ranges[at][1]

        for chars in _inverse().values():
            for code in chars:
                if inside(code):
                    for member in chars:
                        extra.update(equivalents(member))
                    break
        for code in _EXTRA:
            if inside(code):
                extra.update(equivalents(code))
    return merge(list(ranges) + [(code, code) for code in extra])


def merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, non-overlapping, non-adjacent ranges covering the same characters."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)
