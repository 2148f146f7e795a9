"""Ready-made function-calling loops: model -> tools -> model until the model answers in text.

One loop (:func:`run_loop`) over interchangeable backends, each of which sends a REST-shaped
request body and returns the model's turn:

* :class:`RestBackend`: ``models/{model}:generateContent``, or ``:streamGenerateContent?alt=sse``
  with ``stream=True``, over ``httpx2`` (API key in ``x-goog-api-key``).
* :class:`CodeAssistBackend`: the envelope Gemini CLI's OAuth path speaks,
  ``{model, project, request: {...}}`` to ``v1internal:generateContent`` /
  ``:streamGenerateContent?alt=sse``, answers under ``response`` (bearer token).
* :class:`GenaiBackend`: a ``google.genai`` client (``client.aio.models``).

The history is a list of camelCase ``Content`` dicts. Model turns go in verbatim (see
:mod:`coretools.client.history`), tool answers are built by :meth:`Bridge.dispatch`. The tool
list is re-read from the bridge every turn, so a server's ``tools/list_changed`` takes effect
on the next request. The helpers :func:`run_rest`, :func:`run_code_assist` and
:func:`run_genai` build the backend and run the loop.

``tool_style`` picks how the model calls tools: ``json`` (native ``functionDeclarations``),
``xml`` (the tools are described in the system instruction and the calls are read from the
model's text by :mod:`coretools.client.xml_parser`; results go back as a text user turn, images
as inline data after it), or ``None``/``auto``: the bridge's own ``tool_style`` if set, else
:func:`coretools.client.style.resolve_tool_style` for the backend's provider (``gemini``,
``gemini-cli``) and model. Both styles end in the same :meth:`Bridge.run_calls` dispatch.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2

from .bridge import Bridge
from .convert import ToolOutcome
from .history import StreamAccumulator, function_calls, response_text
from .instructions import merged_content
from .schema import Profile
from .style import StylePolicy, ToolStyle, normalize_choice, resolve_tool_style
from .xml_dispatch import TextCalls, answer_text_calls
from .xml_format import render_results
from .xml_prompt import render_tool_prompt

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
CODE_ASSIST_BASE_URL = "https://cloudcode-pa.googleapis.com"
DEFAULT_MAX_TURNS = 20

EventHandler = Callable[[str, Any], Awaitable[None] | None]
"""``on_event(kind, payload)``: ``"text"``/``"thought"`` (a streamed text piece), ``"tool_call"``
(the ``functionCall`` dict), ``"tool_result"`` (a ``functionResponse`` part)."""


class GeminiHTTPError(RuntimeError):
    """The model endpoint answered with an HTTP error (the loop raises these; tools never do)."""

    def __init__(self, status: int, body: str, url: str) -> None:
        self.status = status
        self.body = body
        self.url = url
        super().__init__(f"HTTP {status} from {url}: {body[:2000]}")


@dataclass
class ModelTurn:
    """What one request produced: the model's content (verbatim) and its metadata."""

    content: dict[str, Any]
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


@dataclass
class RunResult:
    """The end of a loop. ``completed`` is false when the turn limit stopped it."""

    text: str
    contents: list[dict[str, Any]]
    turns: int
    completed: bool = True
    finish_reason: str | None = None
    tool_style: ToolStyle = "json"


class Backend(Protocol):
    async def generate(
        self, request: dict[str, Any], on_parts: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None
    ) -> ModelTurn: ...


# ------------------------------------------------------------------------------------- HTTP


async def post_json(client: httpx2.AsyncClient, url: str, body: Any, headers: Mapping[str, str]) -> dict[str, Any]:
    response = await client.post(url, content=json.dumps(body).encode(), headers={**headers, "content-type": "application/json"})
    if response.status_code >= 400:
        raise GeminiHTTPError(response.status_code, response.text, url)
    return response.json()


