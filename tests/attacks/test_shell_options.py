"""The shell policy reads a command line as bash and the program will: exploits through the real tool,
judged by their effects.

Three classes, each a way the checker once read a command differently from what runs:

- options: a launcher's options read as getopt reads them (`xargs -0a FILE sh` is `-0 -a FILE sh`;
  `timeout -vs KILL 5 rm` runs `rm`; `--sig` abbreviates `--signal`);
- expansions: a word judged after bash expands it (`.{g..g}it`, `{.git,.git}`, `$'\\x2egit'`, `r?`, `.e*`);
- programs with their own "run a program" option (`rg --pre`, `split --filter`, `wget --use-askpass`).

Every case runs with `--shell-sandbox none`, so that what is judged is the policy alone (the OS sandbox holds
some of these on its own; this file is about the layer that must not need it). The effect that must not
happen: a marker file appearing in the root, a victim file removed (denylist cases), `.git/config` changed,
or a secret shown."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import call_tool, text_of

pytestmark = pytest.mark.anyio

SECRET = "s3cr3t-value-never-shown"
NONE = ("--shell-sandbox", "none")


@dataclass
class Scene:
    root: Path

    @property
    def marker(self) -> Path:
        return self.root / "MARKER"

    @property
    def victim(self) -> Path:
        return self.root / "victim"

    @property
    def config(self) -> Path:
        return self.root / ".git" / "config"


def repo(s: Scene) -> None:
    subprocess.run(["git", "init", "-q", str(s.root)], check=True, capture_output=True)
    (s.root / "evilcfg").write_text('[diff]\n\texternal = touch MARKER; true\n[filter "x"]\n\tclean = touch MARKER\n')
    s.victim.write_text("keep me\n")
    (s.root / ".env").write_text(f"TOKEN={SECRET}\n")
    (s.root / ".env.production").write_text(f"TOKEN={SECRET}\n")
    (s.root / "payload").write_text("touch MARKER\n")
    (s.root / "rm").write_text("")  # a file the globs `r?` and `[5r]*` match
    (s.root / "5").write_text("")
    (s.root / "victims").write_text("victim\n")
    (s.root / "ls").write_bytes(b"-c\0touch MARKER\0")  # the arguments xargs -0a reads
    asked = s.root / "Username for 'http:"  # the script `sh` runs when wget asks for a user name
    asked.mkdir()
    (asked / "127.0.0.1': ").write_text("touch MARKER\n")


@dataclass
class Exploit:
    name: str
    flags: tuple[str, ...]
    command: str


def allow(*programs: str) -> tuple[str, ...]:
    return tuple(flag for program in programs for flag in ("--allow-command", program))


DENY_RM = ("--deny-command", "rm")

EXPLOITS = [
    # options read as getopt reads them
    Exploit("xargs-cluster-arg-file", allow("xargs", "ls"), "xargs -0a ls sh"),
    Exploit("xargs-arg-file-abbrev", allow("xargs", "ls"), "xargs -0 --arg ls sh"),
    Exploit("deny-timeout-cluster", DENY_RM, "timeout -vs KILL 5 rm victim"),
    Exploit("deny-timeout-abbrev", DENY_RM, "timeout --sig KILL 5 rm victim"),
    Exploit("deny-ionice-cluster", DENY_RM, "ionice -tc 3 rm victim"),
    Exploit("deny-ionice-abbrev", DENY_RM, "ionice --classd 7 -c 2 rm victim"),
    Exploit("deny-xargs-cluster", DENY_RM, "printf 'victim\\0' | xargs -0n 1 rm"),
    Exploit("deny-xargs-arg-file-abbrev", DENY_RM, "xargs --arg victims rm"),
    Exploit("deny-nice-abbrev", DENY_RM, "nice --adj 5 rm victim"),
    Exploit("deny-stdbuf-abbrev", DENY_RM, "stdbuf --out L rm victim"),
    # a shell's own options read as bash reads them: the script is the first word after all of them
    Exploit("deny-bash-option-after-c", DENY_RM, "bash -c -e 'rm victim'"),
    Exploit("deny-bash-plus-option", DENY_RM, "bash +x -c 'rm victim'"),
    Exploit("deny-bash-o-value", DENY_RM, "bash -o posix -c 'rm victim'"),
    Exploit("deny-bash-long-option", DENY_RM, "bash --norc -c 'rm victim'"),
    Exploit("deny-sh-dashdash", DENY_RM, "sh -c -- 'rm victim'"),
    # words as bash splits them: a backslash-newline inside a word is removed, not a word break
    Exploit("deny-line-continuation", DENY_RM, "r\\\nm victim"),
    Exploit("deny-line-continuation-launcher", DENY_RM, "nice r\\\nm victim"),
    Exploit("line-continuation-dot-git", allow("cp"), "cp evilcfg .g\\\nit/config"),
    # words judged after bash expands them
    Exploit("brace-sequence-dot-git", allow("cp"), "cp evilcfg .{g..g}it/config"),
    Exploit("brace-list-dot-git", allow("cat", "tee"), "cat evilcfg | tee {.git,.git}/config"),
    Exploit("brace-sequence-sed", allow("sed"), "sed -i '$r evilcfg' .{g..g}it/config"),
    Exploit("ansi-c-hex-dot-git", allow("cp"), "cp evilcfg $'\\x2egit/config'"),
    Exploit("ansi-c-octal-dot-git", allow("cp"), "cp evilcfg $'\\056git'/config"),
    Exploit("split-word-dot-git", allow("cat", "tee"), "cat evilcfg | tee .g'i'{t,t}/config"),
    Exploit("deny-glob-command", DENY_RM, "nice r? victim"),
    Exploit("deny-brace-command", DENY_RM, "nice {r,}m victim"),
    Exploit("deny-brace-command-p", DENY_RM, "command -p r{m,} victim"),
    Exploit("deny-glob-shifts-the-command", DENY_RM, "timeout [5r]* victim"),
    # bash builtins that run a command or change what a name runs
    Exploit("deny-bash-cmds", DENY_RM, "BASH_CMDS[ls]=/bin/rm; ls victim"),
    Exploit("deny-hash-p", DENY_RM, "hash -p /bin/rm ls; ls victim"),
    Exploit("deny-compgen-C", DENY_RM, "compgen -C 'rm victim' x"),
    Exploit("deny-trap", DENY_RM, "trap 'rm victim' EXIT"),
    Exploit("deny-alias", DENY_RM, "shopt -s expand_aliases\nalias x=rm\nx victim"),
    Exploit("secret-env", allow("cat"), "cat .env"),
    Exploit("secret-env-glob", allow("cat"), "cat .e*"),
    Exploit("secret-env-brace", allow("cat"), "cat .{e,x}nv.production"),
    # programs with their own option that runs a program
    Exploit("rg-pre", allow("rg"), "rg --pre sh touch payload"),
    Exploit("rg-pre-attached", allow("rg"), "rg --pre=sh touch payload"),
    Exploit("split-filter", allow("split"), "split --filter='touch MARKER' payload"),
    Exploit("split-filter-abbrev", allow("split"), "split --fil='touch MARKER' payload"),
    Exploit("wget-use-askpass", allow("wget"), "wget -q --tries=1 --use-askpass=sh http://127.0.0.1:9/x"),
    Exploit("wget-use-askpass-abbrev", allow("wget"), "wget -q --tries=1 --use-ask=sh http://127.0.0.1:9/x"),
]


@pytest.mark.parametrize("exploit", EXPLOITS, ids=[e.name for e in EXPLOITS])
async def test_exploit_has_no_effect(root: Path, exploit: Exploit) -> None:
    scene = Scene(root)
    repo(scene)
    config = scene.config.read_bytes()
    result = await call_tool(root, "run_shell_command", {"command": exploit.command}, *NONE, *exploit.flags)
    shown = text_of(result)
    assert not scene.marker.exists(), f"a command ran:\n{shown}"
    assert scene.victim.exists(), f"a denied command ran:\n{shown}"
    assert scene.config.read_bytes() == config, f".git/config was written:\n{shown}"
    assert SECRET not in shown, f"a secret env file was shown:\n{shown}"
    assert "refused by the shell policy" in shown, shown


EVERYDAY: list[tuple[tuple[str, ...], str, Callable[[Scene], bool]]] = [
    (allow("printf", "xargs", "ls"), "printf 'payload\\0' | xargs -0 -n 1 ls", lambda s: True),
    (allow("printf", "xargs", "echo"), "printf 'a\\0b\\0' | xargs -0 -I{} echo x{}", lambda s: True),
    (allow("timeout", "ls"), "timeout -s KILL 5 ls", lambda s: True),
    (allow("touch"), "touch new.{1..3}", lambda s: (s.root / "new.3").exists()),
    (allow("mkdir"), "mkdir -p d/{a,b}/c", lambda s: (s.root / "d" / "b" / "c").is_dir()),
    (allow("rg"), "rg -n -e touch payload", lambda s: True),
    (allow("split"), "split -l 1 payload part.", lambda s: (s.root / "part.aa").exists()),
    (allow("cat"), "cat .env.example", lambda s: True),
]


@pytest.mark.parametrize("flags,command,check", EVERYDAY, ids=[c for _, c, _ in EVERYDAY])
async def test_plain_use_still_runs(root: Path, flags: tuple[str, ...], command: str,
                                    check: Callable[[Scene], bool]) -> None:  # fmt: skip
    scene = Scene(root)
    repo(scene)
    (root / ".env.example").write_text("TOKEN=\n")
    result = await call_tool(root, "run_shell_command", {"command": command}, *NONE, *flags)
    assert result.structured["exit_code"] == 0, text_of(result)
    assert check(scene), text_of(result)


@pytest.mark.parametrize("command", ["git -C . push -q remote.git HEAD:refs/heads/pushed",
                                     "git --no-pager push -q remote.git HEAD:refs/heads/pushed"])  # fmt: skip
async def test_a_denied_git_subcommand_behind_global_options_does_not_run(root: Path, command: str) -> None:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["init", "-q", "."], ["commit", "-q", "--allow-empty", "-m", "x"], ["init", "-q", "--bare", "remote.git"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    result = await call_tool(root, "run_shell_command", {"command": command}, *NONE, "--deny-command", "git push")
    assert not (root / "remote.git" / "refs" / "heads" / "pushed").exists(), text_of(result)
    assert "denylist" in text_of(result), text_of(result)
