"""Published schemas are ones Gemini accepts as they are, and arguments are validated against them with
messages that name the parameter and the rule, all violations in one isError result.

The schema checks run over the output of `coretools-mcp tools`, so every tool published later is covered
without touching this file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, call_tool, text_of

# What Gemini's Schema (the OpenAPI subset behind `parameters`) knows; anything else is refused by the
# API ("Unknown name ... Cannot find field") or by the SDK on the Developer API path.
ALLOWED_KEYS = {
    "type", "format", "title", "description", "nullable", "enum", "properties", "required", "items",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum", "minProperties",
    "maxProperties", "propertyOrdering", "default", "example",
}  # fmt: skip
TYPES = {"string", "number", "integer", "boolean", "array", "object"}
PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


def gemini_problems(schema: Any, where: str = "inputSchema", *, root: bool = True) -> list[str]:
    """Everything in a tool's inputSchema that Gemini would reject or misread (empty list = safe)."""
    if not isinstance(schema, dict):
        return [f"{where}: not an object"]
    problems = [f"{where}: keyword {k!r} is not accepted by Gemini" for k in schema if k not in ALLOWED_KEYS]
    kind = schema.get("type")
    if root and kind != "object":
        problems.append(f"{where}: the root must have type 'object'")
    if not isinstance(kind, str):
        problems.append(f"{where}: every schema needs a single string 'type' (got {kind!r})")
    elif kind not in TYPES:
        problems.append(f"{where}: unknown type {kind!r}")
    if "enum" in schema:
        enum = schema["enum"]
        if kind != "string" or not isinstance(enum, list) or not all(isinstance(v, str) and v for v in enum):
            problems.append(f"{where}: enums must be non-empty strings on a string type")
    if "format" in schema and schema["format"] not in ("enum", "date-time"):
        problems.append(f"{where}: format {schema['format']!r} is refused by the Developer API")
    if "default" in schema and isinstance(kind, str) and kind in PYTHON_TYPES:
        value = schema["default"]
        if not isinstance(value, PYTHON_TYPES[kind]) or (kind != "boolean" and isinstance(value, bool)):
            problems.append(f"{where}: default {value!r} does not match type {kind!r}")
    if kind == "array":
        if not isinstance(schema.get("items"), dict):
            problems.append(f"{where}: arrays need 'items'")
        else:
            problems += gemini_problems(schema["items"], f"{where}.items", root=False)
    elif "items" in schema:
        problems.append(f"{where}: 'items' on a non-array")
    if kind == "object":
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            problems.append(f"{where}: 'properties' must be an object")
            props = {}
        if not root and not props:
            problems.append(f"{where}: nested objects need properties")
        for name, sub in props.items():
            if not NAME.match(name):
                problems.append(f"{where}: property name {name!r} is not a valid identifier")
            problems += gemini_problems(sub, f"{where}.properties.{name}", root=False)
        required = schema.get("required", [])
        if not isinstance(required, list) or any(r not in props for r in required):
            problems.append(f"{where}: 'required' names a property that does not exist")
    elif "properties" in schema or "required" in schema:
        problems.append(f"{where}: 'properties'/'required' on a non-object")
    return problems


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    root = tmp_path_factory.mktemp("schemas")
    out = subprocess.run(
        [sys.executable, "-m", "coretools", "tools", "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    tools = json.loads(out.stdout)["tools"]
    assert tools, "no tool is published"
    return tools


@pytest.fixture(scope="module")
def published_latest(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    root = tmp_path_factory.mktemp("schemas-latest")
    out = subprocess.run(
        [sys.executable, "-m", "coretools", "tools", "--root", str(root), "--schema-dialect", "latest"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)["tools"]


# -- the checker itself can fail -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema,needle",
    [
        ({"properties": {}}, "root must have type 'object'"),
        ({"type": "object", "properties": {"a": {"description": "untyped"}}}, "single string 'type'"),
        ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, "single string 'type'"),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "arrays need 'items'"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {}}, "'$ref'"),
        ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}, "'anyOf'"),
        ({"type": "object", "properties": {"a": {"type": "string", "const": "x"}}}, "'const'"),
        ({"type": "object", "properties": {}, "additionalProperties": False}, "'additionalProperties'"),
        ({"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}}}, "enums must be"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}, "format 'uri'"),
        ({"type": "object", "properties": {}, "required": ["x"]}, "'required' names"),
        ({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}, "default 'yes'"),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, "nested objects need properties"),
        ({"type": "object", "properties": {"bad-name": {"type": "string"}}}, "not a valid identifier"),
        ({"type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {}}, "'$schema'"),
    ],
)
def test_checker_catches(schema: dict, needle: str) -> None:
    assert any(needle in p for p in gemini_problems(schema)), gemini_problems(schema)


def test_checker_accepts_a_good_schema() -> None:
    good = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
            "b": {"type": "object", "properties": {"c": {"type": "boolean", "default": True}}},
            "d": {"type": "string", "enum": ["x", "y"]},
        },
        "required": ["a"],
    }
    assert gemini_problems(good) == []


