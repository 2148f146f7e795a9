"""Client roots only narrow: a client that offers `.git` (or a path inside it) as a root gets no write
access to what runs later on the host (hooks, config), whether or not the operator gave `--root`.

Protection is decided from the operator's roots: a client root that lies inside a protected path of an
operator root is refused (one log line) and the call falls back to the operator's roots, where `.git`
stays protected. Each test drives the official MCP client (2025-era connection, which has roots) and
asserts on the files, not on the wording.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from mcp import types

from support import connect, text_of

pytestmark = pytest.mark.anyio

HOOK = "#!/bin/sh\ntouch /tmp/coretools-pwned\n"
CONFIG_LINE = "[core]\n\tfsmonitor = touch /tmp/coretools-pwned\n"


def roots_callback(paths: list[Path]):
    async def list_roots(ctx) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in paths])

    return list_roots


@pytest.fixture
def repo(root: Path) -> Path:
    git = root / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "config").write_text("[core]\n\tbare = false\n")
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "src.txt").write_text("source\n")
    return root


def untouched(repo: Path) -> None:
    git = repo / ".git"
    assert not (git / "hooks" / "pre-commit").exists()
    assert (git / "config").read_text() == "[core]\n\tbare = false\n"
    assert not (git / "hooks" / "hooks").exists()


async def attack(client, target: Path, relative: list[str]) -> list[str]:
    """Try every way of naming the hook and the config; return the texts of the answers."""
    texts = []
    calls = [
        ("write_file", {"file_path": str(target / "hooks" / "pre-commit"), "content": HOOK}),
        ("write_file", {"file_path": str(target / "config"), "content": CONFIG_LINE}),
        ("replace", {"file_path": str(target / "config"), "old_string": "bare = false", "new_string": "fsmonitor = x"}),
    ]
    for rel in relative:
        calls.append(("write_file", {"file_path": f"{rel}hooks/pre-commit", "content": HOOK}))
        calls.append(("write_file", {"file_path": f"{rel}config", "content": CONFIG_LINE}))
    for name, args in calls:
        texts.append(text_of(await client.call_tool(name, args)))
    return texts


@pytest.mark.parametrize("client_root", [".git", ".git/hooks", "gitlink"])
async def test_client_root_inside_git_narrowing_a_root(repo: Path, client_root: str, caplog) -> None:
    if client_root == "gitlink":
        os.symlink(".git", repo / "gitlink")
    target = repo / ".git"
    with caplog.at_level(logging.WARNING, logger="coretools"):
        async with connect([repo], "legacy", list_roots_callback=roots_callback([repo / client_root])) as client:
            await attack(client, target, ["", "./", "hooks/../"])
            listing = await client.call_tool("list_directory", {"path": str(repo)})
    untouched(repo)
    assert not listing.is_error and "src.txt" in text_of(listing), "the operator's root is still served"
    refused = [r for r in caplog.records if "client root" in r.getMessage()]
    assert len(refused) == 1 and "protected path" in refused[0].getMessage(), [r.getMessage() for r in caplog.records]


async def test_client_root_inside_git_without_operator_roots(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is served instead: not the refused root, and not the server's current directory either."""
    target = repo / ".git"
    monkeypatch.chdir(repo)
    async with connect([], "legacy", list_roots_callback=roots_callback([target])) as client:
        texts = await attack(client, target, ["", "./"])
    untouched(repo)
    assert not (repo / "hooks").exists() and not (repo / "config").exists()
    assert all("No workspace" in t for t in texts), texts


async def test_client_root_beside_git_keeps_git_protected(repo: Path) -> None:
    """A legitimate narrowing (to the repository itself) serves files but still refuses `.git`."""
    async with connect([repo.parent], "legacy", list_roots_callback=roots_callback([repo])) as client:
        texts = await attack(client, repo / ".git", [".git/"])
        ok = await client.call_tool("read_file", {"absolute_path": str(repo / "src.txt")})
    untouched(repo)
    assert all("protected" in t for t in texts)
    assert text_of(ok) == "source"
