"""Published tool names: portable, unique, and never parsed back.

Every tool is published under a name that Gemini, OpenAI and Anthropic all accept:
``^[A-Za-z_][A-Za-z0-9_-]{0,63}$`` (Gemini also allows ``.`` and ``:``, the other two do not).
With prefixing on, the name is ``alias__tool``; each half is sanitised on its own and runs of
underscores inside a half are collapsed, so the ``__`` separator stays recognisable to humans.
Names longer than 64 characters are cut and given an 8-hex-digit hash of the *original*
``alias`` and ``tool``, so the result is deterministic across runs and restarts. Names that
still collide after sanitising all get the hash suffix (not just the later ones), so the
outcome does not depend on the order in which servers answered.

Calls are routed through the returned map; nothing ever splits a published name on ``__``.

:func:`collisions` tells which names clash before any hash is added: with ``--prefix never``
the user asked for the servers' own names, so a clash is an error (:class:`NameCollisionError`)
rather than a name the user never chose.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Literal

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
MAX_NAME_LENGTH = 64
SEPARATOR = "__"

PrefixMode = Literal["auto", "always", "never"]
PREFIX_MODES: tuple[PrefixMode, ...] = ("auto", "always", "never")

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_UNDERSCORE_RUN = re.compile(r"_{2,}")
_FIRST_OK = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


class NameCollisionError(ValueError):
    """Tool names that would need a hash suffix where none may be added (``prefix="never"``)."""

    def __init__(self, clashes: dict[str, list[tuple[str, str]]], reserved: frozenset[str] = frozenset()) -> None:
        self.clashes = clashes
        super().__init__(f"with prefix never, {describe_collisions(clashes, reserved)}")


def describe_collisions(clashes: dict[str, list[tuple[str, str]]], reserved: frozenset[str] = frozenset()) -> str:
    """One sentence naming every clashing name and who offers it."""
    items = []
    for name, pairs in sorted(clashes.items()):
        if all(tool == name for _, tool in pairs):
            offers = "servers " + ", ".join(alias for alias, _ in pairs) if len(pairs) > 1 else f"server {pairs[0][0]}"
        else:
            offers = ", ".join(f"{tool!r} of {alias}" for alias, tool in pairs)
        items.append(f"{name} ({offers}{', and reserved by the host' if name in reserved else ''})")
    return "tool names collide: " + "; ".join(items)


def sanitize_part(text: str) -> str:
    """One half of a name: unsafe characters become ``_``, underscore runs collapse to one."""
    cleaned = _UNDERSCORE_RUN.sub("_", _UNSAFE.sub("_", text))
    return cleaned or "_"


def name_digest(alias: str, tool: str, length: int = 8) -> str:
    """Stable short hash of the original (unsanitised) alias and tool name."""
    return hashlib.sha256(f"{alias}\0{tool}".encode()).hexdigest()[:length]


def _with_suffix(name: str, digest: str) -> str:
    suffix = "_" + digest
    return name[: MAX_NAME_LENGTH - len(suffix)] + suffix


def base_name(alias: str, tool: str, *, prefixed: bool) -> str:
    """The sanitised name before any collision handling; shortened when over 64 chars."""
    name = sanitize_part(tool)
    if prefixed:
        name = sanitize_part(alias) + SEPARATOR + name
    if name[0] not in _FIRST_OK:
        name = "_" + name
    if len(name) > MAX_NAME_LENGTH:
        name = _with_suffix(name, name_digest(alias, tool))
    return name


def should_prefix(mode: PrefixMode, connected_servers: int) -> bool:
    """``auto`` prefixes only when more than one server is connected."""
    if mode not in PREFIX_MODES:
        raise ValueError(f"prefix must be one of {', '.join(PREFIX_MODES)}, not {mode!r}")
    return mode == "always" or (mode == "auto" and connected_servers > 1)


def collisions(
    pairs: Iterable[tuple[str, str]], *, prefixed: bool, reserved: Iterable[str] = ()
) -> dict[str, list[tuple[str, str]]]:
    """The names that more than one ``(alias, tool)`` would get, or that are ``reserved``, with who gets them."""
    taken = set(reserved)
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for pair in dict.fromkeys(pairs):
        groups[base_name(*pair, prefixed=prefixed)].append(pair)
    return {name: members for name, members in groups.items() if len(members) > 1 or name in taken}


def publish_names(
    pairs: Iterable[tuple[str, str]],
    *,
    prefixed: bool,
    reserved: Iterable[str] = (),
) -> dict[tuple[str, str], str]:
    """Map each ``(alias, tool)`` to a unique portable name.

    ``reserved`` names (for example a host's own tools) are treated as taken: a tool whose
    name would equal one gets the hash suffix instead.
    """
    unique_pairs = list(dict.fromkeys(pairs))
    taken = set(reserved)
    names = {pair: base_name(*pair, prefixed=prefixed) for pair in unique_pairs}
    digest_length = 8
    while True:
        groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for pair, name in names.items():
            groups[name].append(pair)
        clashing = [pair for name, members in groups.items() if len(members) > 1 or name in taken for pair in members]
        if not clashing:
            return names
        if digest_length > 64:  # pragma: no cover - would need a sha256 collision
            raise RuntimeError(f"cannot make tool names unique: {sorted(clashing)}")
        for pair in clashing:
            names[pair] = _with_suffix(base_name(*pair, prefixed=prefixed), name_digest(*pair, length=digest_length))
        digest_length += 4
