"""OAuth 2.1 for remote MCP servers, through the SDK's ``OAuthClientProvider``.

The SDK does the protocol: protected-resource metadata (RFC 9728, from the ``WWW-Authenticate``
challenge or the well-known paths), authorization-server metadata (RFC 8414, then OpenID
discovery), dynamic client registration (RFC 7591), PKCE with S256, the resource indicator
(RFC 8707), refresh, and re-authorization with the union of scopes when a server answers 403
``insufficient_scope``. This module supplies what the SDK leaves to the host:

* the interactive step, :class:`BrowserSignIn`: the authorization URL is printed and opened
  with :mod:`webbrowser` (so ``$BROWSER`` is honoured), and the code comes back to a loopback
  listener on 127.0.0.1 (:mod:`coretools.client.redirect_listener`);
* storage, one file per server URL (:mod:`coretools.client.token_store`);
* clients registered beforehand, from Gemini CLI's ``oauth`` block in ``mcp.json``, and the
  scopes it lists, which are requested on top of whatever the server asks for;
* errors that name their cause (:meth:`ServerAuth.describe`).

Without a :class:`BrowserSignIn` (a non-interactive run) a server that needs a sign-in fails
with "unauthorized: sign in with `coretools-mcp client login ALIAS`" instead of waiting.
A server whose ``headers`` carry an ``Authorization`` keeps that header and gets no OAuth.
"""

from __future__ import annotations

import logging
import socket
import sys
import webbrowser
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl, PrivateAttr, ValidationError

from .config import OAuthConfig, ServerConfig
from .deadline import waiting_for_person
from .redirect_listener import RedirectListener
from .token_store import TokenStore

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

CALLBACK_PATH = "/oauth/callback"
SIGN_IN_TIMEOUT = 300.0
EXPIRY_MARGIN = 10.0
"""A stored token this close to its expiry is refreshed before use rather than sent."""
CLIENT_NAME = "coretools-mcp"


class SignInRequired(Exception):
    """The server wants a sign-in and this run cannot do one."""

    def __init__(self, alias: str) -> None:
        super().__init__(f"unauthorized: sign in with `coretools-mcp client login {alias}`")


class BrowserSignIn:
    """The interactive step: print the authorization URL, open it, wait for the redirect."""

    def __init__(
        self,
        *,
        open_browser: bool = True,
        timeout: float = SIGN_IN_TIMEOUT,
        out: TextIO | None = None,
        opener: Callable[[str], object] = webbrowser.open,
    ) -> None:
        self.open_browser = open_browser
        self.timeout = timeout
        self.out = out
        self.opener = opener

    async def authorize(self, alias: str, url: str, redirect_uri: str) -> AuthorizationCodeResult:
        parts = urlsplit(redirect_uri)
        with waiting_for_person():
            async with RedirectListener(parts.hostname or "127.0.0.1", parts.port or 80, parts.path, label=alias) as listener:
                self._say(f"Sign in to MCP server {alias!r} in your browser:\n  {url}")
                async with anyio.create_task_group() as group:
                    if self.open_browser:
                        group.start_soon(self._open, url)
                    with anyio.move_on_after(self.timeout) as waited:
                        result = await listener.result()
                    group.cancel_scope.cancel()
        if waited.cancelled_caught:
            raise OAuthFlowError(f"no sign-in arrived at {redirect_uri} within {self.timeout:g} s")
        self._say(f"Signed in to {alias!r}.")
        return result

    async def _open(self, url: str) -> None:
        opened = await anyio.to_thread.run_sync(self.opener, url, abandon_on_cancel=True)
        if opened is False:
            self._say("  (no browser could be opened; open the URL yourself)")

    def _say(self, text: str) -> None:
        print(text, file=self.out or sys.stderr, flush=True)


class _Metadata(OAuthClientMetadata):
    """Client metadata whose scope always keeps the scopes configured in ``mcp.json``.

    The SDK replaces ``scope`` with what the server's challenge asks for; assignments here
    add the configured scopes to that instead of losing them."""

    _configured: str | None = PrivateAttr(default=None)

    def __init__(self, *, configured: str | None, **fields: Any) -> None:
        super().__init__(**fields)
        self._configured = configured

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope":
            value = _union(self._configured, value)
        super().__setattr__(name, value)


