"""Streamable HTTP transport: one coretools daemon shared by several MCP hosts and agents.

The app is the SDK's streamable HTTP app built from the low-level server (`Server.streamable_http_app`), so
progress notifications and cancellation travel over SSE responses exactly as the SDK implements them; a
request for the MCP path reaches the SDK's session manager directly (`McpRoute`), not through Starlette.
Around it this module adds what a shared daemon needs:

- a safe bind: loopback by default; a non-loopback address is refused without a bearer token unless the
  operator says `--insecure-no-auth`;
- `RequestGate`, in front of everything, for every method and path: DNS-rebinding protection (Host and
  Origin checks, always on, widened by `--allowed-host` and `--allowed-origin`; `Origin: null` is never
  trusted), then, with `--auth-token-env NAME`, `Authorization: Bearer <token>` (401 otherwise), then the
  `MCP-Protocol-Version` header (400 naming the supported versions). A refusal closes its connection. The
  OAuth discovery paths under `/.well-known/` answer a plain 404: the token is not OAuth;
- cancellation the SDK alone would miss (`http_cancel`): a stateful request whose client disconnected, and
  a cancel POSTed for a call running outside a session (stateless or 2026-07-28), honoured for its caller;
- bounded sessions (`http_sessions`): `--max-sessions` open at once, the least recently active idle one
  ended to admit a new one (only when all are busy, a 503 whose body names the limit), and
  `--session-idle-timeout` for the ones a client abandoned;
- the connection guard (`http_guard`): at most `--max-connections` connections, a new one displacing a
  stalled one; `--read-timeout` for a complete request; the soft descriptor limit raised; rate-limited
  logging with one summary line per interval;
- uvicorn with logs on stderr and a bounded graceful shutdown on SIGINT/SIGTERM.

`serve_http(config)` returns the process exit code: 0 after a clean shutdown, 2 for an HTTP setting that is
refused (a `ConfigurationError`, with a message on stderr saying how to fix it); the one a tool raises while
the tools are built is left to the CLI, which reports it the same way.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
import os
import signal
import socket
import sys
from dataclasses import dataclass
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple

import pydantic_core
from mcp_types import PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from coretools.errors import ConfigurationError
from coretools.sandbox.process_settings import hold_secret
from coretools.sandbox.settings import limit_option
from coretools.server.config import (
    DEFAULT_HOST, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_PATH, DEFAULT_READ_TIMEOUT,
    DEFAULT_SESSION_IDLE_TIMEOUT, ServerConfig,
)  # fmt: skip
from coretools.server.http_asgi import header, normal_path, request_path, send_body, send_json_error
from coretools.server.message_errors import invalid_json_reason, request_id

logger = logging.getLogger("coretools.http")

EXIT_OK, EXIT_USAGE = 0, 2
GRACEFUL_SHUTDOWN_SECONDS = 5.0
KEEP_ALIVE_SECONDS = 5.0
# Loopback names with any port, or none (the scheme's default port: `curl http://localhost/mcp` on port 80)
LOOPBACK_HOSTS = [f"{name}{port}" for name in ("127.0.0.1", "localhost", "[::1]") for port in ("", ":*")]
LOOPBACK_ORIGINS = [f"http://{name}" for name in LOOPBACK_HOSTS]
WELL_KNOWN = "/.well-known/"
SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)



@dataclass
class HttpSettings:
    host: str
    port: int
    path: str
    stateless: bool
    token: str | None
    allowed_hosts: list[str]
    allowed_origins: list[str]
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_sessions: int | None = DEFAULT_MAX_SESSIONS  # None: no limit
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT  # None: sessions never expire

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}{self.path}"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach: 127.0.0.0/8, ::1 and the name localhost."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # any other host name may resolve to a public address: treat it as non-loopback


def settings_from(config: ServerConfig, environ: dict[str, str] | None = None) -> HttpSettings:
    """Read and check the HTTP options; raise `ConfigurationError` for anything unsafe or unusable."""
    env = os.environ if environ is None else environ
    options = config.http
    host = options.host or DEFAULT_HOST
    port = options.port
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port {port} is not a TCP port; use 1-65535 (or 0 for any free port)")
    path = options.path or DEFAULT_PATH
    if not path.startswith("/"):
        path = "/" + path
    token: str | None = None
    token_env = options.auth_token_env
    if token_env:
        token = env.get(token_env, "")
        if not token.strip():
            raise ConfigurationError(
                f"--auth-token-env {token_env}: the environment variable {token_env} is unset or empty; "
                f"set it to a long random secret (e.g. `export {token_env}=$(openssl rand -hex 32)`)"
            )
        token = token.strip()
        hold_secret(token_env, env.get(token_env, ""))
    if not is_loopback(host) and token is None and not options.insecure_no_auth:
        raise ConfigurationError(
            f"refusing to serve on {host}, which is not a loopback address, without authentication: anyone "
            "who can reach it could read and change the workspace. Pass --auth-token-env NAME (clients then "
            "send 'Authorization: Bearer <token>'), bind to 127.0.0.1, or, only on a network you fully trust, "
            "add --insecure-no-auth"
        )
    allowed_origins = [o.rstrip("/") for o in options.allowed_origin]
    if "null" in (o.lower() for o in allowed_origins):
        raise ConfigurationError(
            "--allowed-origin null would let any web page in: sandboxed iframes, file:// and data: pages all "
            "send 'Origin: null'. Allow the real origin of the page instead"
        )
    max_sessions = _whole_number("max_sessions", options.max_sessions, least=0)
    idle = _seconds("session_idle_timeout", options.session_idle_timeout, zero_allowed=True)
    return HttpSettings(
        host=host,
        port=port,
        path=path,
        stateless=options.stateless,
        token=token,
        allowed_hosts=list(options.allowed_host),
        allowed_origins=allowed_origins,
        max_connections=_whole_number("max_connections", options.max_connections, least=1),
        read_timeout=_seconds("read_timeout", options.read_timeout, zero_allowed=False),
        max_sessions=limit_option(max_sessions, "--max-sessions"),
        session_idle_timeout=limit_option(idle, "--session-idle-timeout"),  # 0: sessions never expire
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _whole_number(name: str, value: int, least: int) -> int:
    value = int(value)
    if value < least:
        raise ConfigurationError(f"{_flag(name)} {value}: use a whole number of at least {least}")
    return value


def _seconds(name: str, value: float, zero_allowed: bool) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_allowed):
        rule = "0 or more" if zero_allowed else "more than 0"
        raise ConfigurationError(f"{_flag(name)} {value:g}: use a number of seconds, {rule}")
    return value


def transport_security(settings: HttpSettings):
    """DNS-rebinding protection: loopback names always, plus the bind address and what the operator allows.

    A bare `--allowed-host example.com` accepts it with or without a port (`example.com`, `example.com:*`).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = list(LOOPBACK_HOSTS)
    if not settings.loopback and not _is_wildcard(settings.host):
        bound = f"[{settings.host}]" if ":" in settings.host else settings.host
        hosts += [bound, f"{bound}:*"]
    for entry in settings.allowed_hosts:
        hosts.append(entry)
        if not _has_port(entry):
            hosts.append(f"{entry}:*")
    origins = list(LOOPBACK_ORIGINS) + [o.rstrip("/") for o in settings.allowed_origins]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


