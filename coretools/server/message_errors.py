"""JSON-RPC messages the server cannot serve, and the errors that answer them.

A host waits for the answer to every request it sent; a request left unanswered stalls it until its own
timeout, with nothing to show the model. So every message that cannot be read is answered: with the
request's id when one can be read from it (a lenient parse, or the flat members at its start), else with
id null, as JSON-RPC prescribes for a parse error. The message says what is wrong and where, in terms a
client author can act on: a lone surrogate escape is named as such (the parser's own words for it, "unexpected
end of hex escape", point nowhere useful), so is nesting beyond the parser's depth limit and a raw control
character inside a string.

Codes: -32700 (parse error) for text that is not valid JSON, -32600 (invalid request) for valid JSON that is
not a JSON-RPC message, and for a message over the size limit (`too_large`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types
from pydantic import ValidationError

HEAD_CHARS = 4096  # how much of a message is searched for its id when it cannot be parsed
PARSER_DEPTH = 200  # pydantic-core's JSON parser refuses deeper nesting of arrays and objects
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_POSITION = re.compile(r" at line (\d+) column (\d+)$")
# `"name": scalar,` members at the top level of an object, up to the id: enough to find the id of a message
# whose params could not be parsed (too deep, cut off), since clients write "jsonrpc" and "id" first.
_LEADING_ID = re.compile(
    r'\s*\{(?:\s*"(?:[^"\\]|\\.)*"\s*:\s*(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)\s*,)*?'
    r'\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}]'
)
_CONTROL_NAMES = {0: "NUL", 9: "TAB", 10: "LF", 13: "CR", 27: "ESC"}


class Unreadable(Exception):
    """A message that cannot be served; `reply` is the error that answers it."""

    def __init__(self, reply: types.JSONRPCError) -> None:
        super().__init__(reply.error.message)
        self.reply = reply


def read_message(text: str) -> types.JSONRPCMessage:
    """The JSON-RPC message of one stdio line; raises `Unreadable` with the answer for anything else."""
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        raise Unreadable(answer_to(exc)) from None


def answer_to(exc: Exception) -> types.JSONRPCError:
    """The answer to a line that failed JSON-RPC validation with `exc` (which holds the line, or the value
    parsed from it); also what the SDK's own stdio transport hands the server for such a line."""
    if not isinstance(exc, ValidationError):
        return reply(None, types.PARSE_ERROR, f"Parse error: {exc}")
    errors = exc.errors(include_url=False)
    first = errors[0]
    if first["type"] == "json_invalid":
        text = first["input"] if isinstance(first["input"], str) else bytes(first["input"]).decode("utf-8", "replace")
        reason = invalid_json_reason(text, str(first.get("ctx", {}).get("error", first["msg"])))
        return reply(request_id(text), types.PARSE_ERROR, f"Parse error: {reason}")
    whole = next((e["input"] for e in errors if len(e["loc"]) <= 2 and isinstance(e["input"], dict)), None)
    return reply(_id_of(whole), types.INVALID_REQUEST, _invalid_request(errors))


def reply(request: types.RequestId | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request, error=types.ErrorData(code=code, message=message))


def too_large(size: int, limit: int, head: str) -> types.JSONRPCError:
    """The answer to a message of `size` bytes over the `limit`, of which only the `head` was kept."""
    return reply(
        request_id(head),
        types.INVALID_REQUEST,
        f"Request too large: this message is {size:,} bytes, over the limit of {limit:,} bytes for one message "
        "(server option --max-message-bytes). It was discarded unread: send less in one call.",
    )