async def post_sse(
    client: httpx2.AsyncClient, url: str, body: Any, headers: Mapping[str, str]
) -> AsyncIterator[dict[str, Any]]:
    """POST and yield each ``data:`` event as JSON (events end at a blank line; no ``[DONE]``)."""
    request_headers = {**headers, "content-type": "application/json", "accept": "text/event-stream"}
    async with client.stream("POST", url, content=json.dumps(body).encode(), headers=request_headers) as response:
        if response.status_code >= 400:
            raise GeminiHTTPError(response.status_code, (await response.aread()).decode("utf-8", "replace"), url)
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                if line[5:].strip() == "[DONE]":  # OpenAI's end-of-stream marker
                    return
                data.append(line[5:].lstrip())
            elif not line.strip() and data:
                yield json.loads("\n".join(data))
                data = []
        if data:
            yield json.loads("\n".join(data))


class _HttpBackend:
    """Shared plumbing of the two HTTP backends: the client, unary vs SSE, chunk accumulation."""

    stream: bool
    timeout: float

    def __init__(self, http_client: httpx2.AsyncClient | None, timeout: float) -> None:
        self._client = http_client
        self.timeout = timeout

    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _wrap(self, request: dict[str, Any]) -> dict[str, Any]:
        return request

    def _unwrap(self, response: dict[str, Any]) -> dict[str, Any]:
        return response

    async def generate(
        self, request: dict[str, Any], on_parts: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None
    ) -> ModelTurn:
        client = self._client or httpx2.AsyncClient(timeout=httpx2.Timeout(self.timeout, connect=30.0))
        try:
            accumulator = StreamAccumulator()
            body = self._wrap(request)
            if self.stream:
                async for event in post_sse(client, self._url(), body, self._headers()):
                    new = accumulator.add(self._unwrap(event))
                    if on_parts is not None and new:
                        await on_parts(new)
            else:
                new = accumulator.add(self._unwrap(await post_json(client, self._url(), body, self._headers())))
                if on_parts is not None and new:
                    await on_parts(new)
            return ModelTurn(accumulator.content(), accumulator.finish_reason, accumulator.usage)
        finally:
            if self._client is None:
                await client.aclose()


class RestBackend(_HttpBackend):
    """The Gemini Developer API (or anything speaking its REST wire format)."""

    provider = "gemini"

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str = GEMINI_BASE_URL,
        api_version: str = "v1beta",
        stream: bool = False,
        http_client: httpx2.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(http_client, timeout)
        self.model = model.removeprefix("models/")
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self.stream = stream
        self.headers = dict(headers or {})

    def _url(self) -> str:
        method = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
        return f"{self.base_url}/{self.api_version}/models/{self.model}:{method}"

    def _headers(self) -> dict[str, str]:
        return {**self.headers, **({"x-goog-api-key": self.api_key} if self.api_key else {})}


class CodeAssistBackend(_HttpBackend):
    """Gemini CLI's OAuth path: the Code Assist ``v1internal`` envelope."""

    provider = "gemini-cli"

    def __init__(
        self,
        *,
        model: str,
        project: str | None = None,
        access_token: str | None = None,
        base_url: str = CODE_ASSIST_BASE_URL,
        api_version: str = "v1internal",
        stream: bool = True,
        http_client: httpx2.AsyncClient | None = None,
        session_id: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(http_client, timeout)
        self.model = model.removeprefix("models/")
        self.project = project
        self.access_token = access_token
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self.stream = stream
        self.session_id = session_id or uuid.uuid4().hex

    def _url(self) -> str:
        method = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
        return f"{self.base_url}/{self.api_version}:{method}"

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.access_token}"} if self.access_token else {}

    def _wrap(self, request: dict[str, Any]) -> dict[str, Any]:
        envelope: dict[str, Any] = {"model": self.model}
        if self.project:
            envelope["project"] = self.project
        envelope["user_prompt_id"] = uuid.uuid4().hex
        envelope["request"] = {**request, "session_id": self.session_id}
        return envelope

    def _unwrap(self, response: dict[str, Any]) -> dict[str, Any]:
        return response.get("response") or {}


