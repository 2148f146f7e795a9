"""The MCP layer: lists the registry, validates, runs, and turns every failure into a result.

It knows no tool by name: its instructions are built from the published tools' hints, and the resources
they offer come from the tools themselves. Per connection it asks the client for its roots (2025-era
connections that offer them) and has `workspaces.py` decide the workspace, builds the tool context (progress,
user confirmation through elicitation when the client supports it) and hands the call to `ToolSet`. A
result's links to files (`resource_link`) reach only clients whose protocol version has them.
"""

from __future__ import annotations

import gc
import logging
import sys
import warnings
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
from mcp import MCPError, types
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp_types.version import is_version_at_least

from coretools import __version__
from coretools.errors import ToolError
from coretools.server.config import ServerConfig
from coretools.server.limits import CallLimiter
from coretools.server.resources import Resources, published
from coretools.server.sessionless import SessionlessViews, client_identity, sessionless
from coretools.server.toolset import ToolSet
from coretools.server.workspaces import Workspaces
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.session import PROCESS, SessionScope
from coretools.workspace.views import FileViews
from coretools.tools.base import Elicitation, ToolContext, ToolResult

logger = logging.getLogger("coretools")

PREAMBLE = "coretools gives you Gemini CLI's core tools over a sandboxed workspace."
IGNORED = """\
Ignored files: walks ({walks}) skip what .gitignore and
.geminiignore match and the default excludes (dependency, build and cache directories such as node_modules,
dist, build, __pycache__, and .git); each of those tools has a parameter to include them."""
CLOSING = """\
Protected files: anything inside a .git directory and secret environment files (.env, .env.local, ...; not
.env.example) are refused by every tool{protected}.
Errors explain what went wrong and how to fix the call; read them and retry accordingly."""


def instructions(toolset: ToolSet, config: ServerConfig | None = None) -> str:
    """The server's instructions: the workspace roots, one line per published tool (its `hint`), then how
    ignore files, protected files and errors work. Built from the registry and the configuration, so a tool is
    named here exactly when it is published. Instructions are fixed when a client connects; a client whose
    own roots narrow the workspace later learns the current roots from any path error."""
    config = config or toolset.config
    lines = [PREAMBLE, _workspace_line(config), "The tools:"]
    lines += [f"- {tool.name}: {tool.hint}" for tool in toolset.tools() if tool.hint]
    walks = [tool.name for tool in toolset.tools() if tool.skips_ignored]
    if walks:
        lines.append(IGNORED.format(walks=", ".join(walks)))
    protected = " (this server was started with --allow-protected, so they are not)" if config.allow_protected else ""
    lines.append(CLOSING.format(protected=protected))
    return "\n".join(lines)


def _workspace_line(config: ServerConfig) -> str:
    if not config.roots:
        return (
            "The workspace is the set of roots your client offers (else the server's working directory); a "
            "\"Path not in workspace\" error lists them. Paths may be absolute or relative to the first root."
        )
    primary = f"Workspace root: {config.roots[0]}" if len(config.roots) == 1 else (
        f"Workspace roots: {config.roots[0]} (primary), " + ", ".join(config.roots[1:])
    )
    return (
        f"{primary}. Relative paths resolve against {config.roots[0]}; nothing outside the root"
        f"{'s' if len(config.roots) > 1 else ''} can be read or written. If your client offers roots of its "
        "own, the workspace narrows to them, and a path error lists the current roots."
    )


