"""ripgrep's output as search reads it: records passed over in C (`RecordReader.skip_to`), a file's records
taken in one piece (`take_to`), and the runner's streamed runs with a widened pipe."""

from __future__ import annotations

import fcntl
import os
import sys

from coretools.sandbox.ripgrep import RecordReader
from coretools.sandbox.runner import Runner, RunSpec, _widen_pipe

F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


def reader(*chunks: bytes) -> RecordReader:
    return RecordReader(iter(chunks))


def test_take_to_gives_the_records_before_the_prefix_when_they_are_read_already() -> None:
    records = reader(b"m1\nm2\nm3\nend a\nbegin b\n")
    assert records.take_to(b"end", 100) is None  # nothing read yet: it reads nothing itself
    assert next(records) == b"m1"
    assert records.take_to(b"end", 100) == b"m2\nm3\n"
    assert next(records) == b"end a"
    assert records.take_to(b"begin", 100) == b""  # the next record is the one asked for
    assert list(records) == [b"begin b"]


def test_take_to_consumes_nothing_when_the_prefix_is_not_read_yet_or_too_far() -> None:
    records = reader(b"m0\nm1\nm2\nm3\n", b"end a\n")
    assert next(records) == b"m0"
    assert records.take_to(b"end", 100) is None  # in the next chunk
    assert records.take_to(b"m3", 5) is None  # "m1\nm2\n" is 6 bytes
    assert records.take_to(b"m3", 6) == b"m1\nm2\n"
    assert list(records) == [b"m3", b"end a"]


def test_skip_to_tallies_what_it_passed_before_reading_more() -> None:
    seen: list[int] = []
    records = reader(b"m\nm\nm\n", b"m\nm\nend 5\nm\nend 1\n")
    records.on_chunk = lambda: seen.append(records.tallied)
    assert records.skip_to(b"end", b"m") == b"end 5"
    assert seen == [0, 3]  # at the second chunk's arrival, the three records passed so far are counted
    before = records.tallied
    assert records.skip_to(b"end", b"m") == b"end 1"  # found in what was read: nothing is counted
    assert records.tallied == before
    assert records.skip_to(b"end") is None


def test_skip_to_and_next_is_find_the_record_however_the_stream_is_cut() -> None:
    """Against the records as a list: `skip_to` gives the first record from the one at hand that starts
    with the prefix (the one at hand included), `next_is` tells without consuming, for random streams cut
    into chunks anywhere (inside a record, inside a prefix)."""
    import random

    rng = random.Random(11)
    for _ in range(400):
        kinds = [b"end", b"en", b"m", b"mx", b"e", b"endx"]
        records = [rng.choice(kinds) + b"%d" % i for i in range(rng.randint(1, 12))]
        stream = b"".join(r + b"\n" for r in records)
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 6))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
        got = reader(*chunks)
        at = 0
        while True:
            prefix = rng.choice([b"end", b"m", b"e"])
            assert got.next_is(prefix) == (at < len(records) and records[at].startswith(prefix))
            want = next((i for i in range(at, len(records)) if records[i].startswith(prefix)), None)
            found = got.skip_to(prefix, b"m")
            assert found == (records[want] if want is not None else None), (records, chunks, at, prefix)
            if want is None:
                break
            at = want + 1


def test_widen_pipe() -> None:
    read_end, write_end = os.pipe()
    try:
        _widen_pipe(write_end, 1 << 20)
        assert fcntl.fcntl(read_end, F_GETPIPE_SZ) == 1 << 20
    finally:
        os.close(read_end)
        os.close(write_end)
    _widen_pipe(write_end, 1 << 20)  # refused (here: a closed descriptor): nothing to do


def test_a_streamed_run_with_a_wide_pipe_delivers_every_byte() -> None:
    size = 5 << 20
    program = f"import sys; sys.stdout.buffer.write(bytes(range(256)) * ({size} // 256))"
    run = Runner("test").stream(RunSpec([sys.executable, "-c", program], wall_timeout=30, pipe_size=1 << 20))
    data = b"".join(run.chunks())
    assert run.outcome.exit_code == 0
    assert len(data) == size and data == bytes(range(256)) * (size // 256)
