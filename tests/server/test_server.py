"""The MCP layer: both protocol eras in memory, a real stdio subprocess, a raw JSON-RPC session whose
stdout must hold nothing else, errors, progress, cancellation and client roots."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, types
from mcp.client.stdio import stdio_client

from coretools import __version__
from coretools.sandbox import walker as walk_mod
from tests.conftest import REPO, connect, stdio_params, text_of

pytestmark = pytest.mark.anyio

READ_SIDE = {"read_file", "list_directory", "glob", "read_many_files"}


def make_tree(base: Path, dirs: int, files_per_dir: int) -> int:
    for d in range(dirs):
        sub = base / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(files_per_dir):
            (sub / f"f{f:04d}.txt").touch()
    return dirs * files_per_dir


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding 1500 files in 30 directories (made once: creating files is the slow part)."""
    base = tmp_path_factory.mktemp("big")
    make_tree(base / "tree", 30, 50)
    (base / "note.txt").write_text("alive\n")
    return base


async def eventually(check, timeout: float = 10.0) -> None:
    """Wait until `check()` is true (notifications over a transport can trail the result)."""
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.02)


# -- handshake and listing -----------------------------------------------------------------------------


async def test_identity_instructions_and_tools(root: Path, mode: str) -> None:
    async with connect([root], mode) as client:
        assert client.server_info.name == "coretools"
        assert client.server_info.version == __version__
        assert "read_file" in client.instructions and "workspace" in client.instructions
        listed = (await client.list_tools()).tools
        by_name = {t.name: t for t in listed}
        assert READ_SIDE <= set(by_name)
        for tool in listed:
            assert tool.title and tool.description
            assert tool.input_schema["type"] == "object"
            assert tool.annotations is not None and tool.annotations.read_only_hint is not None
        assert by_name["read_file"].annotations.read_only_hint is True


async def test_invalid_cursor_is_a_protocol_error(root: Path) -> None:
    async with connect([root], "legacy") as client:
        with pytest.raises(MCPError) as err:
            await client.list_tools(cursor="page-2")
        assert err.value.code == types.INVALID_PARAMS


# -- calls ---------------------------------------------------------------------------------------------


async def test_read_side_tools_work_in_both_eras(root: Path, mode: str) -> None:
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    async with connect([root], mode) as client:
        read = await client.call_tool("read_file", {"absolute_path": str(root / "src/main.py")})
        assert not read.is_error and text_of(read) == "print('hi')"
        image = await client.call_tool("read_file", {"absolute_path": "logo.png"})
        blocks = [b for b in image.content if isinstance(b, types.ImageContent)]
        assert base64.b64decode(blocks[0].data) == b"\x89PNG\r\n\x1a\nfake"
        listing = await client.call_tool("list_directory", {"path": str(root)})
        assert "[DIR] src" in text_of(listing)
        found = await client.call_tool("glob", {"pattern": "**/*.py"})
        assert str(root / "src/main.py") in text_of(found)
        many = await client.call_tool("read_many_files", {"paths": ["src"]})
        assert f"--- {root / 'src/main.py'} ---" in text_of(many)


async def test_tool_error_is_an_iserror_result_with_kind(root: Path, mode: str) -> None:
    async with connect([root], mode, "--structured-content") as client:
        result = await client.call_tool("read_file", {"absolute_path": "missing.txt"})
        assert result.is_error
        assert text_of(result) == f"File not found: {root / 'missing.txt'}"
        assert result.structured_content["error"]["kind"] == "file_not_found"


async def test_results_carry_no_structured_content_unless_asked(root: Path, mode: str) -> None:
    """Claude Code and VS Code give the model a result's structuredContent instead of its text when it has
    one; ours holds fields (counts, kinds), not the answer, so it is only sent with --structured-content."""
    (root / "a.py").write_text("needle = 1\n")
    calls = [
        ("search_file_content", {"pattern": "needle"}),
        ("glob", {"pattern": "*.py"}),
        ("read_many_files", {"paths": ["a.py"]}),
        ("list_directory", {"path": str(root)}),
        ("read_file", {"absolute_path": "missing.txt"}),  # an error
    ]
    async with connect([root], mode) as plain, connect([root], mode, "--structured-content") as rich:
        for name, args in calls:
            bare, full = await plain.call_tool(name, args), await rich.call_tool(name, args)
            assert bare.structured_content is None, name
            assert isinstance(full.structured_content, dict), name
            assert text_of(bare) == text_of(full) and bare.is_error == full.is_error, name
        assert "needle = 1" in text_of(await plain.call_tool("search_file_content", {"pattern": "needle"}))


