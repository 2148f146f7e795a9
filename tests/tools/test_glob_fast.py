"""glob's fast paths: the rg listing given the pattern's file name as `--glob`s (files judged by the rules
afterwards, where a rule could hide them), the columns it keeps, and the ordering done on them. Each is
checked against the Python walk or against the straightforward computation it replaces."""

from __future__ import annotations

import os
import stat
import time
import warnings
from pathlib import Path

import pytest

from tests.conftest import text_of
from tests.tools.test_glob import glob, make, no_rg, paths, rg_runs  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

RECENT = time.time() - 600

# Nested .gitignores that hide files by name, directories whose names match the glob, hidden and protected
# names, and letters that Python folds with non-ASCII ones (rg's globs then are a superset of the pattern).
TREE = {
    ".gitignore": "*.log\n",
    "top.py": "",
    "src/a.py": "",
    "src/gen/.gitignore": "generated_*\n!generated_keep.py\n",
    "src/gen/generated_x.py": "",
    "src/gen/generated_keep.py": "",
    "src/gen/plain.py": "",
    "src/gen/deeper/generated_y.py": "",  # a .gitignore governs its whole subtree
    "src/gen/deeper/z.py": "",
    "lib/.gitignore": "Vendor.PY/\nold.py/\n",
    "lib/Vendor.PY/v.py": "",  # an ignored directory whose name matches the glob (any case)
    "lib/old.py/w.py": "",
    "lib/Other.Py/o.py": "",  # a directory matching the glob that nothing ignores
    "lib/sub/.gitignore": "*.py\n",
    "lib/sub/hidden.py": "",
    "lib/sub/shown.md": "",
    "deep/a/b/c/.gitignore": "skip*\n",
    "deep/a/b/c/skip.py": "",
    "deep/a/b/c/keep.py": "",
    "deep/a/b/c/d/skip2.py": "",
    "docs/main.r\u017f": "",  # matches **/*.rs case-insensitively in Python
    "docs/MAIN.RS": "",
    "docs/main.rb": "",  # rg's glob for *.rs (case folded) lets these through; the pattern does not
    "docs/main.rust": "",
    "docs/.gitignore": "",
    ".hidden/h.py": "",
    "src/.env": "",
    "src/.env.example": "",
}

CASES = [
    ("**/*.py", {}),
    ("**/*.PY", {"case_sensitive": True}),
    ("**/*.rs", {}),
    ("**/generated_*", {}),
    ("**/.gitignore", {}),
    ("**/*", {}),
    ("**/*.{py,md}", {}),
    ("*.py", {}),
    ("**/*.py", {"respect_git_ignore": False}),
    ("**/*.py", {"path": "src"}),
    ("**/*.py", {"path": "deep/a"}),
    ("gen/**/*.py", {"path": "src"}),
]


def build(root: Path, geminiignore: str | None = None) -> None:
    make(root, *[name for name, content in TREE.items() if not content])
    for name, content in TREE.items():
        if content:
            (root / name).write_text(content)
    for name in ("src/a.py", "src/gen/plain.py", "lib/Other.Py/o.py"):
        os.utime(root / name, (RECENT, RECENT))  # recent, with one shared mtime
    if geminiignore is not None:
        (root / ".geminiignore").write_text(geminiignore)


@pytest.mark.parametrize("geminiignore", [None, "plain.py\nlib/Other.Py/\n"])
@pytest.mark.parametrize(("pattern", "extra"), CASES)
async def test_the_glob_listing_matches_the_walk(
    root: Path, no_rg, rg_runs, pattern: str, extra: dict, geminiignore: str | None
) -> None:
    build(root, geminiignore)
    if "path" in extra:
        extra = {**extra, "path": str(root / extra["path"])}
    fast = await glob(root, pattern, **extra)
    if "/" in pattern or "**" in pattern:
        assert rg_runs and all(rg_runs), "the rg enumerator should have been used"
    else:
        assert rg_runs == [], "a top-level pattern lists its one directory without rg"
    no_rg()
    slow = await glob(root, pattern, **extra)
    assert text_of(fast) == text_of(slow)
    assert fast.structured == slow.structured


