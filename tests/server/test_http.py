"""Streamable HTTP: a real `coretools-mcp serve --transport http` on 127.0.0.1 and a free port, driven by the
official MCP client in both protocol eras (`legacy` = the 2025 handshake over a stateful session, `auto` =
2026-07-28 single-exchange requests) and by raw HTTP for the security checks.

Covers: progress over SSE, cancellation (client cancel, timeout, vanished client), per-session roots,
a slow call not blocking another client's read, bounded concurrency, the bearer token, DNS-rebinding
protection, the refusal of an unauthenticated public bind, a clean shutdown, and a small load run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import types

import server_fork
from http_harness import REPO, HttpServer, http_client, pid_alive, server_command, server_env, wait_for
from support import linked_files

pytestmark = pytest.mark.timeout(120)

INIT_BODY = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _shared_server(tmp_path_factory: pytest.TempPathFactory, *flags: str):
    base = tmp_path_factory.mktemp("shared")
    root = base / "root"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "fa.txt").write_text("alpha\n")
    (root / "b" / "fb.txt").write_text("beta\n")
    (root / "hello.txt").write_text("hello over http\n")
    server = HttpServer.start([root], *flags, probe=True, forked=True)
    yield server, root, base
    assert server.stop() == 0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory):
    """One probe-enabled stateful server for the tests that need no special flags."""
    yield from _shared_server(tmp_path_factory)


@pytest.fixture(scope="module")
def shared_stateless(tmp_path_factory: pytest.TempPathFactory):
    """One probe-enabled `--stateless` server, the same root as `shared`."""
    yield from _shared_server(tmp_path_factory, "--stateless")


@pytest.fixture(params=[False, True], ids=["stateful", "stateless"])
def either(request: pytest.FixtureRequest):
    """`shared` or `shared_stateless`."""
    return request.getfixturevalue("shared_stateless" if request.param else "shared")


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def _until(predicate, timeout: float = 10.0) -> bool:
    with anyio.move_on_after(timeout):
        while not predicate():
            await anyio.sleep(0.02)
    return predicate()


# -- basics -----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_and_read_file_over_http(shared, mode: str) -> None:
    server, root, _ = shared
    async with http_client(server.url, mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "read_file" in names and "probe_sleep" in names
        assert client.server_info.name == "coretools"
        result = await client.call_tool("read_file", {"absolute_path": str(root / "hello.txt")})
        assert not result.is_error
        assert "hello over http" in _text(result)
        outside = await client.call_tool("read_file", {"absolute_path": str(root.parent / "elsewhere.txt")})
        assert outside.is_error


def test_nothing_on_stdout(shared) -> None:
    server, _, _ = shared
    assert server.stdout == []
    assert any("serving MCP over HTTP at http://127.0.0.1:" in line for line in server.stderr)


# -- progress and cancellation over SSE -------------------------------------------------------------------


@pytest.mark.anyio
async def test_progress_arrives_over_sse(mode: str, either) -> None:
    server, _, _ = either
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with http_client(server.url, mode) as client:
        result = await client.call_tool("probe_sleep", {"seconds": 0.5, "steps": 5}, progress_callback=on_progress)
        assert not result.is_error, _text(result)
        assert await _until(lambda: len(seen) == 5)  # notifications may trail the result
    assert [s[0] for s in seen] == [1, 2, 3, 4, 5]
    assert seen[-1] == (5, 5, "step 5/5")


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["cancel-task", "timeout"])
async def test_cancellation_reaches_the_tool(shared, mode: str, how: str) -> None:
    server, root, base = shared
    marker = str(base / f"cancel-{mode}-{how}")
    started = anyio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    args = {"seconds": 60, "steps": 600, "marker": marker}
    async with http_client(server.url, mode) as client:
        if how == "cancel-task":
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool("probe_sleep", args, progress_callback=on_progress)

                tg.start_soon(call)
                with anyio.fail_after(15):
                    await started.wait()
                tg.cancel_scope.cancel()
        else:
            from mcp import MCPError

            with pytest.raises(MCPError):
                await client.call_tool("probe_sleep", args, read_timeout_seconds=1.0)
        assert await _until(lambda: os.path.exists(marker + ".cancelled"))
        assert not os.path.exists(marker + ".finished")
        # the session is still usable after the cancellation
        result = await client.call_tool("read_file", {"absolute_path": str(root / "hello.txt")})
        assert "hello over http" in _text(result)


CLIENT_SCRIPT = """
import sys, anyio
sys.path.insert(0, {tests!r})
from http_harness import http_client
async def main(url, mode, marker):
    async with http_client(url, mode) as client:
        await client.call_tool("probe_sleep", {{"seconds": 60, "steps": 60, "marker": marker}})
