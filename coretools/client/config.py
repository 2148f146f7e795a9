"""Loading ``mcp.json``: the server list in the shapes hosts write.

Accepted shapes:

* ``{"mcpServers": {alias: {...}}}`` (Claude Desktop, Cursor, Claude Code, Gemini CLI), and
* ``{"servers": {alias: {...}}}`` (VS Code).

A server is stdio when it has ``command`` (plus ``args``, ``env``, ``cwd``), or remote when it
has ``httpUrl`` or ``url`` (plus ``headers``). Gemini CLI reads ``url`` as the deprecated SSE
transport and ``httpUrl`` as streamable HTTP; most other hosts mean streamable HTTP by
``url``. We follow the majority: ``url`` is streamable HTTP unless ``type``/``transport`` says
``sse``. Gemini CLI's per-server ``timeout`` (milliseconds), ``trust``, ``includeTools`` and
``excludeTools`` are honoured (exclude wins over include); ``disabled: true`` skips a server.

A remote server may carry Gemini CLI's ``oauth`` block: ``enabled`` (``false`` turns OAuth off for
the server), ``clientId`` and ``clientSecret`` of a client registered beforehand (without them
the client registers itself dynamically), ``scopes`` to request on top of those the server asks
for, and ``redirectUri`` (a loopback ``http://127.0.0.1:PORT/PATH`` registered with that client).
``clientMetadataUrl`` (not a Gemini CLI name) is the HTTPS URL of a Client ID Metadata Document the user
publishes for their client: used as the client ID where the authorization server says it accepts such
documents, before any dynamic registration.
Without the block, OAuth starts when the server answers 401, unless ``headers`` already carry an
``Authorization``.

Strings in ``command``, ``args``, ``env``, ``cwd``, ``url``/``httpUrl`` and ``headers`` expand
``${VAR}``, ``${VAR:-default}``, ``${env:VAR}`` (VS Code), ``${workspaceFolder}`` and
``${userHome}`` (so do ``oauth.clientId`` and ``oauth.clientSecret``). An unset variable
without a default is an error, because silently passing an empty API key to a server fails
much later and much less clearly.

Every error is a :class:`ConfigError` whose message starts with the dotted key at fault, e.g.
``mcpServers.fs.args[2]: expected a string, got 3``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

Transport = Literal["stdio", "http", "sse"]

DEFAULT_TIMEOUT_SECONDS = 600.0
"""Gemini CLI's default per-call timeout (600 000 ms)."""

_VAR = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class OAuthConfig:
    """A remote server's ``oauth`` block (Gemini CLI's names)."""

    enabled: bool = True
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    redirect_uri: str | None = None
    client_metadata_url: str | None = None  # the client's own Client ID Metadata Document (an HTTPS URL)


