"""Every answer fits one result budget (`--max-result-chars`, default 80,000 characters), and a cut answer
ends with the true total and the exact way to get the rest. Real trees: 30,000 files, a 6 MB file of long
lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import types

from support import call_tool, linked_files, text_of

pytestmark = pytest.mark.anyio
BUDGET = 80_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("budget")
    for d in range(100):
        (root / "pkg" / f"module_{d:03d}").mkdir(parents=True)
    files = (root / "pkg" / f"module_{d:03d}" / f"file_{f:03d}.py" for d in range(100) for f in range(300))
    linked_files(files, "x = 1\n")
    return root


async def test_glob_over_30000_files_fits_and_says_how_to_narrow(big_tree: Path) -> None:
    result = await call_tool(big_tree, "glob", {"pattern": "**/*.py"})
    text = text_of(result)
    assert len(text) <= BUDGET
    assert text.startswith('Found 30000 file(s) matching "**/*.py"')
    listed = [line for line in text.splitlines() if line.startswith(str(big_tree))]
    assert f"{30000 - len(listed)} more not shown (this answer lists {len(listed)} of 30000)" in text
    assert "narrower pattern" in text


async def test_read_many_files_over_a_large_tree_fits(big_tree: Path) -> None:
    text = text_of(await call_tool(big_tree, "read_many_files", {"paths": ["pkg/**/*.py"]}))
    assert len(text) <= BUDGET and "file limit reached (500 files per call)" in text and "29450 more" in text


async def test_a_6mb_file_of_long_lines_fits_and_gives_the_next_offset(tmp_path: Path) -> None:
    line = "var a=" + "b" * 5994 + ";"
    (tmp_path / "app.min.js").write_text("\n".join([line] * 1000) + "\n")
    text = text_of(await call_tool(tmp_path, "read_file", {"absolute_path": str(tmp_path / "app.min.js")}))
    assert len(text) <= BUDGET
    shown = re.search(r"Showing lines 1-(\d+) of 1000 total lines", text)
    assert shown and int(shown.group(1)) >= 30
    assert f"use offset: {shown.group(1)}." in text and "--max-result-chars" in text
    nxt = text_of(await call_tool(
        tmp_path, "read_file", {"absolute_path": str(tmp_path / "app.min.js"), "offset": int(shown.group(1))}
    ))
    assert f"Showing lines {int(shown.group(1)) + 1}-" in nxt


async def test_the_budget_is_an_option(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("y" * 1500 + "\n" + "z\n" * 3000)
    small = text_of(await call_tool(tmp_path, "read_file", {"absolute_path": str(tmp_path / "f.txt")},
                                    "--max-result-chars", "3000"))
    assert len(small) <= 3000 and "use offset:" in small


def test_the_backstop_cuts_any_text_and_says_so() -> None:
    from coretools.tools.budget import fit
    from coretools.tools.base import ToolResult

    blocks = [types.TextContent(type="text", text="a" * 5000), types.TextContent(type="text", text="b" * 5000)]
    out = fit(ToolResult(blocks), 6000, "ask for less")
    texts = [b.text for b in out.content]
    assert sum(map(len, texts)) <= 6000 and texts[0] == "a" * 5000
    assert "4,000 of its 10,000 characters are not shown" in texts[1] and texts[1].endswith("ask for less.]")
    assert fit(ToolResult(blocks), 0, "x").content == blocks


@pytest.mark.parametrize("name", ["search_file_content", "grep_search"])
async def test_a_cut_says_how_to_narrow_the_tool_whichever_name_called_it(tmp_path: Path, name: str) -> None:
    (tmp_path / "many.txt").write_text("".join(f"needle {n} " + "x" * 60 + "\n" for n in range(200)))
    flags = ("--schema-dialect", "latest", "--max-result-chars", "600")  # grep_search is the published name
    result = await call_tool(tmp_path, name, {"pattern": "needle"}, *flags)
    text = text_of(result)
    assert len(text) <= 600 and "result cut" in text
    assert text.endswith("To see the rest, search a smaller directory (`path`) or fewer files (`include`).]")


def test_a_long_error_message_keeps_its_head_and_tail() -> None:
    from coretools.errors import ToolError
    from coretools.tools.base import MAX_ERROR_CHARS, ToolResult

    message = "head " + "x" * 3 * MAX_ERROR_CHARS + " tail"
    text = ToolResult.from_error(ToolError(message)).text_content
    assert len(text) < MAX_ERROR_CHARS + 100 and text.startswith("head ") and text.endswith(" tail")
    assert f"[{len(message) - MAX_ERROR_CHARS} characters of this error message omitted]" in text