class Sessions:
    """What each session was shown of the workspace's files (the stale-write guard's record).

    Over stdio the process serves one client, so the process is the session, in either protocol era. Over
    HTTP a session is a 2025-era stateful session, held as long as its connection lives. Stateless HTTP and
    2026-era HTTP requests stand alone, with no session: their record is kept per client, named by what
    each request says of its sender (`sessionless.py`), within the session record's bounds."""

    def __init__(self, config: ServerConfig) -> None:
        self._process = FileViews() if config.http.transport == "stdio" else None
        self._sessionless = SessionlessViews(config.http.max_sessions, config.http.session_idle_timeout)
        self._by_connection: weakref.WeakKeyDictionary[Any, FileViews] = weakref.WeakKeyDictionary()
        self._scopes: weakref.WeakKeyDictionary[Any, SessionScope] = weakref.WeakKeyDictionary()
        self._live: weakref.WeakSet[SessionScope] = weakref.WeakSet()

    def scope(self, ctx: ServerRequestContext) -> tuple[SessionScope, bool]:
        """The session's private scope (`sandbox/session.py`), and whether it is the call's own (no
        session to keep it: the caller closes it after the call). Over stdio the process is the session;
        over HTTP a scope lives as long as the SDK keeps the connection, and ends when it is dropped (DELETE,
        idle expiry, a stateless request's end)."""
        if self._process is not None:
            return PROCESS, False
        key = _connection_key(ctx)
        try:
            scope = self._scopes.get(key) if key is not None else None
            if scope is None and key is not None:
                scope = self._scopes[key] = SessionScope("http", per_call=sessionless(ctx.request))
                weakref.finalize(key, scope.close_now)
                # The connection is freed only by the cycle collector, which a quiet server may not run for
                # long: its end (DELETE, idle expiry) closes the scope at once.
                ending = getattr(key, "exit_stack", None)
                if ending is not None:
                    ending.callback(scope.close_now)
                self._live.add(scope)
        except TypeError:  # a connection that cannot be referenced weakly
            scope = None
        if scope is None:
            return SessionScope("call", per_call=True), True
        return scope, False

    @asynccontextmanager
    async def entered(self, ctx: ServerRequestContext) -> AsyncIterator[SessionScope]:
        """The request's session scope (`scope`) for the length of the request, closed after it when it is
        the request's own."""
        scope, own = self.scope(ctx)
        try:
            yield scope
        finally:
            if own:
                with anyio.CancelScope(shield=True):
                    await scope.aclose()

    async def aclose(self) -> None:
        for scope in list(self._live):
            await scope.aclose()

    def views(self, ctx: ServerRequestContext) -> FileViews | None:
        if self._process is not None:
            return self._process
        if sessionless(ctx.request):
            session = ctx.session
            info = session.client_params.client_info if session.client_params is not None else None
            identity = client_identity(ctx.request, ctx.protocol_version, info, session.client_capabilities)
            return self._sessionless.views(identity)
        key = _connection_key(ctx)
        if key is None:
            return None
        try:
            views = self._by_connection.get(key)
            if views is None:
                views = self._by_connection[key] = FileViews()
            return views
        except TypeError:  # a connection object that cannot be referenced weakly has no record
            return None


def _connection_key(ctx: ServerRequestContext) -> Any:
    # The SDK hands out a per-request session proxy; the connection behind it is what roots belong to.
    return getattr(ctx.session, "_connection", None)


def _peer_address(ctx: ServerRequestContext) -> str | None:
    """The client a call comes from, for its share of the call slots: over HTTP the address of the peer
    that sent the request (the port differs per connection, so it is left out; the bearer token, one for
    every client, names none of them); None over stdio, which serves one client."""
    request = ctx.request
    peer = request.scope.get("client") if request is not None else None
    return peer[0] if peer else None


async def _client_roots(ctx: ServerRequestContext) -> list[str]:
    session = ctx.session
    caps = session.client_capabilities
    if caps is None or caps.roots is None or not session.can_send_request:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with anyio.fail_after(10):
                result = await session.list_roots()
    except Exception as exc:  # noqa: BLE001 - a client that cannot answer roots/list just has no roots
        logger.info("roots/list failed: %s", exc)
        return []
    paths = []
    for root in result.roots:
        uri = str(root.uri)
        if uri.startswith("file://"):
            paths.append(unquote(urlparse(uri).path))
    return paths


def _elicitor(ctx: ServerRequestContext):
    session = ctx.session
    caps = session.client_capabilities
    if caps is None or caps.elicitation is None or not session.can_send_request:
        return None

    async def elicit(message: str, schema: dict[str, Any]) -> Elicitation:
        result = await session.elicit_form(message, schema, related_request_id=ctx.request_id)
        return Elicitation(result.action, result.content)

    return elicit


LINKS_SINCE = "2025-06-18"
"""The first protocol version with `resource_link` content: a client that negotiated an older one is sent a
result without its links (the text names the same files)."""

TOOL_LIST_HINT = CacheHint(ttl_ms=24 * 3600 * 1000, scope="private")
"""The published tools are chosen at start and never change while the server runs: a 2026-07-28 client may
keep `tools/list` for a day (the hint has no "forever"). Private: the answer is for this server's own
clients, never one to share across authorization contexts."""


