"""save_memory: appends under '## Gemini Added Memories' of the memory file, atomically, without losing any
of many concurrent saves (threads of one server and separate processes). Every test points --memory-file at
a temporary path and HOME at a temporary directory: the real ~/.gemini is never touched."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from coretools.sandbox import memory_file
from coretools.sandbox.memory_file import HEADER, sanitize, with_fact
from tests.conftest import REPO, call_tool, connect, make_config, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fake_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def mem(tmp_path) -> Path:
    return tmp_path / "cfg" / "nested" / "GEMINI.md"


async def save(root, mem: Path, fact: str):
    return await call_tool(root, "save_memory", {"fact": fact}, "--memory-file", str(mem))


async def test_creates_file_and_section(root, mem):
    res = await save(root, mem, "My favourite colour is green.")
    assert not res.is_error, text_of(res)
    assert mem.read_text() == f"{HEADER}\n- My favourite colour is green.\n"
    assert text_of(res) == f'Okay, I\'ve remembered that: "My favourite colour is green." (saved in {mem}).'
    assert res.structured == {"success": True, "message": 'Okay, I\'ve remembered that: "My favourite colour is green."',
                              "file": str(mem)}


async def test_appends_to_existing_section_before_the_next_one(root, mem):
    mem.parent.mkdir(parents=True)
    mem.write_text(f"# Project notes\n\nUse tabs.\n\n{HEADER}\n- first fact\n\n\n## Other\nkeep me\n")
    await save(root, mem, "second fact")
    assert mem.read_text() == (
        f"# Project notes\n\nUse tabs.\n\n{HEADER}\n- first fact\n- second fact\n\n## Other\nkeep me\n"
    )


@pytest.mark.parametrize(
    "before, after",
    [
        ("", f"{HEADER}\n- f\n"),
        ("notes", f"notes\n\n{HEADER}\n- f\n"),
        ("notes\n", f"notes\n\n{HEADER}\n- f\n"),
        ("notes\n\n", f"notes\n\n{HEADER}\n- f\n"),
        (f"{HEADER}", f"{HEADER}\n- f\n"),
        (f"{HEADER}\n- a", f"{HEADER}\n- a\n- f\n"),
        (f"x\n{HEADER}\n- a\n### sub stays inside\n- b\n", f"x\n{HEADER}\n- a\n### sub stays inside\n- b\n- f\n"),
        ("## Gemini Added Memories Extra\n", f"## Gemini Added Memories Extra\n\n{HEADER}\n- f\n"),
    ],
)
def test_with_fact(before, after):
    assert with_fact(before, "f") == after


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("  plain fact  ", "plain fact"),
        ("- - bullet fact", "bullet fact"),
        ("--no space", "no space"),
        ("* starred fact", "starred fact"),
        ("*emphasis* stays", "*emphasis* stays"),
        ("line one\nline two\r\nline three", "line one line two line three"),
        ("uses <script>alert(1)</script> tags", "uses script alert(1) /script tags"),
        ("sep\u2028arated\u2029by\x0bodd\x0cbreaks\x85too", "sep arated by odd breaks too"),
        ("fact\n## Not a header", "fact ## Not a header"),
        ("tab\tand\x00nul", "tab and nul"),
        ("caf\u00e9 \u2615 \U0001f389", "caf\u00e9 \u2615 \U0001f389"),
    ],
)
def test_sanitize(raw, clean):
    assert sanitize(raw) == clean


async def test_sanitised_fact_is_one_line_in_the_file(root, mem):
    await save(root, mem, "first line\n## Injected Section\n- injected item")
    lines = mem.read_text().splitlines()
    assert lines == [HEADER, "- first line ## Injected Section - injected item"]


@pytest.mark.parametrize("fact", ["", "   ", "\n - \n", "<>"])
async def test_empty_fact_is_refused(root, mem, fact):
    res = await save(root, mem, fact)
    assert res.is_error and res.structured["error"]["kind"] == "invalid_tool_params"
    assert 'Parameter "fact" must be a non-empty string' in text_of(res)
    assert not mem.exists()


async def test_many_concurrent_saves_all_land(root, mem):
    from coretools.server.toolset import ToolSet
    from coretools.sandbox.gateway import Workspace
    from coretools.tools.base import ToolContext

    config = make_config([root], "--memory-file", str(mem))
    toolset = ToolSet(config)
    ws = Workspace(config.roots)
    results = []

    async def one(i: int) -> None:
        results.append(await toolset.call("save_memory", {"fact": f"fact number {i}"}, ToolContext(ws)))

    try:
        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(one, i)
    finally:
        ws.close()
    assert all(not r.is_error for r in results)
    lines = mem.read_text().splitlines()
    assert lines[0] == HEADER
    assert sorted(lines[1:]) == sorted(f"- fact number {i}" for i in range(60))
    assert [p.name for p in mem.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_concurrent_saves_from_several_processes_all_land(mem):
    script = (
        "import sys\nfrom pathlib import Path\nfrom coretools.sandbox.memory_file import append_fact\n"
        "for i in range(25):\n    append_fact(Path(sys.argv[1]), f'proc {sys.argv[2]} fact {i}')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(mem), str(n)], env=env, cwd=REPO) for n in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    lines = mem.read_text().splitlines()
    assert lines[0] == HEADER and len(lines) == 101
    assert set(lines[1:]) == {f"- proc {n} fact {i}" for n in range(4) for i in range(25)}


async def test_symlinked_memory_file_is_updated_at_its_target(root, mem, tmp_path):
    real = tmp_path / "dotfiles" / "GEMINI.md"
    real.parent.mkdir()
    real.write_text("# mine\n")
    os.chmod(real, 0o640)
    mem.parent.mkdir(parents=True)
    mem.symlink_to(real)
    res = await save(root, mem, "linked")
    assert not res.is_error, text_of(res)
    assert mem.is_symlink()
    assert real.read_text() == f"# mine\n\n{HEADER}\n- linked\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # permissions kept across the atomic replace


async def test_unwritable_location_is_a_clear_error(root, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    res = await save(root, blocker / "GEMINI.md", "fact")
    text = text_of(res)
    assert res.is_error and res.structured["error"]["kind"] == "memory_tool_execution_error"
    assert text.startswith("Failed to save memory. Detail: ")
    assert "--memory-file" in text


async def test_default_location_is_under_home(root, fake_home):
    res = await call_tool(root, "save_memory", {"fact": "default place"})
    assert not res.is_error, text_of(res)
    path = fake_home / ".gemini" / "GEMINI.md"
    assert path.read_text() == f"{HEADER}\n- default place\n"
    assert "(saved in ~/.gemini/GEMINI.md)" in text_of(res)
    assert memory_file.default_path() == path


async def test_memory_file_is_outside_the_workspace_and_roots_untouched(root, mem, tmp_path):
    from tests.conftest import snapshot

    before = snapshot(tmp_path / "root-evil"), snapshot(root)
    await save(root, mem, "x")
    assert (snapshot(tmp_path / "root-evil"), snapshot(root)) == before


async def test_published_over_mcp(root, mode, mem):
    async with connect([root], mode, "--memory-file", str(mem)) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["save_memory"]
        assert tool.input_schema["required"] == ["fact"]
        assert tool.annotations.read_only_hint is False and tool.annotations.destructive_hint is False
        result = await client.call_tool("save_memory", {"fact": "via mcp"})
        assert not result.is_error
        bad = await client.call_tool("save_memory", {"fact": "x", "scope": "project"})
        assert bad.is_error
    assert mem.read_text() == f"{HEADER}\n- via mcp\n"


async def test_a_long_fact_is_refused_before_anything_is_written(root, mem):
    from coretools.tools.save_memory import MAX_FACT_CHARS

    res = await save(root, mem, "x" * (MAX_FACT_CHARS + 1))
    text = text_of(res)
    assert res.is_error and res.structured["error"]["kind"] == "invalid_tool_params"
    assert f"is {MAX_FACT_CHARS + 1:,} characters" in text and f"at most {MAX_FACT_CHARS:,}" in text
    assert "sentence or two" in text
    assert not mem.exists()
    longest = await save(root, mem, "y" * MAX_FACT_CHARS)
    assert not longest.is_error, text_of(longest)
    assert mem.read_text() == f"{HEADER}\n- {'y' * MAX_FACT_CHARS}\n"


async def test_a_save_that_would_make_the_file_too_large_is_refused(root, mem):
    limit = memory_file.MAX_FILE_BYTES
    mem.parent.mkdir(parents=True)
    almost = f"{HEADER}\n" + "- an old fact\n" * ((limit - 100) // 14)
    mem.write_text(almost)
    size = mem.stat().st_size
    fits = await save(root, mem, "z" * (limit - size - 3))  # "- " and "\n"
    assert not fits.is_error, text_of(fits)
    assert mem.stat().st_size == limit
    full = mem.read_bytes()
    res = await save(root, mem, "one more")
    text = text_of(res)
    assert res.is_error and res.structured["error"]["kind"] == "memory_tool_execution_error"
    assert f"would be {limit + 11:,} bytes with this fact, over the limit of {limit:,} bytes" in text
    assert "trim it" in text and HEADER in text and "--memory-file" in text
    assert mem.read_bytes() == full


async def test_a_memory_file_over_the_limit_is_not_read_whole(root, mem):
    mem.parent.mkdir(parents=True)
    with mem.open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB of NULs the save would have decoded
    res = await save(root, mem, "fact")
    text = text_of(res)
    assert res.is_error and f"is {50 * 1024 * 1024:,} bytes, over the limit" in text, text
    assert mem.stat().st_size == 50 * 1024 * 1024
    assert [p.name for p in mem.parent.iterdir() if p.name.endswith(".tmp")] == []
