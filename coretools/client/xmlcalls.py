"""The ``xml`` tool-call style: tools described in the system prompt, calls written in the text.

For models and endpoints without native function calling. The convention (Roo Code's and Kilo
Code's, with the bridge's published names as tags)::

    <a__read_file>
    <path>src/app.py</path>
    <limit>40</limit>
    </a__read_file>

* Only a tag that is the name of a published tool opens a call; any other ``<`` is prose.
* Each parameter is a child element. Its value is taken **verbatim** (no entity decoding:
  models write code with ``<`` and ``&`` unescaped) up to the first ``</name>`` that is
  followed by another parameter tag or the call's closing tag (so code that contains
  ``</name>`` followed by anything else stays in the value). A one-line
  value is stripped of surrounding spaces; in a multi-line value a blank first line and a blank
  last line (the line breaks after the opening and before the closing tag) are dropped, so
  indentation inside is kept.
* A value that is exactly one or more adjacent ``<![CDATA[...]]>`` sections (with whitespace
  around them) is their exact content: the way to send a value that contains its own closing
  tag, or whose surrounding whitespace matters. CDATA-like text inside a longer value stays as
  it is. :func:`encode_value` picks the raw form when it reads back unchanged, CDATA otherwise.
* A tool that takes no parameters may be written ``<name/>``.
* Values are converted to the parameter's schema type (:func:`coerce_parameters`): integers,
  numbers, booleans (``true``/``false``), ``null`` for nullable parameters, arrays and objects
  as JSON.

:class:`CallParser` reads a reply chunk by chunk (calls may be split anywhere) and yields
prose and :class:`ParsedCall` events; a malformed or unclosed call becomes a call with an
``error`` (the model gets that error as the call's result), never an exception.
:func:`run_parsed_calls` sends the calls through :meth:`Bridge.run_calls`, the dispatch native
calls use, so naming, timeouts, confirmation and errors behave the same; :func:`render_results`
writes the outcomes back as ``<tool_result>`` blocks for the next user message.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Union

from .convert import ToolOutcome, error_outcome, function_response_part
from .schema import enum_text

if TYPE_CHECKING:
    from .bridge import Bridge, PublishedTool

CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"
RESULT_TAG = "tool_result"
MAX_TAG_LENGTH = 200
"""A ``<`` not followed by ``>`` within this many characters is prose, not a tag still arriving."""

_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_.:-]*)\s*(/?)>")
_TAG_PREFIX = re.compile(r"</?(?:[A-Za-z_][A-Za-z0-9_.:-]*\s*/?)?\Z")
_INTEGER = re.compile(r"[+-]?\d+\Z")
_SPACE = " \t\r\n"


# ----------------------------------------------------------------------------------- values


def cdata(text: str) -> str:
    """``text`` as CDATA sections (a ``]]>`` inside is split across two sections)."""
    return CDATA_OPEN + text.replace(CDATA_CLOSE, "]]" + CDATA_CLOSE + CDATA_OPEN + ">") + CDATA_CLOSE


def trim_raw(raw: str) -> str:
    """The whitespace rule for raw values (see the module docstring)."""
    if "\n" not in raw:
        return raw.strip(_SPACE)
    head, _, rest = raw.partition("\n")
    if not head.strip(_SPACE):
        raw = rest
    cut = raw.rfind("\n")
    if cut != -1 and not raw[cut + 1 :].strip(_SPACE):
        raw = raw[:cut].removesuffix("\r")
    elif cut == -1 and not raw.strip(_SPACE):
        raw = ""
    return raw


def _cdata_sections(text: str, start: int) -> tuple[str, int] | None:
    """Adjacent CDATA sections from ``start``: (content, end), or None if they do not close."""
    pieces = []
    pos = start
    while text.startswith(CDATA_OPEN, pos):
        end = text.find(CDATA_CLOSE, pos + len(CDATA_OPEN))
        if end == -1:
            return None
        pieces.append(text[pos + len(CDATA_OPEN) : end])
        pos = end + len(CDATA_CLOSE)
    return "".join(pieces), pos


def decode_value(inner: str) -> str:
    """A parameter value from the text between its tags."""
    start = len(inner) - len(inner.lstrip(_SPACE))
    if inner.startswith(CDATA_OPEN, start):
        sections = _cdata_sections(inner, start)
        if sections is not None and not inner[sections[1] :].strip(_SPACE):
            return sections[0]
    return trim_raw(inner)


def encode_value(name: str, text: str) -> str:
    """The text to put between ``<name>`` and ``</name>`` so that it reads back as ``text``."""
    raw = f"\n{text}\n" if "\n" in text else text
    opens_cdata = raw.lstrip(_SPACE).startswith(CDATA_OPEN)  # a streaming reader waits for its ]]>
    if not opens_cdata and f"</{name}>" not in raw and decode_value(raw) == text:
        return raw
    return cdata(text)


def value_text(value: Any) -> str:
    """How an argument value is written in a call: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def render_call(name: str, arguments: Mapping[str, Any] | None = None) -> str:
    """A call as the model is asked to write it."""
    lines = [f"<{name}>"]
    for key, value in (arguments or {}).items():
        lines.append(f"<{key}>{encode_value(key, value_text(value))}</{key}>")
    lines.append(f"</{name}>")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------- parsing


