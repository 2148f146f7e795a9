"""A loopback HTTP server speaking OpenAI's chat-completions wire format, driven by a script.

``POST {base}/v1/chat/completions`` answers with the next *step* of the script: a function that
receives the request and returns the assistant's reply, either a list of text chunks (each
becomes one SSE ``chat.completion.chunk`` when the request streams; joined for a unary answer)
or a dict ``{"content": ..., "tool_calls": [...]}`` for native calls.

Like a local server without function calling, it answers HTTP 400 when a request carries
``tools`` and ``supports_tools`` is false. It also checks, as strict chat templates do, that
there is at most one system message and it comes first, that roles are known, that every
assistant message in the history is exactly one it sent, and that native ``tool_calls`` are
answered by ``role: tool`` messages with matching ids. Message content is checked as Chat
Completions checks it: a string or a list of typed parts; ``image_url`` parts only in ``user``
messages, their URL ``http(s)`` or a ``data:`` URL of a PNG, JPEG, GIF or WebP image in valid
base64; ``tool`` and ``system`` messages take text parts only. With ``supports_images`` false
it answers an image as a text-only model's server does (HTTP 400). Violations are collected in
``errors``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Union

from fake_gemini import ScriptError, check
from loopback import LoopbackServer

Reply = Union[list[str], dict[str, Any]]
Step = Callable[["ChatRequest"], Reply]

DATA_URL = re.compile(r"^data:(image/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/=]+)$")
PART_TYPES = {
    "system": {"text"},
    "user": {"text", "image_url", "input_audio", "file"},
    "assistant": {"text", "refusal"},
    "tool": {"text"},
}


def text_of(content: Any) -> str:
    """The text of a message's content, a string or a list of parts."""
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
    return content or ""


