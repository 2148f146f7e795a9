"""What the operator configured, typed: the workspace, the server's own settings, the HTTP transport's, and
each tool's options object.

The CLI builds one `ServerConfig` at start from the parsed command line (`from_namespace`; the tools'
options come from the registry, `coretools.server.toolset.tool_options`). The defaults here are the
command line's, so a config built in code serves like `coretools-mcp serve`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from coretools.tools.base import options_from

DEFAULT_CALL_TIMEOUT = 600.0
# The largest JSON-RPC message read, a stdio line or an HTTP request body: the MCP SDK's HTTP body limit.
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class HttpOptions:
    """`serve --transport http` and its options; checked by `coretools.server.http.settings_from`."""

    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/mcp"
    stateless: bool = False
    allowed_host: tuple[str, ...] = ()
    allowed_origin: tuple[str, ...] = ()
    auth_token_env: str | None = None
    insecure_no_auth: bool = False
    max_sessions: int = 256  # 0: no limit
    session_idle_timeout: float = 600.0  # 0: never
    max_connections: int = 1024
    read_timeout: float = 10.0


@dataclass(frozen=True)
class ServerConfig:
    roots: list[str] = field(default_factory=list)  # the checked `--root` directories; the first is primary
    allow_protected: bool = False
    allow_broad_root: bool = False
    log_level: str = "warning"
    structured_content: bool = False
    max_result_chars: int = 80_000  # text characters per result; 0: no limit
    schema_dialect: str = "seed"  # "latest": publish the newest Gemini CLI names and schemas
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT  # 0 or None: no limit
    max_calls: int | None = 64  # 0 or None: no limit
    max_session_calls: int | None = 16
    max_queued_calls: int = 1024  # calls waiting for a slot, all sessions together; 0: no queue
    max_session_queued_calls: int = 64  # calls of one session waiting for a slot; 0: no queue
    queue_timeout: float = 60.0  # the longest a call waits for a slot, capped by call_timeout; 0: no queue
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # one stdio line or HTTP request body
    http: HttpOptions = field(default_factory=HttpOptions)
    # Each tool's options object, keyed by its class (`Tool.Options`); a class missing here means defaults.
    tool_options: Mapping[type, Any] = field(default_factory=dict)

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
