"""The watch of git's host-run settings on its own: the configuration parser against real git, which keys
run programs, and what a snapshot finds, reuses and reports (real files, real git, no server)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from coretools.sandbox import git_watch
from coretools.sandbox.git_config import parse_config, runs
from coretools.sandbox.git_watch import GitState, changes, snapshot, warning

SETUP_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
             "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # fmt: skip
OLD = 1_000_000_000  # an mtime (s) long before any snapshot: what is stamped with it is not racy


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=SETUP_ENV, capture_output=True, text=True, check=True).stdout


def keys(found: list[git_watch.Finding]) -> list[tuple[str, str]]:
    return [(f.file, f.key) for f in found]


def age(path: Path) -> None:
    """Stamp every directory and file below `path` with an old mtime, as a tree left alone for a while."""
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            os.utime(os.path.join(dirpath, name), (OLD, OLD), follow_symlinks=False)
    os.utime(path, (OLD, OLD))


# -- the parser, against git's own ------------------------------------------------------------------------

SYNTAX = [
    "[core]\n\tfsmonitor = touch x; false\n",
    "[Core]FsMonitor=a\n",
    '[alias]\n\tx = "!sh -c \\"echo hi\\"" # comment\n\ty\n',
    '[diff "My.Driver"]\n textconv = a\\\n   b\n',
    "[diff.My]\n command = c\n",
    '[filter "x"] clean = "a ; b" ; comment\n',
    "\ufeff[a]\r\n\tk = v\r\n",
    '[a "b\\"c\\\\d"]\n k = 1\n',
    '[a]\n k = x  "  y  "  z  \n',
    '[a]\n k = "" foo\n',
    "[a]\n k = a\\tb\\nc\n",
    '[include]\n\tpath = ~/x\n[includeIf "gitdir:~/w/"]\n\tpath = y\n',
    "[a]\nk=\n; comment\n# comment\n",
    '[a.b "c"]\n k = v\n',
    "[a]\n  k  =  v\t\n\n\n[b]k\n",
    '[credential "https://h.example"]\n\thelper = "!f() { echo; }; f"\n',
]


@pytest.mark.parametrize("text", SYNTAX)
def test_parser_reads_what_git_reads(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config"
    config.write_text(text, encoding="utf-8")
    listed = git(tmp_path, "config", "--file", str(config), "--list", "-z")
    expected = []
    for item in listed.split("\0")[:-1]:
        key, newline, value = item.partition("\n")
        expected.append((key, value if newline else None))
    mine = [(f"{s}.{sub}.{n}" if sub is not None else f"{s}.{n}", v) for s, sub, n, v in parse_config(text)]
    assert mine == expected


def test_parser_skips_only_the_line_git_would_refuse() -> None:
    text = "[core]\n\tpager less\n\tfsmonitor = a\n[bad section\n\tx = 1\n[alias]\n\tz = !b\n\tq = \\q\n"
    assert parse_config(text) == [("core", None, "fsmonitor", "a"), ("alias", None, "z", "!b"),
                                  ("alias", None, "q", "q")]  # fmt: skip
    assert parse_config("k = v\n") == []  # a variable outside any section


@pytest.mark.parametrize("key,value", [
    ("core.fsmonitor", "touch x"), ("core.hooksPath", ".hk"), ("core.sshCommand", "x"), ("core.pager", "x"),
    ("core.editor", "x"), ("core.askPass", "x"), ("core.gitProxy", "x"), ("diff.external", "x"),
    ("diff.d.textconv", "x"), ("diff.d.command", "x"), ("merge.m.driver", "x"), ("filter.f.clean", "x"),
    ("filter.f.smudge", "x"), ("filter.f.process", "x"), ("alias.x", " !sh"), ("credential.helper", "store"),
    ("credential.https://h.helper", "x"), ("gpg.program", "x"), ("gpg.ssh.program", "x"),
    ("gpg.ssh.defaultKeyCommand", "x"), ("sequence.editor", "x"), ("uploadpack.packObjectsHook", "x"),
    ("include.path", "x"), ("includeIf.gitdir:/.path", "x"), ("pager.log", "less"), ("submodule.s.update", "!x"),
    ("init.templateDir", "x"), ("interactive.diffFilter", "x"), ("remote.o.uploadpack", "x"),
    ("protocol.allow", "always"), ("protocol.ext.allow", "user"), ("sendemail.toCmd", "x"),
])  # fmt: skip
def test_keys_that_run_programs(key: str, value: str) -> None:
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    assert runs(section.lower(), sub or None, name.lower(), value)


@pytest.mark.parametrize("key,value", [
    ("core.fsmonitor", "true"), ("core.fsmonitor", "false"), ("core.fsmonitor", None), ("core.pager", ""),
    ("user.name", "x"), ("alias.co", "checkout"), ("pager.log", "false"), ("pager.log", None),
    ("credential.helper", ""), ("submodule.s.update", "rebase"), ("protocol.ext.allow", "never"),
    ("diff.external", ""), ("core.bare", "true"), ("remote.o.url", "https://h/x"),
])  # fmt: skip
def test_keys_that_run_nothing(key: str, value: str | None) -> None:
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    assert runs(section, sub or None, name, value) is None


# -- snapshots ----------------------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def test_a_quiet_tree_is_stat_only_and_reports_nothing(repo: Path) -> None:
    for i in range(30):
        (repo / f"d{i}" / "e").mkdir(parents=True)
    git(repo, "config", "core.fsmonitor", "pre-existing")
    age(repo)
    first = snapshot([str(repo)])
    second = snapshot([str(repo)], first)
    assert changes(first, second) == []
    assert all(second.dirs[d] is first.dirs[d] for d in first.dirs)  # not listed again
    assert all(second.files[f] is first.files[f] for f in first.files)  # not read again
    assert len(second.dirs) == 61


def test_a_nested_repository_is_found_and_named_once(repo: Path) -> None:
    age(repo)
    before = snapshot([str(repo)])
    sub = repo / "a" / "sub"
    sub.mkdir(parents=True)
    git(sub, "init", "-q")
    git(sub, "config", "core.fsmonitor", "touch x")
    after = snapshot([str(repo)], before)
    assert keys(changes(before, after)) == [(str(sub / ".git" / "config"), "core.fsmonitor")]
    text = warning(changes(before, after))
    assert f"when it tracks {sub} as a submodule" in text and f"from {repo}" in text
    assert changes(after, snapshot([str(repo)], after)) == []


def test_a_change_within_the_same_clock_tick_is_seen(repo: Path) -> None:
    """Same inode, same size, same mtime: only the racy rule (read again what changed just before it was
    read) tells the two contents apart."""
    config = repo / ".git" / "config"
    config.write_text("[alias]\n\tx = !echo safe\n")
    stamp = config.stat().st_mtime_ns
    before = snapshot([str(repo)])
    with open(config, "r+") as f:
        f.write("[alias]\n\tx = !echo evil\n")
    os.utime(config, ns=(stamp, stamp))
    after = snapshot([str(repo)], before)
    assert [(f.key, f.value) for f in changes(before, after)] == [("alias.x", "!echo evil")]


def test_worktrees_modules_includes_and_hooks_paths(repo: Path, tmp_path: Path) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    module = repo / ".git" / "modules" / "lib"
    module.mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "config").write_text("[core]\n\tbare = false\n")
    (repo / "hk").mkdir()
    age(repo)
    before = snapshot([str(repo)])
    worktree_git = repo / ".git" / "worktrees" / "wt"
    (worktree_git / "config.worktree").write_text("[core]\n\tsshCommand = x\n")
    (module / "config").write_text("[core]\n\tbare = false\n[merge \"m\"]\n\tdriver = x\n")
    (tmp_path / "one.cfg").write_text("[include]\n\tpath = two.cfg\n")
    (tmp_path / "two.cfg").write_text("[gpg]\n\tprogram = x\n[include]\n\tpath = one.cfg\n")  # a cycle
    git(repo, "config", "core.hooksPath", "hk")
    git(repo, "config", "include.path", str(tmp_path / "one.cfg"))  # git refuses the cycle from now on
    hook = repo / "hk" / "pre-push"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    (repo / "hk" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (repo / "hk" / "pre-commit.sample").chmod(0o755)
    (repo / "hk" / "post-merge").write_text("#!/bin/sh\n")  # not executable: git does not run it
    after = snapshot([str(repo)], before)
    assert sorted(keys(changes(before, after))) == sorted([
        (str(repo / ".git" / "config"), "core.hookspath"), (str(repo / ".git" / "config"), "include.path"),
        (str(worktree_git / "config.worktree"), "core.sshcommand"), (str(module / "config"), "merge.m.driver"),
        (str(tmp_path / "one.cfg"), "include.path"), (str(tmp_path / "two.cfg"), "include.path"),
        (str(tmp_path / "two.cfg"), "gpg.program"), (str(hook), "hook pre-push"),
    ])  # fmt: skip


def test_a_changed_hook_is_named_again(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho one\n")
    hook.chmod(0o755)
    before = snapshot([str(repo)])
    hook.write_text("#!/bin/sh\necho two\n")
    after = snapshot([str(repo)], before)
    assert keys(changes(before, after)) == [(str(hook), "hook pre-commit")]


def test_the_repository_above_a_root_and_the_gitmodules_file(repo: Path) -> None:
    inner = repo / "pkg"
    inner.mkdir()
    before = snapshot([str(inner)])
    git(repo, "config", "alias.x", "!x")
    (inner / ".gitmodules").write_text('[submodule "s"]\n\tpath = s\n\tupdate = !x\n\turl = ./s\n')
    after = snapshot([str(inner)], before)
    assert sorted(keys(changes(before, after))) == [(str(repo / ".git" / "config"), "alias.x"),
                                                    (str(inner / ".gitmodules"), "submodule.s.update")]  # fmt: skip


def test_symbolic_links_are_not_walked(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = snapshot([str(repo)])
    git(elsewhere, "init", "-q")
    git(elsewhere, "config", "alias.x", "!x")
    os.symlink(elsewhere, repo / "link")
    assert changes(before, snapshot([str(repo)], before)) == []


def test_a_walk_past_its_budget_says_so(repo: Path) -> None:
    before = snapshot([str(repo)], budget=20)
    for i in range(30):
        (repo / f"d{i}").mkdir()
    after = snapshot([str(repo)], before, budget=20)
    found = changes(before, after)
    assert [f.file for f in found] == [str(repo)]
    assert "more than" in warning(found) and changes(after, snapshot([str(repo)], after, budget=20)) == []


def test_the_command_directory_is_walked_in_full_in_a_large_root(repo: Path) -> None:
    for i in range(30):
        (repo / f"d{i}").mkdir()
    cwd = repo / "d29" / "deep"
    cwd.mkdir()
    watched = [str(cwd), str(repo)]
    before = snapshot(watched, budget=20)
    assert [where for where, _ in before.cut] == [str(repo)]
    git(cwd, "init", "-q", "sub")
    git(cwd / "sub", "config", "alias.x", "!x")
    after = snapshot(watched, before, budget=20)
    assert keys(changes(before, after)) == [(str(cwd / "sub" / ".git" / "config"), "alias.x")]
    assert len(after.dirs) == 20 + 2  # the command's directory and its new repository, then 20 of the root


def test_more_repositories_or_hooks_than_followed_are_reported(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(git_watch, "MAX_GITDIRS", 3)
    monkeypatch.setattr(git_watch, "MAX_HOOKS", 20)
    before = snapshot([str(repo)])
    for i in range(4):
        git(repo, "init", "-q", f"r{i}")
    for i in range(25):
        (repo / ".git" / "hooks" / f"junk{i}").touch()
    found = changes(before, snapshot([str(repo)], before))
    lines = warning(found).splitlines()[1:]
    assert sorted(f.file for f in found) == [str(repo), str(repo / ".git" / "hooks")], lines
    assert "more than 3 git directories" in "".join(lines) and "more than 20 entries" in "".join(lines)


def test_a_config_larger_than_the_cap_is_reported_when_it_changes(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(git_watch, "CONFIG_CAP", 1024)
    config = repo / ".git" / "config"
    before = snapshot([str(repo)])
    with open(config, "a") as f:
        f.write("# padding\n" * 200 + "[core]\n\tfsmonitor = touch x\n")
    found = changes(before, snapshot([str(repo)], before))
    assert keys(found) == [(str(config), "(size)")]
    assert "only its first 1024 bytes were checked" in warning(found)


def test_a_fifo_or_a_strange_name_does_not_hang_or_forge_lines(repo: Path) -> None:
    before = snapshot([str(repo)])
    odd = repo / "x\n- forged: line"
    odd.mkdir()
    git(odd, "init", "-q")
    (odd / ".git" / "config").unlink()
    os.mkfifo(odd / ".git" / "config")
    (odd / ".git" / "config.worktree").write_text("[alias]\n\tx = !a\x1b[2Jb\n")
    text = warning(changes(before, snapshot([str(repo)], before)))
    assert len(text.splitlines()) == 2 and "\\x0a- forged" in text and "\\x1b" in text


def test_the_state_of_nothing_is_empty() -> None:
    assert changes(GitState(), GitState()) == [] and warning([]) == ""
