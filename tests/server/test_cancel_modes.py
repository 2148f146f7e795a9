"""Cancellation ends a running shell command in every mode, with the official SDK client and real processes.

Each test starts `run_shell_command` with a command that writes its own PID to a file and then becomes
`sleep 30`; the call is then abandoned one of three ways and the test measures how long the `sleep` outlives
that moment (it must be gone within `KILL_DEADLINE`):

- `cancel`: the caller's task is cancelled, so the SDK sends `notifications/cancelled` (2025 era, and 2026
  over stdio) or closes the call's response stream (2026 era over HTTP);
- `timeout`: the call's `read_timeout_seconds` expires, which abandons it the same way;
- `drop`: the client process is killed outright (no cancel, no goodbye).

Modes: stdio, stateful HTTP, stateless HTTP, each in both protocol eras (`legacy` = the 2025-11-25
handshake, `auto` = 2026-07-28). All six combinations exist; over HTTP a 2026 request is a single exchange
whether or not the server runs `--stateless`.

Also here: a cancel POSTed on its own (outside a session) stops only the named call of the same caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest

import server_fork
from http_harness import REPO, HttpServer, http_client, pid_alive, server_env, wait_for
from support import stdio_params

pytestmark = [pytest.mark.timeout(90), pytest.mark.anyio]

KILL_DEADLINE = 1.0  # seconds between abandoning a call and its process being gone
# The command writes its own pid (`$$`), which is a host pid under Landlock (bubblewrap's PID namespace would
# give another number): sandboxed, with the pids the test can check.
HOST_PIDS = ("--shell-sandbox", "landlock")
START_DEADLINE = 20.0  # seconds for the command to start (server start-up included)
TOKEN = "cancel-test-" + "k" * 40
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LATENCIES: dict[str, float] = {}


def shell_args(pidfile: Path) -> dict:
    return {"command": f"echo $$ > {pidfile}; exec sleep 30", "description": "sleep for the cancel test"}


def read_pid(pidfile: Path) -> int | None:
    try:
        text = pidfile.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


async def wait_pid(pidfile: Path, timeout: float = START_DEADLINE) -> int:
    with anyio.fail_after(timeout):
        while (pid := read_pid(pidfile)) is None:
            await anyio.sleep(0.02)
    assert pid_alive(pid)
    return pid


async def kill_latency(pid: int, since: float, label: str) -> float:
    """Seconds from `since` until `pid` is gone (fails past a generous bound; callers check the deadline).
    It waits on the event loop: a client may still have a cancel to send."""
    with anyio.move_on_after(10):
        while pid_alive(pid):
            await anyio.sleep(0.005)
    assert not pid_alive(pid), f"{label}: process {pid} still running after 10 s"
    latency = time.monotonic() - since
    LATENCIES[label] = latency
    sys.stderr.write(f"kill latency {label}: {latency:.3f} s\n")
    return latency


def cleanup(pidfile: Path) -> None:
    pid = read_pid(pidfile)
    if pid is not None and pid_alive(pid):
        os.kill(pid, 9)


# -- transports ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_servers(tmp_path_factory: pytest.TempPathFactory):
    """One stateful and one stateless server, both with a bearer token (the stateless one keys cancels on it)."""
    root = tmp_path_factory.mktemp("cancel-root")
    env = {"CT_CANCEL_TOKEN": TOKEN}
    flags = ["--auth-token-env", "CT_CANCEL_TOKEN", *HOST_PIDS]
    servers = {
        "stateful": HttpServer.start([root], *flags, env=env, forked=True),
        "stateless": HttpServer.start([root], *flags, "--stateless", env=env, forked=True),
    }
    yield servers, root
    for server in servers.values():
        assert server.stop() == 0, "".join(server.stderr)


@pytest.fixture(scope="module")
def open_stateless_server(tmp_path_factory: pytest.TempPathFactory):
    """A stateless server without a bearer token."""
    root = tmp_path_factory.mktemp("open-root")
    server = HttpServer.start([root], "--stateless", *HOST_PIDS, forked=True)
    server.root = root
    yield server
    assert server.stop() == 0, "".join(server.stderr)


def _client(transport: str, mode: str, http_servers, root: Path, **kwargs):
    if transport == "stdio":
        from mcp import Client

        return Client(stdio_params([root], *HOST_PIDS, forked=True), mode=mode, **kwargs)
    servers, _ = http_servers
    return http_client(servers[transport].url, mode, token=TOKEN, **kwargs)


def _root(transport: str, http_servers, tmp_path: Path) -> Path:
    if transport == "stdio":
        root = tmp_path / "root"
        root.mkdir(exist_ok=True)
        return root
    return http_servers[1]


TRANSPORTS = ["stdio", "stateful", "stateless"]


# -- cancel and timeout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancel_kills_the_command(transport: str, mode: str, http_servers, tmp_path: Path) -> None:
    root = _root(transport, http_servers, tmp_path)
    pidfile = root / f"{tmp_path.name}-cancel.pid"  # inside the root: the sandbox lets the command write only there
    try:
        async with _client(transport, mode, http_servers, root) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "run_shell_command", shell_args(pidfile))
                pid = await wait_pid(pidfile)
                since = time.monotonic()
                tg.cancel_scope.cancel()
            latency = await kill_latency(pid, since, f"cancel/{transport}/{mode}")
            assert latency < KILL_DEADLINE
            # the connection is still usable afterwards
            assert (await client.list_tools()).tools
    finally:
        cleanup(pidfile)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_timeout_kills_the_command(transport: str, mode: str, http_servers, tmp_path: Path) -> None:
    from mcp import MCPError

    root = _root(transport, http_servers, tmp_path)
    pidfile = root / f"{tmp_path.name}-timeout.pid"  # inside the root: the sandbox lets the command write only there
    try:
        async with _client(transport, mode, http_servers, root) as client:
            await client.list_tools()  # start-up is not part of the call's timeout
            with pytest.raises(MCPError):
                await client.call_tool("run_shell_command", shell_args(pidfile), read_timeout_seconds=2.0)
            since = time.monotonic()
            pid = read_pid(pidfile)
            assert pid is not None, "the command did not start within the timeout"
            latency = await kill_latency(pid, since, f"timeout/{transport}/{mode}")
            assert latency < KILL_DEADLINE
    finally:
        cleanup(pidfile)


# -- dropped connection ----------------------------------------------------------------------------------

DROP_CLIENT = """
import sys, anyio
sys.path.insert(0, {tests!r})
from mcp import Client
from http_harness import http_client
from support import stdio_params