def invalid_json_reason(text: str, parser_message: str) -> str:
    """What is wrong with `text`, which the parser refused with `parser_message` ("... at line L column C")."""
    surrogate = _lone_surrogate(text)
    if surrogate is not None:
        offset, escape = surrogate
        return (
            f"lone surrogate {escape} at offset {offset}: JSON text must be valid Unicode. Escape a character "
            "outside the Basic Multilingual Plane as a pair (a high \\ud800-\\udbff followed by a low "
            "\\udc00-\\udfff), or send it as UTF-8"
        )
    where = _POSITION.search(parser_message)
    offset = _offset(text, int(where[1]), int(where[2])) if where else None
    at = f" at offset {offset}" if offset is not None else ""
    if "recursion limit" in parser_message:
        return f"arrays and objects nested more than {PARSER_DEPTH} levels deep{at}; no MCP message needs that many"
    if "control character" in parser_message and offset is not None and offset < len(text):
        code = ord(text[offset])
        name = _CONTROL_NAMES.get(code, "control character")
        return (
            f"a raw {name} (U+{code:04X}){at} inside a string: JSON strings must escape control characters "
            f"(write \\u{code:04x})"
        )
    if where is None:
        return parser_message
    if offset is not None and offset < len(text) and ord(text[offset]) < 0x20 and text[offset] not in "\t\n\r":
        code = ord(text[offset])
        name = _CONTROL_NAMES.get(code, "control character")
        return f"a raw {name} (U+{code:04X}){at}: {parser_message[: where.start()]}"
    return parser_message[: where.start()] + at


def request_id(text: str) -> types.RequestId | None:
    """The id of the request `text` carries, if one can be read from it; None for a response or a
    notification, whose answer would otherwise be taken for the answer to one of the client's own requests."""
    message: Any = None
    try:
        message = json.loads(text, strict=False)  # lenient: lone surrogates and raw control characters pass
    except (ValueError, RecursionError):  # not JSON at all, a huge integer literal, nesting too deep
        found = _LEADING_ID.match(text, 0, HEAD_CHARS)
        if found is None or '"method"' not in text[:HEAD_CHARS]:
            return None
        try:
            message = {"id": json.loads(found[1], strict=False), "method": ""}
        except ValueError:
            return None
    return _id_of(message)


def _id_of(message: Any) -> types.RequestId | None:
    if not isinstance(message, dict) or "result" in message or "error" in message:
        return None
    ident = message.get("id")
    if isinstance(ident, bool) or not isinstance(ident, (int, str)):
        return None
    if isinstance(ident, str):
        ident = ident.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate cannot go back on the wire
    return ident


def _lone_surrogate(text: str) -> tuple[int, str] | None:
    """The offset and text of the first `\\uXXXX` escape in `text` that is half of a surrogate pair alone."""
    pending: re.Match[str] | None = None  # a high surrogate escape waiting for its low half
    for escape in _ESCAPE.finditer(text):
        unit = int(escape[1], 16) if escape[1] else None
        if pending is not None:
            if unit is not None and 0xDC00 <= unit <= 0xDFFF and escape.start() == pending.end():
                pending = None
                continue
            return pending.start(), pending[0]
        if unit is None:
            continue
        if 0xD800 <= unit <= 0xDBFF:
            pending = escape
        elif 0xDC00 <= unit <= 0xDFFF:
            return escape.start(), escape[0]
    return (pending.start(), pending[0]) if pending is not None else None


def _offset(text: str, line: int, column: int) -> int | None:
    """The character offset of the parser's 1-based line and column (a column counts UTF-8 bytes)."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    line_bytes = text[start : start + column].encode("utf-8", "surrogatepass")
    return start + len(line_bytes[: column - 1].decode("utf-8", "ignore"))


def _invalid_request(errors: list[Any]) -> str:
    """Valid JSON that is not a JSON-RPC message: say what one looks like, and what this one lacks as a
    request (the usual intent)."""
    lacking = [
        f"{'.'.join(str(part) for part in error['loc'][1:]) or 'the message'}: {error['msg']}"
        for error in errors
        if error["loc"][:1] == ("JSONRPCRequest",) or not error["loc"]
    ][:3]
    detail = f" As a request: {'; '.join(lacking)}." if lacking else ""
    return (
        'Invalid Request: a JSON-RPC message is an object with "jsonrpc": "2.0" and either a "method" (a '
        'request, with an "id", or a notification) or a "result" or "error" with the "id" it answers.' + detail
    )
