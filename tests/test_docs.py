"""The README's command blocks and host snippets, and `mcp.json.example`, run the way a new user runs them.

Every fenced block of README.md carries a marker on the line before it, and a block without one fails
`test_every_block_is_marked`, so a new block is classified when it is written:

- `<!-- docs-test: run -->`: each line is a shell command, run in order from this clone, in a new shell,
  as the README writes it (its placeholders filled, `PLACES`); each must exit 0.
- `<!-- docs-test: host-config -->`: a host's JSON entry; its command is started as a host starts it
  (that absolute path, a minimal environment, the working directory `/`) and must answer `tools/list`.
- `<!-- docs-test: skip: REASON -->`: cannot run here (a GUI host, an API key, a daemon on a fixed port);
  reported as skipped, with the reason.

All of it runs in one temporary HOME, with the install the README describes (`uv tool install` from this
clone, `uv tool update-shell`), done once for the module by the blocks themselves, in their README order.
uv's package cache is the machine's (`UV_CACHE_DIR`), so nothing is downloaded twice. The benchmark table
between the `readme_figures` markers is checked against what `benchmarks/readme_figures.py` renders from
the benchmarks' saved outputs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
EXAMPLE = REPO / "mcp.json.example"
MARKER = re.compile(r"^\s*<!-- docs-test: (run|host-config|skip: (.+)) -->\s*$")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
LINE_TIMEOUT = 300  # seconds; an install on a loaded machine takes tens


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    kind: str  # run, host-config, skip, or unmarked
    reason: str
    text: str

    def __str__(self) -> str:
        return f"README.md:{self.line}"


def blocks(text: str) -> list[Block]:
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent = fence.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1 : end])
        marker = MARKER.match(lines[i - 1]) if i else None
        if marker is None:
            found.append(Block(i + 1, "unmarked", "", body))
        else:
            kind = "skip" if marker.group(2) else marker.group(1)
            found.append(Block(i + 1, kind, marker.group(2) or "", body))
        i = end + 1
    return found


BLOCKS = blocks(README.read_text(encoding="utf-8"))
LIVE = [b for b in BLOCKS if b.kind in ("run", "host-config")]


def test_every_block_is_marked() -> None:
    unmarked = [str(b) for b in BLOCKS if b.kind == "unmarked"]
    assert not unmarked, f"blocks without a `<!-- docs-test: ... -->` marker on the line before: {', '.join(unmarked)}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "skip"], ids=str)
def test_skipped_by_design(block: Block) -> None:
    pytest.skip(f"{block}: {block.reason}")


# ------------------------------------------------------------------------------------------ a newcomer


class Newcomer:
    """A temporary HOME with nothing installed, and the places the README's placeholders stand for."""

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.project = base / "project"
        self.app, self.docs = base / "app", base / "docs"
        for directory in (self.home, self.project, self.app, self.docs):
            directory.mkdir()
        (self.project / "hello.txt").write_text("hello\n")
        (self.docs / "guide.md").write_text("# Guide\n")
        cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True).stdout.strip()
        # this machine's settings (PATH, proxies, certificates) stay; what belongs to this user's session,
        # this checkout's environment or the test run goes
        drop = ("XDG_", "VIRTUAL_ENV", "UV_", "PYTEST", "CORETOOLS_", "GEMINI_", "GOOGLE_", "OPENAI_", "PYTHONPATH")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        self.env.update(HOME=str(self.home), SHELL="/bin/bash", UV_CACHE_DIR=cache, NO_COLOR="1")
        self.command = self.home / ".local" / "bin" / "coretools-mcp"
        self.started: dict[str, list[str]] = {}  # a host's launch (JSON) -> the tools it listed
        uvx = shutil.which("uvx") or "uvx"
        self.places = [  # longest first: /home/me/.local/bin/... before /home/me/...
            ("/home/me/.local/bin/coretools-mcp", str(self.command)),
            ("/home/me/.local/bin/uvx", uvx),
            ("/path/to/your/project", str(self.project)),
            ("/path/to/clone", str(REPO)),
            ("/home/me/project", str(self.project)),
            ("/home/me/app", str(self.app)),
            ("/home/me/docs", str(self.docs)),
            ("${workspaceFolder}", str(self.project)),
        ]

    def fill(self, text: str) -> str:
        for placeholder, place in self.places:
            text = text.replace(placeholder, place)
        return text

    def install(self) -> None:
        """The README's install line, unless the blocks before already ran it (one test run alone)."""
        if not self.command.exists():
            lines = (line for b in BLOCKS if b.kind == "run" for line in commands(b))
            line = next(line for line in lines if line.startswith("uv tool install /path/to/clone"))
            done = self.shell(line)
            assert done.returncode == 0, done.stderr[-3000:]

    def start(self, entry: dict) -> list[str]:
        """The tools a host's entry lists when started as a host starts it; the hosts' snippets mostly
        start the same command line, and once is enough."""
        launch = json.dumps([entry["command"], entry.get("args", []), entry.get("env", {})])
        if launch not in self.started:
            self.started[launch] = start_like_a_host(entry["command"], entry.get("args", []), entry.get("env", {}), self.home)
        return self.started[launch]

    def shell(self, line: str) -> subprocess.CompletedProcess[str]:
        """One README line in a new interactive bash (it reads ~/.bashrc, as a terminal would), from this
        clone, with nothing on stdin."""
        return subprocess.run(["bash", "-i", "-c", self.fill(line)], cwd=REPO, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=LINE_TIMEOUT)  # fmt: skip


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory: pytest.TempPathFactory) -> Newcomer:
    if shutil.which("uv") is None:
        pytest.skip("uv is not installed here")
    return Newcomer(tmp_path_factory.mktemp("newcomer"))


