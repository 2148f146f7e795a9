"""Baseline for the benchmarks: the smallest low-level MCP SDK server, one trivial tool that returns a
constant 2 KB text. Whatever coretools costs on top of this is ours."""

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TEXT = "x" * 2047 + "\n"
TOOL = types.Tool(name="read_file", description="constant", input_schema={"type": "object", "properties": {}})


async def on_list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def on_call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=TEXT)])


async def main():
    server = Server("bare", version="0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
