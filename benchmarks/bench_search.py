"""search_file_content and glob through a real MCP stdio session vs bare ripgrep, and the walk.

    uv run python benchmarks/bench_search.py [--scales 1,4,16] [--runs 5] [--walk-files 100000] [--mtime-age HOURS]

Builds (once, under benchmarks/.corpus/, git-ignored) a source tree of about 10k files per scale unit
(Python, TypeScript, Markdown, JSON in nested packages, a .gitignore, a few nested .gitignores) plus
`build/` and `node_modules/` folders that the rules ignore. For each scale it starts `coretools serve`
over stdio with the official MCP client and times, in the same run and on the same tree:

* `search_file_content {pattern}` end to end (request -> parsed result) vs `rg --json -i --hidden
  --no-require-git -g '!.git' PATTERN .` run as a subprocess whose JSON output is read through a pipe;
* `glob {pattern: "**/*.py"}` vs `rg --files --hidden --no-require-git -g '!.git' -g '*.py' .` (glob
  enumerates with `rg --files` and the same rules as search plus a `--glob` for the file name, judges
  the listed files by the rules where one could hide them by name, and stats them through the gateway
  while rg lists; the ignored count is only worked out when nothing matches, so this timing has no
  counting pass). glob puts files modified in the last 24 hours first, by time: on a corpus built less
  than a day ago every file is recent, on an older one none is; the table says which was measured.
  `--mtime-age HOURS` first sets every file's modification time to about that many hours ago, a
  microsecond apart (0: all recent, sorted by time; 48: none recent, sorted by path); with
  `--equal-mtimes` all to one instant, so every tie is ordered too (the costliest case).

Each figure is the median of --runs runs after one warm-up, ours and the baseline alternating. It then times `walker.walk` over a
--walk-files tree (every entry judged by the ignore engine, `coretools.sandbox`), and the rg enumerator
behind glob/read_many_files (`walker.walk_files`), with `rg --files` as the reference.
Prints tables; ratios are against the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CORPUS = REPO / "benchmarks" / ".corpus"
UNIT = 10_000
PATTERNS = ["TODO|FIXME", r"def handle_\w+_request"]

WORDS = (
    "request response handler client server session token config value result error cache index user "
    "account order payment item queue event stream buffer record field schema parser layout render"
).split()


def rg_binary() -> str:
    from coretools.sandbox.ripgrep import find_rg

    rg = find_rg()
    if rg is None:
        sys.exit("no ripgrep binary")
    return rg


def py_file(rng: random.Random, n: int) -> str:
    out = [f'"""Module {n}: {" ".join(rng.sample(WORDS, 6))}."""', "", "import os", "import sys", ""]
    for i in range(rng.randint(3, 8)):
        name = rng.choice(WORDS)
        out.append(f"def handle_{name}_{'request' if rng.random() < 0.1 else 'call'}(arg{i}, *args):")
        if rng.random() < 0.05:
            out.append("    # TODO: handle the edge case")
        out.append(f"    value = {rng.randint(0, 9999)} + len(args)")
        out.append(f"    return {rng.choice(WORDS)}_{i}(value, '{rng.choice(WORDS)}')")
        out.append("")
    return "\n".join(out) + "\n"


def ts_file(rng: random.Random, n: int) -> str:
    out = [f"import {{ {rng.choice(WORDS)} }} from './{rng.choice(WORDS)}';", ""]
    for i in range(rng.randint(3, 8)):
        out.append(f"export function {rng.choice(WORDS)}{i}(x: number): string {{")
        if rng.random() < 0.04:
            out.append("  // FIXME: slow path")
        out.append(f"  return `{rng.choice(WORDS)}-${{x + {n}}}`;")
        out.append("}")
    return "\n".join(out) + "\n"


def md_file(rng: random.Random, n: int) -> str:
    return f"# {rng.choice(WORDS).title()} {n}\n\n" + "\n".join(
        " ".join(rng.choices(WORDS, k=12)) for _ in range(rng.randint(5, 15))
    ) + "\n"


def build_corpus(scale: int) -> Path:
    root = CORPUS / f"x{scale}"
    marker = root / ".complete"
    if marker.exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(scale)
    files = UNIT * scale
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("*.log\n/tmp/\n")
    makers = [(py_file, "py"), (py_file, "py"), (ts_file, "ts"), (md_file, "md")]
    made = 0
    pkg = 0
    while made < files:
        base = root / "src" / f"pkg{pkg // 40}" / f"mod{pkg % 40}"
        if pkg % 3 == 0:
            base = base / "sub"
        base.mkdir(parents=True, exist_ok=True)
        if pkg % 25 == 0:
            (base / ".gitignore").write_text("generated_*\n")
        for i in range(20):
            maker, ext = rng.choice(makers)
            (base / f"{rng.choice(WORDS)}_{i}.{ext}").write_text(maker(rng, made))
            made += 1
        pkg += 1
    # ignored bulk: node_modules (default exclude) and build (default exclude), ~30% of the tree each
    for folder in ("node_modules", "build"):
        for i in range(files * 3 // 10):
            d = root / folder / f"dep{i // 100}"
            if i % 100 == 0:
                d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.js").write_text("// TODO: vendored\nmodule.exports = function handle_x_request() {};\n")
    marker.write_text("ok\n")
    return root


def timed(fn, runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bare_rg(root: Path, argv: list[str]) -> None:
    subprocess.run([rg_binary(), *argv], cwd=root, capture_output=True, check=False)


RG_SEARCH = ["--json", "--ignore-case", "--hidden", "--no-require-git", "-g", "!.git", "-g", "!node_modules", "-g", "!build"]
RG_FILES = ["--files", "--hidden", "--no-require-git", "-g", "!.git", "-g", "!node_modules", "-g", "!build", "-g", "*.py"]
GOALS = {"search": "<= 1.5x", "glob": "<= 2x"}  # of bare rg, by the operation's first word
OPERATIONS = [
    *[(f"search {p!r}", "search_file_content", {"pattern": p}, [*RG_SEARCH, "--regexp", p, "."]) for p in PATTERNS],
    ("glob **/*.py", "glob", {"pattern": "**/*.py"}, [*RG_FILES, "."]),
]


async def mcp_timings(root: Path, runs: int) -> dict[str, tuple[float, float, str]]:
    """`{label: (ours, bare rg, first line)}`: each sample of ours is followed by one of the baseline, so
    both see the same machine load (the medians are taken separately)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "coretools", "serve", "--root", str(root)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=str(REPO),
    )
    out: dict[str, tuple[float, float, str]] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def one(name: str, args: dict) -> str:
            result = await session.call_tool(name, args)
            text = "\n".join(b.text for b in result.content if b.type == "text")
            return text.splitlines()[0] if text else ""

        for label, name, args, bare_argv in OPERATIONS:
            head = await one(name, args)
            bare_rg(root, bare_argv)
            ours, bare = [], []
            for _ in range(runs):
                start = time.perf_counter()
                await one(name, args)
                ours.append(time.perf_counter() - start)
                start = time.perf_counter()
                bare_rg(root, bare_argv)
                bare.append(time.perf_counter() - start)
            out[label] = (statistics.median(ours), statistics.median(bare), head)
    return out


