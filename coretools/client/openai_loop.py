"""The function-calling loop against OpenAI-compatible ``/chat/completions`` endpoints.

Many local servers (llama.cpp, Ollama, vLLM, LM Studio, ...) speak this wire format, and not all
of them accept ``tools``. :func:`run_openai` works both ways:

* ``xml``: no ``tools`` in the request; the tools are described in the system message
  (:func:`coretools.client.xml_prompt.render_tool_prompt`), calls are read from the assistant's
  text as it streams, and the results go back as a ``user`` message of ``<tool_result>``
  blocks;
* ``json``: native ``tools`` / ``tool_calls`` (streamed ``tool_calls`` deltas are joined per
  ``index``), answered with ``role: tool`` messages.

``tool_style=None`` (or ``"auto"``) is decided by :func:`coretools.client.style.resolve_tool_style`
for ``provider`` (default ``openai``) and ``model``; with the default policy most models get
``xml``, the conservative choice for an endpoint whose tool support is unknown. Both styles
dispatch through :meth:`Bridge.run_calls`, like the Gemini loops.

The history (:attr:`RunResult.contents`) is the list of chat messages without the system
message, which is rebuilt for every request (so a changed tool list shows up on the next one);
pass it back as ``prompt`` to continue a conversation.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2

from .bridge import Bridge
from .convert import (
    ToolOutcome,
    content_text,
    function_response_part,
    image_url_parts,
    new_call_id,
    openai_images,
    openai_images_message,
    openai_tool_message,
)
from .instructions import merged_text
from .loop import (
    DEFAULT_MAX_TURNS, EventHandler, RunResult, choose_tool_style, emitter, open_http_client, post_json, post_sse,
)  # fmt: skip
from .style import StylePolicy
from .xml_dispatch import TextCalls, answer_text_calls
from .xml_format import render_results
from .xml_prompt import render_tool_prompt

OPENAI_BASE_URL = "https://api.openai.com/v1"

TextHandler = Callable[[str, str], Awaitable[None]]
"""``on_text(kind, text)`` with kind ``"text"`` or ``"thought"`` (``reasoning_content``)."""


@dataclass
class ChatTurn:
    """One assistant reply: the message as it goes into the history, and its metadata."""

    message: dict[str, Any]
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        return content_text(self.message.get("content"))

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or ())


@dataclass
class ChatStreamAccumulator:
    """Builds one assistant message from streamed ``chat.completion.chunk`` events."""

    text: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    _slots: dict[int, int] = field(default_factory=dict)

    def add(self, chunk: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Take one chunk; return the ``(kind, text)`` pieces it added."""
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = dict(chunk["usage"])
        pieces: list[tuple[str, str]] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or choice.get("message") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                pieces.append(("thought", reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                pieces.append(("text", content))
            for fragment in delta.get("tool_calls") or ():
                self._add_call(fragment)
        return pieces

    def _add_call(self, fragment: Mapping[str, Any]) -> None:
        index = fragment.get("index", len(self.calls))
        function = fragment.get("function") or {}
        slot = self._slots.get(index)
        # A new id at a known index is a new call (some servers reuse index 0 for parallel calls).
        if slot is None or (fragment.get("id") and self.calls[slot]["id"] and fragment["id"] != self.calls[slot]["id"]):
            self.calls.append({"id": fragment.get("id") or "", "type": "function", "function": {"name": "", "arguments": ""}})
            slot = self._slots[index] = len(self.calls) - 1
        call = self.calls[slot]
        call["id"] = call["id"] or fragment.get("id") or ""
        call["function"]["name"] += function.get("name") or ""
        arguments = function.get("arguments")
        call["function"]["arguments"] += arguments if isinstance(arguments, str) else json.dumps(arguments or {})

    def turn(self) -> ChatTurn:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [{**c, "id": c["id"] or new_call_id()} for c in self.calls]
        return ChatTurn(message, self.finish_reason, self.usage)


class OpenAIChatBackend:
    """``POST {base_url}/chat/completions``, unary or SSE (``stream: true``)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        provider: str = "openai",
        stream: bool = False,
        http_client: httpx2.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.provider = provider
        self.stream = stream
        self.http_client = http_client
        self.headers = dict(headers or {})

    def _headers(self) -> dict[str, str]:
        return {**self.headers, **({"authorization": f"Bearer {self.api_key}"} if self.api_key else {})}

    async def complete(self, body: dict[str, Any], on_text: TextHandler | None = None) -> ChatTurn:
        body = {"model": self.model, **body, **({"stream": True} if self.stream else {})}
        url = f"{self.base_url}/chat/completions"
        accumulator = ChatStreamAccumulator()
        async with open_http_client(self.http_client) as client:
            if self.stream:
                events = post_sse(client, url, body, self._headers())
            else:
                events = _single(await post_json(client, url, body, self._headers()))
            async for event in events:
                for kind, text in accumulator.add(event):
                    if on_text is not None:
                        await on_text(kind, text)
        return accumulator.turn()


async def _single(value: dict[str, Any]) -> Any:
    yield value


def initial_messages(prompt: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]


def request_messages(messages: list[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
    """The messages to send: one system message first (a given one and ``system`` merged)."""
    if messages and messages[0].get("role") in ("system", "developer"):
        given = content_text(messages[0].get("content"))
        merged = "\n\n".join(t for t in (given, system) if t)
        return [{**messages[0], "content": merged}, *messages[1:]]
    return ([{"role": "system", "content": system}] if system else []) + messages


async def run_openai(
    bridge: Bridge,
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    model: str,
    base_url: str = OPENAI_BASE_URL,
    api_key: str | None = None,
    provider: str = "openai",
    stream: bool = False,
    http_client: httpx2.AsyncClient | None = None,
    headers: Mapping[str, str] | None = None,
    tool_style: str | None = None,
    style_policy: StylePolicy | None = None,
    system_prompt: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    tool_choice: Any = None,
    extra_body: Mapping[str, Any] | None = None,
    images: bool = True,
    on_event: EventHandler | None = None,
) -> RunResult:
    """Drive an OpenAI-compatible model and the bridge's tools until the model answers in text.

    ``on_event`` gets the same events as the Gemini loops: ``"text"``/``"thought"`` pieces (in
    the xml style only the prose, never the call markup), ``"tool_call"`` (``{"name", "args"}``)
    and ``"tool_result"`` (a ``functionResponse`` part, for display).

    The system message is the user's (a leading system message of ``prompt``, then
    ``system_prompt``) followed by the servers' instructions (:meth:`Bridge.instruction_blocks`).
    Images in tool results reach the model as ``image_url`` parts of a user message, after the
    ``role: tool`` messages in the json style and in the results message in the xml style;
    ``images=False`` (for endpoints without vision) keeps them out, noted in the text.
    """
    messages = initial_messages(prompt)
    style = choose_tool_style(bridge, tool_style, provider=provider, model=model, policy=style_policy)
    emit = emitter(on_event)
    turn: ChatTurn | None = None
    async with open_http_client(http_client) as client:
        backend = OpenAIChatBackend(
            model=model, base_url=base_url, api_key=api_key, provider=provider, stream=stream, http_client=client, headers=headers
        )
        for number in range(1, max_turns + 1):
            body: dict[str, Any] = dict(extra_body or {})
            system = merged_text(system_prompt, bridge.instruction_blocks())
            text_calls: TextCalls | None = None
            if style == "xml":
                text_calls = TextCalls(t.name for t in bridge.tools)
                section = render_tool_prompt(bridge.tools)
                system = "\n\n".join(t for t in (system, section) if t)
            elif tools := bridge.openai_tools():
                body["tools"] = tools
                if tool_choice is not None:
                    body["tool_choice"] = tool_choice
            body["messages"] = request_messages(messages, system)

            async def on_text(kind: str, text: str, text_calls: TextCalls | None = text_calls) -> None:
                for piece in text_calls.feed(text) if text_calls and kind == "text" else [text]:
                    await emit(kind, piece)

            turn = await backend.complete(body, on_text)
            messages.append(turn.message)
            if text_calls is not None:
                for piece in text_calls.close():
                    await emit("text", piece)
                if not text_calls.calls:
                    return RunResult(turn.text, messages, number, True, turn.finish_reason, style)
                outcomes = await answer_text_calls(bridge, text_calls.calls, emit)
                messages.append(results_message(outcomes, images=images))
                continue
            if not turn.tool_calls:
                return RunResult(turn.text, messages, number, True, turn.finish_reason, style)
            for call in turn.tool_calls:
                await emit("tool_call", {"name": call["function"]["name"], "args": _arguments_for_display(call)})
            outcomes = await bridge.openai_outcomes(turn.tool_calls)
            for outcome, call in zip(outcomes, turn.tool_calls):
                await emit("tool_result", function_response_part(outcome))
                messages.append(openai_tool_message(outcome, call["id"], images_follow=images))
            if images and (shown := openai_images_message(outcomes, [c["id"] for c in turn.tool_calls])):
                messages.append(shown)
    return RunResult("", messages, max_turns, False, turn.finish_reason if turn else None, style)


def results_message(outcomes: Sequence[ToolOutcome], *, images: bool = True) -> dict[str, Any]:
    """The xml style's user message answering text calls: ``<tool_result>`` blocks, then the images."""
    if not images or not any(openai_images(o) for o in outcomes):
        return {"role": "user", "content": render_results(outcomes)}
    text = render_results([replace(o, media=openai_images(o)) for o in outcomes], media_attached=True)
    pictures = image_url_parts(m for o in outcomes for m in openai_images(o))
    return {"role": "user", "content": [{"type": "text", "text": text}, *pictures]}


def _arguments_for_display(call: Mapping[str, Any]) -> Any:
    raw = call["function"].get("arguments")
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw
