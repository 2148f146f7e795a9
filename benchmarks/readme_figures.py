"""The README's benchmark tables, written from the benchmarks' own output, never typed by hand.

    uv run --locked python benchmarks/readme_figures.py            # run every benchmark below, write the tables
    uv run --locked python benchmarks/readme_figures.py --only replace,sandbox
    uv run --locked python benchmarks/readme_figures.py --only goals [--suite]   # issue 35's goal table
    uv run --locked python benchmarks/readme_figures.py --render   # rewrite the tables from the saved outputs

Each benchmark runs as a user would run it (one subprocess, the options listed below) and what it prints is
saved verbatim in `benchmarks/results/<name>.txt` (`<name>-<n>.txt` for one repeated over several runs),
with the date, machine and commit of the run in `benchmarks/results/run.json`. The tables are then built
from those saved outputs alone: every figure in them is a number a benchmark printed, and every benchmark
compares against a baseline it measured in the same run (the machines are shared and noisy: read the
ratios, not the milliseconds). A range is the lowest and highest figure over the runs. The tables are
written to `benchmarks/results/readme_table.md` and between the markers in README.md; `tests/test_docs.py`
checks that both are exactly what the saved outputs render to, so a hand edit of a figure fails the suite.

`bench_http_cpu` compares against commit `9d6fdcb` (issue 35's base): this script checks it out in a
temporary `git worktree`, with its own locked environment (`uv sync --locked`), and removes it after.
`bench_suite` (a fresh clone's `.ci/run`, ~11 minutes) runs only when asked: `--suite`, or `--only suite`.
Issue 35's goal table is rendered from the outputs of `peers`, `http_cpu` and `suite` (`--only goals`
runs those three); a goal whose benchmark has no saved output yet reads "not measured yet".
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
README = REPO / "README.md"
TABLE = RESULTS / "readme_table.md"
RUN = RESULTS / "run.json"
BEGIN = "<!-- readme_figures:begin: written by benchmarks/readme_figures.py from benchmarks/results/; do not edit by hand -->"
END = "<!-- readme_figures:end -->"
BASE = "9d6fdcb"  # issue 35's base for the HTTP server's CPU per call
WORKTREE = "{worktree}"  # in a benchmark's arguments: the temporary worktree of BASE
NOT_MEASURED = "not measured yet"

Row = tuple[str, str]  # what was measured, what the benchmark printed for it


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    args: tuple[str, ...]
    parse: Callable[[list[str]], list[Row]]  # the outputs of its runs, in order
    runs: int = 1  # separate invocations, each saved
    asked_only: bool = False  # run only when named: it takes too long for every re-measure

    def command(self) -> str:
        args = [a.replace(WORKTREE, "WORKTREE") for a in self.args]
        return " ".join(["uv run --locked python", f"benchmarks/{self.script}", *args])

    def files(self) -> list[str]:
        return [f"{self.name}.txt"] if self.runs == 1 else [f"{self.name}-{n}.txt" for n in range(1, self.runs + 1)]


def _number(text: str) -> float:
    return float(text.rstrip("x"))


def _goal(text: str) -> str:
    return re.sub(r"^<(?!=)\s*", "< ", re.sub(r"^<=\s*", "≤ ", text))


def _span(values: list[str], unit: str = "") -> str:
    """`low–high` of figures as printed (`low` alone when they are equal)."""
    low, high = min(values, key=_number), max(values, key=_number)
    return f"{low}{unit}" if _number(low) == _number(high) else f"{low}{unit}–{high}{unit}"


def _dash(text: str) -> str:
    """A range printed as `1.2-1.6` written with an en dash."""
    return re.sub(r"(?<=\d)-(?=\d)", "–", text)


CELL = re.compile(r"(?<!\\)\|")  # a markdown cell boundary: a `|` not escaped as `\|`


def tables(output: str) -> list[list[dict[str, str]]]:
    """Every markdown table an output holds, each as its rows keyed by the header's cells (an escaped
    bar kept: the cells go into the README's table as they are)."""
    found: list[list[dict[str, str]]] = []
    header: list[str] | None = None
    for line in output.splitlines():
        line = line.strip()
        if not (len(line) > 1 and line.startswith("|") and line.endswith("|")):
            header = None
            continue
        cells = [c.strip() for c in CELL.split(line[1:-1])]
        if header is None:
            header = cells
            found.append([])
        elif not all(c and set(c) <= set("-:") for c in cells):
            found[-1].append(dict(zip(header, cells)))
    return found


