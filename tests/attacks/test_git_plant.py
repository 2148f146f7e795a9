"""Host-side code planted through git: a command leaves a setting that git runs later, outside any sandbox.

The exploit: a command (even in bubblewrap, which keeps every existing repository's `.git/config` and hooks
read-only) creates a nested repository with `core.fsmonitor` set and `git add`s it as a gitlink; the user's
next `git status` in the outer repository runs it on the host. Every plant goes through a real stdio server,
with each sandbox, and the result must name the file, the key and when git would run it (the structured
content's `git_programs` too); a harmless change, or a setting that was already there, must not be named. A
background command's warning ends its log, or its result when it finished within the delay.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from coretools.sandbox.landlock import landlock_problem
from sandbox_probe import namespaces_forbidden
from support import stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SETUP_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
             "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # fmt: skip
WARNING = "Warning: this command changed git settings that run programs on the host"
ID = "-c user.name=t -c user.email=t@example.invalid"  # commands commit without relying on any identity
FORBIDDEN = namespaces_forbidden()
NO_LANDLOCK = landlock_problem(network=False) if sys.platform == "linux" else "Linux only"


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=SETUP_ENV, capture_output=True, text=True, check=False)


@pytest.fixture
def repo(root: Path) -> Path:
    """The user's repository, with one commit."""
    git(root, "init", "-q", "-b", "main")
    (root / "f").write_text("hello\n")
    git(root, "add", "f")
    git(root, "commit", "-qm", "one")
    return root


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "MARKER"


@asynccontextmanager
async def server(root: Path, tmp_path: Path, *flags: str) -> AsyncIterator:
    from mcp import Client
    from mcp.client.stdio import stdio_client

    with (tmp_path / "stderr.log").open("w") as errlog:
        params = stdio_params([root], "--structured-content", *flags, forked=True)
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            yield client


async def run(client, command: str, **args):
    result = await client.call_tool("run_shell_command", {"command": command, **args})
    return result, text_of(result)


def programs(result) -> list[dict]:
    return (result.structured_content or {}).get("git_programs", [])


def named(result, text: str, file: Path, key: str, when: str) -> None:
    """The warning's line for `key` in `file` says when it runs; the structured list has it too."""
    lines = [line for line in text.splitlines() if line.startswith(f"- {file}: ") and f" {key}" in line]
    assert lines and when in lines[0], text
    assert any(p["file"] == str(file) and p["key"] == key and when in p["runs"] for p in programs(result)), text