@dataclass
class ParsedCall:
    """A call found in the text: parameter values as written, or why it could not be read."""

    name: str
    arguments: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    raw: str = ""


Event = Union[str, ParsedCall]
"""What :class:`CallParser` yields: prose (``str``) or a call."""


class CallParser:
    """Reads a model reply incrementally; ``feed`` chunks, then ``close`` at the end of the reply.

    ``tool_names`` are the published names: only their tags open calls. Prose is released as
    soon as it cannot be the start of a tag; a call is released when its closing tag arrives.
    Work per chunk is proportional to the chunk (searches resume where they stopped).
    """

    def __init__(self, tool_names: Iterable[str]) -> None:
        self.tool_names = frozenset(tool_names)
        self._buffer = ""
        self._pos = 0
        self._state = "text"
        self._call: ParsedCall | None = None
        self._call_start = 0
        self._param = ""
        self._value_start = 0
        self._search_from = 0
        self._cdata_from = 0
        self._skip_from = 0
        self._final = False
        self._events: list[Event] = []

    # -------------------------------------------------------------- public

    def feed(self, chunk: str) -> list[Event]:
        self._buffer += chunk
        while self._step():
            pass
        return self._take()

    def close(self) -> list[Event]:
        """End of the reply: release held-back prose; an unfinished call becomes an error."""
        if self._state == "value" and self._buffer.find(f"</{self._param}>", self._value_start) != -1:
            # No closing tag was followed by a tag: fall back to the first one, and read on.
            self._search_from, self._final = self._value_start, True
            while self._step():
                pass
            self._final = False
        if self._state == "text":
            self._prose(self._buffer[self._pos :])
        elif self._state == "skip" and self._skip_from < len(self._buffer):
            # The malformed call's closing tag never came: read what followed as a fresh reply.
            self._buffer = self._buffer[self._skip_from :]
            self._pos, self._state, self._call = 0, "text", None
            while self._step():
                pass
            return self._take() + self.close()
        elif self._state in ("call", "value"):
            assert self._call is not None
            self._pos = len(self._buffer)
            if self._state == "value":
                problem = f"the parameter <{self._param}> was not closed with </{self._param}>"
            else:
                problem = f"the call was not closed with </{self._call.name}>"
            self._fail(f"{problem} before the reply ended")
        self._buffer, self._pos, self._state = "", 0, "text"
        return self._take()

    # -------------------------------------------------------------- machinery

    def _take(self) -> list[Event]:
        events, self._events = self._events, []
        if self._state == "text" and self._pos > 0:
            self._buffer, self._pos = self._buffer[self._pos :], 0
        return events

    def _prose(self, text: str) -> None:
        if not text:
            return
        if self._events and isinstance(self._events[-1], str):
            self._events[-1] += text
        else:
            self._events.append(text)

    def _tag_at(self, pos: int) -> re.Match[str] | None | bool:
        """The tag at ``pos``; ``None`` if it is no tag; ``False`` if it may still be arriving."""
        match = _TAG.match(self._buffer, pos)
        if match:
            return match
        tail = self._buffer[pos : pos + MAX_TAG_LENGTH]
        if len(tail) < MAX_TAG_LENGTH and ">" not in tail and _TAG_PREFIX.match(tail):
            return False
        return None

    def _step(self) -> bool:
        return getattr(self, f"_step_{self._state}")()

    def _step_text(self) -> bool:
        buffer = self._buffer
        pos = self._pos
        while True:
            index = buffer.find("<", pos)
            if index == -1:
                self._prose(buffer[self._pos :])
                self._pos = len(buffer)
                return False
            tag = self._tag_at(index)
            if tag is False:
                self._prose(buffer[self._pos : index])
                self._pos = index
                return False
            if tag and not tag.group(1) and tag.group(2) in self.tool_names:
                self._prose(buffer[self._pos : index])
                self._call = ParsedCall(tag.group(2))
                self._call_start = index
                self._pos = tag.end()
                if tag.group(3):  # <name/>
                    self._finish()
                else:
                    self._state = "call"
                return True
            pos = index + 1

    def _step_call(self) -> bool:
        assert self._call is not None
        buffer = self._buffer
        pos = self._pos
        while pos < len(buffer) and buffer[pos] in _SPACE:
            pos += 1
        self._pos = pos
        if pos == len(buffer):
            return False
        if buffer[pos] != "<":
            end = buffer.find("<", pos)
            stray = buffer[pos : end if end != -1 else pos + 60].strip()
            return self._fail(f"unexpected text {_short(stray)!r} between the parameters; only <parameter> tags may appear there")
        tag = self._tag_at(pos)
        if tag is False:
            return False
        if tag is None:
            return self._fail(f"unexpected {_short(buffer[pos:pos + 30])!r} where a <parameter> tag or </{self._call.name}> was expected")
        closing, name, empty = tag.group(1), tag.group(2), tag.group(3)
        if closing:
            if name != self._call.name:
                return self._fail(f"found </{name}> where a <parameter> tag or </{self._call.name}> was expected")
            self._pos = tag.end()
            self._finish()
            return True
        if name in self._call.arguments:
            return self._fail(f"the parameter <{name}> is given twice")
        self._pos = tag.end()
        if empty:  # <param/>
            self._call.arguments[name] = ""
            return True
        self._param = name
        self._value_start = self._search_from = self._cdata_from = tag.end()
        self._state = "value"
        return True

    def _step_value(self) -> bool:
        assert self._call is not None
        buffer = self._buffer
        close = f"</{self._param}>"
        start = self._value_start
        lead = start
        while lead < len(buffer) and buffer[lead] in _SPACE:
            lead += 1
        if buffer.startswith(CDATA_OPEN, lead) or (lead < len(buffer) and CDATA_OPEN.startswith(buffer[lead:])):
            if CDATA_OPEN.startswith(buffer[lead:]) or buffer.find(CDATA_CLOSE, self._cdata_from) == -1:
                self._cdata_from = max(lead, len(buffer) - len(CDATA_CLOSE) + 1)
                return False  # the CDATA is still arriving
            sections = _cdata_sections(buffer, lead)
            if sections is None:
                self._cdata_from = max(lead, len(buffer) - len(CDATA_CLOSE) + 1)
                return False
            after = sections[1]
            if after < len(buffer) and CDATA_OPEN.startswith(buffer[after:]):
                return False  # another section may be starting
            while after < len(buffer) and buffer[after] in _SPACE:
                after += 1
            if buffer.startswith(close, after):
                return self._value_done(sections[0], after + len(close))
            if len(buffer) - after < len(close) and close.startswith(buffer[after:]):
                return False
            # Text follows the CDATA: the whole value is raw text after all.
        end = buffer.find(close, self._search_from)
        if end == -1:
            self._search_from = max(start, len(buffer) - len(close) + 1)
            return False
        verdict = self._ends_value(end + len(close))
        if verdict is None:
            self._search_from = end  # decide when more text has arrived
            return False
        if not verdict:
            self._search_from = end + 1  # the closing tag was part of the value (code, say)
            return True
        return self._value_done(trim_raw(buffer[start:end]), end + len(close))

    def _ends_value(self, pos: int) -> bool | None:
        """Whether a ``</param>`` ending at ``pos`` ends the value: it must be followed by a
        parameter tag or the call's closing tag (``None``: not known yet)."""
        assert self._call is not None
        if self._final:
            return True
        while pos < len(self._buffer) and self._buffer[pos] in _SPACE:
            pos += 1
        if pos == len(self._buffer):
            return None
        tag = self._tag_at(pos)
        if tag is False:
            return None
        return bool(tag) and (not tag.group(1) or tag.group(2) == self._call.name)

    def _value_done(self, value: str, end: int) -> bool:
        assert self._call is not None
        self._call.arguments[self._param] = value
        self._pos = end
        self._state = "call"
        return True

    def _step_skip(self) -> bool:
        assert self._call is not None
        close = f"</{self._call.name}>"
        end = self._buffer.find(close, self._search_from)
        if end == -1:
            self._search_from = max(self._pos, len(self._buffer) - len(close) + 1)
            return False
        self._pos = end + len(close)
        self._state = "text"
        self._call = None
        return True

    def _finish(self) -> None:
        assert self._call is not None
        self._call.raw = self._buffer[self._call_start : self._pos]
        self._events.append(self._call)
        self._call = None
        self._state = "text"

    def _fail(self, problem: str) -> bool:
        """Report the current call as malformed, then skip to its closing tag (if it comes)."""
        assert self._call is not None
        call = self._call
        call.error = f"the call to {call.name} could not be read: {problem}."
        call.raw = self._buffer[self._call_start : self._pos]
        call.arguments = {}
        self._events.append(call)
        self._state = "skip"
        self._search_from = self._skip_from = self._pos
        return True


