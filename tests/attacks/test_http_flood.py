"""Hostile connections against the HTTP transport: stalled connections, slow requests and junk.

The flood: a child process opens 1,100 TCP connections to a server whose descriptor limit is 1,024 (soft
and hard, so raising the soft limit cannot help) and never completes a request on any of them: half send
nothing, half send half a request line. For the first seconds, whatever the server closes is opened
again at once (up to 20,000 times); then the last stalled sockets are left to meet the read timeout.
While it runs, an authorized client (the official MCP client over streamable HTTP, with the bearer
token, in both protocol eras at once) must be answered within 5 s, the server's descriptors must stay
clear of the limit, its log must stay small, and no stalled connection may outlive the read timeout by
much.

The flood runs once (module fixture) and each property is its own test, so a failure names what broke.
Every loop here is bounded in count and time; the child stops by itself after its hold time.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import types

from http_harness import HttpServer, http_client, server_env, wait_for

pytestmark = pytest.mark.timeout(240)

TOKEN = "flood-suite-" + "f" * 40
TOKEN_ENV = {"CORETOOLS_FLOOD_TOKEN": TOKEN}
TOKEN_FLAGS = ("--auth-token-env", "CORETOOLS_FLOOD_TOKEN")
FLOOD_SOCKETS = 1100
FLOOD_HOLD_SECONDS = 16.0
FLOOD_RECONNECTS = 20000
FLOOD_RECONNECT_SECONDS = 3.0  # then the last stalled sockets stay, to meet the read timeout
SERVER_NOFILE = 1024
ANSWER_WITHIN_SECONDS = 5.0
DEFAULT_READ_TIMEOUT = 10.0
LOG_BUDGET_BYTES = 16 * 1024

FLOOD_SCRIPT = r"""
import json, resource, select, socket, sys, time

host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hold, budget, reconnect_for = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < count + 100:
    print(json.dumps({"event": "skip", "reason": f"descriptor hard limit {hard} < {count + 100}"}), flush=True)
    sys.exit(3)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else count + 1000, hard))

poller = select.poll()
sockets = {}        # fd -> (socket, time opened, index)
lifetimes = []      # seconds each socket the server closed had lived
failures = 0
reconnects = 0

def open_one(i, timeout):
    # half the sockets send nothing, the other half half a request line
    global failures
    try:
        s = socket.create_connection((host, port), timeout=timeout)
        if i % 2:
            s.sendall(b"POST /mcp HTT")
    except OSError:
        failures += 1
        return
    s.setblocking(False)
    sockets[s.fileno()] = (s, time.monotonic(), i)
    poller.register(s.fileno(), select.POLLIN)

opening_deadline = time.monotonic() + 30
for i in range(count):
    if time.monotonic() > opening_deadline:
        break
    open_one(i, 3.0)
start = time.monotonic()
print(json.dumps({"event": "ready", "open": len(sockets), "failures": failures}), flush=True)

while time.monotonic() - start < hold:
    for fd, _ in poller.poll(100):
        entry = sockets.get(fd)
        if entry is None:
            continue
        s, born, i = entry
        try:
            data = s.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if data:
            continue
        poller.unregister(fd)
        del sockets[fd]
        s.close()
        lifetimes.append(time.monotonic() - born)
        if reconnects < budget and time.monotonic() - start < reconnect_for:
            reconnects += 1
            open_one(i, 0.5)
now = time.monotonic()
still_open = [now - born for _, born, _ in sockets.values()]
print(json.dumps({
    "event": "done",
    "closed_by_server": len(lifetimes),
    "still_open": len(still_open),
    "longest_open": max(still_open + lifetimes, default=0.0),
    "reconnects": reconnects,
    "failures": failures,
}), flush=True)
for s, _, _ in sockets.values():
    s.close()
