"""What the operator configured, typed: the workspace, the server's own settings, the HTTP transport's, and
each tool's options object.

The CLI builds one `ServerConfig` at start from the parsed command line (`from_namespace`; the tools'
options come from the registry, `coretools.server.toolset.tool_options`). Every server default is written
once, here: the command line's flags, these dataclasses and the HTTP layer's settings take their defaults from
the constants below, so a config built in code serves like `coretools-mcp serve`. (A tool's defaults are
written once too, in the fields of its options class.)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from coretools.sandbox.settings import refuse_negative
from coretools.tools.base import DEFAULT_RESULT_CHARS, options_from

__all__ = [
    "DEFAULT_CALL_TIMEOUT", "DEFAULT_HOST", "DEFAULT_MAX_CALLS", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_QUEUED_CALLS", "DEFAULT_MAX_SESSIONS", "DEFAULT_MAX_SESSION_CALLS",
    "DEFAULT_MAX_SESSION_QUEUED_CALLS", "DEFAULT_PATH", "DEFAULT_PORT", "DEFAULT_QUEUE_TIMEOUT",
    "DEFAULT_READ_TIMEOUT", "DEFAULT_RESULT_CHARS", "DEFAULT_SCHEMA_DIALECT", "DEFAULT_SESSION_IDLE_TIMEOUT",
    "DEFAULT_TRANSPORT", "HttpOptions", "ServerConfig",
]  # fmt: skip

# Which Gemini CLI version's tool names and schemas are published ("latest": the newest's).
DEFAULT_SCHEMA_DIALECT = "seed"
# Gemini CLI's timeout for an MCP tool call: its client has given up by then.
DEFAULT_CALL_TIMEOUT = 600.0
# Calls running at once, overall and per client session, and waiting for a slot (see `limits.py`).
DEFAULT_MAX_CALLS = 64
DEFAULT_MAX_SESSION_CALLS = 16
DEFAULT_MAX_QUEUED_CALLS = 1024
DEFAULT_MAX_SESSION_QUEUED_CALLS = 64
DEFAULT_QUEUE_TIMEOUT = 60.0
# The largest JSON-RPC message read, a stdio line or an HTTP request body: the MCP SDK's HTTP body limit.
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# The transport, and HTTP's: where it listens, and what it holds open at most.
DEFAULT_TRANSPORT = "stdio"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_PATH = "/mcp"
DEFAULT_MAX_SESSIONS = 256
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_READ_TIMEOUT = 10.0


@dataclass(frozen=True)
class HttpOptions:
    """`serve --transport http` and its options; checked by `coretools.server.http.settings_from`."""

    transport: str = DEFAULT_TRANSPORT
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    path: str = DEFAULT_PATH
    stateless: bool = False
    allowed_host: tuple[str, ...] = ()
    allowed_origin: tuple[str, ...] = ()
    auth_token_env: str | None = None
    insecure_no_auth: bool = False
    max_sessions: int = DEFAULT_MAX_SESSIONS  # 0: no limit
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT  # 0: never
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    read_timeout: float = DEFAULT_READ_TIMEOUT


@dataclass(frozen=True)
class ServerConfig:
    roots: list[str] = field(default_factory=list)  # the checked `--root` directories; the first is primary
    allow_protected: bool = False
    allow_broad_root: bool = False
    log_level: str = "warning"
    structured_content: bool = False
    max_result_chars: int = DEFAULT_RESULT_CHARS  # text characters per result; 0: no limit
    schema_dialect: str = DEFAULT_SCHEMA_DIALECT  # "latest": publish the newest Gemini CLI names and schemas
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT  # 0 or None: no limit
    max_calls: int | None = DEFAULT_MAX_CALLS  # 0 or None: no limit
    max_session_calls: int | None = DEFAULT_MAX_SESSION_CALLS
    max_queued_calls: int = DEFAULT_MAX_QUEUED_CALLS  # calls waiting for a slot, all sessions together; 0: no queue
    max_session_queued_calls: int = DEFAULT_MAX_SESSION_QUEUED_CALLS  # calls of one session waiting; 0: no queue
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT  # the longest a call waits, capped by call_timeout; 0: no queue
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # one stdio line or HTTP request body
    http: HttpOptions = field(default_factory=HttpOptions)
    # Each tool's options object, keyed by its class (`Tool.Options`); a class missing here means defaults.
    tool_options: Mapping[type, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in fields(self):  # however the config was built, a negative number is refused
            refuse_negative("--" + f.name.replace("_", "-"), getattr(self, f.name))

    @classmethod
    def from_namespace(
        cls, namespace: argparse.Namespace, *, roots: list[str], tool_options: Mapping[type, Any]
    ) -> ServerConfig:
        """The config of a parsed command line, `roots` being its `--root` directories once checked. Options
        a subcommand does not have (`call` has no transport) keep their defaults."""
        settings = {
            f.name: getattr(namespace, f.name)
            for f in fields(cls)
            if f.name not in ("roots", "http", "tool_options") and hasattr(namespace, f.name)
        }
        return cls(
            roots=list(roots), http=options_from(HttpOptions, namespace), tool_options=dict(tool_options), **settings
        )
