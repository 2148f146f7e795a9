"""read_file: text windows, encodings, media content, size limits and error messages."""

from __future__ import annotations

import re

import base64
import codecs
import os
import struct
import zlib
from pathlib import Path

import pytest
from mcp import types

from tests.conftest import call_tool, text_of
from tests.readside import error_text

pytestmark = pytest.mark.anyio

CUT = "... [truncated]"


async def read(root: Path, path: str | Path, **window):
    return await call_tool(root, "read_file", {"absolute_path": str(path), **window})


def body_of(text: str) -> str:
    """The file content of a windowed answer, after its status header."""
    return re.split(r"--- FILE CONTENT(?: \(truncated\))? ---\n", text, maxsplit=1)[1]


def numbered(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(n))


# -- real media bytes ----------------------------------------------------------------------------------


def png_bytes() -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def bmp_bytes() -> bytes:
    pixels = b"\x00\x00\xff\x00"  # one red pixel, row padded to 4 bytes
    header = struct.pack("<2sIHHI", b"BM", 14 + 40 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
WEBP = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
JPEG = base64.b64decode(
    "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////////////////"
    "////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPxA="
) + b"\xff\xd9"
WAV = b"RIFF" + struct.pack("<I", 36 + 4) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8) + (
    b"data" + struct.pack("<I", 4) + b"\x80\x80\x80\x80"
)
MP3 = b"ID3\x03\x00\x00\x00\x00\x00\x0a" + b"\x00" * 10 + b"\xff\xfb\x90\x64" + b"\x00" * 100
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Count 0/Kids[]>>endobj\n" + (
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)


# -- plain text and windows ----------------------------------------------------------------------------


async def test_small_file_is_returned_verbatim_without_header(root: Path) -> None:
    (root / "hello.txt").write_text("hello\nworld\n")
    result = await read(root, root / "hello.txt")
    assert not result.is_error
    assert text_of(result) == "hello\nworld"


async def test_final_line_without_newline_is_kept(root: Path) -> None:
    (root / "f.txt").write_text("a\nb")
    assert text_of(await read(root, root / "f.txt")) == "a\nb"


async def test_relative_path_resolves_against_primary_root(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "x.txt").write_text("relative ok\n")
    assert text_of(await read(root, "sub/x.txt")) == "relative ok"