class ConfigError(ValueError):
    """A bad ``mcp.json``; ``key`` is the dotted path of the offending entry."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server to connect to. ``timeout`` is in seconds (the file says milliseconds)."""

    alias: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    trust: bool = False
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    oauth: OAuthConfig | None = None

    def allows(self, tool: str) -> bool:
        """Whether ``includeTools``/``excludeTools`` let this tool through (exclude wins)."""
        if tool in self.exclude_tools:
            return False
        return self.include_tools is None or tool in self.include_tools

    def describe(self) -> str:
        """A one-line human description of how the server is reached."""
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args]).strip()
        return f"{self.transport} {self.url}"


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None, only: str | None = None
) -> list[ServerConfig]:
    """Read and parse an ``mcp.json`` file; ``only``: just the server of that alias (see :func:`parse_config`)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read {file}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError("", f"{file} is not valid JSON: {exc}") from exc
    return parse_config(data, environ=environ, workspace=_workspace_of(file), only=only)


def parse_config(
    data: Any,
    *,
    environ: Mapping[str, str] | None = None,
    workspace: str | None = None,
    only: str | None = None,
) -> list[ServerConfig]:
    """Parse an already-decoded ``mcp.json`` document into server configs, in file order. With ``only``,
    just the server of that alias is parsed (``client login ALIAS`` must not fail on another server's unset
    variable); an alias the file does not have is an error naming those it has."""
    if not isinstance(data, dict):
        raise ConfigError("", f"the top level must be a JSON object, got {_kind(data)}")
    has_mcp, has_vscode = "mcpServers" in data, "servers" in data
    if has_mcp and has_vscode:
        raise ConfigError("servers", "use either 'mcpServers' or 'servers', not both")
    if not (has_mcp or has_vscode):
        raise ConfigError("mcpServers", "missing (expected 'mcpServers' or VS Code's 'servers')")
    root = "mcpServers" if has_mcp else "servers"
    servers = data[root]
    if not isinstance(servers, dict):
        raise ConfigError(root, f"expected an object mapping aliases to servers, got {_kind(servers)}")
    if only is not None and only not in servers:
        raise ConfigError(root, f"no server named {only!r} (servers: {', '.join(servers) or 'none'})")
    expander = _Expander(os.environ if environ is None else environ, workspace)
    result: list[ServerConfig] = []
    for alias, entry in servers.items():
        if only is not None and alias != only:
            continue
        key = f"{root}.{alias}"
        if not alias:
            raise ConfigError(key, "the server alias must not be empty")
        if not isinstance(entry, dict):
            raise ConfigError(key, f"expected an object, got {_kind(entry)}")
        if _optional(entry, "disabled", bool, key):
            continue
        result.append(_parse_server(alias, entry, key, expander))
    return result


def _parse_server(alias: str, entry: dict[str, Any], key: str, expand: _Expander) -> ServerConfig:
    declared = _optional(entry, "type", str, key) or _optional(entry, "transport", str, key)
    command = _optional(entry, "command", str, key)
    http_url = _optional(entry, "httpUrl", str, key)
    url = _optional(entry, "url", str, key)
    present = [name for name, value in (("command", command), ("httpUrl", http_url), ("url", url)) if value]
    if not present:
        raise ConfigError(key, "needs one of 'command' (stdio), 'httpUrl' or 'url' (remote)")
    if len(present) > 1:
        raise ConfigError(f"{key}.{present[1]}", f"conflicts with '{present[0]}'; give exactly one transport")

    timeout_ms = entry.get("timeout")
    if timeout_ms is None:
        timeout = DEFAULT_TIMEOUT_SECONDS
    elif isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or timeout_ms <= 0:
        raise ConfigError(f"{key}.timeout", f"expected a positive number of milliseconds, got {timeout_ms!r}")
    else:
        timeout = float(timeout_ms) / 1000.0
    common: dict[str, Any] = {
        "alias": alias,
        "timeout": timeout,
        "trust": bool(_optional(entry, "trust", bool, key)),
        "include_tools": _string_list(entry, "includeTools", key),
        "exclude_tools": _string_list(entry, "excludeTools", key) or (),
    }

    if command:
        if "oauth" in entry:
            raise ConfigError(f"{key}.oauth", "OAuth is for remote servers ('httpUrl' or 'url'), not 'command'")
        if declared not in (None, "stdio"):
            raise ConfigError(f"{key}.type", f"'{declared}' does not match 'command' (stdio)")
        args = _string_list(entry, "args", key) or ()
        env = _string_map(entry, "env", key)
        cwd = _optional(entry, "cwd", str, key)
        return ServerConfig(
            transport="stdio",
            command=expand(command, f"{key}.command"),
            args=tuple(expand(arg, f"{key}.args[{i}]") for i, arg in enumerate(args)),
            env={name: expand(value, f"{key}.env.{name}") for name, value in env.items()},
            cwd=expand(cwd, f"{key}.cwd") if cwd else None,
            **common,
        )

    field_name = "httpUrl" if http_url else "url"
    if declared in (None, "http", "streamable-http", "streamableHttp", "streamable_http"):
        transport: Transport = "http"
    elif declared == "sse" and field_name == "url":
        transport = "sse"
    else:
        raise ConfigError(f"{key}.type", f"unsupported transport '{declared}' for '{field_name}'")
    headers = _string_map(entry, "headers", key)
    return ServerConfig(
        transport=transport,
        url=expand(http_url or url or "", f"{key}.{field_name}"),
        headers={name: expand(value, f"{key}.headers.{name}") for name, value in headers.items()},
        oauth=_parse_oauth(entry, key, expand),
        **common,
    )


def _parse_oauth(entry: dict[str, Any], key: str, expand: _Expander) -> OAuthConfig | None:
    block = entry.get("oauth")
    if block is None:
        return None
    key = f"{key}.oauth"
    if not isinstance(block, dict):
        raise ConfigError(key, f"expected an object, got {_kind(block)}")
    enabled = _optional(block, "enabled", bool, key)
    client_id = _optional(block, "clientId", str, key)
    client_secret = _optional(block, "clientSecret", str, key)
    redirect_uri = _optional(block, "redirectUri", str, key)
    if client_secret and not client_id:
        raise ConfigError(f"{key}.clientSecret", "needs 'clientId'")
    if redirect_uri and not _is_loopback_url(redirect_uri):
        raise ConfigError(f"{key}.redirectUri", f"must be a loopback http URL (http://127.0.0.1:PORT/...), got {redirect_uri!r}")
    metadata_url = _optional(block, "clientMetadataUrl", str, key)
    if metadata_url and not _is_metadata_document_url(metadata_url):
        raise ConfigError(f"{key}.clientMetadataUrl",
                          f"must be an https URL with a path (https://host/path/client.json), got {metadata_url!r}")
    return OAuthConfig(
        enabled=enabled is not False,
        client_id=expand(client_id, f"{key}.clientId") if client_id else None,
        client_secret=expand(client_secret, f"{key}.clientSecret") if client_secret else None,
        scopes=_string_list(block, "scopes", key) or (),
        redirect_uri=redirect_uri,
        client_metadata_url=metadata_url,
    )


def _is_metadata_document_url(url: str) -> bool:
    """What a client ID must look like to be a metadata document's URL: https, a host, a path beyond `/`."""
    parsed = urlsplit(url)
    return parsed.scheme == "https" and bool(parsed.hostname) and parsed.path not in ("", "/")