def parse_calls(text: str, tool_names: Iterable[str]) -> tuple[str, list[ParsedCall]]:
    """A whole reply at once: (the prose, the calls in order)."""
    parser = CallParser(tool_names)
    events = parser.feed(text) + parser.close()
    prose = "".join(e for e in events if isinstance(e, str))
    return prose, [e for e in events if isinstance(e, ParsedCall)]


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ----------------------------------------------------------------------------------- types


def _branches(node: Any) -> list[dict[str, Any]]:
    if not isinstance(node, dict):
        return []
    found = [node]
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key) or ():
            found += _branches(branch)
    return found


def _kinds(branches: list[dict[str, Any]]) -> list[str]:
    kinds: list[str] = []
    for branch in branches:
        kind = branch.get("type")
        for item in kind if isinstance(kind, list) else [kind]:
            if isinstance(item, str) and item not in kinds:
                kinds.append(item)
        if branch.get("nullable") is True and "null" not in kinds:
            kinds.append("null")
    return kinds


def type_label(node: Any) -> str:
    """A short description of a parameter's type, for the prompt and for error messages."""
    branches = _branches(node)
    members = [m for b in branches for m in b.get("enum") or ()]
    if members:
        return "one of " + ", ".join(enum_text(m) for m in members)
    labels = []
    for kind in _kinds(branches):
        if kind == "array":
            items = next((b["items"] for b in branches if isinstance(b.get("items"), dict)), {})
            inner = _kinds(_branches(items))
            labels.append(f"JSON array of {'/'.join(inner)}" if inner else "JSON array")
        elif kind == "object":
            labels.append("JSON object")
        else:
            labels.append(kind)
    return " or ".join(labels) or "any JSON value or text"


