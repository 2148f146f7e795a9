"""Workspace files as MCP resources, through the official SDK client in both protocol eras: in memory, over
a stdio subprocess and over real HTTP.

What is checked: the paged listing covers a tree larger than a page exactly once (cursors followed to the
end, across two roots, also when a page's work budget cuts it short and when files change between pages);
the resumable walk under it agrees with the tools' walk from every position; text and binary reads with
their types; one template per root; protected and ignored files neither listed nor read (aliases and links
included); not found and every other refusal as invalid params (-32602); the size cap; the memory file over
stdio and not over HTTP.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from mcp import Client, MCPError

from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import IgnoreOptions
from coretools.sandbox.paths import Location
from coretools.sandbox.walker import walk
from coretools.workspace.resource_walk import Position, walk_after
from coretools.server import resources
from coretools.server.resources import decode_cursor, encode_cursor, file_uri
from http_harness import HttpServer, http_client
from support import connect, stdio_params

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


def uri(path: Path) -> str:
    return file_uri(os.path.realpath(path))


def big_tree(root: Path, files: int) -> set[str]:
    """`files` visible files spread over nested directories, plus files no listing may show; returns the
    URIs of the visible ones."""
    expected = set()
    for i in range(files):
        d = root / f"d{i % 7}" / f"s{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:04}.txt").write_text(f"file {i}\n")
        expected.add(uri(d / f"f{i:04}.txt"))
    hidden(root)
    (root / ".gitignore").write_text("*.log\nbuild-out/\n")
    expected |= {uri(root / ".gitignore"), uri(root / ".geminiignore")}
    return expected


def hidden(root: Path) -> list[Path]:
    """Protected and ignored files (given a `.gitignore` with `*.log` and `build-out/`)."""
    (root / ".git").mkdir(exist_ok=True)
    (root / "node_modules" / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "build-out").mkdir(exist_ok=True)
    made = {
        root / ".env": "SECRET=1\n",
        root / ".git" / "config": "[core]\n",
        root / "node_modules" / "pkg" / "index.js": "x\n",
        root / "build-out" / "a.txt": "built\n",
        root / "debug.log": "log\n",
        root / "secret-by-gemini.txt": "g\n",
    }
    for path, text in made.items():
        path.write_text(text)
    (root / ".geminiignore").write_text("secret-by-gemini.txt\n")
    return list(made)


async def list_all(client, **kwargs) -> tuple[list[str], int]:
    """Every URI of the listing, cursors followed to the end, and how many pages it took."""
    uris: list[str] = []
    cursor, pages = None, 0
    while True:
        page = await client.list_resources(cursor=cursor, **kwargs)
        pages += 1
        assert len(page.resources) <= resources.PAGE_SIZE
        uris += [r.uri for r in page.resources]
        cursor = page.next_cursor
        if cursor is None:
            return uris, pages
        assert pages < 1000, "the listing does not end"


async def refused(client, target: str) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(target)
    assert caught.value.error.code == -32602, caught.value
    return caught.value


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    return first, second


# -- listing ------------------------------------------------------------------------------------------------


async def test_listing_pages_cover_two_roots_exactly_once(roots, mode, tmp_path) -> None:
    expected = big_tree(roots[0], 1100) | big_tree(roots[1], 300)
    async with connect(list(roots), mode, "--memory-file", str(tmp_path / "none.md")) as client:
        assert client.server_capabilities.resources is not None
        uris, pages = await list_all(client)
    assert pages >= 3
    assert len(uris) == len(set(uris))
    assert set(uris) == expected
    again_first = uris[: resources.PAGE_SIZE]
    async with connect(list(roots), mode) as client:
        assert [r.uri for r in (await client.list_resources()).resources] == again_first  # a stable order


async def test_a_small_work_budget_gives_short_pages_that_still_cover_everything(roots, mode, monkeypatch) -> None:
    expected = big_tree(roots[0], 60)
    for i in range(40):  # directories of ignored files only: pages that find nothing to show
        (roots[0] / f"logs{i}").mkdir()
        (roots[0] / f"logs{i}" / "x.log").write_text("x")
    monkeypatch.setattr(resources, "STEPS_PER_PAGE", 5)
    async with connect([roots[0]], mode) as client:
        uris, pages = await list_all(client)
    assert pages > 20
    assert len(uris) == len(set(uris)) and set(uris) == expected


async def test_a_cursor_survives_files_changing_between_pages(roots, mode) -> None:
    big_tree(roots[0], 700)
    async with connect([roots[0]], mode) as client:
        first = await client.list_resources()
        last = Path(first.resources[-1].uri[len("file://") :])
        last.unlink()  # the file the cursor stopped at is gone
        (roots[0] / "d0" / "aaa-new.txt").write_text("new\n")  # and one appears before it
        rest, cursor = [], first.next_cursor
        while cursor:
            page = await client.list_resources(cursor=cursor)
            rest += [r.uri for r in page.resources]
            cursor = page.next_cursor
    listed = [r.uri for r in first.resources] + rest
    assert len(listed) == len(set(listed))
    on_disk = {uri(p) for p in roots[0].glob("d*/**/*.txt")}
    assert on_disk - set(listed) == {uri(roots[0] / "d0" / "aaa-new.txt")}  # passed already: next listing


@pytest.mark.parametrize(
    "cursor",
    ["garbage!", "", "eyJ4IjogMX0", base64.urlsafe_b64encode(b'[1, "0000", 0, "../x", false]').decode()],
)
async def test_a_bad_cursor_is_invalid_params(roots, mode, cursor) -> None:
    big_tree(roots[0], 10)
    async with connect([roots[0]], mode) as client:
        if cursor == "":  # a cursor from another workspace
            ws = Workspace([str(roots[1])])
            try:
                cursor = encode_cursor(ws, 0, Position("d0", True))
            finally:
                ws.close()
        with pytest.raises(MCPError) as caught:
            await client.list_resources(cursor=cursor)
        assert caught.value.error.code == -32602
        assert "Invalid cursor" in caught.value.error.message
        with pytest.raises(MCPError) as caught:
            await client.list_resource_templates(cursor="x")
        assert caught.value.error.code == -32602


def test_cursors_round_trip_and_are_checked(roots) -> None:
    ws = Workspace([str(r) for r in roots])
    try:
        for start in [(0, None), (1, Position("a/b c/ü.txt", False)), (0, Position("x", True))]:
            assert decode_cursor(ws, encode_cursor(ws, *start)) == start
        fingerprint = resources._fingerprint(ws)
        for forged in (
            [2, fingerprint, 0, None, False],  # another version
            [1, "0" * 16, 0, None, False],  # another workspace
            [1, fingerprint, 2, None, False],  # no such root
            [1, fingerprint, True, None, False],
            [1, fingerprint, 0, "/abs", False],
            [1, fingerprint, 0, "a//b", False],
            [1, fingerprint, 0, "a/../b", False],
            [1, fingerprint, 0, 7, False],
            [1, fingerprint, 0, "a", "yes"],
            [1, fingerprint, 0, "a"],
        ):
            raw = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode()
            with pytest.raises(MCPError) as caught:
                decode_cursor(ws, raw)
            assert caught.value.error.code == -32602, forged
    finally:
        ws.close()


def test_the_resumable_walk_agrees_with_the_walk_from_every_position(tmp_path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    big_tree(root, 80)
    (root / "d1" / "empty").mkdir()
    (root / "d2" / "link").symlink_to(root / "d1")
    ws = Workspace([str(root)])
    try:
        options = IgnoreOptions()
        walked = [e.rel for e in walk(ws, Location(0, "", ws.roots[0].shown), options)]
        steps = list(walk_after(ws, 0, options))
        assert [e.rel for e, _ in steps if e is not None] == walked
        for index, (_, position) in enumerate(steps):
            rest = [e.rel for e, _ in steps[index + 1 :] if e is not None]
            assert [e.rel for e, _ in walk_after(ws, 0, options, position) if e is not None] == rest, position
    finally:
        ws.close()


# -- reading ------------------------------------------------------------------------------------------------


async def test_text_and_binary_reads_with_their_types(roots, mode) -> None:
    one, two = roots
    (one / "notes.md").write_text("# Notes\nhé\n")
    (one / "wide.txt").write_bytes("\ufeffwide text".encode("utf-16-le").replace(b"\xff\xfe", b"\xff\xfe", 1))
    (one / "latin.txt").write_bytes(b"caf\xe9\n")
    (two / "pic.png").write_bytes(PNG)
    async with connect([one, two], mode) as client:
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        assert listed[uri(two / "pic.png")].mime_type == "image/png"
        assert listed[uri(two / "pic.png")].size == len(PNG)
        md = (await client.read_resource(uri(one / "notes.md"))).contents[0]
        assert md.text == "# Notes\nhé\n" and md.mime_type == "text/markdown" and md.uri == uri(one / "notes.md")
        wide = (await client.read_resource(uri(one / "wide.txt"))).contents[0]
        assert wide.text == "wide text"
        latin = (await client.read_resource(uri(one / "latin.txt"))).contents[0]
        assert base64.b64decode(latin.blob) == b"caf\xe9\n"  # not UTF-8: the bytes, as they are
        png = (await client.read_resource(uri(two / "pic.png"))).contents[0]
        assert png.mime_type == "image/png" and base64.b64decode(png.blob) == PNG


async def test_a_name_that_is_not_utf8_round_trips(roots, mode) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (roots[0] / name).write_text("bytes in the name\n")
    async with connect([roots[0]], mode) as client:
        (listed,) = (await client.list_resources()).resources
        assert "%E9" in listed.uri
        assert (await client.read_resource(listed.uri)).contents[0].text == "bytes in the name\n"


async def test_one_template_per_root_and_its_expansion_reads(roots, mode) -> None:
    (roots[1] / "sub").mkdir()
    (roots[1] / "sub" / "x.txt").write_text("x\n")
    async with connect(list(roots), mode) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [uri(r) + "/{+path}" for r in roots]
        expanded = templates[1].uri_template.replace("{+path}", "sub/x.txt")
        assert (await client.read_resource(expanded)).contents[0].text == "x\n"
        simple = templates[1].uri_template.replace("{+path}", "sub%2Fx.txt")  # `{path}` expansion
        assert (await client.read_resource(simple)).contents[0].text == "x\n"


async def test_protected_and_ignored_files_are_neither_listed_nor_read(roots, mode) -> None:
    one = roots[0]
    (one / ".gitignore").write_text("*.log\nbuild-out/\n")
    (one / "ok.txt").write_text("ok\n")
    secrets = hidden(one)
    (one / "alias").symlink_to(".env")
    (one / "to-log").symlink_to("debug.log")
    async with connect(list(roots), mode) as client:
        uris, _ = await list_all(client)
        assert set(uris) == {uri(one / "ok.txt"), uri(one / ".gitignore"), uri(one / ".geminiignore")}
        for path in [*secrets, one / "alias", one / "to-log"]:
            error = await refused(client, uri(path))
            assert "not found" not in error.error.message, path  # refused by name, not for being missing
        assert "ignored" in (await refused(client, uri(one / "debug.log"))).error.message
        assert "protected" in (await refused(client, uri(one / ".env"))).error.message


async def test_escapes_are_refused(root, mode) -> None:
    (root / "out").symlink_to(root.parent / "root-evil" / "secret.txt")
    (root / "etc").symlink_to("/etc")
    async with connect([root], mode) as client:
        assert await list_all(client) == ([], 1)
        for target in (
            uri(root / "out"),
            uri(root / "etc") + "/hostname",
            uri(root) + "/../root-evil/secret.txt",
            uri(root.parent / "root-evil" / "secret.txt"),
            "file:///etc/hostname",
        ):
            error = await refused(client, target)
            assert "DECOY" not in str(error)


async def test_not_found_and_other_refusals_are_invalid_params(root, mode, monkeypatch) -> None:
    (root / "dir").mkdir()
    (root / "big.txt").write_text("x" * 2000)
    monkeypatch.setattr(resources, "MAX_READ_BYTES", 1000)
    async with connect([root], mode) as client:
        missing = await refused(client, uri(root / "missing.txt"))
        assert missing.error.message == f"Resource not found: {uri(root / 'missing.txt')}"
        assert "directory" in (await refused(client, uri(root / "dir"))).error.message
        large = (await refused(client, uri(root / "big.txt"))).error.message
        assert "too large" in large and "1,000" in large and "read_file" in large
        for other in ("https://example.com/x", "file://host/etc/x", "file:relative", uri(root) + "/a?q=1"):
            await refused(client, other)


# -- the memory file ------------------------------------------------------------------------------------------


async def test_the_memory_file_is_a_resource_over_stdio(root, mode, tmp_path) -> None:
    memory = tmp_path / "mem" / "GEMINI.md"
    memory.parent.mkdir()
    memory.write_text("## Gemini Added Memories\n- likes tea\n")
    (root / "a.txt").write_text("a\n")
    async with Client(stdio_params([root], "--memory-file", str(memory), forked=True), mode=mode) as client:
        listed = (await client.list_resources()).resources
        assert [r.uri for r in listed] == [file_uri(str(memory)), uri(root / "a.txt")]
        read = (await client.read_resource(file_uri(str(memory)))).contents[0]
        assert read.text.endswith("- likes tea\n") and read.mime_type == "text/markdown"
        assert (await client.read_resource(uri(root / "a.txt"))).contents[0].text == "a\n"


async def test_the_memory_file_is_not_a_resource_over_http(root, mode, tmp_path) -> None:
    memory = tmp_path / "mem" / "GEMINI.md"
    memory.parent.mkdir()
    memory.write_text("- private\n")
    (root / "a.txt").write_text("a\n")
    with HttpServer.start([root], "--memory-file", str(memory), forked=True) as server:
        async with http_client(server.url, mode) as client:
            uris, _ = await list_all(client)
            assert uris == [uri(root / "a.txt")]
            assert (await client.read_resource(uris[0])).contents[0].text == "a\n"
            error = await refused(client, file_uri(str(memory)))
            assert "private" not in str(error)
