"""End to end with the real coretools server: two instances on two roots, so every name collides
and must be prefixed, driven by the real google-genai client and by the REST loop.

The server runs as a subprocess (``python -m coretools serve``): the interpreter itself, as a host would
start it, where the test checks that the servers are gone after; elsewhere forked (``server_fork``). A server
that cannot start fails these tests.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from client_support import alive, check_json_profile, check_openapi_profile, python_server
from fake_gemini import Chunk, FakeGemini, Request, check
from google import genai
from google.genai import types as genai_types

from coretools.client import Bridge, parse_config
from coretools.client.loop import run_genai, run_rest
from coretools.client.schema import to_json_profile, to_openapi_profile

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def coretools_server(root: Path, forked: bool = True) -> dict:
    return python_server(["-m", "coretools", "serve", "--root", str(root)], forked=forked, timeout=30000)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "notes.txt").write_text("first root notes\n")
    (two / "alpha.txt").write_text("a\n")
    (two / "beta").mkdir()
    return one, two


def script(fake: FakeGemini, one: Path, two: Path):
    def first(request: Request) -> list[Chunk]:
        names = request.declared_names
        check("one__read_file" in names and "two__read_file" in names, f"prefixed names: {names}")
        check(not any("__" not in n for n in names), f"with two servers every name is prefixed: {names}")
        return [
            [
                {"functionCall": {"id": "r1", "name": "one__read_file", "args": {"absolute_path": str(one / "notes.txt")}}, "thoughtSignature": fake.new_signature()},
                {"functionCall": {"id": "r2", "name": "two__list_directory", "args": {"path": str(two)}}},
                {"functionCall": {"id": "r3", "name": "two__read_file", "args": {"absolute_path": str(one / "notes.txt")}}},
            ]
        ]

    def second(request: Request) -> list[Chunk]:
        read, listing, outside = request.last_responses()
        check("first root notes" in str(read["response"].get("output")), f"read_file: {read}")
        check("alpha.txt" in str(listing["response"].get("output")) and "beta" in str(listing["response"].get("output")), f"list_directory: {listing}")
        check("outside" in str(outside["response"].get("error")), f"root two must not read root one's file: {outside}")
        return [[{"text": "Read and listed."}]]

    return first, second


async def test_two_coretools_servers_through_genai_and_rest(roots: tuple[Path, Path], fake_gemini: FakeGemini) -> None:
    one, two = roots
    async with Bridge(parse_config({"mcpServers": {"one": coretools_server(one, forked=False), "two": coretools_server(two, forked=False)}}), connect_timeout=60) as bridge:
        assert bridge.failures == [], [str(f) for f in bridge.failures]
        names = [t.name for t in bridge.tools]
        assert names and all(n.startswith(("one__", "two__")) for n in names)
        assert {n.split("__", 1)[1] for n in names if n.startswith("one__")} == {n.split("__", 1)[1] for n in names if n.startswith("two__")}

        for tool in bridge.tools:  # our own server's live schemas meet both profiles
            check_json_profile(to_json_profile(tool.input_schema))
            check_openapi_profile(to_openapi_profile(tool.input_schema))

        fake_gemini.script(*script(fake_gemini, one, two), bytes_signatures=True)
        client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=fake_gemini.base_url))
        with anyio.fail_after(60):
            result = await run_genai(bridge, "read and list", client=client, model="gemini-2.5-flash")
        assert fake_gemini.errors == [] and result.text == "Read and listed."

        fake_gemini.script(*script(fake_gemini, one, two), bytes_signatures=False)
        with anyio.fail_after(60):
            result = await run_rest(bridge, "read and list", model="gemini-3-flash-preview", base_url=fake_gemini.base_url, stream=True)
        assert fake_gemini.errors == [] and result.text == "Read and listed."
        pids = list(bridge.server_pids.values())

    assert not any(alive(pid) for pid in pids)


async def test_the_model_gets_the_answer_not_the_structured_fields(tmp_path: Path, fake_gemini: FakeGemini) -> None:
    """With --structured-content our server's results also carry fields (counts, file names) but no
    outputSchema; the answer is the text, and that is what must reach the model (the matched line, the
    file's contents), not the fields."""
    (tmp_path / "notes.txt").write_text("the needle is here\n")
    server = coretools_server(tmp_path)
    server["args"] = [*server["args"], "--structured-content"]

    def first(request: Request) -> list[Chunk]:
        return [[
            {"functionCall": {"id": "s", "name": "search_file_content", "args": {"pattern": "needle"}}},
            {"functionCall": {"id": "m", "name": "read_many_files", "args": {"paths": ["notes.txt"]}}},
        ]]

    def second(request: Request) -> list[Chunk]:
        search, many = request.last_responses()
        check(isinstance(search["response"].get("output"), str), f"search output is the text: {search}")
        check("L1: the needle is here" in search["response"]["output"], f"the match reaches the model: {search}")
        check("the needle is here" in str(many["response"].get("output")), f"the contents reach the model: {many}")
        return [[{"text": "Found it."}]]

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=server["command"], args=server["args"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        raw = await session.call_tool("search_file_content", {"pattern": "needle"})
        assert raw.structured_content and "total_matches" in raw.structured_content  # the fields are sent

    async with Bridge(parse_config({"mcpServers": {"ct": server}}), connect_timeout=60) as bridge:
        fake_gemini.script(first, second)
        with anyio.fail_after(60):
            result = await run_rest(bridge, "find the needle", model="gemini-2.5-flash", base_url=fake_gemini.base_url)
        assert fake_gemini.errors == [] and result.text == "Found it."
