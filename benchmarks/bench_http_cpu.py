"""Server CPU per call over streamable HTTP, for one or more checkouts of coretools side by side.

The load generator (this process: official MCP clients, each with its own session, making `bench_load`'s
checked mix of calls) is pinned to one core and each server to the other, so the two do not compete and
the server's CPU time per call measures the server alone. One core of generator saturates before the
server does, so calls/s barely moves when the server gets cheaper; CPU per call is the figure to judge.

For each checkout, in turn within each run (the order alternates between runs), a fresh server on a fresh
corpus (and an empty edit journal):
- warms up (every tool, 40 calls), then a raw-socket probe times `read_file` calls one after another on
  one kept-alive connection, each following a streamed (SSE) answer, and on fresh connections;
- serves `--clients` clients making `--calls` calls each, all at once; reported: the server process's own
  CPU time (utime + stime from /proc) per call, its tool subprocesses' CPU per call (reaped children),
  calls/s and the p50/p99 latency of a call.

    uv run --locked python benchmarks/bench_http_cpu.py                            # this checkout, 3 runs
    git worktree add /tmp/start23 d739254
    uv run --locked python benchmarks/bench_http_cpu.py --checkout start=/tmp/start23 --checkout main=.
    uv run --locked python benchmarks/bench_http_cpu.py --mix read    # read_file alone: the transport's share
    uv run --locked python benchmarks/bench_http_cpu.py --mix search  # one kind of call alone (see --help)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import ClientPlan, Outcome, _client, _pct, make_corpus  # noqa: E402
from http_harness import URL_LINE, http_client  # noqa: E402 - bench_load put tests/ on the path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    cpu_ms: float  # server process, per call
    child_ms: float  # reaped tool subprocesses, per call
    rate: float
    p50: float
    p99: float
    unearned: int
    kept_alive_ms: float
    fresh_ms: float


def _cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children) CPU seconds of `pid`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK, (int(fields[13]) + int(fields[14])) / CLK_TCK


class Server:
    """`python -m coretools serve --transport http` run from `checkout`, pinned to `cpu`: with the checkout's
    own environment when it has one (`uv sync --locked` there: an older commit with the dependencies it was
    locked to), else with this one's."""

    def __init__(self, checkout: Path, root: Path, cpu: int, flags: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
        env["PYTHONPATH"] = str(checkout)
        env["CORETOOLS_STATE_DIR"] = str(root.parent / "state")  # the edit journal starts empty every time
        python = checkout / ".venv" / "bin" / "python"
        command = [str(python) if python.exists() else sys.executable, "-m", "coretools", "serve", "--transport", "http", "--port", "0", "--root", str(root), *flags]
        self.proc = subprocess.Popen(
            command, cwd=checkout, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        assert self.proc.stderr is not None
        seen = []
        for line in self.proc.stderr:
            seen.append(line)
            match = URL_LINE.search(line)
            if match:
                threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
                return match.group(1)
        raise RuntimeError("server did not start:\n" + "".join(seen))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the raw-socket probe: one call after another on a kept-alive connection ------------------------------


def _post(conn: socket.socket, host: str, path: str, message: dict, session: str | None) -> dict[str, str]:
    body = json.dumps(message).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    if session:
        head += f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n"
    conn.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        data += _recv(conn)
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head_bytes.decode().split("\r\n")[1:])
    headers = {k.lower(): v for k, v in headers.items()}
    if "content-length" in headers:
        while len(rest) < int(headers["content-length"]):
            rest += _recv(conn)
    else:
        while not rest.endswith(b"0\r\n\r\n"):
            rest += _recv(conn)
    return headers


def _recv(conn: socket.socket) -> bytes:
    chunk = conn.recv(65536)
    if not chunk:
        raise ConnectionError("the server closed the connection")
    return chunk


def _connect(host: str) -> socket.socket:
    name, port = host.rsplit(":", 1)
    conn = socket.create_connection((name, int(port)), timeout=30)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def probe_latency(url: str, call: dict, count: int = 20) -> tuple[float, float]:
    """Median ms of a `tools/call` on one kept-alive connection, and on a fresh connection each."""
    host, path = re.match(r"http://([^/]+)(/.*)", url).groups()  # type: ignore[union-attr]
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}
    with _connect(host) as conn:
        session = _post(conn, host, path, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, None).get("mcp-session-id")
        _post(conn, host, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        kept = [_timed_call(conn, host, path, call, i, session) for i in range(1, count + 1)]
    fresh = []
    for i in range(count):
        with _connect(host) as conn:
            fresh.append(_timed_call(conn, host, path, call, 1000 + i, session))
    return statistics.median(kept), statistics.median(fresh)


def _timed_call(conn: socket.socket, host: str, path: str, call: dict, request_id: int, session: str | None) -> float:
    start = time.perf_counter()
    _post(conn, host, path, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}, session)
    return (time.perf_counter() - start) * 1000


# -- one measurement ---------------------------------------------------------------------------------------


