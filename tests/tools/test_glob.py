"""glob: matching (globstar, braces, extglob, case), ordering by recency, ignore rules, roots and errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import call_tool, text_of
from tests.readside import error_text, write_files

pytestmark = pytest.mark.anyio

OLD = time.time() - 10 * 24 * 3600  # well outside the 24-hour "recent" window


async def glob(roots: Path | list[Path], pattern: str, *flags: str, **extra):
    return await call_tool(roots, "glob", {"pattern": pattern, **extra}, *flags)


def paths(result) -> list[str]:
    """The listed absolute paths, in order."""
    return [line for line in text_of(result).splitlines()[1:] if line.startswith("/")]


def make(root: Path, *names: str, mtime: float = OLD) -> None:
    """Files whose content is their name, old unless told otherwise."""
    write_files(root, {name: name for name in names}, mtime=mtime)


async def test_globstar_finds_files_at_every_depth(root: Path) -> None:
    make(root, "a.py", "src/b.py", "src/deep/er/c.py", "src/readme.md")
    result = await glob(root, "**/*.py")
    assert not result.is_error
    assert paths(result) == [str(root / "a.py"), str(root / "src/b.py"), str(root / "src/deep/er/c.py")]
    assert text_of(result).startswith(
        f'Found 3 file(s) matching "**/*.py" within {root}, sorted by modification time (newest first):'
    )
    assert result.structured["files"] == paths(result)


async def test_pattern_without_slash_matches_only_at_the_top(root: Path) -> None:
    make(root, "a.py", "src/b.py")
    assert paths(await glob(root, "*.py")) == [str(root / "a.py")]


async def test_pattern_with_literal_directory_prefix(root: Path) -> None:
    make(root, "src/app/x.ts", "src/app/sub/y.ts", "src/other/z.ts", "lib/app/w.ts")
    assert paths(await glob(root, "src/app/**/*.ts")) == [str(root / "src/app/sub/y.ts"), str(root / "src/app/x.ts")]


async def test_recent_files_first_newest_first_then_alphabetical(root: Path) -> None:
    now = time.time()
    make(root, "old_b.txt", "old_a.txt", "old_c.txt")
    make(root, "new1.txt", mtime=now - 3600)
    make(root, "new2.txt", mtime=now - 60)
    make(root, "new3.txt", mtime=now - 7200)
    result = await glob(root, "*.txt")
    assert paths(result) == [
        str(root / "new2.txt"),
        str(root / "new1.txt"),
        str(root / "new3.txt"),
        str(root / "old_a.txt"),
        str(root / "old_b.txt"),
        str(root / "old_c.txt"),
    ]


async def test_case_insensitive_by_default_and_sensitive_on_request(root: Path) -> None:
    make(root, "Upper.PY", "lower.py")
    assert paths(await glob(root, "*.py")) == [str(root / "Upper.PY"), str(root / "lower.py")]
    assert paths(await glob(root, "*.py", case_sensitive=True)) == [str(root / "lower.py")]
    assert paths(await glob(root, "*.PY", case_sensitive=True)) == [str(root / "Upper.PY")]


async def test_braces_and_extglob(root: Path) -> None:
    make(root, "a.md", "b.txt", "c.rst", "test_x.py", "x_test.py", "main.py")
    assert paths(await glob(root, "*.{md,txt}")) == [str(root / "a.md"), str(root / "b.txt")]
    assert paths(await glob(root, "@(test_*|*_test).py")) == [str(root / "test_x.py"), str(root / "x_test.py")]
    assert paths(await glob(root, "!(*test*).py")) == [str(root / "main.py")]
    assert paths(await glob(root, "?.rst")) == [str(root / "c.rst")]


async def test_dotfiles_are_matched(root: Path) -> None:
    make(root, ".eslintrc.json", "package.json")
    assert paths(await glob(root, "*.json")) == [str(root / ".eslintrc.json"), str(root / "package.json")]


async def test_literal_name_with_brackets(root: Path) -> None:
    make(root, "file[1].txt", "file1.txt", "(draft) notes.md")
    assert paths(await glob(root, "file[1].txt")) == [str(root / "file[1].txt")]
    assert paths(await glob(root, "(draft) notes.md")) == [str(root / "(draft) notes.md")]
    # Without a literal match, brackets are a character class.
    assert paths(await glob(root, "file[0-9].txt")) == [str(root / "file1.txt")]


async def test_absolute_pattern_inside_the_root(root: Path) -> None:
    make(root, "src/a.py", "src/b.js")
    assert paths(await glob(root, f"{root}/src/*.py")) == [str(root / "src/a.py")]


async def test_absolute_pattern_outside_every_root_finds_nothing(root: Path) -> None:
    result = await glob(root, f"{root.parent}/root-evil/*")
    assert not result.is_error
    assert "No files found" in text_of(result)
    assert "secret" not in text_of(result)


async def test_dotdot_pattern_does_not_escape(root: Path) -> None:
    result = await glob(root, "../root-evil/*.txt")
    assert "secret.txt" not in text_of(result)


async def test_no_match_message(root: Path) -> None:
    make(root, "a.py")
    result = await glob(root, "*.zig")
    assert not result.is_error
    assert text_of(result) == f'No files found matching pattern "*.zig" within {root}.'
    assert result.structured["files"] == []


async def test_ignored_files_are_skipped_and_counted(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\ngen/\n")
    (root / ".geminiignore").write_text("secret.txt\n")
    make(root, "keep.txt", "secret.txt", "a.log", "gen/x.txt", "node_modules/pkg/index.txt", "dist/out.txt")
    result = await glob(root, "**/*.txt")
    assert paths(result) == [str(root / "keep.txt")]
    # With matches, the ignored count is not worked out (it would cost a second pass).
    assert text_of(result).splitlines()[0] == (
        f'Found 1 file(s) matching "**/*.txt" within {root}, sorted by modification time (newest first):'
    )
    assert result.structured["ignored"] is None


@pytest.mark.parametrize("engine", ["ripgrep", "walk"])
async def test_no_match_counts_only_hidden_files_matching_the_pattern(root: Path, no_rg, rg_runs, engine: str) -> None:
    """Gemini CLI's meaning: files that match the pattern but .gitignore/.geminiignore hid. An ignored file
    that does not match, and matches in default-excluded folders (node_modules) or protected paths, do not
    count."""
    if engine == "walk":
        no_rg()
    (root / ".gitignore").write_text("*.log\nx.txt\ngen/\n")
    (root / ".geminiignore").write_text("secret.log\n")
    make(root, "a.log", "secret.log", "x.txt", "gen/b.log", "gen/y.txt", "node_modules/pkg/c.log", "keep.md")
    result = await glob(root, "**/*.log")
    assert text_of(result) == f'No files found matching pattern "**/*.log" within {root} (3 files were ignored).'
    assert result.structured == {"files": [], "ignored": 3}
    assert rg_runs and all(rg_runs) == (engine == "ripgrep")
    none = await glob(root, "**/*.zig")
    assert text_of(none) == f'No files found matching pattern "**/*.zig" within {root}.'
    assert none.structured["ignored"] == 0
    # .gitignore off: only what .geminiignore hid counts.
    assert "(1 files were ignored)" in text_of(await glob(root, "secret.log", respect_git_ignore=False))


async def test_respect_git_ignore_false(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\n")
    (root / ".geminiignore").write_text("hidden.log\n")
    make(root, "a.log", "hidden.log", "node_modules/m.log")
    result = await glob(root, "**/*.log", respect_git_ignore=False)
    # .gitignore is off; .geminiignore and the default excludes still apply.
    assert paths(result) == [str(root / "a.log")]


async def test_no_match_mentions_ignored_count(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\n")
    make(root, "a.log")
    text = text_of(await glob(root, "*.log"))
    assert text.startswith('No files found matching pattern "*.log"')
    assert "(1 files were ignored)" in text


async def test_directory_symlinks_are_not_followed(root: Path, tmp_path: Path) -> None:
    make(root, "real/a.py")
    os.symlink(root / "real", root / "loop")
    os.symlink(root, root / "real" / "back")  # a cycle
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.py").write_text("")
    os.symlink(outside, root / "out")
    assert paths(await glob(root, "**/*.py")) == [str(root / "real/a.py")]


async def test_only_files_are_returned(root: Path) -> None:
    (root / "pkg.py").mkdir()
    make(root, "mod.py")
    assert paths(await glob(root, "*.py")) == [str(root / "mod.py")]


async def test_several_roots_are_all_searched(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    make(root, "a.md")
    make(other, "b.md")
    result = await glob([root, other], "*.md")
    assert paths(result) == [str(other / "b.md"), str(root / "a.md")]  # older files: by full path
    assert 'across 2 workspace directories' in text_of(result)
    none = await glob([root, other], "*.nope")
    assert text_of(none) == 'No files found matching pattern "*.nope" across 2 workspace directories.'


async def test_path_narrows_to_one_directory(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    make(root, "a.md", "docs/b.md")
    make(other, "c.md")
    assert paths(await glob([root, other], "*.md", path=str(root / "docs"))) == [str(root / "docs/b.md")]
    assert paths(await glob([root, other], "*.md", path=str(other))) == [str(other / "c.md")]
    assert paths(await glob([root, other], "*.md", path="docs")) == [str(root / "docs/b.md")]


async def test_path_errors(root: Path) -> None:
    make(root, "f.txt")
    not_dir = error_text(await glob(root, "*", path=str(root / "f.txt")), "path_is_not_a_directory")
    assert not_dir == f"Search path is not a directory: {root / 'f.txt'}"
    assert str(root / "missing") in error_text(await glob(root, "*", path=str(root / "missing")), "file_not_found")
    outside = error_text(await glob(root, "*", path=str(root.parent / "root-evil")), "path_not_in_workspace")
    assert "Path not in workspace" in outside
    assert "Path not in workspace" in error_text(await glob(root, "*", path=".."))


async def test_empty_pattern(root: Path) -> None:
    assert error_text(await glob(root, "   ")) == "The 'pattern' parameter cannot be empty."


# -- the ripgrep enumerator (rg --files) and the Python walk must give the same answers ---------------------

TREE = {
    ".gitignore": "*.log\n/gen/\nold.py/\nskip_*.py\n",
    ".geminiignore": "private/\n*.secret.md\n",
    "a.txt": "",
    "a b.txt": "",
    "a-b.txt": "",
    "a/inner.txt": "",
    "a.d/x.txt": "",
    "A/upper.TXT": "",
    "src/main.py": "",
    "src/Util.PY": "",
    "src/app.log": "",
    "src/.gitignore": "!app.log\ntmp_*\n",
    "src/tmp_1.py": "",
    "src/lib/deep/mod.py": "",
    "src/lib/notes.md": "",
    "src/lib/x.secret.md": "",
    "docs/guide.md": "",
    "docs/ſpecial.md": "",
    "private/p.txt": "",
    "gen/out.py": "",
    "old.py/x.py": "",  # an ignored directory whose name matches the glob rg is given
    "src/skip_me.py": "",  # a file an ignore rule hides by its name, though rg's glob lists it
    "node_modules/dep/index.js": "",
    "build/b.py": "",
    ".env": "",
    ".env.example": "",
    ".hidden/h.py": "",
}


def build_tree(root: Path, recent: float) -> None:
    make(root, *[n for n, c in TREE.items() if not c])
    for name, content in TREE.items():
        if content:
            (root / name).write_text(content)
    for name in ("a.txt", "a b.txt", "a/inner.txt", "src/main.py", "src/lib/deep/mod.py"):
        os.utime(root / name, (recent, recent))  # recent, with one shared mtime: order among equals matters
    (root / ".env.dir").mkdir()
    os.symlink(root / "src", root / "src-link")
    os.symlink(root / "a.txt", root / "link.txt")


@pytest.fixture
def no_rg(monkeypatch: pytest.MonkeyPatch):
    from coretools.sandbox import ripgrep

    def disable() -> None:
        monkeypatch.setattr(ripgrep, "find_rg", lambda: None)

    return disable


@pytest.fixture
def rg_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, for each directory enumerated, whether rg did it (True) or it fell back to the walk."""
    from coretools.sandbox import walker as walking

    seen: list[bool] = []
    real = walking.rg_files

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(walking, "rg_files", spy)
    return seen


