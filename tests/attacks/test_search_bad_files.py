"""One bad file in the tree does not break every search: what rg cannot take within its bounds is left out
and named, and the rest is answered.

rg runs under a cap on its private memory (`ripgrep.RG_DATA_LIMIT`). A line longer than about half of it
(minified or generated data, in any script), or an in-tree `.gitignore` of thousands of glob lines (rg
compiles them into one program), used to make every search of the workspace fail with "ripgrep needed
more than 128 MiB", even for `hello`; a tree nested deeper than a path can name was cut silently. Each
case here makes one workspace, searches it for `hello` through a real stdio server with the real rg, and
checks that the good file is found and the answer says what was left out and why.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from coretools.sandbox import ripgrep
from coretools.sandbox.ignore import MAX_IGNORE_FILE_BYTES
from support import stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(ripgrep.find_rg() is None, reason="no ripgrep binary")]

LIMIT = ripgrep.RG_DATA_LIMIT
GOOD = "hello from the good file\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def search(root: Path, args: dict, *extra: str, tool: str = "search_file_content") -> tuple[bool, str]:
    """One search through a fresh server, whose peak RSS may grow by `MEMORY_BOUND` at most during it."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    async with Client(stdio_client(stdio_params([root], *extra), errlog=sys.stderr), mode="legacy") as client:
        warm = await client.call_tool("read_file", {"absolute_path": str(root / "src" / "good.txt")})
        assert not warm.is_error, text_of(warm)
        pid = _server_pid(root)
        idle = _peak(pid)
        result = await client.call_tool(tool, args)
        grown = _peak(pid) - idle
        assert grown < MEMORY_BOUND, f"the server's peak RSS grew by {grown >> 20} MiB"
        return result.is_error, text_of(result)


MEMORY_BOUND = 300 << 20  # the README's bound on one call


def _peak(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.partition("VmHWM:")[2].split()[0]) << 10


def _server_pid(root: Path) -> int:
    """The server this test process started for `root` (its child, with the root on its command line)."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if parent == os.getpid() and b"coretools" in argv and os.fsencode(root) in argv:
            return int(entry)
    raise AssertionError("the server subprocess was not found")


def good_tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "good.txt").write_text(GOOD)
    return root


async def test_a_line_longer_than_the_memory_bound_is_searched_in_place(tmp_path: Path) -> None:
    """A line of tens of MB (CJK text, 64 MiB): rg reads it through a memory map, so it is searched, not
    skipped (the match at its end is found)."""
    root = good_tree(tmp_path)
    (root / "cjk.txt").write_bytes("\u4e2d".encode() * (LIMIT // 6) + b" hello\n")
    is_error, text = await search(root, {"pattern": "hello"})
    assert not is_error, text[:2000]
    assert text.startswith('Found 2 matches in 2 files for pattern "hello"'), text[:2000]
    assert "File: src/good.txt\nL1: hello from the good file" in text
    assert "File: cjk.txt" in text
    assert "Note:" not in text.partition("\n")[0]  # nothing was left out


async def test_a_long_line_rg_must_transcode_is_skipped_and_named(tmp_path: Path) -> None:
    """A UTF-16 file (byte-order mark) is transcoded into rg's buffer, memory map or not: the one line
    needs more than the bound, so that file alone is left out, and the answer names it."""
    root = good_tree(tmp_path)
    for n in range(3):
        (root / "src" / f"other{n}.txt").write_text(f"hello {n}\n")
    line = "\u4e2d" * (LIMIT // 4) + "\nhello\n"
    (root / "src" / "wide.txt").write_bytes(b"\xff\xfe" + line.encode("utf-16-le"))
    is_error, text = await search(root, {"pattern": "hello"})
    assert not is_error, text[:2000]
    head = text.partition("\n")[0]
    assert head.startswith('Found 4 matches in 4 files for pattern "hello"'), head
    assert "File: src/good.txt\nL1: hello from the good file" in text
    assert f"src/wide.txt was not searched: ripgrep needed more than {LIMIT >> 20} MiB for it" in head, head


async def test_a_gitignore_too_large_to_apply_is_named_and_the_rest_searched(tmp_path: Path) -> None:
    """200,000 glob lines: more than an ignore file may have, so not applied (and said), where rg would have
    needed gigabytes to compile them; the search of the latest dialect's `grep_search` answers alike."""
    root = good_tree(tmp_path)
    (root / "vendor").mkdir()
    (root / "vendor" / ".gitignore").write_text("".join(f"pattern{i}/*.tmp\n" for i in range(200_000)))
    assert (root / "vendor" / ".gitignore").stat().st_size > MAX_IGNORE_FILE_BYTES
    is_error, text = await search(root, {"pattern": "hello"}, "--schema-dialect", "latest", tool="grep_search")
    assert not is_error, text[:2000]
    head = text.partition("\n")[0]
    assert head.startswith('Found 1 match in 1 file for pattern "hello"'), head
    assert "File: src/good.txt\nL1: hello from the good file" in text
    assert "the rules in vendor/.gitignore were not applied (the file has 3.7 MiB; an ignore file may have" in head


