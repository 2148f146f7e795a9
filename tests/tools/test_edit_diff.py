"""The result of an edit is one compact diff numbered with the new file's lines: small for a small edit of a
big file, bounded for a big edit, and exact about line endings, byte-order marks and final line breaks."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import call_tool, text_of

pytestmark = pytest.mark.anyio


def _code(n: int) -> list[str]:
    return [f"    value_{i:04d} = compute_something(alpha, beta, gamma)  # {i}" for i in range(n)]


async def test_twelve_line_edit_of_a_15_kb_file_is_small(root: Path) -> None:
    lines = _code(230)
    f = root / "big.py"
    f.write_text("\n".join(lines) + "\n")
    assert 14_000 < f.stat().st_size < 17_000
    old = "\n".join(lines[100:112]) + "\n"
    new = "\n".join(line.replace("compute_something", "compute_other") for line in lines[100:112]) + "\n"
    res = await call_tool(root, "replace", {"file_path": str(f), "old_string": old, "new_string": new})
    assert not res.is_error, text_of(res)
    assert len(res.content) == 1
    text = text_of(res)
    assert len(text) < 3000, len(text)
    assert "+101|    value_0100 = compute_other" in text and "+112|" in text and " 113|" in text


async def test_big_rewrite_is_bounded_and_says_what_was_left_out(root: Path) -> None:
    f = root / "big.txt"
    f.write_text("".join(f"old {i}\n" for i in range(20_000)))
    res = await call_tool(root, "write_file", {"file_path": str(f), "content": "".join(f"new {i}\n" for i in range(20_000))})
    assert not res.is_error
    text = text_of(res)
    assert len(text) < 13_000 and "more lines not shown" in text


async def test_long_line_is_cut_short(root: Path) -> None:
    f = root / "min.js"
    f.write_text("a" * 100_000 + "\n")
    res = await call_tool(root, "replace", {"file_path": str(f), "old_string": "a" * 100_000, "new_string": "b" * 100_000})
    assert not res.is_error
    assert len(text_of(res)) < 2_000 and "more characters]" in text_of(res)


async def test_new_file_shows_its_content_numbered_not_a_diff(root: Path) -> None:
    res = await call_tool(root, "write_file", {"file_path": "n.txt", "content": "a\nb\n"})
    assert text_of(res).endswith("Content, numbered:\n1|a\n2|b")
    assert "@@" not in text_of(res) and "+" not in text_of(res)


def _changed(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in "+-" and "|" in line]


@pytest.mark.parametrize("bom", [b"", codecs.BOM_UTF8], ids=["no-bom", "bom"])
@pytest.mark.parametrize("final", [True, False], ids=["final-newline", "no-final-newline"])
@pytest.mark.parametrize("tool", ["write_file", "replace"])
async def test_crlf_files_show_only_changed_lines(root: Path, bom: bytes, final: bool, tool: str) -> None:
    lines = [f"line {i}" for i in range(1, 21)]
    f = root / "w.txt"
    f.write_bytes(bom + ("\r\n".join(lines) + ("\r\n" if final else "")).encode())
    if tool == "write_file":
        content = "\n".join(lines).replace("line 10", "LINE TEN") + ("\n" if final else "")
        args = {"file_path": str(f), "content": content}
    else:
        args = {"file_path": str(f), "old_string": "line 10\n", "new_string": "LINE TEN\n"}
    res = await call_tool(root, tool, args)
    assert not res.is_error, text_of(res)
    assert f.read_bytes() == bom + ("\r\n".join(lines).replace("line 10", "LINE TEN")
                                    + ("\r\n" if final else "")).encode()
    assert _changed(text_of(res)) == ["-  |line 10", "+10|LINE TEN"]
    assert "\r" not in text_of(res) and "No newline" not in text_of(res)


async def test_edit_of_the_last_line_without_newline_says_so(root: Path) -> None:
    f = root / "t.txt"
    f.write_bytes(b"a\r\nb\r\nc")
    res = await call_tool(root, "replace", {"file_path": str(f), "old_string": "c", "new_string": "C"})
    assert not res.is_error
    assert text_of(res).splitlines()[2:] == ["@@ -1,3 +1,3 @@", " 1|a", " 2|b", "- |c", "\\ No newline at end of file",
                                             "+3|C", "\\ No newline at end of file"]


async def test_lines_old_string_kept_are_context_not_changes(root: Path) -> None:
    (root / "app.py").write_text('def greet(name):\n    if name:\n        return "hi " + name\n    return "hi"\n')
    result = await call_tool(root, "replace", {
        "file_path": str(root / "app.py"),
        "old_string": '    if name:\n        return "hi " + name\n',
        "new_string": '    if name:\n        return f"hi {name}"\n',
    })
    text = text_of(result)
    assert " 2|    if name:" in text
    assert _changed(text) == ['- |        return "hi " + name', '+3|        return f"hi {name}"']


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "\n", "\r", "bcd", "x" * 30, "\r\n", "é"]), max_size=60),
    st.integers(0, 200), st.integers(0, 200), st.sampled_from([" ", "-", "+"]), st.integers(0, 5), st.integers(1, 40),
)
def test_marked_lines_in_one_pass_are_the_lines_one_by_one(parts, a, b, mark, number, shown_max) -> None:  # noqa: ANN001
    from coretools.tools.textedit import diff

    text = "".join(parts)
    a = min(a, len(text))
    b = min(max(a, b), len(text))
    real = diff.MAX_SHOWN_LINE
    diff.MAX_SHOWN_LINE = shown_max
    try:
        assert list(diff._marked(text, a, b, mark, number, 3)) == list(diff._marked_lines(text, a, b, mark, number, 3))
    finally:
        diff.MAX_SHOWN_LINE = real
