"""The shell allowlist as a boundary: exploits driven through the real tool, judged by their effects.

Each case is what a steered model would send (one or more `run_shell_command` calls under an allowlist or
a denylist) after preparing files the way it could (write_file, or history it fetched). The assertion is
on what happened, not on the message: a marker file outside the roots that must not appear, a file
outside the roots that must not be written, a victim file that must survive. Refusals are also checked
at the policy level, one per table entry, in tests/test_shell_policy.py; the git configuration class on
its own is in test_git_exec.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support import call_tool, text_of

pytestmark = pytest.mark.anyio

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    """Plain git for setting the scene (not through the tool, no hardening)."""
    done = subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=GIT_ENV,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@dataclass
class Scene:
    root: Path
    marker: Path  # must never appear
    outside: Path  # a path outside the roots that must never be written
    victim: Path  # must survive (denylist cases)

    def fmt(self, command: str) -> str:
        return command.format(M=self.marker, OUT=self.outside, ROOT=self.root)


# -- scenes ------------------------------------------------------------------------------------------------


def repo(s: Scene) -> None:
    git(s.root, "init", "-q", "-b", "main")
    (s.root / "f").write_text("hello word\n")
    git(s.root, "add", "f")
    git(s.root, "commit", "-qm", "one")


def two_commits(s: Scene) -> None:
    repo(s)
    (s.root / "f").write_text("hello word\nsecond\n")
    git(s.root, "commit", "-qam", "two")


def changed(s: Scene) -> None:
    repo(s)
    (s.root / "f").write_text("changed\n")


def filter_config(s: Scene) -> str:
    return f'[filter "x"]\n\tclean = touch {s.marker}; cat\n'


def evil_config_file(s: Scene) -> None:
    """A model-written file holding git configuration, and attributes naming its filter driver."""
    repo(s)
    (s.root / "evilcfg").write_text((s.root / ".git" / "config").read_text() + filter_config(s))
    (s.root / ".gitattributes").write_text("* filter=x\n")
    (s.root / "new.txt").write_text("new\n")


def evil_config_committed(s: Scene) -> None:
    evil_config_file(s)
    git(s.root, "add", "evilcfg")
    git(s.root, "commit", "-qm", "cfg")


def symlink_branch(s: Scene) -> None:
    """History the model fetched: a branch whose tree holds a symlink to .git and a config file."""
    evil_config_file(s)
    git(s.root, "checkout", "-qb", "evil")
    os.symlink(".git", s.root / "lnk")
    git(s.root, "add", "lnk", "evilcfg")
    git(s.root, "commit", "-qm", "evil")
    git(s.root, "checkout", "-q", "main")
    assert not (s.root / "lnk").exists()


def bare_written(s: Scene) -> None:
    """A bare repository made of plain files, as write_file can make one."""
    repo(s)
    evil = s.root / "evil"
    for sub in ("objects", "refs/heads"):
        (evil / sub).mkdir(parents=True)
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text(f"[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tfsmonitor = touch "
                                 f"{s.marker}; false\n[alias]\n\tx = !touch {s.marker}\n")  # fmt: skip


def hooked_bare(s: Scene) -> None:
    """A bare repository in the roots whose configuration points its hooks at an executable."""
    repo(s)
    git(s.root, "init", "-q", "--bare", "evil")
    hooks = s.root.parent / "hooks"
    for name in ("pre-receive", "update", "post-receive"):
        executable(hooks / name, f"#!/bin/sh\ntouch {s.marker}\n")
    git(s.root / "evil", "config", "core.hooksPath", str(hooks))


def template_dir(s: Scene) -> None:
    repo(s)
    executable(s.root / "tpl" / "hooks" / "pre-commit", f"#!/bin/sh\ntouch {s.marker}\n")


def submodule(s: Scene) -> None:
    sub = s.root.parent / "subsrc"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "s").write_text("s\n")
    git(sub, "add", "s")
    git(sub, "commit", "-qm", "s")
    repo(s)
    git(s.root, "submodule", "add", "-q", str(sub), "sub")
    git(s.root, "commit", "-qm", "sub")


def fsmonitor_in_config(s: Scene) -> None:
    repo(s)
    with open(s.root / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = touch {s.marker}; false\n")


def sed_input(s: Scene) -> None:
    (s.root / "f").write_text(f"touch {s.marker.name} /\n")  # run in the root: the only / is the last one
    (s.root / "prog.sed").write_text(f"1e touch {s.marker}\n")


def awk_input(s: Scene) -> None:
    (s.root / "f").write_text('a "quoted" line\n')
    (s.root / "prog.awk").write_text(f'BEGIN {{ system("touch {s.marker}") }}\n')


def xargs_input(s: Scene) -> None:
    repo(s)
    (s.root / "args.txt").write_text(f"-c 'alias.x=!touch {s.marker}' x\n")


def tar_archives(s: Scene) -> None:
    evil_config_file(s)
    (s.root / "payload").write_text("x\n")
    with tarfile.open(s.root / "a.tar", "w") as tar:
        tar.add(s.root / "payload", arcname="payload")
    with tarfile.open(s.root / "gitdir.tar", "w") as tar:
        tar.add(s.root / "evilcfg", arcname=".git/config")


def victim(s: Scene) -> None:
    s.victim.write_text("keep me\n")


# -- the catalogue -----------------------------------------------------------------------------------------


@dataclass
class Exploit:
    name: str
    flags: tuple[str, ...]
    steps: tuple[str, ...]
    setup: Callable[[Scene], None] | None = None
    directory: str | None = None
    extra_checks: tuple[str, ...] = field(default=())  # root-relative files that must not exist afterwards


GIT = ("--allow-command", "git")
GIT_CAT = (*GIT, "--allow-command", "cat")
SED = ("--allow-command", "sed")
AWK = ("--allow-command", "awk")
FIND = ("--allow-command", "find")
DENY_RM = ("--deny-command", "rm")
DENY_TOUCH = ("--deny-command", "touch")
ALIAS = "-c alias.x='!touch {M}' x"

EXPLOITS = [
    # words after a redirection
    Exploit("redirect-trailing", GIT, (f"git >/dev/null {ALIAS}",), repo),
    Exploit("redirect-fd-number", GIT, (f"git 2>/dev/null {ALIAS}",), repo),
    Exploit("redirect-amp", GIT, (f"git &>/dev/null {ALIAS}",), repo),
    Exploit("redirect-clobber", GIT, (f"git >|/dev/null {ALIAS}",), repo),
    Exploit("redirect-dup", GIT, (f"git 2>&1 {ALIAS}",), repo),
    Exploit("redirect-two", GIT, (f"git 2>/dev/null <&0 {ALIAS}",), repo),
    Exploit("redirect-in-pipeline", GIT_CAT, (f"git >/dev/null {ALIAS} | cat",), repo),
    Exploit("redirect-leading", GIT, (f">/dev/null git {ALIAS}",), repo),
    # git configuration written, then used
    Exploit("git-config-alias", GIT, ("git config alias.x '!touch {M}'", "git x"), repo),
    Exploit("git-config-fsmonitor", GIT, ("git config core.fsmonitor 'touch {M}; false'", "git status"), repo),
    Exploit("git-config-hookspath", GIT, ("git config core.hooksPath hk", "git commit -q --allow-empty -m x"),
            lambda s: (repo(s), executable(s.root / "hk" / "pre-commit", f"#!/bin/sh\ntouch {s.marker}\n"))),
    Exploit("git-config-pager", GIT, ("git config core.pager 'touch {M}; cat'", "git grep -O hello"), repo),
    Exploit("git-config-sshcommand", GIT, ("git config core.sshCommand 'touch {M}; false'",
                                           "git fetch ssh://nohost.invalid/x"), repo),  # fmt: skip
    Exploit("git-config-diff-external", GIT, ("git config diff.external 'touch {M}; true'", "git diff"), changed),
    Exploit("git-config-protocol-ext", GIT, ("git config protocol.ext.allow always",
                                             "git fetch 'ext::sh -c touch% {M}'"), repo),  # fmt: skip
    Exploit("git-config-file-alias", GIT, ("git config --file .git/config alias.x '!touch {M}'", "git x"), repo),
    # git options and subcommands that run a command
    Exploit("git-grep-O", GIT, ("git grep -O'touch {M}' hello",), repo),
    Exploit("git-grep-open-files", GIT, ("git grep --open-files-in-pager='touch {M}' hello",), repo),
    Exploit("git-grep-open-abbrev", GIT, ("git grep --open='touch {M}' hello",), repo),
    Exploit("git-grep-cluster", GIT, ("git grep -nO'touch {M}' hello",), repo),
    Exploit("git-difftool-x", GIT, ("git difftool -y -x 'touch {M}'",), changed),
    Exploit("git-difftool-extcmd", GIT, ("git difftool -y --extcmd='touch {M}'",), changed),
    Exploit("git-bisect-run", GIT, ("git bisect start HEAD HEAD~1 && git bisect run touch {M}",), two_commits),
    Exploit("git-submodule-foreach", GIT, ("git submodule foreach 'touch {M}'",), submodule),
    Exploit("git-rebase-x", GIT, ("git rebase -x 'touch {M}' HEAD~1",), two_commits),
    Exploit("git-rebase-exec", GIT, ("git rebase --exec='touch {M}' HEAD~1",), two_commits),
    Exploit("git-rebase-exec-abbrev", GIT, ("git rebase --exe='touch {M}' HEAD~1",), two_commits),
    Exploit("git-fetch-upload-pack", GIT, ("git fetch --upload-pack='touch {M}; false' .",), repo),
    Exploit("git-fetch-upload-pack-abbrev", GIT, ("git fetch --upload-p='touch {M}; false' .",), repo),
    Exploit("git-clone-u", GIT, ("git clone -u 'touch {M}; false' . dst",), repo),
    Exploit("git-push-receive-abbrev", GIT, ("git push --rece='touch {M}; false' . HEAD:refs/heads/x",), repo),
    Exploit("git-clone-config", GIT, ("git clone -c core.fsmonitor='touch {M}; false' . dst", "git -C dst status"),
            repo),
    Exploit("git-c", GIT, (f"git {ALIAS}",), repo),
    Exploit("git-exec-path", GIT, ("git --exec-path=. x",),
            lambda s: (repo(s), executable(s.root / "git-x", f"#!/bin/sh\ntouch {s.marker}\n"))),
    # git writing where it should not
    Exploit("git-log-output", GIT, ("git log -1 --output={OUT}",), repo),
    Exploit("git-init-outside", GIT, ("git -C .. init -q root-evil/newrepo",), repo, extra_checks=()),
    Exploit("git-init-template", GIT, ("git init -q --template=tpl sub",
                                       "git -C sub commit -q --allow-empty -m x"), template_dir),  # fmt: skip
    Exploit("git-mv-into-dot-git", GIT, ("git mv -f evilcfg .git/config", "git add new.txt"), evil_config_committed),
    Exploit("git-symlink-to-dot-git", GIT, ("git checkout -q evil", "git mv -f evilcfg lnk/config",
                                            "git add new.txt"), symlink_branch),  # fmt: skip
    Exploit("git-push-local-hooks", GIT, ("git push -q evil HEAD:refs/heads/x",), hooked_bare),
    # a bare repository the model wrote
    Exploit("bare-git-dir", GIT, ("git --git-dir=evil x",), bare_written),
    Exploit("bare-git-dir-status", GIT, ("git --git-dir=evil --work-tree=. status",), bare_written),
    Exploit("bare-GIT_DIR", GIT, ("GIT_DIR=evil git x",), bare_written),
    Exploit("bare-C", GIT, ("git -C evil x", "git -C evil status"), bare_written),
    Exploit("bare-discovery", GIT, ("git x", "git status"), bare_written, directory="evil"),
    # sed
    Exploit("sed-e-command", SED, ("sed -n '1e touch {M}' f",), sed_input),
    Exploit("sed-s-e-flag", SED, ("sed 's|.*|touch {M}|e' f",), sed_input),
    Exploit("sed-bracket-delimiter", SED, ("sed 's/[/]/g #x/e' f",), sed_input),
    Exploit("sed-w-command", SED, ("sed -n 'w {OUT}' f",), sed_input),
    Exploit("sed-s-w-flag", SED, ("sed 's/x/y/w {OUT}' f",), sed_input),
    Exploit("sed-W-command", SED, ("sed -n 'W {OUT}' f",), sed_input),
    Exploit("sed-second-expression", SED, ("sed -e p -e '1e touch {M}' f",), sed_input),
    Exploit("sed-expression-abbrev", SED, ("sed --exp='1e touch {M}' f",), sed_input),
    Exploit("sed-script-file", SED, ("sed -f prog.sed f",), sed_input),
    Exploit("sed-i-dot-git", ("--allow-command", "sed", "--allow-command", "git"),
            ("sed -i '$r evilcfg' .git/config", "git add new.txt"), evil_config_file),
    Exploit("sed-i-backup-into-dot-git", ("--allow-command", "sed", "--allow-command", "git"),
            ("sed -i'.git/*' -n p config", "git add new.txt"),
            lambda s: (evil_config_file(s), (s.root / "config").write_text((s.root / "evilcfg").read_text()))),
    Exploit("sed-i-outside", SED, ("sed -i s/DECOY/PWNED/ ../root-evil/secret.txt",), None),
    # awk
    Exploit("awk-system", AWK, ("awk 'BEGIN{{system(\"touch {M}\")}}'",), awk_input),
    Exploit("awk-pipe", AWK, ("awk 'BEGIN{{print \"x\" | \"touch {M}\"}}'",), awk_input),
    Exploit("awk-getline", AWK, ("awk 'BEGIN{{\"touch {M}\" | getline}}'",), awk_input),
    Exploit("awk-redirect", AWK, ("awk 'BEGIN{{print \"x\" > \"{OUT}\"}}'",), awk_input),
    Exploit("awk-paren-in-string", AWK, ("awk 'BEGIN{{printf \"(\" > \"{OUT}\"}}'",), awk_input),
    Exploit("awk-quote-in-regex", AWK, ("awk '/\"/ {{ print > \"{OUT}\" }} #\"' f",), awk_input),
    Exploit("awk-program-file", AWK, ("awk -f prog.awk",), awk_input),
    # find
    Exploit("find-fprint", FIND, ("find . -maxdepth 0 -fprint {OUT}",), None),
    Exploit("find-fprintf", FIND, ("find . -maxdepth 0 -fprintf {OUT} x",), None),
    Exploit("find-fls", FIND, ("find . -maxdepth 0 -fls {OUT}",), None),
    Exploit("find-fprint0", FIND, ("find . -maxdepth 0 -fprint0 {OUT}",), None),
    Exploit("find-exec", FIND, ("find . -maxdepth 0 -exec touch {M} ';'",), None),
    Exploit("find-delete", FIND, ("find . -name keep.txt -delete",), lambda s: (s.root / "keep.txt").write_text("k\n"),
            extra_checks=()),
    # launchers and environment
    Exploit("env-i-drops-hardening", ("--allow-command", "env", "--allow-command", "git"), ("env -i git status",),
            fsmonitor_in_config),
    Exploit("env-u-drops-hardening", ("--allow-command", "env", "--allow-command", "git"),
            ("env -u GIT_CONFIG_COUNT git status",), fsmonitor_in_config),
    Exploit("xargs-hidden-arguments", ("--allow-command", "cat", "--allow-command", "xargs", "--allow-command", "git"),
            ("cat args.txt | xargs git",), xargs_input),
    Exploit("xargs-arg-file", ("--allow-command", "xargs", "--allow-command", "git"), ("xargs -a args.txt git",),
            xargs_input),
    Exploit("dollar-underscore", ("--allow-command", "echo", "--allow-command", "git"),
            ("echo .g >/dev/null; git mv -f evilcfg ${{_}}it/config", "git add new.txt"), evil_config_committed),
    Exploit("glob-becomes-option", ("--allow-command", "git"), ("git fetch *",),
            lambda s: (repo(s), (s.root / f"--upload-pack=touch {s.marker.name}; false").write_text(""),
                       git(s.root, "init", "-q", "--bare", "zz"))),
    # tar
    Exploit("tar-to-command-abbrev", ("--allow-command", "tar"), ("tar --to-comm='touch {M}' -xf a.tar",),
            tar_archives),
    Exploit("tar-extract-into-dot-git", ("--allow-command", "tar", "--allow-command", "git"),
            ("tar -xf gitdir.tar", "git add new.txt"), tar_archives),
    # the denylist
    Exploit("deny-backslash", DENY_RM, ("\\rm victim",), victim),
    Exploit("deny-quotes", DENY_RM, ("r''m victim",), victim),
    Exploit("deny-path", DENY_RM, ("/bin/rm victim",), victim),
    Exploit("deny-command", DENY_RM, ("command rm victim",), victim),
    Exploit("deny-env", DENY_RM, ("env rm victim",), victim),
    Exploit("deny-xargs", DENY_RM, ("echo victim | xargs rm",), victim),
    Exploit("deny-env-S", DENY_RM, ("env -S 'rm victim'",), victim),
    Exploit("deny-env-split-string", DENY_RM, ("env --split-string='rm victim'",), victim),
    Exploit("deny-env-split-abbrev", DENY_RM, ("env --split='rm victim'",), victim),
    Exploit("deny-env-S-attached", DENY_RM, ("env -S'rm victim'",), victim),
    Exploit("deny-env-S-cluster", DENY_RM, ("env -vS 'rm victim'",), victim),
    Exploit("deny-redirect-leading", DENY_RM, (">/dev/null rm victim",), victim),
    Exploit("deny-redirect-after-launcher", DENY_RM, ("command >/dev/null rm victim",), victim),
    Exploit("deny-redirect-after-env", DENY_RM, ("env 2>/dev/null rm victim",), victim),
    Exploit("deny-redirect-hides-word", DENY_TOUCH, ("nice >/dev/null touch {M}",), None),
]


@pytest.fixture
def scene(root: Path, tmp_path: Path) -> Scene:
    return Scene(root=root, marker=tmp_path / "MARKER", outside=tmp_path / "root-evil" / "pwned",
                 victim=root / "victim")  # fmt: skip


@pytest.mark.parametrize("exploit", EXPLOITS, ids=[e.name for e in EXPLOITS])
async def test_exploit_has_no_effect(scene: Scene, exploit: Exploit) -> None:
    if exploit.setup is not None:
        exploit.setup(scene)
    secret = scene.root.parent / "root-evil" / "secret.txt"
    secret_before = secret.read_text()
    outcomes = []
    for step in exploit.steps:
        args = {"command": scene.fmt(step)}
        if exploit.directory:
            args["directory"] = exploit.directory
        result = await call_tool(scene.root, "run_shell_command", args, *exploit.flags)
        outcomes.append(text_of(result))
    shown = "\n---\n".join(outcomes)
    assert not scene.marker.exists() and not (scene.root / scene.marker.name).exists(), f"a command ran:\n{shown}"
    assert not scene.outside.exists(), f"a file outside the roots was written:\n{shown}"
    assert secret.read_text() == secret_before, f"a file outside the roots was changed:\n{shown}"
    assert not (scene.root.parent / "root-evil" / "newrepo").exists(), shown
    if exploit.setup is victim:
        assert scene.victim.exists(), f"a denied command ran:\n{shown}"
    if exploit.name == "find-delete":
        assert (scene.root / "keep.txt").exists(), shown
    config = scene.root / ".git" / "config"
    if config.exists():
        assert "filter" not in config.read_text(), f".git/config was written:\n{shown}"


# -- plain use keeps working -------------------------------------------------------------------------------


async def test_everyday_commands_work_under_the_allowlist(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    repo(scene)
    (scene.root / "f").write_text("hello word\nsecond line\n")
    (scene.root / "tool.py").write_text("print('x')\n")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Everyday")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "everyday@example.invalid")
    flags = ("--allow-command", "git", "--allow-command", "sed", "--allow-command", "find")
    expected = {
        "git status --short": " M f\n?? tool.py",
        "git log -n 5 --format=%s": "one",
        "git diff --stat": "f | 1 +",
        "git grep -n word": "f:1:hello word",
        "sed -n 1,20p f": "hello word\nsecond line",
        "find . -name '*.py'": "./tool.py",
        "git add f tool.py && git commit -q -m two && git log -n 5 --format=%s": "two\none",
        "sed -i s/word/world/ f && git diff --stat": "f | 2 +-",
    }
    for command, output in expected.items():
        result = await call_tool(scene.root, "run_shell_command", {"command": command}, *flags)
        structured = result.structured
        assert structured["exit_code"] == 0, text_of(result)
        assert output in structured["stdout"], (command, structured["stdout"])
    assert (scene.root / "f").read_text().startswith("hello world")
