"""The xml style's parser, value encoding, type conversion and prompt (no servers needed).

Property-based tests generate parameter values full of XML-special characters (``<``, ``&``,
``]]>``, CDATA openers, the parameter's own closing tag, line breaks, edge whitespace) and check
that render -> parse gives them back exactly, whole or split into arbitrary stream chunks.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types
import pytest
from client_support import _load_toy_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coretools.client.bridge import PublishedTool
from coretools.client.convert import ToolOutcome
from coretools.client.xml_format import decode_value, encode_value, render_call, render_result
from coretools.client.xml_parser import CallParser, ParsedCall, parse_calls
from coretools.client.xml_prompt import example_arguments, render_tool_prompt, tool_schema
from coretools.client.xml_types import coerce_parameters

TOOLS = {"fs__write_file", "fs__read_file", "b__echo", "ping"}

# Pieces that stress the format, glued together by hypothesis.
AWKWARD = ["<", ">", "&", "&amp;", "&lt;", "]]>", "]]", "<![CDATA[", "<![CDATA[x]]>", "</content>", "</fs__write_file>",
           "<content>", "</", "/>", "<b__echo>", "\n", "\r\n", " ", "\t", "a", "Z", "é", "→", "\"", "'", "{", "}", "\\"]  # fmt: skip
awkward_text = st.lists(st.one_of(st.sampled_from(AWKWARD), st.text(max_size=4)), max_size=12).map("".join)
param_names = st.sampled_from(["content", "file_path", "text", "x", "old_string", "a-b", "n.m"])


def feed_in_chunks(text: str, cuts: list[int]) -> list[Any]:
    parser = CallParser(TOOLS)
    events: list[Any] = []
    last = 0
    for cut in sorted(set(c % (len(text) + 1) for c in cuts)):
        events += parser.feed(text[last:cut])
        last = cut
    events += parser.feed(text[last:]) + parser.close()
    return events


def calls_of(events: list[Any]) -> list[ParsedCall]:
    return [e for e in events if isinstance(e, ParsedCall)]


# ------------------------------------------------------------------------------------ round trips


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(name=param_names, value=awkward_text)
def test_a_value_round_trips_through_encode_and_decode(name: str, value: str) -> None:
    inner = encode_value(name, value)
    assert f"</{name}>" not in inner.replace("<![CDATA[", "\0").split("\0")[0] or inner.startswith("<![CDATA[")
    assert decode_value(inner) == value


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    arguments=st.dictionaries(param_names, awkward_text, max_size=4),
    prose=st.text(alphabet="ab <>&\n.", max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_calls_round_trip_whole_and_in_any_chunks(arguments: dict[str, str], prose: str, cuts: list[int]) -> None:
    reply = prose + render_call("fs__write_file", arguments) + prose + render_call("b__echo", {"text": "second"})
    events = feed_in_chunks(reply, cuts)
    first, second = calls_of(events)
    assert first.error is None and first.arguments == arguments
    assert (second.name, second.arguments) == ("b__echo", {"text": "second"})
    assert "".join(e for e in events if isinstance(e, str)) == prose + prose
    assert events == feed_in_chunks(reply, []) or _same_after_merging(events, feed_in_chunks(reply, []))


def _same_after_merging(a: list[Any], b: list[Any]) -> bool:
    def merged(events: list[Any]) -> list[Any]:
        out: list[Any] = []
        for event in events:
            if isinstance(event, str) and out and isinstance(out[-1], str):
                out[-1] += event
            elif event != "":
                out.append(event)
        return out

    return merged(a) == merged(b)


SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {"k": {"type": "string"}}},
        "note": {"type": "string", "nullable": True},
        "maybe": {"type": "integer", "nullable": True},
        "kind": {"enum": [1, 2, 3]},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "anything": {},
    },
}

typed_arguments = st.fixed_dictionaries(
    {},
    optional={
        "count": st.integers(min_value=-(10**20), max_value=10**20),
        "ratio": st.floats(allow_nan=False, allow_infinity=False),
        "flag": st.booleans(),
        "tags": st.lists(awkward_text, max_size=3),
        "meta": st.fixed_dictionaries({"k": awkward_text}),
        "note": awkward_text,
        "maybe": st.one_of(st.none(), st.integers()),
        "kind": st.sampled_from([1, 2, 3]),
        "mode": st.sampled_from(["fast", "slow"]),
        "anything": st.one_of(st.integers(), st.lists(st.booleans()), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
    },
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=typed_arguments, cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=6))
def test_typed_values_round_trip_through_render_parse_and_coercion(arguments: dict[str, Any], cuts: list[int]) -> None:
    [call] = calls_of(feed_in_chunks(render_call("ping", arguments), cuts))
    assert call.error is None
    coerced, problems = coerce_parameters(SCHEMA, call.arguments)
    assert problems == []
    assert coerced == arguments
    assert all(type(coerced[k]) is type(v) for k, v in arguments.items() if not isinstance(v, float))


# ------------------------------------------------------------------------------------ awkward cases


def test_several_calls_in_one_message_in_order_with_prose_kept() -> None:
    reply = (
        "First I read, then I write.\n"
        "<fs__read_file>\n<file_path>src/a.py</file_path>\n</fs__read_file>\n"
        "<fs__write_file>\n<file_path>out.txt</file_path>\n<content>\nhello\n</content>\n</fs__write_file>\n"
        "<ping/>\nDone."
    )
    prose, calls = parse_calls(reply, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [
        ("fs__read_file", {"file_path": "src/a.py"}),
        ("fs__write_file", {"file_path": "out.txt", "content": "hello"}),
        ("ping", {}),
    ]
    assert prose == "First I read, then I write.\n\n\n\nDone."
    assert calls[0].raw == "<fs__read_file>\n<file_path>src/a.py</file_path>\n</fs__read_file>"


def test_multi_line_code_with_lt_amp_and_cdata_like_text_is_taken_verbatim() -> None:
    code = (
        "    if a < b && c > d:\n"
        "        s = '<![CDATA[not a wrapper]]>'\n"
        "        html = \"<div class='x'>&amp; &lt;</div>\"\n"
        "        return a<<2 & 0xFF  # ]]> too\n"
    )
    reply = f"<fs__write_file>\n<file_path>m.py</file_path>\n<content>\n{code}</content>\n</fs__write_file>"
    [call] = parse_calls(reply, TOOLS)[1]
    assert call.arguments["content"] == code.rstrip("\n"), "indentation kept, one line break trimmed at each edge"


def test_a_closing_tag_inside_code_stays_in_the_value_unless_a_tag_follows_it() -> None:
    code = "a = '</text>' + x\n</text> is html\n  </text></div>"
    reply = f"<b__echo><text>\n{code}\n</text>\n</b__echo> after"
    for cuts in ([], list(range(0, len(reply), 3))):
        events = feed_in_chunks(reply, cuts)
        [call] = calls_of(events)
        assert call.arguments == {"text": code}
        assert "".join(e for e in events if isinstance(e, str)) == " after"


def test_cdata_carries_the_closing_tag_and_exact_whitespace() -> None:
    reply = "<fs__write_file><content>  <![CDATA[  a </content> b\n]]>\n</content><file_path>x</file_path></fs__write_file>"
    [call] = parse_calls(reply, TOOLS)[1]
    assert call.arguments == {"content": "  a </content> b\n", "file_path": "x"}
    split = "<b__echo><text><![CDATA[x]]]]><![CDATA[>y]]></text></b__echo>"
    assert parse_calls(split, TOOLS)[1][0].arguments == {"text": "x]]>y"}
    mixed = "<b__echo><text><![CDATA[x]]> and more</text></b__echo>"
    assert parse_calls(mixed, TOOLS)[1][0].arguments == {"text": "<![CDATA[x]]> and more"}, "CDATA plus text stays raw"


def test_prose_tags_comparisons_and_unknown_tools_are_not_calls() -> None:
    reply = "Use <b>bold</b>, a<b, x <= 3, <unknown_tool><p>1</p></unknown_tool> and </ping> alone. <"
    prose, calls = parse_calls(reply, TOOLS)
    assert calls == [] and prose == reply


def test_a_tag_split_over_chunks_is_held_back_until_it_can_be_decided() -> None:
    parser = CallParser(TOOLS)
    assert parser.feed("Sure. <b__") == ["Sure. "]
    assert parser.feed("ec") == []
    assert parser.feed("ho><te") == []
    assert parser.feed("xt>hi</tex") == []
    call, after = parser.feed("t></b__echo> after")
    assert (call.name, call.arguments, after) == ("b__echo", {"text": "hi"}, " after")
    assert parser.feed(" <") == [" "] and parser.close() == ["<"]
    held = CallParser(TOOLS)
    assert held.feed("a <b") == ["a "] and held.feed("c") == [] and held.feed(" d") == ["<bc d"]


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("<b__echo>chatter<text>hi</text></b__echo>", "unexpected text 'chatter' between the parameters"),
        ("<b__echo><text>hi</text></ping>", "found </ping> where a <parameter> tag or </b__echo> was expected"),
        ("<b__echo><text>a</text><text>b</text></b__echo>", "the parameter <text> is given twice"),
        ("<b__echo><= 3</b__echo>", "unexpected '<= 3"),
    ],
)
def test_malformed_calls_become_errors_and_parsing_goes_on(reply: str, problem: str) -> None:
    events = feed_in_chunks(reply + "\nthen <ping/> ok", [3, 9, 17])
    calls = calls_of(events)
    assert calls[0].name == "b__echo" and calls[0].arguments == {}
    assert calls[0].error is not None and problem in calls[0].error
    assert calls[0].error.startswith("the call to b__echo could not be read: ")
    assert [(c.name, c.error) for c in calls[1:]] == [("ping", None)], "the parser resynchronises"
    assert "".join(e for e in events if isinstance(e, str)).endswith("then  ok")


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("<b__echo><text>never closed", "the parameter <text> was not closed with </text> before the reply ended"),
        ("<b__echo><text>hi</text>", "the call was not closed with </b__echo> before the reply ended"),
        ("<b__echo><text><![CDATA[never closed</text></b__echo>", "the parameter <text> was not closed"),
    ],
)
def test_unclosed_calls_become_errors(reply: str, problem: str) -> None:
    for cuts in ([], [5, 12, 20]):
        [call] = calls_of(feed_in_chunks(reply, cuts))
        assert call.error is not None and problem in call.error and call.raw == reply


def test_whitespace_rules() -> None:
    assert parse_calls("<b__echo><text>  padded  </text></b__echo>", TOOLS)[1][0].arguments == {"text": "padded"}
    assert parse_calls("<b__echo><text>\r\n  x\r\n  y\r\n</text></b__echo>", TOOLS)[1][0].arguments == {"text": "  x\r\n  y"}
    assert parse_calls("<b__echo><text>\n\n</text><n/></b__echo>", TOOLS)[1][0].arguments == {"text": "", "n": ""}
    assert parse_calls("<ping  >\n</ping >", TOOLS)[1][0].arguments == {}


# ------------------------------------------------------------------------------------ types


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("count", " 42 ", 42), ("count", "-7", -7), ("count", "3.0", 3), ("ratio", "2.5", 2.5), ("ratio", "1e3", 1000.0),
        ("ratio", "4", 4), ("flag", "True", True), ("flag", "false", False), ("tags", '["a", "<b>"]', ["a", "<b>"]),
        ("meta", '{"k": "v"}', {"k": "v"}), ("note", "null", "null"), ("maybe", "null", None), ("maybe", "", None),
        ("kind", "2", 2), ("mode", "slow", "slow"), ("anything", "[1]", [1]), ("anything", "free text", "free text"),
        ("unknown_param", "5", "5"),
    ],
)  # fmt: skip
def test_conversion_to_schema_types(name: str, text: str, expected: Any) -> None:
    coerced, problems = coerce_parameters(SCHEMA, {name: text})
    assert problems == [] and coerced == {name: expected} and type(coerced[name]) is type(expected)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("count", "abc", "<count> must be integer, got 'abc'"),
        ("count", "2.5", "<count> must be integer"),
        ("ratio", "nan", "<ratio> must be number"),
        ("flag", "yes", "<flag> must be boolean"),
        ("tags", "a, b", "<tags> must be JSON array of string"),
        ("tags", '{"a": 1}', "<tags> must be JSON array of string"),
        ("meta", "[1]", "<meta> must be JSON object"),
        ("kind", "4", "<kind> must be one of 1, 2, 3"),
        ("mode", "medium", "<mode> must be one of fast, slow"),
    ],
)
def test_values_that_do_not_fit_are_reported(name: str, text: str, message: str) -> None:
    _, problems = coerce_parameters(SCHEMA, {name: text})
    assert len(problems) == 1 and message in problems[0]


# ------------------------------------------------------------------------------------ prompt


def published(name: str, schema: dict[str, Any], description: str = "Does things.") -> PublishedTool:
    return PublishedTool(name, "a", mcp_types.Tool(name=name, description=description, input_schema=schema))


def toy_tools() -> list[PublishedTool]:
    toy = _load_toy_module()
    server = toy.build_server("a", 1000)
    tools = {
        "echo": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "add": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
        "shape": toy.SHAPE_SCHEMA,
        "pid": {"type": "object"},
    }
    assert server is not None
    return [published(f"a__{name}", schema) for name, schema in tools.items()]


def test_the_prompt_lists_every_tool_with_parameters_and_a_working_example() -> None:
    tools = toy_tools()
    prompt = render_tool_prompt(tools)
    assert prompt.startswith("# Tools\n") and "<![CDATA[" in prompt
    for tool in tools:
        assert f"## {tool.name}\nDoes things." in prompt
    assert "- a (integer, required)" in prompt and "- text (string, required)" in prompt
    assert "- kind (one of 1, 2, 3, required): Kind code." in prompt
    assert "- label (string or null, optional): An optional label." in prompt
    assert "## a__pid\nDoes things.\nParameters: none\nExample:\n<a__pid>\n</a__pid>" in prompt
    # Every example in the prompt parses back to a call whose values fit the schema.
    _, calls = parse_calls(prompt, [t.name for t in tools])
    assert [c.name for c in calls] == [t.name for t in tools]
    for call, tool in zip(calls, tools):
        assert call.error is None
        coerced, problems = coerce_parameters(tool_schema(tool), call.arguments)
        assert problems == [] and set(coerced) >= set(tool_schema(tool).get("required", []))
    assert example_arguments(tool_schema(tools[1])) == {"a": 1, "b": 1}
    assert render_tool_prompt([]) == ""


def test_results_are_rendered_in_the_same_convention() -> None:
    ok = render_result(ToolOutcome("a__echo", True, output="line </tool_result> 1\nline 2"))
    failed = render_result(ToolOutcome("a__fail", False, error="it failed"))
    structured = render_result(ToolOutcome("a__add", True, output={"sum": 3}))
    assert failed == '<tool_result name="a__fail" error="true">Error: it failed</tool_result>'
    assert structured == '<tool_result name="a__add">{"sum": 3}</tool_result>'
    assert ok.startswith('<tool_result name="a__echo"><![CDATA[')
    inner = ok.removeprefix('<tool_result name="a__echo">').removesuffix("</tool_result>")
    assert decode_value(inner) == "line </tool_result> 1\nline 2"
    assert json.loads(structured.split(">", 1)[1].rsplit("<", 1)[0]) == {"sum": 3}