def images_of(message: dict[str, Any]) -> list[str]:
    """The ``image_url`` URLs of a message."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [part["image_url"]["url"] for part in content if part.get("type") == "image_url"]


@dataclass
class ChatRequest:
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]

    @property
    def system(self) -> str:
        first = self.messages[0]
        return text_of(first["content"]) if first["role"] == "system" else ""

    @property
    def last(self) -> dict[str, Any]:
        return self.messages[-1]


@dataclass
class FakeOpenAI(LoopbackServer):
    supports_tools: bool = False
    supports_images: bool = True
    steps: deque[Step] = field(default_factory=deque)
    requests: list[ChatRequest] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    issued: list[dict[str, Any]] = field(default_factory=list)
    _ids: int = 0

    def script(self, *steps: Step, supports_tools: bool | None = None, supports_images: bool | None = None) -> None:
        self.steps = deque(steps)
        self.requests, self.errors, self.issued = [], [], []
        if supports_tools is not None:
            self.supports_tools = supports_tools
        if supports_images is not None:
            self.supports_images = supports_images

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def _handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        try:
            check(handler.path == "/v1/chat/completions", f"unknown endpoint {handler.path}")
            request = ChatRequest(json.loads(raw), dict(handler.headers))
            self.requests.append(request)
            self._validate(request)
            check(self.steps, "the script has no step left for this request")
            reply = self.steps.popleft()(request)
        except ScriptError as exc:
            self.errors.append(str(exc))
            self._send(handler, 400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        except Exception as exc:  # a bug in a step: make it visible
            self.errors.append(f"{type(exc).__name__}: {exc}")
            self._send(handler, 500, {"error": {"message": repr(exc), "type": "server_error"}})
            return
        message = self._message(reply)
        self.issued.append(copy.deepcopy(message))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if not request.stream:
            self._send(handler, 200, {
                "id": "chatcmpl-1", "object": "chat.completion", "model": request.body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })  # fmt: skip
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("connection", "close")
        handler.end_headers()
        for delta in self._deltas(reply):
            self._event(handler, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        self._event(handler, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True

    def _message(self, reply: Reply) -> dict[str, Any]:
        if isinstance(reply, list):
            return {"role": "assistant", "content": "".join(reply)}
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
        return message

    @staticmethod
    def _deltas(reply: Reply) -> list[dict[str, Any]]:
        if isinstance(reply, list):
            return [{"role": "assistant", "content": ""}] + [{"content": piece} for piece in reply]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": reply.get("content") or ""}]
        for index, call in enumerate(reply.get("tool_calls") or ()):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            head = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": arguments[:half]}}
            deltas += [{"tool_calls": [head]}, {"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}]
        return deltas

    @staticmethod
    def _event(handler: BaseHTTPRequestHandler, payload: Any) -> None:
        handler.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        handler.wfile.flush()

    # ------------------------------------------------------------------ the server's own checks

    def _validate(self, request: ChatRequest) -> None:
        body = request.body
        check(isinstance(body.get("model"), str) and body["model"], "model is required")
        if "tools" in body:
            check(self.supports_tools, "this server does not support tools (\"tools\" is not accepted)")
        messages = body.get("messages")
        check(isinstance(messages, list) and messages, "messages must be a non-empty list")
        roles = [m.get("role") for m in messages]
        check(set(roles) <= {"system", "user", "assistant", "tool"}, f"unknown role in {roles}")
        check("system" not in roles[1:], "the system message must be the first and only one")
        check(roles[-1] in ("user", "tool"), f"the last message must be the user's or a tool's, got {roles[-1]}")
        sent = [m for m in messages if m["role"] == "assistant"]
        check(len(sent) == len(self.issued), f"history has {len(sent)} assistant messages, {len(self.issued)} were issued")
        for index, (mine, theirs) in enumerate(zip(self.issued, sent)):
            check(mine == theirs, f"assistant message {index} came back altered:\n sent   {theirs}\n issued {mine}")
        for position, message in enumerate(messages):
            self._validate_content(position, message)
            if message["role"] != "assistant" or not message.get("tool_calls"):
                continue
            ids = [c["id"] for c in message["tool_calls"]]
            answers = [m.get("tool_call_id") for m in messages[position + 1 : position + 1 + len(ids)] if m["role"] == "tool"]
            check(answers == ids, f"tool_calls {ids} must be answered in order, got {answers}")

    def _validate_content(self, position: int, message: dict[str, Any]) -> None:
        role, content = message["role"], message.get("content")
        where = f"messages[{position}]"
        if content is None:
            check(role == "assistant", f"Invalid '{where}.content': a {role} message needs content")
            return
        if isinstance(content, str):
            return
        check(isinstance(content, list) and content, f"Invalid '{where}.content': expected a string or a non-empty array of parts")
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url" and role != "user":
                check(False, f"Invalid '{where}'. Image URLs are only allowed for messages with role 'user', but this message with role '{role}' contains an image URL.")
            check(kind in PART_TYPES[role], f"Invalid '{where}.content[{index}].type': {kind!r} is not allowed in a {role} message")
            if kind == "text":
                check(isinstance(part.get("text"), str), f"Invalid '{where}.content[{index}].text': expected a string")
            elif kind == "image_url":
                self._validate_image(f"{where}.content[{index}]", part)

    def _validate_image(self, where: str, part: dict[str, Any]) -> None:
        check(self.supports_images, "image input is not supported by this model")
        image = part.get("image_url")
        check(isinstance(image, dict) and isinstance(image.get("url"), str), f"Invalid '{where}.image_url': expected an object with a url")
        check(set(image) <= {"url", "detail"}, f"Invalid '{where}.image_url': unknown keys {sorted(set(image) - {'url', 'detail'})}")
        url = image["url"]
        if url.startswith(("http://", "https://")):
            return
        match = DATA_URL.match(url)
        check(match, f"Invalid '{where}.image_url.url': expected a URL or a base64 data URL of a PNG, JPEG, GIF or WebP image")
        try:
            base64.b64decode(match.group(2), validate=True)
        except binascii.Error:
            check(False, f"Invalid '{where}.image_url.url': the base64 data is invalid")