async def test_empty_file_is_empty_text_not_error(root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    result = await read(root, root / "empty.txt")
    assert not result.is_error
    assert text_of(result) == ""


async def test_offset_and_limit_window_with_header_and_next_offset(root: Path) -> None:
    (root / "big.txt").write_text(numbered(100))
    result = await read(root, root / "big.txt", offset=10, limit=5)
    text = text_of(result)
    assert not result.is_error
    assert "truncated" not in text  # the caller asked for this window and got all of it
    assert text.startswith("Status: Showing lines 11-15 of 100 total lines.")
    assert "use offset: 15." in text
    body = body_of(text)
    assert body == "line 10\nline 11\nline 12\nline 13\nline 14"


async def test_next_offset_reads_the_following_window(root: Path) -> None:
    (root / "big.txt").write_text(numbered(30))
    first = text_of(await read(root, root / "big.txt", offset=0, limit=10))
    next_offset = int(first.split("use offset: ")[1].split(".")[0])
    second = text_of(await read(root, root / "big.txt", offset=next_offset, limit=10))
    assert body_of(second).splitlines()[0] == "line 10"


async def test_default_window_is_2000_lines(root: Path) -> None:
    (root / "long.txt").write_text(numbered(2500))
    text = text_of(await read(root, root / "long.txt"))
    assert "Showing lines 1-2000 of 2500 total lines." in text
    assert "use offset: 2000." in text
    body = body_of(text).split("\n")
    assert len(body) == 2000
    assert body[-1] == "line 1999"


async def test_limit_alone_starts_at_zero(root: Path) -> None:
    (root / "f.txt").write_text(numbered(10))
    text = text_of(await read(root, root / "f.txt", limit=3))
    assert "Showing lines 1-3 of 10 total lines." in text
    assert text.endswith("line 0\nline 1\nline 2")


async def test_last_window_says_end_reached_and_claims_no_cut_lines(root: Path) -> None:
    (root / "five.txt").write_text("a\nb\nc\nd\ne\n")
    text = text_of(await read(root, root / "five.txt", offset=2))
    assert "Showing lines 3-5 of 5 total lines." in text
    assert "reaches the end of the file" in text
    assert "shortened" not in text
    assert "use offset" not in text
    assert text.endswith("c\nd\ne")


async def test_explicit_full_window_is_not_marked_truncated(root: Path) -> None:
    (root / "f.txt").write_text("a\nb\n")
    assert text_of(await read(root, root / "f.txt", offset=0, limit=10)) == "a\nb"


async def test_offset_beyond_eof_is_an_error_naming_valid_range(root: Path) -> None:
    (root / "five.txt").write_text("a\nb\nc\nd\ne\n")
    text = error_text(await read(root, root / "five.txt", offset=9), "invalid_tool_params")
    assert "offset 9 is beyond the end of the file" in text
    assert "has 5 lines" in text and "0 to 4" in text


async def test_offset_equal_to_line_count_is_beyond_eof(root: Path) -> None:
    (root / "five.txt").write_text("a\nb\nc\nd\ne\n")
    assert (await read(root, root / "five.txt", offset=5)).is_error


async def test_long_lines_are_cut_with_marker(root: Path) -> None:
    long = "x" * 2500
    (root / "wide.txt").write_text(f"short\n{long}\nend\n")
    text = text_of(await read(root, root / "wide.txt"))
    assert "IMPORTANT: The file content has been truncated." in text
    assert "1 line(s) longer than 2000 characters were shortened" in text
    lines = body_of(text).split("\n")
    assert lines == ["short", "x" * 2000 + CUT, "end"]


async def test_line_of_exactly_2000_chars_is_not_cut(root: Path) -> None:
    (root / "edge.txt").write_text("y" * 2000 + "\n")
    assert text_of(await read(root, root / "edge.txt")) == "y" * 2000


async def test_long_multibyte_line_is_cut_by_characters(root: Path) -> None:
    (root / "wide.txt").write_text("é" * 3000 + "\n", encoding="utf-8")
    body = body_of(text_of(await read(root, root / "wide.txt")))
    assert body == "é" * 2000 + CUT


async def test_crlf_line_endings_are_stripped(root: Path) -> None:
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    assert text_of(await read(root, root / "dos.txt")) == "one\ntwo\nthree"


async def test_crlf_in_window(root: Path) -> None:
    (root / "dos.txt").write_bytes(b"".join(f"l{i}\r\n".encode() for i in range(10)))
    text = text_of(await read(root, root / "dos.txt", offset=8, limit=5))
    assert "\r" not in text
    assert text.endswith("l8\nl9")


async def test_utf8_bom_is_dropped(root: Path) -> None:
    (root / "bom.txt").write_bytes(codecs.BOM_UTF8 + "héllo\nwörld\n".encode())
    text = text_of(await read(root, root / "bom.txt"))
    assert text == "héllo\nwörld"


@pytest.mark.parametrize(
    "codec,bom",
    [
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-32-le", codecs.BOM_UTF32_LE),
        ("utf-32-be", codecs.BOM_UTF32_BE),
    ],
)
async def test_bom_marked_utf16_and_utf32_are_decoded(root: Path, codec: str, bom: bytes) -> None:
    content = "première ligne\r\nzweite Zeile ✓\r\n第三行\r\n"
    (root / "wide.txt").write_bytes(bom + content.encode(codec))
    result = await read(root, root / "wide.txt")
    assert not result.is_error
    assert text_of(result) == "première ligne\nzweite Zeile ✓\n第三行"
    windowed = text_of(await read(root, root / "wide.txt", offset=1, limit=1))
    assert "Showing lines 2-2 of 3 total lines." in windowed
    assert windowed.endswith("\nzweite Zeile ✓")


async def test_binary_file_is_reported_not_dumped(root: Path) -> None:
    payload = bytes(range(256)) * 4
    (root / "blob.dat2").write_bytes(payload)
    result = await read(root, root / "blob.dat2")
    assert not result.is_error
    assert text_of(result) == f"Cannot display content of binary file: {root / 'blob.dat2'}"


async def test_binary_extension_is_binary_even_if_text_like(root: Path) -> None:
    (root / "archive.zip").write_bytes(b"PK\x03\x04" + b"a" * 50)
    assert "Cannot display content of binary file" in text_of(await read(root, root / "archive.zip"))


async def test_text_with_a_few_control_bytes_is_still_text(root: Path) -> None:
    (root / "esc.log").write_bytes(b"\x1b[31mred\x1b[0m and plain words in a longer line of text\n")
    text = text_of(await read(root, root / "esc.log"))
    assert "red" in text and "binary" not in text


# -- media ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,data,mime",
    [
        ("pic.png", png_bytes(), "image/png"),
        ("pic.jpg", JPEG, "image/jpeg"),
        ("pic.jpeg", JPEG, "image/jpeg"),
        ("pic.gif", GIF, "image/gif"),
        ("pic.webp", WEBP, "image/webp"),
        ("pic.bmp", bmp_bytes(), "image/bmp"),
        ("PIC.PNG", png_bytes(), "image/png"),
    ],
)
async def test_images_become_image_content(root: Path, name: str, data: bytes, mime: str) -> None:
    (root / name).write_bytes(data)
    result = await read(root, root / name)
    assert not result.is_error
    images = [b for b in result.content if isinstance(b, types.ImageContent)]
    assert len(images) == 1
    assert images[0].mime_type == mime
    assert base64.b64decode(images[0].data) == data
    assert str(root / name) in text_of(result)


