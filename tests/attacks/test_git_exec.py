"""The git class against real git, one defence at a time: the hardened environment on its own.

Every test here runs the tool under `--allow-command sh` with the command in a script file (`sh FILE`), so
the argument policy cannot see the git command and the environment is the hardened one: the repository
configuration, hooks or caller environment are planted directly (as if the model had found a way to write
them), and the only thing between them and a command running is `hardened_env.neutralise`. The marker file
must never appear. Each pinned key is checked against a repository-level value of the same key; keys that
cannot be pinned (diff.external, alias.*, filter drivers) are kept out of reach by the argument policy,
which test_shell_allowlist.py drives. Without an allowlist the environment is the operator's own. The OS
sandbox, a defence of its own, is off here (`--shell-sandbox none`): the hardened environment is judged alone.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from coretools.sandbox import hardened_env
from coretools.sandbox.hardened_env import neutralise
from coretools.sandbox.process_settings import ProcessSettings, child_env
from coretools.sandbox.runner import Runner
from support import call_tool, text_of

pytestmark = pytest.mark.anyio

SETUP_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
             "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=SETUP_ENV,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def append_config(repo: Path, text: str) -> None:
    with open(repo / ".git" / "config", "a") as f:
        f.write(text)


ENVIRONMENT_ALONE = ("--shell-sandbox", "none")


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "MARKER"


@pytest.fixture
def repo(root: Path) -> Path:
    git(root, "init", "-q", "-b", "main")
    (root / "f").write_text("hello word\n")
    git(root, "add", "f")
    git(root, "commit", "-qm", "one")
    return root


@pytest.fixture
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{name}_NAME", "Test Operator")
        monkeypatch.setenv(f"GIT_{name}_EMAIL", "operator@example.invalid")


async def shell(root: Path, command: str, **args):
    """Run `command` where the policy cannot see it, under an allowlist (so in the hardened environment)."""
    script = root.parent / "script.sh"
    script.write_text(command + "\n")
    result = await call_tool(root, "run_shell_command", {"command": f"sh {script}", **args}, "--allow-command", "sh",
                             *ENVIRONMENT_ALONE)  # fmt: skip
    return result, text_of(result)


@pytest.fixture
def http_401() -> Iterator[str]:
    """A server that asks for credentials, so git consults its credential helpers and askpass."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="x"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    finally:
        server.shutdown()
        server.server_close()


# -- repository configuration the model should never have been able to write ---------------------------------


async def test_fsmonitor_in_repo_config(repo: Path, marker: Path) -> None:
    append_config(repo, f"[core]\n\tfsmonitor = touch {marker}; false\n")
    result, text = await shell(repo, "git status --short")
    assert not marker.exists(), text
    assert result.structured["exit_code"] == 0


async def test_hook_in_default_directory(repo: Path, marker: Path, identity: None) -> None:
    executable(repo / ".git" / "hooks" / "pre-commit", f"#!/bin/sh\ntouch {marker}\n")
    result, text = await shell(repo, "git commit -q --allow-empty -m x")
    assert not marker.exists(), text
    assert result.structured["exit_code"] == 0, text


async def test_hooks_path_in_repo_config(repo: Path, marker: Path, identity: None) -> None:
    executable(repo.parent / "hk" / "pre-commit", f"#!/bin/sh\ntouch {marker}\n")
    append_config(repo, f"[core]\n\thooksPath = {repo.parent / 'hk'}\n")
    _, text = await shell(repo, "git commit -q --allow-empty -m x")
    assert not marker.exists(), text


async def test_pager_in_repo_config(repo: Path, marker: Path) -> None:
    append_config(repo, f"[core]\n\tpager = touch {marker}; cat\n[pager]\n\tgrep = touch {marker}; cat\n")
    _, text = await shell(repo, "git grep -O hello")
    assert not marker.exists(), text
    assert "hello word" in text  # the pager is cat


async def test_ssh_command_in_repo_config(repo: Path, marker: Path) -> None:
    append_config(repo, f"[core]\n\tsshCommand = touch {marker}; false\n")
    _, text = await shell(repo, "git ls-remote ssh://nohost.invalid/x")
    assert not marker.exists(), text