SANDBOXES = [
    "none",
    pytest.param("bwrap", marks=pytest.mark.skipif(FORBIDDEN is not None, reason=f"no namespaces: {FORBIDDEN}")),
    pytest.param("landlock", marks=pytest.mark.skipif(NO_LANDLOCK is not None, reason=f"{NO_LANDLOCK}")),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_nested_repository_with_fsmonitor_added_as_a_gitlink(repo: Path, marker: Path, tmp_path: Path,
                                                                    sandbox: str) -> None:  # fmt: skip
    plant = (f"git init -q sub && git -C sub config core.fsmonitor 'touch {marker}; false' && "
             f"git -C sub {ID} commit -q --allow-empty -m x && git add sub 2>/dev/null; echo planted")  # fmt: skip
    async with server(repo, tmp_path, "--shell-sandbox", sandbox) as client:
        result, text = await run(client, plant)
        assert "planted" in text and WARNING in text
        named(result, text, repo / "sub" / ".git" / "config", "core.fsmonitor", "runs on `git status`")
        assert f"from {repo} when it tracks {repo / 'sub'} as a submodule" in text
        _, again = await run(client, "echo quiet")
        assert WARNING not in again, again  # the setting was there before this command
    assert "sub" in git(repo, "ls-files", "--stage").stdout
    git(repo, "status", "--short")
    assert marker.exists()  # what the warning is about: the user's own `git status` runs it on the host


PLANTS = [  # what a command runs, and the file, key and "when" its warning names
    ("git config core.hooksPath .hk", ".git/config", "core.hookspath", "runs its hooks (on `git commit`"),
    ("git config alias.st '!touch M'", ".git/config", "alias.st", "runs on `git st`"),
    ("git config filter.lfs2.clean 'touch M' && echo '* filter=lfs2' > .gitattributes", ".git/config",
     "filter.lfs2.clean", "runs on `git add`, `git status`"),
    ("git config diff.external 'touch M'", ".git/config", "diff.external", "runs on `git diff`"),
    ("git config credential.helper '!touch M'", ".git/config", "credential.helper", "over http(s)"),
    ("printf '#!/bin/sh\\ntouch M\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
     ".git/hooks/pre-commit", "hook pre-commit", "runs on `git commit`"),
    ("printf '[core]\\n\\tpager = touch M; cat\\n' > inc.cfg && git config includeIf.gitdir:/.path ../inc.cfg",
     "inc.cfg", "core.pager", "runs when git pages its output"),
    ("git init -q --bare b.git && git -C b.git config uploadpack.packObjectsHook 'touch M'", "b.git/config",
     "uploadpack.packobjectshook", "when another repository fetches from this one"),
    ("git init -q --separate-git-dir=gd w && git -C w config core.sshCommand 'touch M'", "gd/config",
     "core.sshcommand", "over ssh"),
    ("printf '#!/bin/sh\\ntouch M\\n' > .hk/post-checkout && chmod +x .hk/post-checkout",
     ".hk/post-checkout", "hook post-checkout", "runs on `git checkout`"),
]  # fmt: skip


async def test_each_kind_of_planted_setting_is_named(repo: Path, tmp_path: Path) -> None:
    """One server, one root: each command's result names what that command planted, and only that."""
    (repo / ".hk").mkdir()
    async with server(repo, tmp_path, "--shell-sandbox", "none") as client:
        for command, file, key, when in PLANTS:
            result, text = await run(client, command)
            assert WARNING in text, text
            named(result, text, repo / file, key, when)
            if key == "core.pager":
                named(result, text, repo / ".git" / "config", "includeif.gitdir:/.path", "brings in that file's")
            assert len(programs(result)) == (2 if key == "core.pager" else 1), text


async def test_harmless_and_unchanged_settings_are_not_named(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "core.fsmonitor", "exit 1")
    git(repo, "config", "alias.lg", "!git log --oneline")
    async with server(repo, tmp_path, "--shell-sandbox", "none") as client:
        for command in ("git config user.name Someone", "git config core.fsmonitor false",
                        "git config alias.co checkout", "git config pager.log false",
                        f"git {ID} commit -qam two --allow-empty", "git status --short"):  # fmt: skip
            result, text = await run(client, command)
            assert WARNING not in text and not programs(result), (command, text)
        result, text = await run(client, "git config alias.lg '!touch M'")
    named(result, text, repo / ".git" / "config", "alias.lg", "runs on `git lg`")


async def test_a_background_command_ends_its_log_with_the_warning(repo: Path, tmp_path: Path) -> None:
    command = "sleep 1; git init -q late && git -C late config alias.x '!touch M'; echo planted"
    async with server(repo, tmp_path, "--shell-sandbox", "none") as client:
        result, text = await run(client, command, is_background=True, delay_ms=0)
        assert WARNING not in text, text
        log = Path(result.structured_content["log_path"])
        with anyio.fail_after(30):
            while "[coretools: Warning" not in log.read_text():
                await anyio.sleep(0.05)
        ending = log.read_text()
        assert ending.index("planted") < ending.index("exited with code 0") < ending.index(WARNING)
        assert f"- {repo / 'late' / '.git' / 'config'}: alias.x = \"!touch M\": runs on `git x`" in ending
        result, text = await run(client, "git init -q soon && git -C soon config core.editor vi",
                                 is_background=True, delay_ms=30_000)  # fmt: skip
    assert "Exit Code: 0" in text  # finished within the delay: the normal result, with the warning
    named(result, text, repo / "soon" / ".git" / "config", "core.editor", "opens an editor")


@pytest.mark.skipif(NO_LANDLOCK is not None, reason=f"{NO_LANDLOCK}")
async def test_under_landlock_the_root_config_is_writable_and_its_change_is_named(repo: Path, tmp_path: Path) -> None:
    """Landlock grants by hierarchy: `.git/config` inside a writable root stays writable, so the warning is
    what stands between a planted `core.hooksPath` and the user's next commit."""
    async with server(repo, tmp_path, "--shell-sandbox", "landlock") as client:
        result, text = await run(client, "mkdir .hk && git config core.hooksPath .hk && echo rc=$?")
    assert "rc=0" in text, text
    named(result, text, repo / ".git" / "config", "core.hookspath", "runs its hooks (on `git commit`")


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux only")
@pytest.mark.skipif(FORBIDDEN is not None, reason=f"no namespaces: {FORBIDDEN}")
async def test_under_bubblewrap_what_stays_writable_is_named(repo: Path, tmp_path: Path) -> None:
    """The root's configuration is read-only there, but a new repository is not, and neither is a hook
    that the user's own `core.hooksPath` keeps in the working tree (as husky does)."""
    hooks = repo / ".githooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-commit").chmod(0o755)
    git(repo, "config", "core.hooksPath", ".githooks")
    async with server(repo, tmp_path, "--shell-sandbox", "bwrap") as client:
        _, refused = await run(client, "git config core.hooksPath .hk; echo rc=$?")
        result, text = await run(client, "mkdir -p a/b && cd a/b && git init -q && git config alias.x '!touch M'")
        hook, hooked = await run(client, "printf '#!/bin/sh\\ntouch M\\n' > .githooks/pre-commit")
    assert "rc=0" not in refused and WARNING not in refused, refused
    named(result, text, repo / "a" / "b" / ".git" / "config", "alias.x", "runs on `git x`")
    named(hook, hooked, hooks / "pre-commit", "hook pre-commit", "runs on `git commit`")