def table(output: str, first: str) -> list[dict[str, str]]:
    """The rows of the first table whose header starts with `first`."""
    return next((rows for rows in tables(output) if rows and next(iter(rows[0])) == first), [])


def one(parse: Callable[[str], list[Row]]) -> Callable[[list[str]], list[Row]]:
    return lambda outputs: parse(outputs[0])


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
            result += f" (goal {_goal(goal)})"
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


def parse_search(output: str) -> list[Row]:
    """bench_search: its markdown table (ours over MCP stdio vs bare rg, per scale), then the walk's lines."""
    recency = dict(re.findall(r"^\(corpus (x\d+): .*?, (\w+ recent: glob sorts by \w+)\)$", output, re.M))
    rows = []
    for row in table(output, "scale"):
        scale, operation = row["scale"], row["operation"]
        what = f"{scale}: `{operation}` vs bare `rg` with the same filters"
        if operation.startswith("glob") and scale in recency:
            what += f" ({recency[scale]})"
        result = (
            f"{row['coretools (MCP stdio) ms']} ms vs {row['bare rg ms']} ms: **{row['ratio']}** (goal {_goal(row['goal'])}); "
            f"{row['ms/1k files']} ms per 1k files"
        )
        rows.append((what, result))
    walk = re.search(r"^walk\.walk over (\d+) files \((\d+) visible\)", output, re.M)
    for name, ms, ratio in re.findall(r"^  (walk\.\S+ \(.*?\))\s+([\d.]+) ms\s+([\d.]+x) rg --files$", output, re.M):
        rows.append((f"{name}, {walk.group(1)} files ({walk.group(2)} visible)" if walk else name, f"{ms} ms, **{ratio}** of `rg --files`"))
    return rows


def parse_load(output: str) -> list[Row]:
    """bench_load: its markdown table's ALL row, the throughput, CPU and RSS lines."""
    rows = []
    heading = re.search(r"^(\d+) clients, mode=(\w+), (\d+) calls", output, re.M)
    every = next((row for row in table(output, "tool") if row["tool"] == "ALL"), None)
    rate = re.search(r"^throughput: (\d+) calls/s", output, re.M)
    if heading and every and rate:
        clients, mode, calls = heading.groups()
        rows.append((
            f"{clients} concurrent MCP clients over HTTP on 127.0.0.1 (mode {mode}), {calls} calls mixing reads, searches, listings and edits",
            f"{rate.group(1)} calls/s, p50 {every['p50 ms']} ms, p99 {every['p99 ms']} ms, **{every['unearned']} unearned errors**",
        ))  # fmt: skip
    cpu = re.search(r"^CPU during the load: server ([\d.]+) s, clients \(this process\) ([\d.]+) s", output, re.M)
    if cpu:
        rows.append(("CPU during the load", f"server {cpu.group(1)} s, the clients {cpu.group(2)} s"))
    rss = re.search(r"^server RSS: (.*)$", output, re.M)
    if rss:
        rows.append(("server RSS", rss.group(1)))
    return rows