class _Provider(OAuthClientProvider):
    """The SDK's provider, plus what it does not do itself: it notes the error that ended a flow
    (the transport only logs it), and on loading it restores the stored token's expiry and the
    discovered metadata (the SDK keeps both in memory only; without them a token that expired
    between runs is sent and refused, or refreshed at the resource server's origin)."""

    def __init__(self, owner: ServerAuth, **options: Any) -> None:
        super().__init__(**options)
        self.owner = owner

    async def _initialize(self) -> None:
        await super()._initialize()
        expires_at = self.owner.store.expires_at()
        if self.context.current_tokens is not None and expires_at is not None:
            self.context.token_expiry_time = expires_at - EXPIRY_MARGIN
        if self.context.oauth_metadata is None:
            self._restore_discovery(self.owner.store.discovery())

    def _restore_discovery(self, saved: dict[str, Any]) -> None:
        try:
            resource = saved.get("resource")
            server = saved.get("authorization_server")
            prm = ProtectedResourceMetadata.model_validate(resource) if resource else None
            asm = OAuthMetadata.model_validate(server) if server else None
        except ValidationError:
            return
        if asm is not None:
            self.context.protected_resource_metadata = prm
            self.context.oauth_metadata = asm
            self.context.auth_server_url = saved.get("authorization_server_url")

    def _remember_discovery(self) -> None:
        context = self.context
        if context.oauth_metadata is None:
            return
        prm = context.protected_resource_metadata
        self.owner.store.set_discovery({
            "resource": prm.model_dump(mode="json", exclude_none=True) if prm else None,
            "authorization_server": context.oauth_metadata.model_dump(mode="json", exclude_none=True),
            "authorization_server_url": context.auth_server_url,
        })  # fmt: skip

    async def async_auth_flow(self, request: httpx2.Request):  # type: ignore[override]
        flow = super().async_auth_flow(request)
        self.owner.error = None
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            if self.context.current_tokens is not None:
                self._remember_discovery()
            return
        except Exception as exc:
            self.owner.error = exc
            raise
        finally:
            await flow.aclose()


