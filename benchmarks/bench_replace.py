"""`replace` on a 50 MB file: wall time and peak memory, against plain Python baselines measured in the same run.

Every measurement runs in a fresh subprocess (so peak RSS belongs to that case alone), after its imports:
- time: best of --reps runs;
- traced peak: tracemalloc's peak of Python allocations during one more run (done separately: tracing
  slows allocation-heavy code);
- RSS peak: the subprocess's ru_maxrss minus its RSS before the work started.

Baselines: "plain" = read bytes, decode, str.replace(old, new, 1), encode, write in place;
"plain atomic" = the same but written like coretools does (temp file, fsync, rename, fsync dir).

Run: uv run python benchmarks/bench_replace.py [--size-mb 50] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARK_A, MARK_B = "needle-line-AAAA = compute(alpha, beta)\n", "needle-line-BBBB = compute(alpha, gamma)\n"


def make_file(path: Path, size_mb: int, newline: str) -> None:
    line = "    value_{:08d} = transform(source[{:08d}], weight=0.5)  # filler text\n"
    count = size_mb * 1024 * 1024 // len(line.format(0, 0))
    with path.open("w", newline="") as fh:
        for i in range(count):
            if i == count // 2:
                fh.write(MARK_A.replace("\n", newline))
            fh.write(line.format(i, i).replace("\n", newline))


# -- worker side ----------------------------------------------------------------------------------------------


def _plain(path: Path, old: str, new: str, atomic: bool) -> None:
    text = path.read_bytes().decode("utf-8")
    data = text.replace(old, new, 1).encode("utf-8")
    del text
    if not atomic:
        path.write_bytes(data)
        return
    tmp = path.with_name(f".{path.name}.bench.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)


def _coretools(root: Path):
    import anyio

    from coretools.cli import build_parser
    from coretools.server.config import ServerConfig
    from coretools.server.toolset import ToolSet, tool_options
    from coretools.sandbox.gateway import Workspace
    from coretools.tools.base import ToolContext

    options = build_parser().parse_args(["serve", "--root", str(root)])
    config = ServerConfig.from_namespace(options, roots=[str(root)], tool_options=tool_options(options))
    toolset = ToolSet(config)
    ws = Workspace([str(root)])

    def run(path: Path, old: str, new: str) -> None:
        args = {"file_path": str(path), "old_string": old, "new_string": new}
        result = anyio.run(toolset.call, "replace", args, ToolContext(workspace=ws))
        if result.is_error and not old.startswith("not-in-the-file"):
            raise SystemExit(f"replace failed: {result.text_content[:500]}")

    return run


def _rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def worker(case: str, path: Path, reps: int) -> dict:
    if case.startswith("plain"):
        atomic = case == "plain-atomic"

        def run(p: Path, old: str, new: str) -> None:
            _plain(p, old, new, atomic)
    else:
        run = _coretools(path.parent)
    pairs = [(MARK_A, MARK_B), (MARK_B, MARK_A)]
    if case == "coretools-nomatch":
        pairs = [("not-in-the-file = compute(alpha, delta)\n", "x\n")] * 2
    rss_before = _rss_kb()
    times = []
    for i in range(reps):
        old, new = pairs[i % 2]
        start = time.perf_counter()
        run(path, old, new)
        times.append(time.perf_counter() - start)
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    old, new = pairs[reps % 2]
    tracemalloc.start()
    run(path, old, new)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"best": min(times), "traced_mb": traced / 1048576, "rss_mb": (rss_peak - rss_before) / 1024}


# -- driver ---------------------------------------------------------------------------------------------------

CASES = [
    ("plain", "lf", "plain Python read+replace+write (baseline)"),
    ("plain-atomic", "lf", "plain Python, atomic write (temp+fsync+rename)"),
    ("coretools", "lf", "coretools replace, LF file"),
    ("coretools", "crlf", "coretools replace, CRLF file, LF old_string"),
    ("coretools-nomatch", "lf", "coretools replace, no match (similar-lines report)"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], Path(args.worker[1]), args.reps)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-replace-") as tmp:
        files = {}
        for newline_name, newline in (("lf", "\n"), ("crlf", "\r\n")):
            root = Path(tmp) / newline_name
            root.mkdir()
            files[newline_name] = root / "big.py"
            make_file(files[newline_name], args.size_mb, newline)
        size = files["lf"].stat().st_size / 1048576
        rows = []
        for case, newline_name, label in CASES:
            out = subprocess.run(
                [sys.executable, __file__, "--reps", str(args.reps), "--worker", case, str(files[newline_name])],
                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True,
            )
            rows.append((label, json.loads(out.stdout.strip().splitlines()[-1])))
    base = rows[0][1]["best"]
    print(f"replace on a {size:.1f} MB file (one occurrence in the middle); best of {args.reps}; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    header = f"{'case':<52} {'time s':>8} {'x base':>7} {'traced MB':>10} {'RSS MB':>8}"
    print(header)
    print("-" * len(header))
    for label, r in rows:
        print(f"{label:<52} {r['best']:>8.3f} {r['best'] / base:>7.2f} {r['traced_mb']:>10.1f} {r['rss_mb']:>8.1f}")


if __name__ == "__main__":
    main()
