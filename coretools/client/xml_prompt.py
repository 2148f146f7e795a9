"""The system-prompt section that teaches the ``xml`` style and describes every tool.

Each tool is listed with its parameters (type, required or optional, description) and an
example call; the same example, written by :func:`coretools.client.xml_format.render_call`,
is what a model that wrote a call wrongly is shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .xml_format import render_call
from .xml_types import branches_of, kinds_of, type_label

if TYPE_CHECKING:
    from .bridge import PublishedTool


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
    branches = branches_of(node)
    for key in ("example", "default"):
        for branch in branches:
            if branch.get(key) is not None:
                return branch[key]
    for branch in branches:
        if isinstance(branch.get("examples"), list) and branch["examples"]:
            return branch["examples"][0]
        if branch.get("enum"):
            return branch["enum"][0]
    kinds = [k for k in kinds_of(branches) if k != "null"]
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
