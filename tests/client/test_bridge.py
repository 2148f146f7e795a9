"""The bridge against real MCP servers: stdio subprocesses and a streamable HTTP server."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from client_support import RAW_SERVER, TOY_SERVER, alive, broken, forked_python, toy

from coretools.client import Bridge, parse_config
from coretools.client.bridge import PublishedTool
from coretools.client.names import NameCollisionError

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


def bridge_for(servers: dict[str, Any], **options: Any) -> Bridge:
    return Bridge(parse_config({"mcpServers": servers}), **options)


async def test_pagination_filters_and_plain_names_with_one_server() -> None:
    servers = {"solo": toy("solo", "--page-size", "2", excludeTools=["spawn", "grow"])}
    async with bridge_for(servers) as bridge:
        names = [t.name for t in bridge.tools]
        assert names == ["echo", "add", "image", "fail", "slow", "shape", "pid", "big", "odd_name", "meet"]
        assert bridge.lookup("odd_name").original_name == "odd.name"
        assert (await bridge.call("odd_name", {})).output == "odd"
        assert (await bridge.call("spawn", {})).error == "Unknown tool: spawn"


async def test_the_toy_server_is_forked() -> None:
    """`toy()` computes its launcher for the environment the bridge gives a server: were the fork server's key
    another, the launcher would run the interpreter instead, and every server would import the SDK again."""
    async with bridge_for({"a": toy("a", includeTools=["pid"])}) as bridge:
        assert int((await bridge.call("pid", {})).output) != bridge.server_pids["a"], "the server was not forked"


async def test_include_tools_and_prefix_always() -> None:
    async with bridge_for({"one": toy("one", includeTools=["echo", "add"])}, prefix="always") as bridge:
        assert [t.name for t in bridge.tools] == ["one__echo", "one__add"]
        outcome = await bridge.call("one__echo", {"text": "hi"})
        assert outcome.ok and outcome.output == "one: hi"


async def test_prefix_never_with_colliding_names_is_a_start_up_error() -> None:
    servers = {"a": toy("a", includeTools=["echo", "pid", "odd.name"]), "b": toy("b", includeTools=["echo"]), "c": toy("c", includeTools=["pid"])}
    bridge = bridge_for(servers, prefix="never")
    with pytest.raises(NameCollisionError) as caught:
        await bridge.start()
    assert str(caught.value) == "with prefix never, tool names collide: echo (servers a, b); pid (servers a, c)"
    assert set(caught.value.clashes) == {"echo", "pid"} and bridge.connected == [], "the servers are stopped again"
    with pytest.raises(NameCollisionError, match=r"odd_name \('odd.name' of a, and reserved by the host\)"):
        await bridge_for({"a": toy("a", includeTools=["odd.name"])}, prefix="never", reserved_names=["odd_name"]).start()


async def test_prefix_never_without_collisions_keeps_the_servers_names() -> None:
    servers = {"a": toy("a", includeTools=["echo", "odd.name"]), "b": toy("b", includeTools=["pid"])}
    async with bridge_for(servers, prefix="never") as bridge:
        assert sorted((t.name, t.alias) for t in bridge.tools) == [("echo", "a"), ("odd_name", "a"), ("pid", "b")]
        assert (await bridge.call("echo", {"text": "x"})).output == "a: x"


def warnings_from(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and text in r.getMessage()]


def notes_from(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and text in r.getMessage()]


async def test_tools_offered_by_several_servers_are_noted_once_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    """Two servers offering the same tools is the point of a configuration like mcp.json.example (two
    coretools on two roots); their prefixes keep the names apart. So: no warning on every run, one note at
    info level, and a re-listing notes only a newly shared tool."""
    caplog.set_level(logging.INFO)
    servers = {"a": toy("a", includeTools=["echo", "grow", "extra_12"]), "b": toy("b", includeTools=["echo", "grow", "extra_12"])}
    async with bridge_for(servers) as bridge:
        [report] = notes_from(caplog, "more than one server")
        assert report.endswith("under its prefix: echo (a, b); grow (a, b)")
        assert (await bridge.call("a__grow", {})).output == "extra_12"
        await wait_for_tool(bridge, "a__extra_12")
        assert len(notes_from(caplog, "more than one server")) == 1, "a re-listing repeats nothing"
        assert (await bridge.call("b__grow", {})).output == "extra_12"
        await wait_for_tool(bridge, "b__extra_12")
        assert notes_from(caplog, "more than one server")[1:] == [
            "tools offered by more than one server, published once per server under its prefix: extra_12 (a, b)"
        ], "only the newly shared tool is noted"
    assert warnings_from(caplog, "more than one server") == []


async def wait_for_tool(bridge: Bridge, name: str) -> None:
    with anyio.fail_after(30):
        while bridge.lookup(name) is None:
            await anyio.sleep(0.02)


async def test_each_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    servers = {"noisy": {"command": sys.executable, "args": [str(RAW_SERVER), "garbage"]}, "dead": broken()}
    async with bridge_for(servers) as bridge:
        assert (await bridge.call("echo", {"size": 3})).ok
        assert (await bridge.call("echo", {"size": 4})).ok, "every response is preceded by a line that is not JSON"
        assert len(warnings_from(caplog, "noisy: transport error")) == 1
        assert len(warnings_from(caplog, "dead:")) == 1
    for _ in range(2):
        logging.getLogger("coretools.client.schema").warning("the same sentence")
    assert len(warnings_from(caplog, "the same sentence")) == 1


async def test_declarations_in_every_shape() -> None:
    async with bridge_for({"a": toy("a", includeTools=["add", "image"]), "b": toy("b", includeTools=["shape"])}) as bridge:
        declarations = bridge.function_declarations()
        assert [d["name"] for d in declarations] == ["a__add", "a__image", "b__shape"]
        assert declarations[0] == {
            "name": "a__add",
            "description": "Add two integers.",
            "parametersJsonSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
        }
        strict = bridge.function_declarations("openapi")
        assert "parameters" not in strict[1], "zero-argument tool"
        assert strict[2]["parameters"]["properties"]["kind"]["enum"] == ["1", "2", "3"]
        assert bridge.gemini_tools() == [{"functionDeclarations": declarations}]
        assert [t["function"]["name"] for t in bridge.openai_tools()] == ["a__add", "a__image", "b__shape"]
        [genai_tool] = bridge.genai_tools()
        assert [f.name for f in genai_tool.function_declarations] == ["a__add", "a__image", "b__shape"]
        assert genai_tool.function_declarations[0].parameters_json_schema == declarations[0]["parametersJsonSchema"]


async def test_calls_coerce_arguments_and_never_raise() -> None:
    async with bridge_for({"a": toy("a"), "b": toy("b")}) as bridge:
        added = await bridge.call("a__add", {"a": 2.0, "b": 3.0}, call_id="k")
        assert (added.ok, added.output, added.call_id) == (True, {"sum": 5}, "k")
        shaped = await bridge.call("b__shape", {"origin": {"x": 1.0, "y": 2.0}, "kind": "3", "mode": "fast"})
        assert json.loads(shaped.output) == {"kind": 3, "mode": "fast", "origin": {"x": 1, "y": 2}}
        not_int = await bridge.call("a__add", {"a": 2.5, "b": 1})
        assert not not_int.ok and "must be integers" in not_int.error
        assert (await bridge.call("a__add", [1, 2])).error == "arguments must be a JSON object, got list"
        assert (await bridge.call("a__echo", None)).output == "a: "


async def test_openai_tool_calls_including_malformed_arguments() -> None:
    async with bridge_for({"a": toy("a")}) as bridge:
        messages = await bridge.call_openai(
            [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
                {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": '}},
                {"id": "c3", "type": "function", "function": {"name": "echo", "arguments": ""}},
                {"id": "c4", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
            ]
        )
        assert [m["tool_call_id"] for m in messages] == ["c1", "c2", "c3", "c4"]
        assert all(m["role"] == "tool" for m in messages)
        assert messages[0]["content"] == '{"sum": 3}'
        assert messages[1]["content"].startswith("Error: the arguments are not valid JSON")
        assert messages[2]["content"] == "a: "
        assert messages[3]["content"] == "Error: Unknown tool: nope"


async def test_tools_list_changed_is_followed() -> None:
    async with bridge_for({"a": toy("a"), "b": toy("b")}) as bridge:
        version = bridge.tools_version
        assert bridge.lookup("a__extra_12") is None
        assert (await bridge.call("a__grow", {})).output == "extra_12"
        with anyio.fail_after(10):
            while bridge.lookup("a__extra_12") is None:
                await anyio.sleep(0.02)
        assert bridge.tools_version > version
        assert (await bridge.call("a__extra_12", {})).output == "extra_12 ran"
        assert bridge.lookup("b__extra_12") is None


async def test_timeout_comes_from_the_server_config_and_the_session_survives() -> None:
    async with bridge_for({"a": toy("a", timeout=300)}) as bridge:
        outcome = await bridge.call("slow", {"seconds": 20})
        assert outcome.error == "timed out after 0.3 s"
        assert (await bridge.call("echo", {"text": "still here"})).output == "a: still here"


async def test_confirmation_for_untrusted_servers_only() -> None:
    asked: list[str] = []

    async def confirm(tool: PublishedTool, arguments: dict[str, Any]) -> bool:
        asked.append(tool.name)
        return arguments.get("text") == "yes"

    servers = {"safe": toy("safe", trust=True), "wild": toy("wild")}
    async with bridge_for(servers, confirm=confirm) as bridge:
        assert (await bridge.call("safe__echo", {"text": "no"})).ok
        assert (await bridge.call("wild__echo", {"text": "yes"})).ok
        declined = await bridge.call("wild__echo", {"text": "no"})
        assert declined.error == "the user declined to run this tool"
        assert asked == ["wild__echo", "wild__echo"]


async def test_failures_are_reported_and_others_still_work(tmp_path: Path) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import sys, time\nprint('waiting forever', file=sys.stderr, flush=True)\ntime.sleep(120)\n")
    servers = {
        "ok": toy("ok"),
        "missing": {"command": str(tmp_path / "no-such-binary")},
        "hangs": {"command": sys.executable, "args": [str(hang)]},
        "exits": broken("NEVER_SET_VARIABLE_X"),
    }
    # (a timeout a real server meets on a loaded machine: its start imports the SDK)
    async with bridge_for(servers, connect_timeout=10) as bridge:
        failures = {f.alias: f for f in bridge.failures}
        assert set(failures) == {"missing", "hangs", "exits"} and bridge.connected == ["ok"]
        assert failures["missing"].reason == f"command not found: {tmp_path / 'no-such-binary'}"
        assert failures["hangs"].reason == "no answer to the MCP handshake within 10 s"
        assert "waiting forever" in failures["hangs"].stderr_tail
        assert failures["exits"].reason.startswith("the server exited with code 3")
        assert "NEVER_SET_VARIABLE_X is not set" in failures["exits"].stderr_tail
        assert [t.name for t in bridge.tools][0] == "echo", "one connected server: plain names"
        assert (await bridge.call("echo", {"text": "fine"})).output == "ok: fine"
        pids = bridge.server_pids
    assert not alive(pids["hangs"]) and not alive(pids["exits"])


async def test_close_leaves_no_process_behind() -> None:
    async with bridge_for({"a": toy("a", forked=False), "b": toy("b", forked=False)}) as bridge:
        pids = dict(bridge.server_pids)
        reported = {alias: int((await bridge.call(f"{alias}__pid", {})).output) for alias in ("a", "b")}
        assert reported == pids
        grandchild = int((await bridge.call("a__spawn", {})).output)
        assert all(alive(pid) for pid in [*pids.values(), grandchild])
    assert not any(alive(pid) for pid in [*pids.values(), grandchild]), "servers and what they started must be gone"


async def test_a_server_dying_mid_session_turns_calls_into_errors() -> None:
    async with bridge_for({"a": toy("a"), "b": toy("b", forked=False)}) as bridge:
        os.kill(bridge.server_pids["b"], signal.SIGKILL)
        with anyio.fail_after(20):
            outcome = await bridge.call("b__echo", {"text": "x"})
        assert not outcome.ok and outcome.error
        assert (await bridge.call("a__echo", {"text": "x"})).output == "a: x"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(forked_python([str(TOY_SERVER), "--name", "web", "--http", str(port)]), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the HTTP toy server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_streamable_http_server_next_to_a_stdio_one(http_server: str) -> None:
    servers = {"web": {"httpUrl": http_server, "headers": {"X-Test": "1"}}, "local": toy("local")}
    async with bridge_for(servers) as bridge:
        assert bridge.failures == [] and bridge.connected == ["web", "local"]
        outcomes = await bridge.call_many([("web__echo", {"text": "1"}, None), ("local__echo", {"text": "2"}, None), ("web__image", {}, None)])
        assert [o.output for o in outcomes[:2]] == ["web: 1", "local: 2"]
        assert outcomes[2].media and outcomes[2].media[0].mime_type == "image/png"
