"""search_file_content: output format, cap, include filters, invalid regex, binary and ignored files, both
engines (ripgrep and the pure-Python fallback) compared on the same trees, and cancellation."""

from __future__ import annotations

import os
import re
from pathlib import Path

import anyio
import pytest

from coretools.sandbox.matcher import NodeMatcher
from coretools.sandbox.patterns.include import parse_include
from coretools.sandbox.rgglobs import reroot
from coretools.sandbox.ripgrep import find_rg
from tests.conftest import call_tool, text_of
from tests.readside import write_files

pytestmark = pytest.mark.anyio

ENGINES = ["ripgrep", "python"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    if request.param == "ripgrep" and find_rg() is None:
        pytest.fail("the ripgrep wheel's binary should be available in the test environment")
    return request.param


def write(root: Path, rel: str, content: str | bytes) -> None:
    write_files(root, {rel: content})


async def search(root, engine: str, args: dict, *flags: str):
    return await call_tool(root, "search_file_content", args, "--search-engine", engine, *flags)


def matches(text: str) -> dict[str, list[int]]:
    """`{file: [line numbers]}` from the tool's text output."""
    found: dict[str, list[int]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("File: "):
            current = line[6:]
            found[current] = []
        elif current is not None and (m := re.match(r"L(\d+): ", line)):
            found[current].append(int(m.group(1)))
    return found


def build_tree(root: Path) -> None:
    write(root, "src/app.py", "import os\n\ndef main():\n    print('TOKEN main')\n    return 0\n")
    write(root, "src/util.ts", "export const x = 'token';\n// another Token here\n")
    write(root, "src/view.tsx", "<div>TOKEN</div>\n")
    write(root, "src/gen/out.py", "TOKEN generated\n")
    write(root, "src/deep/tmp_scratch.py", "TOKEN scratch\n")
    write(root, "src/deep/keep.py", "TOKEN kept\n")
    write(root, "docs/readme.md", "no match here\nTOKEN in docs\n")
    write(root, "notes.log", "TOKEN log\n")
    write(root, "node_modules/pkg/index.js", "TOKEN in node_modules\n")
    write(root, "build/out.txt", "TOKEN in build\n")
    write(root, "secret/data.txt", "TOKEN secret\n")
    write(root, ".env", "TOKEN=1\n")
    write(root, ".env.example", "TOKEN=example\n")
    write(root, ".git/config", "TOKEN in git\n")
    write(root, ".hidden/file.txt", "TOKEN hidden dir\n")
    write(root, "bin/blob.bin", b"TOKEN\x00\x01\x02binary\n")
    write(root, ".gitignore", "*.log\n/src/gen/\n")
    write(root, "src/.gitignore", "deep/tmp_*\n")
    write(root, ".geminiignore", "secret/\n")


async def test_output_format(root: Path, engine: str) -> None:
    build_tree(root)
    result = await search(root, engine, {"pattern": "token"})
    text = text_of(result)
    assert not result.is_error, text
    lines = text.splitlines()
    assert lines[0] == 'Found 8 matches in 7 files for pattern "token" in the workspace directory:'
    assert lines[1] == "---"
    assert text.endswith("---")
    assert matches(text) == {
        ".env.example": [1],
        ".hidden/file.txt": [1],
        "docs/readme.md": [2],
        "src/app.py": [4],
        "src/deep/keep.py": [1],
        "src/util.ts": [1, 2],
        "src/view.tsx": [1],
    }
    assert "L4:     print('TOKEN main')" in lines  # indentation kept, case-insensitive match
    assert result.structured["total_matches"] == 8 and result.structured["engine"] == engine


async def test_ignored_protected_and_binary_files_never_matched(root: Path, engine: str) -> None:
    build_tree(root)
    text = text_of(await search(root, engine, {"pattern": "TOKEN"}))
    for hidden in ("notes.log", "src/gen", "tmp_scratch", "node_modules", "build/", "secret/", ".git/", "blob.bin"):
        assert hidden not in text, hidden
    assert "File: .env\n" not in text
    assert "DECOY" not in text


async def test_no_matches(root: Path, engine: str) -> None:
    build_tree(root)
    result = await search(root, engine, {"pattern": "zzz_nothing", "include": "*.py"})
    assert text_of(result) == 'No matches found for pattern "zzz_nothing" in the workspace directory (filter: "*.py").'
    assert not result.is_error


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        ("*.py", {"src/app.py", "src/deep/keep.py"}),
        ("*.{ts,tsx}", {"src/util.ts", "src/view.tsx"}),
        ("docs/**", {"docs/readme.md"}),
        ("src/*.py", {"src/app.py"}),
    ],
)
async def test_include_filters(root: Path, engine: str, include: str, expected: set[str]) -> None:
    build_tree(root)
    text = text_of(await search(root, engine, {"pattern": "token", "include": include}))
    assert set(matches(text)) == expected
    assert f'(filter: "{include}")' in text.splitlines()[0]


