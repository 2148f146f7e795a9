"""How the ``xml`` tool-call style writes calls, their values and their results as text.

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
* Values are converted to the parameter's schema type
  (:func:`coretools.client.xml_types.coerce_parameters`): integers, numbers, booleans
  (``true``/``false``), ``null`` for nullable parameters, arrays and objects as JSON.

:func:`render_call` writes a call as the model is asked to write it; :func:`render_results`
writes the outcomes back as ``<tool_result>`` blocks for the next user message. Reading calls is
:mod:`coretools.client.xml_parser`'s work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .convert import ToolOutcome

CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"
RESULT_TAG = "tool_result"
SPACE = " \t\r\n"
"""The whitespace the format trims and skips (XML's)."""


def shorten(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters, for quoting in an error message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cdata(text: str) -> str:
    """``text`` as CDATA sections (a ``]]>`` inside is split across two sections)."""
    return CDATA_OPEN + text.replace(CDATA_CLOSE, "]]" + CDATA_CLOSE + CDATA_OPEN + ">") + CDATA_CLOSE


def trim_raw(raw: str) -> str:
    """The whitespace rule for raw values (see the module docstring)."""
    if "\n" not in raw:
        return raw.strip(SPACE)
    head, _, rest = raw.partition("\n")
    if not head.strip(SPACE):
        raw = rest
    cut = raw.rfind("\n")
    if cut != -1 and not raw[cut + 1 :].strip(SPACE):
        raw = raw[:cut].removesuffix("\r")
    elif cut == -1 and not raw.strip(SPACE):
        raw = ""
    return raw


def cdata_sections(text: str, start: int) -> tuple[str, int] | None:
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
    start = len(inner) - len(inner.lstrip(SPACE))
    if inner.startswith(CDATA_OPEN, start):
        sections = cdata_sections(inner, start)
        if sections is not None and not inner[sections[1] :].strip(SPACE):
            return sections[0]
    return trim_raw(inner)


def encode_value(name: str, text: str) -> str:
    """The text to put between ``<name>`` and ``</name>`` so that it reads back as ``text``."""
    raw = f"\n{text}\n" if "\n" in text else text
    opens_cdata = raw.lstrip(SPACE).startswith(CDATA_OPEN)  # a streaming reader waits for its ]]>
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