"""


def nofile_limit(soft: int, hard: int) -> Callable[[], None]:
    """A `preexec_fn` that sets the server's descriptor limits (like `prlimit --nofile=soft:hard`)."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def stderr_bytes(server: HttpServer) -> int:
    return sum(len(line.encode()) for line in list(server.stderr))


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def timed_call(url: str, mode: str, path: Path, limit: float = 25.0) -> float:
    """Seconds for a fresh authorized client to connect and read a file; `inf` if it did not manage in
    `limit` seconds."""
    start = time.monotonic()
    with anyio.move_on_after(limit):
        try:
            async with http_client(url, mode, token=TOKEN) as client:
                result = await client.call_tool("read_file", {"absolute_path": str(path)})
                assert "flood-proof" in _text(result), _text(result)
                return time.monotonic() - start
        except Exception:  # noqa: BLE001 - a transport failure under attack counts as not answered
            return float("inf")
    return float("inf")


async def _both_eras(url: str, path: Path) -> dict:
    """Both protocol eras at once, while the flood runs: seconds each took to be answered."""
    latencies: dict = {}

    async def one(mode: str) -> None:
        latencies[mode] = await timed_call(url, mode, path)

    async with anyio.create_task_group() as tg:
        for mode in ("legacy", "auto"):
            tg.start_soon(one, mode)
    return latencies


@dataclass
class FloodRun:
    ready: dict
    done: dict
    latencies: dict
    fd_max: int
    fd_samples: int
    log_bytes: int
    log_tail: str
    after: float
    alive: bool
    limits: str = ""


def _sample_fds(pid: int, stop: threading.Event, out: list[int]) -> None:
    while not stop.is_set():
        out.append(fd_count(pid))
        stop.wait(0.05)


@pytest.fixture(scope="module")
def flood(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FloodRun]:
    root = tmp_path_factory.mktemp("flood") / "root"
    root.mkdir()
    target = root / "f.txt"
    target.write_text("flood-proof\n")
    limit = nofile_limit(SERVER_NOFILE, SERVER_NOFILE)
    with HttpServer.start([root], *TOKEN_FLAGS, env=TOKEN_ENV, preexec_fn=limit) as server:
        host, port = server.url.split("//")[1].split("/")[0].split(":")
        limits = Path(f"/proc/{server.pid}/limits").read_text()
        log_before = stderr_bytes(server)
        child = subprocess.Popen(
            [sys.executable, "-c", FLOOD_SCRIPT, host, port, str(FLOOD_SOCKETS), str(FLOOD_HOLD_SECONDS), str(FLOOD_RECONNECTS), str(FLOOD_RECONNECT_SECONDS)],
            stdout=subprocess.PIPE,
            text=True,
            env=server_env(),
        )
        samples: list[int] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_fds, args=(server.pid, stop, samples), daemon=True)
        try:
            assert child.stdout is not None
            ready = json.loads(child.stdout.readline() or '{"event": "died"}')
            if ready["event"] == "skip":
                pytest.skip(ready["reason"])
            assert ready["event"] == "ready", ready
            sampler.start()
            latencies = anyio.run(_both_eras, server.url, target)
            latencies["flood still running"] = child.poll() is None
            done_line = child.stdout.readline()  # the child prints it after its hold time, then exits
            child.wait(30)
            done = json.loads(done_line or '{"event": "died"}')
            time.sleep(1.0)
            log_bytes = stderr_bytes(server) - log_before
            tail = "".join(server.stderr)[-4000:]
        finally:
            stop.set()
            if child.poll() is None:
                child.kill()
                child.wait()
        after = anyio.run(timed_call, server.url, "legacy", target)
        run = FloodRun(
            ready=ready,
            done=done,
            latencies=latencies,
            fd_max=max(samples, default=-1),
            fd_samples=len(samples),
            log_bytes=log_bytes,
            log_tail=tail,
            after=after,
            alive=server.alive(),
            limits=limits,
        )
        if os.environ.get("CORETOOLS_FLOOD_REPORT"):  # the numbers, for a report
            numbers = {k: v for k, v in vars(run).items() if k not in ("log_tail", "limits")}
            Path(os.environ["CORETOOLS_FLOOD_REPORT"]).write_text(json.dumps(numbers, indent=1))
        yield run