# -- every published tool ------------------------------------------------------------------------------


def test_every_published_schema_is_gemini_safe(published: list[dict]) -> None:
    problems = {t["name"]: gemini_problems(t["inputSchema"]) for t in published}
    assert {name: p for name, p in problems.items() if p} == {}


def test_the_latest_dialect_is_gemini_safe_and_speaks_the_newest_names(published_latest: list[dict]) -> None:
    from google.genai import types as gtypes

    problems = {t["name"]: gemini_problems(t["inputSchema"]) for t in published_latest}
    assert {name: p for name, p in problems.items() if p} == {}
    for tool in published_latest:
        gtypes.Schema.model_validate(tool["inputSchema"])
    by_name = {t["name"]: t["inputSchema"] for t in published_latest}
    assert by_name["read_file"]["required"] == ["file_path"]
    assert set(by_name["read_file"]["properties"]) == {"file_path", "start_line", "end_line"}
    assert by_name["list_directory"]["required"] == ["dir_path"]
    assert "dir_path" in by_name["glob"]["properties"] and "respect_gemini_ignore" in by_name["glob"]["properties"]
    assert by_name["read_many_files"]["required"] == ["include"]
    # Gemini CLI 0.61's core set has these two; the other opt-in tools stay opt-in in every dialect
    assert by_name["list_background_processes"]["properties"] == {}
    assert by_name["read_background_output"]["required"] == ["pid"]
    assert not {"write_background_input", "stop_background_process", "edit_file", "apply_patch"} & set(by_name)


def test_every_published_schema_parses_as_a_genai_schema(published: list[dict]) -> None:
    from google.genai import types as gtypes

    for tool in published:
        gtypes.Schema.model_validate(tool["inputSchema"])  # extra keys are refused by the SDK model
        gtypes.FunctionDeclaration(name=tool["name"], description=tool["description"])


def test_every_tool_has_name_title_description_and_honest_annotations(published: list[dict]) -> None:
    names = [t["name"] for t in published]
    assert len(names) == len(set(names))
    for tool in published:
        assert TOOL_NAME.match(tool["name"]), tool["name"]
        assert tool.get("title"), tool["name"]
        assert len(tool.get("description", "")) > 40, tool["name"]
        notes = tool.get("annotations") or {}
        assert notes.get("title"), tool["name"]
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert isinstance(notes.get(hint), bool), (tool["name"], hint)
        if notes["readOnlyHint"]:
            assert notes["destructiveHint"] is False, tool["name"]


def test_read_side_tools_are_published_read_only_and_closed_world(published: list[dict]) -> None:
    by_name = {t["name"]: t for t in published}
    for name in ("read_file", "list_directory", "glob", "read_many_files"):
        notes = by_name[name]["annotations"]
        assert notes["readOnlyHint"] is True and notes["openWorldHint"] is False, name