def raw_timings(root: Path, runs: int) -> dict[str, tuple[float, float, str]]:
    """The same as `mcp_timings` over a raw JSON-RPC stdio session (`rpc.StdioServer`): no client library in
    the measured path. The official Python client's own cost of receiving a large reply (glob's ~600 KB at
    x1) is a sizeable part of the figures above; this shows the server's share."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rpc import StdioServer

    server = StdioServer([sys.executable, "-m", "coretools", "serve", "--root", str(root)], cwd=str(REPO))
    out: dict[str, tuple[float, float, str]] = {}
    try:
        server.handshake()
        for label, name, args, bare_argv in OPERATIONS:
            server.call(name, args)
            bare_rg(root, bare_argv)
            ours, bare = [], []
            for _ in range(runs):
                start = time.perf_counter()
                server.call(name, args)
                ours.append(time.perf_counter() - start)
                start = time.perf_counter()
                bare_rg(root, bare_argv)
                bare.append(time.perf_counter() - start)
            out[label] = (statistics.median(ours), statistics.median(bare), "")
    finally:
        server.close()
    return out


def set_mtimes(root: Path, hours: float, equal: bool) -> None:
    """Every file and directory of the corpus modified about `hours` ago (the `.complete` marker too, which
    the printed age is read from): a microsecond apart, as a checkout writes them, or all at the same
    instant with `equal` (glob then orders every tie by path as well: its costliest case)."""
    when = time.time_ns() - int(hours * 3600e9)
    step = 0 if equal else 1000
    for folder, _, names in os.walk(root):
        for name in names:
            when -= step
            os.utime(os.path.join(folder, name), ns=(when, when), follow_symlinks=False)
        os.utime(folder, ns=(when, when))


def bench_scales(scales: list[int], runs: int, mtime_age: float | None, equal: bool) -> None:
    rows = []
    raw_rows = []
    for scale in scales:
        t0 = time.perf_counter()
        root = build_corpus(scale)
        if mtime_age is not None:
            set_mtimes(root, mtime_age, equal)
        built = time.perf_counter() - t0
        for label, (took, base, head) in asyncio.run(mcp_timings(root, runs)).items():
            rows.append((scale, label, took, base, head))
        for label, (took, base, _) in raw_timings(root, runs).items():
            raw_rows.append((scale, label, took, base))
        age = (time.time() - (root / ".complete").stat().st_mtime) / 3600
        recency = "all recent: glob sorts by time" if age < 24 else "none recent: glob sorts by path"
        print(
            f"(corpus x{scale}: {UNIT * scale} source files + ignored build/ node_modules/; ready in {built:.1f}s; "
            f"built {age:.1f} h ago, {recency})"
        )
    print()
    print("| scale | operation | coretools (MCP stdio) ms | bare rg ms | ratio | ms/1k files | goal |")
    print("|---|---|---|---|---|---|---|")
    for scale, label, took, base, _ in rows:
        shown = label.replace("|", r"\|")  # a bar in a markdown cell is escaped
        print(
            f"| x{scale} | {shown} | {took * 1000:.1f} | {base * 1000:.1f} | {took / base:.2f}x | "
            f"{took * 1000 / (UNIT * scale / 1000):.2f} | {GOALS[label.split()[0]]} |"
        )
    print()
    print(f"{'scale':>5} | {'operation':<34} | {'raw JSON-RPC stdio':>21} | {'bare rg':>9} | {'ratio':>6} |")
    print("-" * 90)
    for scale, label, took, base in raw_rows:
        print(f"{'x' + str(scale):>5} | {label:<34} | {took * 1000:>18.1f} ms | {base * 1000:>6.1f} ms | {took / base:>5.2f}x |")
    print()
    for scale, label, _, _, head in rows:
        print(f"x{scale} {label}: {head[:150]}")


def bench_walk(files: int, runs: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from coretools.sandbox import walker as walking
    from coretools.sandbox.gateway import Workspace
    from coretools.sandbox.ignore import IgnoreOptions

    root = CORPUS / f"walk{files}"
    if not (root / ".complete").exists():
        if root.exists():
            shutil.rmtree(root)
        rng = random.Random(7)
        root.mkdir(parents=True)
        (root / ".gitignore").write_text("*.log\n/out/\n")
        made = d = 0
        while made < files:
            sub = root / f"pkg{d // 50}" / f"mod{d}"
            sub.mkdir(parents=True, exist_ok=True)
            if d % 7 == 0:
                (sub / ".gitignore").write_text("tmp_*\n!keep.log\n")
            for i in range(20):
                (sub / f"f{i}.{rng.choice(['py', 'ts', 'md', 'log'])}").write_text("x\n")
                made += 1
            d += 1
        (root / ".complete").write_text("ok\n")
    ws = Workspace([str(root)])
    loc = ws.locate(str(root))

    def walk() -> int:
        return sum(1 for _ in walking.walk(ws, loc, IgnoreOptions()))

    fast = timed(walk, runs)
    count = walk()

    def enumerate_files() -> int:
        # what glob and read_many_files use: rg --files with our rules, re-checked and stat'ed via the gateway
        import anyio

        from coretools.sandbox.paths import WalkReport
        from coretools.sandbox.walker import walk_files

        def work() -> int:
            return sum(1 for _ in walk_files(ws, loc, IgnoreOptions(), None, WalkReport()))

        return anyio.run(anyio.to_thread.run_sync, work)

    enum = timed(enumerate_files, runs)
    listed = enumerate_files()
    rg = timed(lambda: bare_rg(root, ["--files", "--hidden", "--no-require-git", "-g", "!.git", "."]), runs)
    print()
    print(f"walk.walk over {files} files ({count} visible), median of {runs}:")
    print(f"  {'walk.walk (descriptor walk)':<44} {fast * 1000:>8.1f} ms  {fast / rg:>5.1f}x rg --files")
    print(f"  {f'walk.walk_files (rg enumerator, {listed} files)':<44} {enum * 1000:>8.1f} ms  {enum / rg:>5.1f}x rg --files")
    print(f"  {'rg --files (reference)':<44} {rg * 1000:>8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1,4,16")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--walk-files", type=int, default=100_000)
    parser.add_argument("--mtime-age", type=float, default=None, metavar="HOURS")
    parser.add_argument("--equal-mtimes", action="store_true", help="with --mtime-age: one time for every file")
    args = parser.parse_args()
    if args.equal_mtimes and args.mtime_age is None:
        parser.error("--equal-mtimes needs --mtime-age")
    bench_scales([int(s) for s in args.scales.split(",") if s], args.runs, args.mtime_age, args.equal_mtimes)
    if args.walk_files:
        bench_walk(args.walk_files, args.runs)


if __name__ == "__main__":
    main()
