"""Where OAuth tokens and client registrations are kept: one file per server URL, for the user only.

The directory is ``$CORETOOLS_OAUTH_DIR`` when set (tests, several profiles), otherwise
``$XDG_CONFIG_HOME/coretools/oauth`` (``~/.config/coretools/oauth``; ``%APPDATA%`` on Windows).
It is created 0700 and each file is written 0600, through a temporary file renamed into place,
so a reader never sees half a file and nobody else can read a token at any moment.

A file is named by a hash of the server's canonical URL (RFC 8707's form: lower-case scheme and
host, no fragment) and records that URL too; a file whose URL is not the server's is ignored.
Tokens are therefore only ever handed to the server they were issued for. Nothing here logs a
token or a secret.

:class:`TokenStore` is the SDK's ``TokenStorage`` for one server. It also remembers when the
access token expires (the SDK keeps that in memory only), so a token that expired while the
bridge was not running is refreshed instead of being sent and refused, and what discovery
found (the authorization server's token endpoint, the resource), so that refresh goes to the
right place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import ValidationError

from .notices import client_logger

logger = client_logger(__name__)

DIRECTORY_VARIABLE = "CORETOOLS_OAUTH_DIR"
FILE_LIMIT = 256 * 1024
"""A token file larger than this is not ours (or is damaged) and is ignored."""


def token_directory(environ: Mapping[str, str] | None = None) -> Path:
    """The directory that holds the token files."""
    env = os.environ if environ is None else environ
    if env.get(DIRECTORY_VARIABLE):
        return Path(env[DIRECTORY_VARIABLE]).expanduser()
    if sys.platform == "win32":  # pragma: no cover - Windows
        base = env.get("APPDATA") or str(Path.home() / "AppData" / "Roaming")
    else:
        base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "coretools" / "oauth"


def canonical_url(server_url: str) -> str:
    return resource_url_from_server_url(server_url)


class TokenStore:
    """Tokens and client registration for one server URL (the SDK's ``TokenStorage``).

    ``client_info`` is a client registered beforehand (``oauth.clientId`` in ``mcp.json``): it is
    returned instead of a stored registration and never written to disk.
    """

    def __init__(
        self,
        server_url: str,
        directory: Path | None = None,
        *,
        client_info: OAuthClientInformationFull | None = None,
    ) -> None:
        self.server_url = canonical_url(server_url)
        self.directory = directory if directory is not None else token_directory()
        digest = hashlib.sha256(self.server_url.encode()).hexdigest()[:32]
        self.path = self.directory / f"{digest}.json"
        self.preregistered = client_info

    # ------------------------------------------------------------------------ TokenStorage

    async def get_tokens(self) -> OAuthToken | None:
        return self._model(self.read().get("tokens"), OAuthToken)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = self.read()
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record["expires_at"] = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        self._write(record)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.preregistered is not None:
            return self.preregistered
        return self._model(self.read().get("client"), OAuthClientInformationFull)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.preregistered is not None:
            return
        record = self.read()
        record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(record)

    # ------------------------------------------------------------------------ the rest

    def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), if the server said."""
        value = self.read().get("expires_at")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def stored_client(self) -> OAuthClientInformationFull | None:
        """The client registration made earlier (not a pre-registered one)."""
        return self._model(self.read().get("client"), OAuthClientInformationFull)

    def discovery(self) -> dict[str, Any]:
        """What discovery found last time (the SDK's models as JSON), so a refresh after a restart
        reaches the authorization server's token endpoint without discovering it again."""
        value = self.read().get("discovery")
        return value if isinstance(value, dict) else {}

    def set_discovery(self, discovery: dict[str, Any]) -> None:
        record = self.read()
        if record.get("discovery") != discovery:
            record["discovery"] = discovery
            self._write(record)

    def has_tokens(self) -> bool:
        return isinstance(self.read().get("tokens"), dict)

    def forget_tokens(self) -> None:
        """Drop the tokens, keep the client registration (a fresh sign-in reuses it)."""
        record = self.read()
        if record.pop("tokens", None) is not None:
            record.pop("expires_at", None)
            self._write(record)

    def forget(self) -> bool:
        """Delete everything stored for this server; whether there was anything."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def read(self) -> dict[str, Any]:
        """The record for this server, or an empty one (missing, damaged, or another server's)."""
        try:
            with open(self.path, "rb") as file:
                raw = file.read(FILE_LIMIT + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            logger.warning("cannot read the OAuth token file %s: %s", self.path, exc.strerror or exc)
            return {}
        try:
            record = json.loads(raw) if len(raw) <= FILE_LIMIT else None
        except ValueError:
            record = None
        if not isinstance(record, dict) or record.get("server_url") != self.server_url:
            return {}
        return record

    def _write(self, record: dict[str, Any]) -> None:
        record["server_url"] = self.server_url
        _private_directory(self.directory)
        data = json.dumps(record, indent=2).encode()
        fd, temporary = tempfile.mkstemp(prefix=".tokens-", suffix=".tmp", dir=self.directory)  # created 0600
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    @staticmethod
    def _model(value: Any, model: Any) -> Any:
        if not isinstance(value, dict):
            return None
        try:
            return model.model_validate(value)
        except ValidationError:
            return None


def _private_directory(directory: Path) -> None:
    """Create the directory (and its parents) readable by the user only."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if sys.platform != "win32":
        os.chmod(directory, 0o700)
