"""The registry as the server sees it: which tools are published, and how one call is executed.

The MCP layer and the `coretools-mcp call` command both go through `ToolSet.call`, so a person trying a
tool from the terminal sees exactly what a model would: the same validation, sandbox and formatting.
"""

from __future__ import annotations

import argparse
import difflib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from coretools.errors import ConfigurationError, ErrorKind, ToolError
from coretools.sandbox.settings import limit_option
from coretools.server.config import ServerConfig
from coretools.server.validation import CallArguments, invalid_parameters
from coretools.tools import tool_modules
from coretools.tools.base import Tool, ToolContext, ToolResource, ToolResult, add_flags, option, options_from
from coretools.tools.budget import fit
from coretools.workspace import JournalSettings

if TYPE_CHECKING:  # annotations only: `history`, `undo` and the parser do without the MCP types
    import mcp_types as types

logger = logging.getLogger("coretools")


def _timeout_message(tool: Tool, name: str, seconds: float) -> str:
    unit = "second" if seconds == 1 else "seconds"
    return (
        f"{name} was stopped after {seconds:g} {unit}, the most one tool call may take on this server (server "
        "option --call-timeout). What the call had started was ended and its partial results are lost. Narrow "
        f"the call so that it finishes sooner: {tool.narrowing}."
    )


ALL_TOOLS = "all"


@dataclass(frozen=True)
class Selection:
    """`--tools`: the opt-in tools to publish besides Gemini CLI's core set (`Tool.opt_in`)."""

    tools: tuple[str, ...] = option(
        (),
        "--tools",
        "publish these opt-in tools too, besides Gemini CLI's core set (comma-separated names, repeatable; "
        "`all`: every tool this server has; `coretools-mcp tools --tools all` lists them)",
        metavar="NAME[,NAME...]",
    )

    def names(self) -> set[str]:
        """The names given, each comma-separated list split and trimmed."""
        return {name.strip() for given in self.tools for name in given.split(",") if name.strip()}


def tool_classes() -> list[type[Tool]]:
    return [m.TOOL for m in tool_modules() if hasattr(m, "TOOL")]


def add_tool_arguments(parser: argparse._ActionsContainer) -> None:
    """The flags of every tool's options, built from the fields of the options classes."""
    for cls in option_classes():
        add_flags(parser, cls)


def option_classes() -> list[type]:
    """The options classes of the registry (`Selection`, which tools are published) and of the registered
    tools (`Tool.Options`, and `OPTIONS` of a module that provides tools), each once: tools may share one
    (write_file and replace do)."""
    found: list[type] = [Selection]
    for module in tool_modules():
        for cls in (getattr(getattr(module, "TOOL", None), "Options", None), getattr(module, "OPTIONS", None)):
            if cls is not None and cls not in found:
                found.append(cls)
    return found


def tool_options(namespace: argparse.Namespace) -> dict[type, Any]:
    """Every tool's options, built once from the parsed command line (for `ServerConfig.tool_options`)."""
    return {cls: options_from(cls, namespace) for cls in option_classes()}


def journal_settings(namespace: argparse.Namespace) -> JournalSettings:
    """The edit journal's settings (`history`, `undo`), from the options of the tools that keep it."""
    for options in tool_options(namespace).values():
        found = getattr(options, "journal_settings", None)
        if isinstance(found, JournalSettings):
            return found
    return JournalSettings()


@dataclass
class Published:
    tool: Tool
    definition: types.Tool
    arguments: CallArguments  # every dialect's names accepted; an unknown one is answered with the published


def _published(tool: Tool, definition: types.Tool) -> Published:
    return Published(tool, definition, CallArguments(tool, list(definition.input_schema.get("properties", {}))))


