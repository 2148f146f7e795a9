"""No single call exhausts memory: each of these calls keeps the server's peak RSS within 300 MiB of idle.

Every case runs against a real server subprocess (the official MCP client over stdio). The server's peak RSS
(`VmHWM` in /proc/<pid>/status) is read after a warm-up call of the same tool (imports done: "idle") and again
after the hostile call; the difference is what that one call cost at its peak.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support import stdio_params, text_of

pytestmark = pytest.mark.anyio
log = logging.getLogger(__name__)

MIB = 1024 * 1024
BOUND = 300 * MIB


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _server_pid(root: Path) -> int:
    """The coretools server that this test process started for `root`."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me and b"coretools" in argv and str(root).encode() in argv:
            return int(entry)
    raise AssertionError("the server subprocess was not found")


class Server:
    """A client connected to a real stdio server, and that server's peak RSS."""

    def __init__(self, client, pid: int) -> None:
        self.client = client
        self.pid = pid

    def peak(self) -> int:
        return _status_kib(self.pid, "VmHWM") * 1024

    async def call(self, name: str, args: dict):
        return await self.client.call_tool(name, args)

    async def growth(self, name: str, args: dict, *, warm: dict) -> tuple[object, int]:
        """Call `name` with `warm` (imports, caches), then with `args`; the second call's peak RSS growth."""
        await self.call(name, warm)
        idle = self.peak()
        result = await self.call(name, args)
        grown = self.peak() - idle
        log.info("%s: peak RSS %.0f MiB at idle, +%.0f MiB during the call", name, idle / MIB, grown / MIB)
        return result, grown


@asynccontextmanager
async def serving(root: Path, tmp_path: Path, *flags: str) -> AsyncIterator[Server]:
    from mcp import Client
    from mcp.client.stdio import stdio_client

    with (tmp_path / "server-stderr.log").open("w") as errlog:
        async with Client(stdio_client(stdio_params([root], *flags), errlog=errlog), mode="legacy") as client:
            yield Server(client, _server_pid(root))


# ---------------------------------------------------------------- replace


async def test_replace_refuses_a_huge_result_before_building_it(root: Path, tmp_path: Path) -> None:
    """25,000 occurrences x a 10,000-character new_string would be a 250-million-character file."""
    target = root / "many.txt"
    original = "TOKEN\n" * 25_000
    target.write_text(original)
    (root / "small.txt").write_text("alpha\n")
    args = {"file_path": str(target), "old_string": "TOKEN", "new_string": "y" * 10_000,
            "expected_replacements": 25_000}
    warm = {"file_path": str(root / "small.txt"), "old_string": "alpha", "new_string": "beta"}
    async with serving(root, tmp_path) as server:
        result, grown = await server.growth("replace", args, warm=warm)
    text = text_of(result)
    assert grown < BOUND, f"peak RSS grew by {grown / MIB:.0f} MiB"
    assert result.is_error, text[:500]
    assert "--max-edit-bytes" in text and "expected_replacements" in text
    assert target.read_text() == original


EDITS = {  # name: (file bytes, old_string, new_string, expected_replacements)
    "lf": (b"a\nkey = 1\nb\nkey = 1\nc\n", "key = 1\n", "key = 2\nextra\n", 2),
    "crlf": (b"a\r\nkey = 1\r\nb\r\nkey = 1\r\nc\r\n", "key = 1\n", "key = 2\nextra\n", 2),
    "mixed": (b"a\r\nkey = 1\r\nb\nkey = 1\nc\r\n", "key = 1\n", "k\u00e9y = 22\n\n", 2),
    "utf16": ("\ufeffa\r\nkey\r\nb\r\nkey\r\nc\r\n".encode("utf-16-le"), "key\n", "\U0001f600\nz\n", 2),
    "create": (None, "", "fresh \u00e9\n" * 10, 1),
}


@pytest.mark.parametrize("case", list(EDITS))
async def test_replace_counts_the_edited_size_exactly(root: Path, case: str) -> None:
    """The size an edit is refused by is the size the file would have had: one byte over the limit refuses."""
    from support import call_tool

    content, old, new, count = EDITS[case]
    target = root / "f.txt"

    def args() -> dict:
        if content is not None:
            target.write_bytes(content)
        return {"file_path": str(target), "old_string": old, "new_string": new, "expected_replacements": count}

    done = await call_tool(root, "replace", args())
    assert not done.is_error, text_of(done)
    size = target.stat().st_size
    target.unlink()
    fits = await call_tool(root, "replace", args(), "--max-edit-bytes", str(size))
    assert not fits.is_error, text_of(fits)
    target.unlink()
    over = await call_tool(root, "replace", args(), "--max-edit-bytes", str(size - 1))
    assert over.is_error and "--max-edit-bytes" in text_of(over) and f"would make the file {size:,} bytes" in text_of(over)


