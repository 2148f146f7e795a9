"""search_file_content (ripgrep engine) shows nothing it did not read through the workspace gateway.

rg walks the tree by name, so a directory swapped for a symlink at the right moment can make it read a file
outside the roots. These tests make that happen deterministically: rg is run with `--follow` (so it really
reads the outside file through a link inside the root, as a lost race would), or its JSON stream is replaced
by crafted records, or the tree is changed between rg's run and the verification step. Whatever rg claims,
only lines the gateway's own read confirms may be counted or shown.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coretools.sandbox import ripgrep
from coretools.tools.search import engines as search_engines
from tests.conftest import call_tool, text_of
from tests.readside import fake_rg, write_files

pytestmark = pytest.mark.anyio


async def search(root: Path, args: dict):
    return await call_tool(root, "search_file_content", args, "--search-engine", "ripgrep")


@pytest.fixture
def rg_follows_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """rg as if it lost the race at every directory: it follows symlinks."""
    real = ripgrep.RgRun

    def following(argv, *args, **kwargs):
        return real([argv[0], "--follow", *argv[1:]], *args, **kwargs)

    monkeypatch.setattr(ripgrep, "RgRun", following)


def reported(path: str, *lines: tuple[int, int, str]) -> list[dict]:
    """rg's records for one file: (line number, byte offset, line text) per match."""
    out: list[dict] = [{"type": "begin", "data": {"path": {"text": path}}}]
    for number, offset, text in lines:
        out.append(
            {
                "type": "match",
                "data": {
                    "path": {"text": path},
                    "lines": {"text": text},
                    "line_number": number,
                    "absolute_offset": offset,
                    "submatches": [],
                },
            }
        )
    out.append({"type": "end", "data": {"path": {"text": path}, "binary_offset": None, "stats": {}}})
    return out


async def test_file_read_through_a_link_out_of_the_root_is_not_shown(root: Path, rg_follows_links) -> None:
    write_files(root, {"inside.txt": "SECRET inside\n"})
    os.symlink(root.parent / "root-evil", root / "d")
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert "DECOY" not in text
    assert result.structured["total_matches"] == 1 and result.structured["total_files"] == 1
    assert result.structured["unverified_files"] == 1  # d/secret.txt: rg read it, the gateway refused it
    assert "1 file changed during the search" in text.splitlines()[0]