async def main(transport, target, mode, pidfile, token):
    args = {{"command": f"echo $$ > {{pidfile}}; exec sleep 30", "description": "drop test"}}
    if transport == "stdio":
        client = Client(stdio_params([target], "--shell-sandbox", "landlock"), mode=mode)
    else:
        client = http_client(target, mode, token=token or None)
    async with client as c:
        await c.call_tool("run_shell_command", args)

anyio.run(main, *sys.argv[1:])
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_dropped_client_kills_the_command(transport: str, mode: str, http_servers, tmp_path: Path) -> None:
    root = _root(transport, http_servers, tmp_path)
    pidfile = root / f"{tmp_path.name}-drop.pid"  # inside the root: the sandbox lets the command write only there
    target = str(root) if transport == "stdio" else http_servers[0][transport].url
    script = DROP_CLIENT.format(tests=str(REPO / "tests"))
    # Forked (`server_fork`): killing it kills the forked client with SIGKILL too, no cancel, no goodbye.
    argv = server_fork.command(["-c", script, transport, target, mode, str(pidfile), TOKEN], server_env())
    client = subprocess.Popen(argv, env=server_env(), cwd=str(REPO))
    try:
        assert wait_for(lambda: read_pid(pidfile) is not None or client.poll() is not None, START_DEADLINE)
        pid = read_pid(pidfile)
        assert pid is not None and pid_alive(pid), f"the command did not start (client exit {client.poll()})"
        since = time.monotonic()
        client.kill()
        client.wait()
        latency = await kill_latency(pid, since, f"drop/{transport}/{mode}")
        assert latency < KILL_DEADLINE
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        cleanup(pidfile)


# -- stateless: only the caller that started a call can cancel it ---------------------------------------


def _post(url: str, body: dict, token: str | None, version: str = "2025-11-25") -> httpx2.Response:
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": version}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with httpx2.Client(timeout=10, trust_env=False, verify=False) as http:  # plain HTTP: no TLS context to build
        return http.post(url, headers=headers, content=json.dumps(body))


