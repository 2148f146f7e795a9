"""google_web_search: ask Gemini with its Google Search grounding tool, return the answer with citations.

REST `generateContent` on the Gemini Developer API (key from GEMINI_API_KEY or GOOGLE_API_KEY, base URL
from GOOGLE_GEMINI_BASE_URL for proxies). Citation markers go at the end of each grounded segment; Gemini
gives segment offsets in UTF-8 *bytes*, so they are applied to the encoded text, not to Python's code points.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from coretools.errors import ErrorKind, ToolError
from coretools.tools.base import Tool, ToolContext, ToolResult, option

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_MODEL = "gemini-2.5-flash"
API_VERSION = "v1beta"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
DEFAULT_TIMEOUT = 60.0


def api_key() -> str | None:
    for name in KEY_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def grounded_text(text: str, metadata: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """Insert `[n]` markers at the end of each grounding segment and return (text, sources). Offsets are
    UTF-8 byte offsets into `text`; a marker never lands inside a multi-byte character."""
    chunks = metadata.get("groundingChunks") or []
    sources = []
    for chunk in chunks:
        web = chunk.get("web") or chunk.get("retrievedContext") or {}
        sources.append({"title": web.get("title") or "Untitled", "uri": web.get("uri") or "No URI"})
    data = text.encode("utf-8")
    inserts: list[tuple[int, int, str]] = []
    for order, support in enumerate(metadata.get("groundingSupports") or []):
        segment = support.get("segment") or {}
        indices = [i for i in support.get("groundingChunkIndices") or [] if isinstance(i, int)]
        end = segment.get("endIndex")
        if not indices or not isinstance(end, int):
            continue
        end = max(0, min(end, len(data)))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # not at a character boundary: move past it
            end += 1
        inserts.append((end, order, "".join(f"[{i + 1}]" for i in indices)))
    inserts.sort()
    out: list[bytes] = []
    at = 0
    for end, _order, marker in inserts:
        out.append(data[at:end])
        out.append(marker.encode("ascii"))
        at = end
    out.append(data[at:])
    return b"".join(out).decode("utf-8"), sources


def response_text(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    candidates = payload.get("candidates") or []
    if not candidates:
        return "", {}
    first = candidates[0] or {}
    parts = (first.get("content") or {}).get("parts") or []
    text = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and not p.get("thought"))
    return text, first.get("groundingMetadata") or {}


@dataclass(frozen=True)
class WebSearchOptions:
    web_search_model: str = option(
        DEFAULT_MODEL,
        "--web-search-model",
        f"Gemini model google_web_search asks (default: {DEFAULT_MODEL})",
        metavar="MODEL",
    )
    web_search_timeout: float = option(
        DEFAULT_TIMEOUT,
        "--web-search-timeout",
        f"time allowed for one search (default: {DEFAULT_TIMEOUT:g})",
        metavar="SECONDS",
    )


class GoogleWebSearch(Tool):
    name = "google_web_search"
    title = "Google web search"
    hint = "search the web for information that is not in the workspace."
    Options = WebSearchOptions
    options: WebSearchOptions
    description = (
        "Performs a web search using Google Search (via the Gemini API) and returns the results: a summary "
        "answer with citation markers like [1] and a numbered list of sources. Useful for finding "
        "information on the internet based on a query."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The search query to find information on the web."}
        },
        "required": ["query"],
    }
    read_only = True
    idempotent = False
    open_world = True

    def unavailable_reason(self) -> str | None:
        if api_key() is None:
            return (
                "no Gemini API key: set GEMINI_API_KEY or GOOGLE_API_KEY in the server's environment to publish "
                "google_web_search"
            )
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args["query"]
        if not query.strip():
            raise ToolError("The 'query' parameter cannot be empty.", ErrorKind.INVALID_TOOL_PARAMS)
        key = api_key()
        if key is None:
            raise ToolError(self.unavailable_reason() or "no API key", ErrorKind.WEB_SEARCH_FAILED)
        try:
            payload = await self._ask(query, key)
        except _SearchFailure as exc:
            message = f'Error during web search for query "{query}": {exc}'
            raise ToolError(message, ErrorKind.WEB_SEARCH_FAILED) from None
        text, metadata = response_text(payload)
        if not text.strip():
            blocked = (payload.get("promptFeedback") or {}).get("blockReason")
            why = f" (the request was blocked: {blocked})" if blocked else ""
            return ToolResult.text(f'No search results or information found for query: "{query}"{why}')
        text, sources = grounded_text(text, metadata)
        if sources:
            text += "\n\nSources:\n" + "\n".join(f"[{n}] {s['title']} ({s['uri']})" for n, s in enumerate(sources, 1))
        structured = {"sources": sources, "queries": metadata.get("webSearchQueries") or []}
        return ToolResult.text(f'Web search results for "{query}":\n\n{text}', structured)

    async def _ask(self, query: str, key: str) -> dict[str, Any]:
        import httpx2

        base = os.environ.get("GOOGLE_GEMINI_BASE_URL", "").strip() or DEFAULT_BASE_URL
        model = self.options.web_search_model
        url = f"{base.rstrip('/')}/{API_VERSION}/models/{model}:generateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": query}]}], "tools": [{"googleSearch": {}}]}
        timeout = self.options.web_search_timeout
        try:
            async with httpx2.AsyncClient(timeout=timeout) as client:
                response = await client.post(url, json=body, headers={"x-goog-api-key": key})
        except httpx2.TimeoutException:
            raise _SearchFailure(f"the Gemini API did not answer within {timeout:g} seconds.") from None
        except httpx2.HTTPError as exc:
            raise _SearchFailure(f"could not reach the Gemini API at {base} ({exc or type(exc).__name__}).") from None
        try:
            payload = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            payload = None
        if response.status_code >= 400:
            raise _SearchFailure(_api_error(response.status_code, payload, response.text, model))
        if not isinstance(payload, dict):
            raise _SearchFailure(
                f"the Gemini API answered HTTP {response.status_code} with a body that is not a JSON object: "
                f"{_excerpt(response.text)}"
            )
        return payload


class _SearchFailure(Exception):
    pass


def _excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _api_error(status: int, payload: Any, raw: str, model: str) -> str:
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        detail = f"{error.get('status') or status}: {error.get('message') or 'no message'}"
    else:
        detail = f"HTTP {status}: {_excerpt(raw) if raw.strip() else 'empty body'}"
    hint = {
        400: "check the query and the model name",
        401: "check the API key",
        403: "check the API key and that it may use this model",
        404: f"check --web-search-model (now {model}) and GOOGLE_GEMINI_BASE_URL",
        429: "the quota is exhausted; wait and retry",
    }.get(status, "the service failed; retry later" if status >= 500 else "")
    return f"the Gemini API refused the request ({detail})" + (f"; {hint}." if hint else ".")


TOOL = GoogleWebSearch