def _is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "[::]", "")


def _has_port(host_entry: str) -> bool:
    if host_entry.startswith("["):  # [v6]:port
        return "]:" in host_entry
    return host_entry.count(":") == 1


class Refusal(NamedTuple):
    """A request the gate answers itself: HTTP status, JSON-RPC error message, code and data, headers."""

    status: int
    message: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    code: int = -32001
    data: Any = None


class RequestGate:
    """ASGI middleware in front of everything, for every method and path: Host, then Origin, then the token,
    then, on the MCP path, the protocol version.

    The SDK checks Host and Origin inside a session's transport, after it has looked the session up, and
    not at all for other paths; this gate answers every request the same way whatever session, method or
    path it names. A foreign Host gets 421, a foreign Origin (including `null`) 403. With a token, a
    missing or wrong one gets 401 with a `WWW-Authenticate: Bearer` challenge; tokens are compared in
    constant time. Every refusal has a JSON-RPC error body (MCP clients show its message) and closes its
    connection, so a refused peer keeps nothing open.

    `/.well-known/...` answers a plain 404 before the token is checked: this server publishes no OAuth
    metadata, and a 401 there would send an MCP client into an OAuth flow that cannot work. An
    `MCP-Protocol-Version` header naming a version the SDK does not speak gets a 400 listing the ones it
    does (the SDK would route it to its 2026-07-28 entry and complain about a `_meta` envelope instead).
    """

    def __init__(self, app: Any, security: Any, token: str | None, stats: Any = None, path: str = "/mcp") -> None:
        self.app = app
        self._hosts = [h.lower() for h in security.allowed_hosts]
        self._origins = [o.lower() for o in security.allowed_origins]
        self._token = token.encode() if token is not None else None
        self._stats = stats
        self._path = normal_path(path)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._origin_refusal(scope)
        if refusal is None and request_path(scope).startswith(WELL_KNOWN):
            await send_body(send, 404, b"Not Found", [(b"content-type", b"text/plain; charset=utf-8")])
            return
        refusal = refusal or self._token_refusal(scope) or self._version_refusal(scope)
        if refusal is None:
            await self.app(_lowercase_host(scope), receive, send)
            return
        if self._stats is not None:
            self._stats.requests_refused += 1
        headers = [*refusal.headers, (b"connection", b"close")]
        await send_json_error(send, refusal.status, refusal.message, headers, code=refusal.code, data=refusal.data)

    def _origin_refusal(self, scope: dict) -> Refusal | None:
        host = header(scope, b"host")
        if host is None or not _allowed(host.decode("latin-1").lower(), self._hosts):
            return Refusal(421, "Misdirected request: this server does not answer to that Host (see --allowed-host).")
        origin = header(scope, b"origin")
        if origin is not None and not _allowed(origin.decode("latin-1").lower(), self._origins):
            return Refusal(403, "Forbidden: requests from this Origin are not accepted (see --allowed-origin).")
        return None

    def _token_refusal(self, scope: dict) -> Refusal | None:
        if self._token is None:
            return None
        presented = _bearer(scope)
        if presented is not None and hmac.compare_digest(presented, self._token):
            return None
        if presented is None:
            challenge = 'Bearer realm="coretools"'
            message = "Authentication required: send the header 'Authorization: Bearer <token>'."
        else:
            challenge = 'Bearer realm="coretools", error="invalid_token"'
            message = "Invalid bearer token: check the token configured for this server."
        return Refusal(401, message, ((b"www-authenticate", challenge.encode()),))

    def _version_refusal(self, scope: dict) -> Refusal | None:
        requested = header(scope, b"mcp-protocol-version")
        if requested is None or request_path(scope) != self._path:
            return None
        version = requested.decode("latin-1").strip()
        if version in SUPPORTED_VERSIONS:
            return None
        shown = version if len(version) <= 40 else version[:40] + "..."
        message = (
            f"Unsupported MCP-Protocol-Version header {shown!r}: this server speaks "
            f"{', '.join(HANDSHAKE_PROTOCOL_VERSIONS)} (after an initialize handshake) and "
            f"{', '.join(MODERN_PROTOCOL_VERSIONS)}. Send one of these, or no header on the initialize request."
        )
        data = {"supported": list(SUPPORTED_VERSIONS), "requested": shown}
        return Refusal(400, message, code=UNSUPPORTED_PROTOCOL_VERSION, data=data)


