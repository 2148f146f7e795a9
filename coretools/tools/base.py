"""The tool contract.

A tool is one class in one module of `coretools.tools`: its name, title, description, annotations, the
JSON Schema of its parameters (published as `inputSchema` *and* used for validation, so the two cannot
drift), a one-line `hint` for the server's instructions, optional server options of its own, and an async
`run`. The server layer validates arguments before `run` is called, so `run` receives a dict that matches
the schema with defaults filled in.

Options: a tool registers its command-line flags in `add_arguments` and declares them as `Options`, a frozen
dataclass whose fields are those flags' destinations with the same defaults. The registry builds each
`Options` once from the parsed command line (`options_from`) and passes it to the constructor, which finds
it in `self.options`. A constructor that finds the options unusable raises `ConfigurationError`.

`run` returns a `ToolResult` or raises `ToolError` (an `isError` result the model reads). Any other
exception is a bug; the server turns it into an `isError` result without a traceback and keeps serving.
"""

from __future__ import annotations

import argparse
import base64
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.session import PROCESS, SessionScope
from coretools.workspace.views import FileViews

if TYPE_CHECKING:
    import mcp_types as types

# The MCP types are imported where a result is built, from `mcp_types` (`mcp.types` re-exports it: the same
# classes). `from mcp import types` would run the SDK's `mcp/__init__.py`, which imports its client and server
# (~0.4 s of CPU), and `mcp_types` alone takes ~0.15 s, which `history`, `undo` and the parser do without.

__all__ = ["Elicitation", "NoOptions", "Tool", "ToolContext", "ToolError", "ToolResult", "options_from"]

# The most characters of text one result holds (`--max-result-chars`): about 20,000 tokens, under the
# 25,000-token cap of the strictest common host.
DEFAULT_RESULT_CHARS = 80_000

ProgressFn = Callable[[float, "float | None", "str | None"], Awaitable[None]]
OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class NoOptions:
    """The options of a tool that has none."""


def options_from(cls: type[OptionsT], namespace: argparse.Namespace) -> OptionsT:
    """An options dataclass from a parsed command line: each field takes the value of the option with its
    name, a field the namespace lacks keeps its default, and lists (repeatable options) become tuples so the
    options stay immutable."""
    values = {f.name: getattr(namespace, f.name) for f in fields(cls) if hasattr(namespace, f.name)}
    return cls(**{name: tuple(v) if isinstance(v, list) else v for name, v in values.items()})


@dataclass
class Elicitation:
    """The user's answer to a confirmation request: `action` is "accept", "decline" or "cancel"."""

    action: str
    content: dict[str, Any] | None = None


ElicitFn = Callable[[str, dict[str, Any]], Awaitable[Elicitation]]


async def _no_progress(progress: float, total: float | None = None, message: str | None = None) -> None:
    return None


@dataclass
class ToolContext:
    """Everything a running tool may use besides its arguments."""

    workspace: Workspace
    report_progress: ProgressFn = _no_progress
    elicit: ElicitFn | None = None  # None when the client cannot be asked
    # What this session was shown of each file (the stale-write guard); None where there is no session.
    views: FileViews | None = None
    # The size budget of this call's result in characters (`--max-result-chars`); tools fit their text to it.
    result_chars: int = DEFAULT_RESULT_CHARS
    # The calling session's private state (the shell's runner, background jobs); see `sandbox/session.py`.
    session: SessionScope = PROCESS
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("coretools"))
    # Progress starts above 0: a call that waited in the server's queue has already reported its place as a
    # fraction below 1, and a tool's own progress (counts from 1) must never go below what was sent.
    _last_progress: float = 0.0

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress; values must grow strictly (the spec says so), equal or smaller ones are dropped."""
        if done <= self._last_progress:
            return
        self._last_progress = done
        await self.report_progress(done, total, message)


@dataclass
class ToolResult:
    """What the model sees: content blocks, optional structured content, and whether it is an error."""

    content: list[types.ContentBlock]
    structured: dict[str, Any] | None = None
    is_error: bool = False

    @classmethod
    def text(cls, text: str, structured: dict[str, Any] | None = None) -> ToolResult:
        import mcp_types as types

        return cls([types.TextContent(type="text", text=text)], structured)

    @classmethod
    def error(cls, message: str, kind: ErrorKind = ErrorKind.EXECUTION_FAILED) -> ToolResult:
        import mcp_types as types

        structured = {"error": {"kind": ErrorKind(kind).value, "message": message}}
        return cls([types.TextContent(type="text", text=message)], structured, True)

    def to_mcp(self, *, structured: bool = False) -> types.CallToolResult:
        """The MCP result. The structured part is left out unless asked for: several hosts (Claude Code,
        VS Code) hand the model only `structuredContent` when a result carries it, and ours holds the
        result's fields, not the answer the text gives (see the README, "The tools")."""
        import mcp_types as types

        return types.CallToolResult(
            content=self.content, structured_content=self.structured if structured else None, is_error=self.is_error
        )

    @property
    def text_content(self) -> str:
        import mcp_types as types

        return "\n".join(b.text for b in self.content if isinstance(b, types.TextContent))


