"""search_file_content in every Gemini CLI dialect: the newer names (`dir_path`, `include_pattern`) give the
published names' results, each newer option (ripgrep variant and GrepTool variant) does what Gemini CLI's
does, on both engines alike, `--schema-dialect latest` publishes and answers `grep_search`, a search into an
ignored directory says so, and `./` in an include filter means the searched directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import call_tool, connect, text_of
from tests.readside import write_files
from tests.tools.test_schemas import gemini_problems
from tests.tools.test_search import build_tree, matches

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["ripgrep", "python"])
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


async def search(root, engine: str, args: dict, *flags: str):
    return await call_tool(root, "search_file_content", args, "--search-engine", engine, *flags)


async def text(root, engine: str, args: dict) -> str:
    result = await search(root, engine, args)
    assert not result.is_error, text_of(result)
    return text_of(result)


def context_rows(found: str) -> list[str]:
    return [line for line in found.splitlines() if re.match(r"L\d+[:-] ", line)]


CODE = "".join(f"line {i}{' needle' if i in (5, 6, 20) else ''}\n" for i in range(1, 31))


# -- renamed parameters --------------------------------------------------------------------------------------


async def test_dir_path_and_include_pattern_are_the_published_names(root: Path, engine: str) -> None:
    build_tree(root)
    sub = str(root / "src")
    assert await text(root, engine, {"pattern": "token", "dir_path": sub}) == await text(
        root, engine, {"pattern": "token", "path": sub}
    )
    assert await text(root, engine, {"pattern": "token", "include_pattern": "*.py"}) == await text(
        root, engine, {"pattern": "token", "include": "*.py"}
    )
    both = {"pattern": "token", "dir_path": sub, "path": sub, "include_pattern": "*.ts", "include": "*.ts"}
    assert set(matches(await text(root, engine, both))) == {"util.ts"}


async def test_an_alias_and_its_published_name_disagreeing_is_an_error_naming_both(root: Path) -> None:
    build_tree(root)
    result = await call_tool(root, "search_file_content", {"pattern": "t", "path": str(root), "dir_path": "src"})
    message = text_of(result)
    assert result.is_error and "'dir_path'" in message and "'path'" in message
    result = await call_tool(root, "search_file_content", {"pattern": "t", "include": "*.py", "include_pattern": "*"})
    assert result.is_error and "'include_pattern'" in text_of(result) and "'include'" in text_of(result)


async def test_latest_dialect_publishes_and_answers_grep_search(root: Path) -> None:
    build_tree(root)
    async with connect([root], "legacy", "--schema-dialect", "latest") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "grep_search" in tools and "search_file_content" not in tools
        schema = tools["grep_search"].input_schema
        assert gemini_problems(schema) == []
        assert list(schema["properties"]) == [
            "pattern", "dir_path", "include_pattern", "exclude_pattern", "names_only", "max_matches_per_file",
            "total_max_matches", "case_sensitive", "fixed_strings", "context", "after", "before", "no_ignore",
        ]  # fmt: skip
        assert schema["required"] == ["pattern"]
        assert schema["properties"]["max_matches_per_file"]["minimum"] == 1
        assert schema["properties"]["context"]["minimum"] == 0
        latest = await client.call_tool("grep_search", {"pattern": "token", "include_pattern": "*.py"})
        old = await client.call_tool("search_file_content", {"pattern": "token", "include": "*.py"})
        assert text_of(latest) == text_of(old)
        assert set(matches(text_of(latest))) == {"src/app.py", "src/deep/keep.py"}
    async with connect([root], "legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "search_file_content" in names and "grep_search" not in names
        result = await client.call_tool("search_file_content", {"pattern": "token", "names_only": True})
        assert not result.is_error


# -- the ripgrep variant's options ---------------------------------------------------------------------------


async def test_case_sensitive(root: Path, engine: str) -> None:
    write_files(root, {"a.txt": "Needle\nneedle\nNEEDLE\n"})
    absent = await text(root, engine, {"pattern": "needle"})
    assert await text(root, engine, {"pattern": "needle", "case_sensitive": False}) == absent
    assert matches(absent) == {"a.txt": [1, 2, 3]}
    assert matches(await text(root, engine, {"pattern": "needle", "case_sensitive": True})) == {"a.txt": [2]}
    assert matches(await text(root, engine, {"pattern": "NEE", "case_sensitive": True})) == {"a.txt": [3]}


async def test_fixed_strings(root: Path, engine: str) -> None:
    write_files(root, {"a.txt": "call f(x.y)\ncall fxxy\n[a-] {2,1} $^ \\d\n"})
    assert matches(await text(root, engine, {"pattern": "f(x.y)", "fixed_strings": True})) == {"a.txt": [1]}
    assert matches(await text(root, engine, {"pattern": "x.y", "fixed_strings": False})) == {"a.txt": [1, 2]}
    literal = {"pattern": "[a-] {2,1} $^ \\d", "fixed_strings": True}
    assert matches(await text(root, engine, literal)) == {"a.txt": [3]}
    refused = await search(root, engine, {"pattern": "f(x.y", "fixed_strings": False})
    assert refused.is_error and "Invalid regular expression pattern provided" in text_of(refused)
    upper = await text(root, engine, {"pattern": "F(X.Y)", "fixed_strings": True, "case_sensitive": False})
    assert matches(upper) == {"a.txt": [1]}


async def test_context_lines_in_gemini_cli_format(root: Path, engine: str) -> None:
    write_files(root, {"code.txt": CODE})
    found = await text(root, engine, {"pattern": "needle", "context": 1})
    assert context_rows(found) == [
        "L4- line 4", "L5: line 5 needle", "L6: line 6 needle", "L7- line 7",
        "L19- line 19", "L20: line 20 needle", "L21- line 21",
    ]  # fmt: skip
    assert found.splitlines()[0].startswith("Found 3 matches in 1 file")  # context lines are not matches
    same = await text(root, engine, {"pattern": "needle", "before": 1, "after": 1})
    assert same == found
    after_only = await text(root, engine, {"pattern": "needle", "context": 1, "before": 0, "after": 2})
    assert context_rows(after_only) == [
        "L5: line 5 needle", "L6: line 6 needle", "L7- line 7", "L8- line 8",
        "L20: line 20 needle", "L21- line 21", "L22- line 22",
    ]  # fmt: skip
    before_only = await text(root, engine, {"pattern": "needle", "before": 2})
    assert context_rows(before_only)[:3] == ["L3- line 3", "L4- line 4", "L5: line 5 needle"]
    edges = await text(root, engine, {"pattern": "line (1|30)$", "context": 3})
    assert context_rows(edges) == [
        "L1: line 1", "L2- line 2", "L3- line 3", "L4- line 4",
        "L27- line 27", "L28- line 28", "L29- line 29", "L30: line 30",
    ]  # fmt: skip


async def test_context_around_shown_matches_only(root: Path, engine: str) -> None:
    write_files(root, {"code.txt": CODE})
    found = await text(root, engine, {"pattern": "needle", "context": 1, "max_matches_per_file": 1})
    assert context_rows(found) == ["L4- line 4", "L5: line 5 needle", "L6- line 6 needle"]
    assert "Found 3 matches in 1 file" in found and "showing the first 1 match" in found


async def test_no_ignore_searches_ignored_files_but_never_protected_ones(root: Path, engine: str) -> None:
    build_tree(root)
    default = set(matches(await text(root, engine, {"pattern": "TOKEN"})))
    assert await text(root, engine, {"pattern": "TOKEN", "no_ignore": False}) == await text(
        root, engine, {"pattern": "TOKEN"}
    )
    everything = set(matches(await text(root, engine, {"pattern": "TOKEN", "no_ignore": True})))
    assert everything - default == {
        "notes.log", "src/gen/out.py", "src/deep/tmp_scratch.py", "node_modules/pkg/index.js", "build/out.txt",
        "secret/data.txt",
    }  # fmt: skip
    assert not any(name == ".env" or name.startswith(".git/") for name in everything)
    assert "bin/blob.bin" not in everything  # binary files are still skipped


async def test_no_ignore_with_a_subdirectory_and_include(root: Path, engine: str) -> None:
    build_tree(root)
    args = {"pattern": "TOKEN", "path": str(root / "src"), "no_ignore": True, "include": "*.py"}
    found = await text(root, engine, args)
    assert set(matches(found)) == {"app.py", "gen/out.py", "deep/tmp_scratch.py", "deep/keep.py"}


# -- the GrepTool variant's options --------------------------------------------------------------------------


async def test_exclude_pattern_drops_lines(root: Path, engine: str) -> None:
    write_files(root, {"a.py": "import os  # TODO\nTODO: later\nx = 1  # todo later\n", "b.py": "# TODO later\n"})
    found = await text(root, engine, {"pattern": "todo", "exclude_pattern": "later"})
    assert matches(found) == {"a.py": [1]}
    assert found.splitlines()[0].startswith("Found 1 match in 1 file")
    sensitive = await text(root, engine, {"pattern": "todo", "exclude_pattern": "later", "case_sensitive": True})
    assert "No matches found" in sensitive
    kept = await text(root, engine, {"pattern": "todo", "exclude_pattern": "LATER", "case_sensitive": True})
    assert matches(kept) == {"a.py": [3]}


@pytest.mark.parametrize("bad", ["(unclosed", "(?=ahead)"])
async def test_invalid_exclude_pattern(root: Path, engine: str, bad: str) -> None:
    write_files(root, {"a.txt": "x\n"})
    result = await search(root, engine, {"pattern": "x", "exclude_pattern": bad})
    assert result.is_error
    assert text_of(result).startswith(f"Invalid exclude regular expression pattern provided: {bad}. Error: ")


async def test_exclude_pattern_is_linear_time(root: Path, engine: str) -> None:
    write_files(root, {"a.txt": "a" * 40 + "!\n" + "a" * 100_000 + "\n"})
    found = await text(root, engine, {"pattern": "a", "exclude_pattern": "(a|aa)+$"})
    assert matches(found) == {"a.txt": [1]}  # no backtracking blow-up on either line


async def test_names_only(root: Path, engine: str) -> None:
    build_tree(root)
    found = await text(root, engine, {"pattern": "token", "names_only": True})
    lines = found.splitlines()
    assert lines[0] == (
        'Found 7 files with matches (8 matching lines) for pattern "token" in the workspace directory:'
    )
    assert lines[1:] == [
        ".env.example", ".hidden/file.txt", "docs/readme.md", "src/app.py", "src/deep/keep.py", "src/util.ts",
        "src/view.tsx",
    ]  # fmt: skip
    capped = (await text(root, engine, {"pattern": "token", "names_only": True, "total_max_matches": 2})).splitlines()
    assert capped[1:] == [".env.example", ".hidden/file.txt"]
    assert "showing the first 2 files" in capped[0]


async def test_max_matches_per_file_and_total(root: Path, engine: str) -> None:
    for i in range(4):
        write_files(root, {f"f{i}.txt": "".join(f"hit {j}\n" for j in range(5))})
    per_file = await text(root, engine, {"pattern": "hit", "max_matches_per_file": 2})
    assert matches(per_file) == {f"f{i}.txt": [1, 2] for i in range(4)}
    head = per_file.splitlines()[0]
    assert head.startswith("Found 20 matches in 4 files") and "2 matches per file" in head
    total = await text(root, engine, {"pattern": "hit", "total_max_matches": 7})
    assert matches(total) == {"f0.txt": [1, 2, 3, 4, 5], "f1.txt": [1, 2]}
    assert "the limit of 7 matches" in total.splitlines()[0]
    both = await text(root, engine, {"pattern": "hit", "total_max_matches": 3, "max_matches_per_file": 1})
    assert matches(both) == {"f0.txt": [1], "f1.txt": [1], "f2.txt": [1]}
    absent = await text(root, engine, {"pattern": "hit"})
    assert "showing" not in absent  # 20 lines: within the server's limit of 300


@pytest.mark.parametrize("name", ["max_matches_per_file", "total_max_matches"])
async def test_limits_below_one_are_refused(root: Path, name: str) -> None:
    write_files(root, {"a.txt": "x\n"})
    result = await call_tool(root, "search_file_content", {"pattern": "x", name: 0})
    assert result.is_error and name in text_of(result) and ">= 1" in text_of(result)


async def test_negative_context_is_refused(root: Path) -> None:
    write_files(root, {"a.txt": "x\n"})
    result = await call_tool(root, "search_file_content", {"pattern": "x", "context": -1})
    assert result.is_error and "context" in text_of(result) and ">= 0" in text_of(result)


async def test_engines_agree_on_every_option(root: Path) -> None:
    build_tree(root)
    write_files(root, {"src/code.txt": CODE, "src/more.py": "Needle one\nneedle two # skip\nNEEDLE three\n"})
    calls = [
        {"pattern": "needle", "context": 2},
        {"pattern": "needle", "before": 1, "max_matches_per_file": 1},
        {"pattern": "needle", "case_sensitive": True, "after": 1},
        {"pattern": "needle", "exclude_pattern": "skip|20"},
        {"pattern": "NEEDLE", "fixed_strings": True, "names_only": True},
        {"pattern": "token|needle", "no_ignore": True, "total_max_matches": 5},
        {"pattern": "token", "no_ignore": True, "names_only": True, "include": "*.py"},
    ]
    for args in calls:
        rg = await text(root, "ripgrep", args)
        py = await text(root, "python", args)
        assert rg == py, args


# -- ignored directories and `./` --------------------------------------------------------------------------


async def test_search_into_an_ignored_directory_says_so(root: Path, engine: str) -> None:
    build_tree(root)
    write_files(root, {"build/sub/deep.txt": "TOKEN deeper\n"})
    result = await search(root, engine, {"pattern": "TOKEN", "path": str(root / "build")})
    message = text_of(result)
    assert not result.is_error and result.structured["ignored"] is True
    assert message == (
        f'No matches found for pattern "TOKEN" in path "{root / "build"}". "{root / "build"}" is ignored by the '
        "default excludes (rule 'build/'), so nothing in it is searched; pass no_ignore: true to search it."
    )
    deeper = text_of(await search(root, engine, {"pattern": "TOKEN", "path": str(root / "build/sub")}))
    assert f'"{root / "build"}", which contains it, is ignored' in deeper
    gen = text_of(await search(root, engine, {"pattern": "TOKEN", "path": str(root / "src/gen")}))
    assert "is ignored by .gitignore (rule '/src/gen/')" in gen
    secret = text_of(await search(root, engine, {"pattern": "TOKEN", "dir_path": str(root / "secret")}))
    assert "is ignored by .geminiignore (rule 'secret/')" in secret
    write_files(root, {"src/tmp_cache/x.txt": "TOKEN cache\n"})
    nested = text_of(await search(root, engine, {"pattern": "TOKEN", "path": str(root / "src/tmp_cache")}))
    assert "is ignored" not in nested  # src/.gitignore's `deep/tmp_*` is anchored below src/deep
    write_files(root, {"src/deep/tmp_dir/x.txt": "TOKEN\n"})
    nested = text_of(await search(root, engine, {"pattern": "TOKEN", "path": str(root / "src/deep/tmp_dir")}))
    assert "is ignored by src/.gitignore (rule 'deep/tmp_*')" in nested
    included = await text(root, engine, {"pattern": "TOKEN", "path": str(root / "build"), "no_ignore": True})
    assert set(matches(included)) == {"out.txt", "sub/deep.txt"}


async def test_a_named_ignored_file_is_still_searched(root: Path, engine: str) -> None:
    build_tree(root)
    found = await text(root, engine, {"pattern": "TOKEN", "path": str(root / "notes.log")})
    assert matches(found) == {str(root / "notes.log"): [1]}


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        ("./src/**/*.py", {"src/app.py", "src/deep/keep.py"}),
        ("./*.example", {".env.example"}),
        ("./docs/*", {"docs/readme.md"}),
        ("./*.md", set()),  # `./` anchors at the searched directory: docs/readme.md is deeper
        ("././src/*.tsx", {"src/view.tsx"}),
    ],
)
async def test_dot_slash_include(root: Path, engine: str, include: str, expected: set[str]) -> None:
    build_tree(root)
    found = await text(root, engine, {"pattern": "token", "include": include})
    assert set(matches(found)) == expected
    assert f'(filter: "{include}")' in found.splitlines()[0]
    same = await text(root, engine, {"pattern": "token", "include_pattern": include})
    assert same == found
