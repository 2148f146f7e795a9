"""OAuth sign-in against a real authorization server and OAuth-protected MCP servers (HTTP on 127.0.0.1).

The servers run in one subprocess (``servers/oauth_servers.py``, built from the SDK's server-side
auth pieces); the authorization server approves at once, so the "browser" only has to follow
redirects: in-process tests inject an opener that does that, the CLI tests set ``$BROWSER`` to
``servers/browser.py``. The authorization server's log says what reached it.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from client_support import HERE, cli_command, forked_python, write_config
from mcp.shared.auth import OAuthToken

from coretools.client import Bridge, ConfigError, parse_config
from coretools.client.oauth import BrowserSignIn
from coretools.client.token_store import TokenStore

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SERVERS = HERE / "servers" / "oauth_servers.py"
BROWSER = HERE / "servers" / "browser.py"


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    process = subprocess.Popen(forked_python([str(SERVERS)]), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        yield json.loads(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(autouse=True)
def tokens(urls: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    control(urls, "/test/reset")
    directory = tmp_path / "config" / "tokens"
    monkeypatch.setenv("CORETOOLS_OAUTH_DIR", str(directory))
    return directory


def control(urls: dict[str, str], path: str) -> None:
    urllib.request.urlopen(urllib.request.Request(urls["as"] + path, method="POST"), timeout=10).read()


def events(urls: dict[str, str], kind: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(urls["as"] + "/test/log", timeout=10) as response:
        return [e for e in json.load(response) if e["event"] == kind]


class Browser:
    """An opener that loads the authorization URL and follows the redirect to the loopback listener."""

    def __init__(self) -> None:
        self.visited: list[str] = []

    def __call__(self, url: str) -> bool:
        self.visited.append(url)
        urllib.request.urlopen(url, timeout=20).read()
        return True

    def sign_in(self) -> BrowserSignIn:
        return BrowserSignIn(opener=self, out=io.StringIO(), timeout=30)


def mcp(urls: dict[str, str], name: str) -> str:
    return urls[name] + "/mcp"


def bridge(urls: dict[str, str], *names: str, sign_in: BrowserSignIn | None = None, **entry: Any) -> Bridge:
    servers = {name: {"httpUrl": mcp(urls, name), **entry} for name in names}
    return Bridge(parse_config({"mcpServers": servers}), sign_in=sign_in, connect_timeout=20)


async def whoami(b: Bridge, name: str = "whoami") -> dict[str, Any]:
    outcome = await b.call(name, {})
    assert outcome.ok, outcome.error
    return json.loads(outcome.output)


async def test_sign_in_discovers_registers_and_sends_pkce_and_the_resource(urls: dict[str, str], tokens: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    browser = Browser()
    async with bridge(urls, "one", sign_in=browser.sign_in()) as b:
        assert b.failures == []
        assert (await whoami(b))["scopes"] == ["read"]
    [url] = browser.visited
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert url.startswith(urls["as"] + "/authorize?")
    assert query["response_type"] == "code" and query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43 and len(query["state"]) >= 32
    assert query["resource"] == mcp(urls, "one") and query["scope"] == "read"
    assert urlsplit(query["redirect_uri"]).hostname == "127.0.0.1"
    [registered] = events(urls, "register")
    assert registered["auth_method"] == "none" and registered["redirect_uris"] == [query["redirect_uri"]]
    assert [e["resource"] for e in events(urls, "token")] == [mcp(urls, "one")]
    # Stored for the user only, and never logged.
    store = TokenStore(mcp(urls, "one"))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700
    token = (await store.get_tokens()).access_token  # type: ignore[union-attr]
    assert all(token not in record.getMessage() for record in caplog.records)
    # A later run uses the stored token: no browser, no new registration.
    async with bridge(urls, "one") as b:
        assert (await whoami(b))["server"] == "one"
    assert len(events(urls, "register")) == 1 and len(events(urls, "authorize")) == 1


async def test_an_expired_token_is_refreshed_in_session_and_after_a_restart(urls: dict[str, str]) -> None:
    control(urls, "/test/lifetime?seconds=2")
    browser = Browser()
    async with bridge(urls, "one", sign_in=browser.sign_in()) as b:
        await anyio.sleep(2.5)
        assert (await whoami(b))["server"] == "one"
    await anyio.sleep(2.5)
    async with bridge(urls, "one") as b:  # no way to sign in: only a refresh can work
        assert b.failures == []
    grants = [e["grant"] for e in events(urls, "token")]
    assert grants == ["authorization_code", "refresh_token", "refresh_token"]
    assert len(browser.visited) == 1


async def test_a_revoked_token_needs_a_new_sign_in(urls: dict[str, str]) -> None:
    browser = Browser()
    async with bridge(urls, "one", sign_in=browser.sign_in()) as b:
        control(urls, "/test/revoke-all")
        assert (await whoami(b))["server"] == "one"  # signed in again, mid-call
    assert len(browser.visited) == 2
    control(urls, "/test/revoke-all")
    async with bridge(urls, "one") as b:
        [failure] = b.failures
    assert failure.reason == "unauthorized: sign in with `coretools-mcp client login one`"


async def test_a_token_for_another_resource_is_refused_and_never_sent_across(urls: dict[str, str]) -> None:
    browser = Browser()
    async with bridge(urls, "one", sign_in=browser.sign_in()):
        pass
    borrowed = await TokenStore(mcp(urls, "one")).get_tokens()
    assert borrowed is not None
    await TokenStore(mcp(urls, "two")).set_tokens(borrowed)
    async with bridge(urls, "two") as b:
        [failure] = b.failures
    assert failure.reason == "unauthorized: sign in with `coretools-mcp client login two`"
    assert {"server": "two", "known": True, "resource": mcp(urls, "one")} in [
        {k: e[k] for k in ("server", "known", "resource")} for e in events(urls, "presented")
    ]
    TokenStore(mcp(urls, "two")).forget_tokens()  # the planted token
    control(urls, "/test/reset")
    async with bridge(urls, "one", "two", sign_in=browser.sign_in()) as b:
        assert (await whoami(b, "one__whoami"))["server"] == "one"
        assert (await whoami(b, "two__whoami"))["server"] == "two"
    assert [e["resource"] for e in events(urls, "authorize")] == [mcp(urls, "two")]
    presented = [e for e in events(urls, "presented") if e["known"]]
    assert presented and all(e["resource"] == mcp(urls, e["server"]) for e in presented)


async def test_a_server_asking_for_more_scope_gets_a_step_up(urls: dict[str, str]) -> None:
    browser = Browser()
    async with bridge(urls, "one", sign_in=browser.sign_in()) as b:
        assert (await whoami(b))["scopes"] == ["read"]
        assert (await whoami(b, "admin"))["scopes"] == ["read", "write"]
    assert [e["scopes"] for e in events(urls, "authorize")] == [["read"], ["read", "write"]]


async def test_metadata_naming_another_resource_is_refused(urls: dict[str, str]) -> None:
    async with bridge(urls, "mismatch", sign_in=Browser().sign_in()) as b:
        [failure] = b.failures
    assert failure.reason.startswith("refused: the server's protected-resource metadata is for another resource")
    assert events(urls, "authorize") == [] and events(urls, "register") == []


async def test_missing_authorization_metadata_is_named(urls: dict[str, str]) -> None:
    async with bridge(urls, "lost", sign_in=Browser().sign_in()) as b:
        [failure] = b.failures
    where = urls["as"] + "/.well-known/oauth-authorization-server/nowhere"
    assert failure.reason == f"the server's authorization metadata could not be fetched from {where}"


async def test_a_bearer_header_from_mcp_json_is_used_as_it_is(urls: dict[str, str]) -> None:
    async with bridge(urls, "two", sign_in=Browser().sign_in()):
        pass
    token = (await TokenStore(mcp(urls, "two")).get_tokens()).access_token  # type: ignore[union-attr]
    TokenStore(mcp(urls, "two")).forget()
    control(urls, "/test/reset")
    async with bridge(urls, "two", headers={"Authorization": f"Bearer {token}"}) as b:
        assert (await whoami(b))["server"] == "two"
    async with bridge(urls, "two", sign_in=Browser().sign_in(), headers={"Authorization": "Bearer wrong"}) as b:
        [failure] = b.failures
    assert failure.reason == "unauthorized (HTTP 401): the server refused the Authorization header from mcp.json"
    assert events(urls, "register") == [] and events(urls, "authorize") == []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_a_preregistered_client_from_the_oauth_block(urls: dict[str, str]) -> None:
    redirect = f"http://127.0.0.1:{free_port()}/callback"
    request = urllib.request.Request(
        urls["as"] + "/register", method="POST", headers={"content-type": "application/json"},
        data=json.dumps({"redirect_uris": [redirect], "token_endpoint_auth_method": "client_secret_basic",
                         "grant_types": ["authorization_code", "refresh_token"], "scope": "read write"}).encode(),
    )  # fmt: skip
    client = json.load(urllib.request.urlopen(request, timeout=10))
    control(urls, "/test/reset")
    oauth = {"clientId": client["client_id"], "clientSecret": client["client_secret"], "scopes": ["write"], "redirectUri": redirect}
    browser = Browser()
    async with bridge(urls, "one", sign_in=browser.sign_in(), oauth=oauth) as b:
        assert (await whoami(b))["scopes"] == ["write", "read"]
    assert events(urls, "register") == []
    assert parse_qs(urlsplit(browser.visited[0]).query)["client_id"] == [client["client_id"]]
    assert "client" not in TokenStore(mcp(urls, "one")).read()  # the secret stays in mcp.json


async def test_oauth_can_be_turned_off(urls: dict[str, str]) -> None:
    async with bridge(urls, "one", sign_in=Browser().sign_in(), oauth={"enabled": False}) as b:
        [failure] = b.failures
    assert failure.reason == "unauthorized (HTTP 401), and OAuth is turned off for this server (oauth.enabled is false)"


# -------------------------------------------------------------------------------- the CLI

def cli(*argv: str, tokens: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORETOOLS_OAUTH_DIR": str(tokens), "BROWSER": f"{sys.executable} {BROWSER} %s", "BROWSER_LOG": str(log)}
    return subprocess.run(cli_command(*argv, env=env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=90, env=env)  # fmt: skip


def test_client_login_and_logout(urls: dict[str, str], tokens: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"github": {"httpUrl": mcp(urls, "one")}})
    log = tmp_path / "browser.log"
    done = cli("client", "login", "github", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 0, done.stderr
    [visited] = log.read_text().splitlines()
    assert f"Sign in to MCP server 'github' in your browser:\n  {visited}" in done.stderr
    assert "signed in to github" in done.stderr
    store = TokenStore(mcp(urls, "one"), tokens)
    assert store.has_tokens() and stat.S_IMODE(store.path.stat().st_mode) == 0o600
    token = store.read()["tokens"]["access_token"]
    assert token not in done.stdout + done.stderr

    done = cli("client", "call", "whoami", "--config", str(config), "--sign-in", "never", tokens=tokens, log=log)
    assert done.returncode == 0, done.stderr
    assert json.loads(json.loads(done.stdout)["functionResponse"]["response"]["output"])["server"] == "one"

    done = cli("client", "logout", "github", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 0 and "forgot the tokens" in done.stderr and not store.path.exists()
    done = cli("client", "call", "whoami", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 2
    assert "github: unauthorized: sign in with `coretools-mcp client login github`" in done.stderr

    done = cli("client", "call", "whoami", "--config", str(config), "--sign-in", "always", tokens=tokens, log=log)
    assert done.returncode == 0, done.stderr
    assert len(log.read_text().splitlines()) == 2


def test_login_names_what_is_wrong(urls: dict[str, str], tokens: Path, tmp_path: Path) -> None:
    """Only the named server's entry is read (another's unset variable is no concern of this sign-in), and
    a failed sign-in is reported once."""
    other = {"command": "true", "env": {"KEY": "${CORETOOLS_TEST_UNSET_VARIABLE}"}}
    config = write_config(tmp_path, {"local": {"command": "true"}, "lost": {"httpUrl": mcp(urls, "lost")}, "other": other})
    log = tmp_path / "browser.log"
    done = cli("client", "login", "nope", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 2 and "no server named 'nope' (servers: local, lost, other)" in done.stderr
    done = cli("client", "login", "local", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 2 and "stdio server" in done.stderr
    done = cli("client", "login", "lost", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 1
    assert done.stderr.count("authorization metadata could not be fetched from") == 1, done.stderr
    assert "CORETOOLS_TEST_UNSET_VARIABLE" not in done.stderr
    assert "Traceback" not in done.stderr
    done = cli("client", "login", "other", "--config", str(config), tokens=tokens, log=log)
    assert done.returncode == 2 and "mcpServers.other.env.KEY: environment variable CORETOOLS_TEST_UNSET_VARIABLE" in done.stderr


def test_the_token_store_keeps_servers_apart(tmp_path: Path) -> None:
    one = TokenStore("http://127.0.0.1:1/mcp", tmp_path / "t")
    two = TokenStore("http://127.0.0.1:2/mcp", tmp_path / "t")
    anyio.run(one.set_tokens, OAuthToken(access_token="secret-one", expires_in=60))
    assert anyio.run(two.get_tokens) is None
    two.path.write_bytes(one.path.read_bytes())  # another server's file under this name is ignored
    assert anyio.run(two.get_tokens) is None
    assert abs((one.expires_at() or 0) - time.time() - 60) < 5
    one.path.write_text("{damaged")
    assert anyio.run(one.get_tokens) is None and one.forget() and not one.forget()


def test_the_oauth_block_is_read_with_gemini_cli_names(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"httpUrl": "https://x.example/mcp", "oauth": {"clientId": "${ID}", "clientSecret": "sekrit-42", "scopes": ["a", "b"],
                                                           "redirectUri": "http://localhost:7777/cb"}}  # fmt: skip
    [config] = parse_config({"mcpServers": {"x": entry}}, environ={"ID": "client-1"})
    assert config.oauth is not None and (config.oauth.client_id, config.oauth.scopes) == ("client-1", ("a", "b"))
    assert config.oauth.client_secret == "sekrit-42" and "sekrit-42" not in repr(config)
    for bad, key in [({"command": "x", "oauth": {}}, "mcpServers.x.oauth"),
                     ({"httpUrl": "https://x/", "oauth": {"redirectUri": "https://evil.example/cb"}}, "mcpServers.x.oauth.redirectUri"),
                     ({"httpUrl": "https://x/", "oauth": {"clientSecret": "s"}}, "mcpServers.x.oauth.clientSecret")]:  # fmt: skip
        with pytest.raises(ConfigError) as caught:
            parse_config({"mcpServers": {"x": bad}})
        assert caught.value.key == key


def test_a_client_metadata_document_url_is_read_checked_and_given_to_the_flow() -> None:
    from coretools.client.oauth import ServerAuth

    document = "https://tools.example/coretools/client.json"
    entry = {"httpUrl": "https://x.example/mcp", "oauth": {"clientMetadataUrl": document}}
    [config] = parse_config({"mcpServers": {"x": entry}})
    assert config.oauth is not None and config.oauth.client_metadata_url == document
    auth = ServerAuth(config, sign_in=None)
    assert auth.provider is not None and auth.provider.context.client_metadata_url == document
    for bad in ("http://tools.example/client.json", "https://tools.example/", "client.json"):
        with pytest.raises(ConfigError) as caught:
            parse_config({"mcpServers": {"x": {"httpUrl": "https://x/", "oauth": {"clientMetadataUrl": bad}}}})
        assert caught.value.key == "mcpServers.x.oauth.clientMetadataUrl", bad