def _lowercase_host(scope: dict) -> dict:
    """`scope` with its Host header in lower case, as the SDK's own Host check (behind this gate) compares
    it: host names are case-insensitive, and `Host: LOCALHOST` passed the gate."""
    host = header(scope, b"host")
    if host is None or host == host.lower():
        return scope
    headers = [(name, value.lower() if name == b"host" else value) for name, value in scope["headers"]]
    return {**scope, "headers": headers}


def _allowed(value: str, patterns: list[str]) -> bool:
    """`value` equals a pattern, or a pattern ends in `:*` and `value` is its prefix plus a numeric port."""
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            prefix = pattern[:-1]
            if value.startswith(prefix) and value[len(prefix) :].isdigit():
                return True
    return False


class ParseErrorNotice:
    """ASGI middleware: when the SDK refuses a POST's body as invalid JSON (HTTP 400, JSON-RPC -32700), the
    answer says what is wrong and where (`message_errors.invalid_json_reason`: a lone surrogate escape by
    name, nesting too deep, a raw control character) and carries the request's id when it can be read.

    It sits right in front of the SDK, behind the middlewares that buffer the body, so keeping the body for
    the rare refusal holds a reference to bytes already in memory, not a copy.
    """

    def __init__(self, app: Any, path: str) -> None:
        self.app = app
        self.path = normal_path(path)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not (scope["type"] == "http" and scope["method"] == "POST" and request_path(scope) == self.path):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        held: dict | None = None

        async def keeping_receive() -> dict:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        async def noticing_send(message: dict) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message.get("status") == 400:
                held = message  # sent with the body, whose length may change
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            start, held = held, None
            body = _described_parse_error(message.get("body", b""), b"".join(chunks))
            if body is None:
                await send(start)
                await send(message)
                return
            headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, keeping_receive, noticing_send)