async def test_validation_errors_are_one_iserror_result(root: Path, mode: str) -> None:
    async with connect([root], mode) as client:
        result = await client.call_tool("read_file", {"absolute_path": 3, "limit": 0, "ofset": 1})
        assert result.is_error
        assert len(result.content) == 1
        text = text_of(result)
        assert text.startswith("Invalid parameters for read_file:")
        assert "params/absolute_path must be a string" in text
        assert "params/limit must be >= 1" in text
        assert "'ofset' (did you mean 'offset'?)" in text


async def test_integral_float_arguments_over_the_wire(root: Path, mode: str) -> None:
    (root / "f.txt").write_text("a\nb\nc\n")
    async with connect([root], mode) as client:
        result = await client.call_tool("read_file", {"absolute_path": "f.txt", "offset": 1.0, "limit": 1.0})
        assert not result.is_error and text_of(result).endswith("\nb")


async def test_unknown_tool_is_a_protocol_error_with_suggestion(root: Path, mode: str) -> None:
    async with connect([root], mode) as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("read_fil", {"absolute_path": "x"})
        assert err.value.code == types.INVALID_PARAMS
        assert 'Tool "read_fil" not found.' in err.value.message
        assert '"read_file"' in err.value.message and "Did you mean" in err.value.message
        with pytest.raises(MCPError) as err:
            await client.call_tool("zzzzzz", {})
        assert "Available tools:" in err.value.message and "list_directory" in err.value.message
        # The connection is still usable.
        assert (await client.list_tools()).tools


