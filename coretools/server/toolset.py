"""The registry as the server sees it: which tools are published, and how one call is executed.

The MCP layer and the `coretools-mcp call` command both go through `ToolSet.call`, so a person trying a
tool from the terminal sees exactly what a model would: the same validation, sandbox and formatting.
"""

from __future__ import annotations

import argparse
import difflib
import logging
from dataclasses import dataclass
from typing import Any

from mcp import types

from coretools.errors import ToolError
from coretools.server.validation import ArgumentValidator
from coretools.tools import tool_modules
from coretools.tools.base import ServerConfig, Tool, ToolContext, ToolResult

logger = logging.getLogger("coretools")
MAX_ERROR_CHARS = 20_000


def _clip(message: str) -> str:
    """Error messages often echo an argument back; a megabyte-long argument must not come back whole."""
    if len(message) <= MAX_ERROR_CHARS:
        return message
    half = MAX_ERROR_CHARS // 2
    return f"{message[:half]}\n... [{len(message) - 2 * half} characters of this error message omitted] ...\n{message[-half:]}"


def tool_classes() -> list[type[Tool]]:
    return [m.TOOL for m in tool_modules() if hasattr(m, "TOOL")]


def add_tool_arguments(parser: argparse.ArgumentParser) -> None:
    """Let every tool register its own server options."""
    for cls in tool_classes():
        cls.add_arguments(parser)


@dataclass
class Published:
    tool: Tool
    definition: types.Tool
    validator: ArgumentValidator


class ToolSet:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.unavailable: dict[str, str] = {}
        self._tools: dict[str, Published] = {}
        candidates: list[Tool] = []
        for module in tool_modules():
            if hasattr(module, "TOOL"):
                candidates.append(module.TOOL(config))
            if hasattr(module, "provide"):
                candidates.extend(module.provide(config, reserved={c.name for c in candidates}))
        for tool in candidates:
            reason = tool.unavailable_reason()
            if reason:
                self.unavailable[tool.name] = reason
                continue
            if tool.name in self._tools:
                logger.warning("tool %s is defined twice; keeping the first", tool.name)
                continue
            self._tools[tool.name] = Published(tool, tool.definition(), ArgumentValidator(tool.input_schema))

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def definitions(self) -> list[types.Tool]:
        return [p.definition for p in self._tools.values()]

    def get(self, name: str) -> Tool | None:
        published = self._tools.get(name)
        return published.tool if published else None

    def unknown_tool_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.4)
        message = f'Tool "{name}" not found.'
        if name in self.unavailable:
            return f'Tool "{name}" is not available: {self.unavailable[name]}'
        if len(close) == 1:
            message += f' Did you mean "{close[0]}"?'
        elif close:
            message += " Did you mean one of: " + ", ".join(f'"{c}"' for c in close) + "?"
        else:
            message += " Available tools: " + ", ".join(self.names) + "."
        return message

    async def start(self) -> None:
        for published in self._tools.values():
            await published.tool.start()

    async def aclose(self) -> None:
        for published in self._tools.values():
            try:
                await published.tool.aclose()
            except Exception:  # noqa: BLE001 - shutting down: log and carry on with the others
                logger.exception("closing tool %s failed", published.tool.name)

    async def call(self, name: str, arguments: Any, ctx: ToolContext) -> ToolResult:
        """Validate and run one call. Never raises for a tool failure; cancellation propagates."""
        published = self._tools[name]
        args, problems = published.validator.validate(arguments)
        if problems:
            lines = "\n".join(f"- {p}" for p in problems)
            return ToolResult.error(f"Invalid parameters for {name}:\n{lines}", "invalid_tool_params")
        try:
            return await published.tool.run(args, ctx)
        except ToolError as exc:
            return ToolResult.error(_clip(exc.message), exc.kind)
        except Exception as exc:  # noqa: BLE001 - a bug must not take the server down or leak a traceback
            logger.exception("tool %s failed unexpectedly", name)
            return ToolResult.error(
                f"Internal error in {name} ({type(exc).__name__}). This is a bug in coretools; the details are in "
                "the server log. The server is still running.",
                "unhandled_exception",
            )