def _peer_runs(outputs: list[str]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """`{(operation, column): [(median ms, ours / column) per run]}` from bench_peers' tables."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for output in outputs:
        for row in table(output, "operation"):
            found.setdefault((row["operation"], row["column"]), []).append((row["median ms"], row["ours / column"]))
    return found


def parse_peers(outputs: list[str]) -> list[Row]:
    """bench_peers, run several times: per operation and peer, the range of its ratio over the runs."""
    found = _peer_runs(outputs)
    rows = []
    setup = re.search(r"^corpus: \S+ \((.*?)\); (.*)$", outputs[0], re.M)
    if setup:
        rows.append((f"corpus: {setup.group(1)}", f"each of {len(outputs)} runs: {setup.group(2)}"))
    for (operation, column), runs in found.items():
        if column == "ours":
            continue
        ours = [ms for ms, _ in found.get((operation, "ours"), [])]
        rows.append((
            f"`{operation}`: ours vs {f'`{column}`' if column.startswith('rg ') else column}",
            f"**{_span([r for _, r in runs], '')}** ({_span(ours)} ms vs {_span([ms for ms, _ in runs])} ms)",
        ))  # fmt: skip
    peaks: dict[str, list[str]] = {}
    for output in outputs:
        for name, mib in re.findall(r"^peak RSS of the (\S+) server's process tree: ([\d.]+) MiB$", output, re.M):
            peaks.setdefault(name, []).append(mib)
    if peaks:
        rows.append(("peak RSS of each server's process tree", ", ".join(f"{name} {_span(mib)} MiB" for name, mib in peaks.items())))
    return rows


def parse_http_cpu(output: str) -> list[Row]:
    """bench_http_cpu: its markdown table, one row per checkout (ranges over its runs), and the ratio line."""
    rows = []
    setup = re.search(r"^(\d+ clients x \d+ calls, .*) \(ranges over runs\)$", output, re.M)
    for i, row in enumerate(table(output, "checkout")):
        what = f"server CPU per call, checkout {row['checkout']}"
        if i == 0 and setup:
            what = f"{setup.group(1)}: {what}"
        rows.append((what, _dash(
            f"{row['server CPU ms/call']} ms (its tools' {row['tools ms/call']} ms), {row['calls/s']} calls/s, p50 {row['p50 ms']} ms, "
            f"p99 {row['p99 ms']} ms; a read_file on a kept-alive connection after a streamed answer {row['kept-alive ms']} ms, "
            f"on a fresh one {row['fresh ms']} ms; {row['unearned']} unearned errors"
        )))  # fmt: skip
    for before, after, ratio in re.findall(r"^server CPU per call, (\S+) / (\S+) \(same run\): ([\d.\-]+x)$", output, re.M):
        rows.append((f"server CPU per call, {before} / {after} in the same run", f"**{_dash(ratio)}**"))
    return rows


def parse_suite(output: str) -> list[Row]:
    """bench_suite: one row, a fresh clone's `.ci/run`."""
    return [
        (f"{row['command']} of {row['commit']}", f"{row['seconds']} s ({row['CPU seconds']} CPU seconds), exit {row['exit']}; {row['pytest']}")
        for row in table(output, "command")
    ]


BENCHMARKS = (
    Benchmark("server", "bench_server.py", (), one(parse_server)),
    Benchmark("replace", "bench_replace.py", ("--size-mb", "10"), one(parse_replace)),
    Benchmark("client", "bench_client.py", (), one(parse_client)),
    Benchmark("sandbox", "bench_sandbox.py", ("--runs", "50"), one(parse_sandbox)),
    # glob puts recently modified files first: every file recent (sorted by time), none (by path), all at one
    # instant (every tie ordered too, its costliest case); the last two at the largest scale only
    Benchmark("search", "bench_search.py", ("--mtime-age", "0"), one(parse_search)),
    Benchmark("search_old", "bench_search.py", ("--mtime-age", "48", "--scales", "16", "--walk-files", "0"), one(parse_search)),
    Benchmark("search_ties", "bench_search.py", ("--mtime-age", "0", "--equal-mtimes", "--scales", "16", "--walk-files", "0"), one(parse_search)),
    Benchmark("load", "bench_load.py", (), one(parse_load)),
    Benchmark("peers", "bench_peers.py", (), parse_peers, runs=3),
    Benchmark("http_cpu", "bench_http_cpu.py", ("--checkout", f"{BASE}={WORKTREE}", "--checkout", "main=."), one(parse_http_cpu)),
    Benchmark("http_cpu_read", "bench_http_cpu.py", ("--checkout", f"{BASE}={WORKTREE}", "--checkout", "main=.", "--mix", "read"), one(parse_http_cpu)),
    Benchmark("suite", "bench_suite.py", (), one(parse_suite), asked_only=True),
)
GOAL_SOURCES = ("peers", "http_cpu", "suite")


# -- issue 35's goals, from the same outputs ----------------------------------------------------------------


def _met(passed: list[bool]) -> str:
    if all(passed):
        return "met"
    if not any(passed):
        return "**not met**"
    return f"met in {sum(passed)} of {len(passed)} runs"


def _peer_ratios(outputs: list[str], operation: str) -> dict[str, list[str]]:
    """`{column: ours / column per run}` of the bench_peers operation whose label starts with `operation`."""
    found = _peer_runs(outputs)
    return {column: [r for _, r in runs] for (op, column), runs in found.items() if op.startswith(operation) and column != "ours"}


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _goal_write(peers: list[str]) -> tuple[str, str]:
    ratios = _peer_ratios(peers, "write_file new")
    ref = ratios.get("reference", [])
    floor = next((r for column, r in ratios.items() if column.startswith("floor")), [])
    if not ref or not floor:
        return NOT_MEASURED, ""
    passed = [_number(r) <= 1.5 or _number(f) <= 1.2 for r, f in zip(ref, floor)]
    return f"{_span(ref)} of the reference, {_span(floor)} of the floor ({_runs(len(ref))})", _met(passed)


def _goal_read(peers: list[str]) -> tuple[str, str]:
    ref = _peer_ratios(peers, "read_many_files").get("reference", [])
    if not ref:
        return NOT_MEASURED, ""
    return f"{_span(ref)} ({_runs(len(ref))})", _met([_number(r) <= 1.0 for r in ref])


def _goal_http(output: str) -> tuple[str, str]:
    """bench_http_cpu prints the range of BASE / main over its runs; the goal is met in every run when its
    low end is, in none when its high end is not."""
    ratio = re.search(rf"^server CPU per call, {BASE} / main \(same run\): ([\d.]+)(?:-([\d.]+))?x$", output, re.M)
    if not ratio:
        return NOT_MEASURED, ""
    low, high = ratio.group(1), ratio.group(2) or ratio.group(1)
    runs = re.search(r", (\d+) runs; generator", output)
    counted = f" ({_runs(int(runs.group(1)))})" if runs else ""
    met = "met" if float(low) >= 1.3 else "**not met**" if float(high) < 1.3 else "met in some runs, not all"
    return f"{BASE} / main: {_span([low, high], 'x')}{counted}", met


def _goal_suite(output: str) -> tuple[str, str]:
    rows = table(output, "command")
    if not rows:
        return NOT_MEASURED, ""
    row = rows[0]
    return f"{row['seconds']} s, exit {row['exit']} (1 run)", _met([row["exit"] == "0" and float(row["seconds"]) <= 150])


def goal_rows(outputs: dict[str, list[str]]) -> list[tuple[str, str, str, str]]:
    """`(operation, goal, measured, met)` for each of issue 35's goals, in the issue's words."""
    peers, http, suite = outputs.get("peers", []), outputs.get("http_cpu", [""])[0], outputs.get("suite", [""])[0]
    return [
        ("`write_file` of a NEW 2 KB file, then one `replace` in it (fresh file each round)",
         "≤ 1.5x the Node reference server, or ≤ 1.2x our durable floor in the same run; both reported", *_goal_write(peers)),
        ("`read_many_files`, 150 files, 0.92 MB", "≤ 1.0x the reference", *_goal_read(peers)),
        ("HTTP server CPU per call, 50 clients × 20 calls, pinned cores", f"≤ 1/1.3 of commit `{BASE}`, same run", *_goal_http(http)),
        ("test suite on a fresh clone (`.ci/run`)", "≤ 150 s", *_goal_suite(suite)),
    ]  # fmt: skip


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


@contextmanager
def base_worktree() -> Iterator[Path]:
    """A detached worktree of BASE in a temporary directory, with its own locked environment; removed after."""
    with tempfile.TemporaryDirectory(prefix=f"coretools-{BASE}-") as tmp:
        tree = Path(tmp) / BASE
        subprocess.run(["git", "worktree", "add", "--quiet", "--detach", str(tree), BASE], cwd=REPO, check=True)
        try:
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
            subprocess.run(["uv", "sync", "--locked", "--quiet"], cwd=tree, env=env, check=True)
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
            shutil.rmtree(tree, ignore_errors=True)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=False)


