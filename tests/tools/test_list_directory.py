"""list_directory: ordering, sizes, ignore rules and their count, the ignore parameter, symlinks, errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import linked_files
from tests.conftest import call_tool, text_of
from tests.readside import error_text

pytestmark = pytest.mark.anyio


async def ls(root: Path | list[Path], path: str | Path, **extra):
    return await call_tool(root, "list_directory", {"path": str(path), **extra})


def entries(result) -> list[str]:
    """The listed lines (between the header and the notes)."""
    text = text_of(result)
    body = text.split("\n\n", 1)[0]
    return body.splitlines()[1:]


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "src").mkdir()
    (root / "Docs").mkdir()
    (root / "b.txt").write_text("12345")
    (root / "A.md").write_text("")
    (root / "c.py").write_text("print(1)\n")
    return root


async def test_directories_first_then_files_with_sizes(tree: Path) -> None:
    result = await ls(tree, tree)
    assert not result.is_error
    text = text_of(result)
    assert text.splitlines()[0] == f"Directory listing for {tree}:"
    assert entries(result) == ["[DIR] Docs", "[DIR] src", "A.md (0 bytes)", "b.txt (5 bytes)", "c.py (9 bytes)"]
    assert "ignored" not in text
    assert result.structured["ignored"] == 0


async def test_relative_path_and_subdirectory(tree: Path) -> None:
    (tree / "src" / "m.py").write_text("x")
    result = await ls(tree, "src")
    assert text_of(result).splitlines()[0] == f"Directory listing for {tree / 'src'}:"
    assert entries(result) == ["m.py (1 bytes)"]


async def test_dot_lists_the_primary_root(tree: Path) -> None:
    assert text_of(await ls(tree, ".")).splitlines()[0] == f"Directory listing for {tree}:"


async def test_ignored_entries_are_hidden_and_counted(tree: Path) -> None:
    (tree / ".gitignore").write_text("*.log\nout/\n")
    (tree / ".geminiignore").write_text("c.py\n")
    (tree / "debug.log").write_text("x")
    (tree / "out").mkdir()
    (tree / "node_modules").mkdir()
    (tree / "dist").mkdir()
    (tree / ".git").mkdir()
    result = await ls(tree, tree)
    assert entries(result) == [
        "[DIR] Docs",
        "[DIR] src",
        ".geminiignore (5 bytes)",
        ".gitignore (11 bytes)",
        "A.md (0 bytes)",
        "b.txt (5 bytes)",
    ]
    # debug.log, out/, c.py, node_modules, dist, .git
    assert "(6 ignored by .gitignore/.geminiignore rules or default excludes)" in text_of(result)
    assert result.structured["ignored"] == 6


async def test_directory_only_pattern_hides_a_directory_but_not_a_file(root: Path) -> None:
    (root / ".gitignore").write_text("cache/\n")
    (root / "cache").mkdir()
    (root / "sub").mkdir()
    (root / "sub" / "cache").write_text("a file named cache")
    assert "[DIR] cache" not in entries(await ls(root, root))
    assert entries(await ls(root, root / "sub")) == ["cache (18 bytes)"]


async def test_nested_gitignore_applies_in_its_directory(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / ".gitignore").write_text("gen.py\n")
    (root / "pkg" / "gen.py").write_text("")
    (root / "gen.py").write_text("")
    assert "gen.py (0 bytes)" in entries(await ls(root, root))
    pkg = await ls(root, root / "pkg")
    assert entries(pkg) == [".gitignore (7 bytes)"]
    assert "(1 ignored" in text_of(pkg)


async def test_file_filtering_options_can_turn_off_git_and_gemini_rules(tree: Path) -> None:
    (tree / ".gitignore").write_text("*.log\n")
    (tree / ".geminiignore").write_text("c.py\n")
    (tree / "debug.log").write_text("x")
    (tree / "node_modules").mkdir()
    only_gemini = entries(await ls(tree, tree, file_filtering_options={"respect_git_ignore": False}))
    assert "debug.log (1 bytes)" in only_gemini and "c.py (9 bytes)" not in only_gemini
    only_git = entries(await ls(tree, tree, file_filtering_options={"respect_gemini_ignore": False}))
    assert "debug.log (1 bytes)" not in only_git and "c.py (9 bytes)" in only_git
    neither = await ls(tree, tree, file_filtering_options={"respect_git_ignore": False, "respect_gemini_ignore": False})
    assert "debug.log (1 bytes)" in entries(neither) and "c.py (9 bytes)" in entries(neither)
    # Default excludes stay on: node_modules is still hidden and counted.
    assert "[DIR] node_modules" not in entries(neither)
    assert "(1 ignored" in text_of(neither)


async def test_ignore_parameter_matches_names_with_braces_and_is_counted_apart(tree: Path) -> None:
    result = await ls(tree, tree, ignore=["*.{md,txt}", "D*"])
    assert entries(result) == ["[DIR] src", "c.py (9 bytes)"]
    text = text_of(result)
    assert "(3 hidden by the ignore parameter)" in text
    assert "ignored by" not in text
    assert result.structured["hidden_by_pattern"] == 3


async def test_ignore_parameter_extglob_and_dotfiles(root: Path) -> None:
    for name in (".hidden", "keep.rs", "drop.c", "drop.h"):
        (root / name).write_text("")
    result = await ls(root, root, ignore=["*.@(c|h)", ".*"])
    assert entries(result) == ["keep.rs (0 bytes)"]


async def test_ignore_parameter_matches_names_not_paths(root: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "x.txt").write_text("")
    assert entries(await ls(root, root / "a", ignore=["a/*"])) == ["x.txt (0 bytes)"]


async def test_everything_hidden_says_so(root: Path) -> None:
    (root / "x.log").write_text("")
    result = await ls(root, root, ignore=["*.log"])
    assert not result.is_error
    assert "(no visible entries)" in text_of(result)


async def test_empty_directory(root: Path) -> None:
    (root / "void").mkdir()
    result = await ls(root, root / "void")
    assert not result.is_error
    assert text_of(result) == f"Directory {root / 'void'} is empty."


async def test_not_a_directory(tree: Path) -> None:
    text = error_text(await ls(tree, tree / "b.txt"), "path_is_not_a_directory")
    assert text == f"Error: Path is not a directory: {tree / 'b.txt'}"


async def test_missing_directory(root: Path) -> None:
    """Gemini CLI's words for a directory that is not there (not "File not found"), and the workspace's hint."""
    text = error_text(await ls(root, root / "missing"), "file_not_found")
    assert text.splitlines()[0] == f"Error: Directory not found or inaccessible: {root / 'missing'}"
    (root / "src").mkdir()
    text = error_text(await ls(root, root / "srcc"), "file_not_found")
    assert text == f"Error: Directory not found or inaccessible: {root / 'srcc'}\nDid you mean: {root / 'src'} (similar name)?"


async def test_outside_workspace(root: Path) -> None:
    result = await ls(root, root.parent / "root-evil")
    assert result.is_error
    assert "Path not in workspace" in text_of(result)
    assert "secret.txt" not in text_of(result)


async def test_symlink_entries_inside_outside_and_broken(root: Path, tmp_path: Path) -> None:
    (root / "real").mkdir()
    (root / "data.txt").write_text("abc")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * 999)
    os.symlink("real", root / "dirlink")
    os.symlink("data.txt", root / "filelink")
    os.symlink(outside, root / "outdir")
    os.symlink(outside / "big.bin", root / "outfile")
    os.symlink("nowhere", root / "dangling")
    result = await ls(root, root)
    assert not result.is_error
    assert entries(result) == [
        f"[DIR] dirlink (symlink to {root / 'real'})",
        "[DIR] real",
        "dangling (broken symlink)",
        "data.txt (3 bytes)",
        f"filelink (3 bytes, symlink to {root / 'data.txt'})",
        "outdir (symlink pointing outside the workspace)",
        "outfile (symlink pointing outside the workspace)",
    ]
    text = text_of(result)
    assert str(outside) not in text and "999" not in text


async def test_symlink_named_like_an_ignored_file_is_hidden(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\n")
    (root / "data.txt").write_text("abc")
    os.symlink("data.txt", root / "alias.log")
    result = await ls(root, root)
    assert "alias.log" not in text_of(result)
    assert "(1 ignored" in text_of(result)


async def test_symlink_to_an_ignored_file_is_hidden(root: Path) -> None:
    (root / ".geminiignore").write_text("private/\n")
    (root / "private").mkdir()
    (root / "private" / "notes.txt").write_text("hush")
    os.symlink("private/notes.txt", root / "notes")
    result = await ls(root, root)
    assert "notes" not in "\n".join(entries(result))
    assert "(2 ignored" in text_of(result)


async def test_git_directory_and_env_files_are_hidden(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".env").write_text("K=V")
    (root / ".env.example").write_text("K=")
    result = await ls(root, root)
    assert entries(result) == [".env.example (2 bytes)"]
    assert "(2 ignored" in text_of(result)


async def test_allow_protected_shows_env_file(root: Path) -> None:
    (root / ".env").write_text("K=V")
    result = await call_tool(root, "list_directory", {"path": str(root)}, "--allow-protected")
    assert entries(result) == [".env (3 bytes)"]


async def test_fifo_is_listed_as_special_file(root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert entries(await ls(root, root)) == ["pipe (special file)"]


async def test_second_root_by_absolute_path(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("o")
    result = await ls([root, other], other)
    assert entries(result) == ["o.txt (1 bytes)"]


async def test_very_large_directory_is_capped_with_a_note(root: Path) -> None:
    big = root / "many"
    big.mkdir()
    linked_files(big / f"f{i:05d}" for i in range(5003))
    result = await call_tool(root, "list_directory", {"path": str(big)}, "--max-result-chars", "0")
    assert len(entries(result)) == 5000
    assert "(3 more entries not shown" in text_of(result)


async def test_a_listing_fits_the_result_budget_and_says_how_to_narrow(root: Path) -> None:
    big = root / "many"
    big.mkdir()
    linked_files(big / f"entry-with-a-longer-name-{i:05d}.txt" for i in range(20_000))
    result = await ls(root, big)
    text = text_of(result)
    assert len(text) <= 80_000
    shown = len(entries(result))
    assert 1000 < shown < 20_000
    assert f"({20_000 - shown} more entries not shown: this answer lists {shown} of 20000; use glob" in text
