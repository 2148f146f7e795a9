"""glob's totals are true and a walk that stopped says where and why: a directory of more files than the walk
holds is counted to the end (only the files it may show are kept), and a tree deeper than the walk goes
names the first directory it did not enter, with rg and with the Python walk alike."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from coretools.sandbox import ripgrep, walker
from coretools.sandbox.paths import WalkBounds
from support import call_tool, text_of

pytestmark = pytest.mark.anyio

HELD = 300  # the walk's bound on the files it holds, lowered for the test (200,000 by default)


@pytest.fixture(params=["rg", "walk"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(ripgrep, "find_rg", lambda: None)
    return request.param


def _files(directory: Path, count: int, *, old: bool) -> None:
    directory.mkdir(parents=True)
    for n in range(count):
        path = directory / f"f{(n * 7919) % count:05d}.txt"
        path.write_text("x")
        if old:
            os.utime(path, (1_000_000 + n, 1_000_000 + n))
        else:
            os.utime(path, ns=(0, os.stat(path).st_mtime_ns + n))


@pytest.fixture(scope="module", params=[True, False], ids=["old", "recent"])
def crowded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root of 1,240 files, older than a day or recent, made once for every engine and pattern (glob
    only reads it)."""
    root = tmp_path_factory.mktemp("crowded") / "root"
    _files(root / "wide", 1200, old=request.param)
    _files(root / "other" / "deeper", 40, old=request.param)
    return root


@pytest.mark.parametrize("pattern", ["wide/*", "**/*.txt", "wide/f01*"])
async def test_glob_counts_every_match_and_shows_the_first(
    crowded: Path, engine: str, pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,200 matches, 4 times what the walk may hold: the total is 1,200 (main said 300), and the files shown
    are those an unbounded walk shows first (newest first, or by path for files older than a day)."""
    root = crowded
    whole = await call_tool(root, "glob", {"pattern": pattern})
    monkeypatch.setattr(walker, "WalkBounds", functools.partial(WalkBounds, max_entries=HELD))
    bounded = await call_tool(root, "glob", {"pattern": pattern})
    expected = {"wide/*": 1200, "**/*.txt": 1240, "wide/f01*": 200}[pattern]
    assert f"Found {expected} file(s) matching" in text_of(bounded), text_of(bounded)[:300]
    assert bounded.structured["total"] == expected
    assert text_of(bounded) == text_of(whole)
    assert "bounded" not in text_of(bounded)


@pytest.fixture
def chains(root: Path):
    """Removes the chain `_chain` made below `root`, from the bottom up through descriptors (shutil.rmtree
    recurses per level, and a path that long cannot be named)."""
    yield
    fd, depth = os.open(root, os.O_RDONLY | os.O_DIRECTORY), 0
    try:
        while True:
            try:
                below = os.open("d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                break
            os.close(fd)
            fd, depth = below, depth + 1
        for _ in range(depth):
            for name in os.listdir(fd):
                os.unlink(name, dir_fd=fd)
            above = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = above
            os.rmdir("d", dir_fd=fd)
    finally:
        os.close(fd)


def _chain(top: Path, depth: int) -> Path:
    """`top/d/d/.../d` (`depth` directories), made through descriptors: the path is longer than PATH_MAX."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("leaf.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return top


async def test_a_glob_cut_by_depth_says_where(root: Path, engine: str, chains: None) -> None:
    """A chain of 300 directories with `leaf.txt` at the bottom: not found (the walk goes 64 levels down), and
    the answer says so and where, instead of a bare "No files found" (the issue's tree was 3,000 deep: as deep
    for a walk that stops at 64, and ten times slower to make and remove)."""
    _chain(root, 300)
    result = await call_tool(root, "glob", {"pattern": "**/leaf.txt"})
    text = text_of(result)
    assert not result.is_error, text
    assert text.startswith('No files found matching pattern "**/leaf.txt"'), text[:300]
    where = "/".join(["d"] * 64)
    assert f"(The walk was bounded: did not descend below depth 64 (first at {where[:60]}..." in text, text[:500]
    assert "a file there may match" in text


async def test_a_glob_cut_by_depth_with_matches_says_where(root: Path, engine: str, chains: None) -> None:
    """A file in every directory of a chain of 70: the matches on the way down are found, and the note says
    where the walk stopped (rg is asked for one level more than the walk goes, and what it lists there is
    where it was cut)."""
    _chain(root, 70)
    level = root
    for _ in range(70):
        level = level / "d"
        (level / "notes.md").write_text("x")
    result = await call_tool(root, "glob", {"pattern": "**/*.md"})
    text = text_of(result)
    assert "Found 63 file(s)" in text, text[:300]
    assert f"(The walk was bounded: did not descend below depth 64 (first at {'d/' * 30}" in text, text[-500:]


async def test_a_shallow_tree_is_not_said_to_be_cut(root: Path, engine: str, chains: None) -> None:
    _chain(root, 63)
    result = await call_tool(root, "glob", {"pattern": "**/nothing.txt"})
    assert "bounded" not in text_of(result), text_of(result)
    result = await call_tool(root, "glob", {"pattern": "**/leaf.txt"})
    assert "Found 1 file(s)" in text_of(result) and "bounded" not in text_of(result), text_of(result)[-300:]


def test_a_paged_walk_keeps_only_what_a_page_can_take(root: Path) -> None:
    """walk_after told the most steps a page takes (`max_steps`) keeps no more of a directory than that, and
    gives the very steps of an unbounded walk, page after page, in a directory of 10 times as many files
    and subdirectories."""
    import itertools
    from contextlib import closing

    from coretools.sandbox.gateway import Workspace
    from coretools.sandbox.ignore import IgnoreOptions
    from coretools.workspace.resource_walk import walk_after

    for n in range(300):
        (root / f"f{(n * 7) % 300:03d}.txt").write_text("x")
    for n in range(40):
        (root / f"d{n:02d}").mkdir()
        (root / f"d{n:02d}" / "inner.txt").write_text("y")
    ws = Workspace([str(root)])
    try:
        with closing(walk_after(ws, 0, IgnoreOptions())) as walk:
            whole = list(walk)
        paged, after = [], None
        while True:
            with closing(walk_after(ws, 0, IgnoreOptions(), after, max_steps=30)) as walk:
                page = list(itertools.islice(walk, 30))
            if not page:
                break
            paged += page
            after = page[-1][1]
    finally:
        ws.close()
    assert len(whole) == 300 + 40 * 2 and paged == whole
