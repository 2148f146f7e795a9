"""Conversions: MCP results to Gemini responses, OpenAI shapes both ways, toolConfig and
tool_choice, the native_tool_calls event form, and history from OpenAI/Anthropic shapes."""

from __future__ import annotations

import json
import re
import uuid

import mcp.types as mcp_types
import pytest

from coretools.client import (
    PLACEHOLDER_SIGNATURE,
    CallLedger,
    StreamAccumulator,
    anthropic_messages_to_gemini,
    declaration_from_openai,
    function_response_content,
    gemini_tools_to_openai,
    native_tool_calls_event,
    openai_messages_to_gemini,
    openai_tool,
    openai_tools_to_gemini,
    outcome_from_result,
    response_text,
    tool_choice_to_tool_config,
    tool_config,
    tool_config_to_tool_choice,
    tool_result_to_function_response,
)
from coretools.client.convert import ToolOutcome, function_declaration, openai_tool_message

PNG = "iVBORw0KGgo="


def result(*content, structured=None, error=False) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=list(content), structured_content=structured, is_error=error)


def test_text_blocks_are_joined() -> None:
    outcome = outcome_from_result("t", result(mcp_types.TextContent(text="one"), mcp_types.TextContent(text="two")))
    assert outcome.ok and outcome.response == {"output": "one\ntwo"}


def test_structured_content_is_the_output_when_an_output_schema_declares_it() -> None:
    outcome = outcome_from_result(
        "t", result(mcp_types.TextContent(text='{"a": 1}'), structured={"a": 1}), has_output_schema=True
    )
    assert outcome.response == {"output": {"a": 1}}


def test_without_an_output_schema_the_text_is_the_output() -> None:
    # structured fields beside a text answer (as coretools' own search sends with --structured-content)
    answer = 'Found 1 match for pattern "x"\n---\nFile: a.py\nL1: x = 1\n---'
    outcome = outcome_from_result("t", result(mcp_types.TextContent(text=answer), structured={"total_matches": 1}))
    assert outcome.response == {"output": answer}


def test_structured_content_stands_in_for_an_empty_content() -> None:
    assert outcome_from_result("t", result(structured={"a": 1})).response == {"output": {"a": 1}}
    blank = result(mcp_types.TextContent(text=" \n"), structured={"a": 1})
    assert outcome_from_result("t", blank).response == {"output": {"a": 1}}
    with_image = result(mcp_types.ImageContent(data=PNG, mime_type="image/png"), structured={"a": 1})
    outcome = outcome_from_result("t", with_image)
    assert outcome.output == "" and len(outcome.media) == 1


def test_is_error_becomes_error() -> None:
    outcome = outcome_from_result("t", result(mcp_types.TextContent(text="bad input"), structured={"x": 1}, error=True))
    assert not outcome.ok and outcome.response == {"error": "bad input"}
    assert outcome_from_result("t", result(error=True)).response == {"error": "the tool reported an error"}


def test_every_content_kind() -> None:
    outcome = outcome_from_result(
        "shot",
        result(
            mcp_types.TextContent(text="see"),
            mcp_types.ImageContent(data=PNG, mime_type="image/png"),
            mcp_types.AudioContent(data="AAAA", mime_type="audio/wav"),
            mcp_types.ResourceLink(uri="file:///a.txt", name="a.txt", title="The A file"),
            mcp_types.ResourceLink(uri="file:///b.txt", name="b.txt"),
            mcp_types.EmbeddedResource(resource=mcp_types.TextResourceContents(uri="file:///c.txt", text="c text")),
            mcp_types.EmbeddedResource(resource=mcp_types.BlobResourceContents(uri="file:///d.jpg", blob="/9j/", mime_type="image/jpeg")),
            mcp_types.EmbeddedResource(resource=mcp_types.BlobResourceContents(uri="file:///e.mp4", blob="AAAA", mime_type="video/mp4")),
        ),
        call_id="c9",
    )
    assert outcome.output == "\n".join(
        [
            "see",
            "[audio/wav audio omitted: not supported in function responses]",
            "Resource Link: The A file at file:///a.txt",
            "Resource Link: b.txt at file:///b.txt",
            "c text",
            "[video/mp4 resource file:///e.mp4 omitted: not supported in function responses]",
        ]
    )
    assert [(m.mime_type, m.data, m.display_name) for m in outcome.media] == [
        ("image/png", PNG, "shot_0.png"),
        ("image/jpeg", "/9j/", "shot_1.jpeg"),
    ]


def test_function_response_content_nested_or_sibling_media() -> None:
    with_image = outcome_from_result("a__img", result(mcp_types.TextContent(text="pic"), mcp_types.ImageContent(data=PNG, mime_type="image/png")), call_id="c1")
    plain = ToolOutcome(name="b__x", ok=False, error="nope", call_id="c2")
    nested = function_response_content([with_image, plain], multimodal=True)
    assert nested == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "a__img", "response": {"output": "pic"},
                                  "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG, "displayName": "a__img_0.png"}}]}},
            {"functionResponse": {"id": "c2", "name": "b__x", "response": {"error": "nope"}}},
        ],
    }  # fmt: skip
    sibling = function_response_content([with_image, plain], include_ids=False)
    assert sibling["parts"] == [
        {"functionResponse": {"name": "a__img", "response": {"output": "pic"}}},
        {"functionResponse": {"name": "b__x", "response": {"error": "nope"}}},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
    ]


