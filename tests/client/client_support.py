"""Helpers for the client bridge tests (a module name no other test directory uses).

Paths and config entries for the test MCP servers, the command line of the client's CLI, a liveness probe
by PID, and independent checkers of the two schema profiles (written from the rules, not from the
sanitiser's code).

The servers and CLI runs these tests start are forked by default (`server_fork`): each would otherwise spend
~1.8 s of CPU importing the MCP SDK before it does anything. A test about a server's process itself (its PID,
its process group, its end when the bridge stops) asks for the interpreter; the servers that import nothing
(`broken`, `raw_server.py`) start as fast as a launcher does, and are not forked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import server_fork
from google.genai import types as genai_types
from mcp.client.stdio import get_default_environment

HERE = Path(__file__).resolve().parent
TOY_SERVER = HERE / "servers" / "toy_server.py"
BROKEN_SERVER = HERE / "servers" / "broken_server.py"
RAW_SERVER = HERE / "servers" / "raw_server.py"
DATA = HERE / "data"


def _load_toy_module() -> Any:
    spec = importlib.util.spec_from_file_location("client_toy_server", TOY_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOY_PNG = _load_toy_module().PNG_1X1
"""The base64 PNG the toy server's ``image`` tool returns."""


RUNNER = """
import argparse, sys
from coretools.client.cli import register
parser = argparse.ArgumentParser(prog="coretools-mcp")
register(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""
"""The client's CLI, mounted on a throwaway parser exactly as the main CLI mounts it (`python -c RUNNER`)."""


def python_server(argv: list[str], *, forked: bool = True, **entry: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry that runs ``python *argv``. Forked, the launcher is computed for the
    environment the bridge gives a server (the SDK's default one plus the entry's ``env``), the one the
    fork server has to match; ``forked=False`` for a test about the server's own process."""
    if not forked:
        return {"command": sys.executable, "args": argv, **entry}
    command, *args = server_fork.command(argv, get_default_environment() | entry.get("env", {}))
    return {"command": command, "args": args, **entry}


def forked_python(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The command line of ``python *argv``, forked, for a process started with ``env`` (by default this
    process's environment, as `subprocess` passes it on)."""
    return server_fork.command(argv, dict(os.environ) if env is None else env)


def cli_command(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    """The command line of ``coretools-mcp ARGV`` (RUNNER), forked, for a process started with ``env``."""
    return forked_python(["-c", RUNNER, *argv], env)


def toy(name: str, *extra: str, forked: bool = True, **entry: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry that starts the toy server under ``name``."""
    return python_server([str(TOY_SERVER), "--name", name, *extra], forked=forked, **entry)


def broken(variable: str = "TOY_TOKEN_THAT_IS_NEVER_SET") -> dict[str, Any]:
    """A server that writes a reason to stderr and exits with code 3 before the handshake."""
    return {"command": sys.executable, "args": [str(BROKEN_SERVER), variable]}


def write_config(directory: Path, servers: dict[str, Any], key: str = "mcpServers") -> Path:
    path = directory / "mcp.json"
    path.write_text(json.dumps({key: servers}), encoding="utf-8")
    return path


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (zombies are dead but not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            state = file.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ------------------------------------------------------------------------- schema profile checkers

SUBSCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_ONE = ("items", "not", "contains", "propertyNames", "if", "then", "else", "additionalItems",
                 "unevaluatedItems", "additionalProperties", "unevaluatedProperties")  # fmt: skip


def schema_nodes(node: Any, path: str = "#"):
    """Every schema-position dict below ``node`` (property *names* are not schema positions)."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key in SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield from schema_nodes(sub, f"{path}/{key}/{name}")
    for key in SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield from schema_nodes(sub, f"{path}/{key}/{i}")
    for key in SUBSCHEMA_ONE:
        yield from schema_nodes(node.get(key), f"{path}/{key}")


def check_json_profile(out: Any) -> None:
    assert isinstance(out, dict)
    json.dumps(out, allow_nan=False)
    assert out["type"] == "object" and isinstance(out["properties"], dict)
    for path, node in schema_nodes(out):
        for banned in ("$ref", "$defs", "definitions", "$schema", "$id", "$comment"):
            assert banned not in node, f"{banned} at {path}"
        assert not isinstance(node.get("type"), list), f"type list at {path}"
        if "type" in node:
            assert isinstance(node["type"], str), path
        if "required" in node:
            required = node["required"]
            assert required and len(set(required)) == len(required), path
            assert all(isinstance(r, str) and r in node.get("properties", {}) for r in required), path
        if ("properties" in node or "required" in node) and "type" not in node:
            assert "anyOf" in node, f"object keywords without type at {path}"
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), f"array without items at {path}"
        if "nullable" in node:
            assert node["nullable"] is True, path


OPENAPI_KEYS = {"type", "format", "title", "description", "nullable", "enum", "properties", "required", "items",
                "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
                "minProperties", "maxProperties", "anyOf", "propertyOrdering", "default", "example"}  # fmt: skip
OPENAPI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def check_openapi_profile(out: Any) -> None:
    if out is None:
        return
    json.dumps(out, allow_nan=False)
    assert out["type"] == "object" and out["properties"]
    stack = [("#", out)]
    while stack:
        path, node = stack.pop()
        assert isinstance(node, dict) and set(node) <= OPENAPI_KEYS, f"{path}: {set(node) - OPENAPI_KEYS}"
        if "anyOf" in node:
            assert set(node) <= {"anyOf", "title", "description", "nullable"}, path
            assert len(node["anyOf"]) >= 2, path
            stack += [(f"{path}/anyOf/{i}", b) for i, b in enumerate(node["anyOf"])]
            continue
        kind = node.get("type")
        assert kind in OPENAPI_TYPES, f"{path}: type {kind!r}"
        if "enum" in node:
            assert kind == "string" and node["enum"], path
            assert all(isinstance(m, str) and m for m in node["enum"]), path
        if kind == "object":
            assert isinstance(node.get("properties"), dict) and node["properties"], f"{path}: empty object"
            assert all(r in node["properties"] for r in node.get("required", [])), path
            stack += [(f"{path}/properties/{k}", v) for k, v in node["properties"].items()]
        else:
            assert not {"properties", "required", "propertyOrdering", "minProperties", "maxProperties"} & set(node), path
        if kind == "array":
            assert isinstance(node.get("items"), dict), path
            stack.append((f"{path}/items", node["items"]))
        else:
            assert not {"items", "minItems", "maxItems"} & set(node), path
        if kind != "string":
            assert not {"minLength", "maxLength", "pattern"} & set(node), path
        if kind not in ("number", "integer"):
            assert not {"minimum", "maximum"} & set(node), path
        if "format" in node:
            allowed = {"enum", "date-time"} if kind == "string" else {"float", "double", "int32", "int64"}
            assert node["format"] in allowed, path
        for key in ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"):
            if key in node:
                assert type(node[key]) is int and node[key] >= 0, path
        for key in ("minimum", "maximum"):
            if key in node:
                assert isinstance(node[key], (int, float)) and not isinstance(node[key], bool), path
        if "nullable" in node:
            assert node["nullable"] is True, path
        for key in ("title", "description", "pattern"):
            if key in node:
                assert isinstance(node[key], str), path
    # google-genai's Schema model forbids unknown fields: the SDK itself accepts the result.
    genai_types.Schema.model_validate(out)
