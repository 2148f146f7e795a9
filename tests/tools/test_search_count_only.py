"""search_file_content (ripgrep engine): files past the shown limit are only counted (`_count_only`), and rg
on one thread reports files sorted by path; neither changes an answer.

The same searches run three ways on a mixed tree (many files, long lines, binary files, CRLF, invalid
UTF-8, byte-order marks, lines with escapes) must give byte-identical answers: every file through the
general path (`Reported`, rg's own order), the default on one rg thread (sorted, count-only), and the
default on two threads. And a count-only file is still checked against the gateway: rg's word alone does
not count it.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from coretools.sandbox import ripgrep
from coretools.tools.search import engines as search_engines
from tests.conftest import call_tool, text_of
from tests.readside import fake_rg, write_files

pytestmark = pytest.mark.anyio


async def search(root: Path, args: dict):
    return await call_tool(root, "search_file_content", args, "--search-engine", "ripgrep")


def mixed_tree(root: Path) -> None:
    rng = random.Random(3)
    words = ["alpha", "beta", "Alpha", "ALPHA", "needle", "délta", '\tquote"d', "back\\slash"]
    dirs = ["", "a", "a-b", "a/b", "a.b", "A", "z/y", "node_modules", "sub dir", "ünï"]
    files: dict[str, bytes] = {".gitignore": b"*.log\n"}
    for i in range(160):
        kind = rng.random()
        lines = [f"line {n} {rng.choice(words)} {rng.choice(words)} end" for n in range(rng.randint(0, 30))]
        nl = "\r\n" if kind < 0.15 else "\n"
        data = nl.join(lines).encode() + (nl.encode() if rng.random() < 0.8 else b"")
        if kind < 0.15:
            pass  # CRLF
        elif kind < 0.22:
            data = data.replace(b"beta", b"be\xffta\xfe")  # not UTF-8
        elif kind < 0.27:
            data += b"\0binary tail alpha\n"  # a NUL after the matches
        elif kind < 0.30:
            data = b"alpha\0" + data  # a NUL first
        elif kind < 0.34:
            data = b"x" * rng.choice([2500, 9000, 70000]) + b" alpha needle " + b"y" * 3000 + b"\n" + data
        elif kind < 0.37:
            data = b"\xef\xbb\xbf" + data
        elif kind < 0.39:
            data = b"\xff\xfe" + data.decode("utf-8", "replace").encode("utf-16-le")
        elif kind < 0.45:
            data = b"".join(b"alpha %d\n" % k for k in range(rng.randint(50, 300)))
        name = f"f{i}{rng.choice(['.py', '.txt', '.log', ''])}"
        files[f"{rng.choice(dirs)}/{name}".lstrip("/")] = data
    write_files(root, files)


QUERIES = [
    {"pattern": "alpha"},
    {"pattern": "alpha", "total_max_matches": 7},
    {"pattern": "alpha", "total_max_matches": 60, "max_matches_per_file": 2},
    {"pattern": "alpha", "names_only": True, "total_max_matches": 5},
    {"pattern": "alpha", "context": 1, "total_max_matches": 40},
    {"pattern": "alpha", "exclude_pattern": "end", "total_max_matches": 30},
    {"pattern": "be.ta", "total_max_matches": 20},
    {"pattern": 'quote"d|back\\\\slash|délta', "total_max_matches": 15},
    {"pattern": "needle", "total_max_matches": 3},
    {"pattern": "alpha", "case_sensitive": True, "include": "*.py", "total_max_matches": 20},
    {"pattern": "^$", "total_max_matches": 5},
]


def general_path_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file through `Reported`, in rg's own order: as before files were only counted."""
    monkeypatch.setattr(ripgrep.RecordReader, "next_is", lambda self, prefix: False)
    monkeypatch.setattr(search_engines, "_SORTED", ())


async def answers(root: Path) -> list[tuple[str, str]]:
    out = []
    for query in QUERIES:
        result = await search(root, query)
        out.append((text_of(result), json.dumps(result.structured, sort_keys=True, default=str)))
    return out