def run_one(bench: Benchmark, record: dict, results: Path) -> None:
    with base_worktree() if any(WORKTREE in a for a in bench.args) else _nothing() as tree:
        args = [a.replace(WORKTREE, str(tree)) for a in bench.args]
        outputs = []
        started = time.monotonic()
        load = os.getloadavg()[0]
        for n in range(bench.runs):
            print(f"running {bench.command()} ({n + 1} of {bench.runs}) ..." if bench.runs > 1 else f"running {bench.command()} ...",
                  file=sys.stderr, flush=True)  # fmt: skip
            done = subprocess.run([sys.executable, str(REPO / "benchmarks" / bench.script), *args], cwd=REPO, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{bench.command()} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
            outputs.append(done.stdout)
    if not bench.parse(outputs):
        sys.exit(f"{bench.command()} printed nothing this script can read:\n{outputs[-1][-3000:]}")
    for name in results.glob(f"{bench.name}*.txt"):
        if re.fullmatch(rf"{bench.name}(-\d+)?\.txt", name.name):
            name.unlink()  # a different number of runs before
    for name, output in zip(bench.files(), outputs):
        (results / name).write_text(output)
    record[bench.name] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),  # when it ended
        "seconds": round(time.monotonic() - started),
        "load_average": round(load, 2),
        "commit": commit(),
        **machine(),
    }
    (results / RUN.name).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def run(benchmarks: list[Benchmark], results: Path = RESULTS) -> None:
    results.mkdir(parents=True, exist_ok=True)
    record = json.loads((results / RUN.name).read_text()) if (results / RUN.name).exists() else {}
    for bench in benchmarks:
        run_one(bench, record, results)