CASES = [
    ("**/*", {}),
    ("**/*.py", {}),
    ("**/*.PY", {"case_sensitive": True}),
    ("*.txt", {}),
    ("**/*.{md,txt}", {}),
    ("src/**/*.py", {}),
    ("**/lib/*.md", {}),
    ("@(a|b)*.txt", {}),
    ("**/*", {"respect_git_ignore": False}),
    ("**/*.md", {"path": "src"}),
]


def top_level(pattern: str) -> bool:
    return "/" not in pattern and "**" not in pattern


@pytest.mark.parametrize(("pattern", "extra"), CASES)
async def test_ripgrep_enumeration_matches_the_walk(root: Path, no_rg, rg_runs, pattern: str, extra: dict) -> None:
    build_tree(root, time.time() - 600)
    if "path" in extra:
        extra = {**extra, "path": str(root / extra["path"])}
    fast = await glob(root, pattern, **extra)
    if top_level(pattern):
        assert rg_runs == [], "a top-level pattern lists its one directory without rg"
    else:
        assert rg_runs and all(rg_runs), "the rg enumerator should have been used"
    no_rg()
    rg_runs.clear()
    slow = await glob(root, pattern, **extra)
    assert rg_runs == [False] * len(rg_runs)
    assert text_of(fast) == text_of(slow)
    assert fast.structured == slow.structured
    assert "DECOY" not in text_of(fast) and ".env\n" not in text_of(fast) + "\n"