async def test_protocol_ext_allowed_in_repo_config(repo: Path, marker: Path) -> None:
    append_config(repo, "[protocol]\n\tallow = always\n[protocol \"ext\"]\n\tallow = always\n")
    _, text = await shell(repo, f"git ls-remote 'ext::sh -c touch% {marker}'")
    assert not marker.exists(), text
    assert "not allowed" in text


async def test_credential_helper_and_askpass_in_repo_config(repo: Path, marker: Path, http_401: str) -> None:
    helper = executable(repo.parent / "helper.sh", f"#!/bin/sh\ntouch {marker}\n")
    append_config(repo, f"[credential]\n\thelper = !touch {marker}\n[credential \"http://127.0.0.1\"]\n"
                  f"\thelper = {helper}\n[core]\n\taskPass = {helper}\n")  # fmt: skip
    _, text = await shell(repo, f"git ls-remote {http_401}")
    assert not marker.exists(), text


async def test_git_proxy_in_repo_config(repo: Path, marker: Path) -> None:
    proxy = executable(repo.parent / "proxy.sh", f"#!/bin/sh\ntouch {marker}\n")
    append_config(repo, f"[core]\n\tgitProxy = {proxy}\n")
    _, text = await shell(repo, "git ls-remote git://127.0.0.1:1/x")
    assert not marker.exists(), text


@pytest.mark.parametrize("fmt,key", [("openpgp", "gpg.program"), ("openpgp", "gpg.openpgp.program"),
                                     ("x509", "gpg.x509.program"), ("ssh", "gpg.ssh.program"),
                                     ("ssh", "gpg.ssh.defaultKeyCommand")])  # fmt: skip