def commands(block: Block) -> list[str]:
    return [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def start_like_a_host(command: str, args: list[str], env: dict[str, str], home: Path) -> list[str]:
    """Start a stdio server as hosts do (the command's absolute path, a minimal environment, working
    directory `/`), shake hands, and return the names `tools/list` answers."""
    assert os.path.isabs(command), f"the command {command!r} is not an absolute path: hosts need one"
    environment = {"HOME": str(home), "PATH": "/usr/bin:/bin", **env}
    proc = subprocess.Popen([command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=environment, cwd="/", text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "docs-test", "version": "0"}}
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}) + "\n")
        proc.stdin.flush()
        first = proc.stdout.readline()
        assert first, f"the server ended before answering initialize: {proc.stderr.read() if proc.poll() is not None else ''}"
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [tool["name"] for tool in answer["result"]["tools"]]


def entry_of(config: dict) -> dict:
    servers = config.get("mcpServers") or config.get("servers") or config.get("context_servers")
    assert isinstance(servers, dict) and len(servers) == 1, config
    return next(iter(servers.values()))


@pytest.mark.parametrize("block", LIVE, ids=str)
def test_readme_block(block: Block, newcomer: Newcomer) -> None:
    """The blocks run in README order, so each finds what the ones before it installed."""
    if block.kind == "run":
        for line in commands(block):
            done = newcomer.shell(line)
            output = f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            assert done.returncode == 0, f"{block}: `{line}` exited {done.returncode}\n{output}"
        return
    newcomer.install()
    entry = entry_of(json.loads(newcomer.fill(block.text)))
    names = newcomer.start(entry)
    assert "read_file" in names, f"{block}: tools/list answered {names}"


def test_example_config(newcomer: Newcomer) -> None:
    """mcp.json.example, its placeholders filled: each server starts as a host starts it, and the bridge
    publishes both, `docs` without the shell and without the tools it excludes."""
    config = newcomer.home / "mcp.json"
    config.write_text(newcomer.fill(EXAMPLE.read_text()))
    newcomer.install()
    for alias, entry in json.loads(config.read_text())["mcpServers"].items():
        names = newcomer.start(entry)
        assert "read_file" in names, f"mcp.json.example's {alias}: tools/list answered {names}"
    done = newcomer.shell(f"{newcomer.command} client tools --config {config}")
    assert done.returncode == 0, done.stderr[-3000:]
    names = {d["name"] for tool in json.loads(done.stdout) for d in tool["functionDeclarations"]}
    assert {"app__read_file", "app__run_shell_command", "app__write_file", "docs__read_file"} <= names, sorted(names)
    assert not {"docs__run_shell_command", "docs__write_file", "docs__replace"} & names, sorted(names)


# ------------------------------------------------------------------------------------------ the figures


def _figures():  # noqa: ANN202 - the script's module
    return _benchmark_module("readme_figures")


