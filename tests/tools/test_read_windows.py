"""The two ways read_file cuts a window must agree: `window_of_content` (a small file held whole, a few passes
in C) and `read_window` (streaming, for any size). Compared on awkward contents and windows; plus the
read_file path that notices a file grown since it was opened and streams it instead."""

from __future__ import annotations

import codecs
import io
import random
from pathlib import Path

import pytest

from coretools.sandbox.gateway import Workspace
from coretools.tools.filetypes import MAX_LINE_CHARS, classify, read_window, window_of_content
from coretools.tools.base import ToolContext
from coretools.tools.read_file import ReadFile

AWKWARD = [
    b"",
    b"\n",
    b"\n\n",
    b"a",
    b"a\n",
    b"a\nb",
    b"\r",
    b"\r\n",
    b"a\r\nb\r\n",
    b"a\r\r\nb\r",
    b"a\rb\nc\r\n",
    b"x" * (MAX_LINE_CHARS + 1) + b"\r\n",
    b"x" * MAX_LINE_CHARS + b"\r\r\n",  # 2000 characters and a CR that stays: a line that must be cut
    b"y" * MAX_LINE_CHARS + b"\n" + b"z" * (MAX_LINE_CHARS * 3) + b"\n",
    "é☃𝄞".encode() * 1500 + b"\n",  # multibyte characters across the cut
    b"bad \xff\xfe bytes\nand a cut \xe2\x98",
    codecs.BOM_UTF8 + b"bom\nline\n",
    codecs.BOM_UTF16_LE + "utf16\r\nlines\n".encode("utf-16-le"),
    codecs.BOM_UTF32_BE + "utf32\nlast".encode("utf-32-be"),
]
WINDOWS = [(0, 2000), (0, 1), (1, 1), (1, 5), (2, 3), (5, 10), (0, 10_000)]


def _both(data: bytes, offset: int, limit: int):
    kind = classify("f.txt", data[:8192])
    streamed = read_window(io.BytesIO(data), kind, offset, limit, chunk=7)  # tiny chunks: every boundary
    whole = window_of_content(data, kind, offset, limit)
    return streamed, whole


@pytest.mark.parametrize("data", AWKWARD, ids=range(len(AWKWARD)))
@pytest.mark.parametrize("window", WINDOWS, ids=str)
def test_whole_and_streamed_windows_agree(data: bytes, window: tuple[int, int]) -> None:
    streamed, whole = _both(data, *window)
    assert whole == streamed


def test_whole_and_streamed_windows_agree_on_random_text() -> None:
    rng = random.Random(20261122)
    alphabet = [b"a", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xff", b"x" * 700, "☃".encode()]
    for _ in range(400):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        offset, limit = rng.randrange(0, 8), rng.randrange(1, 8)
        streamed, whole = _both(data, offset, limit)
        assert whole == streamed, (data, offset, limit)


def test_a_file_that_grew_after_it_was_opened_is_streamed_whole(tmp_path: Path) -> None:
    """The size known at open is 3 lines; the file has 5 by the time it is read: all 5 are shown (the
    one-read path must not cut the file at its old size)."""
    target = tmp_path / "log.txt"
    target.write_text("one\ntwo\nthree\n")
    workspace = Workspace([str(tmp_path)])
    tool = ReadFile()
    try:
        with workspace.open_file(workspace.locate(str(target))) as (node, handle):
            with target.open("a") as more:
                more.write("four\nfive\n")
            result = tool._content(node, handle, {}, ToolContext(workspace=workspace))
    finally:
        workspace.close()
    assert result.text_content == "one\ntwo\nthree\nfour\nfive"
