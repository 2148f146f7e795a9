"""MCP ``inputSchema`` -> what Gemini accepts, in two profiles.

**Profile "json"** feeds ``FunctionDeclaration.parametersJsonSchema`` (raw JSON Schema, what
Gemini CLI sends for MCP tools). It keeps meaning and changes only what is known to break:
the root gets ``type: object`` and a ``properties`` object; every local ``$ref`` is inlined
(Gemini rejects ``$ref`` with sibling keywords and refs it cannot resolve), recursion stops at
a depth limit with a ``{"type": "object"}`` placeholder; ``type: [X, "null"]`` becomes
``type: X`` + ``nullable: true`` and longer type lists become ``anyOf``; ``required`` is
filtered to declared properties; arrays get ``items``; ``$schema``/``$id``/``$comment`` go.

**Profile "openapi"** feeds the strict ``FunctionDeclaration.parameters`` (the OpenAPI 3.0
subset of the Schema proto, where an unknown key is a hard 400). It starts from the json
profile and then allow-lists keywords, turns ``oneOf`` into ``anyOf`` and null branches into
``nullable``, ``const`` into a one-member ``enum``, makes every enum a string enum (the proto
only allows enums on strings), moves unsupported formats and bounds into the description,
gives every node a ``type``, and replaces property-less nested objects by JSON text. A root
without properties yields ``None``: omit ``parameters`` for a zero-argument tool.

Because the openapi profile changes value types (enum members become strings, free-form
objects become JSON text) and Gemini sends every number as a double, arguments are passed
through :func:`coretools.client.arguments.coerce_arguments` against the *original* schema
before they reach the server.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal
from urllib.parse import unquote

from .notices import client_logger

logger = client_logger(__name__)

Profile = Literal["json", "openapi"]
PROFILES: tuple[Profile, ...] = ("json", "openapi")

MAX_REF_DEPTH = 8
"""How many ``$ref``s deep inlining goes before a placeholder is put in."""
MAX_REF_REENTRY = 1
"""How often a ``$ref`` already being inlined may be entered again (a recursive schema unrolls this far)."""

OPENAPI_KEYWORDS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "properties", "required", "items",
        "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
        "minProperties", "maxProperties", "anyOf", "propertyOrdering", "default", "example",
    }
)  # fmt: skip
OPENAPI_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object"})

_DROPPED_EVERYWHERE = frozenset({"$schema", "$id", "$comment", "$defs", "definitions", "$anchor", "$dynamicAnchor"})
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_SINGLES = ("not", "contains", "propertyNames", "if", "then", "else", "additionalItems", "unevaluatedItems")
_BOOL_OR_SCHEMA = ("additionalProperties", "unevaluatedProperties")
_PER_TYPE = {
    "string": ("minLength", "maxLength", "pattern", "contentEncoding", "contentMediaType"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"),
    "object": (
        "properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
        "propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
    ),
}  # fmt: skip
_PER_TYPE["integer"] = _PER_TYPE["number"]
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")


def enum_text(value: Any) -> str:
    """How a non-string enum member is written in the openapi profile (and read back)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sanitize_schema(schema: Any, profile: Profile = "json") -> dict[str, Any] | None:
    """Sanitise an MCP ``inputSchema`` for one profile (``None``: omit ``parameters``)."""
    if profile == "json":
        return to_json_profile(schema)
    if profile == "openapi":
        return to_openapi_profile(schema)
    raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")


# --------------------------------------------------------------------------------------------
# Local $ref resolution (shared by both profiles and by argument coercion)