def convert_value(text: str, node: Any) -> Any:
    """One parameter's text as the schema's type; ``ValueError`` says what was expected."""
    branches = _branches(node)
    members = [m for b in branches for m in b.get("enum") or ()]
    kinds = _kinds(branches)
    bare = text.strip(_SPACE)
    if members:
        for member in members:
            if text == member or bare == enum_text(member) or (isinstance(member, str) and bare == member):
                return member
        raise ValueError(type_label(node))
    if "string" in kinds:
        return text
    if "null" in kinds and bare in ("", "null"):
        return None
    if ("integer" in kinds or "number" in kinds) and _INTEGER.match(bare):
        return int(bare)
    number = _finite_float(bare) if "number" in kinds or "integer" in kinds else None
    if number is not None and "number" in kinds:
        return number
    if number is not None and number.is_integer():
        return int(number)
    if "boolean" in kinds and bare.lower() in ("true", "false"):
        return bare.lower() == "true"
    if not kinds or "array" in kinds or "object" in kinds:
        try:
            decoded = json.loads(bare)
        except ValueError:
            decoded = _NOTHING
        if not kinds:
            return text if decoded is _NOTHING else decoded
        if ("array" in kinds and isinstance(decoded, list)) or ("object" in kinds and isinstance(decoded, dict)):
            return decoded
    raise ValueError(type_label(node))


_NOTHING = object()