async def test_rules_in_nested_gitignores_hide_files_by_name(root: Path, rg_runs) -> None:
    build(root)
    shown = paths(await glob(root, "**/*.py"))
    assert rg_runs == [True]
    assert [p[len(str(root)) + 1 :] for p in shown] == [
        "lib/Other.Py/o.py",  # recent (equal times: in walk order)
        "src/a.py",
        "src/gen/plain.py",
        ".hidden/h.py",
        "deep/a/b/c/keep.py",
        "src/gen/deeper/z.py",
        "src/gen/generated_keep.py",
        "top.py",
    ]


async def test_gitignore_files_are_listed_only_when_the_pattern_asks(root: Path, rg_runs) -> None:
    build(root)
    every = [p[len(str(root)) + 1 :] for p in paths(await glob(root, "**/*"))]
    assert ".gitignore" in every and "src/gen/.gitignore" in every
    asked = [p[len(str(root)) + 1 :] for p in paths(await glob(root, "**/*.gitignore"))]
    assert sorted(asked) == sorted(
        [".gitignore", "src/gen/.gitignore", "lib/.gitignore", "lib/sub/.gitignore", "deep/a/b/c/.gitignore",
         "docs/.gitignore"]
    )
    assert not any(p.endswith(".gitignore") for p in paths(await glob(root, "**/*.py")))
    assert rg_runs == [True, True, True]


async def test_an_ignored_directory_matching_the_glob_in_a_batch_without_dots(root: Path, rg_runs) -> None:
    """No path of the listing starts a component with a dot (once rg's .gitignore entries are set aside),
    so the re-check is skipped unless a directory could match the glob: here one does, in another case."""
    (root / "lib").mkdir()
    (root / "lib" / ".gitignore").write_text("Vendor.PY/\n")
    make(root, "lib/Vendor.PY/v.py", "lib/Vendor.PY/w.PY", "lib/x.py", "lib/x.PY", "y.py")
    assert paths(await glob(root, "**/*.py", case_sensitive=True)) == [str(root / "lib/x.py"), str(root / "y.py")]
    assert paths(await glob(root, "**/*.PY", case_sensitive=True)) == [str(root / "lib/x.PY")]
    assert rg_runs == [True, True]


def test_a_run_that_did_not_list_every_gitignore_reads_them_from_the_disk(root: Path) -> None:
    """Files are judged once rg is done; if it was stopped early, a .gitignore it never listed still
    counts (read from the disk), where after a complete run only the listed ones are read."""
    from coretools.sandbox.ignore import IgnoreOptions
    from coretools.sandbox.gateway import Workspace
    from coretools.sandbox.walker import GlobRun
    from coretools.sandbox.rgglobs import name_filter
    from coretools.sandbox.walker import _StatSink

    (root / "d").mkdir()
    (root / "d" / ".gitignore").write_text("generated_*\n")
    make(root, "d/generated_1.py", "d/keep.py")
    ws = Workspace([str(root)])
    try:
        kept = {}
        for complete in (False, True):
            run = GlobRun(ws, 0, "", IgnoreOptions(), name_filter("**/*.py", False), None)
            sink = _StatSink(ws, None, None)
            sink.add(0, "", ["d/generated_1.py", "d/keep.py"])  # as if rg had listed no .gitignore yet
            run.judge_files(sink, complete=complete)
            sink.close()
            kept[complete] = sink.table.rels
    finally:
        ws.close()
    assert kept == {False: ["d/keep.py"], True: ["d/generated_1.py", "d/keep.py"]}


