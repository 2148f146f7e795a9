"""Every Gemini CLI dialect of the parameters: a call in a newer version's names gives the same answer as
the published names, conflicting names are refused naming both, and the did-you-mean knows the aliases.
Through the real server (the official client in memory) so that translation and validation are the ones a
host meets."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import connect, text_of

pytestmark = pytest.mark.anyio

LINES = "".join(f"row {i}\n" for i in range(1, 31))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(LINES)
    (tmp_path / "src" / "b.md").write_text("# b\n")
    (tmp_path / "notes.txt").write_text("top\n")
    (tmp_path / ".geminiignore").write_text("src/b.md\n")
    return tmp_path


async def _same(client, name: str, published: dict, newer: dict) -> str:
    first = await client.call_tool(name, published)
    second = await client.call_tool(name, newer)
    assert not first.is_error, text_of(first)
    assert text_of(first) == text_of(second)
    return text_of(first)


@pytest.mark.parametrize("dialect", ["seed", "latest"])
async def test_newer_names_mean_the_same(tree: Path, dialect: str) -> None:
    target = str(tree / "src" / "a.py")
    async with connect([tree], "legacy", "--schema-dialect", dialect) as client:
        await _same(client, "read_file", {"absolute_path": target}, {"file_path": target})
        text = await _same(
            client, "read_file", {"absolute_path": target, "offset": 4, "limit": 3},
            {"file_path": target, "start_line": 5, "end_line": 7},
        )
        assert "row 5\nrow 6\nrow 7" in text and "row 8" not in text and "row 4\n" not in text
        await _same(client, "read_file", {"absolute_path": target, "offset": 9}, {"file_path": target, "start_line": 10})
        await _same(client, "read_file", {"absolute_path": target, "limit": 2}, {"file_path": target, "end_line": 2})
        await _same(client, "list_directory", {"path": str(tree / "src")}, {"dir_path": str(tree / "src")})
        await _same(client, "glob", {"pattern": "*.py", "path": str(tree / "src")}, {"pattern": "*.py", "dir_path": str(tree / "src")})
        await _same(client, "read_many_files", {"paths": ["src/*.py"]}, {"include": ["src/*.py"]})


async def test_glob_respect_gemini_ignore(tree: Path) -> None:
    async with connect([tree], "legacy") as client:
        hidden = text_of(await client.call_tool("glob", {"pattern": "src/*.md"}))
        shown = text_of(await client.call_tool("glob", {"pattern": "src/*.md", "respect_gemini_ignore": False}))
    assert "b.md" not in hidden.replace(".geminiignore", "") and str(tree / "src" / "b.md") in shown


async def test_read_many_files_filtering_options(tree: Path) -> None:
    async with connect([tree], "legacy") as client:
        hidden = text_of(await client.call_tool("read_many_files", {"paths": ["src/b.md"]}))
        shown = text_of(await client.call_tool(
            "read_many_files", {"include": ["src/b.md"], "file_filtering_options": {"respect_gemini_ignore": False}}
        ))
    assert "# b" not in hidden and "# b" in shown


async def test_an_alias_and_its_published_name_must_agree(tree: Path) -> None:
    async with connect([tree], "legacy") as client:
        result = await client.call_tool(
            "read_file", {"absolute_path": str(tree / "notes.txt"), "file_path": str(tree / "src" / "a.py")}
        )
        assert result.is_error
        assert "'file_path' and 'absolute_path'" in text_of(result) and "Pass only one" in text_of(result)
        same = await client.call_tool(
            "read_file", {"absolute_path": str(tree / "notes.txt"), "file_path": str(tree / "notes.txt")}
        )
        assert not same.is_error and "top" in text_of(same)
        both = await client.call_tool("read_file", {"file_path": str(tree / "notes.txt"), "start_line": 1, "offset": 0})
        assert both.is_error and "start_line/end_line" in text_of(both)
        backwards = await client.call_tool("read_file", {"file_path": str(tree / "notes.txt"), "start_line": 3, "end_line": 2})
        assert backwards.is_error and "before start_line" in text_of(backwards)


async def test_missing_required_names_every_name_it_goes_by(tree: Path) -> None:
    async with connect([tree], "legacy") as client:
        result = await client.call_tool("read_file", {"offset": 1})
    assert result.is_error and "'absolute_path'" in text_of(result) and "'file_path'" in text_of(result)


async def test_did_you_mean_knows_the_aliases(tree: Path) -> None:
    async with connect([tree], "legacy") as client:
        result = await client.call_tool("read_file", {"file_pth": str(tree / "notes.txt")})
        assert result.is_error and "did you mean 'file_path'" in text_of(result)
        wrong_type = await client.call_tool("read_file", {"file_path": 5})
        assert wrong_type.is_error and "params/file_path must be a string" in text_of(wrong_type)


async def test_the_latest_dialect_is_what_is_listed(tree: Path) -> None:
    async with connect([tree], "legacy", "--schema-dialect", "latest") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert listed["read_file"].input_schema["required"] == ["file_path"]
    assert "dir_path" in listed["list_directory"].input_schema["properties"]


async def test_replace_allow_multiple_and_instruction(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_text("a = 1\nb = 1\nc = 1\n")
    async with connect([tmp_path], "legacy") as client:
        many = await client.call_tool("replace", {
            "file_path": str(target), "old_string": "= 1", "new_string": "= 2", "allow_multiple": True,
            "instruction": "Set every constant to 2.",
        })
        assert not many.is_error, text_of(many)
        assert "(3 replacements)" in text_of(many) and "Instruction carried out: Set every constant to 2." in text_of(many)
        assert target.read_text() == "a = 2\nb = 2\nc = 2\n"
        one = await client.call_tool("replace", {
            "file_path": str(target), "old_string": "= 2", "new_string": "= 3", "allow_multiple": False,
        })
        assert one.is_error and "expected 1 occurrence but found 3" in text_of(one)
        clash = await client.call_tool("replace", {
            "file_path": str(target), "old_string": "= 2", "new_string": "= 3", "allow_multiple": False,
            "expected_replacements": 3,
        })
        assert clash.is_error and "'allow_multiple'" in text_of(clash) and "'expected_replacements'" in text_of(clash)
        held = await client.call_tool("replace", {
            "file_path": str(target), "old_string": "= 2", "new_string": "= 3", "allow_multiple": True,
            "expected_replacements": 2,
        })
        assert held.is_error and "expected 2 occurrences but found 3" in text_of(held)
        near = await client.call_tool("replace", {
            "file_path": str(target), "old_string": "b  =  2", "new_string": "b = 5", "allow_multiple": True,
        })
        assert not near.is_error and "(1 replacement)" in text_of(near)
    assert target.read_text() == "a = 2\nb = 5\nc = 2\n"


async def test_replace_in_the_latest_dialect(tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    target.write_text("one\n")
    async with connect([tmp_path], "legacy", "--schema-dialect", "latest") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["replace"].input_schema["required"] == ["file_path", "instruction", "old_string", "new_string"]
        result = await client.call_tool("replace", {
            "file_path": str(target), "instruction": "Say two.", "old_string": "one", "new_string": "two",
        })
        assert not result.is_error, text_of(result)
    assert target.read_text() == "two\n"


@pytest.mark.parametrize("include", [[], None, "src/a.py"])
async def test_a_newer_name_with_an_unusable_value_is_a_clear_error(tree: Path, include) -> None:
    """`include` stands in for `paths`: an empty list or a wrong type is refused as `paths` would be."""
    async with connect([tree], "legacy") as client:
        result = await client.call_tool("read_many_files", {"include": include, "recursive": False})
        published = await client.call_tool("read_many_files", {"paths": include, "recursive": False})
    assert result.is_error and "Internal error" not in text_of(result), text_of(result)
    assert published.is_error and "Internal error" not in text_of(published), text_of(published)
