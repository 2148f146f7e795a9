"""The opt-in edit_file tool: several replacements in one file, all or nothing, each through replace's own
cascade and guards. Through the server's tool set (and a real MCP client where a session or the user's
confirmation matters) on real files: a failing edit changes nothing and is named by its index, a dry run
writes and journals nothing, one undo reverts a whole call, edits apply in order, protected paths and a file
swapped for a link between reading and writing are refused, and the default published set is unchanged."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from coretools.server.toolset import ToolSet
from tests.conftest import connect, make_config
from tests.support import REPO, ToolSession, snapshot, text_of
from tests.tools.test_schemas import gemini_problems

pytestmark = pytest.mark.anyio

SERVE = ("--tools", "edit_file", "--undo-tool")
MODULE = (
    "def load_users(db):\n    rows = db.query('users')\n    return [User(r) for r in rows]\n\n\n"
    "def load_groups(db):\n    rows = db.query('groups')\n    return [Group(r) for r in rows]\n"
)


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(tmp_path / "state"))


def edit(old: str, new: str, **more: object) -> dict:
    return {"old_string": old, "new_string": new, **more}


async def edit_file(root: Path, name: str, content: str | bytes, *calls: list[dict], **more: object):
    """Write `content` to `name`, send each list of edits in turn; the results and the file's bytes."""
    f = root / name
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    async with ToolSession(root, *SERVE) as server:
        results = [await server.call("edit_file", file_path=str(f), edits=edits, **more) for edits in calls]
    return results, f.read_bytes()


def test_published_only_with_tools_and_the_default_set_is_unchanged(root: Path) -> None:
    plain = ToolSet(make_config([root]))
    assert "edit_file" not in plain.names and "--tools" in plain.unavailable["edit_file"]
    added = ToolSet(make_config([root], "--tools", "edit_file"))
    assert added.names == [*plain.names, "edit_file"]
    assert [d.model_dump() for d in added.definitions() if d.name != "edit_file"] == [
        d.model_dump() for d in plain.definitions()
    ]
    assert "one undo reverts all" in added.get("edit_file").description
    unjournaled = ToolSet(make_config([root], "--tools", "edit_file", "--no-journal"))
    assert "undo" not in unjournaled.get("edit_file").description
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "coretools", "tools", "--tools", "edit_file", "--root", str(root)],
                            capture_output=True, text=True, cwd=REPO, env=env, timeout=60)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    tool = next(t for t in json.loads(listed.stdout)["tools"] if t["name"] == "edit_file")
    assert gemini_problems(tool["inputSchema"]) == []
    notes = tool["annotations"]
    assert (notes["readOnlyHint"], notes["destructiveHint"], notes["idempotentHint"], notes["openWorldHint"]) == (
        False, True, False, False)


async def test_a_failing_edit_changes_nothing_and_is_named_with_the_nearest_text(root: Path) -> None:
    calls = (
        [edit("'users'", "'people'"), edit("return [Group(r) for r in row]", "return []"),
         edit("load_groups", "load_teams")],  # no literal match, and none near enough in one clear place
        [edit("'users'", "'people'"), edit("rows = db.query", "rows = db.fetch")],  # two places, not allowed
    )
    (missing, ambiguous), after = await edit_file(root, "m.py", MODULE, *calls)
    assert after.decode() == MODULE
    msg = text_of(missing)
    assert missing.is_error and msg.startswith("edits[1] (edit 2 of 3) cannot be applied, so none of the edits was")
    assert "unchanged (line numbers below are of the text as edits[0] left it)" in msg
    assert "8|     return [Group(r) for r in rows]" in msg, msg
    msg = text_of(ambiguous)
    assert ambiguous.is_error and msg.startswith("edits[1] (edit 2 of 2)") and "found 2" in msg
    assert "line(s) 2, 7" in msg and "set allow_multiple to true in this edit" in msg
    assert ambiguous.structured["error"]["kind"] == "edit_expected_occurrence_mismatch"


async def test_allow_multiple_replaces_every_occurrence(root: Path) -> None:
    (res,), after = await edit_file(root, "m.py", MODULE, [edit("rows", "items", allow_multiple=True),
                                                           edit("'users'", "'people'")])
    assert not res.is_error and "(2 edits, 5 replacements)" in text_of(res), text_of(res)
    assert after.decode() == MODULE.replace("rows", "items").replace("'users'", "'people'")


async def test_edits_apply_in_order_to_the_text_as_it_stands(root: Path) -> None:
    src = "a = 1\nb = 2\n"
    # The second edit changes what the first put in.
    (chained,), after = await edit_file(root, "o.py", src, [edit("a = 1\n", "a = 1\nc = 3\n"), edit("c = 3", "c = 4")])
    assert not chained.is_error and after.decode() == "a = 1\nc = 4\nb = 2\n", text_of(chained)
    # A new_string that repeats a later old_string makes that one ambiguous: refused, not guessed.
    (twice,), after = await edit_file(root, "o.py", src, [edit("a = 1\n", "b = 2\na = 1\n"), edit("b = 2", "b = 5")])
    assert twice.is_error and after.decode() == src
    assert text_of(twice).startswith("edits[1] ") and "found 2" in text_of(twice)
    # Edits that together change nothing.
    (undone,), after = await edit_file(root, "o.py", src, [edit("a = 1", "a = 9"), edit("a = 9", "a = 1")])
    assert undone.is_error and "leave" in text_of(undone) and after.decode() == src


