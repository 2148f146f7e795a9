"""glob and list_directory where the pattern or path leads: `./` prefixes, case-insensitive literal
directories, and a start directory the ignore rules hide (said so, with the source, the rule and the
parameter that includes it; the parameter really includes it; protected paths stay out whatever the
options). Real files in a tmp root, through the real tools."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import call_tool, text_of
from tests.readside import error_text, write_files

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["rg", "walk"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """glob enumerates with `rg --files` when it can and walks otherwise: both must answer alike."""
    if request.param == "walk":
        from coretools.sandbox import ripgrep

        monkeypatch.setattr(ripgrep, "find_rg", lambda: None)
    return request.param


@pytest.fixture
def tree(root: Path) -> Path:
    write_files(
        root,
        {
            ".gitignore": "build/\nout/\n",
            ".geminiignore": "gen/\n",
            "Src/Deep/File.PY": "",
            "src/deep/lower.py": "",
            "build/out.py": "",
            "build/sub/deeper.py": "",
            "out/o.py": "",
            "out/sub/o2.py": "",
            "gen/g.py": "",
            "node_modules/pkg/i.py": "",
            "top.py": "",
            ".env": "SECRET=1\n",
            ".git/config": "",
        },
    )
    return root


async def glob(root: Path, pattern: str, **extra):
    return await call_tool(root, "glob", {"pattern": pattern, **extra})


def rels(root: Path, result) -> set[str]:
    assert not result.is_error, text_of(result)
    return {str(Path(p).relative_to(root)) for p in result.structured["files"]}


async def ls(root: Path, path: str, **extra):
    return await call_tool(root, "list_directory", {"path": path, **extra})


# -- `./` and case ---------------------------------------------------------------------------------------


async def test_a_leading_dot_slash_means_the_search_directory(tree: Path, engine: str) -> None:
    assert rels(tree, await glob(tree, "./Src/**/*.py")) == {"Src/Deep/File.PY", "src/deep/lower.py"}
    assert rels(tree, await glob(tree, "./*.py")) == {"top.py"}  # still the top level only
    assert rels(tree, await glob(tree, ".//./src/deep/*.py", case_sensitive=True)) == {"src/deep/lower.py"}
    assert rels(tree, await glob(tree, "./deep/*.py", path=str(tree / "src"))) == {"src/deep/lower.py"}


async def test_case_insensitive_matching_covers_the_literal_directories(tree: Path, engine: str) -> None:
    assert rels(tree, await glob(tree, "src/deep/*.py")) == {"Src/Deep/File.PY", "src/deep/lower.py"}
    assert rels(tree, await glob(tree, "SRC/DEEP/FILE.py")) == {"Src/Deep/File.PY"}
    assert rels(tree, await glob(tree, "src/deep/*.py", case_sensitive=True)) == {"src/deep/lower.py"}
    assert rels(tree, await glob(tree, "Src/Deep/*.PY", case_sensitive=True)) == {"Src/Deep/File.PY"}
    assert rels(tree, await glob(tree, "src/missing/*.py")) == set()


async def test_case_variants_through_links_are_listed_once_and_never_leave_the_root(tree: Path, engine: str) -> None:
    os.symlink(tree / "Src", tree / "SRC")  # a second spelling of the same directory
    os.symlink(tree.parent / "root-evil", tree / "sRc")  # a spelling that leads out of the workspace
    (tree.parent / "root-evil" / "Deep").mkdir()
    (tree.parent / "root-evil" / "Deep" / "evil.py").write_text("")
    result = await glob(tree, "src/deep/*.py")
    assert len(result.structured["files"]) == len(set(result.structured["files"]))
    assert rels(tree, result) == {"Src/Deep/File.PY", "src/deep/lower.py"}
    assert "evil" not in text_of(result)


async def test_case_variants_are_judged_one_by_one(tree: Path, engine: str) -> None:
    """`out/` is ignored; `Out` is not (a .gitignore is case-sensitive): files come from `Out`, and the
    answer says why `out` was not looked in."""
    write_files(tree, {"Out/visible.py": ""})
    result = await glob(tree, "out/*.py")
    assert rels(tree, result) == {"Out/visible.py"}
    assert text_of(result).endswith(
        f"\n(\"{tree / 'out'}\" is ignored by .gitignore (rule 'out/'), so glob does not look in it; pass "
        "respect_git_ignore: false to include it.)"
    )
    assert result.structured["ignored_dirs"] == [{"path": str(tree / "out"), "ignored_by": [".gitignore (rule 'out/')"]}]


# -- a start directory the rules hide -------------------------------------------------------------------


async def test_a_pattern_into_a_gitignored_directory_says_so(tree: Path, engine: str) -> None:
    result = await glob(tree, "out/*.py")
    assert rels(tree, result) == set()
    assert text_of(result) == (
        f'No files found matching pattern "out/*.py" within {tree} (1 files were ignored). "{tree / "out"}" is '
        "ignored by .gitignore (rule 'out/'), so glob does not look in it; pass respect_git_ignore: false to "
        "include it."
    )
    assert result.structured["ignored"] == 1
    assert rels(tree, await glob(tree, "out/*.py", respect_git_ignore=False)) == {"out/o.py"}
    assert rels(tree, await glob(tree, "out/**/*.py", respect_git_ignore=False)) == {"out/o.py", "out/sub/o2.py"}


async def test_an_explicit_path_inside_an_ignored_directory_says_so(tree: Path, engine: str) -> None:
    result = await glob(tree, "*.py", path=str(tree / "out/sub"))
    assert rels(tree, result) == set()
    assert f'"{tree / "out"}", which contains it, is ignored by .gitignore (rule \'out/\')' in text_of(result)
    assert "pass respect_git_ignore: false to include it." in text_of(result)
    included = await glob(tree, "*.py", path=str(tree / "out/sub"), respect_git_ignore=False)
    assert rels(tree, included) == {"out/sub/o2.py"}


async def test_a_geminiignored_directory_and_its_parameter(tree: Path, engine: str) -> None:
    result = await glob(tree, "gen/*.py")
    assert rels(tree, result) == set()
    assert (
        f"\"{tree / 'gen'}\" is ignored by .geminiignore (rule 'gen/'), so glob does not look in it; pass "
        "respect_gemini_ignore: false to include it."
    ) in text_of(result)
    assert rels(tree, await glob(tree, "gen/*.py", respect_git_ignore=False)) == set()
    assert rels(tree, await glob(tree, "gen/*.py", respect_gemini_ignore=False)) == {"gen/g.py"}
    assert "gen/g.py" in rels(tree, await glob(tree, "**/*.py", respect_gemini_ignore=False))


async def test_ignored_by_two_sources_names_both_parameters(tree: Path, engine: str) -> None:
    write_files(tree, {".geminiignore": "gen/\nout/\n"})
    text = text_of(await glob(tree, "out/*.py"))
    assert (
        f"\"{tree / 'out'}\" is ignored by .geminiignore (rule 'out/') and by .gitignore (rule 'out/'), so glob "
        "does not look in it; pass respect_gemini_ignore: false and respect_git_ignore: false to include it."
    ) in text
    assert rels(tree, await glob(tree, "out/*.py", respect_git_ignore=False)) == set()
    both = await glob(tree, "out/*.py", respect_git_ignore=False, respect_gemini_ignore=False)
    assert rels(tree, both) == {"out/o.py"}


async def test_a_default_excluded_directory_says_no_parameter_includes_it(tree: Path, engine: str) -> None:
    result = await glob(tree, "build/*.py")
    assert rels(tree, result) == set()  # the walk used to start inside it and list build/out.py
    assert text_of(result) == (
        f'No files found matching pattern "build/*.py" within {tree}. "{tree / "build"}" is ignored by '
        ".gitignore (rule 'build/') and by the default excludes (rule 'build/'), so glob does not look in it; "
        "respect_git_ignore: false would not include it, as the default excludes always apply and no "
        "parameter of this tool turns them off."
    )
    loose = text_of(await glob(tree, "build/**/*.py", respect_git_ignore=False))
    assert loose.endswith(
        f"\"{tree / 'build'}\" is ignored by the default excludes (rule 'build/'), so glob does not look in it; "
        "the default excludes always apply, and no parameter of this tool turns them off."
    )
    nm = text_of(await glob(tree, "*.py", path=str(tree / "node_modules/pkg"), respect_git_ignore=False))
    assert f"\"{tree / 'node_modules'}\", which contains it, is ignored by the default excludes" in nm


async def test_without_the_rules_a_gitignored_tree_is_walked_whole(tree: Path, engine: str) -> None:
    everything = rels(tree, await glob(tree, "**/*.py", respect_git_ignore=False, respect_gemini_ignore=False))
    assert everything == {
        "Src/Deep/File.PY", "src/deep/lower.py", "out/o.py", "out/sub/o2.py", "gen/g.py", "top.py"
    }


async def test_protected_paths_stay_out_whatever_the_options(tree: Path, engine: str) -> None:
    loose = {"respect_git_ignore": False, "respect_gemini_ignore": False}
    error_text(await glob(tree, ".git/*", **loose))
    error_text(await glob(tree, ".GIT/*", **loose))
    error_text(await glob(tree, "*", path=str(tree / ".git"), **loose))
    everything = rels(tree, await glob(tree, "**/*", **loose))
    assert ".env" not in everything and not any(rel.startswith(".git/") for rel in everything)
    assert rels(tree, await glob(tree, "./.env", **loose)) == set()


# -- list_directory ---------------------------------------------------------------------------------------


async def test_listing_an_ignored_directory_says_so_and_the_option_lists_it(tree: Path) -> None:
    result = await ls(tree, "out")
    assert text_of(result) == (
        f"Directory listing for {tree / 'out'}:\n(no visible entries)\n\n(\"{tree / 'out'}\" is ignored by "
        ".gitignore (rule 'out/'), so its 2 entries are not listed; pass file_filtering_options: "
        "{respect_git_ignore: false} to list it.)"
    )
    assert result.structured["entries"] == [] and result.structured["ignored"] == 2
    listed = await ls(tree, "out", file_filtering_options={"respect_git_ignore": False})
    assert text_of(listed) == f"Directory listing for {tree / 'out'}:\n[DIR] sub\no.py (0 bytes)"
    inner = text_of(await ls(tree, str(tree / "out/sub")))
    assert f"(\"{tree / 'out'}\", which contains it, is ignored by .gitignore (rule 'out/'), so its 1 entry" in inner


async def test_listing_a_geminiignored_directory(tree: Path) -> None:
    text = text_of(await ls(tree, "gen"))
    assert "is ignored by .geminiignore (rule 'gen/')" in text
    assert "pass file_filtering_options: {respect_gemini_ignore: false} to list it." in text
    listed = await ls(tree, "gen", file_filtering_options={"respect_gemini_ignore": False})
    assert text_of(listed) == f"Directory listing for {tree / 'gen'}:\ng.py (0 bytes)"


async def test_listing_a_default_excluded_directory_says_the_option_would_not_list_it(tree: Path) -> None:
    text = text_of(await ls(tree, "build"))
    assert (
        f"(\"{tree / 'build'}\" is ignored by .gitignore (rule 'build/') and by the default excludes (rule "
        "'build/'), so its 2 entries are not listed; file_filtering_options: {respect_git_ignore: false} would "
        "not list it, as the default excludes always apply and no parameter of this tool turns them off.)"
    ) in text
    loose = text_of(await ls(tree, "build", file_filtering_options={"respect_git_ignore": False}))
    assert loose.endswith(
        f"(\"{tree / 'build'}\" is ignored by the default excludes (rule 'build/'), so its 2 entries are not "
        "listed; the default excludes always apply, and no parameter of this tool turns them off.)"
    )


async def test_listing_keeps_protected_paths_out_whatever_the_options(tree: Path) -> None:
    loose = {"respect_git_ignore": False, "respect_gemini_ignore": False}
    error_text(await ls(tree, ".git", file_filtering_options=loose))
    top = text_of(await ls(tree, ".", file_filtering_options=loose))
    assert ".env" not in top and "[DIR] .git\n" not in top + "\n"
    assert "[DIR] out" in top and "[DIR] gen" in top


# -- search shares the explanation -------------------------------------------------------------------------


async def test_search_into_an_ignored_directory_uses_the_same_words(tree: Path) -> None:
    write_files(tree, {"out/o.py": "TOKEN\n"})
    text = text_of(await call_tool(tree, "search_file_content", {"pattern": "TOKEN", "path": str(tree / "out")}))
    assert f"\"{tree / 'out'}\" is ignored by .gitignore (rule 'out/'), so nothing in it is searched" in text