@pytest.mark.parametrize("include", ["*.log", "notes.*", "src/gen/*", "**/*.py", "*.{log,py}"])
async def test_include_never_brings_back_ignored_files(root: Path, engine: str, include: str) -> None:
    """In rg a `--glob` beats every ignore rule; a slash-free include is given as a file type instead (which
    only narrows) and any other is re-checked against the full rules."""
    build_tree(root)
    write(root, "src/deep/.geminiignore-free.py", "token free\n")
    (root / ".geminiignore").write_text("secret/\nsrc/app.py\n")
    text = text_of(await search(root, engine, {"pattern": "token", "include": include}))
    found = set(matches(text))
    assert not found & {"notes.log", "src/gen/out.py", "src/deep/tmp_scratch.py", "src/app.py"}, found
    if include in ("**/*.py", "*.{log,py}"):
        assert found == {"src/deep/keep.py", "src/deep/.geminiignore-free.py"}


async def test_path_subdirectory_uses_ancestor_rules(root: Path, engine: str) -> None:
    build_tree(root)
    result = await search(root, engine, {"pattern": "token", "path": str(root / "src")})
    text = text_of(result)
    # /src/gen/ (root .gitignore, anchored) and deep/tmp_* (src/.gitignore) still apply below src
    assert set(matches(text)) == {"app.py", "deep/keep.py", "util.ts", "view.tsx"}
    assert f'in path "{root / "src"}"' in text.splitlines()[0]
    deep = text_of(await search(root, engine, {"pattern": "token", "path": str(root / "src/deep")}))
    assert set(matches(deep)) == {"keep.py"}


@pytest.mark.parametrize("include", [None, "*", "*.tmp"])
async def test_path_subdirectory_rules_that_hide_files_by_name(root: Path, engine: str, include: str | None) -> None:
    """Below a subdirectory, the rules of the directories above it hide files by name (rg has them
    re-anchored, and its verdict is checked again: for a file only where one of them could match its
    name); a `.gitignore` in the searched tree can bring such a file back, except from `.geminiignore`
    (which rg ranks below it); an `include` glob (a `--glob` override for rg, which puts files past every
    rule) changes nothing of that."""
    write(root, ".gitignore", "*.tmp\nsecret-*\n/sub/skipdir/\n")
    write(root, ".geminiignore", "*.bak\nstill.txt\n")
    write(root, "sub/.gitignore", "!keep.tmp\n!still.txt\n")
    files = ["a.txt", "b.tmp", "keep.tmp", "secret-x.txt", "skipdir/c.txt", "d/e.bak", "d/f.txt", "d/g.tmp", "still.txt"]
    for rel in [*files, ".env"]:
        write(root, f"sub/{rel}", "TOKEN\n")
    args = {"pattern": "TOKEN", "path": str(root / "sub")} | ({"include": include} if include else {})
    found = set(matches(text_of(await search(root, engine, args))))
    expected = {"a.txt", "keep.tmp", "d/f.txt"}
    assert found == ({"keep.tmp"} if include == "*.tmp" else expected)


async def test_path_single_file(root: Path, engine: str) -> None:
    build_tree(root)
    text = text_of(await search(root, engine, {"pattern": "token", "path": str(root / "src/util.ts")}))
    assert matches(text) == {str(root / "src/util.ts"): [1, 2]}


async def test_cap_keeps_true_totals_and_says_how_to_narrow(root: Path, engine: str) -> None:
    for i in range(6):
        write(root, f"f{i}.txt", "".join(f"hit {j}\n" for j in range(5)))
    result = await search(root, engine, {"pattern": "hit"}, "--search-max-matches", "7")
    text = text_of(result)
    head = text.splitlines()[0]
    assert head.startswith('Found 30 matches in 6 files for pattern "hit"')
    assert "showing the first 7 matches in 2 files" in head and "narrow the search" in head
    assert matches(text) == {"f0.txt": [1, 2, 3, 4, 5], "f1.txt": [1, 2]}
    assert result.structured["truncated"] is True and result.structured["shown_matches"] == 7


