"""The test suite's time on a fresh clone, run the way CI runs it (issue 35's goal: `.ci/run` in <= 150 s).

    uv run --locked python benchmarks/bench_suite.py [--repo DIR]

Clones the repository's committed HEAD (`git clone`: what a contributor or CI checks out, none of the
working tree's uncommitted files) into a temporary directory, runs its `.ci/run` once (the package check,
then the whole suite as the README runs it) and prints one markdown table: the commit, the wall-clock
seconds, the CPU seconds of everything it ran, its exit status and pytest's summary line. The clone's
environment is made by `uv` from the machine's package cache, so no time goes to downloads; one run takes
about as long as the figure it prints (minutes), which is why `readme_figures.py` runs it only when asked.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^=+ (.*? in [\d.]+s.*?) =+$")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the repository to clone (default: this one)")
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.repo, capture_output=True, text=True, check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    with tempfile.TemporaryDirectory(prefix="coretools-suite-") as tmp:
        os.chmod(tmp, 0o755)  # as a checkout is: the suite runs the server as another user, who must reach it
        clone = Path(tmp) / "coretools"
        subprocess.run(["git", "clone", "--quiet", str(args.repo), str(clone)], check=True)
        log = Path(tmp) / "ci.log"
        cpu, started = children_cpu(), time.monotonic()
        with log.open("w") as out:
            done = subprocess.run([str(clone / ".ci" / "run")], cwd=clone, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        seconds, cpu = time.monotonic() - started, children_cpu() - cpu
        lines = log.read_text(errors="replace").splitlines()
    summary = next((m.group(1) for line in reversed(lines) if (m := SUMMARY.match(line.strip()))), "no pytest summary line")
    if done.returncode != 0:
        print("\n".join(lines[-40:]), file=sys.stderr)
    print("| command | commit | seconds | CPU seconds | exit | pytest |")
    print("|---|---|---|---|---|---|")
    print(f"| `.ci/run` on a fresh clone | {head.stdout.strip()} | {seconds:.0f} | {cpu:.0f} | {done.returncode} | {summary} |")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