async def measure(checkout: Path, base: Path, args: argparse.Namespace) -> Sample:
    """One server from `checkout` on a fresh copy of the corpus under `base`."""
    root = base / "root"
    root.mkdir(parents=True)
    corpus = make_corpus(root)
    flags = ["--max-calls", str(max(64, args.clients * 2)), *(["--stateless"] if args.stateless else [])]
    server = Server(checkout, root, args.server_cpu, flags)
    try:
        async with http_client(server.url, args.mode) as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        warm_plan = ClientPlan(args.clients, root, corpus, schemas)
        await _client(server.url, args.mode, warm_plan, 40, [], 60.0)
        read = ClientPlan(0, root, corpus, schemas)._path_arg("read_file", "absolute_path", "file_path")
        probe_call = {"name": "read_file", "arguments": {read: str(corpus[0])}}
        kept, fresh = await anyio.to_thread.run_sync(probe_latency, server.url, probe_call)
        plans = [ClientPlan(i, root, corpus, schemas) for i in range(args.clients)]
        for plan in plans:
            plan.kinds = [k for k in plan.kinds if args.mix == "all" or k == args.mix]
        outcomes: list[Outcome] = []
        spy = _attach_profiler(server.proc.pid, checkout, args.profile) if args.profile else None
        own, children = _cpu(server.proc.pid)
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for plan in plans:
                tg.start_soon(_client, server.url, args.mode, plan, args.calls, outcomes, 60.0)
        wall = time.perf_counter() - start
        own_after, children_after = _cpu(server.proc.pid)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
    finally:
        server.stop()
    n = len(outcomes)
    ms = [o.seconds * 1000 for o in outcomes]
    return Sample(
        cpu_ms=(own_after - own) * 1000 / n,
        child_ms=(children_after - children) * 1000 / n,
        rate=n / wall,
        p50=_pct(ms, 50),
        p99=_pct(ms, 99),
        unearned=sum(1 for o in outcomes if not o.ok and not o.expect_error),
        kept_alive_ms=kept,
        fresh_ms=fresh,
    )


def _attach_profiler(pid: int, checkout: Path, directory: Path) -> subprocess.Popen:
    """py-spy sampling the server during the load phase only; its flame-graph input (one line per
    stack, `--format raw`) goes to `directory/<checkout name>-<n>.txt`."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{checkout.resolve().name}-{len(list(directory.iterdir()))}.txt"
    spy = subprocess.Popen(
        ["py-spy", "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "--output", str(out), "--gil", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    return spy


def _span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}}-{high:{fmt}}"


def report(results: dict[str, list[Sample]], args: argparse.Namespace) -> None:
    print(f"\n{args.clients} clients x {args.calls} calls, mode={args.mode}{' stateless' if args.stateless else ''}, mix={args.mix}, "
          f"{args.runs} runs; generator on CPU {args.client_cpu}, server on CPU {args.server_cpu} (ranges over runs)")
    print("| checkout | server CPU ms/call | tools ms/call | calls/s | p50 ms | p99 ms | kept-alive ms | fresh ms | unearned |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, samples in results.items():
        def col(attr: str, fmt: str) -> str:
            return _span([getattr(s, attr) for s in samples], fmt)

        print(f"| {label} | {col('cpu_ms', '.2f')} | {col('child_ms', '.2f')} | {col('rate', '.0f')} | {col('p50', '.0f')} "
              f"| {col('p99', '.0f')} | {col('kept_alive_ms', '.1f')} | {col('fresh_ms', '.1f')} | {sum(s.unearned for s in samples)} |")
    labels = list(results)
    if len(labels) > 1:
        base = results[labels[0]]
        for label in labels[1:]:
            ratios = [b.cpu_ms / s.cpu_ms for b, s in zip(base, results[label])]
            print(f"server CPU per call, {labels[0]} / {label} (same run): {_span(ratios, '.2f')}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", metavar="LABEL=PATH", help="a coretools checkout to serve from (repeatable; default: main=this one)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20, help="calls per client")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    parser.add_argument("--stateless", action="store_true")
    kinds = sorted({kind for kind, _ in ClientPlan.MIX})
    parser.add_argument("--mix", choices=["all", *kinds], default="all", help="bench_load's mix of calls, or one kind of them alone (`read`: read_file, the transport's share)")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="sample each server with py-spy (on PATH: `uv tool install py-spy`) during the load phase; stacks to DIR; its overhead counts in CPU per call")
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--server-cpu", type=int, default=1)
    args = parser.parse_args()
    checkouts = dict(entry.split("=", 1) for entry in (args.checkout or [f"main={REPO}"]))
    os.sched_setaffinity(0, {args.client_cpu})
    results: dict[str, list[Sample]] = {label: [] for label in checkouts}
    with tempfile.TemporaryDirectory(prefix="coretools-httpcpu-") as tmp:
        for run in range(args.runs):
            order = list(checkouts.items()) if run % 2 == 0 else list(reversed(checkouts.items()))
            for label, path in order:
                sample = anyio.run(measure, Path(path).resolve(), Path(tmp) / f"{run}-{label}", args)
                results[label].append(sample)
                print(f"run {run + 1} {label}: {sample}", file=sys.stderr)
    report(results, args)
    return 0 if all(s.unearned == 0 for samples in results.values() for s in samples) else 1


if __name__ == "__main__":
    sys.exit(main())