async def test_long_lines_are_cut(root: Path, engine: str) -> None:
    write(root, "long.txt", "x" * 5000 + "NEEDLE" + "y" * 300_000 + "\nshort NEEDLE\n")
    text = text_of(await search(root, engine, {"pattern": "needle"}))
    rows = [ln for ln in text.splitlines() if ln.startswith("L")]
    assert rows[0] == "L1: …[4,753 chars]…" + "x" * 247 + "NEEDLE" + "y" * 247 + "…[299,753 chars]…"
    assert rows[1] == "L2: short NEEDLE"


@pytest.mark.parametrize("pattern", ["hel(lo", "[a-", "a{2,1}"])
async def test_invalid_regex(root: Path, engine: str, pattern: str) -> None:
    write(root, "a.txt", "hello\n")
    result = await search(root, engine, {"pattern": pattern})
    assert result.is_error
    text = text_of(result)
    assert text.startswith(f"Invalid regular expression pattern provided: {pattern}. Error: ")
    assert len(text) > len(pattern) + 50


async def test_binary_files_skipped(root: Path, engine: str) -> None:
    write(root, "text.txt", "needle\n")
    write(root, "data.bin", b"needle\n" * 10 + b"\x00" + b"needle\n")
    write(root, "late.dat", b"needle\n" * 30_000 + b"\x00tail needle\n")
    text = text_of(await search(root, engine, {"pattern": "needle"}))
    assert set(matches(text)) == {"text.txt"}


async def test_multiple_roots(tmp_path: Path, engine: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "one.txt", "shared word\n")
    write(b, "two.txt", "Shared too\n")
    text = text_of(await search([a, b], engine, {"pattern": "shared"}))
    assert "across 2 workspace directories" in text.splitlines()[0]
    assert set(matches(text)) == {f"{a}/one.txt", f"{b}/two.txt"}


async def test_symlinks_not_followed_and_escapes_refused(root: Path, engine: str) -> None:
    write(root, "in.txt", "DECOY inside\n")
    os.symlink(root.parent / "root-evil", root / "evil_dir")
    os.symlink(root.parent / "root-evil" / "secret.txt", root / "evil_file")
    text = text_of(await search(root, engine, {"pattern": "DECOY"}))
    assert set(matches(text)) == {"in.txt"}
    escaped = await search(root, engine, {"pattern": "DECOY", "path": str(root / "evil_dir")})
    assert escaped.is_error and "not in workspace" in text_of(escaped).lower()


async def test_engines_agree(root: Path) -> None:
    build_tree(root)
    write(root, "src/mixed.txt", "alpha beta\nALPHA\nfoo123\nbar_baz 42\n  indented alpha\n")
    write(root, "a/b/.gitignore", "!keep.log\nskip*/\n")
    write(root, "a/b/keep.log", "alpha log kept\n")
    write(root, "a/b/skipme/x.txt", "alpha skipped\n")
    write(root, "a/b/c/y.txt", "alpha visible\n")
    for pattern in ["alpha", r"\d+", r"^\s+\w+", "token|alpha", r"ba[rz]", "[[:digit:]]{2}"]:
        for path in (None, "src", "a/b"):
            args = {"pattern": pattern} | ({"path": str(root / path)} if path else {})
            rg = text_of(await search(root, "ripgrep", args))
            py = text_of(await search(root, "python", args))
            assert rg == py, (pattern, path)


@pytest.mark.parametrize(
    "extra",
    [{}, {"max_matches_per_file": 3}, {"context": 1}, {"exclude_pattern": "hit 3"}, {"names_only": True}],
)
async def test_engines_agree_when_the_cap_falls_among_many_files(root: Path, extra: dict) -> None:
    """rg reports files in no set order on several threads, and keeps some files' lines unread until it is
    known which are shown: the answer is still the first lines by path, with true totals."""
    for i in range(90):
        write(root, f"d{i % 7}/f{i:02d}.txt", "".join(f"hit {j}\nmiss\n" for j in range(i % 9 + 1)))
    args = {"pattern": "hit", **extra}
    rg = await search(root, "ripgrep", args, "--search-max-matches", "40")
    py = await search(root, "python", args, "--search-max-matches", "40")
    assert text_of(rg) == text_of(py)
    excluded = sum(i % 9 + 1 > 3 for i in range(90)) if "exclude_pattern" in extra else 0  # "hit 3" lines
    assert rg.structured["total_matches"] == sum(i % 9 + 1 for i in range(90)) - excluded