async def test_image_window_parameters_are_ignored(root: Path) -> None:
    (root / "pic.png").write_bytes(png_bytes())
    result = await read(root, root / "pic.png", offset=0, limit=1)
    assert any(isinstance(b, types.ImageContent) for b in result.content)


async def test_pdf_is_an_embedded_blob_resource(root: Path) -> None:
    (root / "doc.pdf").write_bytes(PDF)
    result = await read(root, root / "doc.pdf")
    assert not result.is_error
    resources = [b for b in result.content if isinstance(b, types.EmbeddedResource)]
    assert len(resources) == 1
    res = resources[0].resource
    assert isinstance(res, types.BlobResourceContents)
    assert res.mime_type == "application/pdf"
    assert base64.b64decode(res.blob) == PDF
    assert str(res.uri) == f"file://{root / 'doc.pdf'}"


@pytest.mark.parametrize("name,data,mime", [("a.wav", WAV, "audio/wav"), ("a.mp3", MP3, "audio/mpeg")])
async def test_audio_is_audio_content(root: Path, name: str, data: bytes, mime: str) -> None:
    (root / name).write_bytes(data)
    result = await read(root, root / name)
    audio = [b for b in result.content if isinstance(b, types.AudioContent)]
    assert len(audio) == 1
    assert audio[0].mime_type == mime
    assert base64.b64decode(audio[0].data) == data


async def test_svg_is_returned_as_text(root: Path) -> None:
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><rect width="1" height="1"/></svg>\n'
    (root / "icon.svg").write_text(svg)
    result = await read(root, root / "icon.svg")
    assert not result.is_error
    assert [b.type for b in result.content] == ["text"]
    assert text_of(result) == svg


async def test_svg_over_1mb_is_not_dumped(root: Path) -> None:
    (root / "huge.svg").write_text("<svg>" + " " * (1024 * 1024 + 10) + "</svg>")
    text = text_of(await read(root, root / "huge.svg"))
    assert text == f"Cannot display content of SVG file larger than 1MB: {root / 'huge.svg'}"


# -- size limits -----------------------------------------------------------------------------------------


def text_then_hole(path: Path, head: str, size: int, tail: str = "") -> None:
    """A sparse file: `head`, a hole of NUL bytes, then `tail` ending exactly at `size` bytes."""
    with open(path, "wb") as fh:
        fh.write(head.encode())
        fh.seek(size - len(tail.encode()))
        fh.write(tail.encode())
        fh.truncate(size)


async def test_text_over_20mb_is_refused_without_a_window(root: Path) -> None:
    big = root / "big.log"
    text_then_hole(big, numbered(2000), 21 * 1024 * 1024)  # text head longer than the sniffed block
    text = error_text(await read(root, big), "file_too_large")
    assert f"File size exceeds the 20MB limit: {big} (21.00MB)" in text
    assert "offset" in text and "limit" in text  # says how to fix the call


