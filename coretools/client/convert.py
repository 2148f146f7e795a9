"""Shapes in and out: MCP results, Gemini parts, OpenAI tool calls.

The central value is :class:`ToolOutcome`, what one call produced, independent of any wire
format. Native Gemini calls, OpenAI ``tool_calls`` and (later) calls parsed from model text
all end in the same ``Bridge.call`` and get a ``ToolOutcome`` back; the functions here only
render it.

MCP content converts as Gemini CLI does: text blocks are joined with newlines (structured
content stands in for them only where it is the result: see ``outcome_from_result``), images
(and image blobs of embedded resources) travel as inline data, resource links become
``Resource Link: <name> at <uri>``, audio and video are left out with a note (Gemini rejects
them in function responses).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import mcp.types as mcp_types

from .schema import Profile, sanitize_schema

TOOL_CONFIG_MODES = ("AUTO", "ANY", "NONE", "VALIDATED")


@dataclass(frozen=True)
class Media:
    """Inline binary content of a result (base64 text, as MCP and Gemini's JSON both carry it)."""

    mime_type: str
    data: str
    display_name: str


@dataclass
class ToolOutcome:
    """The result of one tool call, success or failure, before it is put on any wire."""

    name: str
    ok: bool
    output: Any = None
    error: str | None = None
    media: list[Media] = field(default_factory=list)
    call_id: str | None = None

    @property
    def response(self) -> dict[str, Any]:
        """Gemini's ``functionResponse.response``: ``{"output": ...}`` or ``{"error": ...}``."""
        return {"output": self.output} if self.ok else {"error": self.error}

    def as_text(self) -> str:
        """A plain-text rendering, for wire formats whose tool results are text only."""
        if self.ok:
            text = self.output if isinstance(self.output, str) else json.dumps(self.output, ensure_ascii=False)
        else:
            text = f"Error: {self.error}"
        if self.media:
            kinds = ", ".join(m.mime_type for m in self.media)
            text += f"\n[{len(self.media)} attachment(s) not shown: {kinds}]"
        return text


def error_outcome(name: str, message: str, *, call_id: str | None = None) -> ToolOutcome:
    return ToolOutcome(name=name, ok=False, error=message, call_id=call_id)


def outcome_from_result(
    name: str, result: mcp_types.CallToolResult, *, call_id: str | None = None, has_output_schema: bool = False
) -> ToolOutcome:
    """Convert an MCP ``CallToolResult`` as the module docstring describes.

    The model gets the text, as in Gemini CLI, and the ``structuredContent`` instead only when it is the
    result: the tool declared an ``outputSchema`` (the spec then makes the text a serialisation of it), or
    the content says nothing (no media, blank text). Without a schema, structured content may be a few
    fields beside the answer (counts, a status); preferring it would lose the answer itself."""
    texts: list[str] = []
    media: list[Media] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            texts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            media.append(_media(name, block.mime_type, block.data, len(media)))
        elif isinstance(block, mcp_types.AudioContent):
            texts.append(f"[{block.mime_type} audio omitted: not supported in function responses]")
        elif isinstance(block, mcp_types.ResourceLink):
            texts.append(f"Resource Link: {block.title or block.name} at {block.uri}")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                texts.append(resource.text)
            else:
                mime = resource.mime_type or "application/octet-stream"
                if mime.startswith(("audio/", "video/")):
                    texts.append(f"[{mime} resource {resource.uri} omitted: not supported in function responses]")
                else:
                    media.append(_media(name, mime, resource.blob, len(media)))
    text = "\n".join(texts)
    if result.is_error:
        return ToolOutcome(name=name, ok=False, error=text or "the tool reported an error", media=media, call_id=call_id)
    structured = result.structured_content
    if structured is not None and (has_output_schema or (not media and not text.strip())):
        return ToolOutcome(name=name, ok=True, output=structured, media=media, call_id=call_id)
    return ToolOutcome(name=name, ok=True, output=text, media=media, call_id=call_id)


def _media(name: str, mime: str, data: str, index: int) -> Media:
    extension = mime.split("/", 1)[-1].split("+", 1)[0].split(";", 1)[0] or "bin"
    return Media(mime_type=mime, data=data, display_name=f"{name}_{index}.{extension}")


# --------------------------------------------------------------------------------------------
# Gemini functionResponse


def function_response_part(outcome: ToolOutcome, *, include_id: bool = True, multimodal: bool = False) -> dict[str, Any]:
    """One ``functionResponse`` part; media nested in ``parts`` when ``multimodal``."""
    body: dict[str, Any] = {}
    if include_id and outcome.call_id:
        body["id"] = outcome.call_id
    body["name"] = outcome.name
    body["response"] = outcome.response
    if multimodal and outcome.media:
        body["parts"] = [
            {"inlineData": {"mimeType": m.mime_type, "data": m.data, "displayName": m.display_name}}
            for m in outcome.media
        ]
    return {"functionResponse": body}


def function_response_content(
    outcomes: Sequence[ToolOutcome], *, include_ids: bool = True, multimodal: bool = False
) -> dict[str, Any]:
    """The ``user`` turn answering a model turn: one response per call, in call order.

    Without multimodal function responses, media follow as sibling ``inlineData`` parts after
    all the ``functionResponse`` parts (so the responses stay together and in order).
    """
    parts = [function_response_part(o, include_id=include_ids, multimodal=multimodal) for o in outcomes]
    if not multimodal:
        parts += [{"inlineData": {"mimeType": m.mime_type, "data": m.data}} for o in outcomes for m in o.media]
    return {"role": "user", "parts": parts}


# --------------------------------------------------------------------------------------------
# Declarations: Gemini and OpenAI


def function_declaration(
    name: str, description: str | None, input_schema: Any, *, profile: Profile = "json"
) -> dict[str, Any]:
    """A Gemini ``FunctionDeclaration`` dict with the schema sanitised for ``profile``."""
    declaration: dict[str, Any] = {"name": name, "description": description or ""}
    schema = sanitize_schema(input_schema, profile)
    if profile == "json":
        declaration["parametersJsonSchema"] = schema
    elif schema is not None:
        declaration["parameters"] = schema
    return declaration


def gemini_tools(declarations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The request's ``tools`` field: all declarations in one ``Tool`` (what the API expects)."""
    return [{"functionDeclarations": [dict(d) for d in declarations]}] if declarations else []


def openai_tool(declaration: Mapping[str, Any]) -> dict[str, Any]:
    """A Gemini declaration as an OpenAI chat-completions tool."""
    function: dict[str, Any] = {"name": declaration["name"], "description": declaration.get("description", "")}
    schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
    if schema is not None:
        function["parameters"] = schema
    return {"type": "function", "function": function}


def declaration_from_openai(tool: Mapping[str, Any], *, profile: Profile = "json") -> dict[str, Any] | None:
    """An OpenAI tool definition as a Gemini declaration (``None`` for non-function tools)."""
    function = tool.get("function") if tool.get("type", "function") == "function" else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return None
    return function_declaration(
        function["name"], function.get("description"), function.get("parameters") or {}, profile=profile
    )


def openai_tools_to_gemini(tools: Iterable[Mapping[str, Any]], *, profile: Profile = "json") -> list[dict[str, Any]]:
    """OpenAI ``tools`` to Gemini ``tools`` (the seed's conversion, with sanitised schemas)."""
    return gemini_tools([d for d in (declaration_from_openai(t, profile=profile) for t in tools) if d is not None])


def gemini_tools_to_openai(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Gemini ``tools`` (camelCase or snake_case keys) to OpenAI ``tools``."""
    result = []
    for tool in tools:
        for declaration in tool.get("functionDeclarations", tool.get("function_declarations")) or ():
            normalised = dict(declaration)
            if "parameters_json_schema" in normalised:
                normalised["parametersJsonSchema"] = normalised.pop("parameters_json_schema")
            result.append(openai_tool(normalised))
    return result


# --------------------------------------------------------------------------------------------
# toolConfig and tool_choice


def tool_config(mode: str = "AUTO", allowed_function_names: Sequence[str] | None = None) -> dict[str, Any]:
    """``toolConfig`` for a request. ``allowedFunctionNames`` only goes with ANY or VALIDATED."""
    mode = mode.upper()
    if mode not in TOOL_CONFIG_MODES:
        raise ValueError(f"mode must be one of {', '.join(TOOL_CONFIG_MODES)}, not {mode!r}")
    config: dict[str, Any] = {"mode": mode}
    if allowed_function_names:
        if mode not in ("ANY", "VALIDATED"):
            raise ValueError(f"allowedFunctionNames needs mode ANY or VALIDATED, not {mode}")
        config["allowedFunctionNames"] = list(allowed_function_names)
    return {"functionCallingConfig": config}


def tool_choice_to_tool_config(choice: Any) -> dict[str, Any] | None:
    """OpenAI ``tool_choice`` to Gemini ``toolConfig`` (``None`` when no choice is given)."""
    if choice is None:
        return None
    if isinstance(choice, str):
        modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
        if choice not in modes:
            raise ValueError(f"unknown tool_choice {choice!r}")
        return tool_config(modes[choice])
    if isinstance(choice, Mapping):
        if choice.get("type") == "function" and isinstance(choice.get("function"), Mapping):
            return tool_config("ANY", [choice["function"]["name"]])
        if choice.get("type") == "allowed_tools" and isinstance(choice.get("allowed_tools"), Mapping):
            allowed = choice["allowed_tools"]
            names = [t["function"]["name"] for t in allowed.get("tools", ()) if isinstance(t.get("function"), Mapping)]
            return tool_config("ANY" if allowed.get("mode") == "required" else "VALIDATED", names)
    raise ValueError(f"unknown tool_choice {choice!r}")


def tool_config_to_tool_choice(config: Mapping[str, Any] | None) -> Any:
    """Gemini ``toolConfig`` back to the closest OpenAI ``tool_choice``."""
    calling = (config or {}).get("functionCallingConfig") or (config or {}).get("function_calling_config") or {}
    mode = str(calling.get("mode", "AUTO")).upper()
    names = calling.get("allowedFunctionNames") or calling.get("allowed_function_names") or []
    if mode == "NONE":
        return "none"
    if mode == "ANY" and len(names) == 1:
        return {"type": "function", "function": {"name": names[0]}}
    if names:
        tools = [{"type": "function", "function": {"name": n}} for n in names]
        return {"type": "allowed_tools", "allowed_tools": {"mode": "required" if mode == "ANY" else "auto", "tools": tools}}
    return "required" if mode == "ANY" else "auto"


# --------------------------------------------------------------------------------------------
# OpenAI-shaped calls and the seed's event form


def new_call_id() -> str:
    """A unique call id (UUID-based, safe for OpenAI and Anthropic's ``^[a-zA-Z0-9_-]+$``)."""
    return f"call_{uuid.uuid4().hex}"


class CallLedger:
    """Remembers which function a call id belonged to.

    OpenAI and Anthropic tool results carry only the id; Gemini's ``functionResponse`` needs
    the name, and the id only if the model sent one.
    """

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, bool]] = {}

    def record(self, call_id: str, name: str, *, from_model: bool) -> None:
        self._calls[call_id] = (name, from_model)

    def name_of(self, call_id: str) -> str | None:
        entry = self._calls.get(call_id)
        return entry[0] if entry else None

    def model_gave_id(self, call_id: str) -> bool:
        entry = self._calls.get(call_id)
        return bool(entry and entry[1])


def native_tool_calls_event(function_call: Mapping[str, Any], ledger: CallLedger | None = None) -> dict[str, Any]:
    """A Gemini ``functionCall`` as the seed's ``native_tool_calls`` stream chunk.

    The model's id is kept when it sent one; otherwise a fresh UUID-based id is made (unique
    even among parallel calls of one tool, which the seed's ``name + Date.now()`` is not).
    """
    given = function_call.get("id")
    call_id = given or new_call_id()
    name = function_call.get("name", "")
    if ledger is not None:
        ledger.record(call_id, name, from_model=bool(given))
    arguments = json.dumps(function_call.get("args") or {}, ensure_ascii=False)
    return {
        "type": "native_tool_calls",
        "toolCalls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def tool_result_to_function_response(
    event: Mapping[str, Any], ledger: CallLedger, *, include_id: bool = True
) -> dict[str, Any]:
    """A ``tool_result`` (Anthropic block or OpenAI ``role: tool`` message) as a functionResponse part."""
    call_id = event.get("tool_use_id") or event.get("tool_call_id") or event.get("id")
    name = ledger.name_of(call_id) if isinstance(call_id, str) else None
    if name is None:
        raise KeyError(f"no tool call with id {call_id!r} was seen")
    text = content_text(event.get("content"))
    is_error = bool(event.get("is_error"))
    outcome = ToolOutcome(
        name=name,
        ok=not is_error,
        output=None if is_error else text,
        error=text if is_error else None,
        call_id=call_id if ledger.model_gave_id(call_id) else None,
    )
    return function_response_part(outcome, include_id=include_id)


def content_text(content: Any) -> str:
    """Text of an OpenAI/Anthropic content value (a string or a list of typed blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block.get("text", "") for block in content if isinstance(block, Mapping) and block.get("type") == "text"
        )
    return str(content)


# --------------------------------------------------------------------------------------------
# OpenAI-shaped results: text in the tool message, images in a user message after it

OPENAI_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types Chat Completions accepts in ``image_url`` parts."""


def openai_images(outcome: ToolOutcome) -> list[Media]:
    return [m for m in outcome.media if m.mime_type in OPENAI_IMAGE_TYPES]


def without_images(outcome: ToolOutcome) -> ToolOutcome:
    """The outcome with the media an OpenAI user message can carry taken out."""
    return replace(outcome, media=[m for m in outcome.media if m.mime_type not in OPENAI_IMAGE_TYPES])


def image_url_parts(media: Iterable[Media]) -> list[dict[str, Any]]:
    """``image_url`` content parts holding the images as ``data:`` URLs."""
    return [{"type": "image_url", "image_url": {"url": f"data:{m.mime_type};base64,{m.data}"}} for m in media]


def openai_tool_message(outcome: ToolOutcome, tool_call_id: str, *, images_follow: bool = False) -> dict[str, Any]:
    """An OpenAI ``role: tool`` message.

    Tool messages carry text only, so with ``images_follow`` the text says that the images
    come in the next user message (:func:`openai_images_message`); without it they are noted
    as not shown."""
    images = openai_images(outcome) if images_follow else []
    if not images:
        return {"role": "tool", "tool_call_id": tool_call_id, "content": outcome.as_text()}
    kinds = ", ".join(m.mime_type for m in images)
    text = without_images(outcome).as_text() + f"\n[{len(images)} image(s) follow in the next user message: {kinds}]"
    return {"role": "tool", "tool_call_id": tool_call_id, "content": text}


def openai_images_message(outcomes: Sequence[ToolOutcome], tool_call_ids: Sequence[str]) -> dict[str, Any] | None:
    """The ``user`` message that shows the images of a reply's tool results, each group
    introduced by the call it belongs to; ``None`` when there are none."""
    parts: list[dict[str, Any]] = []
    for outcome, call_id in zip(outcomes, tool_call_ids):
        images = openai_images(outcome)
        if images:
            parts.append({"type": "text", "text": f"The image(s) returned by tool call {call_id} ({outcome.name}):"})
            parts += image_url_parts(images)
    return {"role": "user", "content": parts} if parts else None
