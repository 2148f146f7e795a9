"""A loopback HTTP server that speaks the Gemini API's wire format, driven by a script.

It is the only fake in the client tests: the model. It serves

* ``POST /{version}/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``
  (the Developer API, as the REST loop and the real ``google-genai`` client call it), and
* ``POST /v1internal:generateContent`` / ``:streamGenerateContent?alt=sse`` (Code Assist:
  ``{model, project, request}`` in, ``{"response": ...}`` out).

Each request is answered by the next *step* of the script: a function that receives the
normalised request and returns the model's turn as a list of chunks (lists of parts). Unary
calls get all chunks merged into one candidate; streaming calls get one SSE event per chunk.

Like the real API it checks every request and answers HTTP 400 on a violation:

* the model turns in ``contents`` must be exactly the turns it issued (every part, every
  ``thoughtSignature``; the SDK path compares signature bytes, since google-genai re-encodes
  base64 URL-safe);
* every model turn with calls must be followed by a user turn with one ``functionResponse``
  per call, in order, with matching names (and, when a response carries an id, the call's id).

Violations are also collected in ``errors`` so a test can assert on them.
"""

from __future__ import annotations

import base64
import copy
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from loopback import LoopbackServer

Chunk = list[dict[str, Any]]
Step = Callable[["Request"], list[Chunk]]

# Proto field names that google-genai sends in snake_case inside nested objects.
_CAMEL = {
    "function_call": "functionCall",
    "function_response": "functionResponse",
    "thought_signature": "thoughtSignature",
    "inline_data": "inlineData",
    "file_data": "fileData",
    "mime_type": "mimeType",
    "display_name": "displayName",
    "file_uri": "fileUri",
    "function_declarations": "functionDeclarations",
    "parameters_json_schema": "parametersJsonSchema",
    "tool_config": "toolConfig",
    "function_calling_config": "functionCallingConfig",
    "allowed_function_names": "allowedFunctionNames",
    "system_instruction": "systemInstruction",
    "generation_config": "generationConfig",
    "will_continue": "willContinue",
}
# Values under these keys are user data (arguments, results, schemas): never renamed.
_OPAQUE = {"args", "response", "parametersJsonSchema", "parameters", "parameters_json_schema"}


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = _CAMEL.get(key, key)
            out[key] = item if key in _OPAQUE else normalise(item)
        return out
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def signature(n: int) -> str:
    """A distinct base64 signature whose standard encoding contains '+' and '/'."""
    return base64.b64encode(f"sig-{n}:".encode() + bytes([0xFB, 0xFF, 0xBF, n % 256])).decode()


