"""Load: many concurrent MCP clients over streamable HTTP against one coretools server on 127.0.0.1.

Each client is an official MCP `Client` with its own session. Together they make a fixed number of calls
mixing reads, searches, listings and edits, built from the tools the server actually lists (so the mix
grows as tools land). Every call's outcome is checked: a success must contain what the inputs imply (the
file's own marker, the client's current token), and a few calls are made to fail on purpose (a missing
file, a `replace` whose old text is absent) and must fail. Anything else is an unearned error.

Reported: per-tool count, p50/p99 latency, throughput, unearned errors, and the server's RSS after a
warm-up and after each round (a long run is `--rounds N`: memory should stay flat). Numbers vary by machine;
compare rows of one run, not runs of different machines.

    uv run python benchmarks/bench_load.py                     # 50 clients, 5000 calls, 1 round
    uv run python benchmarks/bench_load.py --rounds 6          # long run: RSS per round
    uv run python benchmarks/bench_load.py --mode auto --stateless
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from http_harness import HttpServer, http_client  # noqa: E402

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma"]


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    expect_error: bool = False
    must_contain: str | None = None
    after: Any = None  # callback run on success (advances the client's edit state)


@dataclass
class Outcome:
    tool: str
    seconds: float
    is_error: bool
    expect_error: bool
    ok: bool
    detail: str


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    wall: float = 0.0
    rss_kib: list[tuple[str, int]] = field(default_factory=list)
    server_alive: bool = True
    tools: list[str] = field(default_factory=list)
    server_cpu: float = 0.0  # seconds of CPU the server used during the rounds
    client_cpu: float = 0.0  # ... and this process (all the clients)

    @property
    def answered(self) -> int:
        return len(self.outcomes)

    @property
    def unearned(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok and not o.expect_error]

    @property
    def earned_missing(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok and o.expect_error]


def make_corpus(root: Path, files: int = 200) -> list[Path]:
    rng = random.Random(7)
    paths = []
    for i in range(files):
        d = root / "src" / f"pkg{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        lines = [f"# FILE-{i} marker"]
        for n in range(60):
            lines.append(f"def f{n}_{rng.choice(WORDS)}(x):  # {rng.choice(WORDS)} {n}")
        p = d / f"mod{i}.py"
        p.write_text("\n".join(lines) + "\n")
        paths.append(p)
    (root / "edits").mkdir(exist_ok=True)
    return paths


class ClientPlan:
    """The calls of one client: deterministic (seeded), adapted to the listed tools, with edit state."""

    def __init__(self, index: int, root: Path, corpus: list[Path], schemas: dict[str, dict]) -> None:
        self.rng = random.Random(1000 + index)
        self.root = root
        self.corpus = corpus
        self.schemas = schemas
        self.edit_file = root / "edits" / f"client{index}.txt"
        self.edit_file.write_text(f"client {index}\ntoken v0\n")
        self.version = 0
        self.kinds = [k for k, needs in self.MIX if all(t in schemas for t in needs)]

    MIX = [
        ("read", ("read_file",)),
        ("read", ("read_file",)),
        ("read", ("read_file",)),
        ("read_missing", ("read_file",)),
        ("search", ("search_file_content",)),
        ("search", ("search_file_content",)),
        ("glob", ("glob",)),
        ("list", ("list_directory",)),
        ("many", ("read_many_files",)),
        ("replace", ("replace",)),
        ("replace", ("replace",)),
        ("replace_absent", ("replace",)),
        ("write", ("write_file",)),
    ]

    def _path_arg(self, tool: str, *names: str) -> str:
        props = self.schemas[tool].get("properties", {})
        return next((n for n in names if n in props), names[0])

    def next_call(self) -> Call:
        kind = self.rng.choice(self.kinds)
        if kind == "read":
            i = self.rng.randrange(len(self.corpus))
            key = self._path_arg("read_file", "absolute_path", "file_path")
            return Call("read_file", {key: str(self.corpus[i])}, must_contain=f"FILE-{i} marker")
        if kind == "read_missing":
            key = self._path_arg("read_file", "absolute_path", "file_path")
            return Call("read_file", {key: str(self.root / "nope" / f"missing{self.rng.random()}.txt")}, expect_error=True)
        if kind == "search":
            word = self.rng.choice(WORDS)
            return Call("search_file_content", {"pattern": f"def f\\d+_{word}", "path": str(self.root / "src")}, must_contain=word)
        if kind == "glob":
            pkg = self.rng.randrange(10)
            return Call("glob", {"pattern": f"src/pkg{pkg}/*.py", "path": str(self.root)}, must_contain=f"pkg{pkg}")
        if kind == "list":
            pkg = self.rng.randrange(10)
            return Call("list_directory", {"path": str(self.root / "src" / f"pkg{pkg}")}, must_contain="mod")
        if kind == "many":
            pkg = self.rng.randrange(10)
            return Call("read_many_files", {"paths": [f"src/pkg{pkg}/mod{pkg}.py"]}, must_contain=f"FILE-{pkg} marker")
        if kind in ("replace", "replace_absent"):
            key = self._path_arg("replace", "file_path", "absolute_path")
            if kind == "replace_absent":
                args = {key: str(self.edit_file), "old_string": "no such text here", "new_string": "x"}
                return Call("replace", args, expect_error=True)
            old, new = f"token v{self.version}", f"token v{self.version + 1}"
            return Call("replace", {key: str(self.edit_file), "old_string": old, "new_string": new}, after=self._advance)
        key = self._path_arg("write_file", "file_path", "absolute_path")
        self.version += 1
        return Call("write_file", {key: str(self.edit_file), "content": f"rewritten\ntoken v{self.version}\n"})

    def _advance(self) -> None:
        self.version += 1


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def _client(url: str, mode: str, plan: ClientPlan, count: int, outcomes: list[Outcome], timeout: float) -> None:
    async with http_client(url, mode) as client:
        for _ in range(count):
            call = plan.next_call()
            start = time.perf_counter()
            try:
                result = await client.call_tool(call.tool, call.args, read_timeout_seconds=timeout)
            except Exception as exc:  # noqa: BLE001 - a protocol failure is recorded as an unearned error
                outcomes.append(Outcome(call.tool, time.perf_counter() - start, True, call.expect_error, False, repr(exc)))
                continue
            elapsed = time.perf_counter() - start
            text = _text(result)
            if call.expect_error:
                ok = bool(result.is_error)
            else:
                ok = not result.is_error and (call.must_contain is None or call.must_contain in text)
                if ok and call.after is not None:
                    call.after()
            outcomes.append(Outcome(call.tool, elapsed, bool(result.is_error), call.expect_error, ok, text[:300]))


async def run_load(
    base: Path,
    *,
    clients: int = 50,
    calls: int = 5000,
    rounds: int = 1,
    mode: str = "legacy",
    server_flags: tuple[str, ...] = (),
    timeout: float = 60.0,
) -> Report:
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    corpus = make_corpus(root)
    flags = ("--max-calls", str(max(64, clients * 2)), *server_flags)
    server = HttpServer.start([root], *flags)
    report = Report()
    try:
        async with http_client(server.url, mode) as probe:
            schemas = {t.name: t.input_schema for t in (await probe.list_tools()).tools}
        report.tools = sorted(schemas)
        plans = [ClientPlan(i, root, corpus, schemas) for i in range(clients)]
        # warm-up: every tool once, so start-of-run RSS includes lazily imported modules
        warm: list[Outcome] = []
        await _client(server.url, mode, ClientPlan(clients, root, corpus, schemas), 40, warm, timeout)
        report.rss_kib.append(("after warm-up", server.rss_kib()))
        shares = [calls // clients + (1 if i < calls % clients else 0) for i in range(clients)]
        for n in range(rounds):
            outcomes: list[Outcome] = []
            cpu_server, cpu_clients = _cpu_seconds(server.pid), time.process_time()
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for plan, share in zip(plans, shares):
                    tg.start_soon(_client, server.url, mode, plan, share, outcomes, timeout)
            report.wall += time.perf_counter() - start
            report.server_cpu += _cpu_seconds(server.pid) - cpu_server
            report.client_cpu += time.process_time() - cpu_clients
            report.outcomes.extend(outcomes)
            report.rss_kib.append((f"after round {n + 1}", server.rss_kib()))
        report.server_alive = server.alive()
    finally:
        server.stop()
    return report


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def print_report(report: Report, clients: int, mode: str) -> None:
    by_tool: dict[str, list[Outcome]] = defaultdict(list)
    for o in report.outcomes:
        by_tool[o.tool].append(o)
    print(f"\n{clients} clients, mode={mode}, {report.answered} calls, tools listed: {', '.join(report.tools)}")
    print("| tool | calls | p50 ms | p99 ms | max ms | earned err | unearned |")
    print("|---|---|---|---|---|---|---|")
    rows = sorted(by_tool.items()) + [("ALL", report.outcomes)]
    for tool, items in rows:
        ms = [o.seconds * 1000 for o in items]
        earned = sum(1 for o in items if o.expect_error and o.is_error)
        unearned = sum(1 for o in items if not o.ok and not o.expect_error)
        print(f"| {tool} | {len(items)} | {_pct(ms, 50):.1f} | {_pct(ms, 99):.1f} | {max(ms):.1f} | {earned} | {unearned} |")
    print(f"\nthroughput: {report.answered / report.wall:.0f} calls/s over {report.wall:.1f} s of load")
    print(
        f"CPU during the load: server {report.server_cpu:.1f} s, clients (this process) {report.client_cpu:.1f} s, "
        f"on {os.cpu_count()} CPUs"
    )
    print("server RSS: " + ", ".join(f"{label} {kib / 1024:.1f} MiB" for label, kib in report.rss_kib))
    if report.unearned:
        print(f"\nUNEARNED ERRORS ({len(report.unearned)}), first 5:")
        for o in report.unearned[:5]:
            print(f"  {o.tool}: {o.detail[:200]!r}")
    if report.earned_missing:
        print(f"\nexpected errors that did not happen: {len(report.earned_missing)}")
    print(f"server alive at the end: {report.server_alive}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=5000, help="calls per round, spread over the clients")
    parser.add_argument("--rounds", type=int, default=1, help="rounds on the same server (RSS after each)")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    parser.add_argument("--stateless", action="store_true")
    args = parser.parse_args()
    flags = ("--stateless",) if args.stateless else ()
    with tempfile.TemporaryDirectory(prefix="coretools-load-") as tmp:
        report = anyio.run(
            lambda: run_load(Path(tmp), clients=args.clients, calls=args.calls, rounds=args.rounds, mode=args.mode, server_flags=flags)
        )
    print_report(report, args.clients, args.mode)
    return 0 if not report.unearned and not report.earned_missing and report.server_alive else 1


if __name__ == "__main__":
    sys.exit(main())