async def test_geminiignore_negation_uses_exact_rules(root: Path, engine: str) -> None:
    write(root, ".gitignore", "logs/\n*.tmp\n")
    write(root, ".geminiignore", "!logs/\n!important.tmp\n")
    write(root, "logs/app.txt", "needle log\n")
    write(root, "important.tmp", "needle tmp\n")
    write(root, "other.tmp", "needle other\n")
    text = text_of(await search(root, engine, {"pattern": "needle"}))
    assert set(matches(text)) == {"logs/app.txt", "important.tmp"}


async def test_progress_and_cancellation_kill_ripgrep(root: Path) -> None:
    """A search cancelled while rg runs ends promptly and leaves no rg process behind."""
    from coretools.server.toolset import ToolSet
    from coretools.sandbox.gateway import Workspace
    from coretools.tools.base import ToolContext
    from tests.conftest import make_config

    write(root, "big.txt", "a match line\n" * 400_000)
    config = make_config([root], "--search-engine", "ripgrep")
    toolset = ToolSet(config)
    ws = Workspace(config.roots)
    seen: list[int] = []

    def rg_children() -> list[int]:
        """This process's ripgrep children (a worker may have other children, from other tests)."""
        pids = []
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as fh:
                pids += [int(p) for p in fh.read().split()]
        return [p for p in pids if _program_of(p) in ("rg", "ripgrep")]

    async def progress(done, total=None, message=None) -> None:
        seen.append(done)

    ctx = ToolContext(workspace=ws, report_progress=progress)
    children: list[int] = []
    try:
        async with anyio.create_task_group() as tg:

            async def go() -> None:
                await toolset.call("search_file_content", {"pattern": "match"}, ctx)

            tg.start_soon(go)
            with anyio.fail_after(30):
                while not children:
                    children = rg_children()
                    await anyio.sleep(0.005)
                while not seen:
                    await anyio.sleep(0.005)
            tg.cancel_scope.cancel()
    finally:
        ws.close()
    assert children and seen
    for pid in children:
        assert not os.path.exists(f"/proc/{pid}"), "rg was left running"


async def test_search_over_stdio_session(root: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    from tests.conftest import stdio_params

    build_tree(root)
    async with stdio_client(stdio_params([root], forked=True)) as (read, write_):
        async with ClientSession(read, write_) as session:
            await session.initialize()
            result = await session.call_tool("search_file_content", {"pattern": "TOKEN", "include": "*.py"})
            assert set(matches(text_of(result))) == {"src/app.py", "src/deep/keep.py"}


def test_reroot_anchored_patterns() -> None:
    assert reroot(["foo", "/a/b/c", "a/*/d/", "!a/b/keep", "/x"], ["a", "b"]) == ["/**/foo", "/c", "/d/", "!/keep"]
    assert reroot(["a/", "/a/b"], ["a", "b"]) == ["*", "*"]
    assert reroot(["a/**/z", "/a/c/z"], ["a", "b"]) == ["/**/z"]
    assert reroot(["b/"], ["a", "b"]) == ["*"]  # unanchored: matches the search directory itself


def test_include_glob_semantics() -> None:
    def include(glob: str):
        return NodeMatcher(parse_include(glob))

    assert include("*.py")("a/b/c.py")
    assert not include("src/*.py")("src/a/b.py")
    assert include("src/**")("src/a/b.py")
    assert include("*.{ts,tsx}")("x/y.tsx")
    assert not include("*.{ts,tsx}")("x/y.tsxx")


async def test_nul_and_overlong_arguments_are_clear_errors(root: Path) -> None:
    from support import call_tool, text_of

    (root / "a.txt").write_text("abc\n")
    for args, needle in (
        ({"pattern": "a\x00b"}, "NUL character"),
        ({"pattern": "a", "include": "*.t\x00xt"}, "NUL character"),
        ({"pattern": "a" * 200_000}, "the limit is"),
    ):
        result = await call_tool(root, "search_file_content", args)
        assert result.is_error, args
        assert needle in text_of(result)
        assert "Internal error" not in text_of(result)


def _program_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return os.path.basename(fh.read().split(b"\0")[0].decode("utf-8", "replace"))
    except OSError:
        return ""