def _cancel_body(request_id: int | str) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _call_with_id(
    url: str, request_id: int, pidfile: Path, token: str | None, version: str, done: anyio.Event
) -> None:
    """A raw `tools/call` outside a session with a chosen id, kept open until cancelled or answered."""
    params: dict = {"name": "run_shell_command", "arguments": shell_args(pidfile)}
    if version == "2026-07-28":
        params["_meta"] = MODERN_META
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": version}
    if version == "2026-07-28":
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "run_shell_command"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        async with httpx2.AsyncClient(timeout=60, trust_env=False) as http:
            async with http.stream("POST", url, headers=headers, content=json.dumps(body)) as response:
                async for _ in response.aiter_bytes():
                    pass
    finally:
        done.set()


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("auth", ["token", "no-token"])
async def test_posted_cancel_reaches_only_the_callers_call(
    request: pytest.FixtureRequest, tmp_path: Path, auth: str, version: str
) -> None:
    """A `notifications/cancelled` POSTed on its own connection stops a call running outside a session
    (stateless 2025-era, or 2026-07-28), when it comes from the caller who started the call.

    Two tokens cannot be configured at once, so with a token the other caller holds a wrong token or
    none (refused with 401, the call keeps running); without a token, any local client is the caller."""
    token = TOKEN if auth == "token" else None
    if token:
        servers, root = request.getfixturevalue("http_servers")
        server = servers["stateless"]
    else:
        server = request.getfixturevalue("open_stateless_server")
        root = server.root
    pidfile = root / f"{tmp_path.name}-owned.pid"  # inside the root: the sandbox lets the command write only there
    done = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_call_with_id, server.url, 7, pidfile, token, version, done)
            pid = await wait_pid(pidfile)
            if token is not None:
                for other in ("someone-else-" + "x" * 30, None):
                    assert _post(server.url, _cancel_body(7), other, version).status_code == 401
            assert _post(server.url, _cancel_body("7"), token, version).status_code == 202  # another id
            assert _post(server.url, _cancel_body(8), token, version).status_code == 202
            await anyio.sleep(1.0)
            assert pid_alive(pid), "a cancel naming another call stopped this one"
            since = time.monotonic()
            assert _post(server.url, _cancel_body(7), token, version).status_code == 202
            with anyio.fail_after(5):
                await done.wait()
            assert await kill_latency(pid, since, f"posted-cancel/{auth}/{version}") < KILL_DEADLINE
    finally:
        cleanup(pidfile)


# -- the table of calls running outside sessions (in process) --------------------------------------------


def _scope(token: str | None, session: str | None = None) -> dict:
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}


async def _asgi_post(app, body: dict, token: str | None, sent: list[dict]) -> None:
    payload = json.dumps(body).encode()
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await anyio.sleep_forever()

    async def send(message: dict) -> None:
        sent.append(message)

    await app(_scope(token), receive, send)


async def test_calls_are_keyed_by_caller_and_id() -> None:
    """Identity is the bearer token: a caller holding another token (were several accepted) cannot cancel
    the call; the owner can; an id two running calls share cancels neither; finished calls leave the table."""
    from coretools.server.http_cancel import CancelByCaller, RunningCalls

    running: dict[str, anyio.Event] = {}
    cancelled: list[str] = []

    async def slow_app(scope, receive, send) -> None:
        body = json.loads((await receive())["body"])
        if "id" not in body:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        name = body["params"]["name"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            running.setdefault(name, anyio.Event()).set()
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise

    calls = RunningCalls(limit=3)
    app = CancelByCaller(slow_app, "/mcp", keyed_on_token=True, calls=calls)
    outputs: dict[str, list[dict]] = {"a": [], "b": [], "c": [], "d": []}

    def call(request_id, name: str) -> dict:
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name}}

    async with anyio.create_task_group() as tg:
        tg.start_soon(_asgi_post, app, call(1, "a"), "alice", outputs["a"])
        tg.start_soon(_asgi_post, app, call(2, "b"), "alice", outputs["b"])
        tg.start_soon(_asgi_post, app, call(2, "c"), "alice", outputs["c"])
        with anyio.fail_after(5):
            for name in "abc":
                await running.setdefault(name, anyio.Event()).wait()
        assert len(calls) == 3
        tg.start_soon(_asgi_post, app, call(3, "d"), "alice", outputs["d"])  # over the limit: runs untracked
        with anyio.fail_after(5):
            await running.setdefault("d", anyio.Event()).wait()
        assert len(calls) == 3

        await _asgi_post(app, _cancel_body(1), "mallory", [])
        await _asgi_post(app, _cancel_body(2), "alice", [])  # two of alice's calls have id 2
        await anyio.sleep(0.1)
        assert cancelled == []
        await _asgi_post(app, _cancel_body(1), "alice", [])
        with anyio.fail_after(5):
            while cancelled != ["a"]:
                await anyio.sleep(0.01)
        assert outputs["a"][-1] == {"type": "http.response.body", "body": b"", "more_body": False}
        assert len(calls) == 2
        tg.cancel_scope.cancel()
    assert len(calls) == 0
