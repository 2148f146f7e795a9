"""A real coretools server in a subprocess (HTTP or stdio), shared by the HTTP, fault and load tests and by
`benchmarks/bench_load.py`.

`HttpServer.start(roots, *flags)` runs `python -m coretools serve --transport http --port 0 ...`, waits for
the line announcing the URL on stderr and keeps the rest of stderr for assertions. `probe=True` adds
`probe_sleep`, a test-only tool that sleeps in steps, reports progress after each step, and leaves marker
files (`<marker>.started`, `<marker>.cancelled`, `<marker>.finished`) so a test can see from outside the
server when the call started and whether it was cancelled. It exercises the transport without depending
on any real tool being slow.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from coretools.sandbox.process_groups import is_alive as pid_alive  # noqa: F401 - re-exported for the tests

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
URL_LINE = re.compile(r"serving MCP over HTTP at (http://\S+)")


# -- the probe tool (runs inside the server subprocess) --------------------------------------------------


def _probe_tool_class():
    import anyio

    from coretools.tools.base import Tool, ToolResult

    class ProbeSleep(Tool):
        name = "probe_sleep"
        title = "Probe: sleep"
        description = "Test-only: sleep `seconds` in `steps` steps, reporting progress after each."
        input_schema = {
            "type": "object",
            "properties": {
                "seconds": {"type": "number", "description": "total time"},
                "steps": {"type": "integer", "description": "progress notifications", "minimum": 1},
                "marker": {"type": "string", "description": "absolute path prefix for marker files"},
            },
            "required": ["seconds"],
        }

        async def run(self, args: dict[str, Any], ctx) -> ToolResult:
            steps = int(args.get("steps") or 1)
            marker = args.get("marker") or ""

            def touch(suffix: str) -> None:
                if marker:
                    Path(marker + suffix).write_text(str(os.getpid()))

            touch(".started")
            try:
                for i in range(1, steps + 1):
                    await anyio.sleep(float(args["seconds"]) / steps)
                    await ctx.progress(i, steps, f"step {i}/{steps}")
            except anyio.get_cancelled_exc_class():
                touch(".cancelled")
                raise
            touch(".finished")
            return ToolResult.text(f"slept {args['seconds']}s in {steps} steps")

    return ProbeSleep


def main_with_probe(argv: list[str]) -> int:
    """`coretools-mcp` with the probe tool added to the registry (used as the subprocess entry point)."""
    import coretools.server.toolset as toolset
    import coretools.tools as tools

    probe_module = types.ModuleType("coretools.tools.probe_sleep")
    probe_module.TOOL = _probe_tool_class()  # type: ignore[attr-defined]
    real = tools.tool_modules

    def with_probe():
        yield from real()
        yield probe_module

    tools.tool_modules = with_probe
    toolset.tool_modules = with_probe
    from coretools.cli import main

    return main(argv)


def server_command(roots: list[Path], *flags: str, transport: str = "http", probe: bool = False) -> list[str]:
    args = ["serve"]
    if transport == "http":
        args += ["--transport", "http", "--port", "0"]
    for r in roots:
        args += ["--root", str(r)]
    args += list(flags)
    if probe:
        boot = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import http_harness as h; sys.exit(h.main_with_probe(sys.argv[1:]))"
        return [sys.executable, "-c", boot, *args]
    return [sys.executable, "-m", "coretools", *args]


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.update(extra or {})
    return env


class HttpServer:
    """A `coretools-mcp serve --transport http` subprocess on 127.0.0.1 and a free port."""

    def __init__(self, proc: subprocess.Popen, url: str, stderr: list[str], stdout: list[str]) -> None:
        self.proc = proc
        self.url = url
        self.stderr = stderr
        self.stdout = stdout

    @classmethod
    def start(
        cls,
        roots: list[Path],
        *flags: str,
        env: dict[str, str] | None = None,
        probe: bool = False,
        preexec_fn: Callable[[], None] | None = None,
        timeout: float = 30.0,
        command: list[str] | None = None,
        forked: bool = False,
    ) -> HttpServer:
        """Start a server on `roots` (or run `command`, which must start one) and wait for its URL. `forked`:
        forked from a server that has imported coretools already (`server_fork`), for the tests that only
        speak to it and signal it; its `pid` is then the launcher's, which stands in for it."""
        argv = command or server_command(roots, *flags, probe=probe)
        if forked:
            import server_fork

            assert argv[0] == sys.executable and preexec_fn is None, "a forked server runs this interpreter, as is"
            argv = server_fork.command(argv[1:], server_env(env))
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(env),
            cwd=str(REPO),
            text=True,
            preexec_fn=preexec_fn,
        )
        lines: list[str] = []
        found = threading.Event()
        url: list[str] = []

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                m = URL_LINE.search(line)
                if m and not url:
                    url.append(m.group(1))
                    found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        out: list[str] = []
        threading.Thread(target=lambda: out.extend(proc.stdout or ()), daemon=True).start()
        if not found.wait(timeout) or not url:
            proc.kill()
            proc.wait()
            raise RuntimeError("HTTP server did not start:\n" + "".join(lines))
        return cls(proc, url[0], lines, out)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_kib(self) -> int:
        return proc_rss_kib(self.pid)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then wait for the exit code (SIGKILL if it does not stop in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def proc_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@asynccontextmanager
async def http_client(
    url: str, mode: str = "legacy", token: str | None = None, headers: dict[str, str] | None = None,
    **client_kwargs: Any,
):
    """An official MCP `Client` connected to `url` (streamable HTTP), sending a bearer token when given and
    any other `headers` (a `User-Agent` of its own makes it another client to a server without sessions)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    headers = dict(headers or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    # The SDK's own client settings (`create_mcp_http_client`: its timeouts, redirects left off), but no TLS
    # context for a plain-HTTP URL: building one costs ~50 ms of CPU, and the suite makes hundreds of clients.
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, verify=not url.startswith("http://")) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **client_kwargs) as client:
            yield client


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
