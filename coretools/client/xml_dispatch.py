"""The ``xml`` style inside the loops: one reply's calls collected, run and reported.

:class:`TextCalls` splits a streamed reply into the prose to show and the calls.
:func:`run_parsed_calls` sends the calls through :meth:`Bridge.run_calls`, the dispatch native
calls use, so naming, timeouts, confirmation and errors behave the same.
:func:`answer_text_calls` adds the ``tool_call`` and ``tool_result`` events the loops report.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .convert import ToolOutcome, error_outcome, function_response_part
from .xml_format import render_call
from .xml_parser import CallParser, Event, ParsedCall
from .xml_prompt import example_arguments, tool_schema
from .xml_types import coerce_parameters

if TYPE_CHECKING:
    from .bridge import Bridge, PublishedTool


async def run_parsed_calls(bridge: Bridge, calls: Sequence[ParsedCall]) -> list[ToolOutcome]:
    """Run the calls through the bridge's dispatch (concurrently); outcomes in call order.

    A call the parser could not read, or whose values do not fit the schema, gets an error
    outcome that says how to write it correctly, and is not run.
    """
    prepared: list[ToolOutcome | tuple[str, Any, str | None]] = []
    for call in calls:
        tool = bridge.lookup(call.name)
        if call.error:
            prepared.append(error_outcome(call.name, call.error + _usage_hint(tool)))
            continue
        if tool is None:  # the tool list changed under the reply: let the bridge say so
            prepared.append((call.name, dict(call.arguments), None))
            continue
        arguments, problems = coerce_parameters(tool_schema(tool), call.arguments)
        if problems:
            message = f"invalid parameters for {call.name}: " + "; ".join(problems) + "."
            prepared.append(error_outcome(call.name, message + _usage_hint(tool)))
        else:
            prepared.append((call.name, arguments, None))
    return await bridge.run_calls(prepared)


def _usage_hint(tool: PublishedTool | None) -> str:
    if tool is None:
        return ""
    return " Write the call like this:\n" + render_call(tool.name, example_arguments(tool_schema(tool)))


async def answer_text_calls(
    bridge: Bridge, calls: Sequence[ParsedCall], emit: Callable[[str, Any], Awaitable[None]]
) -> list[ToolOutcome]:
    """Run a reply's calls, reporting ``tool_call`` and ``tool_result`` events as the loops do."""
    for call in calls:
        await emit("tool_call", {"name": call.name, "args": call.arguments})
    outcomes = await run_parsed_calls(bridge, calls)
    for outcome in outcomes:
        await emit("tool_result", function_response_part(outcome))
    return outcomes


class TextCalls:
    """One model reply in the xml style: feed its text, get back the prose to show.

    The calls found are collected in :attr:`calls`; :meth:`close` at the end of the reply.
    """

    def __init__(self, tool_names: Iterable[str]) -> None:
        self._parser = CallParser(tool_names)
        self.calls: list[ParsedCall] = []

    def _sort(self, events: list[Event]) -> list[str]:
        prose = []
        for event in events:
            if isinstance(event, ParsedCall):
                self.calls.append(event)
            else:
                prose.append(event)
        return prose

    def feed(self, text: str) -> list[str]:
        return self._sort(self._parser.feed(text))

    def close(self) -> list[str]:
        return self._sort(self._parser.close())