async def test_a_geminiignore_too_large_to_apply_is_named(tmp_path: Path) -> None:
    """The root's `.geminiignore` is read by the server (rg is handed its rules), where one larger than an
    ignore file may have is not applied: even when nothing else goes wrong, the answer says so."""
    root = good_tree(tmp_path)
    (root / ".geminiignore").write_text("".join(f"old-{i}.bak\n" for i in range(MAX_IGNORE_FILE_BYTES // 10)))
    is_error, text = await search(root, {"pattern": "hello"})
    assert not is_error, text[:2000]
    head = text.partition("\n")[0]
    assert head.startswith('Found 1 match in 1 file for pattern "hello" in the workspace directory:'), head
    assert f"the rules in {root}/.geminiignore were not applied (the file has " in head, head


async def test_gitignores_rg_cannot_compile_are_still_applied(tmp_path: Path) -> None:
    """Nested `.gitignore`s of glob lines, each within the size an ignore file may have, but together more
    than rg compiles within its bound (it holds those of every directory on the way): the workspace walk
    picks the files instead, with the same rules, so what they hide stays hidden. That walk is bounded in
    depth, and says where it stopped."""
    root = good_tree(tmp_path)
    lib = root / "vendor" / "lib"
    (lib / "pattern7").mkdir(parents=True)
    lines = "".join(f"pattern{i}/*.tmp\n" for i in range(3_000))
    assert len(lines) < MAX_IGNORE_FILE_BYTES
    for place in (root, root / "vendor", lib):
        (place / ".gitignore").write_text(lines)
    (lib / "pattern7" / "hidden.tmp").write_text("hello, but ignored\n")
    (lib / "pattern7" / "shown.txt").write_text("hello, not ignored\n")
    deep = lib.joinpath("deep", *["d"] * 70)  # below the .gitignores: rg stops before it
    deep.mkdir(parents=True)
    (deep / "leaf.txt").write_text("hello from below the bound\n")
    is_error, text = await search(root, {"pattern": "hello"})
    assert not is_error, text[:2000]
    head = text.partition("\n")[0]
    assert head.startswith('Found 2 matches in 2 files for pattern "hello" in the workspace directory:'), head
    assert "File: vendor/lib/pattern7/shown.txt" in text and "hidden.tmp" not in text
    assert f"the walk did not descend below depth 64 (first at vendor/lib/deep{'/d' * 61})" in head, head


async def test_a_tree_too_deep_to_name_says_where_it_was_cut(tmp_path: Path) -> None:
    """A tree nested past the system's path length (3,000 levels of one letter, or as here 30 of 200 letters,
    which rg walks faster): rg names paths whole and cannot go further; the answer says how many paths
    and where, instead of leaving them out silently."""
    root = good_tree(tmp_path)
    levels = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for _ in range(30):  # beneath descriptors: the whole path is longer than the kernel takes
            os.mkdir(NAME, dir_fd=levels[-1])
            levels.append(os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=levels[-1]))
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=levels[-1])
        os.write(leaf, b"hello from the bottom\n")
        os.close(leaf)
        is_error, text = await search(root, {"pattern": "hello"})
    finally:  # taken down beneath descriptors too: a recursive removal would pass Python's recursion limit
        os.unlink("leaf.txt", dir_fd=levels[-1])
        while len(levels) > 1:
            os.close(levels.pop())
            os.rmdir(NAME, dir_fd=levels[-1])
        os.close(levels[0])
    assert not is_error, text[:2000]
    head = text.partition("\n")[0]
    assert head.startswith('Found 1 match in 1 file for pattern "hello"'), head
    assert "File: src/good.txt" in text
    cut = "1 path nested too deep for the system to name (longer than 4096 bytes) was not searched, the first regex-"
    assert cut in head, head  # one directory, nothing below it searched


NAME = "regex-" + "d" * 194  # rg's error names the path: no word in it is taken for a pattern error


async def test_a_search_stops_after_a_few_files_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past a few files that fail alone, the pattern is more likely the cause than the files, and each costs a
    run of its own: the search stops and says so (in process, with the bounds lowered to keep the files small)."""
    from coretools.tools.search import engines as search_engines
    from support import call_tool

    monkeypatch.setattr(ripgrep, "RG_DATA_LIMIT", 32 << 20)
    monkeypatch.setattr(search_engines, "_MAX_SKIPPED_FILES", 2)
    root = good_tree(tmp_path)
    for n in range(3):
        (root / f"wide{n}.txt").write_bytes(b"\xff\xfe" + ("\u4e2d" * (8 << 20) + "\nhello\n").encode("utf-16-le"))
    result = await call_tool(root, "search_file_content", {"pattern": "hello"})
    text = text_of(result)
    assert not result.is_error, text[:2000]
    head = text.partition("\n")[0]
    assert "the search was stopped after ripgrep ran out of memory on 2 files searched one at a time" in head, head
    assert head.count("was not searched: ripgrep needed more than 32 MiB") == 2, head


async def test_the_python_engine_leaves_out_a_file_too_large_to_hold_and_names_it(tmp_path: Path) -> None:
    """The fallback engine holds a file whole, decoded and split into lines, several times its size: a file
    past its bound (here one line, as a 300 MB one would be) is left out and named, the rest searched."""
    from coretools.tools.search.engines import PYTHON_MAX_FILE

    root = good_tree(tmp_path)
    (root / "data.min.js").write_bytes(b"x" * PYTHON_MAX_FILE + b" hello\n")
    is_error, text = await search(root, {"pattern": "hello"}, "--search-engine", "python")
    assert not is_error, text[:2000]
    head = text.partition("\n")[0]
    assert head.startswith('Found 1 match in 1 file for pattern "hello" in the workspace directory:'), head
    assert "File: src/good.txt" in text
    assert f"data.min.js was not searched: it is larger than the {PYTHON_MAX_FILE >> 20} MiB a file may have" in head
