"""The bridge: many MCP servers behind one published tool list and one ``call``.

Each server gets a supervisor task that opens its transport and ``ClientSession``, keeps them
while the bridge is open, and closes them itself: anyio requires a cancel scope (which every
transport holds) to be left by the task that entered it, the mistake behind the
"exit cancel scope in a different task" reports of several multi-server clients. Servers start
concurrently; one that fails is recorded in :attr:`Bridge.failures` (alias, reason, the tail of
its stderr) and the others carry on.

A server can ask the user for input while a call runs (elicitation): ``elicitation_callback``
answers it in both protocol eras (see :mod:`coretools.client.elicitation`). A remote server
that needs OAuth signs in through the SDK's provider (see :mod:`coretools.client.oauth`); the
minutes a person spends in the browser or at a prompt do not count against the connect
timeout (:mod:`coretools.client.deadline`).

Every way a model can ask for a tool (Gemini ``functionCall`` parts, OpenAI ``tool_calls``,
calls parsed from model text) ends in :meth:`Bridge.call`, which looks the published name up in
the name map, fixes argument types against the server's own schema, applies the server's
timeout and returns a :class:`~coretools.client.convert.ToolOutcome`. It never raises for a
tool-level problem: unknown names, refused calls, timeouts, transport failures and ``isError``
results all come back as error outcomes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp.types as mcp_types
from mcp import Client, ClientSession, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from .arguments import coerce_arguments
from .config import ServerConfig, load_config
from .convert import (
    ToolOutcome,
    error_outcome,
    function_declaration,
    function_response_content,
    gemini_tools,
    openai_tool,
    openai_tool_message,
    outcome_from_result,
)
from .deadline import deadline
from .elicitation import ElicitationCallback, checked
from .history import function_calls
from .instructions import PER_SERVER_LIMIT, TOTAL_LIMIT, ServerInstructions, render_blocks
from .names import (
    SEPARATOR,
    NameCollisionError,
    PrefixMode,
    collisions,
    describe_collisions,
    publish_names,
    sanitize_part,
    should_prefix,
)
from .notices import ONCE, client_logger
from .oauth import BrowserSignIn, ServerAuth
from .schema import Profile
from .stdio import StdioServerProcess
from .style import normalize_choice

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

logger = client_logger(__name__)

MAX_LIST_PAGES = 1000
"""A server whose ``tools/list`` never stops paginating is cut off here."""

Confirm = Callable[["PublishedTool", dict[str, Any]], Awaitable[bool]]


@dataclass(frozen=True)
class ServerFailure:
    """A server that could not be used, with what it said on stderr."""

    alias: str
    reason: str
    stderr_tail: str = ""

    def __str__(self) -> str:
        text = f"{self.alias}: {self.reason}"
        if self.stderr_tail.strip():
            text += "\n  stderr: " + self.stderr_tail.strip().replace("\n", "\n          ")
        return text


@dataclass(frozen=True)
class PublishedTool:
    """One tool as published: its portable name and where calls to it go."""

    name: str
    alias: str
    tool: mcp_types.Tool
    trusted: bool = False
    _declarations: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def original_name(self) -> str:
        return self.tool.name

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.tool.input_schema

    @property
    def description(self) -> str:
        return self.tool.description or self.tool.title or ""

    def declaration(self, profile: Profile = "json") -> dict[str, Any]:
        """The Gemini ``FunctionDeclaration`` dict (sanitised once per profile, then reused)."""
        if profile not in self._declarations:
            self._declarations[profile] = function_declaration(
                self.name, self.description, self.input_schema, profile=profile
            )
        return dict(self._declarations[profile])


class _Server:
    """Runtime state of one configured server, owned by its supervisor task."""

    def __init__(self, config: ServerConfig, auth: ServerAuth | None) -> None:
        self.config = config
        self.auth = auth
        self.process: StdioServerProcess | None = None
        self.client: Client | None = None
        self.session: ClientSession | None = None
        self.tools: list[mcp_types.Tool] = []
        self.settled = anyio.Event()
        self.stop = anyio.Event()
        self.failure: ServerFailure | None = None
        self.instructions = ""
        self.transport_error_reported = False
        self.changes_send, self.changes_receive = anyio.create_memory_object_stream[None](1)

    def stderr_tail(self) -> str:
        return self.process.stderr_tail() if self.process is not None else ""


class Bridge:
    """Connects to MCP servers and publishes their tools under portable, unique names.

    Use as ``async with Bridge(configs) as bridge:`` (or :meth:`from_config`).

    * ``prefix``: ``auto`` (``alias__tool`` when more than one server is connected),
      ``always`` or ``never``.
    * ``connect_timeout``: seconds for one server's handshake and first tool listing.
    * ``reserved_names``: names the host uses itself; tools never get published under them.
    * ``confirm``: called before running a tool of a server without ``trust: true``; when it
      returns false the call becomes an error outcome ("declined").
    * ``tool_style``: the user's choice of call style for the loops, ``json`` (native function
      calling), ``xml`` (calls written in the text) or ``None``/``auto`` (decided per model and
      provider by :func:`coretools.client.style.resolve_tool_style`).
    * ``server_instructions``: whether the loops put the servers' ``instructions`` in the
      system instruction (see :mod:`coretools.client.instructions`); ``instruction_limits``
      caps them, per server and in total, in characters.
    * ``elicitation_callback``: answers servers' requests for user input, named and shaped as
      the SDK's (``async (context, params) -> ElicitResult | ErrorData``); without one the
      capability is not advertised.
    * ``sign_in``: how to run an OAuth sign-in (:class:`~coretools.client.oauth.BrowserSignIn`);
      without one a server that needs a sign-in fails with the command that does it.
      ``token_directory`` overrides where tokens are kept.
    * ``mode``: the SDK ``Client``'s protocol negotiation, ``legacy`` (the ``initialize``
      handshake, the default), ``auto`` (2026-07-28 when the server speaks it) or a version.

    With ``prefix="never"``, tool names that clash (the same name on two servers, names equal
    after sanitising, a reserved name) make :meth:`start` raise
    :class:`~coretools.client.names.NameCollisionError`. Tools offered by several servers are
    noted once, at info level: their prefixes keep them apart.

    By default sessions use the ``initialize`` handshake (the 2025-era protocol every current
    host speaks), on which servers push ``notifications/tools/list_changed``.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        prefix: PrefixMode = "auto",
        connect_timeout: float = 30.0,
        reserved_names: Iterable[str] = (),
        confirm: Confirm | None = None,
        client_info: mcp_types.Implementation | None = None,
        tool_style: str | None = None,
        server_instructions: bool = True,
        instruction_limits: tuple[int, int] = (PER_SERVER_LIMIT, TOTAL_LIMIT),
        elicitation_callback: ElicitationCallback | None = None,
        sign_in: BrowserSignIn | None = None,
        token_directory: Path | None = None,
        mode: str = "legacy",
    ) -> None:
        aliases = [s.alias for s in servers]
        if len(set(aliases)) != len(aliases):
            raise ValueError(f"duplicate server aliases: {aliases}")
        should_prefix(prefix, 0)  # validates the mode
        self.prefix = prefix
        self.connect_timeout = connect_timeout
        self.reserved_names = frozenset(reserved_names)
        self.confirm = confirm
        self.tool_style = normalize_choice(tool_style)
        self.server_instructions = server_instructions
        self.instruction_limits = instruction_limits
        self.client_info = client_info or mcp_types.Implementation(name="coretools-bridge", version="0.1.0")
        self.elicitation_callback = elicitation_callback
        self.mode = mode
        self._servers = [
            _Server(c, ServerAuth(c, sign_in=sign_in, directory=token_directory) if c.url else None) for c in servers
        ]
        self._published: dict[str, PublishedTool] = {}
        self._prefixed = False
        self._reported_duplicates: set[str] = set()
        self._task_group: anyio.abc.TaskGroup | None = None
        self.tools_version = 0
        """Increases whenever the published tool list is rebuilt (start, ``tools/list_changed``)."""

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None, **options: Any
    ) -> Bridge:
        return cls(load_config(path, environ=environ), **options)

    # ---------------------------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Bridge:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start every server concurrently and wait until each is connected or has failed."""
        if self._task_group is not None:
            raise RuntimeError("the bridge is already started")
        ONCE.forget()  # each bridge reports what it finds, once
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        try:
            for server in self._servers:
                task_group.start_soon(self._supervise, server, name=f"mcp-server:{server.config.alias}")
            for server in self._servers:
                await server.settled.wait()
            self._publish(strict=True)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Close every session and stop every server process (and whatever they started)."""
        task_group, self._task_group = self._task_group, None
        if task_group is None:
            return
        for server in self._servers:
            server.stop.set()
        await task_group.__aexit__(None, None, None)

    async def _supervise(self, server: _Server) -> None:
        try:
            with deadline(self.connect_timeout) as (scope, budget):
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(self._client(server, stack))
                    server.instructions = client.instructions or ""
                    server.tools = await list_all_tools(client.session)
                    budget.lift()
                    server.client, server.session = client, client.session
                    server.settled.set()
                    logger.info("%s: connected, %d tools", server.config.alias, len(server.tools))
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(self._follow_changes, server)
                        await server.stop.wait()
                        inner.cancel_scope.cancel()
            if scope.cancelled_caught and not server.settled.is_set():
                self._record_failure(server, TimeoutError())
        except Exception as exc:
            if not server.settled.is_set():
                self._record_failure(server, exc)
            else:
                logger.warning("%s: connection ended with an error: %s", server.config.alias, self._reason(server, exc))
        finally:
            server.client = server.session = None
            server.settled.set()

    def _record_failure(self, server: _Server, exc: BaseException) -> None:
        exit_code = server.process.returncode if server.process is not None else None
        refused = server.auth.describe() if server.auth is not None else None
        if refused:
            reason = refused
        elif isinstance(_leaf(exc), TimeoutError):
            reason = f"no answer to the MCP handshake within {self.connect_timeout:g} s"
        elif exit_code is not None:
            reason = f"the server exited with code {exit_code} before the handshake completed ({_describe(exc)})"
        else:
            reason = _describe(exc)
        server.failure = ServerFailure(server.config.alias, reason, server.stderr_tail())
        logger.warning("MCP server %s", server.failure)

    @staticmethod
    def _reason(server: _Server, exc: BaseException) -> str:
        """Authorization's own account of a failure when it is the cause, else the error's."""
        return (server.auth.describe() if server.auth is not None else None) or _describe(exc)

    def _client(self, server: _Server, stack: AsyncExitStack) -> Client:
        callback = self.elicitation_callback
        return Client(
            self._transport(server, stack),
            mode=self.mode,  # type: ignore[arg-type]
            message_handler=self._notification_handler(server),
            client_info=self.client_info,
            elicitation_callback=checked(callback, server.config.alias) if callback is not None else None,
            cache=None,
        )

    def _transport(self, server: _Server, stack: AsyncExitStack) -> Any:
        config = server.config
        if config.transport == "stdio":
            assert config.command is not None
            server.process = StdioServerProcess(
                config.command, config.args, env=config.env, cwd=config.cwd, label=config.alias
            )
            return server.process.connect()
        assert config.url is not None and server.auth is not None
        auth = server.auth
        if config.transport == "sse":
            return sse_client(config.url, headers=dict(config.headers), auth=auth.provider)
        # The SDK's defaults: 30 s to connect and write, 300 s between reads of a held-open stream.
        http_client = httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(30.0, read=300.0),
            auth=auth.provider,
            event_hooks={"response": [auth.observe]},
        )
        stack.push_async_callback(http_client.aclose)
        return streamable_http_client(config.url, http_client=http_client)

    def _notification_handler(self, server: _Server) -> Callable[[Any], Awaitable[None]]:
        async def handle(message: Any) -> None:
            # Runs on the session's read loop: never send requests from here, only signal.
            if isinstance(message, mcp_types.ToolListChangedNotification):
                try:
                    server.changes_send.send_nowait(None)
                except anyio.WouldBlock:
                    pass  # a re-listing is already pending and will see this change too
            elif isinstance(message, Exception) and not server.transport_error_reported:
                server.transport_error_reported = True
                logger.warning("%s: transport error (later ones are not reported): %s", server.config.alias, message)

        return handle

    async def _follow_changes(self, server: _Server) -> None:
        async for _ in server.changes_receive:
            session = server.session
            if session is None:
                return
            try:
                with anyio.fail_after(self.connect_timeout):
                    server.tools = await list_all_tools(session)
            except Exception as exc:
                logger.warning("%s: re-listing tools failed: %s", server.config.alias, _describe(exc))
                continue
            logger.info("%s: tool list changed, now %d tools", server.config.alias, len(server.tools))
            self._publish()

    def _publish(self, *, strict: bool = False) -> None:
        """Rebuild the published names; ``strict`` (at start) turns a ``never`` clash into an error."""
        connected = [s for s in self._servers if s.session is not None]
        prefixed = should_prefix(self.prefix, len(connected))
        entries = [(s, tool) for s in connected for tool in s.tools if s.config.allows(tool.name)]
        pairs = [(s.config.alias, tool.name) for s, tool in entries]
        self._check_collisions(pairs, prefixed, strict=strict)
        self._report_duplicates(pairs)
        names = publish_names(pairs, prefixed=prefixed, reserved=self.reserved_names)
        published: dict[str, PublishedTool] = {}
        for server, tool in entries:
            name = names[(server.config.alias, tool.name)]
            published.setdefault(name, self._reuse(name, server, tool))
        self._published = published
        self._prefixed = prefixed
        self.tools_version += 1

    def _reuse(self, name: str, server: _Server, tool: mcp_types.Tool) -> PublishedTool:
        """The already published entry when nothing about it changed (its sanitised schemas stay cached)."""
        old = self._published.get(name)
        if old is not None and old.alias == server.config.alias and old.tool == tool and old.trusted == server.config.trust:
            return old
        return PublishedTool(name, server.config.alias, tool, server.config.trust)

    def _check_collisions(self, pairs: list[tuple[str, str]], prefixed: bool, *, strict: bool) -> None:
        clashes = collisions(pairs, prefixed=prefixed, reserved=self.reserved_names)
        if not clashes:
            return
        if self.prefix == "never" and strict:
            raise NameCollisionError(clashes, self.reserved_names)
        advice = "; use prefix auto or always, or includeTools/excludeTools" if self.prefix == "never" else ""
        logger.warning("%s; they are published with a hash suffix%s", describe_collisions(clashes, self.reserved_names), advice)

    def _report_duplicates(self, pairs: list[tuple[str, str]]) -> None:
        """Note, once per tool name, the tools that more than one server offers. At info level: the prefixes
        publish each under its own name (without them a clash is a collision, reported as one), and a
        configuration of several servers on purpose, such as two coretools on two roots, is not a problem to
        warn about at every run."""
        offered: dict[str, list[str]] = {}
        for alias, tool in pairs:
            offered.setdefault(tool, []).append(alias)
        shared = {tool: aliases for tool, aliases in offered.items() if len(set(aliases)) > 1}
        new = {tool: aliases for tool, aliases in shared.items() if tool not in self._reported_duplicates}
        if not new or self.prefix == "never":
            return
        self._reported_duplicates.update(new)
        listed = "; ".join(f"{tool} ({', '.join(aliases)})" for tool, aliases in new.items())
        logger.info("tools offered by more than one server, published once per server under its prefix: %s", listed)

    # ---------------------------------------------------------------------------------- queries

    @property
    def instructions(self) -> list[ServerInstructions]:
        """The instructions of the connected servers that sent any, in configuration order."""
        return [
            ServerInstructions(s.config.alias, s.instructions, self._tool_prefix(s.config.alias))
            for s in self._servers
            if s.session is not None and s.instructions.strip()
        ]

    def instruction_blocks(self) -> list[str]:
        """What the loops add to the system instruction: one attributed, capped block per server.

        Empty when the bridge was made with ``server_instructions=False``."""
        if not self.server_instructions:
            return []
        per_server, total = self.instruction_limits
        return render_blocks(self.instructions, per_server=per_server, total=total)

    def _tool_prefix(self, alias: str) -> str:
        return sanitize_part(alias) + SEPARATOR if self._prefixed else ""

    @property
    def failures(self) -> list[ServerFailure]:
        return [s.failure for s in self._servers if s.failure is not None]

    @property
    def connected(self) -> list[str]:
        """Aliases of the servers with a live session."""
        return [s.config.alias for s in self._servers if s.session is not None]

    @property
    def server_pids(self) -> dict[str, int]:
        """Process ids of the stdio servers that were started."""
        return {s.config.alias: s.process.pid for s in self._servers if s.process is not None and s.process.pid}

    @property
    def tools(self) -> list[PublishedTool]:
        return list(self._published.values())

    def lookup(self, name: str) -> PublishedTool | None:
        return self._published.get(name)

    def function_declarations(self, profile: Profile = "json") -> list[dict[str, Any]]:
        return [tool.declaration(profile) for tool in self._published.values()]

    def gemini_tools(self, profile: Profile = "json") -> list[dict[str, Any]]:
        """The request's ``tools`` value for the REST API (plain dicts)."""
        return gemini_tools(self.function_declarations(profile))

    def genai_tools(self, profile: Profile = "json") -> list[Any]:
        """The same as ``google.genai.types.Tool`` objects (needs the ``genai`` extra)."""
        from .genai_types import to_genai_tools

        return to_genai_tools(self.gemini_tools(profile))

    def openai_tools(self) -> list[dict[str, Any]]:
        return [openai_tool(d) for d in self.function_declarations("json")]

    # ---------------------------------------------------------------------------------- calls

    async def call(self, name: str, arguments: Any = None, *, call_id: str | None = None) -> ToolOutcome:
        """Run the tool published as ``name``; every failure becomes an error outcome."""
        tool = self._published.get(name)
        if tool is None:
            return error_outcome(name, f"Unknown tool: {name}", call_id=call_id)
        server = next(s for s in self._servers if s.config.alias == tool.alias)
        client = server.client
        if client is None:
            return error_outcome(name, f"the MCP server '{tool.alias}' is not connected", call_id=call_id)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return error_outcome(name, f"arguments must be a JSON object, got {type(arguments).__name__}", call_id=call_id)
        arguments = coerce_arguments(tool.input_schema, arguments)
        if self.confirm is not None and not tool.trusted and not await self.confirm(tool, arguments):
            return error_outcome(name, "the user declined to run this tool", call_id=call_id)
        timeout = server.config.timeout
        try:
            # The SDK's own request timeout fires first and tells the server to cancel; the
            # outer scope only guards against a transport that stops answering altogether.
            # ``Client.call_tool`` also runs 2026-07-28 ``input_required`` rounds.
            with deadline(timeout + 5) as (guard, _):
                result = await client.call_tool(tool.original_name, arguments, read_timeout_seconds=timeout)
            if guard.cancelled_caught:
                return error_outcome(name, f"timed out after {timeout:g} s", call_id=call_id)
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                return error_outcome(name, f"timed out after {timeout:g} s", call_id=call_id)
            refused = server.auth.describe() if server.auth is not None and exc.code == mcp_types.INTERNAL_ERROR else None
            return error_outcome(name, refused or f"MCP error {exc.code}: {exc.message}", call_id=call_id)
        except Exception as exc:
            return error_outcome(name, self._reason(server, exc), call_id=call_id)
        return outcome_from_result(name, result, call_id=call_id, has_output_schema=tool.tool.output_schema is not None)

    async def call_many(self, calls: Sequence[tuple[str, Any, str | None]]) -> list[ToolOutcome]:
        """Run ``(name, arguments, call_id)`` calls concurrently; outcomes in the given order."""
        outcomes: list[ToolOutcome | None] = [None] * len(calls)

        async def run(index: int, name: str, arguments: Any, call_id: str | None) -> None:
            outcomes[index] = await self.call(name, arguments, call_id=call_id)

        async with anyio.create_task_group() as task_group:
            for index, (name, arguments, call_id) in enumerate(calls):
                task_group.start_soon(run, index, name, arguments, call_id)
        return [o for o in outcomes if o is not None]

    async def dispatch(
        self, content: Mapping[str, Any], *, include_ids: bool = True, multimodal: bool = False
    ) -> dict[str, Any] | None:
        """Answer a model ``Content``: run all its ``functionCall``s, return the ``user`` turn.

        ``None`` when the content has no calls. ``include_ids=False`` leaves call ids out of
        the responses (Vertex rejects them); ``multimodal`` nests images inside the responses
        (Gemini 3) instead of adding them as sibling parts.
        """
        calls = function_calls(content)
        if not calls:
            return None
        outcomes = await self.call_many([(c.get("name", ""), c.get("args"), c.get("id")) for c in calls])
        return function_response_content(outcomes, include_ids=include_ids, multimodal=multimodal)

    async def run_calls(self, calls: Sequence[ToolOutcome | tuple[str, Any, str | None]]) -> list[ToolOutcome]:
        """Like :meth:`call_many`, but an item that is already an outcome (a call that could not
        be read) is passed through in its place instead of being run."""
        pending = [(i, c) for i, c in enumerate(calls) if not isinstance(c, ToolOutcome)]
        results = dict(zip((i for i, _ in pending), await self.call_many([c for _, c in pending])))
        return [c if isinstance(c, ToolOutcome) else results[i] for i, c in enumerate(calls)]

    async def openai_outcomes(self, tool_calls: Sequence[Mapping[str, Any]]) -> list[ToolOutcome]:
        """Run OpenAI ``tool_calls``; ``arguments`` that are not valid JSON get an error outcome."""
        prepared: list[ToolOutcome | tuple[str, Any, str | None]] = []
        for tool_call in tool_calls:
            function = tool_call.get("function") or {}
            name = function.get("name", "")
            raw = function.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
            except ValueError as exc:
                prepared.append(error_outcome(name, f"the arguments are not valid JSON ({exc}): {raw[:200]!r}"))
                continue
            prepared.append((name, arguments, tool_call.get("id")))
        return await self.run_calls(prepared)

    async def call_openai(self, tool_calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Answer OpenAI ``tool_calls`` with ``role: tool`` messages, in call order.

        ``arguments`` is a JSON string that the model may have botched; such a call gets an
        error message back instead of being run.
        """
        outcomes = await self.openai_outcomes(tool_calls)
        return [openai_tool_message(o, tc.get("id", "")) for o, tc in zip(outcomes, tool_calls)]


async def list_all_tools(session: ClientSession) -> list[mcp_types.Tool]:
    """Every page of ``tools/list`` (the SDK's client validates results only for listed tools)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    else:
        logger.warning("tools/list still paginating after %d pages; using what was listed", MAX_LIST_PAGES)
    return tools


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """A one-line reason for an error, unwrapped from exception groups."""
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
