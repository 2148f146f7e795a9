"""Project-discovered tools: a real discovery command and call command (bash scripts), published over MCP,
called with JSON on stdin, failures reported, unsafe schemas and name collisions refused, bounds applied."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from coretools.tools.discovered import schema_problems
from coretools.sandbox.process_groups import is_alive
from tests.conftest import call_tool, connect, make_config, text_of

pytestmark = pytest.mark.anyio

DECLARATIONS = [
    {"name": "add", "description": "Adds two numbers.",
     "parameters": {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}, "b": {"type": "INTEGER"}},
                    "required": ["a", "b"]}},
    {"functionDeclarations": [{"name": "fail", "description": "Always fails."},
                              {"name": "hang", "description": "Never returns."},
                              {"name": "where", "description": "Prints its directory."}]},
    {"name": "read_file", "description": "Collides with a core tool."},
    {"name": "unsafe", "parametersJsonSchema": {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}},
    {"name": "add", "description": "A second add."},
    {"name": "bad name!"},
]  # fmt: skip

CALL = r"""#!/bin/bash
input=$(cat)
case "$1" in
  add) python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["a"] + d["b"])' "$input" ;;
  fail) echo "partial"; echo "it broke: $input" >&2; exit 3 ;;
  hang) sleep 60 & echo $! > hang.pid; sleep 60 ;;
  where) pwd ;;
esac
"""


def script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def flags(tmp_path: Path) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    decls = bin_dir / "decls.json"
    decls.write_text(json.dumps(DECLARATIONS))
    discover = script(bin_dir / "discover.sh", f"#!/bin/bash\ncat {decls}\n")
    call = script(bin_dir / "call.sh", CALL)
    return ["--discovery-command", discover, "--call-command", call]


def test_published_and_refused(root: Path, flags: list[str]) -> None:
    from coretools.server.toolset import ToolSet

    toolset = ToolSet(make_config([root], *flags))
    assert [n for n in toolset.names if n in ("add", "fail", "hang", "where", "unsafe")] == ["add", "fail", "hang", "where"]
    assert "collides with the core tool read_file" in toolset.unavailable["discovered:read_file"]
    assert "type lists" in toolset.unavailable["discovered:unsafe"]
    assert "declared twice" in toolset.unavailable["discovered:add"]
    assert "not a valid tool name" in toolset.unavailable["discovered:bad name!"]
    add = toolset.get("add")
    assert add.input_schema["properties"]["a"] == {"type": "integer"}
    assert "Adds two numbers." in add.description and "defined by the project" in add.description


async def test_call_over_mcp(root: Path, flags: list[str], mode: str) -> None:
    async with connect([root], mode, *flags) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert {"add", "fail", "read_file"} <= set(names)
        result = await client.call_tool("add", {"a": 2, "b": 40})
        assert not result.is_error and text_of(result) == "42"
        invalid = await client.call_tool("add", {"a": "two"})
        assert invalid.is_error and "params/a" in text_of(invalid)


async def test_failure_reports_stdout_stderr_and_exit_code(root: Path, flags: list[str]) -> None:
    result = await call_tool(root, "fail", {}, *flags)
    assert result.is_error and result.structured["error"]["kind"] == "discovered_tool_execution_error"
    text = text_of(result)
    assert "Stdout: partial" in text and "Stderr: it broke: {}" in text and "Exit Code: 3" in text
    assert "Signal: (none)" in text and "Error: (none)" in text


async def test_runs_in_the_primary_root(root: Path, flags: list[str]) -> None:
    assert text_of(await call_tool(root, "where", {}, *flags)).strip() == str(root)


async def test_timeout_kills_the_whole_group(root: Path, flags: list[str]) -> None:
    # Landlock, not bubblewrap: the pid the script writes is a host pid, and the signal is reported as such.
    result = await call_tool(root, "hang", {}, *flags, "--shell-timeout", "0.5", "--shell-sandbox", "landlock")
    assert result.is_error and "wall-clock limit" in text_of(result) and "Signal: 15 (SIGTERM)" in text_of(result)
    assert not is_alive(int((root / "hang.pid").read_text()))


def test_failing_discovery_is_reported(root: Path, tmp_path: Path) -> None:
    from coretools.server.toolset import ToolSet

    bad = script(tmp_path / "bad.sh", "#!/bin/bash\necho 'not json'\n")
    toolset = ToolSet(make_config([root], "--discovery-command", bad, "--call-command", "true"))
    assert "did not print JSON" in toolset.unavailable["discovered:*"]
    crash = script(tmp_path / "crash.sh", "#!/bin/bash\necho boom >&2; exit 7\n")
    toolset = ToolSet(make_config([root], "--discovery-command", crash, "--call-command", "true"))
    assert "exit code 7" in toolset.unavailable["discovered:*"] and "boom" in toolset.unavailable["discovered:*"]


def test_discovery_needs_call_command(root: Path) -> None:
    from coretools.server.toolset import ToolSet

    from coretools.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="--discovery-command and --call-command go together"):
        ToolSet(make_config([root], "--discovery-command", "true"))


@pytest.mark.parametrize(
    "schema,problem",
    [
        ({"type": "object", "properties": {"x": {}}}, "needs a type"),
        ({"type": "object", "properties": {"x": {"type": "array"}}}, "need 'items'"),
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/a", "type": "object"}}}, "'$ref'"),
        ({"type": "object", "additionalProperties": False, "properties": {}}, "additionalProperties"),
        ({"type": "object", "properties": {"x": {"type": "integer", "enum": [1, 2]}}}, "enum members"),
        ({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}], "type": "string"}}}, "'anyOf'"),
    ],
)
def test_schema_problems(schema: dict, problem: str) -> None:
    assert any(problem in p for p in schema_problems(schema))


def test_safe_schema_has_no_problems() -> None:
    from coretools.tools.run_shell_command import RunShellCommand

    assert schema_problems(RunShellCommand.input_schema) == []
