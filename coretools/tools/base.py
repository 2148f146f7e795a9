"""The tool contract.

A tool is one class in one module of `coretools.tools`: its name, title, description, annotations, the
JSON Schema of its parameters (published as `inputSchema` *and* used for validation, so the two cannot
drift), a one-line `hint` for the server's instructions, optional server options of its own, and an async
`run`. The server layer validates arguments before `run` is called, so `run` receives a dict that matches
the schema with defaults filled in.

Options are declared once: `Options` is a frozen dataclass whose fields are made by `option(default, flag,
help)`, so each carries its command-line flag, help and default. The registry builds the flags from the
fields (`add_flags`), builds each `Options` once from the parsed command line (`options_from`) and passes it
to the constructor, which finds it in `self.options`. A constructor that finds the options unusable raises
`ConfigurationError`.

What the server needs to know of a tool it asks the tool, never its name: `narrowing` (how to ask for less
when a call was too large or too slow) and `resources()` (files the tool offers as MCP resources).

`run` returns a `ToolResult` or raises `ToolError` (an `isError` result the model reads; `ToolResult.from_error`
is the one conversion). Any other exception is a bug; the server turns it into an `isError` result without a
traceback and keeps serving. Work a tool runs in a worker thread calls `check_cancelled` between steps.
"""

from __future__ import annotations

import argparse
import base64
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import quote

import anyio
import anyio.from_thread

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import PROCESS, SessionScope, Workspace, refuse_negative
from coretools.workspace import FileViews

if TYPE_CHECKING:
    import mcp_types as types

# The MCP types are imported where a result is built, from `mcp_types` (`mcp.types` re-exports it: the same
# classes). `from mcp import types` would run the SDK's `mcp/__init__.py`, which imports its client and server
# (~0.4 s of CPU), and `mcp_types` alone takes ~0.15 s, which `history`, `undo` and the parser do without.

__all__ = [
    "Elicitation", "NoOptions", "Tool", "ToolContext", "ToolError", "ToolResource", "ToolResult", "add_flags",
    "CONFIRM_NOTE", "check_cancelled", "confirmed", "file_uri", "option", "options_from",
]  # fmt: skip

# The most characters of text one result holds (`--max-result-chars`): about 20,000 tokens, under the
# 25,000-token cap of the strictest common host.
DEFAULT_RESULT_CHARS = 80_000
# The most characters of an error message (`ToolResult.from_error`).
MAX_ERROR_CHARS = 20_000

ProgressFn = Callable[[float, "float | None", "str | None"], Awaitable[None]]
OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class NoOptions:
    """The options of a tool that has none."""


