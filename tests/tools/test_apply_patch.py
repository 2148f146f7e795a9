"""The opt-in apply_patch tool (the Codex CLI's patch format) on real files: the grammar and its errors, every
hunk placed before any file changes (a failing hunk in the last file changes nothing), add, update, move and
delete, one journal entry per patch that one undo reverts, protected paths and links refused, the default
published set unchanged, and `kill -9` of a real stdio server in the middle of a patch: every file old or new,
and `coretools-mcp undo` puts every file back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coretools.errors import ToolError
from coretools.server.toolset import ToolSet
from coretools.tools.textedit import patch as grammar
from tests.conftest import connect, make_config, text_of
from tests.support import REPO, ToolSession, snapshot
from tests.tools.test_schemas import gemini_problems

pytestmark = pytest.mark.anyio

SERVE = ("--tools", "apply_patch", "--undo-tool")


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(tmp_path / "state"))


def patch(*body: str) -> str:
    return "\n".join(("*** Begin Patch", *body, "*** End Patch"))


def cli(root: Path, *args: str, state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "coretools", *args, "--root", str(root)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=60)  # fmt: skip


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_bytes().decode() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("text,says", [
    ("*** Update File: a.py\n@@\n-x\n+y", "first line must be '*** Begin Patch'"),
    ("*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y", "last line must be '*** End Patch'"),
    (patch(), "changes no file"),
    (patch("*** Frobnicate: a.py"), "line 2: '*** Frobnicate: a.py' is not a file header"),
    (patch("*** Update File: a.py"), "line 2: *** Update File: a.py has no hunk"),
    (patch("*** Update File: a.py", "@@ def f():", "-x", "oops"), "line 5: 'oops' in hunk 1 (@@ def f():) of a.py"),
    (patch("*** Update File: a.py", "@@", "@@ next", "-x"), "line 3: hunk 1 (@@) of a.py has no lines"),
    (patch("*** Add File:"), "line 2: '*** Add File:' names no path"),
    (patch(*[f"*** Delete File: f{i}" for i in range(grammar.MAX_PATCH_FILES + 1)]), "more than 200 files"),
    (patch("*** Add File: big", "+" + "x" * grammar.MAX_PATCH_CHARS), "split it into several apply_patch calls"),
])  # fmt: skip
def test_a_malformed_patch_is_refused_naming_the_line(text: str, says: str) -> None:
    with pytest.raises(ToolError) as refused:
        grammar.parse(text)
    assert says in refused.value.message and refused.value.message.endswith("Nothing was changed.")


def test_the_lenient_forms_codex_accepts() -> None:
    """A heredoc around the patch, padded markers, CRLF, a first hunk without @@, a unified diff's range
    header (its numbers ignored), and blank lines between a hunk and the next header."""
    text = ("<<'EOF'\r\n  *** Begin Patch  \r\n*** Update File: a.py\r\n def f():\r\n-    return 1\r\n+    return 2\r\n"
            "\r\n@@ -10,3 +10,3 @@ def g():\r\n-    pass\r\n+    return 3\r\n*** End Patch \r\nEOF\r\n")
    [op] = grammar.parse(text)
    assert [(h.header, h.old, h.new) for h in op.hunks] == [
        ("", ["def f():", "    return 1"], ["def f():", "    return 2"]),
        ("def g():", ["    pass"], ["    return 3"]),
    ]


def test_hunks_land_literally_then_by_the_near_miss_rules_never_between_two() -> None:
    text = "def f():\n    a = 1  \n    return a\n\n\ndef g():\n\treturn 'x \u2014 y'\n"
    rules = {
        "trailing whitespace": ("@@ def f():", "     a = 1", "-    return a", "+    return a + 1"),
        "indentation": ("@@", "   def f():", "-      a = 1", "+      a = 2"),
        "typographic punctuation": ("@@ def g():", "-\treturn 'x - y'", "+\treturn 'x - z'"),
        "blank lines": ("@@", "     return a", " def g():", "-\treturn 'x \u2014 y'", "+\treturn 0"),
    }
    for rule, body in rules.items():
        [op] = grammar.parse(patch("*** Update File: a.py", *body))
        new, [placed] = grammar.apply_hunks(text, op.hunks, "a.py")
        assert placed.rule == rule
    [op] = grammar.parse(patch("*** Update File: a.py", *rules["indentation"]))
    assert grammar.apply_hunks(text, op.hunks, "a.py")[0].split("\n")[1] == "    a = 2"  # the file's indentation
    twice = "if a:\n    x = 1\nif b:\n    x = 1\n"
    [op] = grammar.parse(patch("*** Update File: t.py", "@@", "-  x = 1", "+  x = 2"))
    assert grammar.apply_hunks(twice, op.hunks, "t.py")[0] == "if a:\n    x = 2\nif b:\n    x = 1\n"  # as literally
    nested = "if a:\n    x = 1\nif b:\n        x = 1\n"
    with pytest.raises(ToolError) as refused:
        grammar.apply_hunks(nested, op.hunks, "t.py")
    assert "match at several places (from lines 2, 4)" in refused.value.message
    [op] = grammar.parse(patch("*** Update File: t.py", "@@ if b:", "-    x = 1", "+    x = 2"))
    assert grammar.apply_hunks(nested, op.hunks, "t.py")[0] == "if a:\n    x = 1\nif b:\n        x = 2\n"


def test_a_hunk_that_changes_indentation_keeps_it_when_only_its_context_slipped() -> None:
    """The removed lines are the file's as written, the context lines carry tabs: the added lines are in the
    file's own indentation and land as written (re-basing them would undo the hunk's change)."""
    text = "Screen\n\n    .. attribute:: buffer\n\n   .. attribute:: dirty\n\n      A set of lines.\n"
    [op] = grammar.parse(patch("*** Update File: a.rst", "@@", " \t.. attribute:: buffer", " ",
                               "-   .. attribute:: dirty", "+    .. attribute:: dirty", " ",
                               "-      A set of lines.", "+       A set of lines."))  # fmt: skip
    new, [placed] = grammar.apply_hunks(text, op.hunks, "a.rst")
    assert placed.rule == "the indentation of its context lines"
    assert new == "Screen\n\n    .. attribute:: buffer\n\n    .. attribute:: dirty\n\n       A set of lines.\n"


def test_added_lines_where_blank_lines_were_left_out_are_refused_not_placed_by_guess() -> None:
    """`x` between `a` and `b`, whose blank line the patch left out, could go before or after it."""
    [op] = grammar.parse(patch("*** Update File: t.md", "@@", " a", "+x", " b"))
    with pytest.raises(ToolError) as refused:
        grammar.apply_hunks("a\n\nb\n", op.hunks, "t.md")
    assert "either side" in refused.value.message
    [op] = grammar.parse(patch("*** Update File: t.md", "@@", " a", "-b", "+x", " c"))
    assert grammar.apply_hunks("a\n\nb\nc\n", op.hunks, "t.md")[0] == "a\n\nx\nc\n"


def test_the_default_set_is_unchanged_and_tools_publishes_it(root: Path) -> None:
    plain = ToolSet(make_config([root]))
    assert "apply_patch" not in plain.names and "--tools" in plain.unavailable["apply_patch"]
    one = ToolSet(make_config([root], "--tools", "apply_patch"))
    assert one.names == [*plain.names, "apply_patch"]
    assert [d.model_dump() for d in one.definitions()][: len(plain.names)] == [
        d.model_dump() for d in plain.definitions()
    ]
    [listed] = [d.model_dump(by_alias=True) for d in one.definitions() if d.name == "apply_patch"]
    assert gemini_problems(listed["inputSchema"]) == []
    notes = listed["annotations"]
    assert notes["destructiveHint"] is True and notes["readOnlyHint"] is False and notes["idempotentHint"] is False
    assert "apply_patch" in ToolSet(make_config([root], "--tools", "all")).names


async def test_add_update_move_delete_then_one_undo_reverts_the_whole_patch(root: Path, tmp_path: Path) -> None:
    (root / "a.py").write_text("import os\n\n\ndef f():\n    return 1\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "old.py").write_text("x = 1\n")
    (root / "old.py").chmod(0o750)
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    before = tree(root)
    body = patch(
        "*** Update File: a.py", "@@ def f():", "-    return 1", "+    return 2",
        "*** Add File: pkg/new.py", "+VALUE = 3",
        "*** Delete File: gone.txt",
        "*** Update File: old.py", "*** Move to: pkg/moved.py", " x = 1", "+y = 2",
        f"*** Update File: {root / 'crlf.txt'}", "@@", " one", "-two", "+2",
    )  # fmt: skip
    async with connect([root], "legacy", *SERVE) as client:
        done = await client.call_tool("apply_patch", {"patch": body})
        assert not done.is_error, text_of(done)
        assert tree(root) == {"a.py": "import os\n\n\ndef f():\n    return 2\n", "crlf.txt": "one\r\n2\r\n",
                              "pkg/moved.py": "x = 1\ny = 2\n", "pkg/new.py": "VALUE = 3\n"}  # fmt: skip
        assert (root / "pkg" / "moved.py").stat().st_mode & 0o777 == 0o750
        assert "one undo reverts all of it" in text_of(done)
        history = cli(root, "history", state=tmp_path / "state")
        [line] = history.stdout.splitlines()
        assert "apply_patch" in line and "6 files" in line and str(root / "gone.txt") in line
        undone = await client.call_tool("undo", {"file_path": str(root / "pkg" / "new.py")})
        assert not undone.is_error and "all its files together" in text_of(undone), text_of(undone)
        assert tree(root) == before and not (root / "pkg" / "new.py").exists()
        assert (root / "old.py").stat().st_mode & 0o777 == 0o750
        redone = await client.call_tool("undo", {"file_path": str(root / "a.py")})
        assert not redone.is_error and tree(root)["pkg/moved.py"] == "x = 1\ny = 2\n"
        again = await client.call_tool("apply_patch", {"patch": body})
        assert again.is_error and "seems applied already" in text_of(again), text_of(again)
        seen = await client.call_tool("read_file", {"absolute_path": str(root / "a.py")})
        assert not seen.is_error
        (root / "a.py").write_text("import os\n\n\ndef f():\n    return 1\n")  # by another program
        stale = await client.call_tool("apply_patch", {"patch": patch("*** Update File: a.py", "@@", "-    return 1",
                                                                      "+    return 3")})  # fmt: skip
        assert stale.is_error and "since" in text_of(stale), text_of(stale)
        assert (root / "a.py").read_text().endswith("return 1\n")


async def test_a_failing_hunk_in_the_last_file_changes_no_file(root: Path) -> None:
    for name in ("one.py", "two.py", "three.py"):
        (root / name).write_text(f"def {name[:-3]}():\n    return 1\n\n\ndef other():\n    return 1\n")
    before = tree(root)
    body = patch(
        "*** Update File: one.py", "@@ def one():", "-    return 1", "+    return 2",
        "*** Add File: four.py", "+x = 4",
        "*** Update File: two.py", "@@ def two():", "-    return 1", "+    return 2",
        "*** Update File: three.py", "@@ def three():", "     return 1", "-", "-", "-def missing():", "+",
    )  # fmt: skip
    async with ToolSession(root, *SERVE) as tools:
        failed = await tools.call("apply_patch", patch=body)
        message = text_of(failed)
        assert failed.is_error and tree(root) == before, message
        assert f"in {root / 'three.py'}, hunk 1 (@@ def three():)" in message
        assert "Nothing was changed" in message and "def other():" in message  # the nearest text, numbered
        assert "|" in message
        same = await tools.call("apply_patch", patch=patch("*** Update File: one.py", "@@", " def one():"))
        assert not same.is_error and "No changes" in text_of(same) and tree(root) == before, text_of(same)
        unjournaled = await tools.call("undo", file_path=str(root / "one.py"))
        assert unjournaled.is_error and "No journaled edit" in text_of(unjournaled)


async def test_undoing_a_patch_one_of_whose_files_changed_since_is_refused_whole(root: Path) -> None:
    for name in ("a.py", "b.py"):
        (root / name).write_text("x = 1\n")
    hunks = [(f"*** Update File: {name}", "@@", "-x = 1", "+x = 2") for name in ("a.py", "b.py")]
    async with ToolSession(root, *SERVE) as tools:
        assert not (await tools.call("apply_patch", patch=patch(*[line for h in hunks for line in h]))).is_error
        edited = await tools.call("replace", file_path=str(root / "a.py"), old_string="x = 2", new_string="x = 3")
        assert not edited.is_error
        refused = await tools.call("undo", file_path=str(root / "b.py"))
        assert refused.is_error and "edited again after edit 1 (edit 2); undo that first" in text_of(refused)
        assert tree(root) == {"a.py": "x = 3\n", "b.py": "x = 2\n"}
        assert not (await tools.call("undo", file_path=str(root / "a.py"))).is_error  # the replace
        whole = await tools.call("undo", file_path=str(root / "b.py"))  # now the patch, both files
        assert not whole.is_error and tree(root) == {"a.py": "x = 1\n", "b.py": "x = 1\n"}, text_of(whole)


async def test_protected_paths_and_escaping_links_are_refused_at_either_end(root: Path, tmp_path: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "ok.py").write_text("x = 1\n")
    (root / "link.py").symlink_to(tmp_path / "root-evil" / "secret.txt")
    (root / "out").symlink_to(tmp_path / "root-evil")
    decoy = snapshot(tmp_path / "root-evil")
    before = tree(root)
    cases = {
        "Update File: .git/config": patch("*** Update File: .git/config", "@@", "-[core]", "+[x]"),
        "Add File: .env": patch("*** Add File: .env", "+TOKEN=1"),
        "Move to: .git/hooks/post-commit": patch("*** Update File: ok.py", "*** Move to: .git/hooks/post-commit",
                                                 " x = 1", "+y = 2"),
        "Delete File: link": patch("*** Delete File: link.py"),
        "Update File: link": patch("*** Update File: link.py", "@@", "-DECOY SECRET", "+owned"),
        "outside": patch(f"*** Add File: {tmp_path / 'root-evil' / 'new.txt'}", "+x"),
        "climbing": patch("*** Add File: ../root-evil/new.txt", "+x"),
        "through a linked directory": patch("*** Add File: ok2.py", "+x", "*** Add File: out/new.txt", "+x"),
        "moved through a linked directory": patch("*** Update File: ok.py", "*** Move to: out/ok.py", " x = 1"),
    }  # fmt: skip
    async with ToolSession(root, *SERVE) as tools:
        for case, body in cases.items():
            refused = await tools.call("apply_patch", patch=body)
            assert refused.is_error, (case, text_of(refused))
            assert "Internal error" not in text_of(refused) and "Traceback" not in text_of(refused)
    assert tree(root) == before and snapshot(tmp_path / "root-evil") == decoy


async def test_a_file_swapped_for_a_link_after_planning_is_not_followed_and_the_patch_is_put_back(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between placing the hunks and writing, b.py becomes a link to a file outside the roots: its write is
    refused (the file is not the one read), a.py, already written, is put back, and the journal entry is
    voided: no file changed, outside or in, and nothing to undo."""
    from coretools.tools.apply_patch import ApplyPatch

    for name in ("a.py", "b.py"):
        (root / name).write_text("x = 1\n")
    decoy = snapshot(tmp_path / "root-evil")
    commit = ApplyPatch._commit

    def swap_then_commit(self, ws, prepared, views):
        (root / "b.py").unlink()
        (root / "b.py").symlink_to(tmp_path / "root-evil" / "secret.txt")
        return commit(self, ws, prepared, views)

    monkeypatch.setattr(ApplyPatch, "_commit", swap_then_commit)
    hunks = [(f"*** Update File: {name}", "@@", "-x = 1", "+x = 2") for name in ("a.py", "b.py")]
    body = patch(*[line for hunk in hunks for line in hunk])
    async with ToolSession(root, *SERVE) as tools:
        refused = await tools.call("apply_patch", patch=body)
        assert refused.is_error and "Internal error" not in text_of(refused), text_of(refused)
        assert (root / "a.py").read_text() == "x = 1\n" and snapshot(tmp_path / "root-evil") == decoy
        nothing = await tools.call("undo", file_path=str(root / "a.py"))
        assert nothing.is_error and "nothing to undo" in text_of(nothing), text_of(nothing)


