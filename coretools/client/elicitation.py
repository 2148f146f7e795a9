"""Answering servers that ask the user for input (MCP elicitation), in both protocol eras.

A 2025-era server sends ``elicitation/create`` while a call is running; a 2026-07-28 server
answers the call with ``input_required`` and the SDK's :class:`mcp.Client` retries the call
with the answers. Both reach the same callback, the SDK's ``elicitation_callback``::

    async def callback(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData

The bridge wraps whatever callback it is given (:func:`checked`): the server's alias is
readable through :func:`asking_server` while the callback runs; a form answer that is
accepted gets the schema's defaults for the fields it leaves out and is validated against the
requested schema (a bad one goes back as an ``invalid params`` error instead of reaching the
server as if it were valid); a URL-mode answer never carries content; a callback that raises
becomes an error for that one request. The URL of a URL-mode request is shown by the callbacks
here and is never opened by the bridge on its own.

Ready-made callbacks: :func:`decline` (no one can answer: non-interactive runs) and
:func:`accept_defaults` (scripted runs: accept when every required field has a default).
The interactive terminal one is :class:`coretools.client.terminal_prompt.TerminalElicitation`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import jsonschema
import mcp.types as mcp_types
from mcp.client.session import ClientRequestContext

from .notices import client_logger

logger = client_logger(__name__)

ElicitationCallback = Callable[
    [ClientRequestContext, mcp_types.ElicitRequestParams], Awaitable[mcp_types.ElicitResult | mcp_types.ErrorData]
]

MESSAGE_LIMIT = 300
"""How much of a server's message is quoted in a log line."""

_asking: ContextVar[str | None] = ContextVar("coretools_elicitation_server", default=None)


def asking_server() -> str | None:
    """The alias of the server whose elicitation is being answered (inside a callback)."""
    return _asking.get()


@contextmanager
def _asked_by(alias: str) -> Iterator[None]:
    token = _asking.set(alias)
    try:
        yield
    finally:
        _asking.reset(token)


def checked(callback: ElicitationCallback, alias: str) -> ElicitationCallback:
    """``callback`` for one server: defaults applied, answers validated, failures contained."""

    async def answer(
        context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        with _asked_by(alias):
            try:
                result = await callback(context, params)
            except Exception as exc:
                logger.warning("%s: the elicitation callback failed: %s: %s", alias, type(exc).__name__, exc)
                return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message="the client could not ask the user")
        if isinstance(result, mcp_types.ErrorData) or result.action != "accept":
            return result if isinstance(result, mcp_types.ErrorData) else mcp_types.ElicitResult(action=result.action)
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            return mcp_types.ElicitResult(action="accept")
        return _checked_form(params.requested_schema, result.content or {})

    return answer


def _checked_form(schema: dict[str, Any], content: dict[str, Any]) -> mcp_types.ElicitResult | mcp_types.ErrorData:
    filled = with_defaults(schema, content)
    problems = form_problems(schema, filled)
    if problems:
        return mcp_types.ErrorData(
            code=mcp_types.INVALID_PARAMS, message="the answer does not match the requested form: " + "; ".join(problems)
        )
    return mcp_types.ElicitResult(action="accept", content=filled)


def with_defaults(schema: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """``content`` plus the ``default`` of every property it leaves out."""
    filled = dict(content)
    for name, prop in _properties(schema).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled


def form_problems(schema: dict[str, Any], content: dict[str, Any]) -> list[str]:
    """What is wrong with ``content`` for the requested schema (empty when it is valid)."""
    try:
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(content), key=lambda e: list(e.absolute_path))
    except jsonschema.SchemaError as exc:
        return [f"the server's schema is not valid JSON Schema ({exc.message})"]
    return [_describe_error(e) for e in errors[:10]]


def field_problems(prop: dict[str, Any], value: Any) -> list[str]:
    """What is wrong with one field's value (the terminal prompt checks each field as it is typed)."""
    return form_problems({"type": "object", "properties": {"value": prop}}, {"value": value})


def _describe_error(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def required_fields(schema: dict[str, Any]) -> list[str]:
    required = schema.get("required")
    return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []


def quote(message: str) -> str:
    """A server's message, cut for a log line."""
    message = " ".join(message.split())
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT] + "…"


async def decline(context: ClientRequestContext, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    """For runs where nobody can answer: decline at once, and say so."""
    alias = asking_server() or "an MCP server"
    what = f"to open {params.url}" if isinstance(params, mcp_types.ElicitRequestURLParams) else "for input"
    logger.warning(
        "%s asked %s (%r); declined, because nobody can answer here (stdin is not a terminal)",
        alias, what, quote(params.message),
    )  # fmt: skip
    return mcp_types.ElicitResult(action="decline")


async def accept_defaults(
    context: ClientRequestContext, params: mcp_types.ElicitRequestParams
) -> mcp_types.ElicitResult:
    """For scripted runs: accept a form whose required fields all have defaults; decline anything else."""
    alias = asking_server() or "an MCP server"
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        logger.warning("%s asked to open %s (%r); declined (URLs are never opened unasked)", alias, params.url, quote(params.message))
        return mcp_types.ElicitResult(action="decline")
    schema = params.requested_schema
    filled = with_defaults(schema, {})
    missing = [name for name in required_fields(schema) if name not in filled]
    if missing:
        logger.warning("%s asked for %s, which have no defaults; declined", alias, ", ".join(missing))
        return mcp_types.ElicitResult(action="decline")
    return mcp_types.ElicitResult(action="accept", content=filled)