def _decode(sig: Any) -> bytes | None:
    if not isinstance(sig, str):
        return None
    padded = sig + "=" * (-len(sig) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"))


@dataclass
class Request:
    kind: str  # "rest" or "code_assist"
    stream: bool
    model: str
    path: str
    headers: dict[str, str]
    envelope: dict[str, Any]
    body: dict[str, Any]

    @property
    def contents(self) -> list[dict[str, Any]]:
        return self.body.get("contents", [])

    @property
    def declarations(self) -> list[dict[str, Any]]:
        return [d for tool in self.body.get("tools", []) for d in tool.get("functionDeclarations", [])]

    @property
    def declared_names(self) -> list[str]:
        return [d["name"] for d in self.declarations]

    def last_responses(self) -> list[dict[str, Any]]:
        """The functionResponse objects of the last user turn."""
        last = self.contents[-1]
        return [p["functionResponse"] for p in last["parts"] if "functionResponse" in p]

    def last_parts(self) -> list[dict[str, Any]]:
        return self.contents[-1]["parts"]


class ScriptError(AssertionError):
    pass


def check(condition: Any, message: str) -> None:
    if not condition:
        raise ScriptError(message)


@dataclass
class FakeGemini(LoopbackServer):
    """Start with ``with FakeGemini() as fake:``; ``fake.base_url`` is the server root."""

    bytes_signatures: bool = False
    steps: deque[Step] = field(default_factory=deque)
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    issued: list[list[dict[str, Any]]] = field(default_factory=list)
    _signature_counter: int = 0

    # ------------------------------------------------------------------ script

    def script(self, *steps: Step, bytes_signatures: bool | None = None) -> None:
        """Start a new conversation answered by ``steps``."""
        self.steps = deque(steps)
        self.issued = []
        self.errors = []
        self.requests = []
        if bytes_signatures is not None:
            self.bytes_signatures = bytes_signatures

    def new_signature(self) -> str:
        self._signature_counter += 1
        return signature(self._signature_counter)

    # ------------------------------------------------------------------ serving

    @property
    def base_url(self) -> str:
        return self.root_url

    def _handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        url = urlsplit(handler.path)
        path = url.path
        stream = ":streamGenerateContent" in path
        try:
            if stream and "alt=sse" not in url.query:
                raise ScriptError("streaming requests must ask for alt=sse")
            envelope = normalise(json.loads(raw))
            if path.startswith("/v1internal:"):
                kind = "code_assist"
                check(isinstance(envelope.get("request"), dict), "Code Assist requests carry the body under 'request'")
                check(envelope.get("model"), "Code Assist requests name the model")
                body, model = envelope["request"], envelope["model"]
            elif "/models/" in path:
                kind = "rest"
                body, model = envelope, path.split("/models/", 1)[1].split(":", 1)[0]
            else:
                raise ScriptError(f"unknown endpoint {path}")
            request = Request(kind, stream, model, path, dict(handler.headers), envelope, body)
            self.requests.append(request)
            self._validate(request)
            if not self.steps:
                raise ScriptError("the script has no step left for this request")
            chunks = self.steps.popleft()(request)
        except ScriptError as exc:
            self.errors.append(str(exc))
            self._send(handler, 400, {"error": {"code": 400, "message": str(exc), "status": "INVALID_ARGUMENT"}})
            return
        except Exception as exc:  # a bug in a step: make it visible
            self.errors.append(f"{type(exc).__name__}: {exc}")
            self._send(handler, 500, {"error": {"code": 500, "message": repr(exc), "status": "INTERNAL"}})
            return
        issued = [copy.deepcopy(p) for chunk in chunks for p in chunk]
        if issued:
            self.issued.append(issued)
        wrap = (lambda r: {"response": r, "traceId": "t"}) if kind == "code_assist" else (lambda r: r)
        if not stream:
            self._send(handler, 200, wrap(_response(issued, last=True)))
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("connection", "close")
        handler.end_headers()
        for index, chunk in enumerate(chunks):
            event = wrap(_response(chunk, last=index == len(chunks) - 1))
            handler.wfile.write(f"data: {json.dumps(event)}\r\n\r\n".encode())
            handler.wfile.flush()
        handler.close_connection = True

    # ------------------------------------------------------------------ the API's own checks

    def _validate(self, request: Request) -> None:
        contents = request.contents
        check(contents and contents[0]["role"] == "user", "contents must start with a user turn")
        model_turns = [c for c in contents if c.get("role") == "model"]
        check(len(model_turns) == len(self.issued), f"history has {len(model_turns)} model turns, {len(self.issued)} were issued")
        for index, (sent, issued) in enumerate(zip(model_turns, self.issued)):
            check(self._same_parts(sent["parts"], issued), f"model turn {index} came back altered:\n sent   {sent['parts']}\n issued {issued}")
        for position, content in enumerate(contents):
            if content.get("role") != "model":
                continue
            calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
            if not calls:
                continue
            check(position + 1 < len(contents), "a function-call turn must be answered")
            answer = contents[position + 1]
            responses = [p["functionResponse"] for p in answer["parts"] if "functionResponse" in p]
            check(answer["role"] == "user", "function responses go in a user turn")
            check(
                len(responses) == len(calls),
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
            )
            for call, response in zip(calls, responses):
                check(response.get("name") == call["name"], f"response name {response.get('name')} does not match call {call['name']}")
                if response.get("id") is not None:
                    check(response["id"] == call.get("id"), f"response id {response['id']} does not match call id {call.get('id')}")
                check(isinstance(response.get("response"), dict), "functionResponse.response must be an object")

    def _same_parts(self, sent: list[dict[str, Any]], issued: list[dict[str, Any]]) -> bool:
        if not self.bytes_signatures:
            return sent == issued
        if len(sent) != len(issued):
            return False
        for a, b in zip(sent, issued):
            a, b = dict(a), dict(b)
            if _decode(a.pop("thoughtSignature", None)) != _decode(b.pop("thoughtSignature", None)):
                return False
            if a != b:
                return False
        return True


def _response(parts: list[dict[str, Any]], *, last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if last:
        candidate["finishReason"] = "STOP"
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": "fake-gemini"}
    if last:
        response["usageMetadata"] = {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}
    return response
