"""An MCP server (stdio) whose tools ask the user for input, in whichever era the client speaks.

On a 2025-era connection each tool sends ``elicitation/create`` while the call runs; on a
2026-07-28 connection it answers the call with ``input_required`` and finishes when the
client retries with the answer. Either way the tool's text is the JSON of what the server
received: ``{"era": ..., "action": ..., "content": ...}``.

Tools: ``profile`` (a form: name required; age, colour, newsletter with defaults),
``consent`` (URL mode), ``era`` (the negotiated protocol version, no question).
"""

import json

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "colour": {"type": "string", "enum": ["red", "green", "blue"], "default": "green"},
        "newsletter": {"type": "boolean", "default": False},
    },
    "required": ["name"],
}
CONSENT_URL = "https://consent.example.invalid/approve?request=42"

TOOLS = [
    types.Tool(name="profile", description="asks for a profile", input_schema={"type": "object"}),
    types.Tool(name="consent", description="asks to visit a page", input_schema={"type": "object"}),
    types.Tool(name="era", description="the negotiated protocol version", input_schema={"type": "object"}),
]


def question(name: str, modern: bool) -> types.ElicitRequestParams:
    if name == "profile":
        return types.ElicitRequestFormParams(message="Who are you?", requested_schema=PROFILE_SCHEMA)
    return types.ElicitRequestURLParams(
        message="Approve the request on the consent page", url=CONSENT_URL, elicitation_id=None if modern else "consent-42"
    )


def report(era: str, answer: types.ElicitResult) -> types.CallToolResult:
    text = json.dumps({"era": era, "action": answer.action, "content": answer.content})
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def on_list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def on_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams):
    era = ctx.protocol_version
    if params.name == "era":
        return types.CallToolResult(content=[types.TextContent(text=era)])
    ask = question(params.name, era in MODERN_PROTOCOL_VERSIONS)
    if era in MODERN_PROTOCOL_VERSIONS:
        answer = (params.input_responses or {}).get("answer")
        if isinstance(answer, types.ElicitResult):
            return report(era, answer)
        return types.InputRequiredResult(input_requests={"answer": types.ElicitRequest(params=ask)}, request_state="asked")
    if isinstance(ask, types.ElicitRequestURLParams):
        answer = await ctx.session.elicit_url(ask.message, ask.url, "consent-42", related_request_id=ctx.request_id)
    else:
        answer = await ctx.session.elicit_form(ask.message, ask.requested_schema, related_request_id=ctx.request_id)
    return report(era, answer)


server = Server("elicit", version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