async def test_signing_programs_in_repo_config(repo: Path, marker: Path, identity: None, fmt: str, key: str) -> None:
    program = executable(repo.parent / "sign.sh", f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    section, _, name = key.rpartition(".")
    head, _, sub = section.partition(".")
    header = f'[{head} "{sub}"]' if sub else f"[{head}]"
    key_line = "" if name == "defaultKeyCommand" else "[user]\n\tsigningKey = k\n"  # the command finds the key
    append_config(repo, f"[gpg]\n\tformat = {fmt}\n{key_line}{header}\n\t{name} = {program}\n")
    _, text = await shell(repo, "git commit -q -S --allow-empty -m signed")
    assert not marker.exists(), text


async def test_symlinks_are_checked_out_as_files(repo: Path) -> None:
    git(repo, "checkout", "-qb", "evil")
    os.symlink(".git", repo / "lnk")
    git(repo, "add", "lnk")
    git(repo, "commit", "-qm", "link")
    git(repo, "checkout", "-q", "main")
    _, text = await shell(repo, "git checkout -q evil")
    assert (repo / "lnk").exists() and not (repo / "lnk").is_symlink(), text


async def test_push_to_a_local_repository_with_hooks_is_refused_by_git(repo: Path, marker: Path) -> None:
    """The far side of a local transport runs without the command-line pins (git clears GIT_CONFIG_COUNT
    for it), so local transports are off altogether."""
    git(repo, "init", "-q", "--bare", "evil")
    hooks = repo.parent / "hooks"
    for name in ("pre-receive", "update", "post-receive"):
        executable(hooks / name, f"#!/bin/sh\ntouch {marker}\n")
    git(repo / "evil", "config", "core.hooksPath", str(hooks))
    _, text = await shell(repo, "git push evil HEAD:refs/heads/x; git push file://$PWD/evil HEAD:refs/heads/y")
    assert not marker.exists(), text
    assert "transport 'file' not allowed" in text


async def test_bare_repository_is_not_discovered(repo: Path, marker: Path) -> None:
    evil = repo / "evil"
    for sub in ("objects", "refs/heads"):
        (evil / sub).mkdir(parents=True)
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text(f"[core]\n\tbare = true\n\tfsmonitor = touch {marker}; false\n"
                                 f"[alias]\n\tx = !touch {marker}\n")  # fmt: skip
    _, text = await shell(repo, "git x; git status", directory="evil")
    assert not marker.exists(), text
    assert "safe.bareRepository" in text


# -- the caller's environment ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["GIT_CONFIG_PARAMETERS", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                                  "GIT_CONFIG_COUNT", "HOME"])  # fmt: skip
async def test_caller_configuration_is_ignored(repo: Path, marker: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, name: str) -> None:  # fmt: skip
    config = tmp_path / "cfg"
    config.write_text(f"[alias]\n\tx = !touch {marker}\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(config.read_text())
    values = {"GIT_CONFIG_PARAMETERS": f"'alias.x'='!touch {marker}'", "GIT_CONFIG_GLOBAL": str(config),
              "GIT_CONFIG_SYSTEM": str(config), "HOME": str(home)}  # fmt: skip
    if name == "GIT_CONFIG_COUNT":
        for key, value in {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "alias.x",
                           "GIT_CONFIG_VALUE_0": f"!touch {marker}"}.items():  # fmt: skip
            monkeypatch.setenv(key, value)
    else:
        monkeypatch.setenv(name, values[name])
    _, text = await shell(repo, "git x")
    assert not marker.exists(), text


@pytest.mark.parametrize("name", ["GIT_EXTERNAL_DIFF", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_PROXY_COMMAND",
                                  "GIT_ASKPASS", "GIT_EXEC_PATH", "GIT_DIR", "GIT_TEMPLATE_DIR",
                                  "GIT_ALLOW_PROTOCOL"])  # fmt: skip
async def test_caller_programs_are_dropped(repo: Path, marker: Path, monkeypatch: pytest.MonkeyPatch,
                                           http_401: str, name: str) -> None:  # fmt: skip
    program = executable(repo.parent / "prog.sh", f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    exec_dir = repo.parent / "exec"
    executable(exec_dir / "git-x", f"#!/bin/sh\ntouch {marker}\n")
    executable(repo.parent / "tpl" / "hooks" / "pre-commit", f"#!/bin/sh\ntouch {marker}\n")
    git(repo, "init", "-q", "--bare", "evil")
    git(repo / "evil", "config", "alias.x", f"!touch {marker}")
    (repo / "f").write_text("changed\n")
    value, command = {
        "GIT_EXTERNAL_DIFF": (str(program), "git diff"),
        "GIT_SSH_COMMAND": (str(program), "git ls-remote ssh://nohost.invalid/x"),
        "GIT_SSH": (str(program), "git ls-remote ssh://nohost.invalid/x"),
        "GIT_PROXY_COMMAND": (str(program), "git ls-remote git://127.0.0.1:1/x"),
        "GIT_ASKPASS": (str(program), f"git ls-remote {http_401}"),
        "GIT_EXEC_PATH": (str(exec_dir), "git x"),
        "GIT_DIR": ("evil", "git x"),
        "GIT_TEMPLATE_DIR": (str(repo.parent / "tpl"), "git init -q sub && git -C sub commit -q --allow-empty -m x"),
        "GIT_ALLOW_PROTOCOL": ("ext:file", f"git ls-remote 'ext::sh -c touch% {marker}'"),
    }[name]
    monkeypatch.setenv(name, value)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "t")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "t@example.invalid")
    _, text = await shell(repo, command)
    assert not marker.exists(), text


# -- each pin against a repository-level value of the same key ---------------------------------------------


def hardened_git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = neutralise({k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip


def test_alternate_refs_command_pin(repo: Path, marker: Path, tmp_path: Path) -> None:
    """core.alternateRefsCommand runs while fetching into a repository with alternates. Local transports
    are off in the hardened environment, so this test turns the file protocol back on for itself."""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(clone))
    append_config(clone, f"[core]\n\talternateRefsCommand = touch {marker}; :\n")
    (repo / "f").write_text("two\n")
    git(repo, "commit", "-qam", "two")
    git(repo, "branch", "other")
    done = hardened_git(clone, "-c", "protocol.file.allow=always", "fetch", "-q", str(repo), "other")
    assert not marker.exists(), done.stderr
    assert done.returncode == 0, done.stderr


def test_neutralise_removes_caller_git_variables_and_sets_the_pins() -> None:
    env = neutralise({"PATH": "/usr/bin", "GIT_DIR": "x", "GIT_WORK_TREE": "x", "GIT_EXEC_PATH": "x",
                  "GIT_CONFIG": "x", "GIT_CONFIG_PARAMETERS": "x", "GIT_CONFIG_KEY_99": "x",
                  "GIT_SSH_COMMAND": "x", "GIT_EXTERNAL_DIFF": "x", "GIT_ASKPASS": "x", "GIT_INDEX_FILE": "x",
                  "GIT_OBJECT_DIRECTORY": "x", "GIT_TEMPLATE_DIR": "x", "GIT_ALLOW_PROTOCOL": "https:ext:ssh",
                  "GIT_AUTHOR_NAME": "Kept", "PAGER": "less", "GIT_PAGER": "less"})  # fmt: skip
    for gone in ("GIT_DIR", "GIT_WORK_TREE", "GIT_EXEC_PATH", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
                 "GIT_CONFIG_KEY_99", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_INDEX_FILE",
                 "GIT_OBJECT_DIRECTORY", "GIT_TEMPLATE_DIR"):  # fmt: skip
        assert gone not in env, gone
    assert env["GIT_ALLOW_PROTOCOL"] == "https:ssh"
    assert env["GIT_AUTHOR_NAME"] == "Kept"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["PAGER"] == env["GIT_PAGER"] == "cat" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_PROXY_COMMAND"] == ""
    pins = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert pins["core.hooksPath"] == "/dev/null" and pins["core.fsmonitor"] == "false"
    assert pins["protocol.ext.allow"] == "never" and pins["protocol.file.allow"] == "never"
    assert pins["safe.bareRepository"] == "explicit" and pins["init.templateDir"] == ""
    assert pins["credential.helper"] == "" and pins["core.symlinks"] == "false"
    for key in ("core.pager", "core.editor", "core.sshCommand", "core.askPass", "gpg.program"):
        assert key in pins, key


def test_neutralise_is_idempotent() -> None:
    once = neutralise({"PATH": "/usr/bin", "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "b", "GIT_COMMITTER_NAME": "a",
                       "GIT_COMMITTER_EMAIL": "b"})  # fmt: skip
    assert neutralise(dict(once)) == once


def test_the_environment_is_hardened_only_when_the_run_asks() -> None:
    env = {"PATH": "/usr/bin", "GIT_DIR": "x", "GIT_AUTHOR_NAME": "a"}
    plain = child_env(base=env)
    assert plain["GIT_DIR"] == "x" and "GIT_CONFIG_COUNT" not in plain
    assert child_env(base=env, hardened=True) == neutralise(dict(plain))
    runner, settings = Runner("test"), ProcessSettings()
    assert "GIT_CONFIG_COUNT" in settings.spec(runner, ["true"], cwd="/", roots=["/"], hardened=True).env
    assert "GIT_CONFIG_COUNT" not in settings.spec(runner, ["true"], cwd="/", roots=["/"]).env


async def test_without_an_allowlist_the_environment_is_the_operators(repo: Path, marker: Path, identity: None) -> None:
    executable(repo / ".git" / "hooks" / "pre-commit", f"#!/bin/sh\ntouch {marker}\n")
    result = await call_tool(repo, "run_shell_command", {"command": "git commit -q --allow-empty -m x"}, *ENVIRONMENT_ALONE)
    assert marker.exists(), text_of(result)


# -- the operator's identity -------------------------------------------------------------------------------


@pytest.fixture
def fresh_identity() -> Iterator[None]:
    hardened_env.operator_identity.cache_clear()
    yield
    hardened_env.operator_identity.cache_clear()


def test_operator_identity_is_read_from_the_normal_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               fresh_identity: None) -> None:  # fmt: skip
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Op Erator\n\temail = op@example.invalid\n")
    monkeypatch.setenv("HOME", str(home))
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME",
                 "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL", "XDG_CONFIG_HOME"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    env = neutralise({"PATH": os.environ["PATH"]})
    assert env["GIT_AUTHOR_NAME"] == env["GIT_COMMITTER_NAME"] == "Op Erator"
    assert env["GIT_AUTHOR_EMAIL"] == env["GIT_COMMITTER_EMAIL"] == "op@example.invalid"
    assert neutralise({"PATH": "/usr/bin", "GIT_AUTHOR_NAME": "Mine"})["GIT_AUTHOR_NAME"] == "Mine"


async def test_commit_works_with_the_identity_from_the_server_environment(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_identity: None
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Server Identity")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "server@example.invalid")
    (repo / "g").write_text("new file\n")
    command = "git add g && git commit -q -m x && git log -1 --format=%an"
    result = await call_tool(repo, "run_shell_command", {"command": command}, "--allow-command", "git")
    text = text_of(result)
    assert result.structured["exit_code"] == 0, text
    assert result.structured["stdout"] == "Server Identity"