async def test_confirm_edits_without_a_client_that_can_ask_changes_nothing(root: Path) -> None:
    (root / "a.py").write_text("x = 1\n")
    async with ToolSession(root, "--tools", "apply_patch", "--confirm", "edits") as tools:
        assert "confirm" in tools.toolset.get("apply_patch").description
        for _ in range(2):  # the edit locks were let go: the second call is refused the same way, not stuck
            refused = await tools.call("apply_patch", patch=patch("*** Update File: a.py", "@@", "-x = 1", "+x = 2"))
            assert refused.is_error and "No file was changed" in text_of(refused), text_of(refused)
    assert (root / "a.py").read_text() == "x = 1\n"


ZYGOTE = """
import os, signal, sys
from coretools.workspace import journal
calls, stop = [0], int(os.environ["KILL_AT_CHANGE"])
change = journal._change_one
def dying(*args, **kwargs):
    if calls[0] == stop:
        os.kill(os.getpid(), signal.SIGKILL)
    calls[0] += 1
    return change(*args, **kwargs)
journal._change_one = dying
from coretools.cli import main
sys.argv = ["coretools-mcp", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL of a real server")
@pytest.mark.timeout(300)
def test_kill_9_in_the_middle_of_a_patch_leaves_each_file_old_or_new_and_undo_puts_all_back(
    root: Path, tmp_path: Path
) -> None:
    """A real stdio server applying a 6-change patch is killed before its Nth file change (N = 0 is just after
    the journal record is durable), for several N: every file is its old or new content, and the CLI's undo
    puts all of them back. The hook (test code, loaded before the server) counts the journal's file changes."""
    old = {"a.py": "def a():\n    return 1\n", "b.py": "def b():\n    return 1\n", "gone.txt": "bye\n",
           "src.py": "s = 1\n"}  # fmt: skip
    new = {"a.py": "def a():\n    return 2\n", "b.py": "def b():\n    return 2\n", "c.py": "c = 3\n",
           "dst.py": "s = 1\nt = 2\n"}  # fmt: skip
    body = patch(
        "*** Update File: a.py", "@@", " def a():", "-    return 1", "+    return 2",
        "*** Update File: b.py", "@@", " def b():", "-    return 1", "+    return 2",
        "*** Add File: c.py", "+c = 3",
        "*** Delete File: gone.txt",
        "*** Update File: src.py", "*** Move to: dst.py", " s = 1", "+t = 2",
    )  # fmt: skip
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CORETOOLS_STATE_DIR": str(state)}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "apply_patch",
                                                                          "arguments": {"patch": body}}}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    for n in (0, 1, 3, 5):
        for name in new:
            (root / name).unlink(missing_ok=True)
        for name, content in old.items():
            (root / name).write_text(content)
        proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, "serve", "--root", str(root), *SERVE], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env={**env, "KILL_AT_CHANGE": str(n)},
        )  # fmt: skip
        messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]  # fmt: skip
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        proc.stdin.flush()  # and kept open: a server whose input ends stops before its call is done
        try:
            assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read().decode()
        finally:
            proc.kill()
            proc.stdin.close()
            proc.stderr.close()
        now = tree(root)
        for name in set(old) | set(new):
            assert now.get(name) in (old.get(name), new.get(name)), (n, name, now.get(name))
        assert sum(now.get(name) == new.get(name) for name in new) >= (n > 0)
        undone = cli(root, "undo", state=state)
        assert undone.returncode == 0, undone.stderr
        assert tree(root) == old, (n, undone.stdout)
