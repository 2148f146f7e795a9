"""Conversation history in Gemini's ``Content`` form.

Model turns are stored exactly as the model sent them: every part, ``thoughtSignature``
included, parts that carry only a signature included. Gemini 3 rejects a function-calling
turn whose signatures were not returned, and there is no way to recreate one, so nothing here
merges, reorders or drops parts. In a stream a signature can arrive on a later chunk, on a part
with empty text; :class:`StreamAccumulator` therefore concatenates the parts of all chunks.

History that comes from other shapes (OpenAI chat messages, Anthropic messages as Roo Code
and Kilo Code store them) has no real signatures. Converting it puts the documented
placeholder ``skip_thought_signature_validator`` on the first ``functionCall`` of each model
turn, which is what Gemini CLI and Roo Code do, unless the turn carries a real one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .convert import CallLedger, content_text

PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"


def function_calls(content: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``functionCall`` objects of a content, in order (snake_case tolerated)."""
    calls = []
    for part in (content or {}).get("parts") or ():
        call = part.get("functionCall") or part.get("function_call")
        if isinstance(call, Mapping):
            calls.append(dict(call))
    return calls


def response_text(content: Mapping[str, Any] | None, *, include_thoughts: bool = False) -> str:
    """The visible text of a content (thought parts left out unless asked for)."""
    texts = []
    for part in (content or {}).get("parts") or ():
        if isinstance(part.get("text"), str) and (include_thoughts or not part.get("thought")):
            texts.append(part["text"])
    return "".join(texts)


class StreamAccumulator:
    """Builds one model turn out of ``streamGenerateContent`` chunks, parts kept verbatim."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.role = "model"
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.chunks = 0

    def add(self, response: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Take one chunk (a ``GenerateContentResponse`` dict); return the parts it added."""
        self.chunks += 1
        if isinstance(response.get("usageMetadata"), Mapping):
            self.usage = dict(response["usageMetadata"])
        candidates = response.get("candidates") or ()
        if not candidates:
            return []
        candidate = candidates[0]
        if candidate.get("finishReason"):
            self.finish_reason = candidate["finishReason"]
        content = candidate.get("content") or {}
        self.role = content.get("role") or self.role
        new = [dict(part) for part in content.get("parts") or ()]
        self.parts.extend(new)
        return new

    def content(self) -> dict[str, Any]:
        return {"role": self.role, "parts": list(self.parts)}


def add_placeholder_signatures(contents: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give the first ``functionCall`` of every model turn a signature if none of its calls has one."""
    result = []
    for content in contents:
        if content.get("role") == "model":
            parts = [dict(p) for p in content.get("parts") or ()]
            call_parts = [p for p in parts if "functionCall" in p]
            if call_parts and not any(p.get("thoughtSignature") for p in call_parts):
                call_parts[0]["thoughtSignature"] = PLACEHOLDER_SIGNATURE
            content = {**content, "parts": parts}
        result.append(content)
    return result


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _user_parts(content: Any) -> list[dict[str, Any]]:
    """OpenAI user content (string or parts with text / data-URL images) as Gemini parts."""
    if isinstance(content, str):
        return [{"text": content}]
    parts: list[dict[str, Any]] = []
    for block in content or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            parts.append({"text": block.get("text", "")})
        elif block.get("type") == "image_url":
            url = (block.get("image_url") or {}).get("url", "")
            if url.startswith("data:") and ";base64," in url:
                mime, data = url[5:].split(";base64,", 1)
                parts.append({"inlineData": {"mimeType": mime, "data": data}})
            else:
                parts.append({"fileData": {"fileUri": url}})
    return parts


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    """Add parts for ``role``, extending the last content when it has the same role."""
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def openai_messages_to_gemini(
    messages: Iterable[Mapping[str, Any]], *, ledger: CallLedger | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """OpenAI chat messages to ``(systemInstruction, contents)``.

    ``tool_calls`` become ``functionCall`` parts (ids dropped: they were OpenAI's, not
    Gemini's), ``role: tool`` messages become ``functionResponse`` parts named after the call
    they answer, and each model turn gets the placeholder signature.
    """
    ledger = ledger or CallLedger()
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(content_text(message.get("content")))
        elif role == "user":
            _append(contents, "user", _user_parts(message.get("content")))
        elif role == "assistant":
            parts = [{"text": t} for t in [content_text(message.get("content"))] if t]
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                ledger.record(call.get("id", ""), function.get("name", ""), from_model=False)
                parts.append({"functionCall": {"name": function.get("name", ""), "args": _parse_arguments(function.get("arguments"))}})
            _append(contents, "model", parts)
        elif role == "tool":
            call_id = message.get("tool_call_id", "")
            name = ledger.name_of(call_id) or message.get("name") or ""
            response = {"name": name, "response": {"output": content_text(message.get("content"))}}
            _append(contents, "user", [{"functionResponse": response}])
    instruction = {"parts": [{"text": "\n\n".join(system)}]} if system else None
    return instruction, add_placeholder_signatures(contents)


def anthropic_messages_to_gemini(
    messages: Iterable[Mapping[str, Any]], *, system: Any = None, ledger: CallLedger | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Anthropic messages (as Roo Code / Kilo Code store them) to ``(systemInstruction, contents)``.

    A ``{"type": "thoughtSignature", "thoughtSignature": ...}`` block (Roo Code's way of
    keeping a real Gemini signature) goes back on the turn's first call; other turns get the
    placeholder.
    """
    ledger = ledger or CallLedger()
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = "model" if message.get("role") == "assistant" else "user"
        blocks = message.get("content")
        if isinstance(blocks, str):
            _append(contents, role, [{"text": blocks}])
            continue
        parts: list[dict[str, Any]] = []
        trailing_media: list[dict[str, Any]] = []
        signature = None
        for block in blocks or ():
            kind = block.get("type")
            if kind == "text":
                parts.append({"text": block.get("text", "")})
            elif kind == "thoughtSignature":
                signature = block.get("thoughtSignature")
            elif kind == "image":
                parts.append(_anthropic_image(block))
            elif kind == "tool_use":
                ledger.record(block.get("id", ""), block.get("name", ""), from_model=False)
                parts.append({"functionCall": {"name": block.get("name", ""), "args": dict(block.get("input") or {})}})
            elif kind == "tool_result":
                name = ledger.name_of(block.get("tool_use_id", "")) or ""
                inner = block.get("content")
                text = content_text(inner)
                key = "error" if block.get("is_error") else "output"
                parts.append({"functionResponse": {"name": name, "response": {key: text}}})
                if isinstance(inner, list):
                    trailing_media += [_anthropic_image(b) for b in inner if b.get("type") == "image"]
        if signature:
            for part in parts:
                if "functionCall" in part:
                    part["thoughtSignature"] = signature
                    break
        _append(contents, role, parts + trailing_media)
    instruction = None
    if system:
        instruction = {"parts": [{"text": content_text(system)}]}
    return instruction, add_placeholder_signatures(contents)


def _anthropic_image(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return {"inlineData": {"mimeType": source.get("media_type", "image/png"), "data": source.get("data", "")}}
    return {"fileData": {"fileUri": source.get("url", "")}}