def _described_parse_error(answer: bytes, request: bytes) -> bytes | None:
    """The SDK's -32700 answer to `request` rewritten with what is wrong; None for any other answer."""
    try:
        error = json.loads(answer)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(error, dict) or error.get("code") != PARSE_ERROR:
        return None
    text = request.decode("utf-8", "replace")
    try:
        pydantic_core.from_json(text)
    except ValueError as exc:  # the parser's own words and position (the 2026-07-28 entry gives neither)
        parser_message = str(exc)
    else:
        return None
    message = f"Parse error: {invalid_json_reason(text, parser_message)}"
    reply = {"jsonrpc": "2.0", "id": request_id(text), "error": {"code": PARSE_ERROR, "message": message}}
    return json.dumps(reply).encode()


class McpRoute:
    """ASGI router: a request for the MCP path goes straight to the SDK's session manager
    (`StreamableHTTPSessionManager.handle_request`), anything else (the lifespan, other paths) to the SDK's
    Starlette app, which routes the MCP path to the same handler.

    Starlette's error and exception middlewares, its router and its route each add a frame to every
    request and a wrapper to every message sent; for the one path that carries calls the session manager
    needs none of them (it answers its own errors, and an exception still reaches uvicorn, which answers
    500). Only the exact path is taken: a trailing-slash variant keeps Starlette's redirect."""

    def __init__(self, app: Any, handle: Any, path: str) -> None:
        self.app = app
        self.handle = handle
        self.path = path

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == self.path:
            await self.handle(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _bearer(scope: dict) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                return credentials.strip()
            return b""  # present but not a bearer token: treated as a wrong token
    return None


def build_app(config: ServerConfig, settings: HttpSettings, stats: Any = None) -> Any:
    """The ASGI app: the SDK's streamable HTTP app for our server, with bounded sessions, behind the gate.

    `stats` (a `http_guard.ConnectionStats`) counts refused requests and sessions for the log summary."""
    from coretools.server import sse_response
    from coretools.server.app import build_server
    from coretools.server.http_cancel import CancelByCaller, CancelOnDisconnect
    from coretools.server.http_sessions import SessionCap

    sse_response.install()
    server, _ = build_server(config)
    security = transport_security(settings)
    app: Any = server.streamable_http_app(
        streamable_http_path=settings.path,
        stateless_http=settings.stateless,
        json_response=False,  # SSE responses: progress notifications and server->client requests need them
        transport_security=security,
        host=settings.host,
        max_sessions=settings.max_sessions,
        session_idle_timeout=settings.session_idle_timeout,
        max_request_body_size=config.max_message_bytes,
    )
    limit = config.max_message_bytes
    app = McpRoute(app, server.session_manager.handle_request, settings.path)
    app = ParseErrorNotice(app, settings.path)
    app = CancelByCaller(app, settings.path, keyed_on_token=settings.token is not None, max_body=limit)
    if not settings.stateless:
        app = CancelOnDisconnect(app, settings.path, limit)
        if settings.max_sessions is not None:
            app = SessionCap(app, settings.path, settings.max_sessions, stats, limit)
    return RequestGate(app, security, settings.token, stats, settings.path)


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves so `--port 0` works and the real port can be announced."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    if family == socket.AF_INET and not _is_wildcard(host):
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ConfigurationError(f"cannot resolve --host {host}: {exc.strerror}") from None
        family = infos[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]") or "0.0.0.0", port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def serve_http(config: ServerConfig) -> int:
    """Run the HTTP server until SIGINT/SIGTERM; return the exit code."""
    try:
        settings = settings_from(config)
        sock = bind_socket(settings.host, settings.port)
    except ConfigurationError as exc:
        sys.stderr.write(f"coretools-mcp: error: {exc}\n")
        return EXIT_USAGE
    try:
        return _run(config, settings, sock)
    finally:
        sock.close()


def _run(config: ServerConfig, settings: HttpSettings, sock: socket.socket) -> int:
    import asyncio

    import uvicorn

    from coretools.server import http_guard
    from coretools.server.app import settle_heap

    level = config.log_level or "warning"
    soft, _ = http_guard.raise_nofile_limit()
    cap = http_guard.connection_cap(settings.max_connections, soft)
    if cap < settings.max_connections:
        logger.info("at most %d connections: half the descriptor limit of %d", cap, soft)
    stats = http_guard.ConnectionStats()
    app = build_app(config, settings, stats)  # builds the tools: may raise ConfigurationError
    settle_heap()
    log_filter = http_guard.RateLimitFilter() if level != "debug" else None
    remove_filter = http_guard.install_log_filter(log_filter) if log_filter is not None else (lambda: None)
    uv_config = uvicorn.Config(
        app,
        http="httptools",
        ws="none",
        log_config=None,  # keep our logging setup: everything on stderr, nothing on stdout
        log_level=level,
        access_log=level == "debug",
        lifespan="on",
        timeout_keep_alive=min(KEEP_ALIVE_SECONDS, settings.read_timeout),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        server_header=False,
        proxy_headers=False,  # no proxy in front to trust: X-Forwarded-* from a local peer is not believed
    )
    server = http_guard.GuardedServer(
        uv_config, sock, cap=cap, read_timeout=settings.read_timeout, stats=stats, log_filter=log_filter
    )
    port = sock.getsockname()[1]

    # uvicorn re-raises the stop signal once it has shut down; with the default SIGTERM action that would kill
    # the process after a clean shutdown, so a no-op handler turns a SIGTERM into a normal exit.
    signal.signal(signal.SIGTERM, lambda *_: None)

    async def main() -> None:
        _declare_asyncio()
        announce = asyncio.ensure_future(_announce_when_started(server, settings, port))
        try:
            await server.serve()
        finally:
            announce.cancel()

    try:
        _loop_runner()(main())
    except KeyboardInterrupt:
        pass
    finally:
        remove_filter()
    if not server.started:
        sys.stderr.write("coretools-mcp: error: the HTTP server failed to start (see the log above)\n")
        return 1
    sys.stderr.write("coretools-mcp: HTTP server stopped\n")
    return EXIT_OK


def _loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """`uvloop.run` where uvloop is installed (not on Windows), else `asyncio.run`.

    uvloop's event loop (libuv, in C) spends less CPU per callback, timer and socket event than asyncio's,
    and the HTTP server runs several hundred of them per call.
    """
    try:
        import uvloop
    except ImportError:
        import asyncio

        return asyncio.run
    return uvloop.run


def _declare_asyncio() -> None:
    """Tell sniffio, for this task and every task and callback it starts, that the loop is asyncio.

    anyio asks sniffio which library runs it whenever it makes a cancel scope, an event or a checkpoint,
    a hundred times and more per call. Undeclared, sniffio finds out through `asyncio.current_task()`,
    whose `get_running_loop()` makes a `getpid()` system call on Python 3.11. `anyio.run` declares the
    library this way itself; `asyncio.run` does not. anyio's worker threads reset the declaration.
    """
    try:
        import sniffio
    except ImportError:  # anyio then asks asyncio directly
        return
    sniffio.current_async_library_cvar.set("asyncio")


async def _announce_when_started(server: Any, settings: HttpSettings, port: int) -> None:
    import asyncio

    while not server.started:
        await asyncio.sleep(0.02)
    if not settings.loopback and settings.token is None:
        logger.warning("serving a non-loopback address WITHOUT authentication (--insecure-no-auth)")
    if _is_wildcard(settings.host) and not settings.allowed_hosts:
        logger.warning(
            "bound to %s but no --allowed-host given: requests whose Host header is not a loopback name will "
            "be refused (421); add --allowed-host for the names clients use to reach this server",
            settings.host,
        )
    mode = "stateless" if settings.stateless else "stateful sessions"
    auth = "bearer token required" if settings.token else "no authentication"
    limits = f"at most {server.registry.cap} connections"
    if not settings.stateless:
        limits += f", {settings.max_sessions or 'unlimited'} sessions"
    sys.stderr.write(f"coretools-mcp: serving MCP over HTTP at {settings.url(port)} ({mode}; {auth}; {limits})\n")
    sys.stderr.flush()