def option(
    default: Any,
    flag: str,
    help: str,  # noqa: A002 - argparse's name
    *,
    metavar: str | None = None,
    choices: Sequence[str] | None = None,
) -> Any:
    """A field of an options dataclass that is also a command-line flag, declared once: `flag` (its
    destination is the field's name), `help` and `default`. The flag's kind follows from the default: False
    is a switch, a tuple a repeatable option, an int or a float a number of that type, anything else text."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar, "choices": choices})


def add_flags(parser: argparse._ActionsContainer, cls: type) -> None:
    """Register the flags of the options dataclass `cls`; a flag the parser already has (a field `cls`
    shares with another tool's options, by inheritance) is registered once."""
    for f in fields(cls):
        flag = f.metadata.get("flag")
        if flag is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not a flag: declare it with `option(default, flag, help)`")
        if flag in parser._option_string_actions:  # noqa: SLF001 - argparse has no public lookup
            continue
        kwargs: dict[str, Any] = {"dest": f.name, "help": f.metadata["help"]}
        if f.default is False:
            kwargs["action"] = "store_true"
        elif isinstance(f.default, tuple):
            kwargs.update(action="append", default=list(f.default))
        else:
            kwargs["default"] = f.default
            if type(f.default) in (int, float):
                kwargs["type"] = type(f.default)
        for key in ("metavar", "choices"):
            if f.metadata[key] is not None:
                kwargs[key] = f.metadata[key]
        parser.add_argument(flag, **kwargs)


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
    # What this client was shown of each file (the stale-write guard: per session, or per client where there
    # is none, see `server/sessionless.py`); None where nothing is remembered (`coretools-mcp call`).
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

    @classmethod
    def from_error(cls, exc: ToolError) -> ToolResult:
        """The result of a call that raised `exc`. Error messages often echo an argument back; a
        megabyte-long argument must not come back whole, so the message keeps its head and tail."""
        message = exc.message
        if len(message) > MAX_ERROR_CHARS:
            half = MAX_ERROR_CHARS // 2
            omitted = f"\n... [{len(message) - 2 * half} characters of this error message omitted] ...\n"
            message = message[:half] + omitted + message[-half:]
        return cls.error(message, exc.kind)

    def link(
        self, path: str, title: str, description: str, *, size: int | None = None, mime: str = "text/plain"
    ) -> ToolResult:
        """Append a link (an MCP `resource_link`) to the file at `path` that the text names, a saved output or
        a log: a host can offer it to the user or read it with `resources/read`. The text keeps naming the
        path, for the model and for hosts that ignore links. Returns the result."""
        import mcp_types as types

        self.content.append(
            types.ResourceLink(
                type="resource_link", uri=file_uri(path), name=path.rpartition("/")[2], title=title,
                description=description, mime_type=mime, size=size,
            )
        )  # fmt: skip
        return self

    def to_mcp(self, *, structured: bool = False, links: bool = True) -> types.CallToolResult:
        """The MCP result. The structured part is left out unless asked for: several hosts (Claude Code,
        VS Code) hand the model only `structuredContent` when a result carries it, and ours holds the
        result's fields, not the answer the text gives (see the README, "The tools"). `links`: False for a
        client whose protocol has no `resource_link` content (before 2025-06-18), which drops them."""
        import mcp_types as types

        content = self.content if links else [b for b in self.content if not isinstance(b, types.ResourceLink)]
        return types.CallToolResult(
            content=content, structured_content=self.structured if structured else None, is_error=self.is_error
        )

    @property
    def text_content(self) -> str:
        import mcp_types as types

        return "\n".join(b.text for b in self.content if isinstance(b, types.TextContent))


@dataclass(frozen=True)
class ToolResource:
    """A file a tool offers as an MCP resource besides the workspace's own (save_memory's memory file)."""

    path: Path  # absolute; its `file://` URI names the resource
    title: str
    description: str
    mime_type: str
    # At most `limit` bytes of the file and its size, or None when there is no file; OSError when it cannot
    # be read. The tool reads it as it reads it itself (a FIFO in its place must not block the server).
    read_prefix: Callable[[int], tuple[bytes, int] | None]
    # One user's file: published only where the server serves one user (stdio), never over HTTP.
    personal: bool = True


# What a tool that asks with `confirmed` adds to its description under `--confirm edits`.
CONFIRM_NOTE = (
    " This server asks the user to confirm every change before it is made; a change the user declines is not "
    "made, and is refused if the client cannot ask the user."
)


async def confirmed(ctx: ToolContext, question: str, untouched: str) -> None:
    """Ask the user `question` (MCP elicitation) before a change the operator wants confirmed; raise a
    ToolError unless they accept. `untouched` says what was left as it was ("Nothing was deleted.")."""
    if ctx.elicit is None:
        raise ToolError(
            f"Not done: this server requires the user to confirm every change (--confirm edits), but the client "
            f"cannot ask the user (it does not support MCP elicitation). {untouched} Tell the user.",
            ErrorKind.CANCELLED_BY_USER,
        )
    try:
        answer = await ctx.elicit(question, {"type": "object", "properties": {}})
    except Exception as exc:  # noqa: BLE001 - a client that fails to answer has not said yes
        raise ToolError(
            f"Not done: asking the user to confirm failed ({type(exc).__name__}: {exc}). {untouched}",
            ErrorKind.CANCELLED_BY_USER,
        ) from None
    if answer.action != "accept":
        how = "declined" if answer.action == "decline" else "dismissed"
        raise ToolError(
            f"Cancelled by the user: they {how} it. {untouched} Do not retry the same call; ask the user how they "
            "would like to proceed.",
            ErrorKind.CANCELLED_BY_USER,
        )


def check_cancelled() -> None:
    """Raise if the call this worker thread serves was cancelled (by --call-timeout, say). Work that can take
    long calls it between steps; on the event loop, or outside AnyIO's worker threads, there is nothing to
    check."""
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:
        pass


def file_uri(path: str) -> str:
    """`file://` and the absolute path, percent-encoded byte by byte (a name that is not UTF-8 survives): how
    a resource and a link name a file."""
    return "file://" + quote(path.encode("utf-8", "surrogateescape"), safe="/")


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
    # How to make a call of this tool do less, for a result cut to the budget and a call stopped by
    # --call-timeout: "... Narrow the call: <narrowing>."
    narrowing: ClassVar[str] = "ask for less in one call"
    # The tool walks directories and skips what ignore files and the default excludes match, with a parameter
    # to include them: the server's instructions name it where they say so.
    skips_ignored: ClassVar[bool] = False
    # Not one of Gemini CLI's core tools: published only when the operator names it (`--tools NAME` or
    # `--tools all`), so the default published set stays Gemini CLI's own.
    opt_in: ClassVar[bool] = False
    # The dialects (`--schema-dialect`) whose Gemini CLI has this opt-in tool among its core tools: there it is
    # published without being named, as Gemini CLI itself would offer it.
    core_in: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Any = None) -> None:
        self.options = self.Options() if options is None else options
        for f in fields(self.options):  # however the options were built, a negative number is refused
            refuse_negative(f.metadata.get("flag") or f.name, getattr(self.options, f.name))

    def unavailable_reason(self) -> str | None:
        """Why this tool is not published with the current configuration, or None."""
        return None

    async def start(self) -> None:
        """Called once when the server starts serving (discover things, spawn helpers...)."""

    async def aclose(self) -> None:
        """Called once when the server stops; release processes and other resources."""

    def resources(self) -> list[ToolResource]:
        """Files this tool offers as MCP resources besides the workspace's (none by default)."""
        return []

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
