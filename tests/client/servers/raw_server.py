"""A hand-rolled stdio JSON-RPC peer for transport edge cases (no MCP SDK on this side).

Modes (argv[1]):
  split     write every message in 7-byte pieces with flushes in between
  batch     write a tools/list_changed notification and the response in one write
  garbage   write a non-JSON line before every response
  stubborn  ignore SIGTERM and stdin EOF (only SIGKILL ends it)
"""

import json
import os
import signal
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "split"
out = sys.stdout.buffer


def write(data: bytes) -> None:
    if MODE == "split":
        for i in range(0, len(data), 7):
            out.write(data[i : i + 7])
            out.flush()
            time.sleep(0.0005)
    else:
        out.write(data)
        out.flush()


def answer(request: dict) -> dict:
    method = request["method"]
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "é ünïcode ✓", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        size = int((request["params"].get("arguments") or {}).get("size", 10))
        result = {"content": [{"type": "text", "text": "é" * size}]}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


if MODE == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(f"raw_server {MODE} pid {os.getpid()}", file=sys.stderr, flush=True)
for line in sys.stdin.buffer:
    request = json.loads(line)
    if "id" not in request:
        continue
    data = json.dumps(answer(request)).encode() + b"\n"
    if MODE == "batch":
        data = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).encode() + b"\n" + data
    if MODE == "garbage":
        data = b"this is not json\n" + data
    write(data)
if MODE == "stubborn":
    while True:
        time.sleep(1)
