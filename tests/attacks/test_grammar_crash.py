"""Inputs that crash a tree-sitter grammar must not crash the server.

tree-sitter-bash 0.25.1's external scanner passes the lookahead code point to `isdigit`, which indexes a
table of 384 entries: a `{` followed by a code point above U+FFFF reads far past it and, depending on
where the loader put things, dies of SIGSEGV (tree-sitter/tree-sitter-bash#337; about half of the
processes on this machine). Both of our grammar users meet text a steered model chooses: the shell policy
parses every command, and the edit syntax note parses a `.sh` (or JS, TS, Go, Rust) file after a write.
A crash there ends the server for every client, so each case runs in a real server subprocess, many code
points per process, and the server must still answer afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support import stdio_params, text_of

pytestmark = pytest.mark.anyio

# Code points spread over the supplementary planes: one process meets tables at many distances.
HIGH = [chr(cp) for cp in range(0x10000, 0x110000, 0x8011) if not 0xD800 <= cp < 0xE000]
PROBES = [f"A{{{c}@" for c in HIGH] + [f"{{{c}" for c in HIGH[::3]]


# A child process runs every probe through both grammar users. Whether a probe crashes depends on the
# process's layout: without the ASCII view, 5 of 6 children died here, so 5 children miss it about once in
# 8,000 runs.
PROCESSES = 5
CHILD = """
import sys
from coretools.sandbox.shell_policy import ShellPolicy
from coretools.tools.textedit import syntax_note
policy = ShellPolicy.from_prefixes(["echo"], None)
probes = sys.stdin.read().split("\\n")
for probe in probes:
    assert policy.check("echo " + probe) == [["echo", probe]], probe
for suffix in ("sh", "js", "ts", "tsx", "go", "rs"):
    for probe in probes:
        syntax_note("x." + suffix, "", probe + "\\n")
print("survived", len(probes))
"""


def test_grammar_crashers_do_not_kill_the_process_that_checks_them() -> None:
    import subprocess

    for _ in range(PROCESSES):
        done = subprocess.run([sys.executable, "-c", CHILD], input="\n".join(PROBES), capture_output=True,
                              text=True, timeout=60, env={"PYTHONPATH": str(Path(__file__).parents[2])})  # fmt: skip
        assert done.returncode == 0, f"the checking process died ({done.returncode}): {done.stderr[-2000:]}"
        assert done.stdout.strip() == f"survived {len(PROBES)}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _still_answers(client, root: Path) -> None:
    probe = root / "alive.txt"
    probe.write_text("still serving\n")
    result = await client.call_tool("read_file", {"absolute_path": str(probe)})
    assert not result.is_error and "still serving" in text_of(result)


async def test_a_server_checks_grammar_crashers_and_keeps_serving(tmp_path: Path) -> None:
    """What a steered model would send: the commands, and a script that holds them."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    params = stdio_params([tmp_path], "--allow-command", "echo", forked=True)
    target = tmp_path / "script.sh"
    async with Client(stdio_client(params, errlog=sys.stderr), mode="legacy") as client:
        for command in PROBES:
            result = await client.call_tool("run_shell_command", {"command": f"echo {command}"})
            assert not result.is_error, text_of(result)
            assert command in text_of(result)
        for i in range(0, len(PROBES), 8):
            content = "\n".join(PROBES[i : i + 8]) + "\n"
            result = await client.call_tool("write_file", {"file_path": str(target), "content": content})
            assert not result.is_error, text_of(result)
            assert target.read_text() == content
        await _still_answers(client, tmp_path)
