"""Argument validation against the published schema, with messages a model can act on.

The schema a tool publishes is the one it is validated against. Two things are added at validation
time only, because Gemini rejects them in published schemas: unknown parameters are refused (with the
list of known ones, so a model that guessed a newer parameter name corrects itself), and integral floats
are accepted where an integer is expected (`5.0` becomes `5`; some clients send every number as a float).
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError


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


class ArgumentValidator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator = jsonschema.Draft202012Validator(_strict(schema))

    def validate(self, arguments: Any) -> tuple[dict[str, Any], list[str]]:
        """Return `(arguments with defaults applied, problems)`; problems is empty when valid."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return {}, ["params must be an object"]
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: (list(e.absolute_path), e.validator))
        if errors:
            return arguments, [self._describe(e) for e in errors]
        return _coerce(self.schema, _with_defaults(self.schema, arguments)), []

    def _describe(self, err: ValidationError) -> str:
        where = "params" + "".join(f"/{p}" for p in err.absolute_path)
        kind, value = err.validator, err.validator_value
        if kind == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            return f"{where} must have required property '{missing}'"
        if kind == "type":
            expected = value if isinstance(value, str) else " or ".join(value)
            return f"{where} must be {_article(expected)}{expected} (got {_json_type(err.instance)})"
        if kind == "additionalProperties":
            known = sorted((err.schema.get("properties") or {}).keys())
            extra = sorted(set(err.instance) - set(known)) if isinstance(err.instance, dict) else []
            parts = []
            for name in extra:
                guess = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
                hint = f" (did you mean '{guess[0]}'?)" if guess else ""
                parts.append(f"'{name}'{hint}")
            return f"{where} has unknown parameter {', '.join(parts)}; known parameters: {', '.join(known)}"
        if kind == "minimum":
            return f"{where} must be >= {value}"
        if kind == "maximum":
            return f"{where} must be <= {value}"
        if kind == "exclusiveMinimum":
            return f"{where} must be > {value}"
        if kind == "minLength":
            return f"{where} must NOT have fewer than {value} characters"
        if kind == "maxLength":
            return f"{where} must NOT have more than {value} characters"
        if kind == "minItems":
            return f"{where} must NOT have fewer than {value} items"
        if kind == "maxItems":
            return f"{where} must NOT have more than {value} items"
        if kind == "enum":
            return f"{where} must be one of: {', '.join(map(str, value))}"
        if kind == "pattern":
            return f"{where} must match pattern {value!r}"
        return f"{where}: {err.message}"


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
