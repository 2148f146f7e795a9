"""The append-only record files the edit journal keeps its segments in.

A record is a fixed prefix (magic, header length, blob length, the blob's CRC-32, then a CRC-32 of those
fields and the header), a header and a blob. Appending one and fsyncing the file makes it durable in one
barrier; a record cut short or garbled by a crash fails its lengths or checksums and ends the scan there.
How the bytes reach the disk (short writes, fsync) is `coretools.sandbox.diskio`'s.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from coretools.sandbox.diskio import read_all, write_all

RECORD_MAGIC = b"CTR1"
_PREFIX = struct.Struct(">4sIQII")
MAX_RECORD_HEADER = 1 << 20


@dataclass(frozen=True)
class Blob:
    """Where a record's blob lies in its file, and its CRC-32."""

    offset: int
    length: int
    crc: int


def pack_prefix(header: bytes, blob: bytes, crc: int | None = None) -> bytes:
    """The prefix and header of a record carrying `blob` (written after them; `crc` is its CRC-32)."""
    crc = zlib.crc32(blob) if crc is None else crc
    return _PREFIX.pack(RECORD_MAGIC, len(header), len(blob), crc, _header_crc(len(header), len(blob), crc, header)) + header


def _header_crc(hlen: int, blen: int, bcrc: int, header: bytes) -> int:
    return zlib.crc32(header, zlib.crc32(struct.pack(">IQI", hlen, blen, bcrc)))


def scan_records(fd: int, start: int, end: int, *, check_last: bool = True) -> Iterator[tuple[int, bytes, Blob]]:
    """`(next offset, header, blob)` of each whole record from `start` up to `end`, stopping at the first
    that is cut short or fails its header checksum. The last record's blob is checked as well (unless not
    `check_last`): it is the only one a crash can have left half written, every earlier one was fsynced
    before the next began."""
    offset = start
    while offset + _PREFIX.size <= end:
        head = os.pread(fd, _PREFIX.size + 4096, offset)
        if len(head) < _PREFIX.size:
            return
        magic, hlen, blen, bcrc, hcrc = _PREFIX.unpack_from(head)
        stop = offset + _PREFIX.size + hlen + blen
        if magic != RECORD_MAGIC or hlen > MAX_RECORD_HEADER or stop > end:
            return
        header = head[_PREFIX.size : _PREFIX.size + hlen]
        if len(header) < hlen:
            header += os.pread(fd, hlen - len(header), offset + _PREFIX.size + len(header))
        blob = Blob(offset + _PREFIX.size + hlen, blen, bcrc)
        if _header_crc(hlen, blen, bcrc, header) != hcrc or (check_last and stop == end and not blob_intact(fd, blob)):
            return
        yield stop, header, blob
        offset = stop


def read_blob(fd: int, blob: Blob) -> bytes | None:
    """The blob's bytes, or None when they do not match its length and checksum."""
    data = read_all(fd, blob.length, blob.offset, blob.length)
    return data if len(data) == blob.length and zlib.crc32(data) == blob.crc else None


def blob_intact(fd: int, blob: Blob) -> bool:
    """Whether the blob's bytes match its length and checksum, read a MiB at a time."""
    crc, offset, left = 0, blob.offset, blob.length
    while left:
        chunk = os.pread(fd, min(left, 1 << 20), offset)
        if not chunk:
            return False
        crc, offset, left = zlib.crc32(chunk, crc), offset + len(chunk), left - len(chunk)
    return crc == blob.crc


def append_record(fd: int, start: int, header: bytes, blob: bytes, *, sync: bool = True) -> tuple[int, Blob]:
    """Append one record at `start`, the end of the file open with O_APPEND at `fd`, and (if `sync`) make
    it durable; returns the offset after it and where its blob lies. fdatasync is enough: it writes the
    data and the new size, all that a later read needs (a new file's name is the caller's to sync)."""
    crc = zlib.crc32(blob)
    prefix = pack_prefix(header, blob, crc)
    written = os.writev(fd, [prefix, blob]) if blob else 0
    if written < len(prefix):
        write_all(fd, prefix[written:])
        written = len(prefix)
    if written < len(prefix) + len(blob):
        write_all(fd, memoryview(blob)[written - len(prefix):])
    if sync:
        os.fdatasync(fd)
    return start + len(prefix) + len(blob), Blob(start + len(prefix), len(blob), crc)