async def test_edits_of_files_over_the_limit_are_refused_before_reading(root: Path) -> None:
    from support import call_tool

    big = root / "big.txt"
    big.write_text("x = 1\n" * 2000)
    for tool, args in (("replace", {"file_path": str(big), "old_string": "x = 1\n", "new_string": "y\n",
                                    "expected_replacements": 2000}),
                       ("write_file", {"file_path": str(big), "content": "small\n"})):
        result = await call_tool(root, tool, args, "--max-edit-bytes", "1000")
        assert result.is_error and "--max-edit-bytes" in text_of(result), text_of(result)
        assert big.read_text() == "x = 1\n" * 2000
    result = await call_tool(root, "write_file", {"file_path": str(root / "new.txt"), "content": "z" * 2000},
                             "--max-edit-bytes", "1000")
    assert result.is_error and "--max-edit-bytes" in text_of(result) and not (root / "new.txt").exists()


# ---------------------------------------------------------------- read_many_files


async def test_read_many_files_counts_media_against_a_per_call_budget(root: Path, tmp_path: Path) -> None:
    """30 images of 4 MB: every one is under the per-file limit, together they are 160 MB of base64."""
    pictures = root / "pictures"
    pictures.mkdir()
    payload = b"\x89PNG\r\n\x1a\n" + bytes(4 * MIB)
    for n in range(30):
        (pictures / f"p{n:02d}.png").write_bytes(payload)
    (root / "tiny.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    async with serving(root, tmp_path) as server:
        result, grown = await server.growth("read_many_files", {"paths": ["pictures/*.png"]},
                                            warm={"paths": ["tiny.png"]})
    assert grown < BOUND, f"peak RSS grew by {grown / MIB:.0f} MiB"
    images = [b for b in result.content if b.type == "image"]
    encoded = sum(len(b.data) for b in images)
    text = text_of(result)
    assert not result.is_error
    assert 0 < len(images) < 30
    assert encoded <= 20 * MIB, encoded
    assert "--max-media-bytes" in text and "fewer" in text
    assert base64.b64decode(images[0].data) == payload


# ---------------------------------------------------------------- web_fetch

BIG_PAGE = 12 * MIB


class BigPages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook
        size = 1000 if self.path == "/warm" else BIG_PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = (self.path.encode() + b" " * 64)[:64] * 1024
        try:
            for start in range(0, size, len(chunk)):
                self.wfile.write(chunk[: size - start])
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def big_pages():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BigPages)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def test_web_fetch_bounds_the_bytes_of_all_pages_of_a_call(root: Path, tmp_path: Path, big_pages: str) -> None:
    prompt = "Compare " + " ".join(f"{big_pages}/page{n}" for n in range(20))
    async with serving(root, tmp_path, "--web-fetch-private", "allow") as server:
        result, grown = await server.growth("web_fetch", {"prompt": prompt}, warm={"prompt": f"{big_pages}/warm"})
    text = text_of(result)
    assert grown < BOUND, f"peak RSS grew by {grown / MIB:.0f} MiB"
    assert not result.is_error, text[:2000]
    assert "Fetched 20 of 20 URL(s)" in text
    assert "--web-fetch-max-bytes" in text and "fewer URLs" in text


# ---------------------------------------------------------------- read_file


async def test_read_file_window_past_a_huge_utf16_line(root: Path, tmp_path: Path) -> None:
    """A UTF-16 file whose first line is 50 million characters (outside the BMP: four bytes each, in the file
    and in a Python string); the window asks for the line after it."""
    target = root / "wide.txt"
    with target.open("wb") as fh:
        fh.write(b"\xff\xfe")
        wide = "\U0001f600".encode("utf-16-le") * 1_000_000
        for _ in range(50):
            fh.write(wide)
        fh.write("\nsecond line\nthird line\n".encode("utf-16-le"))
    (root / "small.txt").write_text("one\n")
    async with serving(root, tmp_path) as server:
        result, grown = await server.growth("read_file", {"absolute_path": str(target), "offset": 1, "limit": 1},
                                            warm={"absolute_path": str(root / "small.txt")})
    text = text_of(result)
    assert grown < BOUND, f"peak RSS grew by {grown / MIB:.0f} MiB"
    assert not result.is_error, text[:500]
    assert "second line" in text and "third line" not in text
    assert "Showing lines 2-2 of 3 total lines" in text


# ---------------------------------------------------------------- the syntax note of an edit

