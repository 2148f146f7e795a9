"""The schema sanitiser: both profiles on real-world schemas, awkward cases, and property-based
proofs that any input (valid or not) comes out meeting the target profile."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from client_support import DATA, check_json_profile, check_openapi_profile
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from coretools.client.arguments import coerce_arguments
from coretools.client.schema import enum_text, to_json_profile, to_openapi_profile

REAL_WORLD = [
    pytest.param(tool["inputSchema"], id=f"{path.stem}:{tool['name']}")
    for path in (DATA / "filesystem_server_tools.json", DATA / "coretools_tools.json")
    for tool in json.loads(Path(path).read_text())["tools"]
]

# ------------------------------------------------------------------------- real-world schemas


@pytest.mark.parametrize("schema", REAL_WORLD)
def test_real_world_schemas_meet_both_profiles(schema: dict[str, Any]) -> None:
    json_out = to_json_profile(schema)
    check_json_profile(json_out)
    Draft202012Validator.check_schema(json_out)
    assert set(json_out["properties"]) == set(schema.get("properties", {})), "no parameter may get lost"
    openapi_out = to_openapi_profile(schema)
    check_openapi_profile(openapi_out)
    if schema.get("properties"):
        assert openapi_out is not None and set(openapi_out["properties"]) == set(schema["properties"])
    else:
        assert openapi_out is None


def test_filesystem_edit_file_with_refs_and_nullable() -> None:
    schema = next(t["inputSchema"] for t in json.loads((DATA / "filesystem_server_tools.json").read_text())["tools"] if t["name"] == "edit_file_nullable")
    out = to_json_profile(schema)
    assert out["properties"]["edits"]["items"]["properties"]["oldText"] == {"type": "string", "description": "Text to search for - must match exactly"}
    assert out["properties"]["dryRun"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]
    strict = to_openapi_profile(schema)
    assert strict["properties"]["dryRun"] == {
        "default": False,
        "description": "Preview changes using git-style diff format",
        "type": "boolean",
        "nullable": True,
    }
    assert strict["properties"]["edits"]["items"]["required"] == ["oldText", "newText"]


# ------------------------------------------------------------------------- json profile, case by case


def test_json_profile_rules() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "definitions": {"Name": {"type": "string", "minLength": 1}},
        "properties": {
            "name": {"$ref": "#/definitions/Name", "description": "Who."},
            "alias": {"$ref": "#/properties/name"},
            "count": {"type": ["integer", "null"], "minimum": 0},
            "value": {"type": ["string", "number", "null"], "maxLength": 5, "maximum": 9},
            "list": {"type": "array"},
            "loose": {"properties": {"a": {"type": "string"}}, "required": ["a", "b"]},
            "external": {"$ref": "https://example.com/schema.json", "description": "Kept words."},
            "never": False,
            "anything": True,
        },
        "required": ["name", "ghost"],
    }
    out = to_json_profile(schema)
    props = out["properties"]
    assert props["name"] == {"type": "string", "minLength": 1, "description": "Who."}
    assert props["alias"] == {"type": "string", "minLength": 1, "description": "Who."}
    assert props["count"] == {"type": "integer", "minimum": 0, "nullable": True}
    assert props["value"] == {"nullable": True, "anyOf": [{"type": "string", "maxLength": 5}, {"type": "number", "maximum": 9}]}
    assert props["list"] == {"type": "array", "items": {}}
    assert props["loose"] == {"properties": {"a": {"type": "string"}}, "required": ["a"], "type": "object"}
    assert props["external"] == {"description": "Kept words."}
    assert props["never"] == {"not": {}} and props["anything"] == {}
    assert out["required"] == ["name"] and out["type"] == "object"
    assert "$schema" not in out and "$id" not in out and "definitions" not in out


def test_json_profile_root_repairs() -> None:
    assert to_json_profile(None) == {"type": "object", "properties": {}}
    assert to_json_profile({"properties": []}) == {"properties": {}, "type": "object"}
    assert to_json_profile({"type": ["object", "null"]}) == {"type": "object", "properties": {}}


def test_recursive_refs_stop_at_a_placeholder() -> None:
    schema = {
        "$defs": {"Node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
        "properties": {"root": {"$ref": "#/$defs/Node"}, "self": {"$ref": "#", "description": "Whole."}},
    }
    out = to_json_profile(schema)
    check_json_profile(out)
    depth, node = 0, out["properties"]["root"]
    while "children" in node.get("properties", {}):
        node = node["properties"]["children"]["items"]
        depth += 1
    assert depth == 2 and node == {"type": "object"}, "a recursive ref unrolls a bounded number of times"
    assert len(json.dumps(out)) < 5000


# ------------------------------------------------------------------------- openapi profile, case by case


def test_openapi_profile_rules() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "mode": {"const": "fast"},
            "level": {"type": "integer", "enum": [1, 2, 3], "default": 2},
            "flag": {"enum": [True, False, None, ""]},
            "choice": {"oneOf": [{"type": "string"}, {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 2}]},
            "maybe": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}], "default": None},
            "when": {"type": "string", "format": "date-time"},
            "link": {"type": "string", "format": "uri", "description": "Where."},
            "ratio": {"type": "number", "exclusiveMaximum": 1},
            "blob": {"type": "object", "description": "Anything."},
            "any": {},
            "tags": {"type": "array", "uniqueItems": True, "examples": [["a"]]},
            "merged": {"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {"type": "integer"}}}]},
        },
    }
    out = to_openapi_profile(schema)
    check_openapi_profile(out)
    p = out["properties"]
    assert p["mode"] == {"enum": ["fast"], "type": "string"}
    assert p["level"] == {"type": "string", "enum": ["1", "2", "3"], "default": "2"}
    assert p["flag"] == {"enum": ["true", "false", "null"], "type": "string"}
    assert p["choice"]["anyOf"][0] == {"type": "string"}
    assert p["choice"]["anyOf"][1] == {"type": "integer", "minimum": 0, "description": "(must be greater than 0; a multiple of 2)"}
    assert p["maybe"] == {"default": None, "type": "string", "nullable": True, "description": "(format: uri)"}
    assert p["when"] == {"type": "string", "format": "date-time"}
    assert p["link"] == {"type": "string", "description": "Where. (format: uri)"}
    assert p["ratio"] == {"type": "number", "maximum": 1, "description": "(must be less than 1)"}
    assert p["blob"] == {"type": "string", "description": "Anything. (a JSON object, written as JSON text)"}
    assert p["any"]["type"] == "string" and "any JSON value" in p["any"]["description"]
    assert p["tags"] == {"type": "array", "example": ["a"], "items": {"type": "string"}, "description": "(items must be unique)"}
    assert p["merged"]["properties"] == {"a": {"type": "string"}, "b": {"type": "integer"}} and p["merged"]["required"] == ["a"]


def test_openapi_zero_argument_tools_omit_parameters() -> None:
    assert to_openapi_profile({"type": "object"}) is None
    assert to_openapi_profile({"type": "object", "properties": {}, "additionalProperties": False}) is None


# ------------------------------------------------------------------------- argument coercion


def test_coercion_undoes_wire_and_profile_changes() -> None:
    schema = {
        "type": "object",
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "properties": {
            "n": {"type": "integer"},
            "f": {"type": "number"},
            "level": {"enum": [1, 2, 3]},
            "flag": {"const": True},
            "word": {"enum": ["1", 2]},
            "text": {"anyOf": [{"type": "string"}, {"enum": [7]}]},
            "blob": {"type": "object"},
            "anyv": {},
            "s": {"type": "string"},
            "point": {"$ref": "#/$defs/P"},
            "points": {"type": "array", "items": {"$ref": "#/$defs/P"}},
            "maybe": {"type": ["integer", "null"]},
        },
        "additionalProperties": {"type": "integer"},
    }
    wire = {
        "n": 3.0, "f": 2.0, "level": "2", "flag": "true", "word": "1", "text": "7", "blob": '{"k": [1]}', "anyv": "[1, 2]",
        "s": "{not json", "point": {"x": 4.0}, "points": [{"x": 1.0}, {"x": 2.5}], "maybe": 5.0, "extra": 6.0,
    }  # fmt: skip
    out = coerce_arguments(schema, wire)
    expected = {
        "n": 3, "f": 2.0, "level": 2, "flag": True, "word": "1", "text": "7", "blob": {"k": [1]}, "anyv": [1, 2],
        "s": "{not json", "point": {"x": 4}, "points": [{"x": 1}, {"x": 2.5}], "maybe": 5, "extra": 6,
    }  # fmt: skip
    assert json.dumps(out, sort_keys=True) == json.dumps(expected, sort_keys=True), "types must match, not just values"


# ------------------------------------------------------------------------- property-based tests

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=6)
)
JSON = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=6)
TYPE_NAMES = st.sampled_from(["string", "number", "integer", "boolean", "array", "object", "null", "STRING", "bogus"])
REFS = st.sampled_from(["#/$defs/A", "#/$defs/B", "#/definitions/C", "#", "#/properties/p0", "#/$defs/missing", "https://x.test/s.json", "#/$defs/A/properties/p1", 7])
NAMES = st.sampled_from(["p0", "p1", "p2", "$id", "type", "x-y"])
LEAF = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(TYPE_NAMES, st.lists(TYPE_NAMES, max_size=4), st.integers()),
        "description": st.one_of(st.text(max_size=8), st.integers()),
        "title": st.text(max_size=5),
        "format": st.sampled_from(["uri", "date-time", "email", "enum", "int32", "float", "uuid", ""]),
        "enum": st.lists(SCALARS, max_size=4) | st.integers(),
        "const": JSON,
        "default": JSON,
        "examples": st.lists(JSON, max_size=2),
        "minimum": st.one_of(st.integers(-5, 5), st.text(max_size=2)),
        "exclusiveMinimum": st.one_of(st.integers(-5, 5), st.booleans()),
        "exclusiveMaximum": st.floats(-5, 5),
        "multipleOf": st.integers(1, 4),
        "minLength": st.one_of(st.integers(-1, 5), st.text(max_size=2), st.floats(0, 3)),
        "maxItems": st.integers(0, 5),
        "pattern": st.one_of(st.just("^a"), st.integers()),
        "nullable": st.booleans(),
        "$comment": st.text(max_size=4),
        "$id": st.text(max_size=4),
        "$ref": REFS,
        "x-vendor": JSON,
        "uniqueItems": st.booleans(),
        "propertyOrdering": st.lists(NAMES, max_size=3),
    },
)


def _extend(children):
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(TYPE_NAMES, st.lists(TYPE_NAMES, max_size=3)),
            "properties": st.one_of(st.dictionaries(NAMES, children, max_size=4), st.lists(children, max_size=1)),
            "required": st.one_of(st.lists(NAMES | st.integers(), max_size=4), st.text(max_size=3)),
            "items": st.one_of(children, st.lists(children, max_size=2)),
            "prefixItems": st.lists(children, max_size=2),
            "anyOf": st.lists(children, max_size=3),
            "oneOf": st.lists(children, max_size=3),
            "allOf": st.lists(children, max_size=2),
            "not": children,
            "additionalProperties": st.one_of(st.booleans(), children),
            "patternProperties": st.dictionaries(st.just("^x"), children, max_size=1),
            "$ref": REFS,
            "description": st.text(max_size=6),
            "if": children,
            "dependencies": st.dictionaries(NAMES, st.one_of(children, st.lists(NAMES, max_size=2)), max_size=2),
        },
    )


SCHEMA = st.recursive(LEAF | st.booleans(), _extend, max_leaves=12)
OBJECT_ROOT = st.builds(
    lambda props, required, a, b: {"type": "object", "properties": props, "required": required, "$defs": {"A": a, "B": b}},
    st.dictionaries(NAMES, SCHEMA, min_size=1, max_size=5), st.lists(NAMES, max_size=3), SCHEMA, SCHEMA,
)
ROOT = st.one_of(
    OBJECT_ROOT,
    OBJECT_ROOT,
    st.builds(
        lambda body, a, b, c: {**body, "$defs": {"A": a, "B": b}, "definitions": {"C": c}} if isinstance(body, dict) else body,
        SCHEMA, SCHEMA, SCHEMA, SCHEMA,
    ),
    SCHEMA,
    JSON,
)


# One property test for both profiles: drawing a schema from ROOT costs far more than either conversion
# (about nine tenths of the test's time goes to Hypothesis building the nested examples), so both profiles
# are checked on each schema drawn rather than drawing 300 schemas twice.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ROOT)
def test_property_json_and_openapi_profiles(schema: Any) -> None:
    out = to_json_profile(schema)
    check_json_profile(out)
    assert to_json_profile(out) == out, "the JSON profile is idempotent"
    try:
        Draft202012Validator.check_schema(schema)
        valid_input = isinstance(schema, dict)
    except SchemaError:
        valid_input = False
    if valid_input:
        Draft202012Validator.check_schema(out)  # valid JSON Schema in, valid JSON Schema out

    narrowed = to_openapi_profile(schema)
    check_openapi_profile(narrowed)
    if narrowed is not None:
        assert to_openapi_profile(narrowed) == narrowed, "the openapi profile is idempotent"


def test_openapi_profile_root_is_never_nullable() -> None:
    """Found by the property test above: a root `anyOf` branch `{"nullable": true}` made the parameters
    object nullable, and a second pass dropped it again (not idempotent, and not a valid arguments shape)."""
    out = to_openapi_profile({"properties": {"p0": {}}, "anyOf": [{"nullable": True}]})
    assert out is not None and "nullable" not in out
    assert to_openapi_profile(out) == out


def _wire(value: Any, kind: str) -> Any:
    """What a model answering the openapi-profile schema sends for ``value``."""
    if kind == "int":
        return float(value)  # Gemini's Struct: every number is a double
    if kind == "enum":
        return enum_text(value)
    if kind == "object":
        return json.dumps(value)
    return value


ENUM_MEMBERS = [1, 2.5, True, None, "x", [1, "a"], {"k": 0}]
ARG = st.one_of(
    st.tuples(st.just("int"), st.integers(-(2**40), 2**40)),
    st.tuples(st.just("enum"), st.sampled_from(ENUM_MEMBERS)),
    st.tuples(st.just("object"), st.dictionaries(st.text(max_size=3), SCALARS.filter(lambda v: not (isinstance(v, float) and math.isnan(v))), max_size=3)),
    st.tuples(st.just("text"), st.text(max_size=8)),
)
SCHEMA_OF = {"int": {"type": "integer"}, "enum": {"enum": ENUM_MEMBERS}, "object": {"type": "object"}, "text": {"type": "string"}}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), ARG, min_size=1))
def test_property_coercion_round_trip(values: dict[str, tuple[str, Any]]) -> None:
    """Whatever the strict profile made the model send, the server gets the original value back."""
    assume(all(not (k == "text" and v.lstrip()[:1] in "{[" and v.strip()) for k, v in values.values()))
    schema = {"type": "object", "properties": {name: SCHEMA_OF[kind] for name, (kind, _) in values.items()}}
    wire = {name: _wire(value, kind) for name, (kind, value) in values.items()}
    original = {name: value for name, (_, value) in values.items()}
    assert json.dumps(coerce_arguments(schema, wire), sort_keys=True) == json.dumps(original, sort_keys=True)