async def test_directory_swapped_between_rg_and_verification(
    root: Path, rg_follows_links, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rg reads `d/secret.txt` through a link to the decoy; before the check, `d` becomes a real directory
    whose `secret.txt` says something else at the same offset: the claim does not verify."""
    write_files(root, {"a.txt": "SECRET a\n"})
    os.symlink(root.parent / "root-evil", root / "d")
    real_open = search_engines.RipgrepEngine._open_reported
    swapped = []

    def swap_then_open(self, ws, target, rel, view):
        if not swapped:
            os.unlink(root / "d")
            write_files(root, {"d/secret.txt": "INSIDE SECRET\n"})  # 14 bytes, as long as the decoy line
            swapped.append(rel)
        return real_open(self, ws, target, rel, view)

    monkeypatch.setattr(search_engines.RipgrepEngine, "_open_reported", swap_then_open)
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert swapped
    assert "DECOY" not in text and "INSIDE SECRET" not in text  # rg never reported the inside line
    assert result.structured["unverified_files"] == 1
    assert result.structured["total_matches"] == 1 and "File: a.txt" in text


async def test_crafted_claims_are_checked_against_the_gateway(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(root, {"a.txt": "first line\nSECRET here\n", "b.txt": "SECRET b\n"})
    fake_rg(
        monkeypatch,
        [
            *reported("./a.txt", (1, 0, "DECOY SECRET\n"), (2, 11, "SECRET here\n"), (2, 0, "SECRET here\n")),
            *reported("./missing.txt", (1, 0, "DECOY SECRET\n")),
            *reported("./b.txt", (1, 0, "SECRET b\n")),
        ],
    )
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert "DECOY" not in text
    # a.txt: line 1 differs, the second claim is right, the third has the wrong offset; missing.txt is gone
    assert text.splitlines()[1:] == ["---", "File: a.txt", "L2: SECRET here", "---", "File: b.txt", "L1: SECRET b", "---"]
    assert result.structured["total_matches"] == 2 and result.structured["total_files"] == 2
    assert result.structured["unverified_files"] == 2


async def test_later_claims_are_checked_too(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines after a file's first are checked once rg is done (if they are still to be shown)."""
    write_files(root, {"a.txt": "SECRET one\nSECRET two\nSECRET three\n", "b.txt": "SECRET b\n"})
    fake_rg(
        monkeypatch,
        [
            *reported(
                "./a.txt", (1, 0, "SECRET one\n"), (2, 11, "DECOY SECRET\n"), (3, 22, "SECRET three\n"),
                (9, 500, "SECRET past the end\n"),
            ),
            *reported("./b.txt", (1, 0, "SECRET b\n")),
        ],
    )
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert "DECOY" not in text
    assert text.splitlines()[1:] == ["---", "File: a.txt", "L1: SECRET one", "L3: SECRET three", "---", "File: b.txt",
                                     "L1: SECRET b", "---"]  # fmt: skip
    assert result.structured["total_matches"] == 3 and result.structured["unverified_files"] == 1


def change_before_the_later_lines_are_checked(monkeypatch: pytest.MonkeyPatch, path: Path, content: str) -> None:
    real = search_engines.RipgrepEngine._confirm_deferred

    def change_then_confirm(self, job, target, view, deferred, spans):
        write_files(path.parent, {path.name: content})
        return real(self, job, target, view, deferred, spans)

    monkeypatch.setattr(search_engines.RipgrepEngine, "_confirm_deferred", change_then_confirm)


async def test_a_file_changed_before_its_lines_are_shown(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rg read the file; by the time its later lines are checked (the file opened again: it is larger than
    the gateway's first read) they say something else: only what the gateway's copy confirms is shown and
    counted, and the answer says a file changed."""
    pad = "#" * 9000 + "\n"
    write_files(root, {"a.txt": f"{pad}SECRET 2\nSECRET 3\nSECRET 4\n"})
    change_before_the_later_lines_are_checked(monkeypatch, root / "a.txt", f"{pad}SECRET 2\nOTHERS 3\nSECRET 4\n")
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert text.splitlines()[1:] == ["---", "File: a.txt", "L2: SECRET 2", "L4: SECRET 4", "---"]
    assert result.structured["total_matches"] == 2 and result.structured["unverified_files"] == 1
    assert "1 file changed during the search" in text.splitlines()[0]


async def test_a_small_file_is_shown_as_the_gateway_read_it(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the gateway's first read held whole is checked against that copy: what is shown is the file
    as rg and the gateway both read it, even if it changed since."""
    write_files(root, {"a.txt": "SECRET 1\nSECRET 2\nSECRET 3\n"})
    change_before_the_later_lines_are_checked(monkeypatch, root / "a.txt", "SECRET 1\nOTHERS 2\nSECRET 3\n")
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert text.splitlines()[1:] == ["---", "File: a.txt", "L1: SECRET 1", "L2: SECRET 2", "L3: SECRET 3", "---"]
    assert result.structured["total_matches"] == 3 and result.structured["unverified_files"] == 0


async def test_claims_about_a_protected_or_outside_path_are_dropped(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(root, {"ok.txt": "SECRET ok\n"})
    os.symlink(root.parent / "root-evil" / "secret.txt", root / "alias.txt")
    fake_rg(
        monkeypatch,
        [
            *reported("./alias.txt", (1, 0, "DECOY SECRET\n")),  # a link out of the root: the gateway refuses it
            *reported("./../root-evil/secret.txt", (1, 0, "DECOY SECRET\n")),
            *reported("./ok.txt", (1, 0, "SECRET ok\n")),
        ],
    )
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert "DECOY" not in text and "root-evil" not in text
    assert result.structured["total_files"] == 1 and "File: ok.txt" in text


async def test_only_the_gateway_copy_is_shown_for_a_single_file_target(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(root, {"one.txt": "SECRET one\n"})
    fake_rg(monkeypatch, reported("/proc/self/fd/99", (1, 0, "SECRET one\n"), (2, 11, "DECOY SECRET\n")))
    result = await search(root, {"pattern": "SECRET", "path": str(root / "one.txt")})
    text = text_of(result)
    assert "DECOY" not in text
    assert text.splitlines()[1:] == ["---", f"File: {root / 'one.txt'}", "L1: SECRET one", "---"]


async def test_byte_order_marks_still_verify(root: Path) -> None:
    """rg reports offsets into the stream it searched: without a UTF-8 BOM, and transcoded from UTF-16."""
    write_files(
        root,
        {
            "u8.txt": b"\xef\xbb\xbfzero\nSECRET \xc3\xa9t\xc3\xa9\n",
            "u16.txt": "zero\nSECRET sixteen\n".encode("utf-16"),
            "latin.txt": b"caf\xe9\nSECRET caf\xe9\n",
        },
    )
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert result.structured["unverified_files"] == 0, text
    assert "L2: SECRET été" in text and "L2: SECRET sixteen" in text
    assert "L2: SECRET caf\udce9" in text  # invalid UTF-8 (rg's "bytes" record), as the Python engine shows it
    assert result.structured["total_files"] == 3


async def test_long_lines_verify_by_their_start(root: Path) -> None:
    write_files(root, {"long.txt": "x\n" + "SECRET " + "y" * 400_000 + "\n"})
    result = await search(root, {"pattern": "SECRET"})
    text = text_of(result)
    assert result.structured["unverified_files"] == 0
    row = next(line for line in text.splitlines() if line.startswith("L2: "))
    assert row == "L2: SECRET " + "y" * 493 + "…[399,507 chars]…"

