"""replace: literal matching, every error message, faithful round trips, confirmation by elicitation."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import pytest
from mcp import types

from tests.conftest import call_tool, connect, snapshot, text_of

pytestmark = pytest.mark.anyio


async def replace(root: Path, path: str, old: str, new: str, *extra: str, **more):
    return await call_tool(root, "replace", {"file_path": path, "old_string": old, "new_string": new, **more}, *extra)


def body(n: int = 20) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# -- basics and the result --------------------------------------------------------------------------------


async def test_single_replacement_result_is_one_compact_numbered_diff(root: Path) -> None:
    f = root / "a.txt"
    f.write_text(body())
    res = await replace(root, str(f), "line 10\n", "LINE TEN\n")
    assert not res.is_error, text_of(res)
    assert f.read_text() == body().replace("line 10\n", "LINE TEN\n")
    assert len(res.content) == 1
    assert res.content[0].text.splitlines() == [
        f"Successfully modified file: {f} (1 replacement).",
        "Diff (numbered with the lines of the file as it is now):",
        "@@ -7,7 +7,7 @@", "  7|line 7", "  8|line 8", "  9|line 9", "-  |line 10", "+10|LINE TEN", " 11|line 11", " 12|line 12", " 13|line 13",
    ]


async def test_relative_path_is_relative_to_primary_root(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "r.txt").write_text("x = 1\n")
    res = await replace(root, "sub/r.txt", "x = 1", "x = 2")
    assert not res.is_error, text_of(res)
    assert (root / "sub" / "r.txt").read_text() == "x = 2\n"


async def test_dollar_and_backslashes_are_literal(root: Path) -> None:
    f = root / "s.js"
    f.write_text("let a = OLD;\n")
    new = r"$& $1 $' $$ \1 \n \\ \g<0>"
    res = await replace(root, str(f), "OLD", new)
    assert not res.is_error, text_of(res)
    assert f.read_text() == f"let a = {new};\n"


async def test_old_string_is_not_a_regex(root: Path) -> None:
    f = root / "r.txt"
    f.write_text("abc a.c a+c\n")
    res = await replace(root, str(f), "a.c", "X")
    assert not res.is_error, text_of(res)
    assert f.read_text() == "abc X a+c\n"


async def test_expected_replacements_replaces_exactly_that_many(root: Path) -> None:
    f = root / "m.txt"
    f.write_text("foo\nbar\nfoo\nbaz\nfoo\n")
    res = await replace(root, str(f), "foo", "qux", expected_replacements=3)
    assert not res.is_error, text_of(res)
    assert f.read_text() == "qux\nbar\nqux\nbaz\nqux\n"
    assert "(3 replacements)" in text_of(res)


async def test_count_mismatch_is_an_error_naming_lines_and_fix(root: Path) -> None:
    f = root / "m.txt"
    original = "foo\nbar\nfoo\nbaz\nfoo\n"
    f.write_text(original)
    res = await replace(root, str(f), "foo", "qux")
    assert res.is_error
    msg = text_of(res)
    assert msg.startswith(f"Failed to edit, expected 1 occurrence but found 3 for old_string in file: {f}.")
    assert "line(s) 1, 3, 5" in msg and "set expected_replacements to 3" in msg and "more surrounding" in msg
    assert res.structured["error"]["kind"] == "edit_expected_occurrence_mismatch"
    res = await replace(root, str(f), "foo", "qux", expected_replacements=2)
    assert "expected 2 occurrences but found 3" in text_of(res)
    assert f.read_text() == original


async def test_expected_replacements_must_be_positive(root: Path) -> None:
    (root / "m.txt").write_text("foo\n")
    res = await replace(root, "m.txt", "foo", "bar", expected_replacements=0)
    assert res.is_error and "params/expected_replacements must be >= 1" in text_of(res)


async def test_zero_occurrences_shows_most_similar_lines(root: Path) -> None:
    f = root / "code.py"
    f.write_text("def a():\n    return 1\n\n\ndef target(x):\n        return x + 1\n")
    res = await replace(root, str(f), "def target(x):\n    return x + 2\n", "pass\n")
    assert res.is_error
    msg = text_of(res)
    assert msg.startswith(f"Failed to edit, 0 occurrences found for old_string in {f}.")
    assert res.structured["error"]["kind"] == "edit_no_occurrence_found"
    assert "Lines 5-6 (1 of 2 lines match ignoring whitespace):" in msg
    assert "     5| def target(x):\n     6|         return x + 1" in msg


async def test_zero_occurrences_fuzzy_line_suggestion(root: Path) -> None:
    f = root / "conf.ini"
    f.write_text("[server]\nlisten_port = 8080\nhost = example.org\n")
    res = await replace(root, str(f), "listen_prot = 8080", "listen_port = 9090")
    msg = text_of(res)
    assert res.is_error and "lines most similar to 'listen_prot = 8080'" in msg
    assert "     2| listen_port = 8080" in msg


async def test_zero_occurrences_of_a_block_shows_the_block_it_is_most_like(root: Path) -> None:
    f = root / "m.py"
    f.write_text("".join(f"def func_{i}(a, b):\n    total = a + b * {i}\n    return total - {i}\n\n" for i in range(30)))
    wanted = "def func_17(alpha, beta):\n    totl = alpha + beta * 17 + 1\n    retrn totl - 17 + 2\n"
    res = await replace(root, str(f), wanted, "x\n")
    msg = text_of(res)
    assert res.is_error and "the blocks most like old_string are:\nLines 69-71 (about " in msg, msg
    assert "    69| def func_17(a, b):\n    70|     total = a + b * 17\n    71|     return total - 17" in msg


async def test_zero_occurrences_nothing_similar(root: Path) -> None:
    (root / "f.txt").write_text("alpha\nbeta\n")
    res = await replace(root, "f.txt", "completely unrelated words here", "x")
    assert res.is_error and "Nothing in the file resembles it" in text_of(res)


async def test_over_escaped_old_string_is_recovered_and_said(root: Path) -> None:
    (root / "f.py").write_text('print("hi")\nx = 1\n')
    res = await replace(root, "f.py", 'print(\\"hi\\")\\nx = 1', "y")
    assert not res.is_error and "over-escaped" in text_of(res)
    assert (root / "f.py").read_text() == "y\n"


async def test_identical_strings_are_an_error(root: Path) -> None:
    (root / "f.txt").write_text("same\n")
    res = await replace(root, "f.txt", "same", "same")
    assert res.is_error
    assert text_of(res).startswith("No changes to apply. The old_string and new_string are identical in file:")
    assert res.structured["error"]["kind"] == "edit_no_change"


async def test_empty_old_string_creates_file_with_parents(root: Path) -> None:
    res = await replace(root, "new/dir/f.txt", "", "hello\nworld")
    assert not res.is_error, text_of(res)
    assert (root / "new/dir/f.txt").read_bytes() == b"hello\nworld"
    msg = text_of(res)
    assert msg.startswith(f"Created new file: {root}/new/dir/f.txt with provided content.")
    assert msg.endswith("Content, numbered:\n1|hello\n2|world\n\\ No newline at end of file")


async def test_empty_old_string_on_existing_file_is_an_error(root: Path) -> None:
    (root / "f.txt").write_text("keep\n")
    res = await replace(root, "f.txt", "", "overwrite")
    assert res.is_error
    assert text_of(res).startswith(f"File already exists, cannot create: {root}/f.txt.")
    assert "write_file" in text_of(res)
    assert res.structured["error"]["kind"] == "attempt_to_create_existing_file"
    assert (root / "f.txt").read_text() == "keep\n"


async def test_missing_file_says_how_to_create(root: Path) -> None:
    res = await replace(root, "nope.txt", "x", "y")
    assert res.is_error
    msg = text_of(res)
    assert msg.startswith(f"File not found: {root}/nope.txt.") and "empty old_string" in msg
    assert res.structured["error"]["kind"] == "file_not_found"
    assert not (root / "nope.txt").exists()


async def test_directory_target_is_refused(root: Path) -> None:
    (root / "d").mkdir()
    res = await replace(root, "d", "x", "y")
    assert res.is_error and "is a directory" in text_of(res)


async def test_outside_workspace_is_refused(root: Path) -> None:
    before = snapshot(root.parent / "root-evil")
    res = await replace(root, str(root.parent / "root-evil" / "secret.txt"), "DECOY", "PWNED")
    assert res.is_error and "Path not in workspace" in text_of(res)
    res = await replace(root, "../root-evil/secret.txt", "DECOY", "PWNED")
    assert res.is_error and "Path not in workspace" in text_of(res)
    assert snapshot(root.parent / "root-evil") == before


async def test_placeholder_in_new_string_is_refused(root: Path) -> None:
    (root / "c.js").write_text("class A {\n  m() {}\n  n() {}\n}\n")
    res = await replace(root, "c.js", "  m() {}\n  n() {}\n", "  m() { go(); }\n  // ... rest of methods ...\n")
    assert res.is_error and "omission placeholder" in text_of(res)
    assert res.structured["error"]["kind"] == "invalid_tool_params"
    assert (root / "c.js").read_text() == "class A {\n  m() {}\n  n() {}\n}\n"


async def test_placeholder_also_in_old_string_is_allowed(root: Path) -> None:
    (root / "doc.md").write_text("Example:\n// ... rest of methods ...\nend\n")
    res = await replace(root, "doc.md", "Example:\n// ... rest of methods ...", "Sample:\n// ... rest of methods ...")
    assert not res.is_error, text_of(res)


async def test_modified_by_user_is_acknowledged(root: Path) -> None:
    (root / "f.txt").write_text("a\n")
    res = await replace(root, "f.txt", "a", "b", modified_by_user=True)
    assert "User modified the `new_string` content to be: b\n" in text_of(res)


# -- faithfulness ---------------------------------------------------------------------------------------------


async def test_crlf_file_stays_crlf_and_lf_old_string_matches(root: Path) -> None:
    f = root / "w.txt"
    f.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    res = await replace(root, str(f), "one\ntwo\n", "uno\ndos\nmas\n")
    assert not res.is_error, text_of(res)
    assert f.read_bytes() == b"uno\r\ndos\r\nmas\r\nthree\r\n"
    assert "Kept the file's CRLF line endings." in text_of(res)
    assert "\r" not in text_of(res)
    assert "-  |two" not in text_of(res) and "+2|dos" in text_of(res) and " 4|three" in text_of(res)


@pytest.mark.parametrize(
    "initial,steps",
    [
        pytest.param(b"one\ntwo\nthree\n", [("one\r\ntwo", "1\r\n2", b"1\n2\nthree\n")], id="crlf-old-in-lf-file"),
        pytest.param(
            b"a\r\nb\r\nc\nd\ne\r\n",
            [("c\nd\n", "C\nD\n", b"a\r\nb\r\nC\nD\ne\r\n"),
             # spans a CRLF break: its replacement uses CRLF; the LF lines stay LF
             ("b\nC", "B\nX\nC", b"a\r\nB\r\nX\r\nC\nD\ne\r\n")],
            id="mixed-kept-outside-and-inside",
        ),
        pytest.param(
            b"first\nlast",
            [("last", "LAST\n", b"first\nLAST"), ("first", "1st", b"1st\nLAST"), ("\nLAST", "", b"1st")],
            id="no-final-newline-not-gained",
        ),
        pytest.param(b"a\r\nb\r\n", [("b\n", "B", b"a\r\nB\r\n")], id="final-newline-not-lost"),
    ],
)
async def test_line_endings_and_final_newline(root: Path, initial: bytes, steps: list) -> None:
    f = root / "le.txt"
    f.write_bytes(initial)
    for old, new, expected in steps:
        res = await replace(root, str(f), old, new)
        assert not res.is_error, text_of(res)
        assert f.read_bytes() == expected


@pytest.mark.parametrize(
    "encoding,bom",
    [("utf-8", b""), ("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE),
     ("utf-16-be", codecs.BOM_UTF16_BE), ("utf-32-le", codecs.BOM_UTF32_LE)],
)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
async def test_encoding_and_newline_round_trip(root: Path, encoding: str, bom: bytes, newline: str) -> None:
    f = root / "enc.txt"
    text = "héllo wörld\nsecond ☃ line\n𝄞 third".replace("\n", newline)
    f.write_bytes(bom + text.encode(encoding))
    res = await replace(root, str(f), "second ☃ line\n", "zweite ☃ Zeile\nneu\n")
    assert not res.is_error, text_of(res)
    want = "héllo wörld\nzweite ☃ Zeile\nneu\n𝄞 third".replace("\n", newline)
    assert f.read_bytes() == bom + want.encode(encoding)
    if bom and encoding != "utf-8":
        assert "encoding" in text_of(res) and "byte-order mark" in text_of(res)


async def test_latin1_file_is_refused_not_corrupted(root: Path) -> None:
    f = root / "latin.txt"
    data = "caf\xe9 cr\xe8me\n".encode("latin-1")
    f.write_bytes(data)
    res = await replace(root, str(f), "caf", "CAF")
    assert res.is_error
    msg = text_of(res)
    assert "not valid UTF-8" in msg and "nothing was changed" in msg and "write_file" in msg
    assert res.structured["error"]["kind"] == "edit_preparation_failure"
    assert f.read_bytes() == data


@pytest.mark.parametrize(
    "data,old,new,says",
    [
        pytest.param(b"abc\x00def\x00", "abc", "xyz", "binary", id="binary"),
        pytest.param(codecs.BOM_UTF16_LE + "ok".encode("utf-16-le") + b"\x00\xd8", "ok", "no",
                     "UTF-16 LE with byte-order mark", id="broken-utf16"),  # a lone high surrogate
        pytest.param(codecs.BOM_UTF16_LE + "abc\n".encode("utf-16-le"), "abc", "x\ud800y", "cannot be encoded",
                     id="unencodable-replacement"),
    ],
)
async def test_refused_rather_than_corrupted(root: Path, data: bytes, old: str, new: str, says: str) -> None:
    f = root / "f.dat"
    f.write_bytes(data)
    res = await replace(root, str(f), old, new)
    assert res.is_error and says in text_of(res), text_of(res)
    assert f.read_bytes() == data


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o640])
async def test_mode_bits_are_kept(root: Path, mode: int) -> None:
    f = root / "x.sh"
    f.write_text("echo hi\n")
    os.chmod(f, mode)
    res = await replace(root, str(f), "hi", "there")
    assert not res.is_error, text_of(res)
    assert stat.S_IMODE(f.stat().st_mode) == mode
    assert f.read_text() == "echo there\n"


async def test_two_replacements_on_one_line_render_one_hunk(root: Path) -> None:
    f = root / "f.txt"
    f.write_text("x a x\nkeep\n")
    res = await replace(root, str(f), "x", "y", expected_replacements=2)
    assert not res.is_error
    assert f.read_text() == "y a y\nkeep\n"
    assert text_of(res).split("\n")[2:5] == ["@@ -1,2 +1,2 @@", "- |x a x", "+1|y a y"]


async def test_large_diff_is_truncated_with_a_note(root: Path) -> None:
    f = root / "big.txt"
    f.write_text("v\n" * 3000)
    res = await replace(root, str(f), "v\n" * 3000, "w\n" * 3000)
    assert not res.is_error
    assert "more lines not shown" in text_of(res) and len(text_of(res)) < 13000


# -- published schema ------------------------------------------------------------------------------------


def test_schema_matches_the_seed() -> None:
    from coretools.tools.replace import Replace

    schema = Replace.input_schema
    assert list(schema["properties"]) == ["file_path", "old_string", "new_string", "expected_replacements",
                                          "modified_by_user"]
    assert schema["required"] == ["file_path", "old_string", "new_string"]
    er = schema["properties"]["expected_replacements"]
    assert (er["type"], er["minimum"], er["default"]) == ("integer", 1, 1)
    assert schema["properties"]["modified_by_user"]["type"] == "boolean"
    for prop in schema["properties"].values():
        assert set(prop) <= {"type", "description", "minimum", "default"}
    assert Replace.read_only is False and Replace.destructive is True


# -- confirmation (--confirm edits) ----------------------------------------------------------------------


def _answer(action: str, seen: list):
    async def callback(context, params: types.ElicitRequestParams):
        seen.append(params.message)
        return types.ElicitResult(action=action)

    return callback


async def test_confirm_accept_applies_the_edit(root: Path) -> None:
    f = root / "c.txt"
    f.write_text("before\n")
    seen: list[str] = []
    async with connect([root], "legacy", "--confirm", "edits", elicitation_callback=_answer("accept", seen)) as client:
        res = await client.call_tool("replace", {"file_path": str(f), "old_string": "before", "new_string": "after"})
    assert not res.is_error, text_of(res)
    assert f.read_text() == "after\n"
    assert len(seen) == 1 and f"replace: Apply this change to {f}?" in seen[0]
    assert "-before\n+after" in seen[0]


async def test_confirm_decline_leaves_the_file(root: Path) -> None:
    f = root / "c.txt"
    f.write_text("before\n")
    seen: list[str] = []
    async with connect([root], "legacy", "--confirm", "edits", elicitation_callback=_answer("decline", seen)) as client:
        res = await client.call_tool("replace", {"file_path": str(f), "old_string": "before", "new_string": "after"})
        created = await client.call_tool("replace", {"file_path": str(root / "n.txt"), "old_string": "",
                                                     "new_string": "x"})
    assert res.is_error and "cancelled by the user" in text_of(res) and "declined" in text_of(res)
    assert created.is_error and "cancelled by the user" in text_of(created)
    assert f.read_text() == "before\n" and not (root / "n.txt").exists()
    assert len(seen) == 2 and "Create" in seen[1]


async def test_confirm_without_elicitation_support_refuses(root: Path) -> None:
    f = root / "c.txt"
    f.write_text("before\n")
    res = await replace(root, str(f), "before", "after", "--confirm", "edits")
    assert res.is_error and "cannot ask the user" in text_of(res) and "Nothing was written" in text_of(res)
    assert f.read_text() == "before\n"
    async with connect([root], "legacy", "--confirm", "edits") as client:  # no elicitation capability
        res = await client.call_tool("replace", {"file_path": str(f), "old_string": "before", "new_string": "after"})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert res.is_error and f.read_text() == "before\n"
    assert "confirm every edit" in tools["replace"].description


async def test_without_confirm_flag_no_question_is_asked(root: Path) -> None:
    f = root / "c.txt"
    f.write_text("before\n")
    seen: list[str] = []
    async with connect([root], "legacy", elicitation_callback=_answer("decline", seen)) as client:
        res = await client.call_tool("replace", {"file_path": str(f), "old_string": "before", "new_string": "after"})
    assert not res.is_error and seen == [] and f.read_text() == "after\n"


async def test_more_occurrences_than_one_edit_replaces_are_refused_before_any_is_kept(root: Path) -> None:
    from coretools.tools.textedit.replacement import MAX_REPLACEMENTS

    f = root / "many.txt"
    f.write_text("a" * (MAX_REPLACEMENTS + 1))
    res = await call_tool(root, "replace", {"file_path": str(f), "old_string": "a", "new_string": "b",
                                            "allow_multiple": True})
    assert res.is_error and f"occurs {MAX_REPLACEMENTS + 1:,} times" in text_of(res), text_of(res)
    assert f.read_text() == "a" * (MAX_REPLACEMENTS + 1)