# --------------------------------------------------------------------------- OpenAI shapes

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": ["integer", "null"]}}, "required": ["path"]}


def test_declaration_to_openai_and_back() -> None:
    declaration = function_declaration("fs__read", "Read a file.", SCHEMA)
    tool = openai_tool(declaration)
    assert tool == {
        "type": "function",
        "function": {"name": "fs__read", "description": "Read a file.", "parameters": declaration["parametersJsonSchema"]},
    }
    assert declaration_from_openai(tool) == declaration
    assert gemini_tools_to_openai([{"functionDeclarations": [declaration]}]) == [tool]
    snake = {"function_declarations": [{"name": "x", "description": "", "parameters_json_schema": {"type": "object", "properties": {}}}]}
    assert gemini_tools_to_openai([snake])[0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_openai_tools_to_gemini_sanitises_and_skips_custom_tools() -> None:
    tools = [
        {"type": "function", "function": {"name": "read_file", "description": "Read", "parameters": {**SCHEMA, "$schema": "x"}}},
        {"type": "custom", "custom": {"name": "grammar_tool"}},
        {"type": "function", "function": {"name": "noargs"}},
    ]
    [gemini] = openai_tools_to_gemini(tools)
    names = [d["name"] for d in gemini["functionDeclarations"]]
    assert names == ["read_file", "noargs"]
    first = gemini["functionDeclarations"][0]["parametersJsonSchema"]
    assert "$schema" not in first and first["properties"]["n"] == {"type": "integer", "nullable": True}
    [strict] = openai_tools_to_gemini(tools, profile="openapi")
    assert strict["functionDeclarations"][0]["parameters"]["properties"]["n"] == {"type": "integer", "nullable": True}
    assert "parameters" not in strict["functionDeclarations"][1], "zero-argument tools omit parameters"
    assert openai_tools_to_gemini([]) == []


def test_tool_config_builder() -> None:
    assert tool_config() == {"functionCallingConfig": {"mode": "AUTO"}}
    assert tool_config("any", ["a"]) == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a"]}}
    assert tool_config("VALIDATED", ["a", "b"])["functionCallingConfig"]["allowedFunctionNames"] == ["a", "b"]
    assert tool_config("NONE") == {"functionCallingConfig": {"mode": "NONE"}}
    with pytest.raises(ValueError, match="ANY or VALIDATED"):
        tool_config("AUTO", ["a"])
    with pytest.raises(ValueError, match="mode must be one of"):
        tool_config("SOMETIMES")


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"type": "function", "function": {"name": "fs__read"}}, {"mode": "ANY", "allowedFunctionNames": ["fs__read"]}),
        (
            {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}]}},
            {"mode": "VALIDATED", "allowedFunctionNames": ["a", "b"]},
        ),
        (
            {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}]}},
            {"mode": "ANY", "allowedFunctionNames": ["a", "b"]},
        ),
    ],
)
def test_tool_choice_mapping_both_ways(choice, config) -> None:
    assert tool_choice_to_tool_config(choice) == {"functionCallingConfig": config}
    assert tool_config_to_tool_choice({"functionCallingConfig": config}) == choice


def test_tool_choice_errors_and_absence() -> None:
    assert tool_choice_to_tool_config(None) is None
    for bad in ("sometimes", {"type": "web_search"}, 3):
        with pytest.raises(ValueError, match="unknown tool_choice"):
            tool_choice_to_tool_config(bad)


# --------------------------------------------------------------------------- the seed's event form


