"""Foundation benchmarks: cold start, warm read_file latency, a window at the end of a 1 GB file, peak RSS.

Run: `uv run python benchmarks/bench_server.py [--quick]`

Every number is compared with a baseline measured in the same run on the same machine:
- cold start (spawn until `tools/list` is answered) vs a bare `python -c "import mcp"`;
- warm `read_file` of a 2 KB file over stdio vs a bare SDK server answering a constant 2 KB text (also shown:
  coretools on the SDK's threaded stdio transport instead of its own, i.e. the tools' cost on equal terms);
- peak RSS of the coretools server vs that bare SDK server after the same workload.
Goals (from the foundation issue): cold start <= 1.15x, warm call <= 1.25x, RSS within 10%, 1 GB window
peak memory growth < 20 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rpc import StdioServer, median  # noqa: E402

HERE = Path(__file__).resolve().parent
PY = sys.executable


def coretools_argv(root: str) -> list[str]:
    return [PY, "-m", "coretools", "serve", "--root", root]


def bare_argv() -> list[str]:
    return [PY, str(HERE / "bare_server.py")]


def cold_start(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        server = StdioServer(argv)
        server.handshake()
        server.request("tools/list")
        times.append(time.perf_counter() - server.started)
        server.close()
    return median(times)


def import_mcp(runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([PY, "-c", "import mcp"], check=True)
        times.append(time.perf_counter() - t)
    return median(times)


def warm_calls(server: StdioServer, name: str, args: dict, runs: int) -> float:
    for _ in range(20):
        server.call(name, args)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        result = server.call(name, args)
        times.append(time.perf_counter() - t)
        assert not result.get("isError"), result
    return median(times)


def make_big_file(path: Path, size: int) -> int:
    line = b"2026-11-22T04:31:28Z INFO request handled in 12ms path=/api/v1/items status=200\n"
    block = line * (1 << 20 // len(line) + 1)
    written = 0
    with open(path, "wb") as fh:
        while written < size:
            fh.write(block)
            written += len(block)
    return written // len(line)


def row(name: str, ours: str, base: str, ratio: str, goal: str) -> str:
    return f"| {name:<46} | {ours:>12} | {base:>12} | {ratio:>7} | {goal:>8} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer runs and a 256 MB file instead of 1 GB")
    ns = parser.parse_args()
    runs = 5 if ns.quick else 15
    rounds = 3 if ns.quick else 5
    calls = 100 if ns.quick else 300
    big_size = (256 if ns.quick else 1024) << 20

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        (root / "small.txt").write_text(("abcdefghij" * 10 + "\n") * 20)  # ~2 KB

        base_import = import_mcp(runs)
        ours_cold = cold_start(coretools_argv(str(root)), runs)
        bare_cold = cold_start(bare_argv(), runs)

        # Warm latency: the servers take turns, a fresh process each per round, so that drift on this shared
        # machine hits them alike. "ours, SDK stdio" is coretools on the SDK's threaded stdio transport (the
        # one the bare server uses): it shows what the tools cost on equal transport terms.
        small = {"absolute_path": str(root / "small.txt")}
        contenders = {
            "bare": (bare_argv(), {}, {}),
            "ours": (coretools_argv(str(root)), {}, small),
            "ours_sdk_stdio": (coretools_argv(str(root)), {"CORETOOLS_STDIO": "sdk"}, small),
        }
        warm: dict[str, list[float]] = {key: [] for key in contenders}
        rss: dict[str, int] = {}
        for _ in range(rounds):
            for key, (argv, env, args) in contenders.items():
                server = StdioServer(argv, env=env)
                server.handshake()
                warm[key].append(warm_calls(server, "read_file", args, calls))
                rss[key] = max(rss.get(key, 0), server.peak_rss_kib())  # after the same warm workload
                server.close()
        bare_warm, ours_warm, sdk_warm = (median(warm[key]) for key in contenders)
        bare_rss, ours_rss = rss["bare"], rss["ours"]

        ours = StdioServer(coretools_argv(str(root)))
        ours.handshake()
        # The big file is written only now, and flushed, so that its writeback cannot disturb the latency
        # measurements above.
        lines = make_big_file(root / "big.log", big_size)
        os.sync()
        before = ours.peak_rss_kib()
        t = time.perf_counter()
        result = ours.call("read_file", {"absolute_path": str(root / "big.log"), "offset": lines - 100, "limit": 100})
        window_time = time.perf_counter() - t
        assert not result.get("isError"), result
        growth = ours.peak_rss_kib() - before
        ours.close()

    print(f"\ncoretools foundation benchmark ({'quick' if ns.quick else 'full'}; medians; python {sys.version.split()[0]})\n")
    print(row("measure", "coretools", "baseline", "ratio", "goal"))
    print("|" + "-" * 48 + "|" + "-" * 14 + "|" + "-" * 14 + "|" + "-" * 9 + "|" + "-" * 10 + "|")
    print(row("cold start to tools/list (vs import mcp)", f"{ours_cold*1000:.0f} ms", f"{base_import*1000:.0f} ms",
              f"{ours_cold/base_import:.2f}x", "<=1.15x"))
    print(row("cold start to tools/list (vs bare SDK server)", f"{ours_cold*1000:.0f} ms", f"{bare_cold*1000:.0f} ms",
              f"{ours_cold/bare_cold:.2f}x", "-"))
    print(row("warm read_file 2 KB over stdio", f"{ours_warm*1000:.2f} ms", f"{bare_warm*1000:.2f} ms",
              f"{ours_warm/bare_warm:.2f}x", "<=1.25x"))
    print(row("  same, coretools on the SDK's stdio transport", f"{sdk_warm*1000:.2f} ms", f"{bare_warm*1000:.2f} ms",
              f"{sdk_warm/bare_warm:.2f}x", "-"))
    print(row("peak RSS after the same warm workload", f"{ours_rss/1024:.1f} MiB", f"{bare_rss/1024:.1f} MiB",
              f"{ours_rss/bare_rss:.2f}x", "<=1.10x"))
    print(row(f"read_file last 100 lines of {big_size >> 20} MB file", f"{window_time*1000:.0f} ms", "-", "-", "-"))
    print(row("  peak RSS growth during that call", f"{growth/1024:.1f} MiB", "-", "-", "<20 MiB"))
    print()


if __name__ == "__main__":
    main()
