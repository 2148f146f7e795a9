"""coretools against its peers, in one run, on the pinned Django corpus (issue 23's table, tool side).

    uv run --locked python benchmarks/bench_peers.py [--runs 15] [--start-tree /tmp/start] [--only search,...]

The corpus (`django_corpus.py`): the Django 5.1 sdist with its tests, a git work tree, plus 7,000 files in a
`.gitignore`d `build/`. Our server runs warm over stdio (`coretools serve --max-result-chars 0`), driven by
the official MCP Python client; so does the reference filesystem server from npm
(`@modelcontextprotocol/server-filesystem`, version pinned below, installed once under
`benchmarks/.corpus/npm/`). Every sample of ours is followed by one of each peer, so both see the same load;
each figure is a median over `--runs` samples after warm-up calls. Operations and peers:

* search `def\\s+test_\\w+` (about 16,000 matches, 300 shown, true total; ours is case-insensitive by default)
  vs bare `rg -n --no-heading -i -e PATTERN` (ripgrep's default filters), its output read through a pipe;
* read_many_files of 150 `django/` files (~0.92 MB) vs the reference's `read_multiple_files`;
* write_file of a new 2 KB file, then one replace in it (a fresh file each round) vs the same pair on the
  reference; the floor is two journal appends and two durable writes;
* write_file + replace on a small file (our edit journal on, the default, in a state directory per server
  under the corpus, full after the first runs) vs the reference's `write_file` + `edit_file` (which do not
  fsync); the floor is two bare Python durable writes (temp file, fsync, rename, directory fsync);
* read_file of a 2 KB file vs the reference's `read_text_file`;
* glob `**/*.py` vs `rg --files -g '*.py'`.

Peak RSS is sampled over our server's process tree (the server and the ripgrep it starts) every 10 ms.
`--start-tree DIR` also runs the server from another checkout (e.g. `git worktree add /tmp/start d739254`)
in the same rounds, for before/after figures and the RSS comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import django_corpus  # noqa: E402

NPM_PACKAGE = "@modelcontextprotocol/server-filesystem"
NPM_VERSION = "2026.8.31"
NPM_DIR = django_corpus.CORPUS / "npm"
PATTERN = r"def\s+test_\w+"
SMALL = "".join(f"    value_{i:03d} = compute({i}, 'abcdefghij')\n" for i in range(46))  # ~2 KB


def rg_binary() -> str:
    sys.path.insert(0, str(REPO))
    from coretools.sandbox.ripgrep import find_rg

    rg = find_rg()
    if rg is None:
        sys.exit("no ripgrep binary")
    return rg


def reference_server() -> Path:
    """The pinned reference server's entry point, installed with npm on first use."""
    entry = NPM_DIR / "node_modules" / NPM_PACKAGE / "dist" / "index.js"
    if not entry.exists():
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        (NPM_DIR / "package.json").write_text('{"private": true}\n')
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", f"{NPM_PACKAGE}@{NPM_VERSION}"],
                       cwd=NPM_DIR, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return entry


