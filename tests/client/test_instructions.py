"""The servers' instructions reach the model: attributed, capped, after the user's own, or left out.

End to end with two real coretools servers on two roots (``python -m coretools serve --root``,
forked: ``server_fork``) and the fake Gemini endpoint, and with the toy server (whose
instructions a test sets) and the fake OpenAI endpoint. The instructions each server serves
are read independently, over a plain MCP SDK session, and compared with what the model got.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from client_support import python_server, toy
from fake_gemini import Chunk, FakeGemini, Request, check
from fake_openai import ChatRequest, FakeOpenAI
from mcp import ClientSession, StdioServerParameters, stdio_client

from coretools.client import Bridge, parse_config
from coretools.client.instructions import ServerInstructions, cut, merged_content, merged_text, render_blocks
from coretools.client.loop import run_rest
from coretools.client.openai_loop import run_openai

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


def coretools_server(root: Path) -> dict[str, Any]:
    return python_server(["-m", "coretools", "serve", "--root", str(root)], timeout=30000)


async def served_instructions(root: Path) -> str:
    """What a coretools server on ``root`` says in its initialize result, read without the bridge."""
    server = python_server(["-m", "coretools", "serve", "--root", str(root)])
    params = StdioServerParameters(command=server["command"], args=server["args"])
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            result = await session.initialize()
    return result.instructions or ""


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    one, two = tmp_path / "root-one", tmp_path / "root-two"
    one.mkdir()
    two.mkdir()
    return one, two


def system_texts(request: Request) -> list[str]:
    instruction = request.body.get("systemInstruction")
    return [part["text"] for part in instruction["parts"]] if instruction else []


async def ask_gemini(bridge: Bridge, fake: FakeGemini, **options: Any) -> Request:
    fake.script(lambda request: [[{"text": "ok"}]])
    with anyio.fail_after(60):
        result = await run_rest(bridge, "hello", model="gemini-2.5-flash", api_key="k", base_url=fake.base_url, **options)
    assert result.text == "ok" and fake.errors == [], fake.errors
    return fake.requests[-1]


# ------------------------------------------------------------------------------------ end to end


async def test_two_coretools_servers_instructions_reach_gemini(roots: tuple[Path, Path], fake_gemini: FakeGemini) -> None:
    one, two = roots
    served = {"one": await served_instructions(one), "two": await served_instructions(two)}
    assert all(text.strip() for text in served.values()), "coretools serves instructions"
    config = parse_config({"mcpServers": {"one": coretools_server(one), "two": coretools_server(two)}})
    async with Bridge(config, connect_timeout=60) as bridge:
        assert bridge.failures == [], [str(f) for f in bridge.failures]
        request = await ask_gemini(bridge, fake_gemini, system_instruction="Be brief.")
        user, *blocks = system_texts(request)
        assert user == "Be brief.", "the user's system instruction comes first"
        assert len(blocks) == 2
        for (alias, root, other), block in zip([("one", one, two), ("two", two, one)], blocks):
            heading, body = block.split("\n", 1)
            assert heading == f'Instructions from MCP server "{alias}" (its tools are published as {alias}__<tool name>):'
            assert len(served[alias]) <= 4000 and body == served[alias].strip(), "short instructions pass whole"
            if str(root) in served[alias]:
                assert str(root) in body and str(other) not in body, "each block names its own root"

        bridge.instruction_limits = (600, 1000)
        user, first, second = system_texts(await ask_gemini(bridge, fake_gemini, system_instruction="Be brief."))
        assert len(first) <= 600 + len(first.split("\n", 1)[0]) + 1
        assert f"the instructions are {len(served['one'].strip()):,} characters" in first
        assert first.split("\n", 1)[1].startswith(served["one"].strip()[:200]), "a cut block keeps the beginning"
        assert len(first) + len(second) <= 1000 and "cut here" in second


async def test_instructions_can_be_left_out(roots: tuple[Path, Path], fake_gemini: FakeGemini) -> None:
    one, two = roots
    config = parse_config({"mcpServers": {"one": coretools_server(one), "two": coretools_server(two)}})
    async with Bridge(config, connect_timeout=60, server_instructions=False) as bridge:
        assert bridge.instruction_blocks() == [] and [i.alias for i in bridge.instructions] == ["one", "two"]
        assert system_texts(await ask_gemini(bridge, fake_gemini, system_instruction="Be brief.")) == ["Be brief."]
        assert "systemInstruction" not in (await ask_gemini(bridge, fake_gemini)).body


async def test_instructions_in_the_openai_system_message_and_with_the_xml_tool_section(fake_openai: FakeOpenAI, fake_gemini: FakeGemini) -> None:
    servers = {
        "a": toy("a", "--instructions", "Use a__echo for greetings.", includeTools=["echo"]),
        "b": toy("b", includeTools=["echo"]),
        "c": toy("c", "--instructions", "C knows", "--instructions-size", "9000", includeTools=["echo"]),
    }
    async with Bridge(parse_config({"mcpServers": servers}), instruction_limits=(4000, 5000)) as bridge:
        seen: list[str] = []
        fake_openai.script(lambda request: (seen.append(request.system), ["ok"])[1])
        prompt = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
        with anyio.fail_after(60):
            await run_openai(bridge, prompt, model="m", base_url=fake_openai.base_url, system_prompt="Be brief.", tool_style="xml")
        assert fake_openai.errors == []
        [system] = seen
        expected_a = 'Instructions from MCP server "a" (its tools are published as a__<tool name>):\nUse a__echo for greetings.'
        assert system.startswith(f"You are terse.\n\nBe brief.\n\n{expected_a}\n\n"), system[:300]
        assert 'server "b"' not in system, "a server without instructions gets no block"
        c_block = system.split('Instructions from MCP server "c"', 1)[1].split("\n\n# Tools\n", 1)[0]
        assert "cut here: the instructions are 9,000 characters" in c_block and len(c_block) < 5000 - len(expected_a)
        assert "\n\n# Tools\n" in system, "the xml style's tool section comes last"

        request = await ask_gemini(bridge, fake_gemini, system_instruction={"parts": [{"text": "mine"}]}, tool_style="xml")
        texts = system_texts(request)
        check(texts[0] == "mine" and texts[1] == expected_a and texts[2].startswith('Instructions from MCP server "c"'), f"{texts}")
        check(texts[3].startswith("# Tools"), f"{texts[3][:40]}")


async def test_instructions_name_no_prefix_when_names_are_bare(fake_gemini: FakeGemini) -> None:
    async with Bridge(parse_config({"mcpServers": {"solo": toy("solo", "--instructions", "Solo rules.")}})) as bridge:
        assert system_texts(await ask_gemini(bridge, fake_gemini)) == ['Instructions from MCP server "solo":\nSolo rules.']


# ------------------------------------------------------------------------------------ the rules


def test_cut_prefers_a_line_break_and_says_how_much_there_was() -> None:
    text = "\n".join(f"line {n:04d} " + "x" * 40 for n in range(200))
    out = cut(text, 1000)
    assert len(out) <= 1000 and out.endswith(f"[… cut here: the instructions are {len(text):,} characters, 1,000 are shown]")
    assert out.split("\n[…")[0].endswith("x" * 40), "cut at the end of a line"
    assert cut("short", 1000) == "short"


def test_blocks_within_the_total_and_a_note_for_what_no_longer_fits() -> None:
    servers = [ServerInstructions(alias, "y" * 3000) for alias in ("p", "q", "r")] + [ServerInstructions("blank", "  \n")]
    blocks = render_blocks(servers, per_server=2000, total=4500)
    assert [b.split("\n", 1)[0] for b in blocks[:3]] == [f'Instructions from MCP server "{a}":' for a in "pqr"]
    assert sum(len(b) for b in blocks[:3]) <= 4500 and all(len(b) <= 2000 + 40 for b in blocks[:3])
    assert blocks[3:] == []
    tight = render_blocks(servers, per_server=2000, total=4100)
    assert tight[-1] == '[Instructions from MCP server(s) "r" left out: the 4,100-character limit for server instructions is reached.]'


def test_merging_puts_the_user_first() -> None:
    assert merged_text(None, []) is None and merged_text("u", ["s1", "s2"]) == "u\n\ns1\n\ns2"
    assert merged_content("u", ["s"]) == {"parts": [{"text": "u"}, {"text": "s"}]}
    assert merged_content(None, ["s"]) == {"parts": [{"text": "s"}]}
    assert merged_content({"role": "user", "parts": [{"text": "u"}]}, ["s"]) == {"role": "user", "parts": [{"text": "u"}, {"text": "s"}]}
    assert merged_content("u", []) == "u" and merged_content(None, []) is None
