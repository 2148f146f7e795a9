"""Calls over `--max-calls` / `--max-session-calls` wait in a bounded, fair queue instead of failing.

The limiter itself is driven directly for ordering, bounds, timeouts and leaks; the rest runs the official SDK
client against real server subprocesses (stdio in both protocol eras, stateful HTTP for fairness across
sessions), holding slots with a harmless shell `sleep`.

Over stdio a 2026-era client has no session (the SDK gives its requests no connection), so only the overall
limit applies to it; the stdio tests of that era limit `--max-calls` instead of `--max-session-calls`.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from http_harness import HttpServer, http_client
from support import stdio_params, text_of

from coretools.server.limits import CallLimiter
from coretools.tools.base import ToolResult

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


def sleep_args(seconds: float, note: str = "") -> dict:
    return {"command": f"sleep {seconds}; echo done {note}", "description": "hold a slot"}


def hold_args(gate: Path, note: str = "") -> dict:
    """A call that keeps its slot until `gate` exists."""
    return {"command": f"until [ -e {gate} ]; do sleep 0.02; done; echo done {note}", "description": "hold a slot"}


def limit_flags(mode: str, n: int) -> tuple[str, ...]:
    """Flags that let `n` calls of one client run at once in either era (see the module docstring)."""
    return ("--max-session-calls", str(n)) if mode == "legacy" else ("--max-calls", str(n))


# -- the limiter, driven directly -------------------------------------------------------------------------


class Ctx:
    def __init__(self, session: str | None, report=None, client: str | None = None) -> None:  # noqa: ANN001
        self.session_key = session
        self.report = report
        self.client = client


def guarded(limiter: CallLimiter, handler):  # noqa: ANN001, ANN201
    return limiter.guard(
        handler, key=lambda ctx: ctx.session_key, client=lambda ctx: ctx.client, progress=lambda ctx: ctx.report
    )


async def test_sessions_take_turns_and_each_session_keeps_its_order() -> None:
    limiter = CallLimiter(max_calls=1, max_session_calls=8)
    order: list[str] = []
    release = anyio.Event()

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        order.append(name)
        if name == "a0":
            await release.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, Ctx("a"), "a0")
        await anyio.sleep(0.01)
        for i in range(1, 6):
            tg.start_soon(call, Ctx("a"), f"a{i}")
            await anyio.sleep(0.001)
        for i in range(3):
            tg.start_soon(call, Ctx("b"), f"b{i}")
            await anyio.sleep(0.001)
        await anyio.sleep(0.01)
        assert limiter.queued == 8 and limiter.session_queued("a") == 5
        release.set()
    assert order == ["a0", "a1", "b0", "a2", "b1", "a3", "b2", "a4", "a5"]
    assert limiter.idle()


async def test_one_client_leaves_a_slot_free_however_many_sessions_it_opens() -> None:
    """Client A fans out over four sessions of two slots each; it runs seven calls (all of eight but an
    eighth) and queues the rest, so client B's call starts at once."""
    limiter = CallLimiter(max_calls=8, max_session_calls=2)
    hold = anyio.Event()
    started: list[str] = []

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        started.append(name)
        if not name.startswith("b"):
            await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    async with anyio.create_task_group() as tg:
        for i in range(16):
            tg.start_soon(call, Ctx(f"a-session{i % 4}", client="A"), f"a{i}")
        await anyio.sleep(0.01)
        assert limiter.client_running("A") == 7 and limiter.queued == 9 and limiter.running == 7
        assert text_of(await call(Ctx("b-session", client="B"), "b0")) == "b0"
        assert started[-1] == "b0" and limiter.client_running("B") == 0
        for i in range(3):  # C takes the slot left, and its other calls wait
            tg.start_soon(call, Ctx(f"c-session{i}", client="C"), f"c{i}")
        await anyio.sleep(0.01)
        assert limiter.running == 8 and limiter.client_running("C") == 1 and limiter.client_queued("C") == 2
        hold.set()
    assert limiter.idle()