def test_flood_really_ran_against_the_hard_limit(flood: FloodRun) -> None:
    """The premise: the server ran with 1,024 descriptors (soft and hard) and the flood opened more
    connections than that."""
    line = next(l for l in flood.limits.splitlines() if l.startswith("Max open files"))
    assert line.split()[3:5] == [str(SERVER_NOFILE), str(SERVER_NOFILE)], line
    assert flood.ready["open"] >= SERVER_NOFILE, flood.ready


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_authorized_client_answered_during_flood(flood: FloodRun, mode: str) -> None:
    assert flood.latencies[mode] < ANSWER_WITHIN_SECONDS, (flood.latencies, flood.log_tail[-1500:])
    assert flood.latencies["flood still running"], "the flood had ended before the client was answered"


def test_descriptors_stay_clear_of_the_limit(flood: FloodRun) -> None:
    """At least a quarter of the descriptors stay free for tools (files, pipes, subprocesses) however many
    connections arrive."""
    assert flood.fd_samples > 10
    assert 0 < flood.fd_max <= SERVER_NOFILE * 3 // 4, flood.fd_max


def test_log_stays_small_during_flood(flood: FloodRun) -> None:
    assert flood.log_bytes <= LOG_BUDGET_BYTES, (flood.log_bytes, flood.log_tail[-1500:])


def test_stalled_connections_are_closed_after_the_read_timeout(flood: FloodRun) -> None:
    """No connection that never completed a request outlives the default read timeout by much."""
    assert flood.done.get("event") == "done", flood.done
    assert flood.done["still_open"] == 0, flood.done
    assert flood.done["longest_open"] <= DEFAULT_READ_TIMEOUT + 2.5, flood.done


def test_server_serves_normally_after_flood(flood: FloodRun) -> None:
    assert flood.alive
    assert flood.after < ANSWER_WITHIN_SECONDS, flood.after


# -- single mechanisms, fast -------------------------------------------------------------------------------


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `sock` (EOF or reset), None if it stayed open for `seconds`."""
    start = time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - start < seconds:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start
        if not data:
            return time.monotonic() - start
    return None


def _dripped_until_closed(sock: socket.socket, seconds: float) -> float | None:
    """Send one more header line every 0.2 s (a slowloris): seconds until the server closed, or None."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            sock.sendall(b"X-Drip: 1\r\n")
        except OSError:
            return time.monotonic() - start
        closed = _closed_within(sock, 0.2)
        if closed is not None:
            return time.monotonic() - start
    return None


def _address(server: HttpServer) -> tuple[str, int]:
    host, port = server.url.split("//")[1].split("/")[0].split(":")
    return host, int(port)