class Refs:
    """Resolves local JSON pointers (``#``, ``#/$defs/X``, ``#/definitions/X``, ``#/a/b``)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def resolve(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        node: Any = self.root
        pointer = ref[1:]
        if pointer in ("", "/"):
            return node
        if not pointer.startswith("/"):
            return None
        for raw in pointer[1:].split("/"):
            token = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node


# --------------------------------------------------------------------------------------------
# Profile "json"


def to_json_profile(schema: Any) -> dict[str, Any]:
    """The light profile for ``parametersJsonSchema``; always returns an object schema."""
    root = schema if isinstance(schema, dict) else {}
    out = _JsonCleaner(Refs(root)).clean(root, ())
    if not isinstance(out, dict):  # pragma: no cover - clean() of a dict is a dict
        out = {}
    out["type"] = "object"
    out.pop("nullable", None)
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    _filter_required(out)
    return out


class _JsonCleaner:
    def __init__(self, refs: Refs) -> None:
        self.refs = refs

    def clean(self, node: Any, stack: tuple[str, ...]) -> dict[str, Any]:
        if node is True or not isinstance(node, (dict, bool)):
            return {}
        if node is False:
            return {"not": {}}
        if "$ref" in node:
            return self._inline(node, stack)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED_EVERYWHERE:
                continue
            if key in _SCHEMA_MAPS:
                if isinstance(value, dict):
                    out[key] = {name: self.clean(sub, stack) for name, sub in value.items()}
                elif key == "properties":
                    out[key] = {}
            elif key in _SCHEMA_LISTS:
                if isinstance(value, list) and value:
                    out[key] = [self.clean(sub, stack) for sub in value]
            elif key == "items":
                out[key] = self._items(value, stack)
            elif key in _SCHEMA_SINGLES:
                out[key] = self.clean(value, stack)
            elif key in _BOOL_OR_SCHEMA:
                out[key] = value if isinstance(value, bool) else self.clean(value, stack)
            elif key == "dependencies" and isinstance(value, dict):
                out[key] = {n: (v if isinstance(v, list) else self.clean(v, stack)) for n, v in value.items()}
            else:
                out[key] = copy.deepcopy(value)
        return _finish_json_node(out)

    def _items(self, value: Any, stack: tuple[str, ...]) -> dict[str, Any]:
        if isinstance(value, list):  # draft-4 tuple form: any of the listed schemas
            branches = [self.clean(sub, stack) for sub in value]
            if not branches:
                return {}
            return branches[0] if len(branches) == 1 else {"anyOf": branches}
        return self.clean(value, stack)

    def _inline(self, node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        ref = node["$ref"]
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        target = self.refs.resolve(ref)
        if not isinstance(target, (dict, bool)):
            logger.warning("unresolvable $ref %r replaced by its sibling keywords", ref)
            return self.clean(siblings, stack)
        if len(stack) >= MAX_REF_DEPTH or stack.count(ref) > MAX_REF_REENTRY:
            placeholder: dict[str, Any] = {"type": "object"}
            for key in ("description", "title"):
                if isinstance(siblings.get(key), str):
                    placeholder[key] = siblings[key]
            return placeholder
        if isinstance(target, bool):
            return self.clean(siblings, stack) if target else {"not": {}}
        merged = {k: v for k, v in target.items() if k not in _DROPPED_EVERYWHERE}
        merged.update(siblings)
        return self.clean(merged, (*stack, ref))


def _finish_json_node(out: dict[str, Any]) -> dict[str, Any]:
    if "nullable" in out and out["nullable"] is not True:
        del out["nullable"]  # only ever true on Gemini's side; false is the default anyway
    kind = out.get("type")
    if isinstance(kind, list):
        _split_type_list(out, kind)
    elif kind is not None and not isinstance(kind, str):
        del out["type"]
    if "type" not in out and ("properties" in out or "required" in out) and "anyOf" not in out:
        out["type"] = "object"
    if "properties" in out or "required" in out:
        _filter_required(out)
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {}
    return out


def _split_type_list(out: dict[str, Any], kinds: list[Any]) -> None:
    names = list(dict.fromkeys(k for k in kinds if isinstance(k, str)))
    nullable = "null" in names
    rest = [k for k in names if k != "null"]
    del out["type"]
    if nullable:
        out["nullable"] = True
    if not rest:
        if nullable:
            out["type"] = "null"
        return
    if len(rest) == 1:
        out["type"] = rest[0]
        return
    branches = []
    for kind in rest:
        branch: dict[str, Any] = {"type": kind}
        for key in _PER_TYPE.get(kind, ()):
            if key in out:
                branch[key] = out[key]
        if "format" in out and (kind == "string" or ("string" not in rest and kind in ("number", "integer"))):
            branch["format"] = out["format"]
        branches.append(_finish_json_node(branch))
    for kind in rest:
        for key in _PER_TYPE.get(kind, ()):
            out.pop(key, None)
    out.pop("format", None)
    if "anyOf" in out:
        out["allOf"] = [*out.get("allOf", []), {"anyOf": branches}]
    else:
        out["anyOf"] = branches


def _filter_required(out: dict[str, Any]) -> None:
    props = out.get("properties")
    if not isinstance(props, dict):
        props = {}
    required = out.get("required")
    kept = list(dict.fromkeys(r for r in required if isinstance(r, str) and r in props)) if isinstance(required, list) else []
    if kept:
        out["required"] = kept
    else:
        out.pop("required", None)


# --------------------------------------------------------------------------------------------
# Profile "openapi"


def to_openapi_profile(schema: Any) -> dict[str, Any] | None:
    """The strict profile for ``parameters``; ``None`` when the tool takes no arguments."""
    out = _to_openapi(to_json_profile(schema), root=True)
    if out.get("type") != "object" or not out.get("properties"):
        return None
    out.pop("nullable", None)  # arguments are always an object (a root branch such as {"nullable": true} said otherwise)
    return out


def _to_openapi(node: dict[str, Any], *, root: bool = False) -> dict[str, Any]:
    n = dict(node)
    notes: list[str] = []
    nullable = n.pop("nullable", None) is True
    if n.get("type") == "null":
        del n["type"]
        nullable = True

    all_of = n.pop("allOf", None)
    if isinstance(all_of, list) and not _merge_all_of(n, all_of):
        notes.append("must also satisfy further constraints")
    branches = [b for key in ("anyOf", "oneOf") for b in (n.pop(key, None) or []) if isinstance(b, dict)]
    if branches:
        kept = []
        for branch in branches:
            if branch.get("type") == "null" and not (set(branch) - {"type", "description", "title"}):
                nullable = True
            else:
                kept.append(branch)
        if len(kept) == 1:
            merged = {k: v for k, v in n.items() if k not in ("type",)}
            merged.update(kept[0])
            for key in ("description", "title"):  # the property's own words win over the branch's
                if key in n:
                    merged[key] = n[key]
            if nullable:
                merged["nullable"] = True
            return _to_openapi(merged, root=root)
        if kept:
            out: dict[str, Any] = {k: n[k] for k in ("title", "description") if isinstance(n.get(k), str)}
            out["anyOf"] = [_to_openapi(b) for b in kept]
            if nullable:
                out["nullable"] = True
            return out

    if "const" in n:
        n["enum"] = [n.pop("const")]
    stringified = False
    if "enum" in n:
        values = n.pop("enum")
        members = list(dict.fromkeys(enum_text(v) for v in values)) if isinstance(values, list) else []
        members = [m for m in members if m != ""]
        if members:
            stringified = any(not isinstance(v, str) for v in values)
            n["enum"] = members
            n["type"] = "string"
    if "examples" in n:
        examples = n.pop("examples")
        if isinstance(examples, list) and examples and "example" not in n:
            n["example"] = examples[0]

    kind = _openapi_type(n)
    n["type"] = kind
    if stringified:
        for key in ("default", "example"):
            if key in n:
                n[key] = enum_text(n[key])

    for exclusive, inclusive, word in (("exclusiveMinimum", "minimum", "greater"), ("exclusiveMaximum", "maximum", "less")):
        bound = n.pop(exclusive, None)
        if _is_number(bound):
            notes.append(f"must be {word} than {bound}")
            n.setdefault(inclusive, bound)
    if _is_number(n.get("multipleOf")) and kind in ("number", "integer"):
        notes.append(f"a multiple of {n['multipleOf']}")
    if n.get("uniqueItems") is True and kind == "array":
        notes.append("items must be unique")
    fmt = n.pop("format", None)
    if isinstance(fmt, str) and fmt:
        if (kind == "string" and fmt in ("enum", "date-time")) or (
            kind in ("number", "integer") and fmt in ("float", "double", "int32", "int64")
        ):
            n["format"] = fmt
        else:
            notes.append(f"format: {fmt}")

    if kind == "object":
        props = n.get("properties") if isinstance(n.get("properties"), dict) else {}
        if not props and not root:
            return _json_text_node(n, "a JSON object", nullable)
        n["properties"] = {name: _to_openapi(sub) for name, sub in props.items()}
        _filter_required(n)
        order = n.get("propertyOrdering")
        if not (isinstance(order, list) and all(isinstance(o, str) and o in n["properties"] for o in order)):
            n.pop("propertyOrdering", None)
    if kind == "array":
        items = n.get("items")
        n["items"] = _to_openapi(items) if isinstance(items, dict) and items else {"type": "string"}

    out = {k: v for k, v in n.items() if k in OPENAPI_KEYWORDS and k not in _not_for_type(kind)}
    _check_values(out)
    if nullable:
        out["nullable"] = True
    if notes:
        _append_description(out, notes)
    return out


def _openapi_type(n: dict[str, Any]) -> str:
    kind = n.get("type")
    if isinstance(kind, str) and kind.lower() in OPENAPI_TYPES:
        return kind.lower()
    if "properties" in n or "required" in n:
        return "object"
    if "items" in n:
        return "array"
    if any(k in n for k in ("minLength", "maxLength", "pattern", "enum")):
        return "string"
    if any(k in n for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    n["description"] = _with_note(n.get("description"), "any JSON value; objects and arrays as JSON text")
    return "string"


def _json_text_node(n: dict[str, Any], what: str, nullable: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    if isinstance(n.get("title"), str):
        out["title"] = n["title"]
    out["description"] = _with_note(n.get("description"), f"{what}, written as JSON text")
    if nullable:
        out["nullable"] = True
    return out


def _not_for_type(kind: str) -> frozenset[str]:
    allowed_extra = {
        "object": {"properties", "required", "propertyOrdering", "minProperties", "maxProperties"},
        "array": {"items", "minItems", "maxItems"},
        "string": {"minLength", "maxLength", "pattern"},
        "number": {"minimum", "maximum"},
        "integer": {"minimum", "maximum"},
    }
    every = set().union(*allowed_extra.values())
    return frozenset(every - allowed_extra.get(kind, set()))


def _check_values(out: dict[str, Any]) -> None:
    """Drop keywords whose values the Schema proto would reject."""
    for key in ("title", "description", "pattern"):
        if key in out and not isinstance(out[key], str):
            del out[key]
    for key in _COUNTS:
        if key in out:
            value = out[key]
            if _is_number(value) and value >= 0 and float(value).is_integer():
                out[key] = int(value)
            else:
                del out[key]
    for key in ("minimum", "maximum"):
        if key in out and not _is_number(out[key]):
            del out[key]


def _merge_all_of(n: dict[str, Any], members: list[Any]) -> bool:
    """Fold ``allOf`` members into the node when no keyword conflicts; report success."""
    merged = dict(n)
    for member in members:
        if not isinstance(member, dict):
            return False
        for key, value in member.items():
            if key == "properties" and isinstance(value, dict):
                props = dict(merged.get("properties") or {})
                if set(props) & set(value):
                    return False
                props.update(value)
                merged["properties"] = props
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*(merged.get("required") or []), *value]
            elif key in ("description", "title"):
                merged.setdefault(key, value)
            elif key in merged and merged[key] != value:
                return False
            else:
                merged[key] = value
    n.clear()
    n.update(merged)
    return True


def _append_description(out: dict[str, Any], notes: list[str]) -> None:
    out["description"] = _with_note(out.get("description"), "; ".join(notes))


def _with_note(description: Any, note: str) -> str:
    text = description if isinstance(description, str) else ""
    return f"{text} ({note})" if text else f"({note})"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