async def test_dry_run_shows_the_diff_and_writes_and_journals_nothing(root: Path) -> None:
    f = root / "m.py"
    f.write_text(MODULE)
    mtime = f.stat().st_mtime_ns
    async with ToolSession(root, *SERVE) as server:
        dry = await server.call("edit_file", file_path=str(f), dry_run=True,
                                edits=[edit("'users'", "'people'"), edit("return [Group(r) for r in rows]", "return [")])
        msg = text_of(dry)
        assert not dry.is_error and msg.startswith("Dry run: nothing was written."), msg
        assert "-  |    rows = db.query('users')\n+ 2|    rows = db.query('people')" in msg
        assert "Note: after these edits, line 8 has a syntax error" in msg
        assert f.read_text() == MODULE and f.stat().st_mtime_ns == mtime
        nothing = await server.call("undo", file_path=str(f))
        assert nothing.is_error and "nothing to undo" in text_of(nothing).lower(), text_of(nothing)


async def test_one_undo_reverts_every_edit_of_a_call(root: Path) -> None:
    f = root / "m.py"
    f.write_text(MODULE)
    async with ToolSession(root, *SERVE) as server:
        done = await server.call("edit_file", file_path=str(f), edits=[
            edit("'users'", "'people'"), edit("load_groups", "load_teams"), edit("Group(r)", "Team(r)")])
        assert not done.is_error and "load_teams" in f.read_text(), text_of(done)
        undone = await server.call("undo", file_path=str(f))
        assert not undone.is_error and "edit_file" in text_of(undone), text_of(undone)
        assert f.read_text() == MODULE
        gone = await server.call("undo", file_path=str(f))  # the undo itself is the one entry left
        assert not gone.is_error and "load_teams" in f.read_text()


async def test_replaces_guards_hold_for_each_edit(root: Path) -> None:
    cls = "class A:\n    def f(self):\n        x = 1\n        return x\n"
    # A near miss (dedented) is recovered and re-indented, and the note names the edit.
    (res,), after = await edit_file(root, "a.py", cls, [edit("x = 1\nreturn x\n", "x = 1\ny = 2\nreturn x\n")])
    assert not res.is_error and "edits[0]: old_string was not found exactly; it matched line by line" in text_of(res), text_of(res)
    assert after.decode() == cls.replace("x = 1\n", "x = 1\n        y = 2\n")
    # The same call again is answered "already applied": the look-alike sibling function is left alone.
    old = "def load_groups(db):\n    rows = db.query('groups')\n    return [Group(r) for r in rows]\n"
    users = "    return [User(r) for r in rows]\n"
    calls = [[edit(users, users.replace("rows]", "rows if r]")),
              edit(old, old.replace("'groups')", "'groups', cached=True)"))]] * 2
    (first, again), after = await edit_file(root, "m.py", MODULE, *calls)
    assert not first.is_error and again.is_error, text_of(first)
    assert text_of(again).startswith("edits[0] ") and "Already applied at lines 3-3" in text_of(again), text_of(again)
    assert after.decode() == MODULE.replace("rows]\n\n", "rows if r]\n\n").replace("'groups')", "'groups', cached=True)")
    (second,), after = await edit_file(root, "m.py", after, calls[0][1:])
    assert second.is_error and "Already applied at lines 6-8" in text_of(second), text_of(second)
    # A recovered edit whose result breaks the syntax is refused; a literal one is applied with the note.
    broken = edit("def f(self):\n  x = 1\n  return x\n", "def f(self):\n  x = 1\n    y = 2\n  return x\n")
    (refused,), after = await edit_file(root, "a.py", cls, [edit("class A:", "class B:"), broken])
    assert refused.is_error and after.decode() == cls
    msg = text_of(refused)
    assert msg.startswith("edits[1] ") and "line 4 has a syntax error (Python" in msg and "all the edits" in msg
    (literal,), after = await edit_file(root, "a.py", cls, [edit("        return x\n", "        return x +\n")])
    assert not literal.is_error and "Note: after this edit, line 4 has a syntax error" in text_of(literal)
    # An omission placeholder, an empty old_string, and a no-op edit are refused before the file is read.
    for edits, needle in [([edit("class A", "class B"), edit("        x = 1\n        return x\n",
                                                           "        x = 2\n        # ... rest of code ...\n")],
                           "edits[1] (edit 2 of 2) cannot be applied"),
                          ([edit("", "x")], "old_string is empty"), ([edit("x", "x")], "identical")]:  # fmt: skip
        (res,), after = await edit_file(root, "a.py", cls, edits)
        assert res.is_error and needle in text_of(res) and after.decode() == cls, text_of(res)


