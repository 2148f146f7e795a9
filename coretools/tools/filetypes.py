"""What kind of file this is, how its text is encoded, and windowed reading that does not load it whole."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000
LINE_CUT_MARKER = "... [truncated]"

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
}
AUDIO_TYPES = {
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".aiff": "audio/aiff",
    ".aif": "audio/aiff",
    ".aac": "audio/aac",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
}
PDF_TYPES = {".pdf": "application/pdf"}
BINARY_EXTENSIONS = frozenset(
    ".bin .exe .dll .so .dylib .class .jar .war .zip .tar .gz .bz2 .xz .rar .7z .pak .rpa .doc .docx .xls .xlsx "
    ".ppt .pptx .odt .ods .odp .pyc .pyo .dat .obj .o .a .lib .wasm .ico .mp4 .mov .webm .mkv .avi .tif .tiff "
    ".heic .woff .woff2 .ttf .otf .eot .sqlite .db".split()
)

BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class FileKind:
    kind: str  # "text" | "image" | "audio" | "pdf" | "svg" | "binary"
    mime: str | None = None
    encoding: str = "utf-8"
    bom: bytes = b""


def extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def detect_bom(head: bytes) -> tuple[str, bytes] | None:
    for bom, encoding in BOMS:  # UTF-32 LE first: its BOM starts with the UTF-16 LE one
        if head.startswith(bom):
            return encoding, bom
    return None


_CONTROL_BYTES = bytes(b for b in range(32) if b < 9 or b > 13)


def looks_binary(head: bytes) -> bool:
    """NUL bytes, or a high share of control bytes, in the first block (BOM-marked text excluded)."""
    if not head:
        return False
    if b"\0" in head:
        return True
    control = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return control / len(head) > 0.10


def classify(name: str, head: bytes) -> FileKind:
    ext = extension(name)
    if ext == ".svg":
        return FileKind("svg", "image/svg+xml")
    if ext in IMAGE_TYPES:
        return FileKind("image", IMAGE_TYPES[ext])
    if ext in PDF_TYPES:
        return FileKind("pdf", PDF_TYPES[ext])
    bom = detect_bom(head)
    if ext in AUDIO_TYPES and (bom is None and looks_binary(head)):
        return FileKind("audio", AUDIO_TYPES[ext])
    if bom is not None:
        return FileKind("text", "text/plain", bom[0], bom[1])
    if ext in BINARY_EXTENSIONS or looks_binary(head):
        return FileKind("binary", "application/octet-stream")
    return FileKind("text", "text/plain")


@dataclass
class Window:
    lines: list[str]
    start: int  # 0-based index of the first line shown
    total: int  # lines in the file
    cut_lines: int  # lines shortened to MAX_LINE_CHARS

    @property
    def end(self) -> int:  # exclusive
        return self.start + len(self.lines)

    @property
    def complete(self) -> bool:
        return self.start == 0 and self.end >= self.total and not self.cut_lines


def _cut(line: str) -> tuple[str, bool]:
    if line.endswith("\r"):
        line = line[:-1]
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS] + LINE_CUT_MARKER, True
    return line, False


WHOLE_BYTES = 1024 * 1024  # files up to this size are read in one call and cut in memory


def read_window(
    handle: BinaryIO,
    kind: FileKind,
    offset: int,
    limit: int,
    chunk: int = 1 << 20,
    check: Callable[[], None] | None = None,
) -> Window:
    """Lines `[offset, offset+limit)` of a text file and the file's total line count.

    Streams the file in chunks: memory stays proportional to the window (and the longest line kept),
    whatever the size of the file. A final line without a newline counts; a trailing newline does not
    start another line. `check` is called before each chunk (it raises to stop a cancelled call).
    """
    handle.seek(len(kind.bom))
    chunks = _chunks(handle, chunk, check)
    if kind.encoding == "utf-8":
        return _window_bytes(chunks, offset, limit)
    return _window_decoded(chunks, kind.encoding, offset, limit)


def window_after_sniff(
    handle: BinaryIO, kind: FileKind, head: bytes, size: int, offset: int, limit: int,
    check: Callable[[], None] | None = None,
) -> Window:
    """`read_window` for a file whose first bytes `head` were already read to classify it and whose stat
    said `size`: a file up to `WHOLE_BYTES` is read whole and cut with `window_of_content` (a few passes in
    C), one that grew since the stat is streamed."""
    if size <= WHOLE_BYTES:
        data = head + handle.read(size + 1 - len(head)) if len(head) <= size else head
        if len(data) <= size:
            return window_of_content(data, kind, offset, limit)
    return read_window(handle, kind, offset, limit, check=check)


def _chunks(handle: BinaryIO, size: int, check: Callable[[], None] | None):  # noqa: ANN202 - a generator
    """The file's blocks of `size` bytes, then one empty block."""
    while True:
        if check is not None:
            check()
        block = handle.read(size)
        yield block
        if not block:
            return


