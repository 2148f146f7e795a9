"""Test helpers shared by the server-side suites (imported as `support`, a name no other test directory
uses, so a second `conftest.py` elsewhere can never shadow it).

`call_tool(root, name, args)` runs a tool exactly as the server would (validation, sandbox, formatting)
without a transport; `connect(roots, mode)` gives an official MCP `Client` connected in memory to a fresh
server in one protocol era (`legacy` = the 2025-11-25 handshake every host speaks, `auto` = 2026-07-28);
`stdio_params` starts a real subprocess server.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from coretools.cli import build_parser

REPO = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=4)
def _parser(environment: frozenset[tuple[str, str]]) -> argparse.ArgumentParser:
    """The CLI's parser, built once per environment (some defaults come from environment variables):
    building it costs more than most tool calls."""
    return build_parser()


def server_options(roots: list[Path], *extra: str) -> argparse.Namespace:
    """Parse server options exactly as the CLI does (so tool-registered options get their defaults)."""
    argv = ["serve"]
    for r in roots:
        argv += ["--root", str(r)]
    environment = frozenset((k, v) for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST")
    parsed = _parser(environment).parse_args([*argv, *extra])
    return copy.deepcopy(parsed)  # no two results share a default's list


def make_config(roots: list[Path], *extra: str):
    """The `ServerConfig` of `coretools-mcp serve --root ... *extra`, tool options included."""
    from coretools.sandbox.gateway import Workspace
    from coretools.server.config import ServerConfig
    from coretools.server.toolset import tool_options

    ns = server_options(roots, *extra)
    checked = [Workspace.check_root(r, allow_broad=True) for r in ns.roots]
    return ServerConfig.from_namespace(ns, roots=checked, tool_options=tool_options(ns))


def make_tool(cls, roots: list[Path], *extra: str):  # noqa: ANN001 - a Tool subclass
    """One tool built with the options of `coretools-mcp serve --root ... *extra`, as the registry builds it."""
    return cls(make_config(roots, *extra).tool_options[cls.Options])


class ToolSession:
    """One configuration's tool set and workspace, kept for many calls through ToolSet.call (the server's
    path): `async with ToolSession(root) as tools: await tools.call("replace", file_path=...)`."""

    def __init__(self, roots: Path | list[Path], *extra: str) -> None:
        self.roots = roots if isinstance(roots, list) else [roots]
        self.extra = extra

    async def __aenter__(self) -> ToolSession:  # noqa: PYI034
        from coretools.server.toolset import ToolSet
        from coretools.workspace.hints import HintedWorkspace

        config = make_config(self.roots, *self.extra)
        self.toolset = ToolSet(config)
        await self.toolset.start()
        self.ws = HintedWorkspace(config.roots, allow_protected=config.allow_protected)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            self.ws.close()
        finally:
            await self.toolset.aclose()

    async def call(self, tool: str, /, **args):
        return await self.send(tool, args)

    async def send(self, tool: str, arguments: object):
        """One call with `arguments` as given (not necessarily an object: bad input is tested too)."""
        from coretools.tools.base import ToolContext

        return await self.toolset.call(tool, arguments, ToolContext(workspace=self.ws))


async def call_tool(roots: Path | list[Path], name: str, args: dict, *extra: str):
    """Run one tool through ToolSet.call (same path as the server); returns a ToolResult."""
    async with ToolSession(roots, *extra) as tools:
        return await tools.send(name, args)


@asynccontextmanager
async def connect(roots: list[Path], mode: str, *extra: str, **client_kwargs) -> AsyncIterator:
    """An official MCP client connected in memory to a fresh coretools server."""
    from mcp import Client

    from coretools.server.app import build_server

    server, _ = build_server(make_config(roots, *extra))
    async with Client(server, mode=mode, **client_kwargs) as client:
        yield client


def stdio_params(roots: list[Path], *extra: str, env: dict | None = None, forked: bool = False):
    """`python -m coretools serve --root ... *extra` for the official stdio client. `forked`: the server is
    forked from one that has imported coretools already (`server_fork`), for the tests that only speak to
    it; a test that looks at the server's process (its PID, memory, parent) starts the interpreter."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import get_default_environment

    args = ["-m", "coretools", "serve"]
    for r in roots:
        args += ["--root", str(r)]
    # The SDK's client gives a server only its default environment: the run's private state directory
    # (conftest's `private_state_dir`) is passed on by name, so no test server journals into the user's own.
    state = {"CORETOOLS_STATE_DIR": os.environ["CORETOOLS_STATE_DIR"]} if "CORETOOLS_STATE_DIR" in os.environ else {}
    merged = {"PYTHONPATH": str(REPO), **state, **(env or {})}
    argv = [*args, *extra]
    if forked:
        import server_fork

        command, *argv = server_fork.command(argv, get_default_environment() | merged)
        return StdioServerParameters(command=command, args=argv, env=merged, cwd=str(REPO))
    return StdioServerParameters(command=sys.executable, args=argv, env=merged, cwd=str(REPO))


def text_of(result) -> str:
    """All text blocks of a ToolResult or CallToolResult, joined."""
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


def snapshot(path: Path) -> dict[str, bytes | str]:
    """Every file (bytes) and link (target) below `path`, to prove nothing outside the roots changed."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                out[rel] = "-> " + os.readlink(full)
            elif os.path.isfile(full):
                out[rel] = Path(full).read_bytes()
            else:
                out[rel] = "<dir>"
    return out


def linked_files(paths: Iterable[Path], content: str | bytes = b"") -> None:
    """A file at the first of `paths` holding `content`, and a hard link to it at each other path (their
    directories must exist): to a tool that lists, reads or searches them they are that many files with that
    content, made at a fraction of the cost (a new inode can cost a loaded machine's file system a
    millisecond of system CPU, ten times a link's)."""
    paths = iter(paths)
    first = next(paths)
    first.write_bytes(content.encode() if isinstance(content, str) else content)
    for path in paths:
        os.link(first, path)
