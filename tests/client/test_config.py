"""mcp.json loading: both host shapes, variable expansion, Gemini CLI's per-server options, errors naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coretools.client.config import DEFAULT_TIMEOUT_SECONDS, ConfigError, ServerConfig, load_config, parse_config


def parse(servers: dict, key: str = "mcpServers", **kw) -> list[ServerConfig]:
    return parse_config({key: servers}, **kw)


def error_of(data, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, **kw)
    return caught.value


def test_mcp_servers_shape_stdio_and_remote() -> None:
    configs = parse(
        {
            "fs": {"command": "node", "args": ["server.js", "/data"], "env": {"A": "1"}, "cwd": "/srv"},
            "web": {"httpUrl": "https://example.test/mcp", "headers": {"Authorization": "Bearer x"}},
            "remote": {"url": "https://example.test/other"},
            "legacy": {"url": "https://example.test/sse", "type": "sse"},
        }
    )
    fs, web, remote, legacy = configs
    assert (fs.alias, fs.transport, fs.command, fs.args, dict(fs.env), fs.cwd) == ("fs", "stdio", "node", ("server.js", "/data"), {"A": "1"}, "/srv")
    assert (web.transport, web.url, dict(web.headers)) == ("http", "https://example.test/mcp", {"Authorization": "Bearer x"})
    assert (remote.transport, legacy.transport) == ("http", "sse")
    assert fs.timeout == DEFAULT_TIMEOUT_SECONDS and not fs.trust


def test_vscode_servers_shape() -> None:
    [server] = parse({"git": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]}}, key="servers")
    assert (server.alias, server.transport, server.command) == ("git", "stdio", "uvx")
    [remote] = parse({"r": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}, key="servers")
    assert remote.transport == "http"


def test_gemini_cli_options() -> None:
    [server] = parse(
        {"s": {"command": "x", "timeout": 30000, "trust": True, "includeTools": ["a", "b", "c"], "excludeTools": ["b"]}}
    )
    assert server.timeout == 30.0 and server.trust
    assert [t for t in ("a", "b", "c", "d") if server.allows(t)] == ["a", "c"]
    [open_server] = parse({"s": {"command": "x", "excludeTools": ["b"]}})
    assert open_server.allows("anything") and not open_server.allows("b")


def test_disabled_servers_are_skipped() -> None:
    assert [c.alias for c in parse({"on": {"command": "x"}, "off": {"command": "y", "disabled": True}})] == ["on"]


def test_variable_expansion() -> None:
    environ = {"TOKEN": "t0k", "BIN": "/opt/bin", "EMPTY": ""}
    [server] = parse(
        {
            "s": {
                "command": "${BIN}/server",
                "args": ["--token=${TOKEN}", "${MISSING:-fallback}", "${env:TOKEN}", "${EMPTY:-default-for-empty}", "$TOKEN"],
                "env": {"KEY": "${TOKEN}"},
                "cwd": "${workspaceFolder}/sub",
            },
            "h": {"httpUrl": "https://${TOKEN}.example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        },
        environ=environ,
        workspace="/work/project",
    )[:1]
    assert server.command == "/opt/bin/server"
    assert server.args == ("--token=t0k", "fallback", "t0k", "default-for-empty", "$TOKEN")
    assert dict(server.env) == {"KEY": "t0k"} and server.cwd == "/work/project/sub"
    [_, remote] = parse(
        {"s": {"command": "x"}, "h": {"httpUrl": "https://${TOKEN}.example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}},
        environ=environ,
    )
    assert remote.url == "https://t0k.example.test/mcp" and dict(remote.headers) == {"Authorization": "Bearer t0k"}


def test_workspace_folder_from_a_vscode_config_file(tmp_path: Path) -> None:
    folder = tmp_path / ".vscode"
    folder.mkdir()
    path = folder / "mcp.json"
    path.write_text(json.dumps({"servers": {"s": {"command": "${workspaceFolder}/bin/server"}}}))
    [server] = load_config(path, environ={})
    assert server.command == f"{tmp_path.resolve()}/bin/server"


@pytest.mark.parametrize(
    ("data", "key", "words"),
    [
        ([], "", "top level must be a JSON object"),
        ({}, "mcpServers", "missing"),
        ({"mcpServers": {}, "servers": {}}, "servers", "not both"),
        ({"mcpServers": []}, "mcpServers", "expected an object"),
        ({"mcpServers": {"fs": "node"}}, "mcpServers.fs", "expected an object"),
        ({"mcpServers": {"fs": {"args": ["x"]}}}, "mcpServers.fs", "needs one of 'command'"),
        ({"mcpServers": {"fs": {"command": "x", "url": "http://h"}}}, "mcpServers.fs.url", "conflicts with 'command'"),
        ({"mcpServers": {"fs": {"command": 3}}}, "mcpServers.fs.command", "expected a string"),
        ({"mcpServers": {"fs": {"command": "x", "args": "a b"}}}, "mcpServers.fs.args", "expected an array"),
        ({"mcpServers": {"fs": {"command": "x", "args": ["a", 2]}}}, "mcpServers.fs.args[1]", "expected a string"),
        ({"mcpServers": {"fs": {"command": "x", "env": {"A": 1}}}}, "mcpServers.fs.env.A", "expected a string"),
        ({"mcpServers": {"fs": {"command": "x", "timeout": "30s"}}}, "mcpServers.fs.timeout", "milliseconds"),
        ({"mcpServers": {"fs": {"command": "x", "timeout": -1}}}, "mcpServers.fs.timeout", "positive"),
        ({"mcpServers": {"fs": {"command": "x", "trust": "yes"}}}, "mcpServers.fs.trust", "true or false"),
        ({"mcpServers": {"fs": {"command": "x", "includeTools": [1]}}}, "mcpServers.fs.includeTools[0]", "expected a string"),
        ({"mcpServers": {"fs": {"command": "x", "type": "http"}}}, "mcpServers.fs.type", "does not match"),
        ({"mcpServers": {"fs": {"httpUrl": "http://h", "type": "sse"}}}, "mcpServers.fs.type", "unsupported transport"),
        ({"mcpServers": {"fs": {"command": "x", "env": {"KEY": "${NOPE}"}}}}, "mcpServers.fs.env.KEY", "NOPE is not set"),
        ({"mcpServers": {"fs": {"command": "x", "args": ["${input:key}"]}}}, "mcpServers.fs.args[0]", "unsupported variable"),
        ({"servers": {"fs": {"command": "${1bad}"}}}, "servers.fs.command", "bad variable reference"),
    ],
)
def test_errors_name_the_key(data, key: str, words: str) -> None:
    error = error_of(data, environ={})
    assert error.key == key
    assert words in str(error)
    if key:
        assert str(error).startswith(f"{key}: ")


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(bad)


def test_only_one_server_is_read_when_asked() -> None:
    """`client login ALIAS` reads ALIAS's entry alone: another's unset variable does not stop it."""
    data = {"mcpServers": {"a": {"command": "x", "env": {"K": "${UNSET_FOR_ONLY}"}}, "b": {"httpUrl": "http://h/mcp"}}}
    [server] = parse_config(data, environ={}, only="b")
    assert server.alias == "b" and server.url == "http://h/mcp"
    with pytest.raises(ConfigError, match="UNSET_FOR_ONLY"):
        parse_config(data, environ={})
    with pytest.raises(ConfigError, match=r"^mcpServers: no server named 'c' \(servers: a, b\)$"):
        parse_config(data, environ={}, only="c")
