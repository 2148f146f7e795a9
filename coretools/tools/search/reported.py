"""What rg reports about one file, taken as far as the workspace gateway's own copy of the file confirms it.

rg walks the tree by name, so a directory swapped for a symlink between the gateway's check of the search
directory and rg's descent could make rg read a file outside the roots. Nothing rg read is shown: for each
file it reports, the file is opened again through the workspace gateway (a contained open of its
root-relative path), and each reported line is read from that descriptor at the byte offset rg gives and
compared with the line rg reported. Only lines that verify are counted and shown, and the text shown is the
gateway's. A file that cannot be opened through the gateway, or a line that differs, is left out and
counted as unverified.

rg's JSON records are read without a full JSON parse in the common case (`parse_match`); the lines of a
file that may be shown are kept as rg wrote them until it is known whether they are (see `DEFER_RECORD`).
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass

from coretools.sandbox import ripgrep
from coretools.tools.search.regex import LineRegex
from coretools.tools.search.results import FileLines, Request, show_line

VERIFY_CHARS = 2000  # of a record rg cut for length, the text compared with the gateway's copy
MAX_LONG_LINE = 16 << 20  # bytes of one line read back to show excerpts of it


BEGIN = b'{"type":"begin"'
MATCH = b'{"type":"match"'
CONTEXT = b'{"type":"context"'
END = b'{"type":"end"'
_JSON_STR = rb'"((?:[^"\\]|\\.)*)"'
_LINE_NUMBER = re.compile(rb'"line_number":(\d+)')
_OFFSET = re.compile(rb'"absolute_offset":(\d+)')
_LINES_TEXT = re.compile(rb'"lines":\{"text":"')
_MATCH_FIELDS = re.compile(
    rb'"lines":\{"(text|bytes)":"([^"\\]*(?:\\.[^"\\]*)*)"\},"line_number":(\d+),"absolute_offset":(\d+),'
)
_TEXT_FIELDS = re.compile(
    rb'"lines":\{"text":"([^"\\]*(?:\\.[^"\\]*)*)"\},"line_number":(\d+),"absolute_offset":(\d+),'
)
# the same, never across records joined by newlines (a record has none: JSON escapes them)
_TEXT_FIELDS_EACH = re.compile(
    rb'"lines":\{"text":"([^"\\\n]*(?:\\.[^"\\\n]*)*)"\},"line_number":(\d+),"absolute_offset":(\d+),'
)
_MATCHED_LINES = re.compile(rb'"matched_lines":(\d+)')
_BEGIN_HEAD = b'{"type":"begin","data":{"path":{"text":"'
_BEGIN_DOT = _BEGIN_HEAD + b"./"
_BEGIN_TEXT = re.compile(rb'^\{"type":"begin","data":\{"path":\{"text":' + _JSON_STR + rb'\}\}\}$')
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _json_text(obj: dict) -> str:
    if "text" in obj:
        return obj["text"]
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", "surrogateescape")


def _begin_path(data: bytes) -> str:
    if data.startswith(_BEGIN_HEAD) and data.endswith(b'"}}}'):
        raw = data[len(_BEGIN_HEAD) : -4]
        if b"\\" not in raw and b'"' not in raw:
            return raw.decode("utf-8", "surrogateescape")
    m = _BEGIN_TEXT.match(data)
    if m and b"\\" not in m.group(1):
        return m.group(1).decode("utf-8", "surrogateescape")
    return _json_text(json.loads(data)["data"]["path"])


def begin_rel(head: bytes) -> str:
    """The path a `begin` record names, relative to the directory rg searched."""
    if head.startswith(_BEGIN_DOT) and head.endswith(b'"}}}'):  # the usual `./path`, nothing escaped
        raw = head[len(_BEGIN_DOT) : -4]
        if b"\\" not in raw and b'"' not in raw:
            return raw.decode("utf-8", "surrogateescape")
    rel = _begin_path(head)
    return rel[2:] if rel.startswith("./") else rel


def _unescape(raw: bytes) -> bytes | None:
    """The bytes of a JSON string body as rg wrote it (rg's `text` is valid UTF-8)."""
    if b"\\" not in raw:
        return raw
    if raw.endswith(b"\\n") and b"\\" not in raw[:-2]:
        return raw[:-2] + b"\n"
    try:
        return json.loads(b'"' + raw + b'"').encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return None


def matched_lines(end: bytes | ripgrep.RgLine) -> int | None:
    """The matching lines an `end` record's statistics give for its file (None if it has none)."""
    record = end if type(end) is bytes else end.tail
    at = record.rfind(b'"matched_lines":')
    stats = _MATCHED_LINES.match(record, at) if at >= 0 else None
    return None if stats is None else int(stats.group(1))


@dataclass(slots=True)
class RgMatch:
    """What rg claims about one matching line: where it is and what it says. `cut`: `data` is only the
    start of a line too long to keep whole."""

    number: int
    offset: int
    data: bytes
    cut: bool = False


def match_fields(line: bytes) -> tuple[int, int, bytes] | None:
    """The line number, offset and text of a whole `match` record in the usual layout (`"lines":{"text":
    "…"},"line_number":N,"absolute_offset":N,`), else None (`parse_match` reads the others)."""
    m = _TEXT_FIELDS.search(line)
    if m is None:
        return None
    raw, number, offset = m.groups()
    data = _decoded(raw)
    return None if data is None else (int(number), int(offset), data)


def _decoded(raw: bytes) -> bytes | None:
    """The bytes a record's JSON-escaped line text stands for (None if it cannot be read)."""
    at = raw.find(b"\\")
    if at < 0:
        return raw
    if at == len(raw) - 2 and raw[-1] == 110:  # only the line's end, `\n`
        return raw[:-2] + b"\n"
    return _unescape(raw)


def many_fields(records: list[bytes]) -> list[tuple[int, int, bytes] | None]:
    """`match_fields` of each of several whole records, found in one pass over them when they all have the
    usual layout (one regex search per record otherwise)."""
    found = _TEXT_FIELDS_EACH.findall(b"\n".join(records))
    if len(found) != len(records):
        return [match_fields(record) for record in records]
    out: list[tuple[int, int, bytes] | None] = []
    for raw, number, offset in found:
        data = _decoded(raw)
        out.append(None if data is None else (int(number), int(offset), data))
    return out


def claim_fields(record: bytes | ripgrep.RgLine) -> tuple[int, int, bytes] | None:
    """The line number, offset and text of any `match` record, without an `RgMatch` in the usual layout
    (`match_fields`); the others, and a record cut for length (its text then the line's start), through
    `parse_match`."""
    if type(record) is bytes:
        fields = match_fields(record)
        if fields is not None:
            return fields
    claim = parse_match(record)
    return None if claim is None else (claim.number, claim.offset, claim.data)


def parse_match(line: bytes | ripgrep.RgLine) -> RgMatch | None:
    """One `match` record of rg's JSON (bytes, or an `RgLine` cut for length), without a full JSON parse in
    the common case."""
    if type(line) is not bytes:
        return _salvage_match(line)
    fields = match_fields(line)
    if fields is not None:
        return RgMatch(*fields)
    m = _MATCH_FIELDS.search(line)
    if m is not None:
        raw = m.group(2)
        data = _unescape(raw) if m.group(1) == b"text" else base64.b64decode(raw)
        return None if data is None else RgMatch(int(m.group(3)), int(m.group(4)), data)
    try:
        obj = json.loads(line)["data"]
        text = obj["lines"]
        data = text["text"].encode("utf-8") if "text" in text else base64.b64decode(text.get("bytes", ""))
        return RgMatch(int(obj["line_number"]), int(obj["absolute_offset"]), data)
    except (ValueError, KeyError, TypeError, UnicodeEncodeError):
        return None


def _salvage_match(line: ripgrep.RgLine) -> RgMatch | None:
    """A match record too long to keep whole: its line number and offset (near the end) and the start of
    its text."""
    number = _LINE_NUMBER.findall(line.tail)
    offset = _OFFSET.findall(line.tail)
    start = _LINES_TEXT.search(line.head)
    if not number or not offset or not start:
        return None
    raw = line.head[start.end() : start.end() + 4 * VERIFY_CHARS].decode("utf-8", "replace")
    raw = re.sub(r"\\(u[0-9a-fA-F]{0,3})?$", "", raw)
    try:
        text = json.loads(f'"{raw}"')
    except ValueError:
        return None
    # the chunk may end inside a character (decoded as U+FFFD): compare only what is surely whole
    text = text[:VERIFY_CHARS].rstrip("\ufffd")
    return RgMatch(int(number[-1]), int(offset[-1]), text.encode("utf-8", "surrogateescape"), cut=True)


class GatewayCopy:
    """A file rg reported, as the workspace gateway reads it: rg's byte offsets are into the stream it
    searched, which is the file without a UTF-8 byte-order mark, or transcoded to UTF-8 when the file has a
    UTF-16 one; this reproduces that stream. Reads go through a small block cache (matches come in order)."""

    BLOCK = 1 << 16
    SMALL = 1 << 13
    MAX_TRANSCODED = 64 << 20

    def __init__(self, fd: int, block: int = BLOCK) -> None:
        """`block`: the bytes read at a time; `SMALL` where one line is checked, not a run of them."""
        self.fd = fd
        self.block_start = 0
        self.block_size = block
        self.block = os.pread(fd, block, 0)  # most files: the only read
        head = self.block[:3]
        self.shift = 3 if head == UTF8_BOM else 0
        self.whole = False
        if head[:2] in UTF16_BOMS:
            size = os.fstat(self.fd).st_size
            data = os.pread(self.fd, size, 0) if size <= self.MAX_TRANSCODED else b""
            self.block = data.decode("utf-16", "replace").encode("utf-8") if data else b""
            self.whole = True

    def read(self, offset: int, size: int) -> bytes:
        if self.whole:
            return self.block[offset : offset + size]
        offset += self.shift
        end = offset + size
        if self.fd >= 0 and not (self.block_start <= offset and end <= self.block_start + len(self.block)):
            self.block = os.pread(self.fd, max(size, self.block_size), offset)
            self.block_start = offset
        return self.block[offset - self.block_start : end - self.block_start]

    def kept(self) -> GatewayCopy | None:
        """This copy, no longer reading from its descriptor (the caller closes it), if it holds the whole
        file already; else None."""
        if self.whole or (self.block_start == 0 and len(self.block) < self.block_size):
            self.fd = -1
            return self
        return None

    def confirm(self, claim: RgMatch, whole: bool = True) -> bytes | None:
        """The line's bytes as read through the gateway if they are what rg reported, else None; with
        `whole`, a line rg reported cut for length is completed from the gateway's copy (up to
        `MAX_LONG_LINE`)."""
        data = self.read(claim.offset, len(claim.data))
        if data != claim.data:
            return None
        if claim.cut and whole:
            data += self.rest_of_line(claim.offset + len(data))
        return data

    def rest_of_line(self, offset: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while size < MAX_LONG_LINE:
            chunk = self.read(offset + size, min(1 << 20, MAX_LONG_LINE - size))
            end = chunk.find(b"\n")
            if end >= 0 or not chunk:
                parts.append(chunk[: end if end >= 0 else len(chunk)])
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)


def confirms(fd: int, offset: int, data: bytes) -> bool:
    """Whether the file open at `fd` holds `data` at `offset` of rg's stream, as `GatewayCopy(fd).confirm`
    finds for a claim it does not complete (`whole=False`): a line within the first `GatewayCopy.SMALL`
    bytes (a counted file's first match usually is) is compared with that first block, read as
    `GatewayCopy` reads it but without building one. (Always the same size: reads of just the bytes up to
    the line, of every size, left the server's heap fragmented, about 10 MiB larger.)"""
    size = len(data)
    if offset + size + len(UTF8_BOM) <= GatewayCopy.SMALL:
        block = os.pread(fd, GatewayCopy.SMALL, 0)
        if block[:2] not in UTF16_BOMS:
            start = offset + len(UTF8_BOM) if block.startswith(UTF8_BOM) else offset
            return block[start : start + size] == data
    return GatewayCopy(fd, GatewayCopy.SMALL).read(offset, size) == data


# rg reports files in no particular order when it runs on several threads, so a file whose lines the collector
# could keep when it arrives is often pushed out later by files that sort before it. The match records of such
# a file (after its first, which is checked at once) are kept as rg wrote them and checked against the
# gateway's copy only if the collector still keeps them once rg is done (`RipgrepEngine._confirm_deferred`).
DEFER_RECORD = 4096  # a longer record read on its own (not in a file's `take_rest` piece) is checked at once
DEFER_FILE = 1 << 16  # a file's records taken at once (`RecordReader.take_to`) when its end is read already
DEFER_BYTES = 2 << 20  # of records deferred per rg run, beyond which they are checked at once


class Deferral:
    """The bytes of records one rg run may still defer."""

    def __init__(self) -> None:
        self.left = DEFER_BYTES


class Reported:
    """The matches rg reports for one file, kept only as far as the gateway's copy confirms them: lines
    matching `exclude` are not matches, and `found` keeps the text of the first ones and the context
    around them."""

    def __init__(self, key: tuple[int, str], fd: int) -> None:
        self.key = key
        self.fd = fd
        self.rejected = 0
        self.seen = 0  # match records handled one by one
        self.found: FileLines | None = None
        self.deferral: Deferral | None = None

    def start(self, req: Request, exclude: LineRegex | None, spans, keep: bool, deferral: Deferral) -> None:
        """`keep`: whether the collector could keep lines of this file (it only changes on a commit);
        `deferral`: the run's allowance for deferred records, used when no line needs checking at once."""
        self.found = found = FileLines(req.file_limit, req.before, req.after)
        self.exclude, self.spans, self.keep = exclude, spans, keep
        each = exclude is not None or bool(req.before or req.after)  # every line is read, not only the first
        if keep and not each:
            self.deferral = deferral
        many = each or (keep and found.wants_text and self.deferral is None)
        self.copy = GatewayCopy(self.fd, GatewayCopy.BLOCK if many else GatewayCopy.SMALL)

    def settled(self) -> bool:
        """Whether the file's further matches only need counting: no line of it is wanted (as a match or
        as context), no exclude pattern has to be tried on each, and one match has been checked against the
        gateway's copy (so a file rg read somewhere else is not counted on rg's word alone)."""
        found = self.found
        assert found is not None
        return (
            self.seen > 0
            and self.exclude is None
            and not found.wants_context
            and not (self.keep and found.wants_text)
        )

    def count_rest(self, end: bytes | ripgrep.RgLine) -> None:
        """Count the matches passed over unparsed, from the file's `end` record (rg's `matched_lines`);
        a file with a line that did not verify keeps only its verified ones."""
        found = self.found
        assert found is not None
        matched = matched_lines(end)
        if matched is None:
            self.rejected += 1
            return
        if not self.rejected:
            found.count += max(0, matched - self.seen)

    def line(self, record: bytes | ripgrep.RgLine, is_match: bool) -> None:
        """One `match` (or `context`) record of this file."""
        found = self.found
        assert found is not None
        keep = self.keep
        if is_match:
            self.seen += 1
            deferral = self.deferral
            if (
                deferral is not None
                and self.seen > 1
                and type(record) is bytes
                and len(record) <= DEFER_RECORD
                and deferral.left >= len(record)
                and found.wants_text
            ):
                deferral.left -= len(record)
                found.defer([record])
                return
        elif not found.wants_context:
            return
        claim = parse_match(record)
        whole = self.exclude is not None or found.wants_context or (keep and found.wants_text)
        try:
            data = self.copy.confirm(claim, whole) if claim is not None else None
        except OSError:
            data = None
        if data is None:
            self.rejected += 1
            return
        if is_match and not (self.exclude is not None and self.exclude.search_bytes(data.rstrip(b"\r\n"))):
            found.match(claim.number, lambda: show_line(data, self.spans), keep)
        else:
            found.other(claim.number, lambda: show_line(data))

    def take_rest(self, records: ripgrep.RecordReader) -> None:
        """After the first match of a file whose further matches are deferred: all of them at once when the
        reader holds them up to the file's `end` already (in one piece of at most `DEFER_FILE` bytes); else
        they come one by one through `line`."""
        deferral, found = self.deferral, self.found
        assert deferral is not None and found is not None
        if not found.wants_text:
            return
        region = records.take_to(END, min(DEFER_FILE, deferral.left))
        if region:
            deferral.left -= len(region)
            parts = region.split(b"\n")
            parts.pop()
            self.seen += len(parts)
            found.defer(parts)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