def test_a_run_cut_short_still_judges_its_files(root: Path) -> None:
    """When rg is stopped before the end, the .gitignores it has not listed yet are read from the disk."""
    import anyio

    from coretools.sandbox.ignore import IgnoreOptions
    from coretools.sandbox.gateway import Workspace
    from coretools.sandbox.paths import Location, WalkBounds, WalkReport
    from coretools.sandbox.rgglobs import name_filter
    from coretools.sandbox.walker import find_files

    (root / "d").mkdir()
    (root / "d" / ".gitignore").write_text("generated_*\n")
    make(root, *[f"d/generated_{i}.py" for i in range(5)], *[f"d/keep_{i}.py" for i in range(40)])
    ws = Workspace([str(root)])
    report = WalkReport()

    def work():
        return find_files(
            ws, Location(0, "", str(root)), IgnoreOptions(), None, report, bounds=WalkBounds(max_entries=10),
            names=name_filter("**/*.py", False),
        )

    try:
        table = anyio.run(anyio.to_thread.run_sync, work)
    finally:
        ws.close()
    assert report.truncated == "stopped after 10 entries"
    assert table.rels and all(rel.startswith("d/keep_") for rel in table.rels)
    assert len(table.rels) == len(table.mtimes) == len(table.sizes) <= 10


