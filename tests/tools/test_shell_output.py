"""Where the shell keeps what it does not show: a command's full output and a background command's log,
in the runner's scratch area. The file tools of the same server read it; nothing writes there, lists it
or runs in it, and a planted link cannot lead out of it."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from coretools.sandbox import scratch
from coretools.sandbox.bwrap import bwrap_problem
from coretools.sandbox.runner import Runner, show_controls, strip_ansi
from coretools.sandbox.scratch import ScratchArea
from tests.conftest import connect, text_of

pytestmark = pytest.mark.anyio


async def long_output(client) -> str:
    result = await client.call_tool("run_shell_command", {"command": "seq 1 20000"})
    assert "characters omitted; the full output is in" in result.structured_content["stdout"]
    return result.structured_content["saved_output"]["stdout"]


async def test_the_saved_output_is_read_by_read_file_and_read_many_files(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        saved = await long_output(client)
        tail = await client.call_tool("read_file", {"absolute_path": saved, "offset": 19995})
        assert not tail.is_error and text_of(tail).rstrip().endswith("19996\n19997\n19998\n19999\n20000")
        whole = await client.call_tool("read_file", {"absolute_path": f"file://{saved}", "limit": 3})
        assert "1\n2\n3" in text_of(whole)
        many = await client.call_tool("read_many_files", {"paths": [saved]})
        assert not many.is_error and "\n19\n20\n" in text_of(many)


async def test_nothing_writes_lists_or_runs_in_the_scratch_area(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        saved = await long_output(client)
        before = Path(saved).read_bytes()
        calls = [
            ("write_file", {"file_path": saved, "content": "x"}),
            ("write_file", {"file_path": os.path.join(os.path.dirname(saved), "new.txt"), "content": "x"}),
            ("replace", {"file_path": saved, "old_string": "19999", "new_string": "x"}),
            ("run_shell_command", {"command": "touch y", "directory": saved}),
            ("run_shell_command", {"command": "touch y", "directory": os.path.dirname(saved)}),
            ("list_directory", {"path": os.path.dirname(saved)}),
            ("glob", {"pattern": "*", "path": os.path.dirname(saved)}),
        ]
        for name, args in calls:
            result = await client.call_tool(name, args)
            assert result.is_error, (name, args, text_of(result))
        refused = await client.call_tool("write_file", {"file_path": saved, "content": "x"})
        assert "read-only scratch area" in text_of(refused)
        assert refused.structured_content["error"]["kind"] == "permission_denied"
        assert Path(saved).read_bytes() == before
        assert sorted(os.listdir(os.path.dirname(saved))) == [os.path.basename(saved)]


async def test_files_are_private_with_unguessable_names(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        saved = await long_output(client)
        assert os.stat(saved).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(saved)).st_mode & 0o777 == 0o700
        assert re.fullmatch(r"\d+-stdout-[0-9a-f]{32}\.txt", os.path.basename(saved))
        guessed = saved[:-6] + ("00" if not saved.endswith("00.txt") else "11") + ".txt"
        assert (await client.call_tool("read_file", {"absolute_path": guessed})).is_error


async def test_planted_links_do_not_lead_out(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "root-evil" / "secret.txt"
    async with connect([root], "legacy", "--structured-content") as client:
        saved = await long_output(client)
        area = os.path.dirname(saved)
        os.symlink(secret, os.path.join(area, "link.txt"))
        os.link(secret, os.path.join(area, "hard.txt"))
        os.mkdir(os.path.join(area, "sub"))
        os.symlink(secret, os.path.join(area, "sub", "x.txt"))
        for path in ("link.txt", "hard.txt", "sub/x.txt", "sub/../link.txt", "../output/link.txt", ""):
            result = await client.call_tool("read_file", {"absolute_path": os.path.join(area, path)})
            assert result.is_error and "DECOY" not in text_of(result), path


async def test_the_area_is_unreachable_once_its_owner_closed(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        saved = await long_output(client)
    assert scratch.find(saved) is None and not os.path.exists(saved)


# -- bounds ---------------------------------------------------------------------------------------------


def test_the_oldest_files_go_first_and_held_ones_stay(tmp_path: Path) -> None:
    area = ScratchArea(str(tmp_path / "area"), max_files=3)
    try:
        held = area.save("held", b"h")
        area.hold(held)
        paths = []
        for i in range(5):
            paths.append(area.save(f"f{i}", b"x"))
            os.utime(paths[-1], (time.time() - 100 + i, time.time() - 100 + i))
        os.utime(held, (0, 0))
        left = sorted(os.listdir(area.path))
        assert len(left) == 3 and os.path.basename(held) in left and os.path.basename(paths[-1]) in left
        area.release(held)
        area.save("next", b"x")
        assert os.path.basename(held) not in os.listdir(area.path)
    finally:
        area.close()


def test_size_and_age_bounds(tmp_path: Path) -> None:
    area = ScratchArea(str(tmp_path / "area"), max_bytes=1000, max_age=3600)
    try:
        first = area.save("big", b"x" * 800)
        os.utime(first, (time.time() - 10, time.time() - 10))
        second = area.save("big", b"x" * 800)  # over the size bound: the older one goes at the next save
        assert os.path.exists(first)
        area.save("small", b"x")
        assert not os.path.exists(first) and os.path.exists(second)
        os.utime(second, (time.time() - 7200, time.time() - 7200))
        area.save("small", b"x")
        assert not os.path.exists(second)
    finally:
        area.close()


async def test_the_runner_area_is_inside_its_private_directory() -> None:
    runner = Runner("test")
    try:
        path = runner.save_output("1-stdout", b"data")
        assert os.path.dirname(path) == os.path.realpath(os.path.join(runner.scratch_dir, "output"))
        assert scratch.find(path) is not None
    finally:
        await runner.aclose()
    assert scratch.find(path) is None and not os.path.exists(path)


# -- the sandbox ----------------------------------------------------------------------------------------

BWRAP_PROBLEM = bwrap_problem()


@pytest.mark.skipif(BWRAP_PROBLEM is not None and "namespace" in BWRAP_PROBLEM, reason=f"{BWRAP_PROBLEM}")
async def test_sandboxed_commands_read_the_saved_output_but_cannot_change_it(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content", "--shell-sandbox", "bwrap") as client:
        saved = await long_output(client)
        before = Path(saved).read_bytes()
        result = await client.call_tool(
            "run_shell_command", {"command": f"tail -n 1 {saved}; echo x >> {saved}; ln -s /etc/passwd {saved}.l"}
        )
        assert result.structured_content["stdout"] == "20000"
        assert "Read-only file system" in result.structured_content["stderr"]
        assert Path(saved).read_bytes() == before and not os.path.lexists(f"{saved}.l")


def test_strip_ansi_drops_c1_controls_and_their_strings_and_names_bidi_controls() -> None:
    """8-bit controls act as their ESC forms in a UTF-8 terminal (U+009D opens OSC: `52;c;...` sets the
    clipboard; U+009B is CSI): they go with the strings they open; bidi overrides are shown by name."""
    text = "A\x9d52;c;cHdu\x9cB\x9b2JC \u202etxt.exe\u202c \x1b]0;t\x07\x1bP1$r\x1b\\D\x1b7E\x9f app\x07F"
    assert strip_ansi(text) == "ABC <U+202E>txt.exe<U+202C> DEF"
    assert strip_ansi("x\x9dno end" + "y" * 10) == "xno end" + "y" * 10  # unterminated: only the opener goes
    assert show_controls("ls \x1b[2J\u2066x\tz") == "ls <U+001B>[2J<U+2066>x\tz"


def test_strip_ansi_stays_linear_on_unterminated_strings() -> None:
    """A string's body stops at the next control, so openers never closed cost one pass, not one per opener."""
    start = time.process_time()
    for opener in ("\x9d", "\x1b]", "\x9b1", "\x1bP"):
        assert strip_ansi((opener + "a" * 1000) * 500).count("a") >= 499_000  # a CSI takes one as its final
    assert time.process_time() - start < 10  # quadratic: ~1e9 steps a case
