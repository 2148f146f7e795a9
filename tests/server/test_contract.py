"""The registry's contract with the server: the instructions name exactly the published tools (by their
hints), every tool option lives in a typed options class with the command line's default, and error kinds
reach clients as plain strings."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from coretools.errors import ErrorKind, ToolError
from coretools.server.app import instructions
from coretools.server.config import ServerConfig
from coretools.server.toolset import ToolSet, add_tool_arguments, option_classes, tool_classes, tool_options
from coretools.tools.base import ToolResult, options_from
from coretools.tools.run_shell_command import RunShellCommand
from tests.conftest import connect, make_config, server_options

pytestmark = pytest.mark.anyio


def test_every_tool_has_a_one_line_hint() -> None:
    for cls in tool_classes():
        assert cls.hint and "\n" not in cls.hint and cls.hint.endswith("."), cls.name


@pytest.mark.parametrize("flags", [(), ("--no-shell",)])
def test_a_hint_is_in_the_instructions_iff_its_tool_is_published(root: Path, flags: tuple[str, ...]) -> None:
    toolset = ToolSet(make_config([root], *flags))
    text = instructions(toolset)
    for cls in tool_classes():  # an instance may add to its class's hint (the shell names its sandbox)
        assert (f"- {cls.name}: {cls.hint.rstrip('.')}" in text) == (cls.name in toolset.names), cls.name
    assert ("run_shell_command" in text) == (not flags)


async def test_the_server_sends_the_registry_built_instructions(root: Path) -> None:
    async with connect([root], "legacy", "--no-shell") as client:
        assert client.instructions == instructions(ToolSet(make_config([root], "--no-shell")))
        assert RunShellCommand.hint not in client.instructions
        assert "read_file" in client.instructions


def test_every_tool_option_is_a_field_of_one_options_class() -> None:
    parser = argparse.ArgumentParser()
    add_tool_arguments(parser)
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    owners: dict[str, list[str]] = {}
    for cls in option_classes():
        for f in dataclasses.fields(cls):
            owners.setdefault(f.name, []).append(cls.__name__)
    assert dests == set(owners)
    defaults = parser.parse_args([])
    for cls in option_classes():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        assert options_from(cls, defaults) == cls(), f"{cls.__name__}: its defaults differ from the command line's"


def test_options_are_built_once_from_the_command_line(root: Path) -> None:
    config = make_config([root], "--shell-env", "A", "--shell-env", "B", "--search-engine", "python")
    toolset = ToolSet(config)
    shell = toolset.get("run_shell_command")
    assert shell is not None and shell.options is config.tool_options[RunShellCommand.Options]
    assert shell.options.shell_env == ("A", "B")
    assert toolset.get("write_file").options is toolset.get("replace").options  # one --confirm for both
    assert toolset.get("search_file_content").options.search_engine == "python"


def test_server_config_defaults_are_the_command_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORETOOLS_LOG_LEVEL", raising=False)
    parsed = server_options([])
    assert ServerConfig.from_namespace(parsed, roots=[], tool_options={}) == ServerConfig()
    assert tool_options(parsed).keys() == set(option_classes())


def test_error_kinds_reach_the_client_as_plain_strings() -> None:
    result = ToolResult.error("gone", ErrorKind.FILE_NOT_FOUND)
    kind = result.structured["error"]["kind"]
    assert type(kind) is str and kind == "file_not_found"
    sent = result.to_mcp(structured=True).model_dump(by_alias=True, exclude_none=True, mode="json")
    assert json.loads(json.dumps(sent))["structuredContent"]["error"] == {"kind": "file_not_found", "message": "gone"}
    assert ToolError("x").kind is ErrorKind.EXECUTION_FAILED
    assert f"{ErrorKind.CALL_TIMEOUT}" == str(ErrorKind.CALL_TIMEOUT) == "call_timeout"
    with pytest.raises(ValueError):
        ToolError("x", "no_such_kind")  # type: ignore[arg-type]


async def test_the_instructions_name_each_root_and_the_primary_one(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    async with connect([first, second], "legacy") as client:
        text = client.instructions
    assert f"Workspace roots: {first} (primary), {second}." in text
    assert f"Relative paths resolve against {first};" in text
    assert ".gitignore" in text and ".env" in text and "--allow-protected" not in text


def test_without_operator_roots_the_instructions_say_where_the_workspace_comes_from() -> None:
    text = instructions(ToolSet(make_config([])))
    assert "roots your client offers" in text and "Workspace root" not in text
