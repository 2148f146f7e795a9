"""What each shell sandbox costs per command (issue 29): `bash -c true` through the process runner.

    uv run --locked python benchmarks/bench_sandbox.py [--runs 50]

Modes, sampled in turn so that each sees the same load (the machine is shared and noisy: read the ratios):

* `bare`: `bash -c true` started by `subprocess.run`, no runner at all (the floor);
* `none`: the runner with no confinement: the per-run reaper (`sandbox/reaper.py`) that keeps the command's
  process tree, and nothing else;
* `landlock`: the reaper, a Landlock ruleset built for the run (the roots, the caches, the scratch carve-out)
  and the seccomp filter;
* `bwrap`: bubblewrap with the protected-path scan of the root.

Prints the median and the 90th percentile of wall time in milliseconds, each mode's median over `none`'s
and over `bare`'s, and the CPU time its processes used per command (user + system of the children, which
the machine's load does not inflate). The root is a small temporary tree (a git repository with 200 directories), as a command in a
project would see.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

import anyio

from coretools.sandbox.landlock import abi
from coretools.sandbox.process_settings import ProcessSettings
from coretools.sandbox.runner import Runner

MODES = ("bare", "none", "landlock", "bwrap")


def make_root(base: str) -> str:
    root = os.path.join(base, "project")
    os.makedirs(root)
    subprocess.run(["git", "init", "-q", root], check=True)
    for i in range(200):
        os.makedirs(os.path.join(root, f"pkg{i // 20}", f"mod{i}"))
        with open(os.path.join(root, f"pkg{i // 20}", f"mod{i}", "a.py"), "w") as fh:
            fh.write("x = 1\n")
    return root


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def sample(mode: str, runner: Runner, root: str) -> float:
    started = time.perf_counter()
    if mode == "bare":
        subprocess.run(["bash", "-c", "true"], check=True)
    else:
        spec = ProcessSettings(sandbox=mode).spec(runner, ["bash", "-c", "true"], cwd=root, roots=[root])
        outcome = await runner.run(spec)
        assert outcome.exit_code == 0, (mode, outcome.stderr.text())
    return (time.perf_counter() - started) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as base:
        root = make_root(base)
        runner = Runner("bench", base=base)
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        cpu = dict.fromkeys(MODES, 0.0)
        for mode in MODES:  # warm-up: probes, caches, page cache
            await sample(mode, runner, root)
        for _ in range(args.runs):
            for mode in MODES:
                before = children_cpu()
                times[mode].append(await sample(mode, runner, root))
                cpu[mode] += children_cpu() - before
        await runner.aclose()
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    print(f"bash -c true, {args.runs} runs per mode, Landlock ABI {abi()}, {os.cpu_count()} CPUs")
    print(f"{'mode':10} {'median ms':>10} {'p90 ms':>8} {'x none':>8} {'x bare':>8} {'CPU ms':>8}")
    for mode in MODES:
        p90 = statistics.quantiles(times[mode], n=10)[-1]
        print(f"{mode:10} {medians[mode]:10.2f} {p90:8.2f} {medians[mode] / medians['none']:8.2f} "
              f"{medians[mode] / medians['bare']:8.2f} {cpu[mode] / args.runs * 1000:8.2f}")  # fmt: skip


if __name__ == "__main__":
    anyio.run(main)
