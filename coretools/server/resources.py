"""The workspace's files as MCP resources, in both protocol eras.

Each file is `file://` + its absolute real path, percent-encoded: one scheme whatever the number of roots,
and a URI a host can also open itself. Everything goes through the connection's workspace, as the tools
do: a listing walks each root with the ignore rules and protected names the walks apply (so an ignored or
protected file is never listed), and a read locates the URI's path, opens it through the gateway and
refuses it when the path, or the file it really is, is ignored or protected. The path is judged before
any I/O, so refusing an ignored or protected path does not say whether such a file exists.

The listing is paged: a cursor is a place in the walk's order (`resource_walk.Position`) with the root it is
in and a fingerprint of the workspace's roots, so a page resumes the walk where the last one stopped and no
page holds or rewalks the tree. A page holds at most `PAGE_SIZE` resources and judges at most
`STEPS_PER_PAGE` entries (a tree of mostly ignored files gives short pages rather than a long stall).
Cursors carry no secret: a made-up cursor can only name a place in a walk that applies every rule anyway.

One template per root lets a client name any file below it (`file:///root/{+path}`). Files the tools offer
(`Tool.resources`) are listed first; one that is one user's own is published over stdio only (the process
serves one user), never over HTTP.

Saved command outputs and background logs (`sandbox/scratch.py`) are never listed, but a tool result that
names one links to it (`ToolResult.link`), and reading that link works for the session that owns the file:
the request's session is in force while the read runs, so the gateway's one rule decides (`session.visible`,
as for `read_file` the tool). For any other session the file is outside its workspace, and a path outside the
workspace is not found, like a missing file, so no session can tell another's files from names never made.

No change notifications: noticing changes would need a watcher on every directory of every root (inotify
watches are a limited, per-user resource) or a rescan; lists and reads are computed at each request, so they
are always current.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import json
import logging
import mimetypes
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, closing
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

import anyio
import anyio.from_thread
from mcp import MCPError, types
from mcp.server import ServerRequestContext

from coretools.errors import ErrorKind, OutsideWorkspace, ToolError
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import IgnoreOptions
from coretools.sandbox.paths import DirEntry, within
from coretools.sandbox.session import SessionScope
from coretools.workspace.resource_walk import Position, walk_after
from coretools.tools.base import ToolResource, file_uri
from coretools.tools.filetypes import SNIFF_BYTES, classify

logger = logging.getLogger("coretools")

PAGE_SIZE = 500
STEPS_PER_PAGE = 20_000
MAX_READ_BYTES = 8 * 1024 * 1024
RULES = IgnoreOptions()  # every source: .gitignore, .geminiignore and the default excludes
CURSOR_VERSION = 1
TEXT_APPLICATION_TYPES = frozenset(
    "application/json application/xml application/javascript application/x-sh application/toml "
    "application/yaml application/x-yaml application/sql image/svg+xml".split()
)


# -- URIs -----------------------------------------------------------------------------------------------


def uri_path(uri: str) -> str:
    """The absolute path a `file://` URI names; MCPError (invalid params) for anything else."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise _invalid(uri, f"Not a resource of this server: {uri}. Its resources are file:// URIs of workspace files.")
    path = unquote_to_bytes(parts.path).decode("utf-8", "surrogateescape")
    if not path.startswith("/"):
        raise _invalid(uri, f"Not an absolute file:// URI: {uri}")
    return path


def _invalid(uri: str, message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message, data={"uri": uri})


def _not_found(uri: str) -> MCPError:
    return _invalid(uri, f"Resource not found: {uri}")


# -- cursors --------------------------------------------------------------------------------------------