def text_block(text: str) -> types.TextContent:
    import mcp_types as types

    return types.TextContent(type="text", text=text)


def image_block(data: bytes, mime: str) -> types.ImageContent:
    import mcp_types as types

    return types.ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime)


def audio_block(data: bytes, mime: str) -> types.AudioContent:
    import mcp_types as types

    return types.AudioContent(type="audio", data=base64.b64encode(data).decode("ascii"), mime_type=mime)


def blob_block(data: bytes, mime: str, uri: str) -> types.EmbeddedResource:
    import mcp_types as types

    return types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(uri=uri, blob=base64.b64encode(data).decode("ascii"), mime_type=mime),
    )


class Tool:
    """Base class of every tool. Subclasses set the class attributes and implement `run`."""

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]
    # When to use the tool, in one sentence: its line in the server's instructions (none if empty).
    hint: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    # Annotations (hints for hosts); set honestly per tool.
    read_only: ClassVar[bool] = True
    destructive: ClassVar[bool] = False
    idempotent: ClassVar[bool] = True
    open_world: ClassVar[bool] = False
    # Dialects. Gemini CLI renamed parameters over time; a model may call with any version's names.
    # `aliases`: a newer name of a published parameter, same meaning (newer name -> published name).
    # `extra_properties`: parameters newer versions added; accepted in every dialect, published only in the
    # latest one. `latest_name`/`latest_schema`: what `--schema-dialect latest` publishes (None: the same).
    aliases: ClassVar[dict[str, str]] = {}
    extra_properties: ClassVar[dict[str, dict[str, Any]]] = {}
    latest_name: ClassVar[str | None] = None
    latest_schema: ClassVar[dict[str, Any] | None] = None
    # Required parameters a newer dialect supplies another way (besides aliases): published name -> its names.
    required_via: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(self, options: Any = None) -> None:
        self.options = self.Options() if options is None else options

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Register server options this tool owns (e.g. `--search-max-matches`); `Options` declares them."""

    def unavailable_reason(self) -> str | None:
        """Why this tool is not published with the current configuration, or None."""
        return None

    async def start(self) -> None:
        """Called once when the server starts serving (discover things, spawn helpers...)."""

    async def aclose(self) -> None:
        """Called once when the server stops; release processes and other resources."""

    def accepted_schema(self) -> dict[str, Any]:
        """What a call is validated against: the published schema, every alias (typed as the parameter it
        names, so a wrong type is reported under the name the caller used) and the newer parameters."""
        props = dict(self.input_schema.get("properties", {}))
        props.update(self.extra_properties)
        for alias, target in self.aliases.items():
            props.setdefault(alias, props[target])
        required = [n for n in self.input_schema.get("required", []) if not self._other_names(n)]
        if not self.aliases and not self.extra_properties and not self.required_via:
            return self.input_schema
        return {**self.input_schema, "properties": props, "required": required}

    def _other_names(self, name: str) -> list[str]:
        return [a for a, t in self.aliases.items() if t == name] + list(self.required_via.get(name, ()))

    def missing(self, args: Any) -> list[str]:
        """A problem for each required parameter a call gives under none of its names."""
        if args is not None and not isinstance(args, dict):
            return []  # "params must be an object" says it all
        given = args or {}
        out = []
        for name in self.input_schema.get("required", []):
            others = self._other_names(name)
            if not others or name in given or any(o in given for o in others):
                continue
            newer = ", ".join(repr(o) for o in others)
            out.append(f"params must have required property '{name}' (or its newer name {newer})")
        return out

    @classmethod
    def translate(cls, args: dict[str, Any]) -> dict[str, Any]:
        """A validated call in the published names: each alias becomes the parameter it names. An alias and
        its published name given with different values is refused, naming both."""
        out = dict(args)
        for alias, target in cls.aliases.items():
            if alias not in out:
                continue
            value = out.pop(alias)
            if target in args and args[target] != value:
                raise ToolError(
                    f"Parameters '{alias}' and '{target}' are two names for the same thing ('{alias}' is the "
                    f"newer Gemini CLI name) but were given different values ({_brief(value)} and "
                    f"{_brief(args[target])}). Pass only one of them.",
                    ErrorKind.INVALID_TOOL_PARAMS,
                )
            out[target] = value
        return out

    def definition(self, dialect: str = "seed") -> types.Tool:
        import mcp_types as types

        latest = dialect == "latest"
        return types.Tool(
            name=(self.latest_name or self.name) if latest else self.name,
            title=self.title,
            description=self.description,
            input_schema=(self.latest_schema or self.input_schema) if latest else self.input_schema,
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=self.open_world,
            ),
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:  # pragma: no cover - abstract
        raise NotImplementedError


def _brief(value: Any, limit: int = 60) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
