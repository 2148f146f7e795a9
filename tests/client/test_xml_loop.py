"""End to end in the xml style: a scripted model that writes its tool calls as XML in its text.

Two real stdio MCP servers side by side (the toy server as ``a`` and ``b``: every name
collides, so all are prefixed), the bridge, and a local HTTP endpoint in OpenAI's
chat-completions wire format that rejects ``tools`` (unary and SSE streaming; the replies are
cut into small chunks, so calls arrive split anywhere). The same dispatch as native calls
runs the parsed calls: concurrency, argument types, isError, unknown values, timeouts. Also:
the Gemini REST loop in the xml style, the OpenAI loop in the json style, and the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from client_support import TOY_PNG, cli_command, toy, write_config
from fake_gemini import Chunk, FakeGemini, Request
from fake_gemini import check as gemini_check
from fake_openai import ChatRequest, FakeOpenAI, check, images_of, text_of

from coretools.client import Bridge, parse_config
from coretools.client.loop import run_rest
from coretools.client.openai_loop import run_openai
from coretools.client.style import KILO_POLICY
from coretools.client.xml_format import decode_value

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

CODE = """def f(a, b):
    if a < b && b > 0:
        return "<![CDATA[x]]> & </text> ]]>"
    return a<<1
"""


def chunks(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def results_of(message: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """(name, is_error, text) of each <tool_result> block in a user message."""
    text = message["content"] if isinstance(message.get("content"), str) else message["parts"][0]["text"]
    found = []
    while "<tool_result" in text:
        head, text = text.split("<tool_result", 1)[1].split(">", 1)
        # The body is everything up to the closing tag that ends this block: CDATA first.
        if text.startswith("<![CDATA["):
            end = text.index("]]></tool_result>") + 3
        else:
            end = text.index("</tool_result>")
        body, text = text[:end], text[end + len("</tool_result>") :]
        name = head.split('name="', 1)[1].split('"', 1)[0]
        found.append((name, 'error="true"' in head, decode_value(body)))
    return found


@pytest.fixture(scope="module")
async def bridge() -> AsyncIterator[Bridge]:
    async with Bridge(parse_config({"mcpServers": {"a": toy("a"), "b": toy("b", timeout=1000)}})) as bridge:
        yield bridge


async def run(bridge: Bridge, fake: FakeOpenAI, prompt: Any, stream: bool, **options: Any):
    with anyio.fail_after(60):
        return await run_openai(
            bridge, prompt, model="local-coder", base_url=fake.base_url, api_key="sk-test", stream=stream, **options
        )


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "sse"])
async def test_parallel_calls_with_code_values(bridge: Bridge, fake_openai: FakeOpenAI, tmp_path: Path, stream: bool) -> None:
    x, y = str(tmp_path / "meet-x"), str(tmp_path / "meet-y")
    reply = (
        "I'll run four tools at once.\n"
        f"<a__echo>\n<text>\n{CODE}</text>\n</a__echo>\n"
        "<b__add>\n<a>2</a>\n<b> 40 </b>\n</b__add>\n"
        f"<a__meet><me>{x}</me><other>{y}</other><within>20</within></a__meet>"
        f"<b__meet><me>{y}</me><other>{x}</other><within>20</within></b__meet>\n"
        "Waiting for results."
    )

    def first(request: ChatRequest) -> list[str]:
        check("tools" not in request.body, "no tools in the xml style")
        check(request.stream == stream, "stream flag")
        check(request.headers.get("authorization") == "Bearer sk-test", "bearer key")
        system = request.system
        check(system.startswith("Be brief.\n\n# Tools\n"), f"the user's system prompt, then the tool section: {system[:80]!r}")
        for name in ("a__echo", "b__echo", "a__add", "b__add", "a__meet", "b__meet", "a__shape"):
            check(f"## {name}\n" in system, f"{name} is described")
        check("- a (integer, required)" in system, "parameters with types")
        check(request.messages[1:] == [{"role": "user", "content": "use four tools"}], f"{request.messages}")
        return chunks(reply)

    def second(request: ChatRequest) -> list[str]:
        check(request.messages[-2] == {"role": "assistant", "content": reply}, "the reply is kept verbatim")
        check(request.last["role"] == "user", "results come back as a user message")
        results = results_of(request.last)
        check([(n, e) for n, e, _ in results] == [("a__echo", False), ("b__add", False), ("a__meet", False), ("b__meet", False)], f"{results}")
        check(results[0][2] == "a: " + CODE.rstrip("\n"), f"code round trip: {results[0][2]!r}")
        check(json.loads(results[1][2]) == {"sum": 42}, f"'2' and ' 40 ' reach the server as integers: {results[1]}")
        check(results[2][2] == f"a met {y}" and results[3][2] == f"b met {x}", f"the calls ran concurrently: {results[2:]}")
        return ["All ", "done."]

    fake_openai.script(first, second)
    events: list[tuple[str, Any]] = []
    result = await run(bridge, fake_openai, "use four tools", stream, system_prompt="Be brief.", on_event=lambda k, p: events.append((k, p)))
    assert fake_openai.errors == [] and not fake_openai.steps
    assert result.completed and result.text == "All done." and result.turns == 2 and result.tool_style == "xml"
    shown = "".join(p for k, p in events if k == "text")
    assert shown == "I'll run four tools at once.\n\n\n\nWaiting for results.All done.", "prose only, never call markup"
    calls = [p for k, p in events if k == "tool_call"]
    assert [c["name"] for c in calls] == ["a__echo", "b__add", "a__meet", "b__meet"]
    assert calls[1]["args"] == {"a": "2", "b": "40"}
    assert [p["functionResponse"]["name"] for k, p in events if k == "tool_result"] == [c["name"] for c in calls]
    assert [m["role"] for m in result.contents] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "sse"])
async def test_errors_reach_the_model_as_results(bridge: Bridge, fake_openai: FakeOpenAI, stream: bool) -> None:
    reply = (
        "<a__fail><why>disk full</why></a__fail>\n"
        "<a__add><a>two</a><b>1</b></a__add>\n"
        "<b__slow><seconds>30</seconds></b__slow>\n"
        "<a__shape><origin>{\"x\": 1, \"y\": 2}</origin><kind>7</kind></a__shape>\n"
        "<b__echo>\n<text>never closed"
    )

    def first(request: ChatRequest) -> list[str]:
        return chunks(reply, 5)

    def second(request: ChatRequest) -> list[str]:
        results = results_of(request.last)
        check([(n, e) for n, e, _ in results] == [(n, True) for n in ("a__fail", "a__add", "b__slow", "a__shape", "b__echo")], f"{results}")
        texts = [t for _, _, t in results]
        check(texts[0] == "Error: it failed: disk full", f"isError: {texts[0]}")
        check("invalid parameters for a__add: <a> must be integer, got 'two'." in texts[1], f"coercion: {texts[1]}")
        check("Write the call like this:\n<a__add>\n<a>1</a>\n<b>1</b>\n</a__add>" in texts[1], f"with an example: {texts[1]}")
        check(texts[2] == "Error: timed out after 1 s", f"the server's timeout applies: {texts[2]}")
        check("<kind> must be one of 1, 2, 3, got '7'" in texts[3], f"enum: {texts[3]}")
        check("<text> was not closed with </text> before the reply ended" in texts[4], f"unclosed: {texts[4]}")
        return ["Those failed."]

    fake_openai.script(first, second)
    result = await run(bridge, fake_openai, "break things", stream, tool_style="xml")
    assert fake_openai.errors == [] and not fake_openai.steps
    assert result.completed and result.text == "Those failed."


async def test_sequential_steps_and_a_conversation_continued(bridge: Bridge, fake_openai: FakeOpenAI) -> None:
    def first(request: ChatRequest) -> list[str]:
        return ["<a__add><a>1</a><b>2</b></a__add>"]

    def second(request: ChatRequest) -> list[str]:
        [(name, error, text)] = results_of(request.last)
        check((name, error, json.loads(text)) == ("a__add", False, {"sum": 3}), f"{name} {text}")
        return ["The sum is 3; echoing it. ", "<b__echo><text>3</text></b__echo>"]

    def third(request: ChatRequest) -> list[str]:
        check(results_of(request.last) == [("b__echo", False, "b: 3")], f"{request.last}")
        return ["It is 3."]

    def later(request: ChatRequest) -> list[str]:
        check([m["role"] for m in request.messages] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"], "history")
        check(request.system.count("# Tools") == 1, "one system message with one tool section")
        return ["Still 3."]

    fake_openai.script(first, second, third, later)
    result = await run(bridge, fake_openai, "add then echo", True, tool_style="xml")
    assert result.text == "It is 3." and result.turns == 3
    again = await run(bridge, fake_openai, [*result.contents, {"role": "user", "content": "and now?"}], False, tool_style="xml")
    assert again.text == "Still 3." and fake_openai.errors == [] and not fake_openai.steps


async def test_turn_limit(bridge: Bridge, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*[lambda request: ["<a__pid/>"]] * 2)
    result = await run(bridge, fake_openai, "loop forever", False, tool_style="xml", max_turns=2)
    assert not result.completed and result.turns == 2 and fake_openai.errors == []


async def test_auto_picks_xml_for_an_unknown_model_and_json_when_the_policy_says_so(bridge: Bridge, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(lambda request: (check("tools" not in request.body, "auto -> xml"), ["plain"])[1])
    assert (await run(bridge, fake_openai, "hi", False)).tool_style == "xml"
    fake_openai.script(lambda request: (check("tools" in request.body, "json"), ["plain"])[1], supports_tools=True)
    policy = KILO_POLICY.with_native(models=("local-*",))
    assert (await run(bridge, fake_openai, "hi", False, style_policy=policy)).tool_style == "json"
    assert fake_openai.errors == []
    fake_openai.script(lambda request: ["never"], supports_tools=False)
    from coretools.client.loop import GeminiHTTPError

    with pytest.raises(GeminiHTTPError, match="does not support tools"):
        await run(bridge, fake_openai, "hi", False, tool_style="json")


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "sse"])
async def test_json_style_native_tool_calls(bridge: Bridge, fake_openai: FakeOpenAI, stream: bool) -> None:
    def first(request: ChatRequest) -> dict[str, Any]:
        names = [t["function"]["name"] for t in request.body["tools"]]
        check("a__echo" in names and "b__add" in names, f"{names}")
        check(request.body.get("tool_choice") == "auto", "tool_choice passed through")
        return {"content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "a__echo", "arguments": json.dumps({"text": "<&>"})}},
            {"id": "call_2", "type": "function", "function": {"name": "b__add", "arguments": "{\"a\": 1, \"b\": 2}"}},
            {"id": "call_3", "type": "function", "function": {"name": "b__add", "arguments": "{oops"}},
        ]}  # fmt: skip

    def second(request: ChatRequest) -> list[str]:
        tools = [m for m in request.messages if m["role"] == "tool"]
        check([m["tool_call_id"] for m in tools] == ["call_1", "call_2", "call_3"], f"{tools}")
        check(tools[0]["content"] == "a: <&>" and json.loads(tools[1]["content"]) == {"sum": 3}, f"{tools}")
        check(tools[2]["content"].startswith("Error: the arguments are not valid JSON"), f"{tools[2]}")
        return ["ok"]

    fake_openai.script(first, second, supports_tools=True)
    result = await run(bridge, fake_openai, "native", stream, tool_style="json", tool_choice="auto")
    assert fake_openai.errors == [] and result.text == "ok" and result.tool_style == "json"


# ------------------------------------------------------------------------------------ OpenAI, images

PNG_URL = f"data:image/png;base64,{TOY_PNG}"


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "sse"])
async def test_json_style_images_follow_the_tool_messages(bridge: Bridge, fake_openai: FakeOpenAI, stream: bool) -> None:
    def first(request: ChatRequest) -> dict[str, Any]:
        return {"content": None, "tool_calls": [
            {"id": "call_img", "type": "function", "function": {"name": "a__image", "arguments": "{}"}},
            {"id": "call_echo", "type": "function", "function": {"name": "b__echo", "arguments": json.dumps({"text": "hi"})}},
        ]}  # fmt: skip

    def second(request: ChatRequest) -> list[str]:
        image_tool, echo_tool, shown = request.messages[-3:]
        check(image_tool == {"role": "tool", "tool_call_id": "call_img", "content": "a tiny image\n[1 image(s) follow in the next user message: image/png]"}, f"{image_tool}")
        check(echo_tool == {"role": "tool", "tool_call_id": "call_echo", "content": "b: hi"}, f"{echo_tool}")
        check(shown["role"] == "user" and images_of(shown) == [PNG_URL], f"{shown}")
        check(text_of(shown["content"]) == "The image(s) returned by tool call call_img (a__image):", f"{shown}")
        return ["I see a pixel."]

    fake_openai.script(first, second, supports_tools=True)
    result = await run(bridge, fake_openai, "look", stream, tool_style="json")
    assert fake_openai.errors == [] and result.text == "I see a pixel."
    assert [m["role"] for m in result.contents] == ["user", "assistant", "tool", "tool", "user", "assistant"]


async def test_xml_style_images_go_with_the_results(bridge: Bridge, fake_openai: FakeOpenAI) -> None:
    def second(request: ChatRequest) -> list[str]:
        check(images_of(request.last) == [PNG_URL], f"{request.last}")
        [(name, is_error, text)] = results_of({"content": text_of(request.last["content"])})
        check((name, is_error) == ("a__image", False) and text == "a tiny image\n[1 attachment(s) follow this message: image/png]", text)
        return ["A pixel."]

    fake_openai.script(lambda request: ["<a__image/>"], second)
    result = await run(bridge, fake_openai, "look", False, tool_style="xml")
    assert fake_openai.errors == [] and result.text == "A pixel."


@pytest.mark.parametrize("tool_style", ["json", "xml"])
async def test_images_can_be_kept_out_for_a_model_without_vision(bridge: Bridge, fake_openai: FakeOpenAI, tool_style: str) -> None:
    def first(request: ChatRequest) -> Any:
        if tool_style == "xml":
            return ["<a__image/>"]
        return {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a__image", "arguments": "{}"}}]}

    def second(request: ChatRequest) -> list[str]:
        check(not any(images_of(m) for m in request.messages), "no images")
        check("[1 attachment(s) not shown: image/png]" in text_of(request.last["content"]), f"{request.last}")
        return ["Text only."]

    fake_openai.script(first, second, supports_tools=True, supports_images=False)
    result = await run(bridge, fake_openai, "look", False, tool_style=tool_style, images=False)
    assert fake_openai.errors == [] and result.text == "Text only."


async def test_the_fake_endpoint_rejects_what_chat_completions_rejects(fake_openai: FakeOpenAI) -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    image = {"type": "image_url", "image_url": {"url": PNG_URL}}
    cases = {
        "only allowed for messages with role 'user'": [{"role": "user", "content": "x"}, call, {"role": "tool", "tool_call_id": "c1", "content": [image]}],
        "base64 data URL": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AAAA"}}]}],
        "base64 data is invalid": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,A"}}]}],
    }
    async with httpx2.AsyncClient() as client:
        for needle, messages in cases.items():
            fake_openai.script(lambda request: ["unreachable"], supports_tools=True)
            fake_openai.issued = [call] if any(m is call for m in messages) else []
            response = await client.post(f"{fake_openai.base_url}/chat/completions", json={"model": "m", "messages": messages})
            assert response.status_code == 400 and needle in response.text, (needle, response.text)


# ------------------------------------------------------------------------------------ Gemini, xml


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "sse"])
async def test_gemini_rest_loop_in_the_xml_style(bridge: Bridge, fake_gemini: FakeGemini, stream: bool) -> None:
    reply = "Looking.\n<a__image/>\n<b__echo><text>\n  x < y & z\n</text></b__echo>"

    def first(request: Request) -> list[Chunk]:
        gemini_check("tools" not in request.body and "toolConfig" not in request.body, "no declarations in the xml style")
        system = request.body["systemInstruction"]["parts"]
        gemini_check(system[0] == {"text": "be brief"} and system[1]["text"].startswith("# Tools"), f"{system}")
        parts = [{"text": piece} for piece in chunks(reply, 4)] + [{"text": "", "thoughtSignature": fake_gemini.new_signature()}]
        return [[p] for p in parts] if request.stream else [parts]

    def second(request: Request) -> list[Chunk]:
        parts = request.last_parts()
        gemini_check(request.contents[-1]["role"] == "user" and "functionResponse" not in parts[0], "a text turn")
        results = results_of(request.contents[-1])
        gemini_check(results[0][:2] == ("a__image", False) and "1 attachment(s) follow this message: image/png" in results[0][2], f"{results}")
        gemini_check(results[1] == ("b__echo", False, "b:   x < y & z"), f"{results}")
        gemini_check(parts[1:] == [{"inlineData": {"mimeType": "image/png", "data": TOY_PNG}}], f"the image follows: {parts[1:]}")
        return [[{"text": "Seen."}]]

    fake_gemini.script(first, second)
    system = {"parts": [{"text": "be brief"}]}
    with anyio.fail_after(60):
        result = await run_rest(
            bridge, "look", model="gemini-2.5-flash", api_key="k", base_url=fake_gemini.base_url, stream=stream,
            tool_style="xml", system_instruction=system,
        )  # fmt: skip
    assert fake_gemini.errors == [] and not fake_gemini.steps
    assert result.text == "Seen." and result.tool_style == "xml"


async def test_gemini_auto_stays_native_and_the_bridge_choice_applies(fake_gemini: FakeGemini) -> None:
    servers = {"a": toy("a", includeTools=["echo"])}
    async with Bridge(parse_config({"mcpServers": servers}), tool_style="xml") as bridge:
        fake_gemini.script(lambda request: (gemini_check("tools" not in request.body, "bridge says xml"), [[{"text": "x"}]])[1])
        result = await run_rest(bridge, "hi", model="gemini-2.5-flash", api_key="k", base_url=fake_gemini.base_url)
        assert result.tool_style == "xml"
        fake_gemini.script(lambda request: (gemini_check(request.declared_names == ["echo"], "auto -> json"), [[{"text": "x"}]])[1])
        result = await run_rest(bridge, "hi", model="gemini-2.5-flash", api_key="k", base_url=fake_gemini.base_url, tool_style="auto")
        assert result.tool_style == "json" and fake_gemini.errors == []


# ------------------------------------------------------------------------------------ CLI

def cli(*argv: str, stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env}
    return subprocess.run(cli_command(*argv, env=env), input=stdin, capture_output=True, text=True, timeout=90, env=env)


def test_chat_over_an_openai_compatible_server_in_the_xml_style(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = write_config(tmp_path, {"a": toy("a"), "b": toy("b")})

    def ask(request: ChatRequest) -> list[str]:
        check("tools" not in request.body and request.stream, "xml over SSE")
        return chunks("Calling. <a__echo><text>hello</text></a__echo>", 3)

    def answer(request: ChatRequest) -> list[str]:
        check(results_of(request.last) == [("a__echo", False, "a: hello")], f"{request.last}")
        return ["The server ", "said hello."]

    fake_openai.script(ask, answer)
    env = {"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": ""}
    done = cli("chat", "--config", str(config), "--api", "openai", "--model", "local", "--yes", stdin="say hi\n", env=env)
    assert done.returncode == 0, done.stderr
    assert fake_openai.errors == [] and not fake_openai.steps
    assert done.stdout == "Calling. The server said hello.\n"
    assert "tool style xml" in done.stderr and '> a__echo {"text": "hello"}' in done.stderr and "< a__echo: ok" in done.stderr


def test_chat_with_gemini_in_the_xml_style(tmp_path: Path, fake_gemini: FakeGemini) -> None:
    config = write_config(tmp_path, {"a": toy("a")})

    def ask(request: Request) -> list[Chunk]:
        gemini_check("tools" not in request.body, "xml style: no declarations")
        return [[{"text": "<add><a>2</a><b>3</b></add>"}]]

    def answer(request: Request) -> list[Chunk]:
        [(name, error, text)] = results_of(request.contents[-1])
        gemini_check((name, error, json.loads(text)) == ("add", False, {"sum": 5}), f"{text}")
        return [[{"text": "Five."}]]

    fake_gemini.script(ask, answer)
    env = {"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": fake_gemini.base_url}
    done = cli("chat", "--config", str(config), "--model", "gemini-2.5-flash", "--tool-style", "xml", "--yes", stdin="add\n", env=env)
    assert done.returncode == 0, done.stderr
    assert fake_gemini.errors == [] and done.stdout == "Five.\n" and "tool style xml" in done.stderr