def build_server(config: ServerConfig, toolset: ToolSet | None = None) -> tuple[Server, ToolSet]:
    toolset = toolset or ToolSet(config)
    workspaces = Workspaces(config)
    sessions = Sessions(config)

    async def workspace_for(ctx: ServerRequestContext) -> Workspace:
        return await workspaces.for_connection(_connection_key(ctx), lambda: _client_roots(ctx))

    resources = Resources(workspace_for, published(toolset.resources(), config.http.transport), sessions.entered)

    @asynccontextmanager
    async def lifespan(_: Server) -> AsyncIterator[dict[str, Any]]:
        await toolset.start()
        try:
            yield {}
        finally:
            with anyio.CancelScope(shield=True):
                await sessions.aclose()
                await PROCESS.aclose()
                await toolset.aclose()

    # The published tools are fixed at start, so their listing is dumped once, as the SDK would dump the
    # model at every request (it takes a handler's dict as that dump, and still checks it against the
    # protocol version's schema). The freshness fields are left to the SDK, which fills them from
    # TOOL_LIST_HINT where a dict does not set them.
    listing = types.ListToolsResult(tools=toolset.definitions()).model_dump(
        by_alias=True, mode="json", exclude_none=True, exclude={"ttl_ms", "cache_scope"}
    )

    async def on_list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        if params is not None and params.cursor:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor: this server lists every tool on one page")
        return listing

    async def run_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> ToolResult:
        published = toolset.find(params.name)
        if published is None:
            raise MCPError(code=types.INVALID_PARAMS, message=toolset.unknown_tool_message(params.name))
        try:
            workspace = await workspace_for(ctx)
        except ToolError as exc:
            return ToolResult.from_error(exc)

        async def progress(done: float, total: float | None = None, message: str | None = None) -> None:
            try:
                await ctx.session.report_progress(done, total, message)
            except Exception:  # noqa: BLE001 - progress is best effort; the call goes on
                logger.debug("progress notification failed", exc_info=True)

        async with sessions.entered(ctx) as scope:
            tool_ctx = ToolContext(
                workspace=workspace, report_progress=progress, elicit=_elicitor(ctx), views=sessions.views(ctx),
                session=scope,
            )
            return await toolset.run(published, params.name, params.arguments, tool_ctx)

    guarded = CallLimiter.from_config(config).guard(run_tool, key=_connection_key, client=_peer_address)
    structured = config.structured_content

    async def on_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        result: ToolResult = await guarded(ctx, params)
        return result.to_mcp(structured=structured, links=is_version_at_least(ctx.protocol_version, LINKS_SINCE))

    async def on_roots_changed(ctx: ServerRequestContext, params: types.NotificationParams | None) -> None:
        workspaces.forget(_connection_key(ctx))

    server: Server = Server(
        "coretools",
        version=__version__,
        title="coretools",
        description="Gemini CLI's core tools (files, search, shell, web, memory) in a sandboxed workspace",
        instructions=instructions(toolset, config),
        website_url="https://pypi.org/project/coretools-mcp/",
        lifespan=lifespan,
        get_tool_input_schema=lambda name: (t.input_schema if (t := toolset.get(name)) else None),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        cache_hints={"tools/list": TOOL_LIST_HINT},
        **resources.handlers(),
    )
    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, on_roots_changed)
    _drop_idle_tracing(server)
    return server, toolset


def _drop_idle_tracing(server: Server) -> None:
    """Remove the SDK's OpenTelemetry middleware when no tracer provider is configured at start.

    The SDK wraps every request in a span; without a provider (the OpenTelemetry API's proxy) each span
    is a no-op that still costs its attributes, context extraction and context switch. A provider set
    before the server starts (as `opentelemetry-instrument` does) keeps the middleware, and its spans."""
    try:
        from mcp.server._otel import OpenTelemetryMiddleware
        from opentelemetry import trace
    except ImportError:
        return
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]


def settle_heap() -> None:
    """Put what was built at start (the SDK, the schemas, the tool registry) out of the cyclic garbage
    collector's sight. None of it becomes garbage while the server runs, yet each collection of the oldest
    generation would walk all of it again; frozen, collections look only at what calls allocate.

    Also fixes glibc's mmap threshold at 128 KiB (`_return_large_blocks`)."""
    gc.collect()
    gc.freeze()
    _return_large_blocks()


LARGE_BLOCK_BYTES = 128 * 1024
_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


def _return_large_blocks() -> None:
    """Have glibc's malloc serve every block of LARGE_BLOCK_BYTES or more from its own mapping, given back to
    the system when freed.

    By default glibc raises that threshold to the size of the largest block freed so far (up to 32 MiB), so
    after one big answer (a read_many_files of a megabyte, ripgrep's output) later ones come from the heap,
    which fragments and stays at its high-water mark: over a warm benchmark the server settled ~8 MiB
    higher than with the threshold fixed. Setting it explicitly turns that adjustment off. A no-op where the
    C library has no `mallopt` (not glibc)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES)


async def serve_stdio(config: ServerConfig) -> None:
    from mcp.server.stdio import stdio_server

    from coretools.server.stdio import answering, claim_pipes, message_streams

    server, _ = build_server(config)
    settle_heap()
    with claim_pipes(config.max_message_bytes) as pipes:
        # our event-loop pipes where we can have them (see coretools.server.stdio), else the SDK's own
        streams = message_streams(pipes, config.max_message_bytes) if pipes else answering(stdio_server())
        async with streams as (read, write):
            await server.run(read, write, server.create_initialization_options())