@pytest.fixture(scope="module")
def short_read_timeout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A server with `--read-timeout 1`; each test opens connections of its own. Forked (`server_fork`): these
    tests only speak to it."""
    with HttpServer.start([tmp_path_factory.mktemp("read-timeout")], "--read-timeout", "1", forked=True) as server:
        yield server


@pytest.mark.parametrize(
    "kind",
    ["silent", "half-request-line", "headers-dripped", "body-incomplete", "second-request-stalls"],
)
def test_read_timeout_closes_incomplete_requests(short_read_timeout: HttpServer, kind: str) -> None:
    host, port = _address(short_read_timeout)
    with socket.create_connection((host, port), timeout=5) as sock:
        hostport = f"{host}:{port}"
        if kind == "half-request-line":
            sock.sendall(b"POST /mcp HTT")
        elif kind == "headers-dripped":
            sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {hostport}\r\n".encode())
        elif kind == "body-incomplete":
            head = f"POST /mcp HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
            sock.sendall(head.encode() + b'{"jsonrpc"')
        elif kind == "second-request-stalls":
            sock.sendall(f"GET /nowhere HTTP/1.1\r\nHost: {hostport}\r\n\r\n".encode())
            sock.settimeout(5)
            assert sock.recv(65536).startswith(b"HTTP/1.1 404")
            sock.sendall(b"GET /mcp HTTP/1.1\r\nHo")
        closed = _dripped_until_closed(sock, 6.0) if kind == "headers-dripped" else _closed_within(sock, 6.0)
        assert closed is not None and closed < 4.0, closed


def test_prompt_requests_are_not_cut_by_the_read_timeout(short_read_timeout: HttpServer) -> None:
    """The control: a request sent at once is answered, and a kept-alive connection serves a second one."""
    with httpx2.Client(timeout=10, trust_env=False) as http:
        other = short_read_timeout.url.rsplit("/", 1)[0] + "/nowhere"
        assert http.get(other).status_code == 404
        time.sleep(0.5)
        assert http.get(other).status_code == 404


def test_connections_over_the_cap_do_not_lock_out_a_client(tmp_path: Path) -> None:
    """With `--max-connections 20`, 60 stalled connections leave the server at about 20 open sockets and a
    prompt client is still served: a new connection displaces the oldest one that has sent no request."""
    root = tmp_path / "root"
    root.mkdir()
    with HttpServer.start([root], "--max-connections", "20") as server:
        host, port = _address(server)
        base = fd_count(server.pid)
        stalled, shed = [], 0
        for _ in range(60):
            try:
                stalled.append(socket.create_connection((host, port), timeout=5))
            except (ConnectionResetError, ConnectionRefusedError):  # shed before it was even open: closed too
                shed += 1
        try:
            assert wait_for(lambda: fd_count(server.pid) <= base + 20 + 4, 5), fd_count(server.pid)
            time.sleep(0.5)
            assert fd_count(server.pid) <= base + 20 + 4, (base, fd_count(server.pid))
            start = time.monotonic()
            with httpx2.Client(timeout=10, trust_env=False) as http:
                assert http.get(server.url.rsplit("/", 1)[0] + "/nowhere").status_code == 404
            assert time.monotonic() - start < 2.0
            closed = shed + sum(1 for s in stalled if _closed_within(s, 0.05) is not None)
            assert closed >= 60 - 20, closed
        finally:
            for s in stalled:
                s.close()


def test_soft_descriptor_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if target <= 1024:
        pytest.skip(f"the test process's hard descriptor limit ({hard}) leaves nothing to raise")
    (tmp_path / "root").mkdir()
    with HttpServer.start([tmp_path / "root"], preexec_fn=nofile_limit(1024, target)) as server:
        line = next(l for l in Path(f"/proc/{server.pid}/limits").read_text().splitlines() if l.startswith("Max open files"))
        assert line.split()[3:5] == [str(target), str(target)], line


def test_junk_and_refused_requests_do_not_flood_the_log(tmp_path: Path) -> None:
    """Requests that are refused one by one (invalid HTTP, a foreign Origin or Host) leave a bounded log:
    a few lines and then a count, not a line each."""
    (tmp_path / "root").mkdir()
    with HttpServer.start([tmp_path / "root"], forked=True) as server:
        host, port = _address(server)
        before = stderr_bytes(server)
        deadline = time.monotonic() + 30
        for i in range(300):
            if time.monotonic() > deadline:
                break
            with socket.create_connection((host, port), timeout=5) as sock:
                sock.sendall(b"NOT HTTP AT ALL %d\r\n\r\n" % i)
                sock.settimeout(5)
                sock.recv(65536)
        with httpx2.Client(timeout=10, trust_env=False) as http:
            for i in range(300):
                if time.monotonic() > deadline:
                    break
                headers = {"Origin": f"http://evil{i}.example"} if i % 2 else {"Host": f"evil{i}.example"}
                assert http.get(server.url, headers=headers).status_code in (403, 421)
        time.sleep(0.5)
        assert stderr_bytes(server) - before <= LOG_BUDGET_BYTES, "".join(server.stderr)[-2000:]