async def test_geminiignore_negation_falls_back_to_the_walk(root: Path, rg_runs) -> None:
    make(root, "keep.log", "other.log")
    (root / ".gitignore").write_text("*.log\n")
    (root / ".geminiignore").write_text("!keep.log\n")
    assert paths(await glob(root, "**/*.log")) == [str(root / "keep.log")]
    assert rg_runs == [False]


async def test_a_directory_swapped_for_a_link_after_listing_is_not_shown(
    root: Path, rg_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rg lists d/secret.txt; before it is stat'ed, d becomes a link to the decoy: nothing from there."""
    from coretools.sandbox.nofollow import NoFollowView

    make(root, "d/secret.txt", "top.txt")
    stat_them = NoFollowView.lstat_many
    swapped = []

    def swap_then_stat(self, rels):
        if "d/secret.txt" in rels and not swapped:
            os.rename(root / "d", root / "parked")
            os.symlink(root.parent / "root-evil", root / "d")
            swapped.append(True)
        return stat_them(self, rels)

    monkeypatch.setattr(NoFollowView, "lstat_many", swap_then_stat)
    result = await glob(root, "**/*.txt")
    assert swapped and rg_runs == [True]
    assert paths(result) == [str(root / "top.txt")]


def test_lstat_many_resolves_beneath_the_root_without_links(root: Path) -> None:
    import stat as st

    from coretools.sandbox.gateway import Workspace

    make(root, "a/b.txt", "c.txt", ".git/config")
    os.symlink(root / "a", root / "alias")
    os.symlink(root.parent / "root-evil", root / "out")
    os.symlink(root / "c.txt", root / "c-link")
    ws = Workspace([str(root)])
    try:
        got = ws.lstat_many(0, ["a/b.txt", "c.txt", "alias/b.txt", "out/secret.txt", "../root-evil/secret.txt",
                                "a/../c.txt", "./c.txt", "missing", ".git/config", "c-link", "a"])
    finally:
        ws.close()
    kinds = [None if s is None else st.S_IFMT(s.st_mode) for s in got]
    assert kinds == [st.S_IFREG, st.S_IFREG, None, None, None, None, None, None, None, st.S_IFLNK, st.S_IFDIR]


NAME_CHARS = "aAbsSſkKKiIİı.-_ é/*"


@pytest.mark.parametrize("case_sensitive", [False, True])
def test_name_filter_agrees_with_globmatch(case_sensitive: bool) -> None:
    from hypothesis import example, given, settings
    from hypothesis import strategies as hs

    from coretools.sandbox.matcher import globmatch
    from coretools.sandbox.rgglobs import name_filter

    component = hs.text(alphabet="abskiAS.-_ *", min_size=1, max_size=5)
    pattern = hs.one_of(
        component,
        component.map(lambda c: f"**/{c}"),
        hs.tuples(component, component).map(lambda t: f"**/x/{t[0]}{{{t[1]},b}}"),
        hs.tuples(component, component).map(lambda t: f"{t[0]}{{{t[1]},.s}}"),
    )
    name = hs.text(alphabet=NAME_CHARS.replace("/", "").replace("*", ""), min_size=1, max_size=6)
    path = hs.lists(name, min_size=1, max_size=3).map("/".join)

    @settings(max_examples=400, deadline=None)
    @given(pattern, path)
    @example("**/*.rs", "src/main.r\u017f")  # Python's re pairs s/ſ, k/K (Kelvin), i/İ/ı case-insensitively
    @example("**/kit.md", "docs/\u212a\u0130T.md")
    @example("*.ik", "x.\u0131K")
    @example("*.{md,txt}", "a/b.md")
    @example("*{*,.s}", "A/A")  # the list makes a globstar
    def check(pat: str, rel: str) -> None:
        flt = name_filter(pat, case_sensitive)
        if flt is None or {".", ".."} & set(rel.split("/")):  # rg never reports such components
            return
        said = flt.regex.search(b"./" + rel.encode()) is not None
        truth = globmatch(rel, pat, case_sensitive)
        if flt.exact:
            assert said == truth, (pat, rel)
        else:
            assert said or not truth, (pat, rel)

    check()


async def test_nul_and_overlong_patterns_are_clear_errors(root: Path) -> None:
    make(root, "a.py")
    for pattern, needle in (("*.p\x00y", "NUL character"), ("x" * 50_000, "the limit is")):
        result = await glob(root, pattern)
        assert result.is_error
        assert needle in text_of(result) and "Internal error" not in text_of(result)