anyio.run(main, *sys.argv[1:])
"""


def _client_command(url: str, mode: str, marker: str) -> list[str]:
    """A client process of its own that starts a 60-second probe call. Forked (`server_fork`): killing it
    kills the forked client with SIGKILL too, so its connections end as a vanished client's do."""
    return server_fork.command(["-c", CLIENT_SCRIPT.format(tests=str(REPO / "tests")), url, mode, marker], server_env())


def test_vanished_client_call_is_cancelled(mode: str, either, tmp_path: Path) -> None:
    """A client process killed mid-call (no DELETE, no cancel notification): its call is cancelled anyway."""
    server, _, _ = either
    marker = str(tmp_path / "vanish")
    client = subprocess.Popen(_client_command(server.url, mode, marker), env=server_env())
    try:
        assert wait_for(lambda: os.path.exists(marker + ".started"), 20)
    finally:
        client.kill()
        client.wait()
    assert wait_for(lambda: os.path.exists(marker + ".cancelled"), 10), "".join(server.stderr)
    assert server.alive()


# -- sessions: roots, isolation, limits -------------------------------------------------------------------


def _roots_callback(path: Path):
    async def list_roots(ctx) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=path.as_uri(), name=path.name)])

    return list_roots


async def _visible(url: str, mode: str, root: Path, client_root: Path) -> dict[str, bool]:
    """Which of a/fa.txt and b/fb.txt a client declaring `client_root` can read."""
    async with http_client(url, mode, list_roots_callback=_roots_callback(client_root)) as client:
        seen = {}
        for rel in ("a/fa.txt", "b/fb.txt"):
            result = await client.call_tool("read_file", {"absolute_path": str(root / rel)})
            seen[rel] = not result.is_error
        return seen


@pytest.mark.anyio
async def test_each_session_has_its_own_roots(shared) -> None:
    """Two concurrent legacy sessions narrowing the operator root differently each see only their part."""
    server, root, _ = shared
    results: dict[str, dict[str, bool]] = {}

    async def run(sub: str) -> None:
        results[sub] = await _visible(server.url, "legacy", root, root / sub)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "a")
        tg.start_soon(run, "b")
    assert results["a"] == {"a/fa.txt": True, "b/fb.txt": False}
    assert results["b"] == {"a/fa.txt": False, "b/fb.txt": True}


@pytest.mark.anyio
async def test_client_roots_cannot_widen(shared) -> None:
    server, root, base = shared
    # a client root above the operator root is narrowed to the operator root
    assert await _visible(server.url, "legacy", root, base) == {"a/fa.txt": True, "b/fb.txt": True}


@pytest.mark.anyio
async def test_without_a_back_channel_the_operator_roots_apply(shared, shared_stateless) -> None:
    """Stateless HTTP and 2026-era requests cannot ask the client for roots: the operator roots apply."""
    everything = {"a/fa.txt": True, "b/fb.txt": True}
    server, root, _ = shared_stateless
    for mode in ("legacy", "auto"):
        assert await _visible(server.url, mode, root, root / "a") == everything
    server, root, _ = shared
    assert await _visible(server.url, "auto", root, root / "a") == everything
    assert await _visible(server.url, "legacy", root, root / "a") == {"a/fa.txt": True, "b/fb.txt": False}


