"""The optional `undo` tool: off by default, published with --undo-tool, and undoing write_file and replace
through a real MCP client."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coretools.server.toolset import ToolSet
from tests.conftest import connect, make_config, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(tmp_path / "state"))


def test_off_by_default_and_published_with_the_flag(root: Path) -> None:
    plain = ToolSet(make_config([root]))
    assert "undo" not in plain.names and "--undo-tool" in plain.unavailable["undo"]
    on = ToolSet(make_config([root], "--undo-tool"))
    [definition] = [d for d in on.definitions() if d.name == "undo"]
    assert definition.annotations.read_only_hint is False and definition.annotations.destructive_hint is True
    assert definition.input_schema["required"] == ["file_path"]
    off = ToolSet(make_config([root], "--undo-tool", "--no-journal"))
    assert "undo" not in off.names and "--no-journal" in off.unavailable["undo"]


async def test_undo_through_the_mcp_client(root: Path) -> None:
    f = root / "app.py"
    async with connect([root], "legacy", "--undo-tool") as client:
        made = await client.call_tool("write_file", {"file_path": str(f), "content": "a = 1\n"})
        assert not made.is_error, text_of(made)
        changed = await client.call_tool("replace", {"file_path": str(f), "old_string": "1", "new_string": "2"})
        assert not changed.is_error and f.read_text() == "a = 2\n"

        undone = await client.call_tool("undo", {"file_path": str(f)})
        assert not undone.is_error and "Undid edit 2" in text_of(undone) and f.read_text() == "a = 1\n"
        redone = await client.call_tool("undo", {"file_path": str(f)})
        assert not redone.is_error and f.read_text() == "a = 2\n"

        first = await client.call_tool("undo", {"file_path": str(f), "edit_id": 1})
        assert not first.is_error and "removed" in text_of(first) and not f.exists()


async def test_undo_tool_refuses_when_the_file_changed_since(root: Path) -> None:
    f = root / "a.txt"
    f.write_text("one\n")
    async with connect([root], "legacy", "--undo-tool") as client:
        done = await client.call_tool("replace", {"file_path": str(f), "old_string": "one", "new_string": "two"})
        assert not done.is_error, text_of(done)
        f.write_text("three\n")
        refused = await client.call_tool("undo", {"file_path": str(f)})
        assert refused.is_error and "changed since" in text_of(refused) and f.read_text() == "three\n"
        nothing = await client.call_tool("undo", {"file_path": str(root / "never-edited")})
        assert nothing.is_error and "nothing to undo" in text_of(nothing)
    assert os.listdir(root) == ["a.txt"]
