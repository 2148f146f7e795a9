"""End to end: two real stdio MCP servers side by side (plus one that fails to start), the
bridge, and every loop backend against the fake Gemini endpoint.

Each scenario is a scripted model conversation; every backend (REST unary and SSE, Code
Assist unary and SSE, the real google-genai client unary and streaming) runs every scenario.
The fake endpoint itself rejects any request whose model turns differ from what it sent
(signatures included) or whose function responses do not match the calls.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from client_support import TOY_PNG, broken, toy
from fake_gemini import Chunk, FakeGemini, Request, check
from google import genai
from google.genai import types as genai_types

from coretools.client import Bridge, parse_config
from coretools.client.loop import GeminiHTTPError, run_code_assist, run_genai, run_rest

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@dataclass(frozen=True)
class Backend:
    name: str
    model: str
    stream: bool

    @property
    def multimodal(self) -> bool:
        return self.model.startswith("gemini-3")


BACKENDS = [
    Backend("rest", "gemini-2.5-flash", False),
    Backend("rest", "gemini-3-flash-preview", True),
    Backend("code_assist", "gemini-2.5-pro", False),
    Backend("code_assist", "gemini-3-pro-preview", True),
    Backend("genai", "gemini-3-flash-preview", False),
    Backend("genai", "gemini-2.5-flash", True),
]


async def run(backend: Backend, bridge: Bridge, fake: FakeGemini, prompt: str):
    fake.bytes_signatures = backend.name == "genai"
    with anyio.fail_after(60):
        if backend.name == "rest":
            return await run_rest(bridge, prompt, model=backend.model, api_key="k", base_url=fake.base_url, stream=backend.stream)
        if backend.name == "code_assist":
            return await run_code_assist(
                bridge, prompt, model=backend.model, project="proj-1", access_token="tok", base_url=fake.base_url, stream=backend.stream
            )
        client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=fake.base_url))
        return await run_genai(bridge, prompt, client=client, model=backend.model, stream=backend.stream)


def stream_split(parts: list[dict[str, Any]], streaming: bool) -> list[Chunk]:
    """Streaming: one part per chunk; unary: one chunk."""
    return [[p] for p in parts] if streaming else [parts]


def text_answer(fake: FakeGemini, request: Request, words: str) -> list[Chunk]:
    """A final text answer; the signature trails on an empty-text part, as Gemini streams it."""
    parts = [{"text": w} for w in words.split("|")] + [{"text": "", "thoughtSignature": fake.new_signature()}]
    return stream_split(parts, request.stream)


def response_of(request: Request, index: int = 0) -> dict[str, Any]:
    return request.last_responses()[index]


# ------------------------------------------------------------------------------------ scenarios


def parallel(fake: FakeGemini, tmp: Path) -> tuple[str, list[Callable[[Request], list[Chunk]]], str]:
    x, y = str(tmp / "meet-x"), str(tmp / "meet-y")

    def first(request: Request) -> list[Chunk]:
        names = request.declared_names
        for name in ("a__echo", "b__echo", "a__add", "b__add", "a__meet", "b__meet"):
            check(name in names, f"{name} is not declared: {names}")
        check(not any(n.startswith("broken") for n in names), "the broken server's tools must not be declared")
        check(all(d.get("parametersJsonSchema", {}).get("type") == "object" for d in request.declarations), "object schemas")
        parts = [
            {"text": "Planning the calls.", "thought": True},
            {"functionCall": {"id": "c1", "name": "a__echo", "args": {"text": "hi"}}, "thoughtSignature": fake.new_signature()},
            {"functionCall": {"id": "c2", "name": "b__add", "args": {"a": 2.0, "b": 40}}},
            {"functionCall": {"id": "c3", "name": "a__meet", "args": {"me": x, "other": y, "within": 20}}},
            {"functionCall": {"id": "c4", "name": "b__meet", "args": {"me": y, "other": x, "within": 20}}},
        ]
        return stream_split(parts, request.stream)

    def second(request: Request) -> list[Chunk]:
        responses = request.last_responses()
        check([r.get("id") for r in responses] == ["c1", "c2", "c3", "c4"], f"ids out of order: {responses}")
        check(responses[0]["response"] == {"output": "a: hi"}, f"echo: {responses[0]}")
        check(responses[1]["response"] == {"output": {"sum": 42}}, f"add (2.0 must reach the server as 2): {responses[1]}")
        check(responses[2]["response"] == {"output": f"a met {y}"}, f"the calls did not run concurrently: {responses[2]}")
        check(responses[3]["response"] == {"output": f"b met {x}"}, f"the calls did not run concurrently: {responses[3]}")
        return text_answer(fake, request, "Both |done.")

    return "use two tools", [first, second], "Both done."


def sequential(fake: FakeGemini, tmp: Path):
    def first(request: Request) -> list[Chunk]:
        parts = [{"functionCall": {"id": "s1", "name": "a__add", "args": {"a": 1, "b": 2}}, "thoughtSignature": fake.new_signature()}]
        return [parts]

    def second(request: Request) -> list[Chunk]:
        check(response_of(request)["response"] == {"output": {"sum": 3}}, f"step 1: {request.last_responses()}")
        parts = [
            {"text": "Now echo it.", "thought": True, "thoughtSignature": fake.new_signature()},
            {"functionCall": {"name": "b__echo", "args": {"text": "3"}}, "thoughtSignature": fake.new_signature()},
            # Code Assist streams may end a turn with an empty thought part holding a signature.
            {"text": "", "thought": True, "thoughtSignature": fake.new_signature()},
        ]
        return stream_split(parts, request.stream)

    def third(request: Request) -> list[Chunk]:
        response = response_of(request)
        check("id" not in response, f"no id was sent, none may come back: {response}")
        check(response == {"name": "b__echo", "response": {"output": "b: 3"}}, f"step 2: {response}")
        signed = [p for c in request.contents if c["role"] == "model" for p in c["parts"] if "thoughtSignature" in p]
        check(len(signed) == 4, f"all four signatures must be in the history: {signed}")
        return text_answer(fake, request, "The answer is 3.")

    return "add then echo", [first, second, third], "The answer is 3."


def image(fake: FakeGemini, tmp: Path):
    def first(request: Request) -> list[Chunk]:
        return [[{"functionCall": {"id": "i1", "name": "a__image", "args": {}}, "thoughtSignature": fake.new_signature()}]]

    def second(request: Request) -> list[Chunk]:
        response = response_of(request)
        check(response["response"] == {"output": "a tiny image"}, f"image text: {response}")
        if request.model.startswith("gemini-3"):
            nested = response.get("parts") or []
            check(len(nested) == 1, f"gemini-3 gets the image nested in the response: {response}")
            blob = nested[0]["inlineData"]
            check(blob["mimeType"] == "image/png" and blob["displayName"] == "a__image_0.png", f"blob: {blob}")
            data = blob["data"]
        else:
            check("parts" not in response, "older models get the image as a sibling part")
            siblings = [p["inlineData"] for p in request.last_parts() if "inlineData" in p]
            check(len(siblings) == 1 and siblings[0]["mimeType"] == "image/png", f"sibling: {request.last_parts()}")
            data = siblings[0]["data"]
        padded = data + "=" * (-len(data) % 4)
        check(base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_")) == base64.b64decode(TOY_PNG), "the PNG bytes")
        return text_answer(fake, request, "A 1x1 image.")

    return "show me the image", [first, second], "A 1x1 image."


def erroring(fake: FakeGemini, tmp: Path):
    def first(request: Request) -> list[Chunk]:
        parts = [
            {"functionCall": {"id": "e1", "name": "a__fail", "args": {"why": "disk full"}}, "thoughtSignature": fake.new_signature()},
            {"functionCall": {"id": "e2", "name": "ghost__tool", "args": {}}},
        ]
        return stream_split(parts, request.stream)

    def second(request: Request) -> list[Chunk]:
        failed, unknown = request.last_responses()
        check(failed["response"] == {"error": "it failed: disk full"}, f"isError: {failed}")
        check(unknown["response"] == {"error": "Unknown tool: ghost__tool"}, f"unknown: {unknown}")
        return text_answer(fake, request, "That failed.")

    return "break something", [first, second], "That failed."


def timing_out(fake: FakeGemini, tmp: Path):
    def first(request: Request) -> list[Chunk]:
        return [[{"functionCall": {"id": "t1", "name": "b__slow", "args": {"seconds": 30}}, "thoughtSignature": fake.new_signature()}]]

    def second(request: Request) -> list[Chunk]:
        check(response_of(request)["response"] == {"error": "timed out after 1 s"}, f"timeout: {request.last_responses()}")
        return text_answer(fake, request, "Too slow.")

    return "be slow", [first, second], "Too slow."


SCENARIOS = {"parallel": parallel, "sequential": sequential, "image": image, "error": erroring, "timeout": timing_out}


@pytest.fixture(scope="module")
async def bridge(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bridge]:
    servers = {"a": toy("a"), "b": toy("b", timeout=1000), "broken": broken()}
    async with Bridge(parse_config({"mcpServers": servers})) as bridge:
        yield bridge


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: f"{b.name}-{'sse' if b.stream else 'unary'}-{b.model}")
async def test_scenario(backend: Backend, scenario: str, bridge: Bridge, fake_gemini: FakeGemini, tmp_path: Path) -> None:
    prompt, steps, answer = SCENARIOS[scenario](fake_gemini, tmp_path)
    fake_gemini.script(*steps)
    result = await run(backend, bridge, fake_gemini, prompt)
    assert fake_gemini.errors == []
    assert not fake_gemini.steps, "the model was not asked as often as scripted"
    assert result.completed and result.text == answer
    assert result.turns == len(steps)
    kinds = {r.kind for r in fake_gemini.requests}
    assert kinds == {"code_assist" if backend.name == "code_assist" else "rest"}
    assert all(r.stream == backend.stream for r in fake_gemini.requests)


async def test_failed_server_is_reported_and_the_others_work(bridge: Bridge) -> None:
    assert bridge.connected == ["a", "b"]
    [failure] = bridge.failures
    assert failure.alias == "broken"
    assert "exited with code 3" in failure.reason
    assert "TOY_TOKEN_THAT_IS_NEVER_SET is not set" in failure.stderr_tail
    assert "broken" in str(failure) and "stderr" in str(failure)


async def test_code_assist_envelope_carries_model_project_and_token(bridge: Bridge, fake_gemini: FakeGemini) -> None:
    fake_gemini.script(lambda request: [[{"text": "hello"}]])
    result = await run_code_assist(
        bridge, "hi", model="gemini-2.5-pro", project="proj-9", access_token="tok-9", base_url=fake_gemini.base_url, stream=False
    )
    assert result.text == "hello" and fake_gemini.errors == []
    [request] = fake_gemini.requests
    assert request.path == "/v1internal:generateContent"
    assert request.envelope["model"] == "gemini-2.5-pro" and request.envelope["project"] == "proj-9"
    assert request.headers["authorization"] == "Bearer tok-9"
    assert request.body["session_id"] and request.envelope["user_prompt_id"]


async def test_rest_request_shape(bridge: Bridge, fake_gemini: FakeGemini) -> None:
    from coretools.client import tool_config

    fake_gemini.script(lambda request: [[{"text": "ok"}]])
    await run_rest(
        bridge,
        "hi",
        model="models/gemini-2.5-flash",
        api_key="key-1",
        base_url=fake_gemini.base_url,
        tool_config=tool_config("ANY", ["a__echo"]),
        system_instruction="be brief",
        generation_config={"temperature": 0},
        profile="openapi",
    )
    [request] = fake_gemini.requests
    assert request.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert request.headers["x-goog-api-key"] == "key-1"
    assert request.body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a__echo"]}}
    assert request.body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert request.body["generationConfig"] == {"temperature": 0}
    echo = next(d for d in request.declarations if d["name"] == "a__echo")
    assert "parametersJsonSchema" not in echo
    assert echo["parameters"] == {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


async def test_turn_limit_stops_the_loop(bridge: Bridge, fake_gemini: FakeGemini) -> None:
    def call(request: Request) -> list[Chunk]:
        return [[{"functionCall": {"name": "a__echo", "args": {"text": "again"}}, "thoughtSignature": fake_gemini.new_signature()}]]

    fake_gemini.script(call, call, call)
    result = await run_rest(bridge, "loop forever", model="gemini-2.5-flash", base_url=fake_gemini.base_url, max_turns=3)
    assert not result.completed and result.turns == 3 and result.text == ""
    assert fake_gemini.errors == [] and not fake_gemini.steps
    assert len(result.contents) == 1 + 2 * 3


async def test_model_http_errors_raise_with_the_body(bridge: Bridge, fake_gemini: FakeGemini) -> None:
    fake_gemini.script()  # no steps: the fake answers 400
    with pytest.raises(GeminiHTTPError) as caught:
        await run_rest(bridge, "hi", model="gemini-2.5-flash", base_url=fake_gemini.base_url)
    assert caught.value.status == 400 and "no step left" in caught.value.body


async def test_events_are_reported(bridge: Bridge, fake_gemini: FakeGemini) -> None:
    events: list[tuple[str, Any]] = []

    def first(request: Request) -> list[Chunk]:
        return [[{"text": "thinking", "thought": True}], [{"functionCall": {"name": "a__echo", "args": {"text": "x"}}, "thoughtSignature": fake_gemini.new_signature()}]]

    fake_gemini.script(first, lambda request: [[{"text": "fin"}, {"text": "ished"}]])
    result = await run_rest(
        bridge, "go", model="gemini-2.5-flash", base_url=fake_gemini.base_url, stream=True, on_event=lambda k, p: events.append((k, p))
    )
    assert result.text == "finished"
    assert [k for k, _ in events] == ["thought", "tool_call", "tool_result", "text", "text"]
    assert events[2][1]["functionResponse"]["response"] == {"output": "a: x"}


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.stream], ids=lambda b: b.name)
async def test_conversation_continues_with_history_verbatim(backend: Backend, bridge: Bridge, fake_gemini: FakeGemini) -> None:
    """A second question in the same chat sends the first answer back, trailing signature part included."""
    fake_gemini.script(lambda request: text_answer(fake_gemini, request, "first |answer"))
    first = await run(backend, bridge, fake_gemini, "question one")
    assert first.text == "first answer"
    assert first.contents[-1]["parts"][-1]["text"] == "" and first.contents[-1]["parts"][-1]["thoughtSignature"]

    def second(request: Request) -> list[Chunk]:
        check(request.contents[-1] == {"role": "user", "parts": [{"text": "question two"}]}, f"{request.contents[-1]}")
        return text_answer(fake_gemini, request, "second answer")

    fake_gemini.steps.append(second)
    history = [*first.contents, {"role": "user", "parts": [{"text": "question two"}]}]
    with anyio.fail_after(30):
        if backend.name == "rest":
            result = await run_rest(bridge, history, model=backend.model, base_url=fake_gemini.base_url, stream=True)
        elif backend.name == "code_assist":
            result = await run_code_assist(bridge, history, model=backend.model, base_url=fake_gemini.base_url)
        else:
            client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=fake_gemini.base_url))
            result = await run_genai(bridge, history, client=client, model=backend.model, stream=True)
    assert fake_gemini.errors == []
    assert result.text == "second answer"


async def test_ids_can_be_switched_off_for_backends_that_reject_them(bridge: Bridge, fake_gemini: FakeGemini) -> None:
    def call(request: Request) -> list[Chunk]:
        return [[{"functionCall": {"id": "v1", "name": "a__echo", "args": {"text": "x"}}, "thoughtSignature": fake_gemini.new_signature()}]]

    def answer(request: Request) -> list[Chunk]:
        check(request.last_responses() == [{"name": "a__echo", "response": {"output": "a: x"}}], f"{request.last_responses()}")
        return [[{"text": "ok"}]]

    fake_gemini.script(call, answer)
    result = await run_rest(bridge, "go", model="gemini-2.5-flash", base_url=fake_gemini.base_url, include_ids=False)
    assert fake_gemini.errors == [] and result.text == "ok"
