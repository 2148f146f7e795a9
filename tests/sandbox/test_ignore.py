"""The ignore engine: defaults, .git/info/exclude, nested .gitignore anchoring, negation, .geminiignore
precedence, directory patterns, and cache invalidation when an ignore file changes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from coretools.sandbox.ignore import IgnoreOptions
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.paths import WalkReport
from coretools.sandbox.walker import walk
from tests.conftest import call_tool, text_of
from tests.readside import write_files

ALL = IgnoreOptions()
NO_GIT = IgnoreOptions(git=False)
NO_GEMINI = IgnoreOptions(gemini=False)
NO_DEFAULTS = IgnoreOptions(defaults=False)
NOTHING = IgnoreOptions(git=False, gemini=False, defaults=False)


@pytest.fixture
def ws(root: Path) -> Iterator[Workspace]:
    workspace = Workspace([str(root)])
    yield workspace
    workspace.close()


def write(root: Path, rel: str, text: str = "") -> Path:
    write_files(root, {rel: text})
    return root / rel


def ignored(ws: Workspace, rel: str, *, is_dir: bool = False, options: IgnoreOptions = ALL) -> bool:
    return ws.is_ignored(0, rel, is_dir, options)


def walked(ws: Workspace, options: IgnoreOptions = ALL) -> list[str]:
    loc = ws.locate(".")
    return sorted(e.rel for e in walk(ws, loc, options))


# -- defaults ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel,is_dir",
    [
        ("node_modules", True),
        ("a/b/node_modules", True),
        ("node_modules/pkg/index.js", False),
        (".git", True),
        ("dist", True),
        ("build", True),
        ("coverage", True),
        ("__pycache__", True),
        (".vscode", True),
        (".idea", True),
        ("bower_components", True),
        ("pkg/mod.pyc", False),
        ("x.pyo", False),
        ("deep/.DS_Store", False),
    ],
)
def test_default_excludes(ws: Workspace, rel: str, is_dir: bool) -> None:
    assert ignored(ws, rel, is_dir=is_dir)
    assert not ignored(ws, rel, is_dir=is_dir, options=NO_DEFAULTS)


def test_default_directory_excludes_do_not_hide_files_of_that_name(ws: Workspace) -> None:
    assert not ignored(ws, "dist", is_dir=False)
    assert not ignored(ws, "src/build", is_dir=False)
    assert not ignored(ws, "src/main.py")


def test_the_root_itself_is_never_ignored(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "*\n")
    assert not ignored(ws, "")


# -- .gitignore ----------------------------------------------------------------------------------------


def test_root_gitignore_patterns(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "# comment\n\n*.log\n/top.txt\ndocs/tmp\n   indented.txt\n\\#hash.txt\n")
    assert ignored(ws, "app.log") and ignored(ws, "a/b/app.log")
    assert ignored(ws, "top.txt") and not ignored(ws, "sub/top.txt")
    assert ignored(ws, "docs/tmp") and not ignored(ws, "x/docs/tmp")
    assert ignored(ws, "indented.txt")  # leading whitespace is trimmed, as Gemini CLI does
    assert ignored(ws, "#hash.txt")
    assert not ignored(ws, "comment") and not ignored(ws, "# comment")


def test_nested_gitignore_is_anchored_at_its_directory(root: Path, ws: Workspace) -> None:
    write(root, "sub/.gitignore", "foo\n/bar\na/b\n")
    # `foo` (no slash): any depth below sub/, but not outside it.
    assert ignored(ws, "sub/foo") and ignored(ws, "sub/x/y/foo")
    assert not ignored(ws, "foo") and not ignored(ws, "other/foo")
    # `/bar`: only sub/bar.
    assert ignored(ws, "sub/bar") and not ignored(ws, "sub/x/bar") and not ignored(ws, "bar")
    # `a/b` (inner slash): relative to sub/.
    assert ignored(ws, "sub/a/b") and not ignored(ws, "a/b") and not ignored(ws, "sub/x/a/b")


def test_deeper_gitignore_overrides_a_shallower_one(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "*.txt\n")
    write(root, "keep/.gitignore", "!important.txt\n")
    assert ignored(ws, "keep/other.txt")
    assert not ignored(ws, "keep/important.txt")
    assert ignored(ws, "important.txt")


def test_negation_in_the_same_file(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "*.log\n!keep.log\n")
    assert ignored(ws, "drop.log")
    assert not ignored(ws, "keep.log") and not ignored(ws, "d/keep.log")


def test_nothing_comes_back_from_inside_an_ignored_directory(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "vendor/\n!vendor/keep.txt\n")
    write(root, "vendor/keep.txt")
    assert ignored(ws, "vendor", is_dir=True)
    assert ignored(ws, "vendor/keep.txt")
    assert "vendor/keep.txt" not in walked(ws)


def test_directory_pattern_hides_directories_but_not_files(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "out/\n")
    write(root, "out/a.txt")
    write(root, "src/out")  # a file named out
    assert ignored(ws, "out", is_dir=True)
    assert ignored(ws, "out/a.txt")
    assert not ignored(ws, "src/out", is_dir=False)
    assert walked(ws) == [".gitignore", "src/out"]


def test_gitignore_above_the_root_is_not_read(root: Path, ws: Workspace) -> None:
    (root.parent / ".gitignore").write_text("*.txt\nroot/\n")
    assert not ignored(ws, "a.txt")


def test_gitignore_can_be_turned_off(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "*.log\n")
    assert ignored(ws, "a.log")
    assert not ignored(ws, "a.log", options=NO_GIT)


def test_git_info_exclude(root: Path, ws: Workspace) -> None:
    write(root, ".git/info/exclude", "local-only/\n*.scratch\n")
    assert ignored(ws, "local-only", is_dir=True)
    assert ignored(ws, "deep/x.scratch")
    assert not ignored(ws, "deep/x.scratch", options=NO_GIT)


def test_gitignore_overrides_info_exclude(root: Path, ws: Workspace) -> None:
    write(root, ".git/info/exclude", "*.scratch\n")
    write(root, ".gitignore", "!wanted.scratch\n")
    assert ignored(ws, "other.scratch")
    assert not ignored(ws, "wanted.scratch")


# -- .geminiignore -------------------------------------------------------------------------------------


def test_geminiignore_hides(root: Path, ws: Workspace) -> None:
    write(root, ".geminiignore", "secrets/\n*.pem\n")
    assert ignored(ws, "secrets", is_dir=True) and ignored(ws, "secrets/a.txt")
    assert ignored(ws, "deep/key.pem")
    assert not ignored(ws, "deep/key.pem", options=NO_GEMINI)


def test_geminiignore_negation_brings_back_a_git_ignored_file(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "*.env.json\n")
    write(root, ".geminiignore", "!config.env.json\n")
    assert not ignored(ws, "config.env.json")
    assert ignored(ws, "other.env.json")
    # With .geminiignore not respected there is nothing to undo the .gitignore rule.
    assert ignored(ws, "config.env.json", options=NO_GEMINI)


def test_geminiignore_negation_can_bring_back_a_default_exclude(root: Path, ws: Workspace) -> None:
    write(root, ".geminiignore", "!build/\n")
    write(root, "build/gen.py", "x")
    assert not ignored(ws, "build", is_dir=True)
    assert "build/gen.py" in walked(ws)


def test_geminiignore_is_read_only_at_the_root(root: Path, ws: Workspace) -> None:
    write(root, "sub/.geminiignore", "*.txt\n")
    assert not ignored(ws, "sub/a.txt")


def test_geminiignore_wins_over_gitignore_negation(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "!a.txt\n")
    write(root, ".geminiignore", "a.txt\n")
    assert ignored(ws, "a.txt")


# -- walks and caching ---------------------------------------------------------------------------------


def test_walk_prunes_ignored_directories_and_counts_them(root: Path, ws: Workspace) -> None:
    write(root, ".gitignore", "gen/\n*.tmp\n")
    for rel in ("gen/a.py", "gen/b/c.py", "src/x.py", "src/y.tmp", "node_modules/m/i.js"):
        write(root, rel)
    report = WalkReport()
    files = sorted(e.rel for e in walk(ws, ws.locate("."), ALL, report=report))
    assert files == [".gitignore", "src/x.py"]
    assert report.ignored == 3  # gen/, node_modules/, src/y.tmp: directories count once
    assert walked(ws, NOTHING) == sorted(
        [".gitignore", "gen/a.py", "gen/b/c.py", "src/x.py", "src/y.tmp", "node_modules/m/i.js"]
    )


def test_changed_gitignore_is_reread(root: Path, ws: Workspace) -> None:
    gi = write(root, ".gitignore", "*.log\n")
    assert ignored(ws, "a.log") and not ignored(ws, "a.txt")
    gi.write_text("*.txt\n")  # same size: the cache must notice the new mtime
    stamp = os.stat(gi).st_mtime_ns + 5_000_000_000
    os.utime(gi, ns=(stamp, stamp))
    assert ignored(ws, "a.txt") and not ignored(ws, "a.log")
    gi.write_text("*.txt\n*.md\n")
    assert ignored(ws, "a.md")


def test_created_and_deleted_gitignore_are_noticed(root: Path, ws: Workspace) -> None:
    assert not ignored(ws, "sub/a.log")
    gi = write(root, "sub/.gitignore", "*.log\n")
    assert ignored(ws, "sub/a.log")
    gi.unlink()
    assert not ignored(ws, "sub/a.log")


def test_changed_geminiignore_applies_to_the_next_tool_call(root: Path) -> None:
    import anyio

    write(root, "a.txt", "alpha")
    write(root, "b.txt", "beta")

    async def listing() -> str:
        return text_of(await call_tool(root, "list_directory", {"path": str(root)}))

    assert "a.txt" in anyio.run(listing)
    write(root, ".geminiignore", "a.txt\n")
    text = anyio.run(listing)
    assert "a.txt" not in text and "b.txt" in text


def test_unreadable_or_huge_ignore_files_are_skipped(root: Path, ws: Workspace) -> None:
    (root / ".gitignore").mkdir()  # not a file: ignored, no crash
    assert not ignored(ws, "a.log")
    write(root, "sub/.gitignore", "*.log\n" + "#" * (2 << 20))  # over 1 MiB: not parsed
    assert not ignored(ws, "sub/a.log")