class GenaiBackend:
    """A ``google.genai.Client`` (its async API); needs the ``genai`` extra."""

    provider = "gemini"

    def __init__(self, client: Any, *, model: str, stream: bool = False) -> None:
        self.client = client
        self.model = model
        self.stream = stream

    async def generate(
        self, request: dict[str, Any], on_parts: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None
    ) -> ModelTurn:
        from .genai_types import from_genai, to_genai_config, to_genai_contents

        contents = to_genai_contents(request["contents"])
        config = to_genai_config(request)
        accumulator = StreamAccumulator()
        if self.stream:
            stream = await self.client.aio.models.generate_content_stream(model=self.model, contents=contents, config=config)
            async for chunk in stream:
                new = accumulator.add(from_genai(chunk))
                if on_parts is not None and new:
                    await on_parts(new)
        else:
            response = await self.client.aio.models.generate_content(model=self.model, contents=contents, config=config)
            new = accumulator.add(from_genai(response))
            if on_parts is not None and new:
                await on_parts(new)
        return ModelTurn(accumulator.content(), accumulator.finish_reason, accumulator.usage)


# ------------------------------------------------------------------------------------- loop


def supports_multimodal_function_responses(model: str) -> bool:
    """Gemini 3 models take images inside ``functionResponse.parts`` (Gemini CLI's rule)."""
    return model.removeprefix("models/").startswith("gemini-3")


