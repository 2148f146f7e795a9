"""A small standalone MCP server for the client bridge's tests and benchmarks.

Built on the low-level `mcp.server.Server` so every `inputSchema` is exactly the dict written
here (the high-level server would derive schemas from type hints). Run it over stdio
(default) or streamable HTTP (`--http PORT`). Two instances with different `--name`s expose
the same tool names, so a bridge over both has to prefix them.

Tools: echo, add (integer schema, strict: a float argument is an error), image (a PNG),
fail (isError), slow (sleeps; for timeouts), shape ($ref / anyOf / nullable / enum schema),
pid (the server's process id), grow (registers a new tool and sends
tools/list_changed), big (a text result of N bytes, for the benchmark), spawn (starts a
grandchild process that lingers; for the no-leftover-process test), odd.name (a tool name
with a dot), meet (two concurrent calls rendezvous through files: proof of parallel dispatch).
`--instructions TEXT` sets the server's instructions (`--instructions-size N` repeats it up to
N characters, for the bridge's caps).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys

import anyio
import mcp.types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server

# A 1x1 transparent PNG.
PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4"
        "890000000d4944415478da63f8cfc0f01f0005000201a3c4d1f80000000049454e44ae426082"
    )
).decode()

SHAPE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
        }
    },
    "properties": {
        "origin": {"$ref": "#/$defs/Point", "description": "Where to start."},
        "label": {"type": ["string", "null"], "description": "An optional label."},
        "size": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "kind": {"enum": [1, 2, 3], "description": "Kind code."},
        "mode": {"const": "fast"},
        "tags": {"type": "array"},
    },
    "required": ["origin", "kind", "ghost"],
    "additionalProperties": False,
}


def text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(text=value)]


def build_server(name: str, page_size: int, instructions: str | None = None) -> Server:
    tools: list[types.Tool] = [
        types.Tool(
            name="echo",
            description=f"Echo the text back ({name}).",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        ),
        types.Tool(
            name="add",
            description="Add two integers.",
            input_schema={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
            output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
        ),
        types.Tool(name="image", description="Return a tiny PNG.", input_schema={"type": "object"}),
        types.Tool(
            name="fail",
            description="Always fails with isError.",
            input_schema={"type": "object", "properties": {"why": {"type": "string"}}},
        ),
        types.Tool(
            name="slow",
            description="Sleep for a while.",
            input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
        ),
        types.Tool(name="shape", description="Exercise awkward schemas.", input_schema=SHAPE_SCHEMA),
        types.Tool(name="pid", description="Report the server's process id.", input_schema={"type": "object"}),
        types.Tool(name="grow", description="Add a tool and notify.", input_schema={"type": "object"}),
        types.Tool(
            name="big",
            description="Return a text result of the given size in bytes.",
            input_schema={"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
        ),
        types.Tool(name="spawn", description="Start a lingering grandchild.", input_schema={"type": "object"}),
        types.Tool(name="odd.name", description="A tool whose name has a dot.", input_schema={"type": "object"}),
        types.Tool(
            name="meet",
            description="Create file `me`, then wait up to `within` seconds for file `other` to exist.",
            input_schema={
                "type": "object",
                "properties": {"me": {"type": "string"}, "other": {"type": "string"}, "within": {"type": "number"}},
                "required": ["me", "other"],
            },
        ),
    ]
    grandchildren: list[subprocess.Popen[bytes]] = []

    async def on_list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + page_size
        return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)

    async def on_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        tool = params.name
        if tool == "echo":
            return types.CallToolResult(content=text(f"{name}: {args.get('text', '')}"))
        if tool == "add":
            a, b = args.get("a"), args.get("b")
            if type(a) is not int or type(b) is not int:
                return types.CallToolResult(
                    content=text(f"a and b must be integers, got {json.dumps(a)} and {json.dumps(b)}"),
                    is_error=True,
                )
            return types.CallToolResult(content=text(json.dumps({"sum": a + b})), structured_content={"sum": a + b})
        if tool == "image":
            return types.CallToolResult(
                content=[types.TextContent(text="a tiny image"), types.ImageContent(data=PNG_1X1, mime_type="image/png")]
            )
        if tool == "fail":
            return types.CallToolResult(content=text(f"it failed: {args.get('why', 'no reason')}"), is_error=True)
        if tool == "slow":
            await anyio.sleep(float(args.get("seconds", 1)))
            return types.CallToolResult(content=text("done sleeping"))
        if tool == "shape":
            return types.CallToolResult(content=text(json.dumps(args, sort_keys=True)))
        if tool == "pid":
            return types.CallToolResult(content=text(str(os.getpid())))
        if tool == "grow":
            new = f"extra_{len(tools)}"
            tools.append(types.Tool(name=new, description="Added at runtime.", input_schema={"type": "object"}))
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=text(new))
        if tool == "big":
            size = int(args["size"])
            return types.CallToolResult(content=text("x" * size))
        if tool == "spawn":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            grandchildren.append(child)
            return types.CallToolResult(content=text(str(child.pid)))
        if tool == "odd.name":
            return types.CallToolResult(content=text("odd"))
        if tool == "meet":
            # Succeeds only if another call creates `other` while this one waits: two calls
            # that meet prove they ran at the same time, without measuring any time.
            with open(args["me"], "w") as marker:
                marker.write(name)
            with anyio.move_on_after(float(args.get("within", 5))):
                while not os.path.exists(args["other"]):
                    await anyio.sleep(0.01)
                return types.CallToolResult(content=text(f"{name} met {args['other']}"))
            return types.CallToolResult(content=text(f"{name} waited alone"), is_error=True)
        if tool.startswith("extra_"):
            return types.CallToolResult(content=text(f"{tool} ran"))
        return types.CallToolResult(content=text(f"unknown tool {tool}"), is_error=True)

    return Server(
        name, version="1.0.0", instructions=instructions, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read, write):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="toy")
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port instead of stdio")
    parser.add_argument("--instructions", default=None)
    parser.add_argument("--instructions-size", type=int, default=0)
    opts = parser.parse_args()
    instructions = opts.instructions
    if instructions and opts.instructions_size:
        lines = (f"{instructions} (line {n})" for n in range(opts.instructions_size))
        instructions = "\n".join(lines)[: opts.instructions_size]
    server = build_server(opts.name, opts.page_size, instructions)
    print(f"toy_server {opts.name} starting (pid {os.getpid()})", file=sys.stderr, flush=True)
    if opts.http:
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(app, host="127.0.0.1", port=opts.http, log_level="warning")
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