async def test_files_that_change_while_listed_are_dropped_and_the_rest_kept(
    root: Path, rg_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between rg's listing and the stat, one file goes away and one becomes a FIFO: neither is shown, and
    the columns of the others stay aligned (a batch bigger than one stat step)."""
    from coretools.sandbox.nofollow import NoFollowView

    names = [f"f{i:03}.py" for i in range(250)]
    make(root, *names)
    for i, name in enumerate(names):
        os.utime(root / name, (RECENT - i, RECENT - i))  # newest first: f000, f001, ...
    stat_them = NoFollowView.lstat_many
    changed = []

    def change_then_stat(self, rels):
        if not changed:  # before the first stat
            (root / "f007.py").unlink()
            (root / "f123.py").unlink()
            os.mkfifo(root / "f123.py")
            changed.append(True)
        return stat_them(self, rels)

    monkeypatch.setattr(NoFollowView, "lstat_many", change_then_stat)
    result = await glob(root, "**/*.py")
    assert changed and rg_runs == [True]
    assert paths(result) == [str(root / n) for n in names if n not in ("f007.py", "f123.py")]
    assert stat.S_ISFIFO(os.lstat(root / "f123.py").st_mode)


# -- ordering on columns ----------------------------------------------------------------------------------


def reference_order(ws, tables, now: float, limit: int) -> list[str]:
    """glob's order as it was computed before the columns: a tuple per file, one sort."""
    from coretools.tools.glob import RECENT_SECONDS
    from coretools.sandbox.walker import walk_order

    found = [
        (ws.shown_path(t.root, rel), mtime, scope, rel)
        for scope, t in enumerate(tables)
        for rel, mtime in zip(t.rels, t.mtimes)
    ]
    recent = sorted((f for f in found if now - f[1] < RECENT_SECONDS), key=lambda f: (-f[1], f[2], walk_order(f[3])))
    older = sorted(f[0] for f in found if now - f[1] >= RECENT_SECONDS)
    return ([f[0] for f in recent] + older)[:limit]


def test_first_in_order_agrees_with_one_sort_of_tuples(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from coretools.sandbox.gateway import Workspace
    from coretools.tools.glob import first_in_order
    from coretools.sandbox.walker import FileTable

    roots = []
    for name in ("r1", "r2", "r1x"):  # r1x: a root whose path extends another's
        (tmp_path / name).mkdir()
        roots.append(str(tmp_path / name))
    ws = Workspace(roots)
    now = 1_800_000_000.0
    # few distinct times, on both sides of the 24-hour line and on it: many ties
    times = hs.sampled_from([now - 5, now - 3600, now - 86400 + 1, now - 86400, now - 86400 * 3, now + 50])
    rel = hs.lists(hs.sampled_from(["a", "b", "B", "a b", "é", "z"]), min_size=1, max_size=3).map("/".join)
    table = hs.lists(hs.tuples(rel, times), max_size=25, unique_by=lambda row: row[0])

    @settings(max_examples=300, deadline=None)
    @given(hs.lists(hs.tuples(hs.integers(0, 2), table), min_size=1, max_size=3), hs.integers(1, 30))
    def check(scopes, limit):
        tables = [FileTable(r, [x for x, _ in rows], [m for _, m in rows], [0] * len(rows)) for r, rows in scopes]
        assert first_in_order(ws, tables, now, limit) == reference_order(ws, tables, now, limit)

    try:
        check()
    finally:
        ws.close()


# -- helpers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "name", "may_match"),
    [
        (["generated_*"], "generated_x.py", True),
        (["generated_*"], "x.py", False),
        (["!keep.py"], "keep.py", True),  # a negation counts: it can bring a file back
        (["a/b/*.py"], "x.py", True),
        (["src/**"], "anything", True),
        (["build/"], "build", True),
        (["\\#x"], "#x", True),
        (["*.PY"], "x.py", True),  # case is ignored (a superset)
        (["*.log", "tmp/"], "x.py", False),
        ([], "x.py", False),
    ],
)
def test_file_name_test(lines: list[str], name: str, may_match: bool) -> None:
    from coretools.sandbox.ripgrep import file_name_test

    assert file_name_test(lines)(name) is may_match


def test_file_name_test_is_a_superset_of_what_a_rule_hides_by_name() -> None:
    """Whenever a gitignore line matches `d/<name>` but not the directory `d/` itself (which the walk judges
    on its own), the test says the name could match."""
    import pathspec
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from coretools.sandbox.ripgrep import file_name_test

    segment = hs.text(alphabet="ab.*?[]!/\\", min_size=1, max_size=6)
    name = hs.text(alphabet="abAB.[]!\\", min_size=1, max_size=5)

    @settings(max_examples=500, deadline=None)
    @given(segment, name)
    def check(line: str, file_name: str) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # odd brackets: "possible nested set"
                spec = pathspec.GitIgnoreSpec.from_lines([line])
        except Exception:  # noqa: BLE001 - not a pattern pathspec accepts
            return
        if spec.match_file(f"d/{file_name}") and not spec.match_file("d/"):
            assert file_name_test([line])(file_name), (line, file_name)

    check()


def test_name_filter_globs_match_like_its_regex_in_rg(root: Path) -> None:
    """Where `globs_exact` is claimed, rg's globs accept exactly the names the regex does (so the regex can
    be skipped); elsewhere they accept at least those."""
    import subprocess

    from coretools.sandbox.rgglobs import name_filter
    from coretools.sandbox.ripgrep import find_rg

    rg = find_rg()
    if rg is None:
        pytest.skip("no ripgrep binary runs here")
    names = ["a.py", "A.PY", "a.pY", "b.pyc", "x.rs", "x.r\u017f", "X.RS", "kit.md", "\u212aIT.md", "a b.txt",
             "a-b.txt", "main.ts", "notes.MD", "a.py.bak", ".py", "pyc"]
    make(root, *names)
    patterns = ["**/*.py", "*.py", "**/*.PY", "**/*.rs", "**/kit.md", "**/*.{md,txt}", "**/a?b.txt", "**/*"]
    for case_sensitive in (False, True):
        for pattern in patterns:
            flt = name_filter(pattern, case_sensitive)
            if flt is None:
                continue
            argv = [rg, "--files", "--null", "--no-config", "--hidden", "--no-ignore"]
            for g in flt.globs:
                argv += ["--glob", g]
            listed = subprocess.run([*argv, "."], cwd=root, capture_output=True, check=True).stdout
            by_rg = {raw[2:].decode() for raw in listed.split(b"\0") if raw}
            by_regex = {n for n in names if flt.regex.search(b"./" + n.encode())}
            assert by_regex <= by_rg, (pattern, case_sensitive)
            if flt.globs_exact:
                assert by_rg == by_regex, (pattern, case_sensitive)
