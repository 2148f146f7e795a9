"""Near-miss recovery of `replace`: per-class recovery rates, wrong or corrupting edits and negative refusals
on the corpus of `nearmiss_corpus.py` (real third-party code, pinned versions), then the time of one
replace call on a file of about 60 KB, per class, fuzzy included, with worst cases for the fuzzy search
(blocks of 10 to 80 lines that are near nothing, so every window is examined).

Every call goes through the real tool (validation, sandbox, plan, atomic write) in one server tool set.

Run: uv run python benchmarks/bench_nearmiss.py [--per-class 60] [--per-negative 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.nearmiss_corpus import (
    BIG_SOURCE,
    NEGATIVE,
    POSITIVE,
    Case,
    corpus,
    negative,
    positive,
    read_source,
)


class Tools:
    def __init__(self, root: Path) -> None:
        from coretools.cli import build_parser
        from coretools.sandbox.gateway import Workspace
        from coretools.workspace.hints import HintedWorkspace
        from coretools.server.config import ServerConfig
        from coretools.server.toolset import ToolSet, tool_options

        ns = build_parser().parse_args(["serve", "--root", str(root)])
        roots = [Workspace.check_root(r, allow_broad=True) for r in ns.roots]
        self.config = ServerConfig.from_namespace(ns, roots=roots, tool_options=tool_options(ns))
        self.toolset = ToolSet(self.config)
        self.ws = HintedWorkspace(self.config.roots, allow_protected=self.config.allow_protected)

    async def replace(self, path: Path, old: str, new: str):
        from coretools.tools.base import ToolContext

        args = {"file_path": str(path), "old_string": old, "new_string": new}
        return await self.toolset.call("replace", args, ToolContext(workspace=self.ws))


async def run(tools: Tools, root: Path, case: Case) -> tuple[str, float]:
    f = root / "case.txt"
    data = case.text.encode()
    f.write_bytes(data)
    t0 = time.perf_counter()
    res = await tools.replace(f, case.old, case.new)
    took = time.perf_counter() - t0
    after = f.read_bytes()
    if case.positive:
        assert case.expected is not None
        if res.is_error:
            return ("missed" if after == data else "wrong"), took
        return ("ok" if after == case.expected.encode() else "wrong"), took
    return ("ok" if res.is_error and after == data else "wrong"), took


def far_blocks(text: str, rng: random.Random) -> list[Case]:
    """Blocks near nothing in `text`: the fuzzy search examines every window and accepts none."""
    words = text.split()
    cases = []
    for lines in (10, 40, 80):
        block = "\n".join(" ".join(rng.choice(words) for _ in range(6)) for _ in range(lines)) + "\n"
        cases.append(Case(f"far-{lines}", f"fuzzy worst ({lines} lines)", "synthetic", text, block, "x\n", None))
    return cases


async def main(per_class: int, per_negative: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tools = Tools(root)
        await tools.toolset.start()
        cases = corpus(per_class, per_negative)
        outcome: dict[str, Counter] = {}
        for case in cases:
            result, _ = await run(tools, root, case)
            outcome.setdefault(case.kind, Counter())[result] += 1
        print(f"corpus: {len(cases)} cases from {len({c.source for c in cases})} files of pinned packages")
        print(f"{'class':18}{'cases':>7}{'recovered':>11}{'rate':>8}{'wrong':>7}")
        total = Counter()
        for kind in POSITIVE:
            c = outcome.get(kind, Counter())
            n = sum(c.values())
            total += c
            print(f"{kind:18}{n:>7}{c['ok']:>11}{c['ok'] / max(n, 1):>8.1%}{c['wrong']:>7}")
        n = sum(total.values())
        print(f"{'all positives':18}{n:>7}{total['ok']:>11}{total['ok'] / max(n, 1):>8.1%}{total['wrong']:>7}")
        print(f"\n{'negative':18}{'cases':>7}{'refused':>11}{'wrong':>7}")
        for kind in NEGATIVE:
            c = outcome.get(kind, Counter())
            print(f"{kind:18}{sum(c.values()):>7}{c['ok']:>11}{c['wrong']:>7}")

        big = read_source(*BIG_SOURCE)
        print(f"\ntime per replace on {big.label} ({len(big.text.encode()):,} bytes):")
        print(f"{'class':24}{'calls':>6}{'ok':>5}{'p50 ms':>9}{'max ms':>9}")
        rng = random.Random(60)
        timed: dict[str, list[tuple[str, float]]] = {}
        for kind in (*POSITIVE, *NEGATIVE):
            make = positive if kind in POSITIVE else negative
            for n in range(40):
                if kind == "tabs_file":
                    break
                case = make(kind, rng, [big] if kind != "foreign" else [big, read_source("h11", "h11/_connection.py")],
                            n)
                if case is not None and case.text.count("\n") >= big.text.count("\n"):
                    timed.setdefault(kind, []).append(await run(tools, root, case))
        for case in far_blocks(big.text, rng):
            timed.setdefault(case.kind, []).append(await run(tools, root, case))
        for kind, runs in timed.items():
            ms = [t * 1000 for _, t in runs]
            ok = sum(1 for r, _ in runs if r == "ok")
            print(f"{kind:24}{len(runs):>6}{ok:>5}{statistics.median(ms):>9.1f}{max(ms):>9.1f}")
        await tools.toolset.aclose()
        tools.ws.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-class", type=int, default=60)
    parser.add_argument("--per-negative", type=int, default=30)
    ns = parser.parse_args()
    anyio.run(main, ns.per_class, ns.per_negative)
