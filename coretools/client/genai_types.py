"""Conversions to and from ``google.genai.types`` (only imported when the ``genai`` extra is used).

The loop works on plain camelCase dicts, the REST wire form. These helpers cross over to the
SDK's pydantic models. Bytes fields (``thoughtSignature``, ``inlineData.data``) are base64 in
the dicts; going through the SDK's JSON validation decodes them to the same bytes, so a
signature survives the round trip unchanged (the SDK writes it back URL-safe, which the API
accepts like the standard alphabet).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.genai import types


def to_genai_tools(tools: Iterable[Mapping[str, Any]]) -> list[types.Tool]:
    return [types.Tool.model_validate_json(json.dumps(tool)) for tool in tools]


def to_genai_content(content: Mapping[str, Any]) -> types.Content:
    return types.Content.model_validate_json(json.dumps(content))


def to_genai_contents(contents: Iterable[Mapping[str, Any]]) -> list[types.Content]:
    return [to_genai_content(c) for c in contents]


def to_genai_config(request: Mapping[str, Any]) -> types.GenerateContentConfig:
    """The non-``contents`` fields of a REST request body as a ``GenerateContentConfig``."""
    fields: dict[str, Any] = dict(request.get("generationConfig") or {})
    for key in ("tools", "toolConfig", "systemInstruction", "safetySettings", "cachedContent", "labels"):
        if request.get(key) is not None:
            fields[key] = request[key]
    return types.GenerateContentConfig.model_validate_json(json.dumps(fields))


def from_genai(model: Any) -> dict[str, Any]:
    """An SDK model (for example a ``GenerateContentResponse``) as a camelCase dict."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
