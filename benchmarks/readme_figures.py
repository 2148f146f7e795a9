"""The README's benchmark table, written from the benchmarks' own output, never typed by hand.

    uv run --locked python benchmarks/readme_figures.py            # run every benchmark below, write the table
    uv run --locked python benchmarks/readme_figures.py --only replace,sandbox
    uv run --locked python benchmarks/readme_figures.py --render   # rewrite the table from the saved outputs

Each benchmark runs as a user would run it (one subprocess, its default settings) and what it prints is
saved verbatim in `benchmarks/results/<name>.txt`, with the date, machine and commit of the run in
`benchmarks/results/run.json`. The table is then built from those saved outputs alone: every figure in it
is a number the benchmark printed, and every benchmark compares against a baseline it measured in the same
run (the machines are shared and noisy: read the ratios, not the milliseconds). The table is written to
`benchmarks/results/readme_table.md` and between the markers in README.md; `tests/test_docs.py` checks that
both are exactly what the saved outputs render to, so a hand edit of a figure fails the suite.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
README = REPO / "README.md"
TABLE = RESULTS / "readme_table.md"
RUN = RESULTS / "run.json"
BEGIN = "<!-- readme_figures:begin: written by benchmarks/readme_figures.py from benchmarks/results/; do not edit by hand -->"
END = "<!-- readme_figures:end -->"

Row = tuple[str, str]  # what was measured, what the benchmark printed for it


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    args: tuple[str, ...]
    parse: Callable[[str], list[Row]]

    def command(self) -> str:
        return " ".join(["uv run --locked python", f"benchmarks/{self.script}", *self.args])


def _number(text: str) -> float:
    return float(text.rstrip("x"))


def parse_server(output: str) -> list[Row]:
    """bench_server's markdown table: measure | coretools | baseline | ratio | goal."""
    rows = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("measure", "") or set(cells[0]) <= {"-"}:
            continue
        measure, ours, base, ratio, goal = cells
        result = ours if base == "-" else f"{ours} vs {base}: **{ratio}**"
        if goal != "-":
            result += " (goal " + re.sub(r"^<(?!=)", "< ", re.sub(r"^<=", "≤ ", goal)) + ")"
        rows.append((measure, result))
    return rows


def parse_replace(output: str) -> list[Row]:
    """bench_replace: case, time s, x base, traced MB, RSS MB (fixed columns, the case first)."""
    rows = []
    heading = next((line for line in output.splitlines() if line.startswith("replace on a")), "")
    for line in output.splitlines():
        m = re.match(r"^(\S.*?)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)$", line)
        if m:
            case, seconds, ratio, traced, rss = m.groups()
            rows.append((case, f"{seconds} s, **{ratio}x** the baseline; peak RSS growth {rss} MB (Python heap {traced} MB)"))
    if heading:
        size = re.search(r"a ([\d.]+ MB) file", heading)
        rows = [(f"{case}, {size.group(1)} file" if size and i == 0 else case, result) for i, (case, result) in enumerate(rows)]
    return rows


def parse_client(output: str) -> list[Row]:
    """bench_client: result size, path, ms, x baseline."""
    rows = []
    for line in output.splitlines():
        m = re.match(r"^\s*([\d.]+ MB)\s+(.*?)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)$", line)
        if m:
            size, path, ms, ratio = m.groups()
            rows.append((f"{size} result: {path.strip()}", f"{ms} ms, **{ratio}x**"))
    return rows


def parse_sandbox(output: str) -> list[Row]:
    """bench_sandbox: mode, median ms, p90 ms, x none, x bare, CPU ms."""
    rows = []
    for line in output.splitlines():
        m = re.match(r"^(\w+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)$", line)
        if m:
            mode, median, p90, x_none, x_bare, cpu = m.groups()
            what = "bare `subprocess.run`" if mode == "bare" else f"`--shell-sandbox {mode}`"
            rows.append((f"`bash -c true` through {what}", f"{median} ms (p90 {p90} ms), {cpu} ms CPU; **{x_none}x** of `none`"))
    return rows


BENCHMARKS = (
    Benchmark("server", "bench_server.py", (), parse_server),
    Benchmark("replace", "bench_replace.py", ("--size-mb", "10"), parse_replace),
    Benchmark("client", "bench_client.py", (), parse_client),
    Benchmark("sandbox", "bench_sandbox.py", ("--runs", "50"), parse_sandbox),
)


def machine() -> dict[str, str | int]:
    model = ""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cpu": model or platform.processor() or platform.machine(),
        "cpus": os.cpu_count() or 0,
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def commit() -> str:
    """The short commit the benchmarks ran on, marked when the code differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "coretools", "benchmarks", "pyproject.toml", "uv.lock",
         ":!benchmarks/results", ":!benchmarks/readme_figures.py"],
        cwd=REPO, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return head + (" with uncommitted changes" if dirty else "")


def run(benchmarks: list[Benchmark]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = json.loads(RUN.read_text()) if RUN.exists() else {}
    for bench in benchmarks:
        print(f"running {bench.command()} ...", file=sys.stderr, flush=True)
        load = os.getloadavg()[0]
        started = time.monotonic()
        argv = [sys.executable, str(REPO / "benchmarks" / bench.script), *bench.args]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{bench.command()} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        if not bench.parse(done.stdout):
            sys.exit(f"{bench.command()} printed nothing this script can read:\n{done.stdout[-3000:]}")
        (RESULTS / f"{bench.name}.txt").write_text(done.stdout)
        record[bench.name] = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),  # when it ended
            "seconds": round(time.monotonic() - started),
            "load_average": round(load, 2),
            "commit": commit(),
            **machine(),
        }
        RUN.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def render(results: Path = RESULTS) -> str:
    """The table, from the saved outputs and run records alone."""
    record = json.loads((results / "run.json").read_text())
    lines = ["| command | measured | result |", "|---|---|---|"]
    runs = []
    for bench in BENCHMARKS:
        if bench.name not in record:
            continue
        rows = bench.parse((results / f"{bench.name}.txt").read_text())
        for i, (what, result) in enumerate(rows):
            lines.append(f"| {'`' + bench.command() + '`' if i == 0 else ''} | {what} | {result} |")
        r = record[bench.name]
        runs.append(
            f"- `{bench.script}`: {r['seconds']} s ending {r['date']}, on {r['cpu']}, {r['cpus']} CPUs, {r['system']}, "
            f"Python {r['python']}; commit {r['commit']}; load average {r['load_average']} at its start"
        )
    heading = "One run of each command; what each printed is in `benchmarks/results/NAME.txt`:"
    return "\n".join([heading, "", *runs, "", *lines]) + "\n"


def readme_with(table: str, readme: str) -> str:
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        sys.exit(f"README.md has no {BEGIN!r} ... {END!r} markers")
    return readme[: start + len(BEGIN)] + "\n" + table + readme[end:]


def write(table: str) -> None:
    TABLE.write_text(table)
    README.write_text(readme_with(table, README.read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated: {', '.join(b.name for b in BENCHMARKS)} (default: all)")
    parser.add_argument("--render", action="store_true", help="do not run anything: rewrite the table from benchmarks/results/")
    args = parser.parse_args()
    if not args.render:
        names = args.only.split(",") if args.only else [b.name for b in BENCHMARKS]
        unknown = sorted(set(names) - {b.name for b in BENCHMARKS})
        if unknown:
            parser.error(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(b.name for b in BENCHMARKS)}")
        run([b for b in BENCHMARKS if b.name in names])
    table = render()
    write(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