async def test_exception_inside_a_tool_becomes_iserror_without_traceback(
    root: Path, mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from coretools.tools.glob import Glob

    async def explode(self, args, ctx):
        raise RuntimeError("kaboom internal detail /etc/shadow")

    monkeypatch.setattr(Glob, "run", explode)
    (root / "a.txt").write_text("still here\n")
    async with connect([root], mode, "--structured-content") as client:
        result = await client.call_tool("glob", {"pattern": "*"})
        assert result.is_error
        text = text_of(result)
        assert "Internal error in glob (RuntimeError)" in text
        assert "Traceback" not in text and "kaboom" not in text and "/etc/shadow" not in text
        assert result.structured_content["error"]["kind"] == "unhandled_exception"
        again = await client.call_tool("read_file", {"absolute_path": "a.txt"})
        assert text_of(again) == "still here"
    assert "kaboom" in caplog.text  # the details go to the server log


# -- progress and cancellation -------------------------------------------------------------------------


def force_python_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """glob and read_many_files list files with `rg --files` when ripgrep runs; these tests are about the
    workspace walk they fall back to, so take ripgrep away from them."""
    monkeypatch.setattr("coretools.sandbox.walker.rg_files", lambda *args, **kwargs: None)


async def glob_with_progress(
    tree: Path, mode: str, monkeypatch: pytest.MonkeyPatch, expected: int
) -> list[tuple[float, float | None, str | None]]:
    """glob over the 1500-file tree with progress every 250 files; the notifications it sent."""
    monkeypatch.setattr("coretools.sandbox.walker.PROGRESS_EVERY", 250)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect([tree], mode) as client:
        result = await client.call_tool("glob", {"pattern": "tree/**/*.txt"}, progress_callback=on_progress)
        assert not result.is_error
        assert "Found 1500 file(s)" in text_of(result)
        await eventually(lambda: len(seen) >= expected)
    return seen


async def test_progress_notifications_from_a_long_walk(
    big_tree: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_python_walk(monkeypatch)
    seen = await glob_with_progress(big_tree, mode, monkeypatch, expected=6)
    values = [p for p, _, _ in seen]
    assert values == [250.0, 500.0, 750.0, 1000.0, 1250.0, 1500.0]
    assert all(msg and "walked" in msg for _, _, msg in seen)


async def test_progress_notifications_from_a_ripgrep_listing(
    big_tree: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coretools.sandbox.ripgrep import find_rg

    if find_rg() is None:
        pytest.skip("no ripgrep binary runs here")
    seen = await glob_with_progress(big_tree, mode, monkeypatch, expected=1)
    values = [p for p, _, _ in seen]
    assert values == sorted(set(values)) and values[0] >= 250
    assert all(msg and "found" in msg for _, _, msg in seen)


async def test_progress_from_read_many_files_has_a_total(root: Path) -> None:
    make_tree(root / "tree", 2, 60)
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with connect([root], "legacy") as client:
        result = await client.call_tool("read_many_files", {"paths": ["tree"]}, progress_callback=on_progress)
        assert not result.is_error
        await eventually(lambda: len(seen) >= 2)
    assert seen[:2] == [(50.0, 120.0), (100.0, 120.0)]


@pytest.fixture
def slow_walk(monkeypatch: pytest.MonkeyPatch):
    """Make every workspace walk slow (2 ms per file) and record how far it got and whether it ended."""
    force_python_walk(monkeypatch)
    state = {"yielded": 0, "finished": threading.Event(), "completed": False}
    original = walk_mod.walk

    def walk(*args, **kwargs):
        try:
            for entry in original(*args, **kwargs):
                state["yielded"] += 1
                time.sleep(0.002)
                yield entry
            state["completed"] = True
        finally:
            state["finished"].set()

    monkeypatch.setattr(walk_mod, "walk", walk)
    return state


@pytest.mark.parametrize("tool,args", [("glob", {"pattern": "**/*"}), ("read_many_files", {"paths": ["**/*.txt"]})])
async def test_cancellation_stops_the_walk_and_the_server_keeps_serving(
    big_tree: Path, mode: str, slow_walk: dict, tool: str, args: dict
) -> None:
    total = 1500  # about 3 s of walking at 2 ms a file
    async with connect([big_tree], mode) as client:
        with anyio.move_on_after(0.3) as scope:
            await client.call_tool(tool, args)
        assert scope.cancelled_caught, "the call finished before it could be cancelled"
        await eventually(slow_walk["finished"].is_set, timeout=15)
        assert not slow_walk["completed"]
        assert slow_walk["yielded"] < total
        stopped_at = slow_walk["yielded"]
        result = await client.call_tool("read_file", {"absolute_path": "note.txt"})
        assert text_of(result) == "alive"
    assert slow_walk["yielded"] == stopped_at  # nothing kept walking in the background


async def test_per_request_timeout_leaves_the_connection_usable(big_tree: Path, slow_walk: dict) -> None:
    async with connect([big_tree], "legacy") as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("glob", {"pattern": "**/*"}, read_timeout_seconds=0.3)
        assert err.value.code == types.REQUEST_TIMEOUT
        await eventually(slow_walk["finished"].is_set, timeout=15)
        assert not slow_walk["completed"]
        assert not (await client.call_tool("list_directory", {"path": "."})).is_error


# -- client roots (2025-era connections) ---------------------------------------------------------------


def roots_callback(current: list[Path]):
    async def list_roots(ctx) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in current])

    return list_roots


@pytest.fixture
def two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "alpha", tmp_path / "beta"
    for d in (a, b):
        d.mkdir()
        (d / f"{d.name}.txt").write_text(f"in {d.name}\n")
    return a, b


async def test_client_roots_become_the_workspace_without_root(two_dirs: tuple[Path, Path]) -> None:
    a, b = two_dirs
    async with connect([], "legacy", list_roots_callback=roots_callback([a])) as client:
        listing = await client.call_tool("list_directory", {"path": "."})
        assert f"Directory listing for {a}:" in text_of(listing)
        refused = await client.call_tool("read_file", {"absolute_path": str(b / "beta.txt")})
        assert refused.is_error and "Path not in workspace" in text_of(refused)
        assert "in beta" not in text_of(refused)


async def test_client_roots_narrow_configured_roots(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "in.txt").write_text("inside\n")
    (root / "top.txt").write_text("top\n")
    async with connect([root], "legacy", list_roots_callback=roots_callback([root / "sub"])) as client:
        assert text_of(await client.call_tool("read_file", {"absolute_path": str(root / "sub/in.txt")})) == "inside"
        refused = await client.call_tool("read_file", {"absolute_path": str(root / "top.txt")})
        assert refused.is_error and "Path not in workspace" in text_of(refused)


async def test_client_roots_never_widen_configured_roots(root: Path, two_dirs: tuple[Path, Path]) -> None:
    a, _ = two_dirs
    (root / "r.txt").write_text("configured\n")
    async with connect([root], "legacy", list_roots_callback=roots_callback([a])) as client:
        refused = await client.call_tool("read_file", {"absolute_path": str(a / "alpha.txt")})
        assert refused.is_error and "in alpha" not in text_of(refused)
        assert text_of(await client.call_tool("read_file", {"absolute_path": str(root / "r.txt")})) == "configured"
    # A client root that contains the configured root does not widen it either.
    async with connect([root], "legacy", list_roots_callback=roots_callback([root.parent])) as client:
        refused = await client.call_tool("read_file", {"absolute_path": str(root.parent / "root-evil/secret.txt")})
        assert refused.is_error and "DECOY" not in text_of(refused)
        assert not (await client.call_tool("read_file", {"absolute_path": str(root / "r.txt")})).is_error


async def test_roots_list_changed_rereads_the_roots(two_dirs: tuple[Path, Path]) -> None:
    a, b = two_dirs
    current = [a]
    async with connect([], "legacy", list_roots_callback=roots_callback(current)) as client:
        assert f"Directory listing for {a}:" in text_of(await client.call_tool("list_directory", {"path": "."}))
        current[:] = [b]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.send_roots_list_changed()

        switched = False
        with anyio.fail_after(10):
            while not switched:
                text = text_of(await client.call_tool("list_directory", {"path": "."}))
                switched = f"Directory listing for {b}:" in text
        refused = await client.call_tool("read_file", {"absolute_path": str(a / "alpha.txt")})
        assert refused.is_error


async def test_modern_era_uses_configured_roots(root: Path, two_dirs: tuple[Path, Path]) -> None:
    a, _ = two_dirs
    (root / "r.txt").write_text("configured\n")
    async with connect([root], "auto", list_roots_callback=roots_callback([a])) as client:
        assert text_of(await client.call_tool("read_file", {"absolute_path": "r.txt"})) == "configured"


# -- real subprocesses ---------------------------------------------------------------------------------


async def test_stdio_subprocess_session(root: Path, tmp_path: Path) -> None:
    (root / "hello.txt").write_text("over stdio\n")
    errlog = (tmp_path / "stderr.txt").open("w+")
    try:
        params = stdio_params([root], "--log-level", "debug")
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert client.server_info.version == __version__
            assert READ_SIDE <= {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("read_file", {"absolute_path": "hello.txt"})
            assert text_of(result) == "over stdio"
            bad = await client.call_tool("list_directory", {"path": "hello.txt"})
            assert bad.is_error and "Path is not a directory" in text_of(bad)
            with pytest.raises(MCPError):
                await client.call_tool("nope", {})
    finally:
        errlog.close()


def rpc(id_: int | None, method: str, params: dict | None = None) -> str:
    msg: dict = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        msg["id"] = id_
    if params is not None:
        msg["params"] = params
    return json.dumps(msg) + "\n"


def test_raw_stdio_stdout_carries_only_json_rpc(root: Path, tmp_path: Path) -> None:
    (root / "a.txt").write_text("raw\n")
    errlog = (tmp_path / "stderr.txt").open("w+")  # a file, so a chatty server never blocks on a full pipe
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "always"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "coretools", "--root", str(root), "--log-level", "debug"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        cwd=REPO,
        env=env,
        text=True,
    )
    killer = threading.Timer(60, proc.kill)
    killer.start()
    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        proc.stdin.write(rpc(1, "initialize", init))
        proc.stdin.flush()
        lines = [proc.stdout.readline()]
        proc.stdin.write(rpc(None, "notifications/initialized"))
        proc.stdin.write(rpc(2, "tools/list", {}))
        proc.stdin.write(rpc(3, "tools/call", {"name": "read_file", "arguments": {"absolute_path": "a.txt"}}))
        proc.stdin.write(rpc(4, "tools/call", {"name": "read_fiel", "arguments": {}}))
        proc.stdin.write(rpc(5, "tools/call", {"name": "read_file", "arguments": {"limit": -1}}))
        proc.stdin.write(rpc(6, "tools/call", {"name": "read_file", "arguments": {"absolute_path": "/etc/passwd"}}))
        proc.stdin.write("this is not json\n")
        proc.stdin.write(rpc(7, "ping"))
        proc.stdin.flush()
        answered: dict[int, dict] = {}
        while set(answered) != {2, 3, 4, 5, 6, 7}:  # the line that is not JSON gets no answer
            line = proc.stdout.readline()
            assert line, "server closed stdout early"
            lines.append(line)
            msg = json.loads(line)
            if "id" in msg and msg["id"] is not None:
                answered[msg["id"]] = msg
        answered[1] = json.loads(lines[0])
        proc.stdin.close()
        lines += proc.stdout.read().splitlines(keepends=True)
        proc.wait(timeout=30)
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
        errlog.seek(0)
        stderr = errlog.read()
        errlog.close()
    for line in lines:
        msg = json.loads(line)  # every stdout line is one JSON-RPC message
        assert msg.get("jsonrpc") == "2.0", line
    assert answered[1]["result"]["serverInfo"]["version"] == __version__
    assert READ_SIDE <= {t["name"] for t in answered[2]["result"]["tools"]}
    assert answered[3]["result"]["content"][0]["text"] == "raw"
    assert answered[4]["error"]["code"] == types.INVALID_PARAMS and "read_file" in answered[4]["error"]["message"]
    assert answered[5]["result"]["isError"] is True
    assert answered[6]["result"]["isError"] is True and "root:" not in json.dumps(answered[6])
    assert answered[7]["result"] == {}
    assert proc.returncode == 0
    assert "Traceback" not in stderr