async def test_a_freed_slot_goes_to_the_waiting_client_with_the_fewest_calls_running() -> None:
    limiter = CallLimiter(max_calls=4)
    names = ("a0", "a1", "c0", "c1", "a2", "a3", "c2", "c3", "b0", "b1")
    gates = {name: anyio.Event() for name in names}
    order: list[str] = []

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        order.append(name)
        await gates[name].wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(call, Ctx(None, client=name[0]), name)
            await anyio.sleep(0.001)
        await anyio.sleep(0.01)
        assert order == ["a0", "a1", "c0", "c1"] and limiter.queued == 6
        gates["a0"].set()  # A and C queued first, but B has nothing running
        await anyio.sleep(0.01)
        assert order[4:] == ["b0"]
        gates["c0"].set()  # A, B and C have one running each: A is first in the rotation
        await anyio.sleep(0.01)
        assert order[5:] == ["a2"]
        for gate in gates.values():
            gate.set()
    assert sorted(order) == sorted(names) and limiter.idle()


async def test_one_client_leaves_queue_places_free_and_is_told_so() -> None:
    limiter = CallLimiter(max_calls=2, max_queued_calls=4)
    hold = anyio.Event()

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    results: dict[str, ToolResult] = {}

    async def one(client: str, name: str) -> None:
        results[name] = await call(Ctx(f"{client}-{name}", client=client), name)

    async with anyio.create_task_group() as tg:
        for i in range(5):  # one runs (all of 2 but 1), three wait (all of 4 but 1), the fifth is refused
            tg.start_soon(one, "A", f"a{i}")
            await anyio.sleep(0.005)
        text = text_of(results["a4"])
        assert text.startswith("Server busy: this client already has 1 tool call running"), text
        assert "all but 1 of the server's 2 (server option --max-calls)" in text
        assert "3 more of its calls are waiting" in text and "all but 1 of the server's 4 places" in text
        for i in range(2):  # B runs one and queues one in the room A had to leave
            tg.start_soon(one, "B", f"b{i}")
            await anyio.sleep(0.005)
        assert limiter.running == 2 and limiter.queued == 4 and sorted(results) == ["a4"]
        hold.set()
    assert sorted(n for n, r in results.items() if not r.is_error) == ["a0", "a1", "a2", "a3", "b0", "b1"]
    assert limiter.idle()


async def test_queue_bounds_refuse_at_once_and_name_the_limit() -> None:
    limiter = CallLimiter(max_calls=3, max_session_calls=1, max_queued_calls=3, max_session_queued_calls=2)
    hold = anyio.Event()
    results: dict[str, ToolResult] = {}

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)

    async def one(session: str, name: str) -> None:
        results[name] = await call(Ctx(session), name)

    async with anyio.create_task_group() as tg:
        for name in ("a0", "a1", "a2", "a3"):  # one runs, two wait, the fourth finds the session queue full
            tg.start_soon(one, "a", name)
            await anyio.sleep(0.005)
        refused = results["a3"].to_mcp(structured=True)
        assert refused.is_error and refused.structured_content["error"]["kind"] == "server_busy"
        text = text_of(refused)
        assert text.startswith("Server busy: this session already has 1 tool call running")
        assert "--max-session-calls" in text and "and 2 more of its calls are waiting" in text
        assert "--max-session-queued-calls" in text and "waited 0 s" in text and "did not run" in text
        for name in ("b0", "c0", "d0", "e0"):  # b0, c0 run (3 overall), d0 waits (3 queued), e0: queue full
            tg.start_soon(one, name[0], name)
            await anyio.sleep(0.005)
        text = text_of(results["e0"])
        assert "3 tool calls are already running on this server" in text and "--max-calls" in text
        assert "3 tool calls are waiting across all clients" in text and "--max-queued-calls" in text
        hold.set()
    assert sorted(n for n, r in results.items() if not r.is_error) == ["a0", "a1", "a2", "b0", "c0", "d0"]
    assert limiter.idle()


async def test_without_a_queue_a_call_over_a_limit_is_refused_as_before() -> None:
    limiter = CallLimiter(max_calls=1, max_queued_calls=0)
    hold = anyio.Event()

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, Ctx(None), "first")
        await anyio.sleep(0.01)
        text = text_of(await call(Ctx(None), "second"))
        assert "--max-calls" in text and "does not queue" in text
        hold.set()
    assert limiter.idle()


