"""A search cannot be steered into exhausting memory through ripgrep.

With more than one thread, rg keeps each file's whole output in memory until the file is done, so one file
with a match on every line costs memory in proportion to its output (rg's JSON is a few times the file).
A file the model was told to search for is enough. Each case runs one real search in a fresh Python
process and reads the peak RSS of the processes it started and reaped (rg) from `RUSAGE_CHILDREN`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coretools.sandbox import ripgrep

pytestmark = pytest.mark.skipif(ripgrep.find_rg() is None, reason="no ripgrep binary")

MIB = 1024 * 1024
RG_PEAK_BOUND = 256 * MIB
LINES = 1_200_000
LINE = b"x" * 40 + b" needle " + b"y" * 51 + b"\n"  # 100 bytes, one match each

# Runs one search through the tool (as the server does) and prints what the tool answered and the peak
# RSS of the children it reaped.
SEARCH = """
import anyio, json, resource, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from tests.support import call_tool, text_of
from pathlib import Path
result = anyio.run(call_tool, Path(sys.argv[2]), "search_file_content", json.loads(sys.argv[3]))
print(json.dumps({"error": result.is_error, "text": text_of(result)[:4000],
                  "children_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def search(root: Path, args: dict) -> dict:
    repo = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", SEARCH, repo, str(root), json.dumps(args)],
        capture_output=True, text=True, timeout=60, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_file_matching_on_every_line_is_searched_within_the_budget(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "logs").mkdir(parents=True)
    with open(root / "logs" / "app.log", "wb") as out:
        for _ in range(LINES // 100_000):
            out.write(LINE * 100_000)
    (root / "notes.txt").write_text("one needle here\n")
    answer = search(root, {"pattern": "needle"})
    assert not answer["error"], answer["text"]
    assert f"Found {LINES + 1} matches" in answer["text"]  # the true total, nothing odd to report
    assert "memory" not in answer["text"]
    assert answer["children_kib"] * 1024 < RG_PEAK_BOUND, f"rg peaked at {answer['children_kib'] >> 10} MiB"


def test_a_search_that_needs_more_than_the_budget_says_so(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("word " * 1000 + "\n")
    answer = search(root, {"pattern": r"\w{1000}"})  # rg's compiled form of this pattern alone needs ~200 MiB
    assert answer["error"]
    assert f"{ripgrep.RG_DATA_LIMIT // MIB} MiB" in answer["text"], answer["text"]
    assert answer["children_kib"] * 1024 < RG_PEAK_BOUND


def test_the_bound_holds_for_a_single_file_target(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    big = root / "app.log"
    big.write_bytes(LINE * (LINES // 4))
    answer = search(root, {"pattern": "needle", "dir_path": str(big)})
    assert not answer["error"], answer["text"]
    assert f"Found {LINES // 4} matches" in answer["text"]
    # rg maps a single named file: its pages are the file's (page cache), counted in RSS but not private
    assert answer["children_kib"] * 1024 < RG_PEAK_BOUND + os.path.getsize(big)