def _is_loopback_url(url: str) -> bool:
    parsed = urlsplit(url)
    try:
        port = parsed.port
    except ValueError:
        return False
    return parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1") and port is not None


class _Expander:
    """``${...}`` expansion with errors that name the key being expanded."""

    def __init__(self, environ: Mapping[str, str], workspace: str | None) -> None:
        self.environ = environ
        self.workspace = workspace

    def __call__(self, text: str, key: str) -> str:
        return _VAR.sub(lambda match: self._lookup(match.group(1), key), text)

    def _lookup(self, expr: str, key: str) -> str:
        name, has_default, default = expr.partition(":-")
        if name.startswith("env:"):
            name = name[4:]
        elif name == "workspaceFolder":
            if self.workspace is None:
                raise ConfigError(key, "${workspaceFolder} needs a config file location")
            return self.workspace
        elif name == "userHome":
            return str(Path.home())
        elif ":" in name:
            raise ConfigError(key, f"unsupported variable ${{{expr}}} (only environment variables expand here)")
        if not _NAME.match(name):
            raise ConfigError(key, f"bad variable reference ${{{expr}}}")
        value = self.environ.get(name)
        if value is None or (has_default and value == ""):
            if has_default:
                return default
            raise ConfigError(key, f"environment variable {name} is not set (write ${{{name}:-default}} for a fallback)")
        return value


def _workspace_of(file: Path) -> str:
    folder = file.resolve().parent
    return str(folder.parent if folder.name in (".vscode", ".cursor", ".gemini") else folder)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), f"a number ({value!r})" if isinstance(value, (int, float)) else type(value).__name__
    )


def _optional(entry: Mapping[str, Any], name: str, kind: type, key: str) -> Any:
    value = entry.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        expected = {str: "a string", bool: "true or false"}.get(kind, kind.__name__)
        raise ConfigError(f"{key}.{name}", f"expected {expected}, got {_kind(value)}")
    return value


def _string_list(entry: Mapping[str, Any], name: str, key: str) -> tuple[str, ...] | None:
    value = entry.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise ConfigError(f"{key}.{name}", f"expected an array of strings, got {_kind(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"{key}.{name}[{i}]", f"expected a string, got {_kind(item)}")
    return tuple(value)


def _string_map(entry: Mapping[str, Any], name: str, key: str) -> dict[str, str]:
    value = entry.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{key}.{name}", f"expected an object of strings, got {_kind(value)}")
    for item_key, item in value.items():
        if not isinstance(item, str):
            raise ConfigError(f"{key}.{name}.{item_key}", f"expected a string, got {_kind(item)}")
    return dict(value)
