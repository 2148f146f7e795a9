"""Faithful text: a file is decoded strictly as what it is (UTF-8, UTF-8 with BOM, or UTF-16/32 with BOM)
and encoded back the same way; its line-ending convention is detected and kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from coretools.errors import ErrorKind, ToolError
from coretools.tools.filetypes import detect_bom


@dataclass(frozen=True)
class Codec:
    encoding: str = "utf-8"  # Python codec name
    bom: bytes = b""

    @property
    def label(self) -> str:
        name = {"utf-8": "UTF-8", "utf-16-le": "UTF-16 LE", "utf-16-be": "UTF-16 BE",
                "utf-32-le": "UTF-32 LE", "utf-32-be": "UTF-32 BE"}.get(self.encoding, self.encoding)
        return f"{name} with byte-order mark" if self.bom else name

    @property
    def plain(self) -> bool:
        return self.encoding == "utf-8" and not self.bom


UTF8 = Codec()


class NotText(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def decode(data: bytes) -> tuple[str, Codec]:
    """Decode file content exactly, or raise NotText saying why it is not text we can write back."""
    found = detect_bom(data[:4])
    if found is not None:
        encoding, bom = found
        try:
            return data[len(bom):].decode(encoding), Codec(encoding, bom)
        except UnicodeDecodeError as exc:
            raise NotText(f"it starts with a {Codec(encoding, bom).label} but byte {exc.start + len(bom)} is not "
                          f"valid {encoding.upper()}") from None
    if b"\0" in data:
        raise NotText("it looks binary (it contains NUL bytes) and has no UTF-16/UTF-32 byte-order mark")
    try:
        return data.decode("utf-8"), UTF8
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        raise NotText(f"it is not valid UTF-8 (byte 0x{bad} at offset {exc.start}; perhaps Latin-1 or another "
                      "legacy code page) and has no UTF-16/UTF-32 byte-order mark") from None


def encode(text: str, codec: Codec, shown: str) -> bytes:
    try:
        return codec.bom + text.encode(codec.encoding)
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"Cannot write {shown}: character {text[exc.start:exc.end]!r} at position {exc.start} cannot be encoded "
            f"in {codec.label} (the file's encoding). Nothing was written. Remove it or use a valid character.",
            ErrorKind.INVALID_TOOL_PARAMS,
        ) from None


@dataclass(frozen=True)
class Newlines:
    """A text's line breaks: the one most of them use (None if there are none) and whether both kinds occur."""

    dominant: str | None
    crlf: bool  # some line break is CRLF
    mixed: bool  # both CRLF and bare LF occur


def newlines(text: str) -> Newlines:
    if "\r" not in text:  # the common case, decided by one fast scan
        return Newlines("\n" if "\n" in text else None, False, False)
    lf = text.count("\n")
    if not lf:
        return Newlines(None, False, False)
    crlf = text.count("\r\n")
    return Newlines("\r\n" if crlf * 2 >= lf else "\n", crlf > 0, 0 < crlf < lf)


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def with_newline(text: str, newline: str) -> str:
    text = to_lf(text)
    return text if newline == "\n" else text.replace("\n", newline)



def style_notes(codec: Codec, breaks: Newlines) -> list[str]:
    """Say what was kept when it is not plain UTF-8 with LF endings (so nobody is surprised either way)."""
    kept = []
    if breaks.mixed:
        kept.append("mixed line endings")
    elif breaks.dominant == "\r\n":
        kept.append("CRLF line endings")
    if not codec.plain:
        kept.append(f"{codec.label} encoding")
    return [f"Kept the file's {' and '.join(kept)}."] if kept else []