def window_of_content(data: bytes, kind: FileKind, offset: int, limit: int) -> Window:
    """The same window as `read_window`, for a file already held whole in memory: a handful of passes in C
    instead of a loop over every line (for a small file the loop was most of a read_file call)."""
    text = data[len(kind.bom) :].decode(kind.encoding, "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # a trailing newline does not start another line (and an empty file has none)
    elif lines[-1].endswith("\r"):
        lines[-1] = lines[-1][:-1]
    total = len(lines)
    shown = lines[offset : offset + limit]
    cut = 0
    if shown and max(map(len, shown)) > MAX_LINE_CHARS:
        cut = sum(len(line) > MAX_LINE_CHARS for line in shown)
        shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + LINE_CUT_MARKER for line in shown]
    return Window(shown, min(offset, total), total, cut)


def _window_bytes(chunks, offset: int, limit: int) -> Window:  # noqa: ANN001 - blocks from _chunks
    stop = offset + limit
    keep_max = MAX_LINE_CHARS * 4 + 8  # bytes enough for MAX_LINE_CHARS characters of any UTF-8
    kept: list[str] = []
    cut = 0
    index = 0  # the line that `pending` (and the start of the next block) belongs to
    pending = b""
    last = b"\n"
    for block in chunks:
        if not block:
            break
        last = block[-1:]
        newlines = block.count(b"\n")
        if index + newlines < offset or index >= stop:
            index += newlines  # no shown line starts or ends here: just count
            pending = b""
            continue
        parts = (pending + block).split(b"\n")
        pending = parts.pop()
        first, end = max(offset - index, 0), min(stop - index, len(parts))
        if first < end:
            cut += _decode_lines(parts[first:end], kept)
        index += len(parts)
        if len(pending) > keep_max:
            pending = pending[:keep_max]  # an endless line: keep only what can be shown
    total = index + (0 if last == b"\n" else 1)
    if last != b"\n" and offset <= index < stop:
        text, was_cut = _cut(pending.decode("utf-8", "replace"))
        kept.append(text)
        cut += was_cut
    return Window(kept, min(offset, total), total, cut)


def _decode_lines(raw: list[bytes], into: list[str]) -> int:
    """Append the UTF-8 lines `raw` (each ended by a newline in the file) to `into` as `_cut` shows them, and
    return how many were cut. One decode and one split for the whole run of lines: a newline byte never sits
    inside a UTF-8 sequence, so each line decodes exactly as it would alone."""
    text = b"\n".join(raw).decode("utf-8", "replace")
    if "\r" in text:
        text = (text + "\n").replace("\r\n", "\n")[:-1]
    lines = text.split("\n")
    if max(map(len, lines)) <= MAX_LINE_CHARS:
        into.extend(lines)
        return 0
    cut = sum(len(line) > MAX_LINE_CHARS for line in lines)
    into.extend(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + LINE_CUT_MARKER for line in lines)
    return cut


def _window_decoded(chunks, encoding: str, offset: int, limit: int) -> Window:  # noqa: ANN001 - blocks from _chunks
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    stop = offset + limit
    keep_max = MAX_LINE_CHARS + 2  # enough to show a line, and to see it is longer even without its "\r"
    kept: list[str] = []
    cut = 0
    index = 0
    pending = ""
    for block in chunks:
        final = not block
        text = decoder.decode(block, final=final)
        parts = (pending + text).split("\n")
        pending = parts.pop()
        for line in parts:
            if offset <= index < stop:
                shown, was_cut = _cut(line)
                kept.append(shown)
                cut += was_cut
            index += 1
        if len(pending) > keep_max:
            pending = pending[:keep_max]  # an endless line: keep only what can be shown
        if final:
            break
    total = index + (1 if pending else 0)
    if pending and offset <= index < stop:
        shown, was_cut = _cut(pending)
        kept.append(shown)
        cut += was_cut
    return Window(kept, min(offset, total), total, cut)


def decode_text(data: bytes, kind: FileKind) -> str:
    """Whole-content decoding for small files (the BOM is dropped)."""
    return data[len(kind.bom) :].decode(kind.encoding, "replace")