async def test_text_over_20mb_is_readable_with_a_window(root: Path) -> None:
    big = root / "big.log"
    text_then_hole(big, numbered(2000), 21 * 1024 * 1024)  # text head longer than the sniffed block
    result = await read(root, big, offset=3, limit=2)
    assert not result.is_error
    assert text_of(result).endswith("line 3\nline 4")


async def test_image_over_20mb_is_refused(root: Path) -> None:
    pic = root / "huge.png"
    with open(pic, "wb") as fh:
        fh.write(png_bytes())
        fh.truncate(21 * 1024 * 1024)
    result = await read(root, pic)
    assert result.is_error
    assert "File size exceeds the 20MB limit" in text_of(result)


async def test_window_at_the_end_of_a_200mb_file(root: Path) -> None:
    log = root / "huge.log"
    head = "".join(f"h{i}\n" for i in range(3000))  # longer than the block sniffed for binary content
    tail = "".join(f"t{i}\n" for i in range(10))
    text_then_hole(log, head, 200 * 1024 * 1024, tail)
    # Lines: h0..h2999, then the hole joined to t0 (one line), then t1..t9: 3010 lines.
    result = await read(root, log, offset=3007, limit=10)
    assert not result.is_error
    text = text_of(result)
    assert "Showing lines 3008-3010 of 3010 total lines." in text
    assert text.endswith("t7\nt8\nt9")


# -- errors ------------------------------------------------------------------------------------------------


async def test_missing_file(root: Path) -> None:
    text = error_text(await read(root, root / "nope.txt"), "file_not_found")
    assert text == f"File not found: {root / 'nope.txt'}"


async def test_directory_is_not_a_file(root: Path) -> None:
    (root / "d").mkdir()
    text = error_text(await read(root, root / "d"), "target_is_directory")
    assert text == f"Path is a directory, not a file: {root / 'd'}"


async def test_outside_workspace_is_refused(root: Path) -> None:
    result = await read(root, root.parent / "root-evil" / "secret.txt")
    assert result.is_error
    assert "Path not in workspace" in text_of(result)
    assert "DECOY" not in text_of(result)


async def test_geminiignored_file_is_refused(root: Path) -> None:
    (root / ".geminiignore").write_text("secrets/\n*.key\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "a.txt").write_text("hidden\n")
    (root / "my.key").write_text("KEY\n")
    for target in (root / "secrets" / "a.txt", root / "my.key"):
        result = await read(root, target)
        assert result.is_error, target
        assert f"File path '{target}' is ignored" in text_of(result)
        assert "hidden" not in text_of(result) and "KEY" not in text_of(result)


async def test_gitignored_file_is_still_readable(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\n")
    (root / "app.log").write_text("logged\n")
    assert text_of(await read(root, root / "app.log")) == "logged"


async def test_protected_env_file_is_refused(root: Path) -> None:
    (root / ".env").write_text("TOKEN=abc\n")
    result = await read(root, root / ".env")
    assert result.is_error
    assert "abc" not in text_of(result)
    assert ".env" in text_of(result)


async def test_fifo_is_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe")
    result = await read(root, root / "pipe")
    assert result.is_error
    assert "Not a regular file (a FIFO)" in text_of(result)


async def test_empty_path_is_invalid(root: Path) -> None:
    result = await read(root, "  ")
    assert result.is_error
    assert "Path must be a non-empty string" in text_of(result)


@pytest.mark.parametrize("spelling", ["{f}/", "{f}/.", "{f}//"])
async def test_a_final_slash_names_a_directory_not_the_file(root: Path, spelling: str) -> None:
    """`a.txt/` is not `a.txt`, as the kernel reads it (ENOTDIR): a model that meant a directory must not be
    handed a file's content, and reads agree with writes, which refuse the same spelling."""
    (root / "a.txt").write_text("content of a file\n")
    result = await read(root, spelling.format(f=root / "a.txt"))
    assert result.is_error and "content of a file" not in text_of(result)
    assert "ends with '/'" in text_of(result) and "Drop the final '/'" in text_of(result)
    assert result.structured["error"]["kind"] == "path_is_not_a_directory"
    assert text_of(await read(root, root / "a.txt")).rstrip("\n") == "content of a file"