async def test_without_limits_nothing_waits() -> None:
    limiter = CallLimiter()
    hold = anyio.Event()
    running = 0

    async def handler(ctx: Ctx, name: int) -> ToolResult:
        nonlocal running
        running += 1
        await hold.wait()
        return ToolResult.text(str(name))

    call = guarded(limiter, handler)
    async with anyio.create_task_group() as tg:
        for i in range(500):
            tg.start_soon(call, Ctx("a" if i % 2 else None), i)
        await anyio.sleep(0.05)
        assert running == 500 and limiter.queued == 0
        hold.set()
    assert limiter.idle()


async def test_a_wait_times_out_saying_how_long_and_which_limit() -> None:
    limiter = CallLimiter(max_calls=4, max_session_calls=1, wait_limit=0.3)
    hold = anyio.Event()
    ran: list[str] = []

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        ran.append(name)
        await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, Ctx("a"), "held")
        await anyio.sleep(0.01)
        started = time.monotonic()
        result = await call(Ctx("a"), "late")
        assert 0.25 < time.monotonic() - started < 2
        text = text_of(result)
        assert result.is_error and text.startswith("Server busy: this call waited 0.3 s in the queue")
        assert "--queue-timeout, 0.3 s" in text and "--max-session-calls" in text and "did not run" in text
        assert limiter.queued == 0 and limiter.running == 1
        hold.set()
    assert ran == ["held"] and limiter.idle()


def test_the_wait_never_outlasts_the_call_timeout() -> None:
    from support import make_config

    capped = CallLimiter.from_config(make_config([], "--call-timeout", "5", "--queue-timeout", "60"))
    assert capped.wait_limit == 5 and capped.call_timeout_caps_wait
    default = CallLimiter.from_config(make_config([]))
    assert default.wait_limit == 60 and not default.call_timeout_caps_wait
    assert (default.max_queued_calls, default.max_session_queued_calls) == (1024, 64)
    for flag in ("--queue-timeout", "--max-queued-calls", "--max-session-queued-calls"):
        assert CallLimiter.from_config(make_config([], flag, "0")).max_queued_calls == 0, flag
    text = CallLimiter(max_calls=1, wait_limit=5, call_timeout_caps_wait=True)._timed_out(None, 5.0)
    assert "--call-timeout, 5 s" in text


async def test_cancelled_waiters_leave_at_once_and_leak_nothing() -> None:
    limiter = CallLimiter(max_calls=2, max_session_calls=1)
    hold = anyio.Event()
    ran: list[str] = []

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        ran.append(name)
        await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)

    async def reporter(done: float, total: float | None, message: str | None) -> None:
        return None

    async with anyio.create_task_group() as outer:
        outer.start_soon(call, Ctx("a"), "a-held")
        outer.start_soon(call, Ctx("b"), "b-held")
        await anyio.sleep(0.01)
        async with anyio.create_task_group() as waiters:
            for i in range(50):
                waiters.start_soon(call, Ctx("abc"[i % 3], reporter if i % 2 else None), f"w{i}")
            await anyio.sleep(0.05)
            assert limiter.queued == 50 and limiter.running == 2
            waiters.cancel_scope.cancel()
        assert limiter.queued == 0 and limiter.running == 2 and set(limiter._per_session) == {"a", "b"}
        assert not limiter._queues and not limiter._order and not limiter._watchers
        hold.set()
    assert sorted(ran) == ["a-held", "b-held"] and limiter.idle()


async def test_a_slot_granted_to_a_call_cancelled_before_it_ran_is_handed_on() -> None:
    limiter = CallLimiter(max_calls=1)
    hold = anyio.Event()
    ran: list[str] = []

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        ran.append(name)
        if name == "first":
            await hold.wait()
        return ToolResult.text(name)

    call = guarded(limiter, handler)
    results: dict[str, ToolResult] = {}

    async def one(name: str) -> None:
        results[name] = await call(Ctx(None), name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "first")
        await anyio.sleep(0.01)
        async with anyio.create_task_group() as doomed:
            doomed.start_soon(one, "doomed")
            await anyio.sleep(0.01)
            tg.start_soon(one, "last")
            await anyio.sleep(0.01)
            release = limiter.release

            def release_then_cancel(key: object, client: object = None) -> None:
                release(key, client)  # grants "doomed" the slot; it is cancelled before it can resume
                assert limiter.running == 1 and limiter.queued == 1
                doomed.cancel_scope.cancel()
                limiter.release = release  # type: ignore[method-assign]

            limiter.release = release_then_cancel  # type: ignore[method-assign]
            hold.set()
    assert ran == ["first", "last"] and "doomed" not in results and limiter.idle()