async def test_encoding_and_line_endings_are_kept(root: Path) -> None:
    src = "line one\r\nline two\r\nline three\r\n".encode("utf-16")  # with its byte order mark
    (res,), after = await edit_file(root, "w.txt", src, [edit("line one\nline two", "line 1\nline 2"),
                                                         edit("three", "3")])
    assert not res.is_error, text_of(res)
    assert after == "line 1\r\nline 2\r\nline 3\r\n".encode("utf-16")


async def test_bounds_are_refused_with_the_cap_named(root: Path) -> None:
    many = [edit(f"x{i}", f"y{i}") for i in range(101)]
    (count, size), after = await edit_file(
        root, "b.txt", "x\n", many, [edit("x", "y" * (2 * 1024 * 1024)), edit("y", "z" * (2 * 1024 * 1024))])
    assert count.is_error and "more than 100 items" in text_of(count), text_of(count)
    assert size.is_error and "limit of 4,194,304" in text_of(size), text_of(size)
    assert after == b"x\n"


async def test_protected_paths_links_out_and_missing_files_are_refused(root: Path, tmp_path: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".env").write_text("TOKEN=1\n")
    (tmp_path / "root-evil" / "secret.txt").write_text("TOKEN=1\n")
    (root / "out.txt").symlink_to(tmp_path / "root-evil" / "secret.txt")
    before, outside = snapshot(root), snapshot(tmp_path / "root-evil")
    async with ToolSession(root, *SERVE) as server:
        for path, needle in [(".git/config", ".git"), (".env", ".env"), ("out.txt", "outside"),
                             ("../root-evil/secret.txt", "outside"), ("new.txt", "write_file")]:  # fmt: skip
            res = await server.call("edit_file", file_path=path, edits=[edit("TOKEN=1", "TOKEN=2"),
                                                                        edit("[core]", "[x]")])
            assert res.is_error and needle in text_of(res).lower(), (path, text_of(res))
    assert snapshot(root) == before and snapshot(tmp_path / "root-evil") == outside


async def test_stale_file_and_a_file_swapped_for_a_link_before_the_write_are_refused(root: Path, tmp_path: Path) -> None:
    import mcp_types as types

    f, secret = root / "m.py", tmp_path / "root-evil" / "secret.py"
    f.write_text(MODULE)
    secret.write_text(MODULE)

    async def swap(context, params: types.ElicitRequestParams):  # the user is asked: meanwhile, f becomes a link
        f.unlink()
        f.symlink_to(secret)
        return types.ElicitResult(action="accept")

    async with connect([root], "legacy", *SERVE, "--confirm", "edits", elicitation_callback=swap) as client:
        assert not (await client.call_tool("read_file", {"absolute_path": str(f)})).is_error
        f.write_text(MODULE + "# changed by hand\n")
        stale = await client.call_tool("edit_file", {"file_path": str(f), "edits": [edit("'users'", "'x'")]})
        assert stale.is_error and "changed" in text_of(stale) and "hand" in f.read_text(), text_of(stale)
        assert not (await client.call_tool("read_file", {"absolute_path": str(f)})).is_error
        swapped = await client.call_tool("edit_file", {"file_path": str(f), "edits": [edit("'users'", "'x'"),
                                                                                       edit("'groups'", "'y'")]})
    assert swapped.is_error and "not in workspace" in text_of(swapped), text_of(swapped)
    assert secret.read_text() == MODULE and f.is_symlink()


def test_the_diff_of_a_call_is_composed_from_its_edits() -> None:
    from coretools.tools.edit_file import _compose

    rng = random.Random(7)
    for _ in range(300):
        original = text = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 40)))
        regions: list[tuple[int, int, int, int]] = []
        for _ in range(rng.randint(1, 5)):
            cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, 2 * rng.randint(1, 3))))
            spans = list(zip(cuts[::2], cuts[1::2]))
            pieces, raw, pos, npos = [], [], 0, 0
            for s, e in spans:
                rep = "".join(rng.choice("xy\n") for _ in range(rng.randint(0, 4)))
                pieces += [text[pos:s], rep]
                npos += s - pos
                raw.append((s, e, npos, npos + len(rep)))
                npos, pos = npos + len(rep), e
            text = "".join([*pieces, text[pos:]])
            regions = _compose(regions, raw)
        rebuilt, pos = [], 0
        for os_, oe, ns, ne in regions:
            assert os_ >= pos and oe >= os_ and ne >= ns and ns == len("".join(rebuilt)) + os_ - pos
            rebuilt += [original[pos:os_], text[ns:ne]]
            pos = oe
        rebuilt.append(original[pos:])
        assert "".join(rebuilt) == text
        assert all(a[1] < b[0] for a, b in zip(regions, regions[1:]))
