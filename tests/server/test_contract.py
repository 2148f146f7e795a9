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
from coretools.tools.base import Tool, ToolResource, ToolResult, option, options_from
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


def test_every_tool_option_is_declared_once_in_its_field() -> None:
    """The flag, its help and its default are the field's: the parser is built from the fields, and no tool
    registers flags by hand."""
    parser = argparse.ArgumentParser()
    add_tool_arguments(parser)
    by_flag = {flag: action for action in parser._actions for flag in action.option_strings}
    for cls in option_classes():
        for f in dataclasses.fields(cls):
            assert f.metadata.get("flag") and f.metadata.get("help"), f"{cls.__name__}.{f.name} declares no flag"
            action = by_flag[f.metadata["flag"]]
            assert action.dest == f.name and action.help == f.metadata["help"], f.name
            assert action.default == (list(f.default) if isinstance(f.default, tuple) else f.default), f.name
    assert not any(hasattr(cls, "add_arguments") for cls in tool_classes())


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


# -- a new tool is its module and nothing else ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
    probe_prefix: str = option(">", "--probe-prefix", "what the probe tool puts before its text", metavar="TEXT")


class Probe(Tool):
    """A tool written the way the README's "Adding a tool" says, known to no other module."""

    name = "probe_tool"
    title = "Probe"
    description = "Repeats its text."
    hint = "repeat a text."
    input_schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    Options = ProbeOptions
    narrowing = "ask the probe for a shorter text"

    def resources(self) -> list[ToolResource]:
        return [ToolResource(Path("/probe/notes.md"), "Probe notes", "What the probe noted.", "text/markdown",
                             lambda limit: (b"noted", 5))]  # fmt: skip

    async def run(self, args: dict, ctx) -> ToolResult:  # noqa: ANN001
        if not args["text"]:
            raise ToolError("Parameter 'text' is empty; give the text to repeat.", ErrorKind.INVALID_TOOL_PARAMS)
        return ToolResult.text(self.options.probe_prefix + args["text"])


@pytest.fixture
def probe_module(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    import sys
    import types as pytypes

    import coretools.tools

    module = pytypes.ModuleType("coretools.tools.probe_tool")
    module.TOOL = Probe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(coretools.tools, "TOOL_MODULES", (*coretools.tools.TOOL_MODULES, "probe_tool"))
    return module


async def test_a_tool_module_alone_gives_its_flag_listing_call_narrowing_and_resources(
    root: Path, probe_module  # noqa: ANN001
) -> None:
    from coretools.cli import build_parser
    from coretools.sandbox.gateway import Workspace
    from coretools.tools.base import ToolContext

    argv = ["serve", "--root", str(root), "--probe-prefix", ">>", "--max-result-chars", "300"]
    parsed = build_parser(with_client=False).parse_args(argv)
    config = ServerConfig.from_namespace(parsed, roots=[str(root)], tool_options=tool_options(parsed))
    toolset = ToolSet(config)
    assert "probe_tool" in toolset.names and "- probe_tool: repeat a text." in instructions(toolset)
    ctx = ToolContext(workspace=Workspace([str(root)]))
    assert (await toolset.call("probe_tool", {"text": "hi"}, ctx)).text_content == ">>hi"
    cut = (await toolset.call("probe_tool", {"text": "x" * 1000}, ctx)).text_content
    assert len(cut) <= 300 and cut.endswith("To see the rest, ask the probe for a shorter text.]")
    refused = await toolset.call("probe_tool", {"text": ""}, ctx)
    assert refused.is_error and refused.text_content.startswith("Parameter 'text' is empty")
    assert [r.title for r in toolset.resources()][-1] == "Probe notes"
