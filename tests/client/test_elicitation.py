"""Elicitation against a real MCP server subprocess, in both protocol eras.

``legacy`` is the 2025 ``initialize`` handshake, where the server sends ``elicitation/create``
mid-call; ``auto`` lands on 2026-07-28, where the server answers ``input_required`` and the
client retries. The server reports what it received, so every assertion is about what reached
the server.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import webbrowser
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
from client_support import HERE, RUNNER, cli_command, python_server, write_config

from coretools.client import Bridge, parse_config
from coretools.client.elicitation import accept_defaults, asking_server, decline, with_defaults
from coretools.client.terminal_prompt import TerminalElicitation

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

ELICIT_SERVER = HERE / "servers" / "elicit_server.py"
ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
DEFAULTS = {"age": 30, "colour": "green", "newsletter": False}


def servers() -> dict[str, Any]:
    """The config's servers: the elicit server, forked."""
    return {"asker": python_server([str(ELICIT_SERVER)])}


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def no_browser(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any attempt to open a URL is recorded instead of reaching a browser."""
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    return opened


def scripted(*answers: mcp_types.ElicitResult | Exception):
    """A callback that gives ``answers`` in turn and records what it was asked (and by whom)."""
    asked: list[tuple[str | None, mcp_types.ElicitRequestParams]] = []
    pending = list(answers)

    async def callback(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append((asking_server(), params))
        answer = pending.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return callback, asked


class Answering:
    """The elicitation callback of the module's bridges: each request goes to the callback the running test
    set."""

    def __init__(self) -> None:
        self.callback: Any = None

    async def __call__(self, context: Any, params: mcp_types.ElicitRequestParams) -> Any:
        return await self.callback(context, params)


@pytest.fixture(scope="module")
async def bridges(anyio_backend: str):
    """One bridge per era, each over its own elicit server (the server keeps no state between calls)."""
    answering = Answering()
    config = parse_config({"mcpServers": servers()})
    async with (
        Bridge(config, elicitation_callback=answering, mode="legacy") as legacy,
        Bridge(config, elicitation_callback=answering, mode="auto") as auto,
    ):
        yield answering, {"legacy": legacy, "auto": auto}


@pytest.fixture
def bridge_for(bridges):
    """`bridge_for(callback, mode)`: the module's bridge of that era (by default legacy, as `Bridge`'s),
    answering with `callback`."""
    answering, by_mode = bridges

    def use(callback: Any, mode: str = "legacy") -> Bridge:
        answering.callback = callback
        return by_mode[mode]

    yield use
    answering.callback = None


async def received(bridge: Bridge, tool: str) -> dict[str, Any]:
    outcome = await bridge.call(tool, {})
    assert outcome.ok, outcome.error
    return json.loads(outcome.output)


async def test_a_form_answer_gets_the_defaults_in_both_eras(bridge_for, mode: str) -> None:
    callback, asked = scripted(mcp_types.ElicitResult(action="accept", content={"name": "Ada"}))
    bridge = bridge_for(callback, mode)
    assert (await bridge.call("era", {})).output == ERAS[mode]
    got = await received(bridge, "profile")
    assert got == {"era": ERAS[mode], "action": "accept", "content": {"name": "Ada", **DEFAULTS}}
    [(alias, params)] = asked
    assert alias == "asker" and isinstance(params, mcp_types.ElicitRequestFormParams)
    assert params.message == "Who are you?" and params.requested_schema["required"] == ["name"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server_without_content(bridge_for, mode: str, action: str) -> None:
    callback, _ = scripted(mcp_types.ElicitResult(action=action, content={"name": "ignored"}))
    bridge = bridge_for(callback, mode)
    got = await received(bridge, "profile")
    assert got == {"era": ERAS[mode], "action": action, "content": None}


@pytest.mark.parametrize(
    ("content", "problem"),
    [({"age": 3}, "'name' is a required property"), ({"name": "Ada", "age": -1}, "age: -1 is less than the minimum of 0"),
     ({"name": "Ada", "colour": "mauve"}, "colour: 'mauve' is not one of")],
)  # fmt: skip
async def test_an_answer_that_breaks_the_schema_never_reaches_the_server(bridge_for, mode: str, content: dict, problem: str) -> None:
    callback, _ = scripted(mcp_types.ElicitResult(action="accept", content=content))
    bridge = bridge_for(callback, mode)
    outcome = await bridge.call("profile", {})
    assert not outcome.ok
    assert "does not match the requested form" in outcome.error and problem in outcome.error


async def test_a_callback_that_raises_fails_that_call_only(bridge_for, mode: str) -> None:
    callback, _ = scripted(RuntimeError("boom"), mcp_types.ElicitResult(action="decline"))
    bridge = bridge_for(callback, mode)
    assert not (await bridge.call("profile", {})).ok
    assert (await received(bridge, "profile"))["action"] == "decline"


async def test_url_mode_is_shown_to_the_callback_and_never_opened(bridge_for, mode: str, no_browser: list[str]) -> None:
    callback, asked = scripted(mcp_types.ElicitResult(action="accept", content={"smuggled": "x"}))
    bridge = bridge_for(callback, mode)
    got = await received(bridge, "consent")
    assert got == {"era": ERAS[mode], "action": "accept", "content": None}
    [(_, params)] = asked
    assert isinstance(params, mcp_types.ElicitRequestURLParams)
    assert params.url == "https://consent.example.invalid/approve?request=42"
    assert no_browser == []


# ------------------------------------------------------------------------------ the terminal


def lines(*answers: str):
    """A ``read_line`` that types ``answers`` and then reaches the end of input."""
    pending = list(answers)

    async def read() -> str | None:
        return pending.pop(0) + "\n" if pending else None

    return read


def terminal(*answers: str, opened: list[str] | None = None) -> tuple[TerminalElicitation, io.StringIO]:
    out = io.StringIO()
    recorder = opened if opened is not None else []
    return TerminalElicitation(lines(*answers), out=out, open_url=lambda url: recorder.append(url) or True), out


async def test_the_terminal_asks_each_field_checks_it_and_fills_defaults(bridge_for, mode: str) -> None:
    # accept; empty name (required) then a name; age below the minimum, then not a number, then
    # empty (default); colour by its number; newsletter as yes.
    prompt, out = terminal("a", "", "Ada", "-4", "old", "", "3", "yes")
    bridge = bridge_for(prompt, mode)
    got = await received(bridge, "profile")
    assert got["content"] == {"name": "Ada", "age": 30, "colour": "blue", "newsletter": True}
    shown = out.getvalue()
    assert "[asker asks] Who are you?" in shown
    assert "a value is required" in shown and "less than the minimum of 0" in shown and "a whole number" in shown
    assert "1) red, 2) green, 3) blue" in shown and "default 30" in shown


@pytest.mark.parametrize(("typed", "action"), [(["d"], "decline"), (["c"], "cancel"), ([], "cancel"), (["a", "Ada"], "cancel")])
async def test_the_terminal_declines_cancels_and_treats_end_of_input_as_cancel(bridge_for, typed: list[str], action: str) -> None:
    prompt, _ = terminal(*typed)
    bridge = bridge_for(prompt)
    got = await received(bridge, "profile")
    assert (got["action"], got["content"]) == (action, None)


@pytest.mark.parametrize(("typed", "opens"), [("o", True), ("a", False)])
async def test_the_terminal_opens_a_url_only_when_asked_to(bridge_for, mode: str, typed: str, opens: bool) -> None:
    opened: list[str] = []
    prompt, out = terminal(typed, opened=opened)
    bridge = bridge_for(prompt, mode)
    got = await received(bridge, "consent")
    assert got["action"] == "accept"
    assert "URL: https://consent.example.invalid/approve?request=42" in out.getvalue()
    assert opened == (["https://consent.example.invalid/approve?request=42"] if opens else [])


# ------------------------------------------------------------------------- unattended runs


async def test_the_ready_made_policies() -> None:
    form = mcp_types.ElicitRequestFormParams(
        message="m", requested_schema={"type": "object", "properties": {"n": {"type": "integer", "default": 2}}, "required": ["n"]}
    )
    assert (await accept_defaults(None, form)).content == {"n": 2}  # type: ignore[arg-type]
    assert (await decline(None, form)).action == "decline"  # type: ignore[arg-type]
    url = mcp_types.ElicitRequestURLParams(message="m", url="https://x.invalid/")
    assert (await accept_defaults(None, url)).action == "decline"  # type: ignore[arg-type]
    assert with_defaults({"properties": {"a": {"default": 1}, "b": {}}}, {"b": 2}) == {"a": 1, "b": 2}


def call(config: Path, tool: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command("client", "call", tool, "--config", str(config), "--format", "text", *options),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_without_a_terminal_the_cli_declines_and_says_why(tmp_path: Path, protocol: str) -> None:
    config = write_config(tmp_path, servers())
    done = call(config, "profile", "--protocol", protocol)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["action"] == "decline"
    assert "asker asked for input ('Who are you?'); declined, because nobody can answer here" in done.stderr


def test_the_cli_can_accept_defaults_and_declines_what_has_none(tmp_path: Path) -> None:
    config = write_config(tmp_path, servers())
    done = call(config, "profile", "--elicitation", "defaults")
    assert json.loads(done.stdout)["action"] == "decline"
    assert "asker asked for name, which have no defaults; declined" in done.stderr



def test_with_a_terminal_the_cli_asks_there(tmp_path: Path) -> None:
    config = write_config(tmp_path, servers())
    primary, secondary = pty.openpty()
    try:
        os.write(primary, b"a\nGrace\n41\nred\nno\n")  # typed ahead; the pty keeps it until it is read
        done = subprocess.run(
            [sys.executable, "-c", RUNNER, "client", "call", "profile", "--config", str(config), "--format", "text"],
            stdin=secondary, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"] == {"name": "Grace", "age": 41, "colour": "red", "newsletter": False}
    assert "[asker asks] Who are you?" in done.stderr