async def test_queue_progress_only_increases_and_stays_below_the_tools_own() -> None:
    limiter = CallLimiter(max_calls=1)
    hold = anyio.Event()
    seen: dict[int, list[tuple[float, float | None, str | None]]] = {}

    async def handler(ctx: Ctx, name: str) -> ToolResult:
        if name == 0:
            await hold.wait()
        else:
            await anyio.sleep(0.05)
        return ToolResult.text(str(name))

    call = guarded(limiter, handler)

    def reporter(i: int):  # noqa: ANN202
        async def report(done: float, total: float | None, message: str | None) -> None:
            seen.setdefault(i, []).append((done, total, message))

        return report

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, Ctx(None), 0)
        await anyio.sleep(0.01)
        for i in range(1, 9):
            tg.start_soon(call, Ctx(None, reporter(i) if i % 2 == 0 else None), i)
            await anyio.sleep(0.001)
        await anyio.sleep(0.01)
        hold.set()
    assert sorted(seen) == [2, 4, 6, 8]  # only the calls that asked for progress
    last = seen[8]
    assert last[0] == (0.0, 1.0, "waiting: 7 calls ahead")
    values = [done for done, _, _ in last]
    assert values == sorted(set(values)) and all(0 <= v < 1 for v in values) and len(values) >= 2
    assert int(last[-1][2].split()[1]) <= 3, last
    assert limiter.idle()


# -- real servers ------------------------------------------------------------------------------------------


async def _fan_out(client: Client, count: int, seconds: float) -> list:
    results: list = [None] * count

    async def one(i: int) -> None:
        results[i] = await client.call_tool("run_shell_command", sleep_args(seconds, str(i)))

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return results


@pytest.mark.parametrize("count", [20, 40])
async def test_concurrent_calls_over_stdio_are_all_answered(tmp_path: Path, mode: str, count: int) -> None:
    async with Client(stdio_params([tmp_path], *limit_flags(mode, 4), forked=True), mode=mode) as client:
        started = time.monotonic()
        results = await _fan_out(client, count, 0.3)
        elapsed = time.monotonic() - started
    errors = [text_of(r) for r in results if r.is_error]
    assert not errors, errors[:3]
    assert all(f"done {i}" in text_of(r) for i, r in enumerate(results))
    waves = count / 4
    assert elapsed >= waves * 0.3 * 0.9, elapsed  # the limit held: at most 4 ran at once
    print(f"{count} concurrent calls ({mode}, 4 at once): all answered in {elapsed:.2f} s")


async def test_default_limits_answer_forty_concurrent_calls_over_stdio(tmp_path: Path, mode: str) -> None:
    async with Client(stdio_params([tmp_path], forked=True), mode=mode) as client:
        results = await _fan_out(client, 40, 0.2)
    assert not [r for r in results if r.is_error]


async def test_waiting_calls_get_their_queue_position_as_progress_over_stdio(tmp_path: Path, mode: str) -> None:
    seen: dict[int, list[tuple[float, float | None, str | None]]] = {}

    async def call(client: Client, i: int) -> None:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.setdefault(i, []).append((done, total, message))

        # The first two calls hold their slots until every call has queued, however slow the machine.
        args = hold_args(tmp_path / "go", str(i)) if i < 2 else sleep_args(0.3, str(i))
        await client.call_tool("run_shell_command", args, progress_callback=progress if i % 2 else None)

    async with Client(stdio_params([tmp_path], *limit_flags(mode, 2), forked=True), mode=mode) as client:
        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(call, client, i)
                await anyio.sleep(0.02)
            with anyio.fail_after(30):
                while 11 not in seen:
                    await anyio.sleep(0.02)
            (tmp_path / "go").touch()
        await anyio.sleep(0.2)  # notifications can trail the result
    assert seen and all(i % 2 for i in seen), sorted(seen)  # none without a progress token
    last = seen[11]
    waiting = [(done, message) for done, total, message in last if message and message.startswith("waiting:")]
    assert waiting[0] == (0.0, "waiting: 9 calls ahead"), last
    values = [done for done, _, _ in last]
    assert values == sorted(set(values)), last  # strictly increasing, the tool's own progress included
    assert len(waiting) >= 3 and all(done < 1 for done, _ in waiting)
    assert [int(m.split()[1]) for _, m in waiting] == sorted({int(m.split()[1]) for _, m in waiting}, reverse=True)