def outputs(bench: Benchmark, results: Path = RESULTS) -> list[str]:
    return [(results / name).read_text() for name in bench.files()]


def render(results: Path = RESULTS) -> str:
    """The tables, from the saved outputs and run records alone."""
    record = json.loads((results / "run.json").read_text())
    lines = ["| command | measured | result |", "|---|---|---|"]
    runs = []
    saved: dict[str, list[str]] = {}
    for bench in BENCHMARKS:
        if bench.name not in record:
            continue
        saved[bench.name] = outputs(bench, results)
        rows = bench.parse(saved[bench.name])
        for i, (what, result) in enumerate(rows):
            lines.append(f"| {'`' + bench.command() + '`' if i == 0 else ''} | {what} | {result} |")
        r = record[bench.name]
        times = "" if bench.runs == 1 else f"{bench.runs} runs, "
        runs.append(
            f"- `{bench.script}`: {times}{r['seconds']} s ending {r['date']}, on {r['cpu']}, {r['cpus']} CPUs, {r['system']}, "
            f"Python {r['python']}; commit {r['commit']}; load average {r['load_average']} at its start"
        )
    said = "" if all(b.runs == 1 for b in BENCHMARKS if b.name in saved) else " unless said"
    heading = f"One run of each command{said}; what each printed is in `benchmarks/results/NAME.txt`:"
    text = [heading, "", *runs, "", *lines]
    if any(name in saved for name in GOAL_SOURCES):
        text += ["", goal_heading(), "", *goal_table(saved)]
    return "\n".join(text) + "\n"


def goal_heading() -> str:
    return (
        f"Issue 35's goals, from the same outputs (`WORKTREE` above is a worktree of `{BASE}` that "
        "`readme_figures.py` makes); a range is the lowest and highest figure over the runs:"
    )


def goal_table(saved: dict[str, list[str]]) -> list[str]:
    lines = ["| operation | goal | measured | met |", "|---|---|---|---|"]
    lines += [f"| {operation} | {goal} | {measured} | {met} |" for operation, goal, measured, met in goal_rows(saved)]
    return lines


def readme_with(table: str, readme: str) -> str:
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        sys.exit(f"README.md has no {BEGIN!r} ... {END!r} markers")
    return readme[: start + len(BEGIN)] + "\n" + table + readme[end:]


def write(table: str) -> None:
    TABLE.write_text(table)
    README.write_text(readme_with(table, README.read_text()))


def main() -> int:
    known = ", ".join(b.name for b in BENCHMARKS)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated: {known}; goals: peers,http_cpu (default: all but suite)")
    parser.add_argument("--suite", action="store_true", help="also time the test suite on a fresh clone (bench_suite.py, ~11 minutes)")
    parser.add_argument("--render", action="store_true", help="do not run anything: rewrite the tables from benchmarks/results/")
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="DIR",
                        help="keep the outputs in DIR instead; the tables are then printed, README.md left alone (a trial run)")  # fmt: skip
    args = parser.parse_args()
    names: set[str] = set()
    if not args.render:
        if args.only:
            names = {n for name in args.only.split(",") for n in (("peers", "http_cpu") if name == "goals" else (name,))}
        else:
            names = {b.name for b in BENCHMARKS if not b.asked_only}
        if args.suite:
            names.add("suite")
        unknown = sorted(names - {b.name for b in BENCHMARKS})
        if unknown:
            parser.error(f"unknown benchmark {', '.join(unknown)}; known: {known}, goals")
    try:
        run([b for b in BENCHMARKS if b.name in names], args.results)
    finally:  # a benchmark that failed stops the run: the tables still show every output saved before it
        table = render(args.results)
        if args.results.resolve() == RESULTS:
            write(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