async def test_counted_and_sorted_answers_are_the_general_paths(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mixed_tree(root)
    runs = {}
    for label, threads, general in (("general", 1, True), ("one thread", 1, False), ("two threads", 2, False)):
        with monkeypatch.context() as patch:
            patch.setattr(ripgrep, "rg_threads", lambda spare=1, n=threads: n)
            if general:
                general_path_only(patch)
            runs[label] = await answers(root)
    assert "Found" in runs["general"][0][0] and "showing the first" in runs["general"][1][0]
    for label in ("one thread", "two threads"):
        for query, want, got in zip(QUERIES, runs["general"], runs[label]):
            assert got == want, (label, query)


def reported(path: str, matched: int | None, *lines: tuple[int, int, str]) -> list[dict]:
    """rg's records for one file: (line number, byte offset, line text) per match reported, and the
    `matched_lines` its `end` record gives (None: no statistics)."""
    out: list[dict] = [{"type": "begin", "data": {"path": {"text": path}}}]
    for number, offset, text in lines:
        data = {"path": {"text": path}, "lines": {"text": text}, "line_number": number, "absolute_offset": offset}
        out.append({"type": "match", "data": {**data, "submatches": []}})
    stats = {} if matched is None else {"matched_lines": matched, "matches": matched}
    out.append({"type": "end", "data": {"path": {"text": path}, "binary_offset": None, "stats": stats}})
    return out


async def test_a_counted_file_is_checked_against_the_gateway(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one line shown (a.txt's), every later file is only counted: a first claim the gateway's copy
    does not confirm, a missing file, a link out of the root and a protected name count nothing and are
    unverified; a confirmed one counts what its `end` record says."""
    files = {"a.txt": "SECRET a\n", "b.txt": "SECRET b\nSECRET b2\n", "c.txt": "SECRET c\n", "f.txt": "SECRET f\n"}
    write_files(root, {**files, ".env": "SECRET\n"})
    os.symlink(root.parent / "root-evil" / "secret.txt", root / "d.txt")
    fake_rg(
        monkeypatch,
        [
            *reported("./a.txt", 1, (1, 0, "SECRET a\n")),
            *reported("./b.txt", 2, (1, 0, "SECRET b\n"), (2, 9, "DECOY SECRET\n")),  # only the first is checked
            *reported("./c.txt", 5, (1, 0, "DECOY SECRET\n")),
            *reported("./d.txt", 3, (1, 0, "DECOY SECRET\n")),
            *reported("./e.txt", 3, (1, 0, "SECRET e\n")),
            *reported("./.env", 1, (1, 0, "SECRET\n")),
            *reported("./f.txt", None, (1, 0, "SECRET f\n")),  # no statistics: its first counted, unverified
        ],
    )
    result = await search(root, {"pattern": "SECRET", "total_max_matches": 1})
    text = text_of(result)
    assert "DECOY" not in text
    assert text.splitlines()[1:4] == ["---", "File: a.txt", "L1: SECRET a"]
    assert result.structured["total_matches"] == 1 + 2 + 1
    assert result.structured["total_files"] == 3
    assert result.structured["unverified_files"] == 4  # c.txt, d.txt, e.txt, f.txt (.env is hidden)


async def test_a_file_read_through_a_link_is_not_counted(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rg follows a link out of the root (as if it lost a race) to a file past the shown limit: the file is
    only counted, and the gateway refuses it, so it counts nothing."""
    real = ripgrep.RgRun
    monkeypatch.setattr(ripgrep, "RgRun", lambda argv, *a, **k: real([argv[0], "--follow", *argv[1:]], *a, **k))
    monkeypatch.setattr(ripgrep, "rg_threads", lambda spare=1: 1)  # sorted: a.txt first, then d/
    write_files(root, {"a.txt": "SECRET a\n"})
    write_files(root.parent / "root-evil", {"secret.txt": "DECOY SECRET\nDECOY SECRET\n"})
    os.symlink(root.parent / "root-evil", root / "d")
    result = await search(root, {"pattern": "SECRET", "total_max_matches": 1})
    assert "DECOY" not in text_of(result)
    assert result.structured["total_matches"] == 1 and result.structured["total_files"] == 1
    assert result.structured["unverified_files"] == 1


@pytest.mark.parametrize(
    "head",
    [b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb"],
    ids=["plain", "utf8-bom", "utf16le", "utf16be", "cut-bom"],
)
def test_confirms_reads_as_the_gateway_copy_does(tmp_path: Path, head: bytes) -> None:
    """`confirms` (a counted file's first match) agrees with `GatewayCopy.confirm` whatever the claim: at
    the start, near `SMALL`, past it, past the end, cut for length, right or wrong."""
    from coretools.tools.search.reported import GatewayCopy, RgMatch, confirms

    body = b"".join(b"line %d alpha\n" % n for n in range(1200))  # about 16 KB
    path = tmp_path / "f.txt"
    path.write_bytes(head + body)
    fd = os.open(path, os.O_RDONLY)
    try:
        rng = random.Random(len(head))
        offsets = [0, 1, 5, GatewayCopy.SMALL - 20, GatewayCopy.SMALL - 3, GatewayCopy.SMALL, len(body) - 14, len(body)]
        offsets += [rng.randrange(len(body)) for _ in range(200)]
        for offset in offsets:
            for size in (0, 1, 14, 40):
                for data in (body[offset : offset + size], b"x" * size):
                    for cut in (False, True):
                        claim = RgMatch(1, offset, data, cut)
                        want = GatewayCopy(fd, GatewayCopy.SMALL).confirm(claim, False) is not None
                        assert confirms(fd, offset, data) == want, (offset, size, data, cut)
    finally:
        os.close(fd)


def test_many_fields_reads_each_record_as_match_fields_does() -> None:
    """Deferred records read in one pass: the same fields as one at a time, whatever their layout (escapes,
    `bytes` text, a record in another order, a broken one)."""
    from coretools.tools.search.reported import many_fields, match_fields

    def record(text, number: int, offset: int, kind: str = "text") -> bytes:
        data = {"path": {"text": "./a.txt"}, "lines": {kind: text}, "line_number": number, "absolute_offset": offset}
        return json.dumps({"type": "match", "data": {**data, "submatches": []}}, separators=(",", ":")).encode()

    usual = [
        record("plain\n", 1, 0), record('say "hi"\tthere\\\n', 2, 6), record("délta\r\n", 3, 30), record("", 4, 40)
    ]
    odd = [
        record("aGk=", 5, 50, kind="bytes"),
        b'{"type":"match","data":{"line_number":6,"absolute_offset":60,"lines":{"text":"x\\n"}}}',
        b'{"type":"match","data":{"lines":{"text":"cut',
    ]
    for records in (usual, usual + odd, odd + usual, [usual[1]] * 5):
        assert many_fields(records) == [match_fields(r) for r in records]
