"""google_web_search against a local server speaking the Gemini `generateContent` wire format."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from coretools.tools.google_web_search import grounded_text
from tests.conftest import REPO, call_tool, make_config, text_of

pytestmark = pytest.mark.anyio

# Multi-byte text: 'é' is 2 bytes, '☕' and '東京' 3 bytes each, '🎉' 4 bytes. Offsets below are in bytes.
ANSWER = "Café ☕ opens at 8. 東京 has many cafés. Best one: Blue 🎉 Bottle."
S1 = "Café ☕ opens at 8."
S2 = "東京 has many cafés."
S3 = "Best one: Blue 🎉 Bottle."


def b(s: str) -> int:
    return len(s.encode("utf-8"))


def grounded_payload() -> dict:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": ANSWER[:30]}, {"text": ANSWER[30:]}]},
                "finishReason": "STOP",
                "groundingMetadata": {
                    "webSearchQueries": ["best cafe tokyo"],
                    "groundingChunks": [
                        {"web": {"uri": "https://a.example/cafe", "title": "a.example"}},
                        {"web": {"uri": "https://b.example/tokyo", "title": "Tokyo Guide"}},
                        {"web": {"uri": "https://c.example/"}},
                    ],
                    "groundingSupports": [
                        {"segment": {"endIndex": b(S1), "text": S1}, "groundingChunkIndices": [0]},
                        {
                            "segment": {"startIndex": b(S1) + 1, "endIndex": b(S1) + 1 + b(S2), "text": S2},
                            "groundingChunkIndices": [1, 2],
                            "confidenceScores": [0.9, 0.8],
                        },
                        {
                            "segment": {"startIndex": b(ANSWER) - b(S3), "endIndex": b(ANSWER), "text": S3},
                            "groundingChunkIndices": [0],
                        },
                    ],
                },
            }
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 20},
        "modelVersion": "gemini-2.5-flash",
    }


class GeminiHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        srv = self.server
        length = int(self.headers.get("Content-Length", 0))
        srv.requests.append((self.path, dict(self.headers), json.loads(self.rfile.read(length))))
        status, body = srv.reply
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def gemini():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), GeminiHandler)
    httpd.daemon_threads = True
    httpd.requests = []
    httpd.reply = (200, grounded_payload())
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def env(monkeypatch, gemini):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-123")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{gemini.server_address[1]}/")
    gemini.reply = (200, grounded_payload())
    gemini.requests.clear()


async def search(root, query: str, *flags: str):
    return await call_tool(root, "google_web_search", {"query": query}, *flags)


async def test_answer_with_citations_at_byte_offsets(root, gemini):
    res = await search(root, "best cafe tokyo")
    text = text_of(res)
    assert not res.is_error, text
    expected = (
        'Web search results for "best cafe tokyo":\n\n'
        "Café ☕ opens at 8.[1] 東京 has many cafés.[2][3] Best one: Blue 🎉 Bottle.[1]\n\n"
        "Sources:\n"
        "[1] a.example (https://a.example/cafe)\n"
        "[2] Tokyo Guide (https://b.example/tokyo)\n"
        "[3] Untitled (https://c.example/)"
    )
    assert text == expected
    assert res.structured["sources"][1] == {"title": "Tokyo Guide", "uri": "https://b.example/tokyo"}
    assert res.structured["queries"] == ["best cafe tokyo"]


async def test_request_wire_format(root, gemini):
    await search(root, "what is MCP?")
    path, headers, body = gemini.requests[-1]
    assert path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert headers["x-goog-api-key"] == "test-key-123"
    assert body["contents"] == [{"role": "user", "parts": [{"text": "what is MCP?"}]}]
    assert body["tools"] == [{"googleSearch": {}}]


async def test_model_option_and_google_api_key(root, gemini, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", "other-key")
    res = await search(root, "q", "--web-search-model", "gemini-2.5-pro")
    assert not res.is_error, text_of(res)
    path, headers, _ = gemini.requests[-1]
    assert path == "/v1beta/models/gemini-2.5-pro:generateContent"
    assert headers["x-goog-api-key"] == "other-key"


def test_marker_never_splits_a_character():
    text = "ab☕cd"
    out, _ = grounded_text(text, {"groundingChunks": [{"web": {}}], "groundingSupports": [
        {"segment": {"endIndex": 3}, "groundingChunkIndices": [0]},  # inside the 3-byte ☕
        {"segment": {"endIndex": 999}, "groundingChunkIndices": [0]},  # beyond the end: clamped
        {"segment": {"endIndex": 1}, "groundingChunkIndices": []},  # no source: no marker
    ]})
    assert out == "ab☕[1]cd[1]"


def test_code_point_offsets_would_be_wrong():
    # The same byte offset read as a code-point index would put the marker later; prove we use bytes.
    text = "ééé. tail"
    out, _ = grounded_text(text, {"groundingChunks": [{"web": {"title": "t", "uri": "u"}}],
                                   "groundingSupports": [{"segment": {"endIndex": b("ééé.")}, "groundingChunkIndices": [0]}]})
    assert out == "ééé.[1] tail"


async def test_no_text_means_no_results(root, gemini):
    gemini.reply = (200, {"candidates": [{"content": {"parts": [{"text": "  "}]}}]})
    res = await search(root, "nothing")
    assert not res.is_error
    assert text_of(res) == 'No search results or information found for query: "nothing"'
    gemini.reply = (200, {"promptFeedback": {"blockReason": "SAFETY"}})
    res = await search(root, "blocked")
    assert "(the request was blocked: SAFETY)" in text_of(res)


async def test_answer_without_grounding_has_no_sources(root, gemini):
    gemini.reply = (200, {"candidates": [{"content": {"parts": [{"text": "Plain answer."}]}}]})
    res = await search(root, "q")
    assert text_of(res) == 'Web search results for "q":\n\nPlain answer.'


@pytest.mark.parametrize(
    "status, body, expected",
    [
        (400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                         "status": "INVALID_ARGUMENT"}},
         "the Gemini API refused the request (INVALID_ARGUMENT: API key not valid. Please pass a valid API key.); "
         "check the query and the model name."),
        (404, {"error": {"code": 404, "message": "models/nope is not found", "status": "NOT_FOUND"}},
         "NOT_FOUND: models/nope is not found); check --web-search-model"),
        (429, {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}},
         "the quota is exhausted; wait and retry."),
        (503, b"<html>Service Unavailable</html>", "(HTTP 503: '<html>Service Unavailable</html>'); the service failed"),
        (500, b"", "(HTTP 500: empty body); the service failed; retry later."),
        (200, b"{not json", "answered HTTP 200 with a body that is not a JSON object: '{not json'"),
        (200, b"[1, 2]", "with a body that is not a JSON object"),
    ],
)
async def test_api_errors_are_clear(root, gemini, status, body, expected):
    gemini.reply = (status, body)
    res = await search(root, "q")
    text = text_of(res)
    assert res.is_error
    assert res.structured["error"]["kind"] == "web_search_failed"
    assert text.startswith('Error during web search for query "q": ')
    assert expected in text


async def test_unreachable_api(root, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{port}")
    res = await search(root, "q")
    assert res.is_error
    assert f"could not reach the Gemini API at http://127.0.0.1:{port}" in text_of(res)


async def test_empty_query(root):
    res = await search(root, "   ")
    assert res.is_error and "The 'query' parameter cannot be empty." in text_of(res)


def test_without_key_the_tool_is_unpublished_with_a_reason(root, monkeypatch):
    from coretools.server.toolset import ToolSet

    monkeypatch.delenv("GEMINI_API_KEY")
    toolset = ToolSet(make_config([root]))
    assert "google_web_search" not in toolset.names
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in toolset.unavailable["google_web_search"]
    assert "GEMINI_API_KEY" in toolset.unknown_tool_message("google_web_search")


def test_tools_command_says_why(root):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(root.parent)}
    out = subprocess.run(
        [sys.executable, "-m", "coretools", "tools", "--root", str(root)],
        capture_output=True, text=True, env=env, cwd=REPO, check=True,
    ).stdout
    listing = json.loads(out)
    assert "google_web_search" in listing["unavailable"]
    assert "GEMINI_API_KEY" in listing["unavailable"]["google_web_search"]
