"""Argument validation against the published schema, with messages a model can act on.

The schema a tool publishes is the one it is validated against. Two things are added at validation
time only, because Gemini rejects them in published schemas: unknown parameters are refused (with the
list of known ones, so a model that guessed a newer parameter name corrects itself), and integral floats
are accepted where an integer is expected (`5.0` becomes `5`; some clients send every number as a float).

Published schemas stay inside the Gemini-safe subset of JSON Schema, so a small validator for that
subset does the work (faster than `jsonschema`, and 3 MB less resident memory). A schema using any other
keyword (a project-discovered tool's, say) is validated by `jsonschema`, imported only then.

A call's arguments are checked in one step (`CallArguments.check`): validated in every dialect's names,
translated to the published names (the tool's `translate`), and validated again as those, so `run` gets
checked arguments in one shape whatever names the caller used.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from typing import TYPE_CHECKING, Any

from coretools.errors import ErrorKind, ToolError

if TYPE_CHECKING:
    from coretools.tools.base import Tool

SUPPORTED = {
    "type", "properties", "required", "items", "enum", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "pattern", "description", "title",
    "default", "format", "nullable", "example", "examples", "additionalProperties",
}  # fmt: skip
_PY_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and math.isfinite(v) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _uses_only_supported(node: Any) -> bool:
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in SUPPORTED:
                return False
            if key == "properties":
                if not all(_uses_only_supported(v) for v in value.values()):
                    return False
            elif key == "items" and not _uses_only_supported(value):
                return False
            elif key == "additionalProperties" and value is not False:
                return False
    return True


class ArgumentValidator:
    def __init__(self, schema: dict[str, Any], listed: list[str] | None = None) -> None:
        """`listed`: the top-level names an unknown-parameter message lists as known (the published ones,
        when `schema` also accepts other dialects' names); every accepted name can still be a guess."""
        self.schema = schema
        self.listed = sorted(listed) if listed is not None else None
        self._fallback = None if _uses_only_supported(schema) else _JsonSchemaFallback(schema)

    def validate(self, arguments: Any) -> tuple[dict[str, Any], list[str]]:
        """Return `(arguments with defaults applied, problems)`; problems is empty when valid."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return {}, ["params must be an object"]
        problems: list[str] = []
        if self._fallback is not None:
            problems = self._fallback.problems(arguments)
        else:
            _check(self.schema, arguments, "params", problems, self.listed)
        if problems:
            return arguments, problems
        return _coerce(self.schema, _with_defaults(self.schema, arguments)), []


class CallArguments:
    """The arguments of one tool's calls: aliasing and validation as one step."""

    def __init__(self, tool: Tool, published: list[str]) -> None:
        """`published`: the parameter names of the schema the tool is published with, the ones an
        unknown-parameter message lists."""
        self.tool = tool
        self.validator = ArgumentValidator(tool.accepted_schema(), published)

    def check(self, name: str, arguments: Any) -> dict[str, Any]:
        """The arguments of a call of tool `name` (as the caller named it), with defaults applied and in the
        published names; `ToolError` (invalid parameters) listing every problem otherwise."""
        args, problems = self.validator.validate(arguments)
        problems = self.tool.missing(arguments) + problems
        if not problems:
            try:
                translated = self.tool.translate(arguments or {})
            except ToolError as exc:
                problems = [exc.message]
            else:
                if translated != arguments:  # (newer names given: checked again as the published ones)
                    args, problems = self.validator.validate(translated)
        if problems:
            raise invalid_parameters(name, problems)
        return args


def invalid_parameters(name: str, problems: list[str]) -> ToolError:
    """The error of a call of tool `name` whose arguments have `problems`."""
    lines = "\n".join(f"- {p}" for p in problems)
    return ToolError(f"Invalid parameters for {name}:\n{lines}", ErrorKind.INVALID_TOOL_PARAMS)


def _check(schema: dict[str, Any], value: Any, where: str, out: list[str], listed: list[str] | None = None) -> None:
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if schema.get("nullable") and value is None:
            return
        if not any(_PY_TYPES.get(k, lambda v: True)(value) for k in kinds):
            expected = " or ".join(kinds)
            out.append(f"{where} must be {_article(expected)}{expected} (got {_json_type(value)})")
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where} must be one of: {', '.join(map(str, schema['enum']))}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(f"{where} must NOT have fewer than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{where} must NOT have more than {schema['maxLength']} characters")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            out.append(f"{where} must match pattern {schema['pattern']!r}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{where} must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{where} must be <= {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{where} must be > {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            out.append(f"{where} must be < {schema['exclusiveMaximum']}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{where} must NOT have fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(f"{where} must NOT have more than {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                _check(items, item, f"{where}/{index}", out)
    elif isinstance(value, dict) and (schema.get("type") == "object" or "properties" in schema):
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                out.append(f"{where} must have required property '{name}'")
        unknown = [k for k in value if k not in props]
        if unknown and props:
            out.append(_unknown_message(where, unknown, listed or sorted(props), sorted(props)))
        for name, sub in props.items():
            if name in value and isinstance(sub, dict):
                _check(sub, value[name], f"{where}/{name}", out)


def _unknown_message(where: str, unknown: list[str], known: list[str], guesses: list[str] | None = None) -> str:
    parts = []
    for name in sorted(unknown):
        guess = difflib.get_close_matches(name, guesses or known, n=1, cutoff=0.5)
        parts.append(f"'{name}'" + (f" (did you mean '{guess[0]}'?)" if guess else ""))
    noun = "parameter" if len(parts) == 1 else "parameters"
    return f"{where} has unknown {noun} {', '.join(parts)}; known parameters: {', '.join(known)}"


class _JsonSchemaFallback:
    """Full JSON Schema validation for schemas outside the Gemini-safe subset."""

    def __init__(self, schema: dict[str, Any]) -> None:
        import jsonschema

        self._validator = jsonschema.Draft202012Validator(_strict(schema))

    def problems(self, arguments: dict[str, Any]) -> list[str]:
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        out = []
        for err in errors:
            where = "params" + "".join(f"/{p}" for p in err.absolute_path)
            if err.validator == "additionalProperties" and isinstance(err.instance, dict):
                known = sorted((err.schema.get("properties") or {}).keys())
                out.append(_unknown_message(where, [k for k in err.instance if k not in known], known))
            else:
                out.append(f"{where}: {err.message}")
        return out


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy that forbids properties the schema does not declare, at every object level."""
    out = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(out)
    return out


def _article(word: str) -> str:
    return "an " if word[:1] in "aeiou" else "a "


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _with_defaults(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in out and isinstance(prop, dict) and "default" in prop:
            out[name] = copy.deepcopy(prop["default"])
    return out


def _coerce(schema: dict[str, Any], value: Any) -> Any:
    """Integral floats to int where the schema says integer, recursively."""
    kind = schema.get("type")
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: _coerce(props[k], v) if isinstance(props.get(k), dict) else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_coerce(schema["items"], v) for v in value]
    return value