def test_read_side_schemas_match_the_legacy_parameter_names(published: list[dict]) -> None:
    by_name = {t["name"]: t["inputSchema"] for t in published}
    expected = {
        "read_file": ({"absolute_path", "offset", "limit"}, ["absolute_path"]),
        "list_directory": ({"path", "ignore", "file_filtering_options"}, ["path"]),
        "glob": ({"pattern", "path", "case_sensitive", "respect_git_ignore"}, ["pattern"]),
        "read_many_files": (
            {"paths", "include", "exclude", "recursive", "useDefaultExcludes", "respect_git_ignore"},
            ["paths"],
        ),
    }
    for name, (props, required) in expected.items():
        assert set(by_name[name]["properties"]) == props, name
        assert by_name[name]["required"] == required, name
    ffo = by_name["list_directory"]["properties"]["file_filtering_options"]["properties"]
    assert set(ffo) == {"respect_git_ignore", "respect_gemini_ignore"}


# -- argument validation -------------------------------------------------------------------------------


def problems_of(result) -> list[str]:
    lines = text_of(result).splitlines()
    return [line[2:] for line in lines[1:] if line.startswith("- ")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "tool,args,needle",
    [
        ("read_file", {}, "params must have required property 'absolute_path'"),
        ("read_file", {"absolute_path": "x", "offset": -1}, "params/offset must be >= 0"),
        ("read_file", {"absolute_path": "x", "limit": 0}, "params/limit must be >= 1"),
        ("read_file", {"absolute_path": "x", "limit": "ten"}, "params/limit must be an integer"),
        ("read_file", {"absolute_path": 7}, "params/absolute_path must be a string"),
        ("list_directory", {}, "params must have required property 'path'"),
        ("list_directory", {"path": ".", " ignore": []}, "unknown parameter ' ignore'"),
        ("list_directory", {"path": ".", "ignore": "*.py"}, "params/ignore must be an array"),
        ("list_directory", {"path": ".", "ignore": [3]}, "params/ignore/0 must be a string"),
        (
            "list_directory",
            {"path": ".", "file_filtering_options": {"respect_git_ignore": "no"}},
            "params/file_filtering_options/respect_git_ignore must be a boolean",
        ),
        (
            "list_directory",
            {"path": ".", "file_filtering_options": {"respect_gitignore": False}},
            "did you mean 'respect_git_ignore'",
        ),
        ("glob", {}, "params must have required property 'pattern'"),
        ("glob", {"pattern": "*", "case_sensitive": "yes"}, "params/case_sensitive must be a boolean"),
        ("glob", {"pattern": ["*"]}, "params/pattern must be a string"),
        ("glob", {"pattern": "*", "dir_pth": "."}, "unknown parameter 'dir_pth' (did you mean 'dir_path'?)"),
        ("read_many_files", {}, "params must have required property 'paths'"),
        ("read_many_files", {"paths": []}, "params/paths must NOT have fewer than 1 items"),
        ("read_many_files", {"paths": [""]}, "params/paths/0 must NOT have fewer than 1 characters"),
        ("read_many_files", {"paths": "src"}, "params/paths must be an array"),
        ("read_many_files", {"paths": ["a"], "exclude": [1]}, "params/exclude/0 must be a string"),
        ("read_many_files", {"paths": ["a"], "recursive": 1}, "params/recursive must be a boolean"),
        ("read_many_files", {"paths": ["a"], "use_default_excludes": False}, "did you mean 'useDefaultExcludes'"),
    ],
)
async def test_read_side_parameter_rules(root: Path, tool: str, args: dict, needle: str) -> None:
    result = await call_tool(root, tool, args)
    assert result.is_error
    assert result.structured["error"]["kind"] == "invalid_tool_params"
    assert any(needle in p for p in problems_of(result)), problems_of(result)