class ToolSet:
    """The published tools of one configuration. Building it builds every tool, each with its own options;
    a tool whose options cannot work raises `ConfigurationError` from here, as does a `--tools` name that
    is no tool of this server. An opt-in tool the operator did not name is unavailable, with the reason."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.unavailable: dict[str, str] = {}
        self._tools: dict[str, Published] = {}
        self._other_names: dict[str, str] = {}  # a tool's name in the dialect not published -> the published
        timeout = limit_option(config.call_timeout, "--call-timeout")
        self._call_timeout = None if timeout is None else float(timeout)
        candidates: list[Tool] = []
        for module in tool_modules():
            if hasattr(module, "TOOL"):
                candidates.append(module.TOOL(self.options(module.TOOL.Options)))
            if hasattr(module, "provide"):
                reserved = {c.name for c in candidates}
                options = self.options(module.OPTIONS)
                candidates.extend(module.provide(options, roots=list(config.roots), reserved=reserved))
        chosen = self._chosen(candidates)
        for tool in candidates:
            reason = tool.unavailable_reason()
            if not reason and tool.opt_in and tool.name not in chosen and config.schema_dialect not in tool.core_in:
                reason = f"opt-in; start the server with --tools {tool.name} (or --tools {ALL_TOOLS}) to publish it"
            if reason:
                self.unavailable[tool.name] = reason
                continue
            if tool.name in self._tools:
                logger.warning("tool %s is defined twice; keeping the first", tool.name)
                continue
            definition = tool.definition(config.schema_dialect)
            self._tools[definition.name] = _published(tool, definition)
            if definition.name != tool.name:
                self._other_names[tool.name] = definition.name

    def _chosen(self, candidates: list[Tool]) -> set[str]:
        """The names of the opt-in tools `--tools` publishes; an unknown name is refused, naming the known."""
        asked = self.options(Selection).names()
        known = {name for tool in candidates for name in (tool.name, tool.latest_name) if name}
        if ALL_TOOLS in asked:
            return known
        unknown = sorted(asked - known)
        if unknown:
            listed = ", ".join(sorted(t.name for t in candidates))
            raise ConfigurationError(
                f"--tools: no tool named {', '.join(repr(n) for n in unknown)} on this server. Its tools: {listed} "
                f"(or {ALL_TOOLS!r} for every one of them)."
            )
        return {tool.name for tool in candidates if asked & {tool.name, tool.latest_name}}

    def options(self, cls: type) -> Any:
        """The options object of class `cls` this configuration holds, or its defaults."""
        found = self.config.tool_options.get(cls)
        return cls() if found is None else found

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        """The published tools, in publishing order."""
        return [p.tool for p in self._tools.values()]

    def definitions(self) -> list[types.Tool]:
        return [p.definition for p in self._tools.values()]

    def resources(self) -> list[ToolResource]:
        """The files the published tools offer as MCP resources, in publishing order."""
        return [found for p in self._tools.values() for found in p.tool.resources()]

    def get(self, name: str) -> Tool | None:
        published = self.find(name)
        return published.tool if published else None

    def find(self, name: str) -> Published | None:
        """The published tool a call names (in either dialect), looked up once per call: the server checks
        the name before it decides the workspace, then runs what it found."""
        return self._tools.get(name) or self._tools.get(self._other_names.get(name, ""))

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
        """Find, validate and run one call (`run`); an unknown name is answered as a failed call."""
        published = self.find(name)
        if published is None:
            return ToolResult.error(self.unknown_tool_message(name), ErrorKind.INVALID_TOOL_PARAMS)
        return await self.run(published, name, arguments, ctx)

    async def run(self, published: Published, name: str, arguments: Any, ctx: ToolContext) -> ToolResult:
        """Validate and run one call of a tool `find` returned, within `--call-timeout`; `name` is the name
        the call used. Never raises for a tool failure; cancellation from outside propagates.

        On expiry the tool is cancelled: the process groups it started are killed by the process runner's
        cancellation handling, and work it runs in threads stops at its next cancellation check (threads
        cannot be killed, so the tools keep such work bounded)."""
        try:
            args = published.arguments.check(name, arguments)
        except ToolError as exc:
            return ToolResult.from_error(exc)
        ctx.result_chars = self.config.max_result_chars
        limit = self._call_timeout
        result: ToolResult | None = None
        with anyio.move_on_after(limit) as scope, ctx.session.active():
            result = await self._run(published.tool, name, args, ctx)
        if result is None or scope.cancelled_caught:
            logger.warning("call to %s stopped after %g s (--call-timeout)", name, limit)
            return ToolResult.error(_timeout_message(published.tool, name, limit or 0.0), ErrorKind.CALL_TIMEOUT)
        return fit(result, ctx.result_chars, published.tool.narrowing)

    async def _run(self, tool: Tool, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return await tool.run(args, ctx)
        except ToolError as exc:
            return ToolResult.from_error(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must not take the server down or leak a traceback
            unusable = _unusable_text(exc, args)
            if unusable:
                logger.info("tool %s refused unusable text: %s", name, exc)
                return ToolResult.from_error(invalid_parameters(name, unusable))
            logger.exception("tool %s failed unexpectedly", name)
            return ToolResult.error(
                f"Internal error in {name} ({type(exc).__name__}). This is a bug in coretools; the details are in "
                "the server log. The server is still running.",
                ErrorKind.UNHANDLED_EXCEPTION,
            )


def _unusable_text(exc: Exception, args: dict[str, Any]) -> list[str]:
    """What in `args` made an operating-system call fail with `exc`, as problems to report; empty when the
    failure has another cause (a bug).

    Every system call refuses a NUL character (`ValueError: embedded null byte`) and every encoding to
    bytes a lone surrogate (`UnicodeEncodeError`), whichever tool passed the text on: a command, a path, a
    pattern, an environment value. Tools check the arguments they know to be paths or patterns; this
    answers for any other that reaches the system, naming the parameter instead of reporting a bug."""
    if isinstance(exc, UnicodeEncodeError):
        unwanted = "surrogates"
    elif isinstance(exc, ValueError) and "null" in str(exc):
        unwanted = "\x00"
    else:
        return []
    problems = []
    for where, text in _texts(args, "params"):
        if unwanted == "\x00":
            at = text.find("\x00")
            if at >= 0:
                problems.append(
                    f"{where} contains a NUL character (\\x00) at offset {at}, which no command, file name or "
                    "pattern can hold; remove it"
                )
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as bad:
            problems.append(
                f"{where} contains {text[bad.start : bad.end]!r} at offset {bad.start}, a lone surrogate that is "
                "not text and cannot be passed on; remove it"
            )
    return problems


def _texts(value: Any, where: str) -> list[tuple[str, str]]:
    """Every string in an argument value, with where it is (`params/name/0`)."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _texts(item, f"{where}/{key}")]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _texts(item, f"{where}/{index}")]
    return []
