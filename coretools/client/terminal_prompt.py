"""Asking the user in the terminal when a server elicits input (``chat`` and interactive commands).

A form request shows the server's message and its fields, asks whether to answer
(accept, decline, cancel), then asks each field in turn: the type, whether it is required,
the default (an empty line takes it), the choices of an enum. Each value is checked against
its field's schema as it is typed and asked again when it does not fit. A URL request shows
the URL and opens it in the browser only when the user chooses to. End of input cancels.

Prompts from several servers (or concurrent calls) are asked one after another, never mixed.
"""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

import anyio
import anyio.to_thread
import mcp.types as mcp_types
from mcp.client.session import ClientRequestContext

from .elicitation import asking_server, field_problems, required_fields

ReadLine = Callable[[], Awaitable[str | None]]

ATTEMPTS = 5
"""Wrong values for one field before the whole request is cancelled."""

_TRUE = {"y", "yes", "true", "1", "on"}
_FALSE = {"n", "no", "false", "0", "off"}


class _Cancelled(Exception):
    """The user stopped answering (end of input, or too many wrong values)."""


class TerminalElicitation:
    """An ``elicitation_callback`` that asks on ``out`` and reads answers with ``read_line``."""

    def __init__(
        self,
        read_line: ReadLine,
        *,
        out: TextIO | None = None,
        open_url: Callable[[str], object] = webbrowser.open,
    ) -> None:
        self.read_line = read_line
        self.out = out
        self.open_url = open_url
        self._lock = anyio.Lock()

    async def __call__(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        async with self._lock:
            try:
                if isinstance(params, mcp_types.ElicitRequestURLParams):
                    return await self._url(params)
                return await self._form(params)
            except _Cancelled:
                self._say("  (cancelled)")
                return mcp_types.ElicitResult(action="cancel")

    # ------------------------------------------------------------------------------------ url

    async def _url(self, params: mcp_types.ElicitRequestURLParams) -> mcp_types.ElicitResult:
        self._say(f"\n[{asking_server() or 'MCP server'} asks you to open a web page] {params.message}")
        self._say(f"  URL: {params.url}")
        choice = await self._choose("  [o]pen it in the browser, [a]ccept (I will open it), [d]ecline, [c]ancel: ", "oadc")
        if choice == "o":
            await anyio.to_thread.run_sync(self.open_url, params.url, abandon_on_cancel=True)
            return mcp_types.ElicitResult(action="accept")
        return _action(choice)

    # ----------------------------------------------------------------------------------- form

    async def _form(self, params: mcp_types.ElicitRequestFormParams) -> mcp_types.ElicitResult:
        schema = params.requested_schema
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = set(required_fields(schema))
        self._say(f"\n[{asking_server() or 'MCP server'} asks] {params.message}")
        for name, prop in props.items():
            self._say(f"  - {_label(name, prop, name in required)}")
        choice = await self._choose("  answer? [a]ccept, [d]ecline, [c]ancel: ", "adc")
        if choice != "a":
            return _action(choice)
        content: dict[str, Any] = {}
        for name, prop in props.items():
            value = await self._field(name, prop if isinstance(prop, dict) else {}, name in required)
            if value is not _SKIP:
                content[name] = value
        return mcp_types.ElicitResult(action="accept", content=content)

    async def _field(self, name: str, prop: dict[str, Any], required: bool) -> Any:
        choices = _choices(prop)
        if choices:
            self._say("    " + ", ".join(f"{i}) {title}" for i, (_, title) in enumerate(choices, 1)))
        for _ in range(ATTEMPTS):
            line = (await self._read(f"  {_label(name, prop, required)}: ")).strip()
            if not line:
                if "default" in prop or not required:
                    return _SKIP  # the bridge fills in the default
                self._say("    a value is required")
                continue
            try:
                value = _parse(line, prop, choices)
            except ValueError as exc:
                self._say(f"    {exc}")
                continue
            problems = field_problems(prop, value)
            if not problems:
                return value
            self._say("    " + "; ".join(p.removeprefix("value: ") for p in problems))
        raise _Cancelled

    # ------------------------------------------------------------------------------------ io

    async def _choose(self, prompt: str, letters: str) -> str:
        for _ in range(ATTEMPTS):
            answer = (await self._read(prompt)).strip().lower()[:1]
            if answer and answer in letters:
                return answer
        raise _Cancelled

    async def _read(self, prompt: str) -> str:
        out = self.out or sys.stderr
        print(prompt, end="", file=out, flush=True)
        line = await self.read_line()
        if line is None:
            raise _Cancelled
        return line

    def _say(self, text: str) -> None:
        print(text, file=self.out or sys.stderr, flush=True)


_SKIP = object()


def _action(letter: str) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action={"a": "accept", "d": "decline"}.get(letter, "cancel"))  # type: ignore[arg-type]


def _label(name: str, prop: dict[str, Any], required: bool) -> str:
    kind = prop.get("type", "string")
    if kind == "array":
        kind = "several, comma-separated"
    parts = [str(kind), "required" if required else "optional"]
    if "default" in prop:
        parts.append(f"default {prop['default']!r}")
    title = prop.get("title") or name
    description = f" — {prop['description']}" if prop.get("description") else ""
    return f"{title}{description} ({', '.join(parts)})"


def _choices(prop: dict[str, Any]) -> list[tuple[Any, str]]:
    """``(value, title)`` of an enum field, of a titled one (``oneOf`` consts), or of an array's items."""
    source = prop.get("items") if prop.get("type") == "array" and isinstance(prop.get("items"), dict) else prop
    if isinstance(source.get("enum"), list):
        names = source.get("enumNames") if isinstance(source.get("enumNames"), list) else source["enum"]
        return [(value, str(title)) for value, title in zip(source["enum"], names)]
    for key in ("oneOf", "anyOf"):
        options = source.get(key)
        if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
            return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return []


def _parse(line: str, prop: dict[str, Any], choices: list[tuple[Any, str]]) -> Any:
    kind = prop.get("type")
    if kind == "array":
        return [_pick(item.strip(), choices) for item in line.split(",") if item.strip()]
    if choices:
        return _pick(line, choices)
    if kind == "boolean":
        if line.lower() in _TRUE:
            return True
        if line.lower() in _FALSE:
            return False
        raise ValueError("answer yes or no")
    if kind == "integer":
        try:
            return int(line)
        except ValueError:
            raise ValueError("a whole number, please") from None
    if kind == "number":
        try:
            return float(line) if any(c in line for c in ".eE") else int(line)
        except ValueError:
            raise ValueError("a number, please") from None
    return line


def _pick(text: str, choices: list[tuple[Any, str]]) -> Any:
    """A choice by its number, its value or its title."""
    if not choices:
        return text
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, title in choices:
        if text == str(value) or text.lower() == title.lower():
            return value
    raise ValueError(f"choose 1-{len(choices)} or one of the values")