@pytest.mark.anyio
async def test_slow_call_does_not_block_another_clients_reads(shared, mode: str) -> None:
    server, root, base = shared
    marker = str(base / f"slow-{mode}")
    async with http_client(server.url, mode) as slow_client, http_client(server.url, mode) as reader:
        async with anyio.create_task_group() as tg:
            slow_done = anyio.Event()

            async def slow() -> None:
                await slow_client.call_tool("probe_sleep", {"seconds": 60, "steps": 60, "marker": marker})
                slow_done.set()

            tg.start_soon(slow)
            assert await _until(lambda: os.path.exists(marker + ".started"))
            for _ in range(20):
                result = await reader.call_tool("read_file", {"absolute_path": str(root / "hello.txt")})
                assert "hello over http" in _text(result)
            assert not slow_done.is_set(), "the reads waited for the slow call"
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_slow_shell_command_does_not_block_reads(shared) -> None:
    server, root, _ = shared
    async with http_client(server.url) as shell_client, http_client(server.url) as reader:
        if "run_shell_command" not in [t.name for t in (await shell_client.list_tools()).tools]:
            pytest.skip("run_shell_command is not published in this configuration")
        async with anyio.create_task_group() as tg:
            done = anyio.Event()

            async def slow() -> None:
                await shell_client.call_tool("run_shell_command", {"command": "touch shell-started; sleep 60"})
                done.set()

            tg.start_soon(slow)
            assert await _until(lambda: (root / "shell-started").exists(), 20)
            for _ in range(20):
                assert "hello over http" in _text(await reader.call_tool("read_file", {"absolute_path": str(root / "hello.txt")}))
            assert not done.is_set()
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_huge_search_does_not_block_another_clients_reads(tmp_path: Path) -> None:
    """A search over ~10k files takes seconds; reads from another session keep completing meanwhile (work
    that blocked the event loop would hold every read until the search returned)."""
    root = tmp_path / "root"
    for d in range(100):
        (root / "tree" / f"d{d}").mkdir(parents=True)
    files = (root / "tree" / f"d{d}" / f"f{f}.txt" for d in range(100) for f in range(100))
    linked_files(files, "hello world line\n" * 20)
    (root / "f.txt").write_text("quick\n")
    with HttpServer.start([root], forked=True) as server:
        async with http_client(server.url) as searcher, http_client(server.url) as reader:
            if "search_file_content" not in [t.name for t in (await searcher.list_tools()).tools]:
                pytest.skip("search_file_content is not published")
            done = anyio.Event()
            reads_while_searching = 0

            async def search() -> None:
                result = await searcher.call_tool("search_file_content", {"pattern": "hello (world|there)"})
                assert not result.is_error, _text(result)
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(search)
                while not done.is_set():
                    result = await reader.call_tool("read_file", {"absolute_path": str(root / "f.txt")})
                    assert "quick" in _text(result)
                    reads_while_searching += 0 if done.is_set() else 1
            assert reads_while_searching >= 3, reads_while_searching


@pytest.mark.anyio
async def test_busy_limits_per_session_and_overall_without_a_queue(tmp_path: Path) -> None:
    """With the queue off (`--queue-timeout 0`) a call over a limit is refused at once; the queue itself is
    tested in test_call_queue.py."""
    (tmp_path / "root").mkdir()
    markers = tmp_path / "m"
    markers.mkdir()
    # both clients connect from 127.0.0.1, one client to the server: it runs all of --max-calls but one
    flags = ("--max-session-calls", "2", "--max-calls", "4", "--queue-timeout", "0", "--structured-content")
    with HttpServer.start([tmp_path / "root"], *flags, probe=True, forked=True) as server:
        async with http_client(server.url) as first, http_client(server.url) as second:
            async with anyio.create_task_group() as tg:
                for i in range(2):
                    tg.start_soon(first.call_tool, "probe_sleep", {"seconds": 60, "steps": 60, "marker": f"{markers}/a{i}"})
                assert await _until(lambda: len(list(markers.glob("a*.started"))) == 2)

                refused = await first.call_tool("probe_sleep", {"seconds": 0.01})
                assert refused.is_error
                assert "Server busy" in _text(refused) and "--max-session-calls" in _text(refused)
                assert refused.structured_content["error"]["kind"] == "server_busy"

                tg.start_soon(second.call_tool, "probe_sleep", {"seconds": 60, "steps": 60, "marker": f"{markers}/b0"})
                assert await _until(lambda: (markers / "b0.started").exists())
                overall = await second.call_tool("probe_sleep", {"seconds": 0.01})
                assert overall.is_error and "--max-calls" in _text(overall)
                tg.cancel_scope.cancel()
            # cancelled calls gave their slots back
            assert await _until(lambda: len(list(markers.glob("*.cancelled"))) == 3)
            again = await first.call_tool("probe_sleep", {"seconds": 0.01})
            assert not again.is_error, _text(again)


# -- security: token, DNS rebinding, bind policy ----------------------------------------------------------


def _post(url: str, headers: dict[str, str] | None = None, body: dict | None = None) -> httpx2.Response:
    """One raw POST on a fresh connection; plain HTTP, so no TLS context (`verify=False`, 50 ms of CPU saved)."""
    with httpx2.Client(timeout=10, trust_env=False, verify=False) as http:
        return http.post(url, headers={**MCP_HEADERS, **(headers or {})}, content=json.dumps(body or INIT_BODY))


