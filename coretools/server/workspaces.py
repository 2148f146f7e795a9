"""Which workspace a connection works in: the one decision the server and `coretools-mcp call` share.

Operator roots (`--root`) are the hard boundary. A client's roots can narrow them, never widen them. With no
`--root`, the client's roots are the workspace when it offers them, else the current directory (refused if
that is `/` or the home directory, unless broad roots are allowed). `call` has no client: it decides with
no client roots, exactly as the server does for a connection that offers none.

This module does not import the MCP SDK: the server fetches a client's roots and passes them in.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from coretools.errors import ConfigurationError, ErrorKind, ToolError
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.paths import protected_reason
from coretools.server.config import ServerConfig
from coretools.workspace.hints import HintedWorkspace

logger = logging.getLogger("coretools")


class Workspaces:
    """Decides the workspace of each connection, and keeps it while the connection lives."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.base = HintedWorkspace(config.roots, allow_protected=config.allow_protected) if config.roots else None
        self._by_connection: weakref.WeakKeyDictionary[Any, Workspace] = weakref.WeakKeyDictionary()
        self._fallback: Workspace | None = None

    def forget(self, key: Hashable | None) -> None:
        """Drop a connection's workspace (its roots changed). Not closed here: calls in flight may still use
        it; its descriptors close when the last reference goes (see `Workspace.__init__`)."""
        if key is not None:
            self._by_connection.pop(key, None)

    async def for_connection(self, key: Hashable | None, client_roots: Callable[[], Awaitable[list[str]]]) -> Workspace:
        """The workspace of the connection `key` (None: a request that stands alone), deciding it at its
        first call from the roots `client_roots()` gives; raises `ToolError` when there is none."""
        if key is not None and key in self._by_connection:
            return self._by_connection[key]
        workspace = self.decide(await client_roots())
        if key is None:
            return workspace
        if key in self._by_connection:  # a concurrent first call of the same connection decided first
            return self._by_connection[key]
        # A connection's own workspace is dropped with the connection (the mapping holds it weakly by key)
        # and closes its descriptors once no call uses it any more.
        self._by_connection[key] = workspace
        return workspace

    def decide(self, client_roots: Sequence[str]) -> Workspace:
        """The workspace of a client offering `client_roots` (none: a client without roots, or `call`);
        raises `ToolError` when there is none, saying how to give one."""
        if self.base is not None:
            if client_roots:
                refused: list[str] = []
                narrowed = self.base.narrowed(list(client_roots), refused)
                if refused:
                    logger.warning("refusing client roots: %s", "; ".join(refused))
                if narrowed is not None:
                    return narrowed
                if not refused:
                    logger.warning(
                        "client roots %s do not overlap the configured roots %s; using the configured roots",
                        list(client_roots),
                        self.base.root_list(),
                    )
            return self.base
        if client_roots:
            return self._of_client(client_roots)
        if self._fallback is None:
            try:
                cwd = Workspace.check_root(os.getcwd(), allow_broad=self.config.allow_broad_root)
            except ConfigurationError as exc:
                raise ToolError(
                    f"No workspace: the server was started without --root, the client offered no roots, and the "
                    f"current directory cannot serve as one ({exc}). Restart coretools with --root /path/to/project.",
                    ErrorKind.PATH_NOT_IN_WORKSPACE,
                ) from None
            self._fallback = HintedWorkspace([cwd], allow_protected=self.config.allow_protected)
        return self._fallback

    def _of_client(self, client_roots: Sequence[str]) -> Workspace:
        usable = []
        for root in client_roots:
            try:
                checked = Workspace.check_root(root, allow_broad=self.config.allow_broad_root)
            except ConfigurationError as exc:
                logger.warning("ignoring client root: %s", exc)
                continue
            reason = None if self.config.allow_protected else protected_reason(os.path.realpath(checked))
            if reason:
                logger.warning("refusing client root %s: it is %s, a protected path", checked, reason)
                continue
            usable.append(checked)
        if usable:
            return HintedWorkspace(usable, allow_protected=self.config.allow_protected)
        raise ToolError(
            f"No workspace: the server was started without --root and none of the client's roots "
            f"({', '.join(client_roots)}) can serve as one (the server log says why). Offer a project "
            "directory as a root, or restart coretools with --root /path/to/project.",
            ErrorKind.PATH_NOT_IN_WORKSPACE,
        )
