"""Reading the ``xml`` style's calls out of a model reply, as it streams.

:class:`CallParser` reads a reply chunk by chunk (calls may be split anywhere) and yields
prose and :class:`ParsedCall` events; a malformed or unclosed call becomes a call with an
``error`` (the model gets that error as the call's result), never an exception. The convention
it reads (which tags open a call, how values are delimited and trimmed, CDATA) is described in
:mod:`coretools.client.xml_format`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Union

from .xml_format import CDATA_CLOSE, CDATA_OPEN, SPACE, cdata_sections, shorten, trim_raw

MAX_TAG_LENGTH = 200
"""A ``<`` not followed by ``>`` within this many characters is prose, not a tag still arriving."""

_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_.:-]*)\s*(/?)>")
_TAG_PREFIX = re.compile(r"</?(?:[A-Za-z_][A-Za-z0-9_.:-]*\s*/?)?\Z")


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
        while pos < len(buffer) and buffer[pos] in SPACE:
            pos += 1
        self._pos = pos
        if pos == len(buffer):
            return False
        if buffer[pos] != "<":
            end = buffer.find("<", pos)
            stray = buffer[pos : end if end != -1 else pos + 60].strip()
            return self._fail(f"unexpected text {shorten(stray)!r} between the parameters; only <parameter> tags may appear there")
        tag = self._tag_at(pos)
        if tag is False:
            return False
        if tag is None:
            return self._fail(f"unexpected {shorten(buffer[pos:pos + 30])!r} where a <parameter> tag or </{self._call.name}> was expected")
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
        while lead < len(buffer) and buffer[lead] in SPACE:
            lead += 1
        if buffer.startswith(CDATA_OPEN, lead) or (lead < len(buffer) and CDATA_OPEN.startswith(buffer[lead:])):
            if CDATA_OPEN.startswith(buffer[lead:]) or buffer.find(CDATA_CLOSE, self._cdata_from) == -1:
                self._cdata_from = max(lead, len(buffer) - len(CDATA_CLOSE) + 1)
                return False  # the CDATA is still arriving
            sections = cdata_sections(buffer, lead)
            if sections is None:
                self._cdata_from = max(lead, len(buffer) - len(CDATA_CLOSE) + 1)
                return False
            after = sections[1]
            if after < len(buffer) and CDATA_OPEN.startswith(buffer[after:]):
                return False  # another section may be starting
            while after < len(buffer) and buffer[after] in SPACE:
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
        while pos < len(self._buffer) and self._buffer[pos] in SPACE:
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