async def test_full_queue_and_timed_out_wait_over_stdio(tmp_path: Path, mode: str) -> None:
    flags = (*limit_flags(mode, 1), "--max-session-queued-calls", "2", "--max-queued-calls", "2")
    async with Client(stdio_params([tmp_path], *flags, "--queue-timeout", "0.5", forked=True), mode=mode) as client:
        results: dict[str, object] = {}

        async def one(name: str, seconds: float) -> None:
            results[name] = await client.call_tool("run_shell_command", sleep_args(seconds, name))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "held", 2)
            await anyio.sleep(0.3)
            for name in ("w1", "w2", "refused"):
                tg.start_soon(one, name, 0)
                await anyio.sleep(0.05)
    limit = "--max-session-calls" if mode == "legacy" else "--max-calls"
    queue = "--max-session-queued-calls" if mode == "legacy" else "--max-queued-calls"
    refused = text_of(results["refused"])
    assert results["refused"].is_error and refused.startswith("Server busy:")
    assert limit in refused and queue in refused and "waited 0 s" in refused, refused
    for name in ("w1", "w2"):
        text = text_of(results[name])
        assert results[name].is_error and "Server busy: this call waited 0.5 s in the queue" in text, text
        assert "--queue-timeout, 0.5 s" in text and limit in text and "did not run" in text
    assert "done held" in text_of(results["held"])


async def test_cancelled_waiters_over_stdio_never_run_and_free_their_places(tmp_path: Path, mode: str) -> None:
    flags = (*limit_flags(mode, 1), "--max-session-queued-calls", "10", "--max-queued-calls", "10")
    markers = tmp_path / "markers"
    markers.mkdir()
    async with Client(stdio_params([tmp_path], *flags, forked=True), mode=mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "run_shell_command", sleep_args(1.5, "held"))
            await anyio.sleep(0.3)
            async with anyio.create_task_group() as waiters:
                for i in range(10):
                    args = {"command": f"touch {markers}/ran{i}", "description": "must never run"}
                    waiters.start_soon(client.call_tool, "run_shell_command", args)
                await anyio.sleep(0.5)
                waiters.cancel_scope.cancel()
            # the ten places are free again at once: ten more calls queue without a "Server busy"
            again = await _fan_out_quick(client, 10)
            assert not [text_of(r) for r in again if r.is_error]
    assert list(markers.iterdir()) == []


async def _fan_out_quick(client: Client, count: int) -> list:
    results: list = []

    async def one() -> None:
        results.append(await client.call_tool("run_shell_command", sleep_args(0)))

    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)
    return results


async def test_sessions_share_the_server_fairly_over_http(tmp_path: Path) -> None:
    """Session A queues twelve calls first; session B's two calls, queued after, are not served after all
    of A's but take turns with them."""
    finished: dict[str, float] = {}
    # both sessions come from 127.0.0.1, one client: it runs 2 calls at once, all of 3 but the one kept back
    with HttpServer.start([tmp_path], "--max-calls", "3", "--max-session-calls", "16", forked=True) as server:
        async with http_client(server.url) as first, http_client(server.url) as second:
            started = time.monotonic()

            async def one(client: Client, name: str) -> None:
                result = await client.call_tool("run_shell_command", sleep_args(0.4, name))
                assert not result.is_error, text_of(result)
                finished[name] = time.monotonic() - started

            async with anyio.create_task_group() as tg:
                for i in range(12):
                    tg.start_soon(one, first, f"a{i}")
                await anyio.sleep(0.2)
                for i in range(2):
                    tg.start_soon(one, second, f"b{i}")
    a_times = sorted(t for name, t in finished.items() if name.startswith("a"))
    b_last = max(finished["b0"], finished["b1"])
    # in arrival order B would finish after all twelve of A's (about 2.8 s); taking turns, after about four
    assert b_last < a_times[7], (b_last, a_times)
    print(f"fairness: B's two calls done after {b_last:.2f} s, A's twelve after {a_times[-1]:.2f} s")
    assert len(finished) == 14