def _fingerprint(ws: Workspace) -> str:
    return hashlib.sha256("\0".join(r.path for r in ws.roots).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def encode_cursor(ws: Workspace, root: int, position: Position | None) -> str:
    rel, subtree = (position.rel, position.subtree) if position else (None, False)
    raw = json.dumps([CURSOR_VERSION, _fingerprint(ws), root, rel, subtree], ensure_ascii=True).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(ws: Workspace, cursor: str) -> tuple[int, Position | None]:
    """The root and position a cursor of `encode_cursor` names; MCPError (invalid params) when it is not
    one, or belongs to another workspace (the client's roots changed since)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, fingerprint, root, rel, subtree = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise _bad_cursor("it is not one this server gave out") from None
    if version != CURSOR_VERSION or not isinstance(fingerprint, str) or not isinstance(subtree, bool):
        raise _bad_cursor("it is not one this server gave out")
    if fingerprint != _fingerprint(ws):
        raise _bad_cursor("the workspace roots changed since it was given out; list again from the start")
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < len(ws.roots):
        raise _bad_cursor("it names no root of this workspace")
    if rel is None:
        return root, None
    if not isinstance(rel, str) or not _plain_rel(rel):
        raise _bad_cursor("it names no place in the workspace")
    return root, Position(rel, subtree)


def _plain_rel(rel: str) -> bool:
    parts = rel.split("/")
    return len(rel) <= 4096 and all(p not in ("", ".", "..") and "\0" not in p for p in parts)


def _bad_cursor(why: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=f"Invalid cursor: {why}.")


# -- mime types and contents ------------------------------------------------------------------------------


def guessed_mime(name: str) -> str | None:
    """The type a file's name suggests (listings do not open files), or None."""
    return mimetypes.guess_type(name, strict=False)[0]


def _text_mime(name: str, kind_mime: str | None) -> str:
    if kind_mime and kind_mime != "text/plain":
        return kind_mime
    guess = guessed_mime(name)
    if guess and (guess.startswith("text/") or guess in TEXT_APPLICATION_TYPES):
        return guess
    return "text/plain"


def contents(uri: str, name: str, data: bytes) -> types.TextResourceContents | types.BlobResourceContents:
    """Text when the file is text in a known encoding (UTF-8, or UTF-16/32 with a BOM), else a blob, each
    with the file's type as far as its name and first bytes tell."""
    kind = classify(name, data[:SNIFF_BYTES])
    if kind.kind in ("text", "svg"):
        try:
            text = data[len(kind.bom) :].decode(kind.encoding)
        except UnicodeDecodeError:
            pass
        else:
            return types.TextResourceContents(uri=uri, mime_type=_text_mime(name, kind.mime), text=text)
    mime = kind.mime if kind.kind != "text" else (guessed_mime(name) or "application/octet-stream")
    blob = base64.b64encode(data).decode("ascii")
    return types.BlobResourceContents(uri=uri, mime_type=mime or "application/octet-stream", blob=blob)


def _too_large(uri: str, size: int) -> MCPError:
    return _invalid(
        uri,
        f"File too large to read as a resource: {uri} is {size:,} bytes; the limit is {MAX_READ_BYTES:,}. "
        "Use the read_file tool, which reads a file in windows.",
    )


def _printable(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# -- the handlers -----------------------------------------------------------------------------------------


class Resources:
    """The resource handlers of one server. `workspace_for(ctx)` gives a request's workspace (raising
    `ToolError` when there is none); `offered` are the files the tools offer that this server publishes
    (`published`); `session_for(ctx)` enters the request's session (an async context manager yielding its
    `SessionScope`), in force while a read runs so that the session's own saved outputs are readable."""

    def __init__(
        self,
        workspace_for: Callable[[ServerRequestContext], Any],
        offered: list[ToolResource],
        session_for: Callable[[ServerRequestContext], AbstractAsyncContextManager[SessionScope]],
    ) -> None:
        self._workspace_for = workspace_for
        self.offered = offered
        self._session_for = session_for

    def handlers(self) -> dict[str, Any]:
        """The `Server(...)` keyword arguments that publish the resources."""
        return {
            "on_list_resources": self.on_list,
            "on_list_resource_templates": self.on_templates,
            "on_read_resource": self.on_read,
        }

    async def _workspace(self, ctx: ServerRequestContext) -> Workspace:
        try:
            return await self._workspace_for(ctx)
        except ToolError as exc:
            raise MCPError(code=types.INVALID_REQUEST, message=exc.message) from None

    async def on_list(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        ws = await self._workspace(ctx)
        cursor = params.cursor if params is not None else None
        start = decode_cursor(ws, cursor) if cursor else (0, None)
        first: list[types.Resource] = []
        if not cursor and self.offered:
            first = await anyio.to_thread.run_sync(self._offered_listing)
        page, next_cursor = await _in_thread(
            "listing resources", list_page, ws, start, PAGE_SIZE - len(first), anyio.from_thread.check_cancelled
        )
        return types.ListResourcesResult(resources=first + page, next_cursor=next_cursor)

    async def on_templates(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        if params is not None and params.cursor:
            raise _bad_cursor("the templates fit on one page")
        ws = await self._workspace(ctx)
        templates = [_template(ws, index) for index in range(len(ws.roots))]
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def on_read(
        self, ctx: ServerRequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        path = uri_path(uri)
        offered = self._offered(path)
        if offered is not None:
            found = await anyio.to_thread.run_sync(_read_offered, offered, uri)
            return types.ReadResourceResult(contents=[found])
        ws = await self._workspace(ctx)
        async with self._session_for(ctx) as session:
            with session.active():
                found = await _in_thread(f"reading {uri}", read_file, ws, uri, path)
        return types.ReadResourceResult(contents=[found])

    # -- the files the tools offer ------------------------------------------------------------------------

    def _offered(self, path: str) -> ToolResource | None:
        for offered in self.offered:
            if path == str(offered.path) or path == os.path.realpath(offered.path):
                return offered
        return None

    def _offered_listing(self) -> list[types.Resource]:
        listed = []
        for offered in self.offered:
            try:
                st = os.stat(offered.path)
            except OSError:
                continue
            listed.append(
                types.Resource(
                    uri=file_uri(str(offered.path)),
                    name=_printable(offered.path.name),
                    title=_printable(offered.title),
                    description=offered.description,
                    mime_type=offered.mime_type,
                    size=st.st_size,
                    annotations=_annotations(st.st_mtime),
                )
            )
        return listed


def _read_offered(offered: ToolResource, uri: str) -> types.TextResourceContents | types.BlobResourceContents:
    try:
        found = offered.read_prefix(MAX_READ_BYTES + 1)
    except OSError as exc:
        raise _invalid(uri, f"{offered.title} cannot be read: {exc.strerror or exc}") from None
    if found is None:
        raise _not_found(uri)
    data, size = found
    if len(data) > MAX_READ_BYTES:
        raise _too_large(uri, size)
    result = contents(uri, offered.path.name, data)
    if isinstance(result, types.TextResourceContents):
        result.mime_type = offered.mime_type
    return result


async def _in_thread(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a worker thread (walks and reads block), its failures as protocol errors: the SDK
    would answer an exception with its text on 2025-era connections, so nothing else gets out."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except MCPError:
        raise
    except ToolError as exc:  # the workspace itself failed (a root removed, say)
        raise MCPError(code=types.INTERNAL_ERROR, message=f"Failed {what}: {exc.message}") from None
    except Exception:  # noqa: BLE001 - a bug: logged, and the server goes on
        logger.exception("%s failed unexpectedly", what)
        message = f"Internal error {what}; the details are in the server log."
        raise MCPError(code=types.INTERNAL_ERROR, message=message) from None


def _template(ws: Workspace, index: int) -> types.ResourceTemplate:
    root = ws.roots[index]
    base = file_uri(root.path.rstrip("/"))
    name = os.path.basename(root.path.rstrip("/")) or "/"
    return types.ResourceTemplate(
        name=_printable(name),
        title=_printable(f"Files in {root.shown}"),
        uri_template=f"{base}/{{+path}}",
        description=_printable(
            f"Any file below {root.shown}: `path` is relative to it. Ignored and protected files are refused."
        ),
    )


def _annotations(mtime: float) -> types.Annotations:
    stamp = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    return types.Annotations(last_modified=stamp)


# -- listing ----------------------------------------------------------------------------------------------


def listed_roots(ws: Workspace) -> list[int]:
    """The roots a listing walks: a root inside an earlier one is left out, its files being that one's (as
    a path resolves to the first root that holds it)."""
    kept: list[int] = []
    for index, root in enumerate(ws.roots):
        if not any(within(root.path, ws.roots[k].path) for k in kept):
            kept.append(index)
    return kept


def list_page(
    ws: Workspace, start: tuple[int, Position | None], size: int, cancelled: Callable[[], None] | None = None
) -> tuple[list[types.Resource], str | None]:
    """Up to `size` resources from `start` on (a root and a position in its walk), and the cursor of the
    rest (None when the walk of the last root is over)."""
    root, position = start
    page: list[types.Resource] = []
    steps = 0
    for index in [i for i in listed_roots(ws) if i >= root]:
        after = position if index == root else None
        with closing(walk_after(ws, index, RULES, after, cancelled=cancelled, max_steps=STEPS_PER_PAGE)) as walk:
            for entry, reached in walk:
                if entry is not None:
                    if len(page) >= size:
                        return page, encode_cursor(ws, index, after)
                    page.append(_resource(ws, index, entry))
                after = reached
                steps += 1
                if steps >= STEPS_PER_PAGE:
                    return page, encode_cursor(ws, index, after)
    return page, None


def _resource(ws: Workspace, root: int, entry: DirEntry) -> types.Resource:
    path = f"{ws.roots[root].path.rstrip('/')}/{entry.rel}"
    return types.Resource(
        uri=file_uri(path),
        name=_printable(entry.rel),
        mime_type=guessed_mime(entry.name),
        size=entry.size,
        annotations=_annotations(entry.mtime),
    )


# -- reading ----------------------------------------------------------------------------------------------


def read_file(ws: Workspace, uri: str, path: str) -> types.TextResourceContents | types.BlobResourceContents:
    """The contents of the workspace file `path` (the URI's), through the gateway, or MCPError (invalid
    params): not found, outside the workspace, protected, ignored, not a regular file, too large. A saved
    output or log of the calling session (a tool result's link) is read as the gateway reads it for
    `read_file` the tool; another session's is outside this one's workspace, so not found."""
    try:
        loc = ws.locate(path)
    except ToolError as exc:
        raise _refusal(uri, exc) from None
    if ".." not in loc.rel.split("/"):
        _refuse_ignored(ws, uri, loc.root, loc.rel)  # by name, before any I/O
    try:
        with ws.open_file(loc) as (node, handle):
            _refuse_ignored(ws, uri, node.root, node.rel)  # the file it really is (a link's target)
            if node.st.st_size > MAX_READ_BYTES:
                raise _too_large(uri, node.st.st_size)
            data = handle.read(MAX_READ_BYTES + 1)  # type: ignore[attr-defined]
    except ToolError as exc:
        raise _refusal(uri, exc) from None
    if len(data) > MAX_READ_BYTES:  # grew since the stat
        raise _too_large(uri, len(data))
    return contents(uri, os.path.basename(path), data)


def _refuse_ignored(ws: Workspace, uri: str, root: int, rel: str) -> None:
    if ws.is_ignored(root, rel, False, RULES):
        raise _invalid(
            uri,
            f"Resource not published: {uri} is ignored (.gitignore, .geminiignore or the default excludes), "
            "and ignored files are not published as resources.",
        )


def _refusal(uri: str, exc: ToolError) -> MCPError:
    """A missing file and a path outside the workspace are one answer, not found: the files of another
    session's scratch area are outside this one's, and must not be told apart from names it never had."""
    if exc.kind == ErrorKind.FILE_NOT_FOUND or isinstance(exc, OutsideWorkspace):
        return _not_found(uri)
    return _invalid(uri, f"Resource not available: {exc.message}")


def published(offered: list[ToolResource], transport: str) -> list[ToolResource]:
    """The files the tools offer that a server on `transport` publishes: over HTTP the server may serve
    several people, so a file that is one user's own is left out."""
    return [found for found in offered if transport == "stdio" or not found.personal]
