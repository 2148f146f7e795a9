"""ripgrep's output as records (lines): whole ones as bytes, ones too long to keep whole as `RgLine`s, read
one at a time from the raw stream with ways to pass over the ones not wanted in C (`RecordReader`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass
class RgLine:
    """A record too long to keep whole (`RgRun.batches` gives the others as plain bytes): its first
    `max_line` bytes and its last 4 KB."""

    data: bytes  # always b"": the whole record was not kept
    head: bytes
    tail: bytes
    cut: bool


class RecordReader:
    """rg's output as records read one at a time from the raw stream (whole ones as bytes, ones longer than
    `limit` as `RgLine`s), without splitting each chunk into a list. `skip_to` passes over records in C
    (`bytes.find`), so a consumer that only needs a file's `end` record makes no object per match. A
    partial last record (the stream cut short) is dropped, as by `RgRun.batches`."""

    def __init__(self, chunks: Iterator[bytes], sep: bytes = b"\n", limit: int = 256 * 1024) -> None:
        self._chunks = chunks
        self._buf = b""
        self._pos = 0
        self.sep, self.limit = sep, limit
        self.on_chunk: Callable[[], None] | None = None  # called as each chunk arrives (progress reports)
        self.tallied = 0  # records counted by `skip_to`

    def __iter__(self) -> RecordReader:
        return self

    def __next__(self) -> bytes | RgLine:
        while True:
            end = self._buf.find(self.sep, self._pos)
            if end >= 0:
                record = self._buf[self._pos : end]
                self._pos = end + 1
                if len(record) <= self.limit:
                    return record
                return RgLine(b"", record[: self.limit], record[-4096:], True)
            if len(self._buf) - self._pos > self.limit:
                return self._cut()
            if not self._more():
                raise StopIteration

    def skip_to(self, prefix: bytes, tally: bytes | None = None) -> bytes | RgLine | None:
        """The next record that starts with `prefix` (None if the stream ends first); those before it are
        read past unparsed. The ones among them that start with `tally` are counted in `tallied` as far as
        they were passed before more of the stream is read (`on_chunk` sees them; the caller learns the
        rest from the record returned). Neither prefix may contain `sep`, which no record does either."""
        marker = self.sep + prefix
        at = self._buf.find(marker, self._pos)
        if at >= 0:  # the usual case: the record is read already (and so is enough of the one at hand)
            if not self._buf.startswith(prefix, self._pos):
                self._pos = at + 1
            return next(self, None)
        while len(self._buf) - self._pos < max(len(prefix), len(tally or b"")) and self._more():
            pass  # the record at hand must be long enough to tell what it is
        if self._buf.startswith(prefix, self._pos):
            return next(self, None)
        counted = self.sep + tally if tally is not None else b""
        first = bool(counted) and self._buf.startswith(tally, self._pos)
        overlap = max(len(marker), len(counted)) - 1  # what may be the start of a prefix cut by the chunk's end
        while True:
            at = self._buf.find(marker, self._pos)
            if at >= 0:
                self._pos = at + 1
                return next(self, None)
            if counted:
                self.tallied += self._buf.count(counted, self._pos) + first
                first = False
            self._pos = max(self._pos, len(self._buf) - overlap)  # everything before is counted and passed
            if not self._more():
                return None

    def next_is(self, prefix: bytes) -> bool:
        """Whether the next record starts with `prefix` (reading on as far as it takes to tell); nothing is
        consumed."""
        while len(self._buf) - self._pos < len(prefix) and self._more():
            pass
        return self._buf.startswith(prefix, self._pos)

    def take_to(self, prefix: bytes, limit: int) -> bytes | None:
        """The records before the next one that starts with `prefix`, as they are (each ending with `sep`),
        if that one is already read and they come to at most `limit` bytes; else None, and nothing is
        consumed. `prefix` may not contain `sep`."""
        buf, pos = self._buf, self._pos
        if buf.startswith(prefix, pos):
            return b""
        at = buf.find(self.sep + prefix, pos, pos + limit + len(prefix))
        if at < 0:
            return None
        self._pos = at + 1
        return buf[pos : at + 1]

    @classmethod
    def of(cls, run) -> RecordReader:
        """The records of `run`: an `RgRun`'s raw stream, or for anything that only gives `batches()` (a
        double replaying recorded output), those batches joined back into a stream."""
        reader = getattr(run, "reader", None)
        if reader is not None:
            return reader()
        sep = getattr(run, "sep", b"\n")
        return cls((sep.join(batch) + sep for batch in run.batches() if batch), sep)

    def close(self) -> None:
        """Stop reading: rg is killed and reaped now if it is still running."""
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()

    def _more(self) -> bool:
        """Append the next chunk to what is left unread; False at the end of the stream."""
        chunk = next(self._chunks, None)
        if chunk is None:
            self._buf, self._pos = b"", 0
            return False
        if self.on_chunk is not None:
            self.on_chunk()
        self._buf = self._buf[self._pos :] + chunk if self._pos < len(self._buf) else chunk
        self._pos = 0
        return True

    def _cut(self) -> RgLine:
        """A record too long to keep: its first `limit` bytes and last 4 KB, the rest read past."""
        head, tail = self._buf[self._pos : self._pos + self.limit], self._buf[self._pos :][-4096:]
        self._buf, self._pos = b"", 0
        for chunk in self._chunks:
            if self.on_chunk is not None:
                self.on_chunk()
            end = chunk.find(self.sep)
            if end >= 0:
                self._buf, self._pos = chunk, end + 1
                return RgLine(b"", head, (tail + chunk[:end])[-4096:], True)
            tail = (tail + chunk)[-4096:]
        raise StopIteration