HOSTILE_SOURCES = {  # name: text whose parse for the syntax note grew main's peak RSS by
    "deep.js": "x = " + "(" * (2 * MIB),  # 415-480 MiB on a fast CPU (the parse was bounded in time only)
    "flat.py": "a;" * (256 * 1024),  # 457 MiB: Python's parser is not bounded at all
    "pipes.sh": "a|" * 8192,  # 650 MiB in one step of tree-sitter's error recovery, whatever the CPU
}


async def test_the_syntax_check_of_an_edit_is_bounded_in_memory(root: Path, tmp_path: Path) -> None:
    grown: dict[str, int] = {}
    answers: dict[str, str] = {}
    async with serving(root, tmp_path) as server:
        await server.call("write_file", {"file_path": str(root / "warm.js"), "content": "x = (1);\n"})
        for name, text in HOSTILE_SOURCES.items():
            result, grown[name] = await server.growth("write_file", {"file_path": str(root / name), "content": text},
                                                      warm={"file_path": str(root / "warm.sh"), "content": "a|b\n"})
            assert not result.is_error, text_of(result)[:500]
            answers[name] = text_of(result)
            assert (root / name).read_text() == text
    shown = {name: f"+{size / MIB:.0f} MiB" for name, size in grown.items()}
    assert all(size < BOUND for size in grown.values()), shown
    for answer in answers.values():
        assert "Note: the syntax of this file was not checked" in answer, answer[-500:]


# ---------------------------------------------------------------- list_directory

WIDE = 120_000  # entries: the 400,000 take too long to create for a test; the bound is scaled to them


async def test_a_huge_directory_listed_and_globbed_keeps_only_the_shown_entries(root: Path, tmp_path: Path) -> None:
    """A directory of 120,000 entries with 200-character names (hard links of a few files, the quickest to
    create): list_directory and glob keep the entries they show and count the others (glob holds at most
    its walk's bound), so their peak does not grow with the directory. The bound is 300 MiB scaled to this
    many entries (main took +623 MiB for 400,000 with list_directory, and +190 MiB for 150,000 with glob)."""
    wide = root / "wide"
    wide.mkdir()
    (root / "few").mkdir()
    (root / "few" / "a.txt").write_text("a\n")
    fd = os.open(wide, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for n in range(WIDE):
            if n % 60_000 == 0:
                source = f"source{n // 60_000}"
                os.close(os.open(source, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
            name = f"{WIDE - n:06d}" + "n" * 194
            os.link(source, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
    os.mkdir(wide / ("0" * 200))  # a directory: listed first, although its name sorts last among the files...
    async with serving(root, tmp_path) as server:
        result, grown = await server.growth("list_directory", {"path": str(wide)}, warm={"path": str(root / "few")})
        found, globbed = await server.growth("glob", {"pattern": "wide/*"}, warm={"pattern": "few/*"})
    text = text_of(result)
    assert grown < BOUND * WIDE // 400_000, f"list_directory: peak RSS grew by {grown / MIB:.0f} MiB"
    assert globbed < BOUND * WIDE // 400_000, f"glob: peak RSS grew by {globbed / MIB:.0f} MiB"
    assert not result.is_error, text[:500]
    lines = text.splitlines()
    assert lines[1] == f"[DIR] {'0' * 200}"  # ...as they are in every listing
    assert lines[2] == f"000001{'n' * 194} (0 bytes)" and lines[3].startswith("000002n")
    total = len(os.listdir(wide))
    shown = lines.index("") - 1
    assert f"({total - shown} more entries not shown: this answer lists {shown} of {total};" in text
    assert text_of(found).startswith(f'Found {total - 1} file(s) matching "wide/*"'), text_of(found)[:200]


# ---------------------------------------------------------------- save_memory


async def test_save_memory_does_not_read_a_huge_memory_file(root: Path, tmp_path: Path) -> None:
    """The memory file grew to 200 MB (saves were unbounded, or something else wrote it): a save reads no more
    than the file's limit, and refuses. (The warm-up saves to the file before it is grown.)"""
    memory = tmp_path / "GEMINI.md"
    line = b"- " + b"remember this " * 7 + b"\n"
    async with serving(root, tmp_path, "--memory-file", str(memory)) as server:
        await server.call("save_memory", {"fact": "x" * 1000})
        with memory.open("ab") as fh:
            fh.write(line * (200 * MIB // len(line)))
        size = memory.stat().st_size
        idle = server.peak()
        result = await server.call("save_memory", {"fact": "y" * 1000})
        grown = server.peak() - idle
    text = text_of(result)
    assert grown < BOUND, f"peak RSS grew by {grown / MIB:.0f} MiB"
    assert result.is_error and f"is {size:,} bytes, over the limit" in text, text[:500]
    assert memory.stat().st_size == size
