"""Path hints: a path that does not exist gets the ones likely meant, through the real tools, and never a
protected, ignored or out-of-workspace name; the lookup is lazy and bounded."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from coretools.workspace import hints
from coretools.workspace.hints import HintedWorkspace
from support import linked_files
from tests.conftest import call_tool
from tests.readside import error_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "src" / "util").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('main')\n")
    (root / "src" / "util" / "helpers.py").write_text("HELP = 1\n")
    return root


@pytest.fixture
def other(tmp_path: Path) -> Path:
    second = tmp_path / "second"
    (second / "lib").mkdir(parents=True)
    (second / "lib" / "tool.py").write_text("TOOL = 1\n")
    return second


async def read(roots: Path | list[Path], path: str | Path, *flags: str) -> str:
    result = await call_tool(roots, "read_file", {"absolute_path": str(path)}, *flags)
    return error_text(result, "file_not_found")


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def hint(text: str) -> str:
    """The hint part of an error: what follows the original first line."""
    return text.split("\n", 1)[1] if "\n" in text else ""


# -- each kind of hint ----------------------------------------------------------------------------------


async def test_case_only_difference(tree: Path) -> None:
    text = await read(tree, tree / "src" / "Main.py")
    assert first_line(text) == f"File not found: {tree / 'src' / 'Main.py'}"
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (differs in case)?"


async def test_case_difference_along_the_path(tree: Path) -> None:
    text = await read(tree, tree / "SRC" / "Util" / "helpers.py")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'util' / 'helpers.py'} (differs in case)?"


async def test_unicode_form_difference(root: Path) -> None:
    composed = root / "caf\u00e9.txt"
    composed.write_text("menu\n")
    text = await read(root, root / "cafe\u0301.txt")
    assert hint(text) == f"Did you mean: {composed} (differs in Unicode form)?"


async def test_close_name_read_file(tree: Path) -> None:
    text = await read(tree, tree / "src" / "mian.py")
    assert first_line(text) == f"File not found: {tree / 'src' / 'mian.py'}"
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (similar name)?"


async def test_close_names_are_ranked_and_capped(root: Path) -> None:
    for name in ("config.yaml", "Config.yml", "configs.yml", "confix.yml", "config.yml.bak"):
        (root / name).write_text("x\n")
    text = hint(await read(root, root / "config.yml"))
    assert text.startswith(f"Did you mean one of: {root / 'Config.yml'} (differs in case), ")
    assert text.count(str(root)) == hints.MAX_SHOWN


async def test_close_name_list_directory(tree: Path) -> None:
    result = await call_tool(tree, "list_directory", {"path": str(tree / "src" / "utl")})
    text = error_text(result, "file_not_found")
    assert str(tree / "src" / "utl") in first_line(text)
    assert hint(text) == f"Did you mean: {tree / 'src' / 'util'} (similar name)?"


async def test_close_name_for_a_search_path(tree: Path) -> None:
    result = await call_tool(tree, "search_file_content", {"pattern": "HELP", "path": str(tree / "scr")})
    assert f"Did you mean: {tree / 'src'} (similar name)?" in error_text(result, "file_not_found")


async def test_replace_of_a_missing_file(tree: Path) -> None:
    args = {"file_path": str(tree / "src" / "mian.py"), "old_string": "main", "new_string": "MAIN"}
    text = error_text(await call_tool(tree, "replace", args), "file_not_found")
    assert text.startswith(f"File not found: {tree / 'src' / 'mian.py'}. Cannot apply the edit")
    assert text.endswith(f"\nDid you mean: {tree / 'src' / 'main.py'} (similar name)?")

async def test_at_prefixed_path(tree: Path) -> None:
    text = await read(tree, "@src/main.py")
    assert first_line(text) == f"File not found: {tree / '@src' / 'main.py'}"
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (without the @)?"
    text = await read(tree, f"@{tree / 'src' / 'main.py'}")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (without the @)?"


async def test_at_prefix_combines_with_a_case_fix(tree: Path) -> None:
    text = await read(tree, "@src/Main.py")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (without the @, differs in case)?"


async def test_dot_slash_prefixed_path(tree: Path, other: Path) -> None:
    text = await read(tree, "./src/mian.py")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (similar name)?"
    text = await read([tree, other], "./lib/tool.py")
    assert hint(text) == f"Did you mean: {other / 'lib' / 'tool.py'} (in another workspace root)?"


async def test_absolute_path_without_its_slash(tree: Path) -> None:
    text = await read(tree, str(tree / "src" / "main.py").lstrip("/"))
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (read as an absolute path)?"
    text = await read(tree, "root/src/main.py")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (from the root's own name)?"


async def test_same_path_under_another_root(tree: Path, other: Path) -> None:
    text = await read([tree, other], tree / "lib" / "tool.py")
    assert first_line(text) == f"File not found: {tree / 'lib' / 'tool.py'}"
    assert hint(text) == f"Did you mean: {other / 'lib' / 'tool.py'} (in another workspace root)?"
    text = await read([tree, other], tree / "second" / "lib" / "tool.py")
    assert hint(text) == f"Did you mean: {other / 'lib' / 'tool.py'} (in another workspace root)?"


async def test_missing_parent_directory(tree: Path) -> None:
    text = await read(tree, tree / "src" / "utils" / "helpers.py")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'util' / 'helpers.py'} (similar name)?"
    text = await read(tree, tree / "src" / "lib" / "main.py")
    assert hint(text) == f"Did you mean: {tree / 'src' / 'main.py'} (in the deepest existing directory)?"
    text = await read(tree, tree / "nowhere" / "deeper" / "x.py")
    assert hint(text) == f"The directory {tree / 'nowhere'} does not exist."
    text = await read(tree, tree / "src" / "main.py" / "x.py")
    assert hint(text) == f"{tree / 'src' / 'main.py'} is a file, not a directory."


async def test_path_errors_list_the_current_roots(tree: Path, other: Path) -> None:
    text = await read([tree, other], tree / "nothing.txt")
    assert hint(text) == f"Workspace roots: {tree}, {other}."
    result = await call_tool([tree, other], "read_file", {"absolute_path": str(tree.parent / "elsewhere.txt")})
    assert f"directories: {tree}, {other}" in error_text(result, "path_not_in_workspace")


async def test_nothing_to_say_leaves_the_message_as_it_was(tree: Path) -> None:
    assert await read(tree, tree / "nothing.txt") == f"File not found: {tree / 'nothing.txt'}"


# -- what is never suggested ------------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [(), ("--allow-protected",)])
async def test_protected_near_names_are_never_suggested(root: Path, flags: tuple[str, ...]) -> None:
    (root / ".env").write_text("SECRET=1\n")
    (root / ".env.local").write_text("SECRET=2\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    for asked in (".emv", ".enc", "env", "git/config", ".gti/config", "GIT/config", ".gitt/config"):
        text = await read(root, root / asked, *flags)
        assert "Did you mean" not in text, (asked, text)
    (root / ".envrc").write_text("use nix\n")  # one edit from `.envr`, as `.env` is: only it is named
    assert hint(await read(root, root / ".envr", *flags)) == f"Did you mean: {root / '.envrc'} (similar name)?"


async def test_protected_target_behind_a_near_name_is_not_suggested(root: Path) -> None:
    (root / ".env").write_text("SECRET=1\n")
    os.symlink(".env", root / "settings")
    assert ".env" not in await read(root, root / "setting")
    assert "settings" not in await read(root, root / "setting")


async def test_ignored_near_names_are_never_suggested(root: Path) -> None:
    (root / ".gitignore").write_text("secrets.txt\nprivate/\n")
    (root / "secrets.txt").write_text("hidden\n")
    (root / "private").mkdir()
    (root / "private" / "key.pem").write_text("hidden\n")
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "node_modules" / "lib" / "index.js").write_text("x\n")
    for asked in ("secret.txt", "Secrets.txt", "privat/key.pem", "node_module/lib/index.js"):
        assert "Did you mean" not in await read(root, root / asked), asked
    (root / "secrets.md").write_text("visible\n")
    assert hint(await read(root, root / "secret.md")) == f"Did you mean: {root / 'secrets.md'} (similar name)?"


async def test_symlinks_out_of_the_root_are_never_followed(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "main.py").write_text("OUTSIDE\n")
    (outside / "notes.txt").write_text("OUTSIDE\n")
    os.symlink(outside, root / "lnk")
    os.symlink(outside / "main.py", root / "main.py")
    listed: list[str] = []
    real_scandir = hints._scandir

    def recording(fd: int):
        listed.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_scandir(fd)

    hints._scandir = recording
    try:
        for asked in ("lnkk/main.py", "Lnk/main.py", "lnk2/notes.txt", "mian.py", "Main.py"):
            text = await read(root, root / asked)
            assert "Did you mean" not in text and "outside" not in text, (asked, text)
    finally:
        hints._scandir = real_scandir
    assert listed and all(not path.startswith(str(outside)) for path in listed)


# -- cost -----------------------------------------------------------------------------------------------------


def test_a_huge_directory_is_read_boundedly(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    linked_files(big / f"file_{i:05}.txt" for i in range(20_000))
    read_entries = 0
    real_scandir = hints._scandir

    class Counting:
        def __init__(self, fd: int) -> None:
            self.inner = real_scandir(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

        def __iter__(self):
            nonlocal read_entries
            for entry in self.inner:
                read_entries += 1
                yield entry

    ws = HintedWorkspace([str(big)])
    hints._scandir = Counting
    try:
        started = time.perf_counter()
        with pytest.raises(hints.MissingPath) as info:
            ws.read_bytes(ws.locate("sub/deeper/file_0123.txt"))
        message = info.value.message
        elapsed = time.perf_counter() - started
    finally:
        hints._scandir = real_scandir
        ws.close()
    assert message.startswith(f"File not found: {big}/sub/deeper/file_0123.txt")
    assert read_entries <= hints.MAX_ENTRIES * hints.MAX_LISTINGS
    assert elapsed < 2.0, elapsed


def test_the_hint_costs_nothing_until_the_message_is_read(tree: Path) -> None:
    def refuse(fd: int):
        raise AssertionError("listed a directory")

    ws = HintedWorkspace([str(tree)])
    real_scandir, hints._scandir = hints._scandir, refuse
    try:
        assert not ws.exists(ws.locate("src/mian.py"))
        with pytest.raises(hints.MissingPath) as info:
            ws.read_bytes(ws.locate("src/mian.py"))
        assert info.value.kind == "file_not_found"
    finally:
        hints._scandir = real_scandir
    assert info.value.message.endswith(f"Did you mean: {tree / 'src' / 'main.py'} (similar name)?")
    ws.close()

