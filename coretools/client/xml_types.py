"""The ``xml`` style's parameter values as the types their schema declares.

A call written in text carries every value as text: :func:`coerce_parameters` converts each
to the parameter's type (integers, numbers, booleans written ``true``/``false``, ``null`` for
nullable parameters, arrays and objects as JSON), and :func:`type_label` names a type for the
prompt and for error messages.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .schema import enum_text
from .xml_format import SPACE, shorten

_INTEGER = re.compile(r"[+-]?\d+\Z")


def branches_of(node: Any) -> list[dict[str, Any]]:
    """The node and, recursively, every ``anyOf``/``oneOf`` branch under it."""
    if not isinstance(node, dict):
        return []
    found = [node]
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key) or ():
            found += branches_of(branch)
    return found


def kinds_of(branches: list[dict[str, Any]]) -> list[str]:
    """The types the branches allow, in order, ``null`` included when one is nullable."""
    kinds: list[str] = []
    for branch in branches:
        kind = branch.get("type")
        for item in kind if isinstance(kind, list) else [kind]:
            if isinstance(item, str) and item not in kinds:
                kinds.append(item)
        if branch.get("nullable") is True and "null" not in kinds:
            kinds.append("null")
    return kinds


def type_label(node: Any) -> str:
    """A short description of a parameter's type, for the prompt and for error messages."""
    branches = branches_of(node)
    members = [m for b in branches for m in b.get("enum") or ()]
    if members:
        return "one of " + ", ".join(enum_text(m) for m in members)
    labels = []
    for kind in kinds_of(branches):
        if kind == "array":
            items = next((b["items"] for b in branches if isinstance(b.get("items"), dict)), {})
            inner = kinds_of(branches_of(items))
            labels.append(f"JSON array of {'/'.join(inner)}" if inner else "JSON array")
        elif kind == "object":
            labels.append("JSON object")
        else:
            labels.append(kind)
    return " or ".join(labels) or "any JSON value or text"


def convert_value(text: str, node: Any) -> Any:
    """One parameter's text as the schema's type; ``ValueError`` says what was expected."""
    branches = branches_of(node)
    members = [m for b in branches for m in b.get("enum") or ()]
    kinds = kinds_of(branches)
    bare = text.strip(SPACE)
    if members:
        for member in members:
            if text == member or bare == enum_text(member) or (isinstance(member, str) and bare == member):
                return member
        raise ValueError(type_label(node))
    if "string" in kinds:
        return text
    if "null" in kinds and bare in ("", "null"):
        return None
    if ("integer" in kinds or "number" in kinds) and _INTEGER.match(bare):
        return int(bare)
    number = _finite_float(bare) if "number" in kinds or "integer" in kinds else None
    if number is not None and "number" in kinds:
        return number
    if number is not None and number.is_integer():
        return int(number)
    if "boolean" in kinds and bare.lower() in ("true", "false"):
        return bare.lower() == "true"
    if not kinds or "array" in kinds or "object" in kinds:
        try:
            decoded = json.loads(bare)
        except ValueError:
            decoded = _NOTHING
        if not kinds:
            return text if decoded is _NOTHING else decoded
        if ("array" in kinds and isinstance(decoded, list)) or ("object" in kinds and isinstance(decoded, dict)):
            return decoded
    raise ValueError(type_label(node))


_NOTHING = object()


def _finite_float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def coerce_parameters(schema: Any, arguments: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Parameter texts to typed values; (arguments, problems). Unknown parameters stay text."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    result: dict[str, Any] = {}
    problems: list[str] = []
    for name, text in arguments.items():
        if name not in properties:
            result[name] = text
            continue
        try:
            result[name] = convert_value(text, properties[name])
        except ValueError as exc:
            problems.append(f"<{name}> must be {exc}, got {shorten(text, 60)!r}")
    return result, problems
