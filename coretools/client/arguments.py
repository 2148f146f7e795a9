"""Arguments back to what the server's own schema expects.

A model's arguments reach the bridge changed by its wire format (Gemini's ``Struct`` carries
every number as a double) and by the schema profile it was shown
(:mod:`coretools.client.schema`: enum members as strings, free-form objects as JSON text).
:func:`coerce_arguments` undoes both against the tool's *original* ``inputSchema``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .schema import Refs, enum_text


def coerce_arguments(schema: Any, args: Any) -> Any:
    """Undo what the model's wire format and the sanitiser did to argument values.

    * Integral floats become ints where the schema allows ``integer`` (Gemini's ``Struct``
      carries every number as a double).
    * Strings that are the openapi profile's text form of a non-string enum or ``const``
      member become that member again, unless a branch of the schema takes the string as is.
    * JSON text sent for a node the openapi profile turned into text (free-form objects,
      typeless values) is decoded when it is a JSON object or array.
    """
    root = schema if isinstance(schema, dict) else {}
    return _coerce(args, root, Refs(root), 0)


def _coerce(value: Any, node: Any, refs: Refs, depth: int) -> Any:
    if depth > 64:
        return value
    candidates = list(_candidates(node, refs, 0))
    if not candidates:
        return value
    if isinstance(value, float) and value.is_integer() and any(_allows(c, "integer") for c in candidates):
        return int(value)
    if isinstance(value, str):
        value = _coerce_text(value, candidates)
    if isinstance(value, dict):
        return {key: _coerce(item, _property_schema(candidates, key), refs, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_coerce(item, _item_schema(candidates, i), refs, depth + 1) for i, item in enumerate(value)]
    return value


def _candidates(node: Any, refs: Refs, hops: int) -> Iterator[dict[str, Any]]:
    """The node and every schema it combines with, ``$ref``s followed (bounded)."""
    if not isinstance(node, dict) or hops > 16:
        return
    if "$ref" in node:
        target = refs.resolve(node["$ref"])
        yield from _candidates(target, refs, hops + 1)
        node = {k: v for k, v in node.items() if k != "$ref"}
    yield node
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(key) or ():
            yield from _candidates(branch, refs, hops + 1)


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _allows(node: dict[str, Any], kind: str) -> bool:
    return kind in _types(node)


def _coerce_text(value: str, candidates: list[dict[str, Any]]) -> Any:
    def members(c: dict[str, Any]) -> list[Any]:
        found = list(c["enum"]) if isinstance(c.get("enum"), list) else []
        if "const" in c:
            found.append(c["const"])
        return found

    takes_string = any(
        value in members(c) if members(c) else "string" in _types(c) for c in candidates if members(c) or _types(c)
    )
    if takes_string:
        return value
    for c in candidates:
        for member in members(c):
            if not isinstance(member, str) and enum_text(member) == value:
                return member
    wants_json = any(_types(c) & {"object", "array"} for c in candidates) or not any(
        _types(c) or members(c) for c in candidates
    )
    if wants_json and value.lstrip()[:1] in ("{", "["):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if isinstance(decoded, (dict, list)):
            return decoded
    return value


def _property_schema(candidates: list[dict[str, Any]], key: str) -> Any:
    for c in candidates:
        props = c.get("properties")
        if isinstance(props, dict) and key in props:
            return props[key]
    for c in candidates:
        if isinstance(c.get("additionalProperties"), dict):
            return c["additionalProperties"]
    return None


def _item_schema(candidates: list[dict[str, Any]], index: int) -> Any:
    for c in candidates:
        prefix = c.get("prefixItems")
        if isinstance(prefix, list) and index < len(prefix):
            return prefix[index]
        items = c.get("items")
        if isinstance(items, list):
            if index < len(items):
                return items[index]
        elif isinstance(items, dict):
            return items
    return None
