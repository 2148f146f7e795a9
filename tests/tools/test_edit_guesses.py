"""A recovered edit is never a wrong edit: new_string re-based on the matched block's indentation whichever
indentation old_string and new_string were each sent in, a recovered edit that would break the file's syntax
refused, a repeated edit answered "already applied" before any near-miss strategy could edit a look-alike,
and the wider placeholder guard (TODO/NOTE-prefixed comments, prose lines in documents). Every call goes
through the server's tool set (validation, sandbox, plan, atomic write) on real files."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ToolSession, text_of

pytestmark = pytest.mark.anyio


async def replace(root: Path, name: str, content: str, *calls: tuple[str, str]) -> tuple[list, str]:
    """Write `content` to `name`, send each (old_string, new_string) in turn; the results and the file."""
    f = root / name
    f.write_text(content)
    async with ToolSession(root) as server:
        results = [await server.call("replace", file_path=str(f), old_string=old, new_string=new)
                   for old, new in calls]
    return results, f.read_text()


# -- re-indentation -------------------------------------------------------------------------------------------

CLASS = "class A:\n    def f(self):\n        x = 1\n        return x\n\n    def g(self):\n        pass\n"
EDITED = CLASS.replace("x = 1\n", "x = 1\n        y = 2\n")


async def test_old_dedented_and_new_in_the_files_indentation_is_shifted_once(root: Path) -> None:
    (res,), after = await replace(root, "a.py", CLASS,
                                  ("x = 1\nreturn x\n", "        x = 1\n        y = 2\n        return x\n"))
    assert not res.is_error, text_of(res)
    assert after == EDITED


async def test_old_in_the_files_indentation_and_new_dedented_is_rebased(root: Path) -> None:
    old = "        x = 1  \n        return x\n"  # the file's indentation, trailing blanks: not literal
    (res,), after = await replace(root, "a.py", CLASS, (old, "x = 1\ny = 2\nreturn x\n"))
    assert not res.is_error, text_of(res)
    assert after == EDITED


async def test_old_at_column_two_and_new_at_column_zero_in_a_tab_file(root: Path) -> None:
    src = "int f() {\n\tif (a) {\n\t\tb();\n\t}\n}\n"
    call = ("  if (a) {\n      b();\n  }\n", "if (a) {\n    b();\n    c();\n}\n")
    (res,), after = await replace(root, "a.c", src, call)
    assert not res.is_error, text_of(res)
    assert after == "int f() {\n\tif (a) {\n\t\tb();\n\t\tc();\n\t}\n}\n"


@pytest.mark.parametrize("new", [
    "if c:\n    x = 1\n    return x\n",  # in old_string's indentation
    "        if c:\n            x = 1\n            return x\n",  # in the file's
])
async def test_wrapping_lines_in_a_block_lands_in_the_files_indentation(root: Path, new: str) -> None:
    (res,), after = await replace(root, "a.py", CLASS, ("x = 1\nreturn x\n", new))
    assert not res.is_error, text_of(res)
    assert after == CLASS.replace("        x = 1\n        return x\n",
                                  "        if c:\n            x = 1\n            return x\n")


async def test_two_readings_of_the_indentation_are_refused(root: Path) -> None:
    # The first line deleted and the rest one step shallower: unwrapped in old_string's indentation (column
    # 4), or the same lines sent in an indentation of their own (column 8)? Nothing is guessed.
    src = "def f():\n    if c:\n        a = 1\n        b = 2\n    return a\n"
    (res,), after = await replace(root, "a.py", src, ("if c:\n    a = 1\n    b = 2\n", "a = 1\nb = 2\n"))
    assert res.is_error and after == src
    assert "fits two readings" in text_of(res) and "column 4 or column 8" in text_of(res)


# -- a recovered edit that breaks the syntax --------------------------------------------------------------------


async def test_recovered_edit_that_breaks_the_syntax_is_refused_with_where_and_why(root: Path) -> None:
    call = ("def f(self):\n  x = 1\n  return x\n", "def f(self):\n  x = 1\n    y = 2\n  return x\n")
    (res,), after = await replace(root, "a.py", CLASS, call)
    assert res.is_error and after == CLASS
    msg = text_of(res)
    assert "matched line by line ignoring whitespace at lines 2-4" in msg
    assert "line 4 has a syntax error (Python" in msg and "unexpected indent" in msg and "Nothing was changed" in msg
    assert "     2|     def f(self):" in msg and "     4|         return x" in msg
    assert res.structured["error"]["kind"] == "edit_no_occurrence_found"


async def test_literal_edit_that_breaks_the_syntax_is_applied_with_the_note(root: Path) -> None:
    (res,), after = await replace(root, "a.py", CLASS, ("        return x\n", "        return x +\n"))
    assert not res.is_error and "Note: after this edit, line 4 has a syntax error" in text_of(res)
    assert after == CLASS.replace("return x\n", "return x +\n")


async def test_recovered_edit_of_an_already_broken_file_is_applied(root: Path) -> None:
    src = CLASS + "def broken(:\n"
    (res,), after = await replace(root, "a.py", src, ("x = 1\nreturn x\n", "x = 2\nreturn x\n"))
    assert not res.is_error, text_of(res)
    assert after == src.replace("x = 1", "x = 2")


# -- a repeated edit ------------------------------------------------------------------------------------------

SIBLINGS = (
    "def load_users(db):\n    rows = db.query('users')\n    return [User(r) for r in rows]\n\n\n"
    "def load_groups(db):\n    rows = db.query('groups')\n    return [Group(r) for r in rows]\n"
)


async def test_replayed_edit_is_already_applied_and_the_sibling_untouched(root: Path) -> None:
    old = "def load_groups(db):\n    rows = db.query('groups')\n    return [Group(r) for r in rows]\n"
    new = old.replace("'groups')", "'groups', cached=True)")
    (first, second), after = await replace(root, "m.py", SIBLINGS, (old, new), (old, new))
    assert not first.is_error, text_of(first)
    assert second.is_error and text_of(second).startswith("Already applied at lines 6-8 of ")
    assert "Nothing was changed" in text_of(second) and second.structured["error"]["kind"] == "edit_no_change"
    assert after == SIBLINGS.replace("'groups')", "'groups', cached=True)")  # load_users kept its body


async def test_replayed_recovered_edit_is_already_applied(root: Path) -> None:
    call = ("x = 1\nreturn x\n", "x = 1\ny = 2\nreturn x\n")  # dedented: re-indented the first time
    (first, second), after = await replace(root, "a.py", CLASS, call, call)
    assert not first.is_error, text_of(first)
    assert second.is_error and "Already applied at lines 3-5" in text_of(second)
    assert after == EDITED


async def test_replayed_addition_is_not_added_twice(root: Path) -> None:
    # old_string is still in the file (new_string holds it): a literal match, answered before it is used.
    call = ("    def g(self):\n        pass\n", "    def g(self):\n        pass\n\n    def h(self):\n        pass\n")
    (first, second), after = await replace(root, "a.py", CLASS, call, call)
    assert not first.is_error and second.is_error and "Already applied at lines 6-10" in text_of(second)
    assert after.count("def h(self)") == 1


async def test_replayed_deletion_does_not_delete_the_look_alike_that_follows(root: Path) -> None:
    src = ("limits = {\n    'alpha_requests': 10,\n    'beta_requests': 20,\n    'gamma_requests': 30,\n"
           "    'delta_requests': 40,\n}\n")
    call = ("limits = {\n    'alpha_requests': 10,\n    'beta_requests': 20,\n    'gamma_requests': 30,\n",
            "limits = {\n    'alpha_requests': 10,\n    'beta_requests': 20,\n")
    (first, second), after = await replace(root, "l.py", src, call, call)
    assert not first.is_error and second.is_error and "Already applied" in text_of(second)
    assert "'delta_requests': 40" in after and "gamma" not in after


async def test_a_deletion_with_a_near_miss_old_string_is_applied(root: Path) -> None:
    # new_string is in the file before the edit too (it is part of old_string): that is no replay.
    (res,), after = await replace(root, "a.py", CLASS, ("x = 1\nreturn x\n", "return x\n"))
    assert not res.is_error, text_of(res)
    assert after == CLASS.replace("        x = 1\n", "")


async def test_new_string_elsewhere_does_not_stop_a_literal_edit(root: Path) -> None:
    src = "a = 1\nb = 2\n"
    (res,), after = await replace(root, "a.py", src, ("a = 1\n", "b = 2\n"))
    assert not res.is_error and after == "b = 2\nb = 2\n"


# -- placeholders ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["    # TODO: keep the rest as it is", "    # NOTE: rest of the file unchanged",
                                  "    # NOTE(ana) - leave the remaining methods as they are"])
async def test_noted_keep_the_rest_comment_is_refused(root: Path, line: str) -> None:
    (res,), after = await replace(root, "a.py", CLASS, ("    def f(self):\n        x = 1\n        return x\n",
                                                        f"    def f(self):\n        x = 2\n{line}\n"))
    assert res.is_error and "omission placeholder" in text_of(res) and line.strip() in text_of(res)
    assert after == CLASS


async def test_a_todo_naming_work_to_do_is_no_placeholder(root: Path) -> None:
    (res,), after = await replace(root, "a.py", CLASS, ("        x = 1\n        return x\n",
                                                        "        # TODO: rest of implementation\n        return 0\n"))
    assert not res.is_error, text_of(res)
    assert "# TODO: rest of implementation" in after


DOC = "# Guide\n\nInstall it.\n\n## Usage\n\nRun `tool --help`.\n\n## Limits\n\nOne file at a time.\n"


@pytest.mark.parametrize("line", ["The rest of the document is unchanged.", "Keep the rest as it is.",
                                  "(rest of the file unchanged)", "NOTE: the remaining sections stay the same."])
async def test_prose_placeholder_that_cut_a_document_is_refused(root: Path, line: str) -> None:
    f = root / "GUIDE.md"
    f.write_text(DOC)
    async with ToolSession(root) as server:
        res = await server.call("write_file", file_path=str(f), content=f"# Guide\n\nInstall it with pip.\n\n{line}\n")
        assert res.is_error and line in text_of(res), text_of(res)
        res = await server.call("replace", file_path=str(f), old_string=DOC[DOC.index("Install"):],
                                new_string=f"Install it with pip.\n\n{line}\n")
        assert res.is_error and line in text_of(res), text_of(res)
    assert f.read_text() == DOC


@pytest.mark.parametrize("line", ["Everything else stays the same.", "The rest of the API is unchanged.",
                                  "See the rest of the guide for the details."])
async def test_prose_that_is_no_placeholder_passes(root: Path, line: str) -> None:
    f = root / "GUIDE.md"
    f.write_text(DOC)
    async with ToolSession(root) as server:
        res = await server.call("write_file", file_path=str(f), content=f"# Guide\n\nInstall it.\n\n{line}\n")
    assert not res.is_error, text_of(res)


async def test_the_sentence_in_a_new_document_or_in_code_passes(root: Path) -> None:
    # A new document cut nothing; in code a plain line is code (or a string), not a comment.
    async with ToolSession(root) as server:
        res = await server.call("write_file", file_path=str(root / "NEW.md"),
                                content="# Changes\n\nThe rest of the document is unchanged.\n")
        assert not res.is_error, text_of(res)
    src = 'NOTE = """\nold text\n"""\n'
    (res,), after = await replace(root, "n.py", src, ("old text\n", "The rest of the document is unchanged.\n"))
    assert not res.is_error, text_of(res)
    ast.parse(after)
