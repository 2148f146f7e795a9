"""A git directory under any name is protected like `.git`: nothing is written into one, and no write completes
one (HEAD, objects/ and refs/ side by side), in whatever order the pieces come."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from support import ToolSession
from tests.conftest import text_of

pytestmark = pytest.mark.anyio

PIECES = {"HEAD": "plant/HEAD", "objects": "plant/objects/info/keep", "refs": "plant/refs/heads/keep"}


@pytest.mark.parametrize("order", list(itertools.permutations(PIECES)))
async def test_no_order_of_writes_completes_a_git_directory(root: Path, order: tuple[str, ...]) -> None:
    async with ToolSession(root) as tools:
        results = [await tools.call("write_file", file_path=str(root / PIECES[p]), content="x\n") for p in order]
    assert [r.is_error for r in results] == [False, False, True], [text_of(r) for r in results]
    assert "would make plant a git directory" in text_of(results[-1])
    assert not (root / PIECES[order[-1]]).exists()


async def test_nothing_is_written_into_a_bare_repository(root: Path) -> None:
    subprocess.run(["git", "init", "-q", "--bare", str(root / "store.git")], check=True)
    async with ToolSession(root) as tools:
        config = await tools.call("write_file", file_path=str(root / "store.git/config"), content="[core]\n")
        hook = await tools.call("write_file", file_path=str(root / "store.git/hooks/post-checkout"), content="x")
        beside = await tools.call("write_file", file_path=str(root / "notes/HEAD"), content="a file named HEAD\n")
    assert config.is_error and "inside a git directory" in text_of(config)
    assert hook.is_error and not (root / "store.git/hooks/post-checkout").exists()
    assert not beside.is_error  # HEAD alone makes no repository


async def test_a_work_tree_is_written_as_before_and_the_operator_can_allow_it(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    async with ToolSession(root) as tools:
        assert not (await tools.call("write_file", file_path=str(root / "src/app.py"), content="x = 1\n")).is_error
    (root / "plant/objects").mkdir(parents=True)
    (root / "plant/refs").mkdir()
    async with ToolSession(root, "--allow-protected") as tools:
        allowed = await tools.call("write_file", file_path=str(root / "plant/HEAD"), content="ref: refs/heads/x\n")
    assert not allowed.is_error, text_of(allowed)