def test_native_tool_calls_event_uses_the_models_id_or_a_uuid() -> None:
    ledger = CallLedger()
    given = native_tool_calls_event({"id": "call-123", "name": "read_file", "args": {"path": "config.json"}}, ledger)
    assert given == {
        "type": "native_tool_calls",
        "toolCalls": [{"id": "call-123", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "config.json"}'}}],
    }
    made = [native_tool_calls_event({"name": "read_file", "args": {}}, ledger)["toolCalls"][0] for _ in range(50)]
    ids = [m["id"] for m in made]
    assert len(set(ids)) == 50, "ids must be unique even for the same tool in one instant"
    for call_id in ids:
        assert re.fullmatch(r"call_[0-9a-f]{32}", call_id) and uuid.UUID(call_id[5:]).version == 4
        assert re.fullmatch(r"[a-zA-Z0-9_-]+", call_id), "safe for Anthropic tool_use ids"
    assert made[0]["function"]["arguments"] == "{}"


def test_tool_result_back_to_function_response() -> None:
    ledger = CallLedger()
    with_id = native_tool_calls_event({"id": "g1", "name": "fs__read", "args": {}}, ledger)["toolCalls"][0]["id"]
    made_id = native_tool_calls_event({"name": "fs__list", "args": {}}, ledger)["toolCalls"][0]["id"]
    assert tool_result_to_function_response({"type": "tool_result", "tool_use_id": with_id, "content": "data"}, ledger) == {
        "functionResponse": {"id": "g1", "name": "fs__read", "response": {"output": "data"}}
    }
    assert tool_result_to_function_response(
        {"type": "tool_result", "tool_use_id": made_id, "content": [{"type": "text", "text": "boom"}], "is_error": True}, ledger
    ) == {"functionResponse": {"name": "fs__list", "response": {"error": "boom"}}}, "an id Gemini never sent is not echoed"
    assert tool_result_to_function_response({"role": "tool", "tool_call_id": with_id, "content": "x"}, ledger, include_id=False) == {
        "functionResponse": {"name": "fs__read", "response": {"output": "x"}}
    }
    with pytest.raises(KeyError, match="no tool call"):
        tool_result_to_function_response({"tool_use_id": "unknown", "content": ""}, ledger)


def test_openai_tool_message_text() -> None:
    ok = ToolOutcome(name="t", ok=True, output={"a": 1})
    assert openai_tool_message(ok, "c1") == {"role": "tool", "tool_call_id": "c1", "content": '{"a": 1}'}
    failed = ToolOutcome(name="t", ok=False, error="nope")
    assert openai_tool_message(failed, "c2")["content"] == "Error: nope"


# --------------------------------------------------------------------------- history


def test_openai_history_gets_placeholder_signatures_and_names() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "x1", "type": "function", "function": {"name": "fs__read", "arguments": '{"path": "a"}'}},
            {"id": "x2", "type": "function", "function": {"name": "fs__list", "arguments": "not json"}},
        ]},
        {"role": "tool", "tool_call_id": "x1", "content": "A"},
        {"role": "tool", "tool_call_id": "x2", "content": "B"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x3", "type": "function", "function": {"name": "fs__read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x3", "content": "C"},
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    system, contents = openai_messages_to_gemini(messages)
    assert system == {"parts": [{"text": "Be brief."}]}
    assert contents == [
        {"role": "user", "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": PNG}}]},
        {"role": "model", "parts": [
            {"text": "Reading."},
            {"functionCall": {"name": "fs__read", "args": {"path": "a"}}, "thoughtSignature": PLACEHOLDER_SIGNATURE},
            {"functionCall": {"name": "fs__list", "args": {}}},
        ]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "fs__read", "response": {"output": "A"}}},
            {"functionResponse": {"name": "fs__list", "response": {"output": "B"}}},
        ]},
        {"role": "model", "parts": [{"functionCall": {"name": "fs__read", "args": {}}, "thoughtSignature": PLACEHOLDER_SIGNATURE}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "fs__read", "response": {"output": "C"}}}]},
        {"role": "model", "parts": [{"text": "Done."}]},
    ]  # fmt: skip


def test_anthropic_history_keeps_a_real_signature_and_placeholders_the_rest() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "fs__read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "fs__shot", "input": {}},
            {"type": "thoughtSignature", "thoughtSignature": "UkVBTA=="},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [
                {"type": "text", "text": "here"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ]},
        ]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_3", "name": "fs__read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "no", "is_error": True}]},
    ]  # fmt: skip
    system, contents = anthropic_messages_to_gemini(messages, system="Sys.")
    assert system == {"parts": [{"text": "Sys."}]}
    assert contents[1]["parts"] == [
        {"text": "Let me look."},
        {"functionCall": {"name": "fs__read", "args": {"path": "a"}}, "thoughtSignature": "UkVBTA=="},
        {"functionCall": {"name": "fs__shot", "args": {}}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "fs__read", "response": {"output": "A"}}},
        {"functionResponse": {"name": "fs__shot", "response": {"output": "here"}}},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
    ]
    assert contents[3]["parts"] == [{"functionCall": {"name": "fs__read", "args": {}}, "thoughtSignature": PLACEHOLDER_SIGNATURE}]
    assert contents[4]["parts"] == [{"functionResponse": {"name": "fs__read", "response": {"error": "no"}}}]


def test_stream_accumulator_keeps_every_part() -> None:
    accumulator = StreamAccumulator()
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel", "thought": True}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "c2ln"}]}, "finishReason": "STOP"}], "usageMetadata": {"totalTokenCount": 3}},
        {"candidates": []},
    ]  # fmt: skip
    for chunk in chunks:
        accumulator.add(json.loads(json.dumps(chunk)))
    assert accumulator.content() == {"role": "model", "parts": [{"text": "Hel", "thought": True}, {"text": "lo"}, {"text": "", "thoughtSignature": "c2ln"}]}
    assert accumulator.finish_reason == "STOP" and accumulator.usage == {"totalTokenCount": 3} and accumulator.chunks == 4
    assert response_text(accumulator.content()) == "lo"
    assert response_text(accumulator.content(), include_thoughts=True) == "Hello"