class ServerAuth:
    """Authorization of one remote server: its OAuth provider (if any) and what went wrong."""

    def __init__(self, config: ServerConfig, *, sign_in: BrowserSignIn | None, directory: Path | None = None) -> None:
        assert config.url is not None
        self.alias = config.alias
        self.url = config.url
        self.settings = config.oauth or OAuthConfig()
        self.sign_in = sign_in
        self.static_header = any(name.lower() == "authorization" for name in config.headers)
        self.store = TokenStore(config.url, directory, client_info=self._preregistered())
        self.error: BaseException | None = None
        self.status: int | None = None
        self.failed_fetches: deque[tuple[str, int]] = deque(maxlen=8)
        self._authorization_url: str | None = None
        self.provider = self._provider() if self.settings.enabled and not self.static_header else None
        _quiet_sdk_reports()

    @property
    def redirect_uri(self) -> str:
        return self._redirect_uri

    def _preregistered(self) -> OAuthClientInformationFull | None:
        self._redirect_uri = self.settings.redirect_uri or ""
        if not self.settings.client_id:
            return None
        self._redirect_uri = self._redirect_uri or _free_loopback_uri()
        return OAuthClientInformationFull(
            client_id=self.settings.client_id,
            client_secret=self.settings.client_secret,
            redirect_uris=[AnyUrl(self._redirect_uri)],
            token_endpoint_auth_method="client_secret_basic" if self.settings.client_secret else "none",
            grant_types=["authorization_code", "refresh_token"],
        )

    def _provider(self) -> _Provider:
        if not self._redirect_uri:
            self._redirect_uri = _registered_loopback_uri(self.store.stored_client()) or _free_loopback_uri()
        metadata = _Metadata(
            configured=" ".join(self.settings.scopes) or None,
            client_name=CLIENT_NAME,
            redirect_uris=[AnyUrl(self._redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        metadata.scope = None
        return _Provider(
            self,
            server_url=self.url,
            client_metadata=metadata,
            storage=self.store,
            redirect_handler=self._remember_url,
            callback_handler=self._wait_for_code,
            client_metadata_url=self.settings.client_metadata_url,
        )

    async def _remember_url(self, url: str) -> None:
        if self.sign_in is None:
            raise SignInRequired(self.alias)
        self._authorization_url = url

    async def _wait_for_code(self) -> AuthorizationCodeResult:
        assert self.sign_in is not None and self._authorization_url is not None
        url, self._authorization_url = self._authorization_url, None
        return await self.sign_in.authorize(self.alias, url, self._redirect_uri)

    async def observe(self, response: httpx2.Response) -> None:
        """An httpx response hook: remembers refusals of the server and failed metadata fetches."""
        if _same_url(str(response.request.url), self.url):
            self.status = response.status_code
        elif response.status_code >= 400:
            self.failed_fetches.append((str(response.request.url), response.status_code))

    def describe(self) -> str | None:
        """Why the server could not be used, when authorization is the reason."""
        error = self.error
        if isinstance(error, SignInRequired):
            return str(error)
        if error is not None:
            return self._describe_flow_error(error)
        if self.status == 401:
            if self.static_header:
                return "unauthorized (HTTP 401): the server refused the Authorization header from mcp.json"
            if self.provider is None:
                return "unauthorized (HTTP 401), and OAuth is turned off for this server (oauth.enabled is false)"
            return str(SignInRequired(self.alias))
        if self.status == 403:
            return "forbidden (HTTP 403): the server refused the credentials"
        return None

    def _describe_flow_error(self, error: BaseException) -> str:
        text = str(error)[:400]
        context = self.provider.context if self.provider is not None else None
        if "metadata request failed" in text.lower():
            where = next((u for u, _ in reversed(self.failed_fetches) if "oauth-protected-resource" in u), self.url)
            return f"the server's protected-resource metadata could not be fetched from {where} ({text})"
        if text.startswith("Protected resource") and "does not match" in text:
            return f"refused: the server's protected-resource metadata is for another resource ({text})"
        if context is not None and context.oauth_metadata is None and self.status == 401:
            where = build_oauth_authorization_server_metadata_discovery_urls(context.auth_server_url, self.url)[0]
            if "issuer mismatch" in text.lower():
                return f"refused: the authorization metadata at {where} names another issuer ({text})"
            return f"the server's authorization metadata could not be fetched from {where}"
        if isinstance(error, OAuthRegistrationError):
            return f"dynamic client registration failed: {text}"
        if isinstance(error, OAuthTokenError):
            return f"the token request failed: {text}"
        if isinstance(error, OAuthFlowError):
            return f"sign-in failed: {text}"
        return f"sign-in failed: {type(error).__name__}: {text}"


def _union(first: str | None, second: str | None) -> str | None:
    words = list(dict.fromkeys((first or "").split() + (second or "").split()))
    return " ".join(words) or None


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _registered_loopback_uri(client: OAuthClientInformationFull | None) -> str | None:
    """The redirect URI an earlier registration used, so the same client keeps working."""
    if client is None or not client.redirect_uris:
        return None
    uri = str(client.redirect_uris[0])
    parts = urlsplit(uri)
    return uri if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost") and parts.port else None


def _free_loopback_uri() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


class _ReportedByTheBridge(logging.Filter):
    """Drops the SDK's traceback logs of OAuth failures, which the bridge reports in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _is_auth_failure(record.exc_info[1]))


def _is_auth_failure(exc: BaseException | None, depth: int = 0) -> bool:
    if exc is None or depth > 8:
        return False
    if isinstance(exc, (OAuthFlowError, SignInRequired)):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_auth_failure(inner, depth + 1) for inner in exc.exceptions)
    return _is_auth_failure(exc.__cause__, depth + 1)


_FILTER = _ReportedByTheBridge()


def _quiet_sdk_reports() -> None:
    for name in ("mcp.client.auth.oauth2", "mcp.client.streamable_http", "mcp.client.sse"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)