@pytest.mark.anyio
async def test_all_violations_in_one_result(root: Path) -> None:
    result = await call_tool(root, "read_file", {"offset": -3, "limit": "many", "lmit": 2, "absolute_pth": "x"})
    assert result.is_error
    text = text_of(result)
    assert text.splitlines()[0] == "Invalid parameters for read_file:"
    got = problems_of(result)
    assert "params must have required property 'absolute_path' (or its newer name 'file_path')" in got
    assert "params/offset must be >= 0" in got
    assert any(p.startswith("params/limit must be an integer") for p in got)
    unknown = [p for p in got if "unknown parameter" in p]
    assert len(unknown) == 1
    assert "'absolute_pth' (did you mean 'absolute_path'?)" in unknown[0]
    assert "'lmit' (did you mean 'limit'?)" in unknown[0]
    assert "known parameters: absolute_path, limit, offset" in unknown[0]
    assert result.structured["error"]["kind"] == "invalid_tool_params"
    assert len(result.content) == 1


@pytest.mark.anyio
async def test_wrong_type_names_expected_and_actual(root: Path) -> None:
    result = await call_tool(root, "glob", {"pattern": 5, "case_sensitive": None})
    got = problems_of(result)
    assert "params/pattern must be a string (got integer)" in got
    assert "params/case_sensitive must be a boolean (got null)" in got


@pytest.mark.anyio
async def test_nested_violations_name_the_full_path(root: Path) -> None:
    result = await call_tool(
        root, "list_directory", {"path": ".", "ignore": ["ok", 2], "file_filtering_options": {"respect_git_ignore": 1}}
    )
    got = problems_of(result)
    assert "params/ignore/1 must be a string (got integer)" in got
    assert "params/file_filtering_options/respect_git_ignore must be a boolean (got integer)" in got


@pytest.mark.anyio
async def test_unknown_parameter_without_a_close_match_lists_known_ones(root: Path) -> None:
    result = await call_tool(root, "glob", {"pattern": "*", "zzzz": 1})
    (problem,) = problems_of(result)
    assert problem == (
        "params has unknown parameter 'zzzz'; known parameters: case_sensitive, path, pattern, respect_git_ignore"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", [[1, 2], "read", 3, True])
async def test_non_object_arguments(root: Path, arguments: Any) -> None:
    result = await call_tool(root, "read_file", arguments)
    assert result.is_error
    assert problems_of(result) == ["params must be an object"]


@pytest.mark.anyio
async def test_missing_arguments_count_as_empty_object(root: Path) -> None:
    result = await call_tool(root, "read_file", None)
    assert problems_of(result) == ["params must have required property 'absolute_path' (or its newer name 'file_path')"]


@pytest.mark.anyio
async def test_integral_floats_are_accepted_as_integers(root: Path) -> None:
    (root / "f.txt").write_text("".join(f"{i}\n" for i in range(10)))
    result = await call_tool(root, "read_file", {"absolute_path": "f.txt", "offset": 2.0, "limit": 3.0})
    assert not result.is_error, text_of(result)
    assert text_of(result).endswith("2\n3\n4")
    assert "use offset: 5." in text_of(result)  # an int, not 5.0
    fractional = await call_tool(root, "read_file", {"absolute_path": "f.txt", "limit": 1.5})
    assert any(p.startswith("params/limit must be an integer") for p in problems_of(fractional))


@pytest.mark.anyio
async def test_booleans_are_not_integers(root: Path) -> None:
    result = await call_tool(root, "read_file", {"absolute_path": "f.txt", "limit": True})
    assert any(p.startswith("params/limit must be an integer") for p in problems_of(result))


@pytest.mark.anyio
async def test_schema_defaults_are_applied_before_run(root: Path) -> None:
    (root / "A.TXT").write_text("x")
    # case_sensitive defaults to false: a lower-case pattern finds the upper-case name.
    result = await call_tool(root, "glob", {"pattern": "*.txt"})
    assert str(root / "A.TXT") in text_of(result)