def _finite_float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def coerce_parameters(schema: Any, arguments: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Parameter texts to typed values; (arguments, problems). Unknown parameters stay text."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    result: dict[str, Any] = {}
    problems: list[str] = []
    for name, text in arguments.items():
        if name not in properties:
            result[name] = text
            continue
        try:
            result[name] = convert_value(text, properties[name])
        except ValueError as exc:
            problems.append(f"<{name}> must be {exc}, got {_short(text, 60)!r}")
    return result, problems


# ----------------------------------------------------------------------------------- the prompt


PROMPT_HEADER = """\
# Tools

You can use the tools listed below. To call one, write the tool's name as an XML tag in your \
reply, with one child tag per parameter:

<tool_name>
<parameter_name>value</parameter_name>
</tool_name>

- Write values exactly as they are: do not escape <, > or &. A value of several lines starts \
on the line after its opening tag and ends on the line before its closing tag.
- If a value contains its own closing tag, or starts or ends with spaces that matter, wrap it \
in <![CDATA[ and ]]>.
- Numbers are written as digits, booleans as true or false, arrays and objects as JSON.
- You may call several tools in one reply; they run at the same time. Then stop and wait: the \
results come back in the next message as <tool_result> blocks, in the order of your calls.
- When you need no more tools, answer in plain text without tool tags."""


def tool_schema(tool: PublishedTool) -> dict[str, Any]:
    """The sanitised parameter schema the prompt describes and the values are converted against."""
    schema = tool.declaration("json").get("parametersJsonSchema")
    return schema if isinstance(schema, dict) else {"type": "object", "properties": {}}


def example_value(node: Any, name: str) -> Any:
    """A plausible value for the prompt's example call."""
    branches = _branches(node)
    for key in ("example", "default"):
        for branch in branches:
            if branch.get(key) is not None:
                return branch[key]
    for branch in branches:
        if isinstance(branch.get("examples"), list) and branch["examples"]:
            return branch["examples"][0]
        if branch.get("enum"):
            return branch["enum"][0]
    kinds = [k for k in _kinds(branches) if k != "null"]
    kind = kinds[0] if kinds else "string"
    if kind in ("integer", "number"):
        minimum = next((b["minimum"] for b in branches if isinstance(b.get("minimum"), (int, float))), None)
        return minimum if minimum is not None and minimum > 1 else 1
    if kind == "boolean":
        return True
    if kind == "array":
        items = next((b["items"] for b in branches if isinstance(b.get("items"), dict)), {})
        return [example_value(items, name)]
    if kind == "object":
        return example_arguments(next((b for b in branches if b.get("properties")), {}))
    return f"{name} value"


def example_arguments(schema: Any) -> dict[str, Any]:
    """Example arguments: every required parameter, or the first one when none is required."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return {}
    required = [r for r in schema.get("required") or () if r in properties] or list(properties)[:1]
    return {name: example_value(properties[name], name) for name in required}


def describe_tool(tool: PublishedTool) -> str:
    schema = tool_schema(tool)
    lines = [f"## {tool.name}"]
    if tool.description:
        lines.append(tool.description.strip())
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    if properties:
        lines.append("Parameters:")
        for name, node in properties.items():
            flag = "required" if name in required else "optional"
            line = f"- {name} ({type_label(node)}, {flag})"
            description = node.get("description") if isinstance(node, dict) else None
            if description:
                line += ": " + " ".join(str(description).split())
            lines.append(line)
            if isinstance(node, dict) and (node.get("type") == "object" or "items" in node) and len(json.dumps(node)) <= 2000:
                lines.append(f"  schema: {json.dumps(node, ensure_ascii=False, separators=(',', ':'))}")
    else:
        lines.append("Parameters: none")
    lines.append("Example:")
    lines.append(render_call(tool.name, example_arguments(schema)))
    return "\n".join(lines)


def render_tool_prompt(tools: Sequence[PublishedTool], *, header: str = PROMPT_HEADER) -> str:
    """The system-prompt section that teaches the convention and lists every tool."""
    if not tools:
        return ""
    return "\n\n".join([header, *(describe_tool(t) for t in tools)])


# ----------------------------------------------------------------------------------- dispatch


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


def render_result(outcome: ToolOutcome, *, media_attached: bool = False) -> str:
    """One ``<tool_result>`` block (errors flagged with ``error="true"``)."""
    attributes = f' name="{outcome.name}"' + ("" if outcome.ok else ' error="true"')
    if media_attached and outcome.media:
        kinds = ", ".join(m.mime_type for m in outcome.media)
        text = replace(outcome, media=[]).as_text() + f"\n[{len(outcome.media)} attachment(s) follow this message: {kinds}]"
    else:
        text = outcome.as_text()
    return f"<{RESULT_TAG}{attributes}>{encode_value(RESULT_TAG, text)}</{RESULT_TAG}>"


def render_results(outcomes: Sequence[ToolOutcome], *, media_attached: bool = False) -> str:
    """The text of the user message that answers a reply's calls."""
    return "\n\n".join(render_result(o, media_attached=media_attached) for o in outcomes)


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