class TreePeak:
    """The peak of the summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak_kib = max(self.peak_kib, sum(_rss_kib(p) for p in _tree(self.pid)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak_kib, _rss_kib(self.pid, "VmHWM"))


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


def _rss_kib(pid: int, key: str = "VmRSS") -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _child_pid(marker: str, known: set[int]) -> int:
    """The pid of our new child process whose command line holds `marker` (the MCP client hides it)."""
    for pid in _tree(os.getpid())[1:]:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if pid not in known and marker.encode() in cmd:
            return pid
    raise RuntimeError(f"no child process running {marker}")


class Peer:
    """One MCP server over stdio with the official client, kept open for the whole run."""

    def __init__(
        self, name: str, command: str, args: list[str], env: dict | None, marker: str, cwd: Path | None = None
    ) -> None:
        self.name, self.command, self.args, self.env, self.marker = name, command, args, env, marker
        self.cwd = cwd
        self.session = None
        self.peak: TreePeak | None = None

    async def open(self, stack) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        known = set(_tree(os.getpid()))
        env = {**os.environ, **(self.env or {})}
        params = StdioServerParameters(command=self.command, args=self.args, env=env, cwd=str(self.cwd) if self.cwd else None)
        read, write = await stack.enter_async_context(stdio_client(params))
        self.session = await stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self.peak = TreePeak(_child_pid(self.marker, known))

    async def call(self, tool: str, args: dict) -> str:
        result = await self.session.call_tool(tool, args)
        text = "\n".join(b.text for b in result.content if b.type == "text")
        if getattr(result, "is_error", None) or getattr(result, "isError", None):
            raise RuntimeError(f"{self.name} {tool}: {text[:500]}")
        return text


def ours(name: str, tree: Path, root: Path) -> Peer:
    argv = ["-m", "coretools", "serve", "--root", str(root)]
    if "--max-result-chars" in (tree / "coretools" / "cli.py").read_text():  # older trees have no result budget
        argv += ["--max-result-chars", "0"]
    # `-m` puts the working directory first on sys.path: run in the tree, or its package is not the one used.
    # Each server keeps its edit journal in a state directory of its own (trees may differ in its format),
    # kept between runs so the journal is at its bounds (evicting on every edit) as in long use.
    env = {"PYTHONPATH": str(tree), "CORETOOLS_STATE_DIR": str(django_corpus.CORPUS / f"state-{name}")}
    return Peer(name, sys.executable, argv, env, "coretools", cwd=tree)


def durable_write(path: Path, data: bytes) -> None:
    """The floor for one durable replacement of a file's content."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".floor-")
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def journal_append(path: Path, data: bytes) -> None:
    """The floor for one journal record: the before-content appended to a log and fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def operations(root: Path, rg: str):
    """`(label, {peer kind: async fn(peer, i)}, bare fn or None)`; peer kinds: "ours", "ref"."""
    scratch = root / "_scratch"
    picked = django_corpus.read_set(root)
    rel = [str(p.relative_to(root)) for p in picked]
    small = scratch / "small.py"
    small.write_text(SMALL)

    def pipe(argv: list[str]):
        return lambda: subprocess.run(argv, cwd=root, stdin=subprocess.DEVNULL, capture_output=True, check=False)

    def edit_file(kind: str):
        async def ours_edit(peer: Peer, i: int) -> None:
            path = scratch / f"edit_{peer.name}.py"  # one file per server: each has its own stale-write guard
            await peer.call("write_file", {"file_path": str(path), "content": f"# round {i}\n" + SMALL})
            await peer.call("replace", {"file_path": str(path), "old_string": "value_007 = compute(7,",
                                        "new_string": f"value_007 = compute({i + 8},"})  # fmt: skip

        async def ref_edit(peer: Peer, i: int) -> None:
            path = scratch / f"edit_{peer.name}.py"
            await peer.call("write_file", {"path": str(path), "content": f"# round {i}\n" + SMALL})
            await peer.call("edit_file", {"path": str(path), "edits": [
                {"oldText": "value_007 = compute(7,", "newText": f"value_007 = compute({i + 8},"}]})  # fmt: skip

        return ref_edit if kind == "ref" else ours_edit

    def new_file(kind: str):
        """A fresh file each round, as agents create files: write it, then one replace in it."""

        async def ours_new(peer: Peer, i: int) -> None:
            path = scratch / f"new_{peer.name}_{os.getpid()}_{i}.py"
            await peer.call("write_file", {"file_path": str(path), "content": SMALL})
            await peer.call("replace", {"file_path": str(path), "old_string": "value_007 = compute(7,",
                                        "new_string": f"value_007 = compute({i + 8},"})  # fmt: skip

        async def ref_new(peer: Peer, i: int) -> None:
            path = scratch / f"new_{peer.name}_{os.getpid()}_{i}.py"
            await peer.call("write_file", {"path": str(path), "content": SMALL})
            await peer.call("edit_file", {"path": str(path), "edits": [
                {"oldText": "value_007 = compute(7,", "newText": f"value_007 = compute({i + 8},"}]})  # fmt: skip

        return ref_new if kind == "ref" else ours_new

    floor_path = scratch / "floor.py"

    def floor() -> None:
        durable_write(floor_path, SMALL.encode())
        durable_write(floor_path, SMALL.replace("compute(7,", "compute(8,").encode())

    journal_path = scratch / "floor.journal"
    floor_round = [0]

    def floor_new() -> None:
        """What a new file and one edit of it must cost with the journal on: the file created durably, then
        replaced durably, each preceded by a journal record appended and fsynced."""
        floor_round[0] += 1
        path = scratch / f"floor_new_{os.getpid()}_{floor_round[0]}.py"
        for data in (SMALL.encode(), SMALL.replace("compute(7,", "compute(8,").encode()):
            journal_append(journal_path, data)
            durable_write(path, data)

    return [
        ("search def\\s+test_\\w+", {
            "ours": lambda p, i: p.call("search_file_content", {"pattern": PATTERN}),
        }, ("rg -n --no-heading -i -e PATTERN", pipe([rg, "-n", "--no-heading", "-i", "-e", PATTERN]))),
        (f"read_many_files {len(rel)} files", {
            "ours": lambda p, i: p.call("read_many_files", {"paths": rel}),
            "ref": lambda p, i: p.call("read_multiple_files", {"paths": [str(x) for x in picked]}),
        }, None),
        ("write_file + replace", {"ours": edit_file("ours"), "ref": edit_file("ref")},
         ("floor: 2 durable writes", floor)),
        ("write_file new + replace", {"ours": new_file("ours"), "ref": new_file("ref")},
         ("floor: 2 journal appends + 2 durable writes", floor_new)),
        ("read_file 2 KB", {
            "ours": lambda p, i: p.call("read_file", {"absolute_path": str(small)}),
            "ref": lambda p, i: p.call("read_text_file", {"path": str(small)}),
        }, None),
        ("glob **/*.py", {
            "ours": lambda p, i: p.call("glob", {"pattern": "**/*.py"}),
        }, ("rg --files -g '*.py'", pipe([rg, "--files", "-g", "*.py"]))),
    ]  # fmt: skip


async def measure(peers: list[Peer], ops, runs: int, warm: int, only: set[str] | None) -> list[tuple]:
    """For each operation: `(label, {column: median seconds})`, samples interleaved across columns."""
    rows = []
    for label, calls, bare in ops:
        if only and not any(word in label for word in only):
            continue
        columns: dict[str, list[float]] = {}
        for i in range(warm + runs):
            for peer in peers:
                fn = calls.get("ours" if peer.name != "reference" else "ref")
                if fn is None:
                    continue
                start = time.perf_counter()
                await fn(peer, i)
                if i >= warm:
                    columns.setdefault(peer.name, []).append(time.perf_counter() - start)
            if bare is not None:
                start = time.perf_counter()
                await asyncio.to_thread(bare[1])
                if i >= warm:
                    columns.setdefault(bare[0], []).append(time.perf_counter() - start)
        rows.append((label, {k: statistics.median(v) for k, v in columns.items()}))
    return rows


def report(rows, peers: list[Peer], rss: dict[str, int]) -> None:
    """One markdown table (`benchmarks/readme_figures.py` reads it), then the peak RSS lines."""
    print("\n| operation | column | median ms | ours / column |")
    print("|---|---|---|---|")
    for label, cols in rows:
        first = cols["ours"]
        for name, took in cols.items():
            ratio = "" if name == "ours" else f"{first / took:.2f}x"
            print(f"| {label} | {name} | {took * 1000:.2f} | {ratio} |")
    print()
    for name, kib in rss.items():
        print(f"peak RSS of the {name} server's process tree: {kib / 1024:.1f} MiB")
    if "ours" in rss and "start" in rss:
        print(f"ours / start: {rss['ours'] / rss['start']:.2f}x (goal <= 1.10x and <= 140 MiB)")


async def run(args) -> None:
    from contextlib import AsyncExitStack

    root = django_corpus.build()
    rg = rg_binary()
    peers = [ours("ours", REPO, root)]
    if args.start_tree:
        peers.append(ours("start", Path(args.start_tree).resolve(), root))
    peers.append(Peer("reference", "node", [str(reference_server()), str(root)], None, "server-filesystem"))
    only = set(args.only.split(",")) if args.only else None
    async with AsyncExitStack() as stack:
        for peer in peers:
            await peer.open(stack)
        try:
            rows = await measure(peers, operations(root, rg), args.runs, args.warm, only)
        finally:
            for made in [*(root / "_scratch").glob("*new_*.py"), root / "_scratch" / "floor.journal"]:
                made.unlink(missing_ok=True)  # the new-file rounds' files, so later searches see the same corpus
        rss = {peer.name: peer.peak.stop() for peer in peers}
    print(f"corpus: {root} (django {django_corpus.VERSION} + {django_corpus.IGNORED_FILES} ignored files); "
          f"{args.runs} runs after {args.warm} warm-up; reference {NPM_PACKAGE}@{NPM_VERSION}; node "
          f"{subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}")  # fmt: skip
    report(rows, peers, rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--start-tree", metavar="DIR", help="also run the server from this checkout")
    parser.add_argument("--only", help="comma-separated words: only the operations whose label holds one")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