def _benchmark_module(name: str):  # noqa: ANN202 - a module of benchmarks/
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_benchmark_table_is_the_one_the_script_wrote() -> None:
    """The README's table is exactly what the saved benchmark outputs render to: a figure typed by hand,
    or an output replaced without re-rendering, fails here."""
    if not (REPO / "benchmarks" / "results" / "run.json").exists() and not (REPO / ".git").exists():
        pytest.skip("an sdist holds no benchmark outputs (benchmarks/results/ is in the git checkout only)")
    figures = _figures()
    rendered = figures.render()
    assert (REPO / "benchmarks" / "results" / "readme_table.md").read_text() == rendered
    readme = README.read_text(encoding="utf-8")
    again = "uv run --locked python benchmarks/readme_figures.py --render"
    assert figures.readme_with(rendered, readme) == readme, f"README.md's table differs: run `{again}`"
    for name in json.loads((REPO / "benchmarks" / "results" / "run.json").read_text()):
        bench = next(b for b in figures.BENCHMARKS if b.name == name)
        assert bench.parse(figures.outputs(bench)), f"{', '.join(bench.files())} hold no figures"


def _printed(report, *args) -> str:  # noqa: ANN001 - a benchmark's report function
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report(*args)
    return out.getvalue()


def test_goal_table_is_rendered_from_what_the_benchmarks_print(tmp_path: Path) -> None:
    """Issue 35's goal table comes from the tables bench_peers and bench_http_cpu print (their own report
    functions, fed known medians) and bench_suite's: each ratio's range over the runs, and the goal judged
    run by run; a goal whose benchmark has not run says so. With none of them run there is no goal table."""
    figures = _figures()
    peers, http_cpu = _benchmark_module("bench_peers"), _benchmark_module("bench_http_cpu")
    record = json.loads((REPO / "benchmarks" / "results" / "run.json").read_text())
    shutil.copy(REPO / "benchmarks" / "results" / "sandbox.txt", tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"sandbox": record["sandbox"]}))
    assert "Issue 35" not in figures.render(tmp_path)

    floor = "floor: 2 journal appends + 2 durable writes"
    for n, (vs_ref, vs_floor, read) in enumerate([(1.4, 1.1, 0.9), (1.6, 1.3, 0.95), (1.7, 1.3, 0.92)], 1):
        rows = [
            ("read_many_files 150 files", {"ours": 0.009, "reference": 0.009 / read}),
            ("write_file new + replace", {"ours": 0.0054, "reference": 0.0054 / vs_ref, floor: 0.0054 / vs_floor}),
        ]
        printed = _printed(peers.report, rows, [], {"ours": 83 * 1024, "reference": 120 * 1024})
        (tmp_path / f"peers-{n}.txt").write_text("corpus: /c (django 5.1 + 7000 ignored files); 15 runs after 3 warm-up\n" + printed)
    (tmp_path / "run.json").write_text(json.dumps({"sandbox": record["sandbox"], "peers": record["sandbox"]}))
    rendered = figures.render(tmp_path)
    assert "| `write_file new + replace`: ours vs reference | **1.40x–1.70x** (5.40 ms vs 3.18–3.86 ms) |" in rendered
    write, read, http, suite = rendered.split("| operation | goal | measured | met |\n|---|---|---|---|\n")[1].splitlines()
    assert write.endswith("| 1.40x–1.70x of the reference, 1.10x–1.30x of the floor (3 runs) | met in 1 of 3 runs |"), write
    assert read.endswith("| 0.90x–0.95x (3 runs) | met |"), read
    assert http.endswith(f"| {figures.NOT_MEASURED} |  |") and suite.endswith(f"| {figures.NOT_MEASURED} |  |"), (http, suite)

    options = argparse.Namespace(clients=50, calls=20, mode="legacy", stateless=False, mix="all", runs=3, client_cpu=0, server_cpu=1)
    sample = dict(child_ms=1.0, rate=300.0, p50=100.0, p99=300.0, unearned=0, kept_alive_ms=1.0, fresh_ms=2.0)
    runs = {"9d6fdcb": [http_cpu.Sample(cpu_ms=ms, **sample) for ms in (4.0, 4.2, 4.5)],
            "main": [http_cpu.Sample(cpu_ms=3.0, **sample)] * 3}  # fmt: skip
    (tmp_path / "http_cpu.txt").write_text(_printed(http_cpu.report, runs, options))
    (tmp_path / "suite.txt").write_text(
        "| command | commit | seconds | CPU seconds | exit | pytest |\n|---|---|---|---|---|---|\n"
        "| `.ci/run` on a fresh clone | 0a594bf | 662 | 1210 | 0 | 2100 passed, 12 skipped in 640.21s |\n"
    )
    (tmp_path / "run.json").write_text(json.dumps(dict.fromkeys(["sandbox", "peers", "http_cpu", "suite"], record["sandbox"])))
    http, suite = figures.render(tmp_path).splitlines()[-2:]
    assert http.endswith("| 9d6fdcb / main: 1.33x–1.50x (3 runs) | met |"), http
    assert suite.endswith("| 662 s, exit 0 (1 run) | **not met** |"), suite
