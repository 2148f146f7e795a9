"""Matches on very long lines (minified files): excerpts of at most about 500 characters centred on each
match instead of the line's start, the cuts marked with their length, a bounded number of excerpts per
line, whole characters only, and a result that stays within its size even for a 6 MB minified file."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from coretools.tools.search.results import EXCERPT_BYTES, MAX_EXCERPTS, excerpts, show_line
from tests.conftest import call_tool, text_of
from tests.readside import write_files

pytestmark = pytest.mark.anyio

MARK = re.compile(r"…\[([\d,]+) chars(?:; (\d+) more match(?:es)? on this line)?\]…")


@pytest.fixture(params=["ripgrep", "python"])
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


async def search(root, engine: str, args: dict):
    result = await call_tool(root, "search_file_content", args, "--search-engine", engine)
    assert not result.is_error, text_of(result)
    return result


def row(text: str, number: int) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"L{number}: "))[len(f"L{number}: ") :]


def pieces(shown: str) -> tuple[list[str], list[int]]:
    """The excerpts of a shown line and the lengths its marks give."""
    return [p for p in MARK.split(shown)[::3] if p], [int(m.group(1).replace(",", "")) for m in MARK.finditer(shown)]


def minified(size: int, hits: dict[int, str], seed: int = 1) -> str:
    alphabet = b"abcdefghijklmnopqrstuvwxyz(){};=,."
    table = bytes(alphabet[i % len(alphabet)] for i in range(256))
    chars = bytearray(random.Random(seed).randbytes(size).translate(table))
    for at, word in hits.items():
        chars[at : at + len(word)] = word.encode()
    return chars[:size].decode()


async def test_matches_at_start_middle_and_end_of_a_50000_char_line(root: Path, engine: str) -> None:
    line = minified(50_000, {3: "NEEDLE", 25_000: "NEEDLE", 49_990: "NEEDLE"})
    write_files(root, {"app.min.js": "var x;\n" + line + "\n"})
    shown = row(text_of(await search(root, engine, {"pattern": "needle"})), 2)
    parts, omitted = pieces(shown)
    assert len(parts) == 3 and all("NEEDLE" in p and len(p) <= EXCERPT_BYTES for p in parts)
    assert parts[0] == line[:EXCERPT_BYTES]  # the first match is near the start: the excerpt starts there
    assert parts[2] == line[-EXCERPT_BYTES:]
    middle = line.index(parts[1])
    assert abs((middle + len(parts[1]) // 2) - (25_000 + 3)) <= 3  # centred on the match
    assert sum(map(len, parts)) + sum(omitted) == len(line)  # the marks count exactly what is left out
    assert len(shown) < 1_600


async def test_many_matches_on_one_line_are_bounded_and_counted(root: Path, engine: str) -> None:
    line = minified(100_000, {i: "HIT" for i in range(500, 100_000, 1_000)})
    write_files(root, {"bundle.js": line + "\n"})
    shown = row(text_of(await search(root, engine, {"pattern": "HIT", "case_sensitive": True})), 1)
    parts, _ = pieces(shown)
    assert len(parts) == MAX_EXCERPTS
    assert shown.endswith("; 96 more matches on this line]…")
    close = minified(20_000, {10_000: "HIT", 10_050: "HIT", 10_100: "HIT", 15_000: "HIT"})
    write_files(root, {"bundle.js": close + "\n"})
    shown = row(text_of(await search(root, engine, {"pattern": "HIT", "case_sensitive": True})), 1)
    parts, _ = pieces(shown)
    assert len(parts) == 2 and parts[0].count("HIT") == 3  # one excerpt shows the three close ones


async def test_short_lines_are_unchanged_and_line_numbers_are_one_based(root: Path, engine: str) -> None:
    body = "short needle\n" + "x" * 1_990 + " needle\n" + minified(3_000, {2_000: "needle"}) + "\n"
    write_files(root, {"a.txt": body})
    text = text_of(await search(root, engine, {"pattern": "needle"}))
    assert row(text, 1) == "short needle"
    assert row(text, 2) == "x" * 1_990 + " needle"  # up to 2,000 characters: whole
    assert row(text, 3).startswith("…[1,753 chars]…")


@pytest.mark.parametrize("filler", ["é", "日", "😀", "e\u0301"])
async def test_excerpts_never_split_a_character(root: Path, engine: str, filler: str) -> None:
    line = filler * (20_000 // len(filler)) + "NEEDLE" + filler * (20_000 // len(filler))
    write_files(root, {"u.txt": line + "\n"})
    shown = row(text_of(await search(root, engine, {"pattern": "needle"})), 1)
    parts, omitted = pieces(shown)
    assert len(parts) == 1 and "NEEDLE" in parts[0]
    assert "\ufffd" not in shown and not any(0xD800 <= ord(c) <= 0xDFFF for c in shown)
    assert parts[0] in line and len(parts[0]) <= EXCERPT_BYTES
    assert sum(omitted) + len(parts[0]) == len(line)


async def test_a_match_longer_than_an_excerpt(root: Path, engine: str) -> None:
    line = "b" * 10_000 + "a" * 2_000 + "b" * 10_000
    write_files(root, {"a.txt": line + "\n"})
    shown = row(text_of(await search(root, engine, {"pattern": "a+"})), 1)
    assert shown == "…[10,000 chars]…" + "a" * EXCERPT_BYTES + "…[11,500 chars]…"


async def test_long_context_lines_show_their_start(root: Path, engine: str) -> None:
    write_files(root, {"a.txt": "c" * 10_000 + "\nneedle\n"})
    text = text_of(await search(root, engine, {"pattern": "needle", "before": 1}))
    assert "L1- " + "c" * EXCERPT_BYTES + "…[9,500 chars]…" in text.splitlines()


@pytest.mark.parametrize("shape", ["many long lines", "one 6 MB line"])
async def test_a_6mb_minified_file_stays_within_the_result_size(root: Path, engine: str, shape: str) -> None:
    if shape == "one 6 MB line":
        line = minified(6_000_000, {10: "function", 3_000_000: "function", 5_999_000: "function"})
        write_files(root, {"big.min.js": line + "\n"})
    else:
        lines = [minified(50_000, {i: "function" for i in range(100, 50_000, 997)}, seed=n) for n in range(120)]
        write_files(root, {"big.min.js": "\n".join(lines) + "\n"})
    result = await search(root, engine, {"pattern": "function"})
    text = text_of(result)
    assert len(text) <= 80_000  # the default result budget
    if shape == "one 6 MB line":
        parts, omitted = pieces(row(text, 1))
        assert len(parts) == 3 and all("function" in p for p in parts)
        assert sum(omitted) + sum(map(len, parts)) == 6_000_000
    else:
        assert result.structured["total_matches"] == 120 and result.structured["truncated"]
        assert "about 75 KB of text" in text.splitlines()[0]


def test_excerpt_windows_snap_to_characters() -> None:
    data = ("é" * 1000 + "X" + "é" * 1000).encode()
    at = data.index(b"X")
    shown = excerpts(data, [(at, at + 1)])
    assert "\ufffd" not in shown and "X" in shown
    assert show_line(b"abc  \r\n") == "abc"
    invalid = b"\x80" * 5_000 + b"X" + b"\x80" * 5_000
    shown = excerpts(invalid, [(5_000, 5_001)])
    assert "X" in shown and len(pieces(shown)[0][0]) <= EXCERPT_BYTES
