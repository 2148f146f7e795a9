"""Hostile glob, ignore and search patterns over a real stdio server: each is answered (a result or a clear
error) in well under two seconds, and while it runs a second caller's list_directory is answered within a
second. A pattern that makes a backtracking matcher run for exponential (or high-polynomial) time must not
stall the call, nor, through the GIL, every other call of the server."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from support import stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

HOSTILE_GLOB = "+(a|aa)+(a|aa)+(a|aa)+(a|aa)+(a|aa)b"
LONG_NAME = "a" * 40
HOSTILE_CALL_LIMIT = 2.0  # seconds for the hostile call itself
SECOND_CALL_LIMIT = 1.0  # seconds for the other caller's list_directory, answered meanwhile
GIVE_UP = 20.0  # a hostile call still running then has failed; the server is killed


@asynccontextmanager
async def _client(root: Path, errlog: Path, *flags: str):
    from mcp import Client
    from mcp.client.stdio import stdio_client

    with errlog.open("w") as err:
        async with Client(stdio_client(stdio_params([root], *flags, forked=True), errlog=err), mode="legacy") as client:
            yield client


async def _race(root: Path, tmp_path: Path, name: str, args: dict, *flags: str) -> tuple[float, float, str]:
    """(seconds the hostile call took, seconds the second caller's list_directory took, hostile call's
    text). Either still unanswered after GIVE_UP counts as GIVE_UP."""
    from mcp import MCPError

    (root / "other").mkdir(exist_ok=True)
    (root / "other" / "x.txt").write_text("x\n")
    hostile_took = second_took = GIVE_UP
    text = ""
    async with _client(root, tmp_path / "server.log", *flags) as client:
        await client.call_tool("list_directory", {"path": str(root / "other")})  # warm: imports, caches

        async def hostile() -> None:
            nonlocal hostile_took, text
            start = time.monotonic()
            try:
                result = await client.call_tool(name, args, read_timeout_seconds=GIVE_UP)
            except MCPError as exc:  # the SDK's request timeout: unanswered
                text = str(exc)
                return
            hostile_took = time.monotonic() - start
            text = text_of(result)

        async def second() -> None:
            nonlocal second_took
            await anyio.sleep(0.02)  # the hostile call is under way
            start = time.monotonic()
            try:
                await client.call_tool("list_directory", {"path": str(root / "other")}, read_timeout_seconds=GIVE_UP)
            except MCPError:
                return
            second_took = time.monotonic() - start

        async with anyio.create_task_group() as tg:
            tg.start_soon(hostile)
            tg.start_soon(second)
    return hostile_took, second_took, text


def _assert_prompt(hostile_took: float, second_took: float) -> None:
    assert second_took < SECOND_CALL_LIMIT, f"a second caller waited {second_took:.1f}s"
    assert hostile_took < HOSTILE_CALL_LIMIT, f"the hostile call took {hostile_took:.1f}s"


async def test_hostile_glob_pattern(root: Path, tmp_path: Path) -> None:
    (root / LONG_NAME).write_text("x\n")
    took, second, text = await _race(root, tmp_path, "glob", {"pattern": HOSTILE_GLOB})
    _assert_prompt(took, second)
    assert "No files found" in text, text


async def test_hostile_list_directory_ignore(root: Path, tmp_path: Path) -> None:
    (root / LONG_NAME).write_text("x\n")
    took, second, text = await _race(root, tmp_path, "list_directory", {"path": str(root), "ignore": [HOSTILE_GLOB]})
    _assert_prompt(took, second)
    assert f"{LONG_NAME} (2 bytes)" in text, text


@pytest.mark.parametrize("field", ["include", "exclude"])
async def test_hostile_read_many_files_patterns(root: Path, tmp_path: Path, field: str) -> None:
    (root / LONG_NAME).write_text("long\n")
    args = {"paths": [LONG_NAME], field: [HOSTILE_GLOB]}
    took, second, text = await _race(root, tmp_path, "read_many_files", args)
    _assert_prompt(took, second)
    assert f"--- {root / LONG_NAME} ---" in text, text


async def test_hostile_gitignore_line_applied_by_list_directory(root: Path, tmp_path: Path) -> None:
    (root / ".gitignore").write_text("*a*a*a*a*a*a*a*a*b\n")
    for n in range(3):
        (root / ("a" * (90 + n))).write_text("x\n")
    took, second, text = await _race(root, tmp_path, "list_directory", {"path": str(root)})
    _assert_prompt(took, second)
    assert f"{'a' * 90} (2 bytes)" in text, text


@pytest.mark.parametrize("engine", ["auto", "python"])
@pytest.mark.parametrize("regex", ["(a|aa)+$", "(x+x+)+y"])
async def test_hostile_search_regex_with_geminiignore_negation(
    root: Path, tmp_path: Path, regex: str, engine: str
) -> None:
    """`auto`: ripgrep, the files picked by the walk; `python`: the fallback engine."""
    (root / ".geminiignore").write_text("!keep\n")
    (root / "run.txt").write_text(("a" * 40 + "!\n") + ("x" * 40 + "!\n") + "aa\n")
    took, second, text = await _race(
        root, tmp_path, "search_file_content", {"pattern": regex}, "--search-engine", engine
    )
    _assert_prompt(took, second)
    assert "run.txt" in text and "L3: aa" in text if regex.startswith("(a") else "No matches" in text, text