@pytest.mark.anyio
async def test_bearer_token_required(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "f.txt").write_text("secret-free\n")
    token = "t0k3n-" + "x" * 40
    env = {"CT_TEST_TOKEN": token}
    with HttpServer.start([tmp_path / "root"], "--auth-token-env", "CT_TEST_TOKEN", env=env, forked=True) as server:
        assert "bearer token required" in "".join(server.stderr)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
            response = _post(server.url, headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "error" in response.json()
        assert 'error="invalid_token"' in _post(server.url, {"Authorization": "Bearer wrong"}).headers["www-authenticate"]
        assert _post(server.url, {"Authorization": f"Bearer {token}"}).status_code == 200

        for mode in ("legacy", "auto"):
            async with http_client(server.url, mode, token=token) as client:
                result = await client.call_tool("read_file", {"absolute_path": str(tmp_path / "root" / "f.txt")})
                assert "secret-free" in _text(result)
        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport error for a 401
            with anyio.fail_after(20):
                async with http_client(server.url, "legacy") as client:
                    await client.list_tools()


def test_dns_rebinding_protection(shared) -> None:
    server, _, _ = shared
    assert _post(server.url).status_code == 200
    assert _post(server.url, {"Host": "evil.example"}).status_code == 421
    assert _post(server.url, {"Host": "evil.example:80"}).status_code == 421
    assert _post(server.url, {"Origin": "http://evil.example"}).status_code == 403
    assert _post(server.url, {"Origin": "http://localhost:1234"}).status_code == 200


def test_allowed_host_and_origin(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    flags = ["--allowed-host", "mcp.example.test", "--allowed-origin", "https://app.example.test"]
    with HttpServer.start([tmp_path / "root"], *flags, forked=True) as server:
        port = server.url.split(":")[2].split("/")[0]
        assert _post(server.url, {"Host": f"mcp.example.test:{port}"}).status_code == 200
        assert _post(server.url, {"Host": "mcp.example.test"}).status_code == 200
        assert _post(server.url, {"Host": "other.example.test"}).status_code == 421
        assert _post(server.url, {"Origin": "https://app.example.test"}).status_code == 200
        assert _post(server.url, {"Origin": "https://evil.example.test"}).status_code == 403


def _serve_fails(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "root").mkdir(exist_ok=True)
    return subprocess.run(
        server_fork.command(server_command([tmp_path / "root"], *flags)[1:], server_env(env)),
        capture_output=True,
        text=True,
        env=server_env(env),
        cwd=str(REPO),
        timeout=30,
    )


def test_public_bind_without_token_is_refused(tmp_path: Path) -> None:
    done = _serve_fails(tmp_path, "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "not a loopback address" in done.stderr and "--auth-token-env" in done.stderr
    assert done.stdout == ""


def test_empty_token_variable_is_refused(tmp_path: Path) -> None:
    done = _serve_fails(tmp_path, "--auth-token-env", "CT_UNSET_TOKEN_VAR", env={"CT_UNSET_TOKEN_VAR": ""})
    assert done.returncode == 2
    assert "CT_UNSET_TOKEN_VAR" in done.stderr and "unset or empty" in done.stderr


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = _serve_fails(tmp_path, "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2 and "cannot listen on 127.0.0.1" in done.stderr


def test_public_bind_with_insecure_no_auth_or_token(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with HttpServer.start([tmp_path / "root"], "--host", "0.0.0.0", "--insecure-no-auth", forked=True) as server:
        log = "".join(server.stderr)
        assert "WITHOUT authentication" in log and "--allowed-host" in log
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        assert _post(url).status_code == 200
    env = {"CT_TOKEN": "abc" * 10}
    with HttpServer.start([tmp_path / "root"], "--host", "0.0.0.0", "--auth-token-env", "CT_TOKEN", env=env, forked=True) as server:
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        assert _post(url).status_code == 401
        assert _post(url, {"Authorization": f"Bearer {'abc' * 10}"}).status_code == 200


# -- shutdown ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_clean_shutdown_with_calls_in_flight(tmp_path: Path, sig: int) -> None:
    (tmp_path / "root").mkdir()
    marker = str(tmp_path / "inflight")
    server = HttpServer.start([tmp_path / "root"], probe=True, forked=True)
    client = subprocess.Popen(_client_command(server.url, "legacy", marker), env=server_env(), stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: os.path.exists(marker + ".started"), 20)
        server.proc.send_signal(sig)
        assert server.proc.wait(20) == 0, "".join(server.stderr)
        assert os.path.exists(marker + ".cancelled")
        assert "HTTP server stopped" in "".join(server.stderr)
        # the call's open stream ended at once, not after the whole grace period
        assert "timeout graceful shutdown exceeded" not in "".join(server.stderr), "".join(server.stderr)
        assert not pid_alive(server.pid)
    finally:
        client.kill()
        client.wait()
        server.kill()


# -- load (small) -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_small_load_run_answers_everything(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_load
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    report = await bench_load.run_load(tmp_path, clients=8, calls=160, mode="legacy")
    assert report.answered == 160
    assert report.unearned == [], report.unearned[:5]
    assert report.earned_missing == [], report.earned_missing[:5]
    assert report.server_alive


# -- units: bind policy -----------------------------------------------------------------------------------


def test_loopback_and_allowed_hosts() -> None:
    from coretools.server.http import HttpSettings, is_loopback, transport_security

    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com"))
    settings = HttpSettings("10.1.2.3", 8765, "/mcp", False, "t", ["a.example", "b.example:8443", "[fd00::1]:99"], [])
    hosts = transport_security(settings).allowed_hosts
    assert {"10.1.2.3", "10.1.2.3:*", "a.example", "a.example:*", "b.example:8443", "[fd00::1]:99"} <= set(hosts)
    assert "b.example:8443:*" not in hosts and "127.0.0.1:*" in hosts


# -- units: the connection guard and the HTTP options -----------------------------------------------------


def test_rate_limit_filter_counts_what_it_drops() -> None:
    import logging

    from coretools.server.http_guard import RATE_LIMIT_EXEMPT, RateLimitFilter

    now = [0.0]
    limiter = RateLimitFilter(interval=10, per_key=2, total=3, clock=lambda: now[0])

    def record(msg: str, **extra: object) -> logging.LogRecord:
        rec = logging.LogRecord("x", logging.WARNING, __file__, 1, msg, None, None)
        rec.__dict__.update(extra)
        return rec

    assert [limiter.filter(record("same")) for _ in range(4)] == [True, True, False, False]
    assert limiter.filter(record("other")) is True
    assert limiter.filter(record("third")) is False  # over the total for the window
    assert limiter.filter(record("summary", **{RATE_LIMIT_EXEMPT: True})) is True
    assert limiter.take_suppressed() == 3 and limiter.take_suppressed() == 0
    now[0] = 10.0
    assert limiter.filter(record("same")) is True  # a new window


def test_connection_cap_leaves_half_the_descriptors() -> None:
    from coretools.server.http_guard import ConnectionStats, connection_cap, summary_line

    assert connection_cap(1024, 1024) == 512
    assert connection_cap(100, 1024) == 100
    assert connection_cap(1024, 65536) == 1024
    assert connection_cap(1024, 1) == 1
    empty = ConnectionStats().take()
    assert summary_line(empty, 0, 10, 512, 10, 3) is None
    line = summary_line({**empty, "timed_out": 7}, 2, 10, 512, 10, 3)
    assert line is not None and "7 closed" in line and "2 repeated log lines suppressed" in line
    line = summary_line({**empty, "heads_refused": 1}, 0, 10, 512, 10, 3)
    assert line is not None and "1 requests refused with a head over 16 KiB" in line


def test_host_and_origin_patterns_need_a_numeric_port() -> None:
    from coretools.server.http import _allowed

    patterns = ["127.0.0.1:*", "http://localhost:*", "https://app.example"]
    assert _allowed("127.0.0.1:8765", patterns) and _allowed("http://localhost:3000", patterns)
    assert _allowed("https://app.example", patterns)
    assert not any(
        _allowed(v, patterns)
        for v in ("127.0.0.1:", "127.0.0.1:80.evil", "http://localhost:1234.evil.example", "null", "https://app.example.evil")
    )


def test_http_limit_options_are_checked(tmp_path: Path) -> None:
    from coretools.errors import ConfigurationError
    from coretools.server.http import settings_from
    from support import make_config

    (tmp_path / "r").mkdir()
    defaults = settings_from(make_config([tmp_path / "r"]))
    assert (defaults.max_sessions, defaults.session_idle_timeout) == (256, 600.0)
    assert (defaults.max_connections, defaults.read_timeout) == (1024, 10.0)
    unlimited = settings_from(make_config([tmp_path / "r"], "--max-sessions", "0", "--session-idle-timeout", "0"))
    assert unlimited.max_sessions is None and unlimited.session_idle_timeout is None
    for flags in (
        ["--max-sessions", "-1"],
        ["--session-idle-timeout", "-5"],
        ["--max-connections", "0"],
        ["--read-timeout", "0"],
        ["--read-timeout", "inf"],
        ["--allowed-origin", "NULL"],
    ):
        with pytest.raises(ConfigurationError, match=flags[0]):
            settings_from(make_config([tmp_path / "r"], *flags))
