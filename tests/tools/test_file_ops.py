"""The opt-in file tools move_file, delete_file and create_directory, and `--tools`, which publishes them:
through a real MCP client and server on real files, every change journaled and undone (by the undo tool and
by `coretools-mcp undo`), protected paths and symlink escapes refused, the default published set unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coretools.errors import ConfigurationError
from coretools.server.toolset import ToolSet
from tests.conftest import connect, make_config, text_of
from tests.support import REPO, ToolSession, snapshot
from tests.tools.test_schemas import gemini_problems

pytestmark = pytest.mark.anyio

NEW = ("create_directory", "move_file", "delete_file")
SERVE = ("--tools", "move_file,delete_file", "--tools", "create_directory", "--undo-tool")


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(tmp_path / "state"))


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "coretools", *args, "--root", str(root)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
    )  # fmt: skip


def test_the_default_set_is_unchanged_and_tools_adds_by_name(root: Path) -> None:
    plain = ToolSet(make_config([root]))
    for name in NEW:
        assert name not in plain.names and "--tools" in plain.unavailable[name]
    one = ToolSet(make_config([root], "--tools", "move_file"))
    assert one.names == [*plain.names, "move_file"]
    assert [d.model_dump() for d in one.definitions()][: len(plain.names)] == [
        d.model_dump() for d in plain.definitions()
    ]
    every = ToolSet(make_config([root], "--tools", "all"))
    assert set(NEW) <= set(every.names)
    unjournaled = ToolSet(make_config([root], "--tools", "all", "--no-journal"))
    for name in ("move_file", "delete_file"):
        assert "cannot be undone" in unjournaled.get(name).description
        assert "cannot be undone" not in every.get(name).description
    with pytest.raises(ConfigurationError) as refused:
        ToolSet(make_config([root], "--tools", "move_file,mv"))
    assert "'mv'" in str(refused.value) and "delete_file" in str(refused.value) and "all" in str(refused.value)


def test_tools_all_lists_them_with_gemini_safe_schemas_and_honest_annotations(root: Path) -> None:
    listed = cli(root, "tools", "--tools", "all")
    assert listed.returncode == 0, listed.stderr
    by_name = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    for name in NEW:
        assert gemini_problems(by_name[name]["inputSchema"]) == [], name
        notes = by_name[name]["annotations"]
        assert notes["readOnlyHint"] is False and notes["openWorldHint"] is False, name
        assert notes["destructiveHint"] is (name != "create_directory"), name


async def test_create_directory_inside_the_roots_only(root: Path, tmp_path: Path) -> None:
    (root / "out").symlink_to(tmp_path / "root-evil")
    outside = snapshot(tmp_path / "root-evil")
    async with connect([root], "legacy", *SERVE) as client:
        made = await client.call_tool("create_directory", {"path": str(root / "a" / "b")})
        assert not made.is_error and (root / "a" / "b").is_dir(), text_of(made)
        again = await client.call_tool("create_directory", {"path": "a/b"})
        assert not again.is_error and "already exists" in text_of(again)
        (root / "f").write_text("x")
        onto_file = await client.call_tool("create_directory", {"path": "f"})
        assert onto_file.is_error and "exists" in text_of(onto_file)
        for bad, needle in [(".git/hooks", ".git"), ("sub/.git", ".git"), ("out/new", "outside"),
                            ("../root-evil/new", "outside")]:  # fmt: skip
            refused = await client.call_tool("create_directory", {"path": bad})
            assert refused.is_error and needle in text_of(refused).lower(), (bad, text_of(refused))
    assert not (root / ".git").exists() and not (root / "sub").exists()
    assert snapshot(tmp_path / "root-evil") == outside


async def test_create_directory_is_undone_while_empty_by_the_tool_and_the_cli(root: Path) -> None:
    a, ab, abc = root / "a", root / "a" / "b", root / "a" / "b" / "c"
    (root / "kept").mkdir()
    async with connect([root], "legacy", *SERVE) as client:
        assert not (await client.call_tool("create_directory", {"path": str(abc)})).is_error and abc.is_dir()
        undone = await client.call_tool("undo", {"file_path": str(abc)})
        assert not undone.is_error and not a.exists(), text_of(undone)  # the parents it made went too
        assert f"removed {abc}, {ab}, {a}" in text_of(undone), text_of(undone)
        redone = await client.call_tool("undo", {"file_path": str(abc)})  # undoing the undo makes them again
        assert not redone.is_error and abc.is_dir(), text_of(redone)
        (ab / "notes.txt").write_text("keep me\n")
        refused = await client.call_tool("undo", {"file_path": str(abc)})
        assert refused.is_error and "notes.txt" in text_of(refused), text_of(refused)
        assert abc.is_dir() and (ab / "notes.txt").read_text() == "keep me\n"  # all or nothing: c made again
        (ab / "notes.txt").unlink()
        inside = await client.call_tool("create_directory", {"path": "kept/new"})
        assert not inside.is_error and (root / "kept" / "new").is_dir()
    history = cli(root, "history")
    assert history.returncode == 0, history.stderr
    assert f"create_directory  created directory {abc} (and its parents {a}, {ab})" in history.stdout, history.stdout
    assert f"removed directory {abc}" in history.stdout, history.stdout
    assert f"created directory {root / 'kept' / 'new'}\n" in history.stdout, history.stdout
    back = cli(root, "undo")  # the last entry: kept/new, which existed as kept before it: only new goes
    assert back.returncode == 0 and not (root / "kept" / "new").exists() and (root / "kept").is_dir(), back.stderr
    back = cli(root, "undo", str(abc))
    assert back.returncode == 0 and not a.exists(), back.stderr


async def test_undoing_create_directory_never_follows_what_took_its_place(root: Path, tmp_path: Path) -> None:
    victim, inner = tmp_path / "victim", root / "inner"
    victim.mkdir()
    inner.mkdir()
    async with connect([root], "legacy", *SERVE) as client:
        for name, target in [("made", victim), ("other", inner)]:
            assert not (await client.call_tool("create_directory", {"path": name})).is_error
            (root / name).rmdir()
            (root / name).symlink_to(target)
        refused = await client.call_tool("undo", {"file_path": str(root / "made")})
        assert refused.is_error and "symlink" in text_of(refused), text_of(refused)
    last = cli(root, "undo")  # `other`, now a link to a directory inside: the link is refused, not followed
    assert last.returncode != 0 and "symlink" in last.stderr, last.stderr
    for name, target in [("made", victim), ("other", inner)]:
        assert (root / name).is_symlink() and target.is_dir()
    (root / "other").unlink()
    gone = cli(root, "undo")  # nothing left to remove: dropped, so a plain undo does not stop there again
    assert gone.returncode == 0 and "gone already" in gone.stdout, gone
    before = cli(root, "undo")
    assert before.returncode != 0 and "symlink" in before.stderr and str(root / "made") in before.stderr, before
    assert (root / "made").is_symlink() and victim.is_dir() and inner.is_dir()


async def test_delete_file_is_journaled_and_undone_by_the_tool_and_the_cli(root: Path) -> None:
    f, g = root / "notes.txt", root / "keep" / "data.bin"
    f.write_text("first\nsecond\n")
    f.chmod(0o750)
    g.parent.mkdir()
    g.write_bytes(b"\x00\x01binary")
    async with connect([root], "legacy", *SERVE) as client:
        done = await client.call_tool("delete_file", {"path": str(f)})
        assert not done.is_error and not f.exists(), text_of(done)
        again = await client.call_tool("delete_file", {"path": str(f)})
        assert again.is_error and "not found" in text_of(again).lower()
        undone = await client.call_tool("undo", {"file_path": str(f)})
        assert not undone.is_error and f.read_text() == "first\nsecond\n", text_of(undone)
        assert f.stat().st_mode & 0o777 == 0o750
        gone = await client.call_tool("delete_file", {"path": "keep/data.bin"})
        assert not gone.is_error and not g.exists()
    history = cli(root, "history")
    assert history.returncode == 0 and "delete_file" in history.stdout and str(g) in history.stdout, history
    back = cli(root, "undo")
    assert back.returncode == 0, back.stderr
    assert g.read_bytes() == b"\x00\x01binary"


async def test_delete_file_refuses_what_it_must_not_remove(root: Path, tmp_path: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".env").write_text("TOKEN=1\n")
    (root / "dir").mkdir()
    (root / "real.txt").write_text("real\n")
    (root / "link.txt").symlink_to(root / "real.txt")
    (root / "out").symlink_to(tmp_path / "root-evil")
    before, outside = snapshot(root), snapshot(tmp_path / "root-evil")
    async with connect([root], "legacy", *SERVE) as client:
        for bad, needle in [(".git/config", ".git"), (".env", ".env"), ("dir", "directory"), ("link.txt", "symbolic"),
                            ("out/secret.txt", "outside"), ("../root-evil/secret.txt", "outside")]:  # fmt: skip
            refused = await client.call_tool("delete_file", {"path": bad})
            assert refused.is_error and needle in text_of(refused).lower(), (bad, text_of(refused))
    assert snapshot(root) == before and snapshot(tmp_path / "root-evil") == outside


async def test_move_file_never_replaces_unless_asked_and_is_undone_by_moving_back(root: Path) -> None:
    a, b, c = root / "a.py", root / "pkg" / "b.py", root / "c.py"
    a.write_text("A\n")
    c.write_text("C\n")
    async with connect([root], "legacy", *SERVE) as client:
        moved = await client.call_tool("move_file", {"source": str(a), "destination": str(b)})
        assert not moved.is_error and not a.exists() and b.read_text() == "A\n", text_of(moved)
        undone = await client.call_tool("undo", {"file_path": str(b)})
        assert not undone.is_error and "moved" in text_of(undone), text_of(undone)
        assert a.read_text() == "A\n" and not b.exists()
        redone = await client.call_tool("undo", {"file_path": str(a)})  # the undo is a move too: undone, it moves again
        assert not redone.is_error and not a.exists() and b.read_text() == "A\n", text_of(redone)
        assert not (await client.call_tool("undo", {"file_path": str(b)})).is_error and a.exists() and not b.exists()

        refused = await client.call_tool("move_file", {"source": "a.py", "destination": "c.py"})
        assert refused.is_error and "overwrite" in text_of(refused)
        assert a.read_text() == "A\n" and c.read_text() == "C\n"
        onto = await client.call_tool("move_file", {"source": "a.py", "destination": "c.py", "overwrite": True})
        assert not onto.is_error and not a.exists() and c.read_text() == "A\n", text_of(onto)
        by_source = await client.call_tool("undo", {"file_path": str(a)})
        assert not by_source.is_error, text_of(by_source)
        assert a.read_text() == "A\n" and c.read_text() == "C\n"
    history = cli(root, "history")
    assert "move_file" in history.stdout and f"moved from {a}" in history.stdout, history.stdout
    redo = cli(root, "undo", str(a))  # moving a.py onto c.py again would replace the restored c.py: refused
    assert redo.returncode != 0 and "already exists" in redo.stderr, redo.stderr
    assert a.read_text() == "A\n" and c.read_text() == "C\n"


async def test_move_file_refuses_protected_paths_and_escapes(root: Path, tmp_path: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".env").write_text("TOKEN=1\n")
    (root / "a.txt").write_text("a\n")
    (root / "d").mkdir()
    (root / "link.txt").symlink_to(root / "a.txt")
    (root / "out").symlink_to(tmp_path / "root-evil")
    before, outside = snapshot(root), snapshot(tmp_path / "root-evil")
    cases = [
        ("a.txt", ".git/hooks/pre-commit", ".git"), (".git/HEAD", "HEAD", ".git"), (".env", "env.txt", ".env"),
        ("a.txt", "config/.env", ".env"), ("a.txt", "out/a.txt", "outside"), ("out/secret.txt", "s.txt", "outside"),
        ("a.txt", "../root-evil/a.txt", "outside"), ("link.txt", "b.txt", "not a regular file"),
        ("a.txt", "a.txt", "same file"), ("a.txt", "d", "directory"), ("d", "e", "directory"),
        ("a.txt", ".", "does not name a file"),
    ]  # fmt: skip
    async with connect([root], "legacy", *SERVE) as client:
        for source, destination, needle in cases:
            refused = await client.call_tool("move_file", {"source": source, "destination": destination})
            assert refused.is_error and needle in text_of(refused).lower(), (source, destination, text_of(refused))
    assert snapshot(root) == before and snapshot(tmp_path / "root-evil") == outside
    history = cli(root, "history")  # a refused move leaves no entry to undo
    assert "move_file" not in history.stdout, history.stdout


async def test_confirm_edits_asks_before_a_deletion_or_a_move(root: Path) -> None:
    import mcp_types as types

    f = root / "f.txt"
    f.write_text("f\n")
    seen: list[str] = []
    answers = iter(["decline", "cancel", "accept"])

    async def user(context, params: types.ElicitRequestParams):
        seen.append(params.message)
        return types.ElicitResult(action=next(answers))

    async with connect([root], "legacy", *SERVE, "--confirm", "edits", elicitation_callback=user) as client:
        declined = await client.call_tool("delete_file", {"path": str(f)})
        assert declined.is_error and "declined" in text_of(declined) and f.exists()
        dismissed = await client.call_tool("move_file", {"source": "f.txt", "destination": "g.txt"})
        assert dismissed.is_error and "dismissed" in text_of(dismissed) and f.exists()
        accepted = await client.call_tool("move_file", {"source": "f.txt", "destination": "g.txt"})
        assert not accepted.is_error and (root / "g.txt").read_text() == "f\n" and not f.exists()
    assert seen == [f"delete_file: Delete {f}?", *[f"move_file: Move {f} to {root / 'g.txt'}?"] * 2]


async def test_the_sessions_own_deletion_or_move_is_no_stale_write(root: Path) -> None:
    f, a, b = root / "f.txt", root / "a.txt", root / "b.txt"
    f.write_text("f\n")
    a.write_text("a\n")
    async with connect([root], "legacy", *SERVE) as client:
        for path in (f, a):
            assert not (await client.call_tool("read_file", {"absolute_path": str(path)})).is_error
        assert not (await client.call_tool("delete_file", {"path": str(f)})).is_error
        again = await client.call_tool("write_file", {"file_path": str(f), "content": "new\n"})
        assert not again.is_error and f.read_text() == "new\n", text_of(again)
        assert not (await client.call_tool("move_file", {"source": str(a), "destination": str(b)})).is_error
        edited = await client.call_tool("replace", {"file_path": str(b), "old_string": "a", "new_string": "b"})
        assert not edited.is_error and b.read_text() == "b\n", text_of(edited)
        made = await client.call_tool("write_file", {"file_path": str(a), "content": "fresh\n"})
        assert not made.is_error and a.read_text() == "fresh\n", text_of(made)


async def test_a_path_ending_in_a_slash_names_a_directory(root: Path) -> None:
    async with ToolSession(root, "--tools", "all") as tools:
        written = await tools.call("write_file", file_path=f"{root}/newdir/", content="x\n")
        made = await tools.call("create_directory", path=f"{root}/made/")
    assert written.is_error and "names a directory" in text_of(written) and not (root / "newdir").exists()
    assert not made.is_error and (root / "made").is_dir()
