"""The anchored search for a run of tokens finds exactly what one linear pass over every token finds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coretools.tools.textedit import nearmiss

PIECES = ["a", "b", " ", "\n", ".", "ab", "é", "  ", "(", "a.b", "\u00a0", "_", "²", "\x1c"]
WANTED = ["a", "b", ".", "ab", "(", "é"]


def linear(text: str, want: list[str]) -> list[list[tuple[int, int]]]:
    real = nearmiss.MAX_ANCHORED_TOKENS
    nearmiss.MAX_ANCHORED_TOKENS = -1  # straight to the linear pass
    try:
        return list(nearmiss.token_runs(text, want))
    finally:
        nearmiss.MAX_ANCHORED_TOKENS = real


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=80), st.lists(st.sampled_from(WANTED), min_size=1, max_size=4),
       st.integers(0, 8))
def test_anchored_runs_are_the_linear_ones(pieces: list[str], want: list[str], budget: int) -> None:
    text = "".join(pieces)
    expected = linear(text, want)
    assert list(nearmiss.token_runs(text, want)) == expected
    real = nearmiss.MAX_ANCHORED_TOKENS
    nearmiss.MAX_ANCHORED_TOKENS = budget  # running out part way: the rest from where the last run ended
    try:
        assert list(nearmiss.token_runs(text, want)) == expected
    finally:
        nearmiss.MAX_ANCHORED_TOKENS = real


@pytest.mark.parametrize("text, want, spans", [
    ("x = f( a ,b )\n", ["f", "(", "a", ",", "b", ")"], [[(4, 5), (5, 6), (7, 8), (9, 10), (10, 11), (12, 13)]]),
    ("ab a b", ["a", "b"], [[(3, 4), (5, 6)]]),  # not inside the word "ab"
    ("a a a a", ["a", "a"], [[(0, 1), (2, 3)], [(4, 5), (6, 7)]]),  # non-overlapping, left to right
])
def test_token_runs_examples(text: str, want: list[str], spans: list) -> None:
    assert list(nearmiss.token_runs(text, want)) == spans