def initial_contents(prompt: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A prompt string as a one-turn history, or a copy of a given history."""
    if isinstance(prompt, str):
        return [{"role": "user", "parts": [{"text": prompt}]}]
    return [dict(content) for content in prompt]


def choose_tool_style(
    bridge: Bridge,
    tool_style: str | None,
    *,
    provider: str | None,
    model: str | None,
    policy: StylePolicy | None = None,
) -> ToolStyle:
    """The style for a run: an explicit ``tool_style``, else the bridge's, else the decision rule.

    ``"auto"`` asks for the decision rule even when the bridge has a choice.
    """
    choice = normalize_choice(tool_style) if tool_style is not None else bridge.tool_style
    return resolve_tool_style(choice, provider=provider, model=model, policy=policy)


def with_tool_prompt(system_instruction: str | Mapping[str, Any] | None, section: str) -> str | dict[str, Any] | None:
    """The system instruction with the xml style's tool section appended."""
    if not section:
        return system_instruction
    if system_instruction is None or isinstance(system_instruction, str):
        return f"{system_instruction}\n\n{section}" if system_instruction else section
    instruction = dict(system_instruction)
    instruction["parts"] = [*(instruction.get("parts") or ()), {"text": section}]
    return instruction


def xml_results_content(outcomes: list[ToolOutcome]) -> dict[str, Any]:
    """The user turn answering text calls: ``<tool_result>`` blocks, then any images inline."""
    parts: list[dict[str, Any]] = [{"text": render_results(outcomes, media_attached=True)}]
    parts += [{"inlineData": {"mimeType": m.mime_type, "data": m.data}} for o in outcomes for m in o.media]
    return {"role": "user", "parts": parts}


async def run_loop(
    bridge: Bridge,
    backend: Backend,
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    profile: Profile = "json",
    tool_config: Mapping[str, Any] | None = None,
    system_instruction: str | Mapping[str, Any] | None = None,
    generation_config: Mapping[str, Any] | None = None,
    include_ids: bool = True,
    multimodal: bool = False,
    tool_style: str | None = None,
    style_policy: StylePolicy | None = None,
    on_event: EventHandler | None = None,
) -> RunResult:
    """Drive model and tools until the model answers without calls, or ``max_turns`` requests.

    The ``systemInstruction`` is ``system_instruction`` (the user's, first), then one part per
    server with instructions (:meth:`Bridge.instruction_blocks`), then, in the xml style, the
    tool section."""
    contents = initial_contents(prompt)
    style = choose_tool_style(
        bridge, tool_style, provider=getattr(backend, "provider", None), model=getattr(backend, "model", None), policy=style_policy
    )
    emit = emitter(on_event)
    text_calls: TextCalls | None = None

    async def on_parts(parts: list[dict[str, Any]]) -> None:
        for part in parts:
            if isinstance(part.get("text"), str) and part["text"]:
                if part.get("thought"):
                    await emit("thought", part["text"])
                else:
                    for piece in text_calls.feed(part["text"]) if text_calls else [part["text"]]:
                        await emit("text", piece)

    turn: ModelTurn | None = None
    for number in range(1, max_turns + 1):
        request: dict[str, Any] = {"contents": contents}
        system = merged_content(system_instruction, bridge.instruction_blocks())
        if style == "xml":
            text_calls = TextCalls(t.name for t in bridge.tools)
            system = with_tool_prompt(system, render_tool_prompt(bridge.tools))
        elif tools := bridge.gemini_tools(profile):
            request["tools"] = tools
            if tool_config:
                request["toolConfig"] = dict(tool_config)
        if system:
            request["systemInstruction"] = {"parts": [{"text": system}]} if isinstance(system, str) else dict(system)
        if generation_config:
            request["generationConfig"] = dict(generation_config)
        turn = await backend.generate(request, on_parts)
        if turn.content.get("parts"):
            contents.append(turn.content)
        if text_calls is not None:
            for piece in text_calls.close():
                await emit("text", piece)
            if not text_calls.calls:
                return RunResult(response_text(turn.content), contents, number, True, turn.finish_reason, style)
            contents.append(xml_results_content(await answer_text_calls(bridge, text_calls.calls, emit)))
            continue
        calls = function_calls(turn.content)
        if not calls:
            return RunResult(response_text(turn.content), contents, number, True, turn.finish_reason, style)
        for call in calls:
            await emit("tool_call", call)
        answer = await bridge.dispatch(turn.content, include_ids=include_ids, multimodal=multimodal)
        assert answer is not None
        for part in answer["parts"]:
            if "functionResponse" in part:
                await emit("tool_result", part)
        contents.append(answer)
    return RunResult("", contents, max_turns, False, turn.finish_reason if turn else None, style)


def emitter(on_event: EventHandler | None) -> Callable[[str, Any], Awaitable[None]]:
    async def emit(kind: str, payload: Any) -> None:
        if on_event is not None:
            result = on_event(kind, payload)
            if result is not None:
                await result

    return emit


async def run_rest(
    bridge: Bridge,
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    model: str,
    api_key: str | None = None,
    base_url: str = GEMINI_BASE_URL,
    api_version: str = "v1beta",
    stream: bool = False,
    http_client: httpx2.AsyncClient | None = None,
    multimodal: bool | None = None,
    **options: Any,
) -> RunResult:
    """The loop against ``generateContent`` (or SSE streaming with ``stream=True``)."""
    async with open_http_client(http_client) as client:
        backend = RestBackend(
            model=model, api_key=api_key, base_url=base_url, api_version=api_version, stream=stream, http_client=client
        )
        return await _run_for_model(bridge, backend, prompt, model, multimodal, options)


async def run_code_assist(
    bridge: Bridge,
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    model: str,
    project: str | None = None,
    access_token: str | None = None,
    base_url: str = CODE_ASSIST_BASE_URL,
    stream: bool = True,
    http_client: httpx2.AsyncClient | None = None,
    multimodal: bool | None = None,
    **options: Any,
) -> RunResult:
    """The loop against the Code Assist envelope (Gemini CLI's OAuth path)."""
    async with open_http_client(http_client) as client:
        backend = CodeAssistBackend(
            model=model, project=project, access_token=access_token, base_url=base_url, stream=stream, http_client=client
        )
        return await _run_for_model(bridge, backend, prompt, model, multimodal, options)


async def run_genai(
    bridge: Bridge,
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    client: Any,
    model: str,
    stream: bool = False,
    multimodal: bool | None = None,
    **options: Any,
) -> RunResult:
    """The loop through a ``google.genai.Client``."""
    return await _run_for_model(bridge, GenaiBackend(client, model=model, stream=stream), prompt, model, multimodal, options)


@asynccontextmanager
async def open_http_client(given: httpx2.AsyncClient | None) -> AsyncIterator[httpx2.AsyncClient]:
    """The caller's client, or one client (one connection pool) for every turn of a run."""
    if given is not None:
        yield given
        return
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(600.0, connect=30.0)) as client:
        yield client


async def _run_for_model(
    bridge: Bridge,
    backend: Backend,
    prompt: str | Sequence[Mapping[str, Any]],
    model: str,
    multimodal: bool | None,
    options: dict[str, Any],
) -> RunResult:
    """``run_loop`` with ``multimodal`` defaulting to what the model supports."""
    if multimodal is None:
        multimodal = supports_multimodal_function_responses(model)
    return await run_loop(bridge, backend, prompt, multimodal=multimodal, **options)
