"""Where the edit journals live: one folder per workspace under `settings.state_dir()/journal/`, created
private (0700), found by the roots its `meta.json` names, the least recently used removed beyond a bound.
What is inside a folder (segments of records) is `journal`'s and `records`'.
"""

from __future__ import annotations

import contextlib
import json
import os

from coretools.sandbox import durable, settings

MAX_JOURNALS = 64  # workspaces journaled at once; the least recently used journal goes first
SEGMENT_SUFFIX = ".seg"


def journal_root() -> str:
    return os.path.join(settings.state_dir(), "journal")


def segment_number(name: str) -> int | None:
    """The number of the segment file `name` (`<n>.seg`), or None when it is not one."""
    stem = name[: -len(SEGMENT_SUFFIX)] if name.endswith(SEGMENT_SUFFIX) else ""
    return int(stem) if stem.isdigit() and stem == str(int(stem)) else None


def known_journals() -> list[tuple[float, str, list[str]]]:
    """(last use: its newest segment's mtime, folder, roots) of each journal in the state directory (bounded)."""
    found = []
    try:
        names = os.listdir(journal_root())
    except FileNotFoundError:
        return []
    for name in names[: MAX_JOURNALS * 4]:
        folder = os.path.join(journal_root(), name)
        try:
            with open(os.path.join(folder, "meta.json"), "rb") as handle:
                roots = json.loads(handle.read(1 << 20))["roots"]
            used = max((os.stat(os.path.join(folder, n)).st_mtime for n in os.listdir(folder) if segment_number(n) is not None), default=0.0)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(roots, list) and all(isinstance(r, str) for r in roots):
            found.append((used, folder, roots))
    return found


def evict_journals(keep: str) -> None:
    """Remove the least recently used journals beyond `MAX_JOURNALS`, skipping any in use."""
    known = sorted(known_journals())
    for _, folder, _ in known[: max(len(known) - MAX_JOURNALS + 1, 0)]:
        if folder != keep:
            durable.remove_locked_folder(folder)


def private_dirs(*paths: str) -> None:
    """The state directory and then each of `paths` (each a child of the one before), created 0700."""
    os.makedirs(settings.state_dir(), mode=0o700, exist_ok=True)
    for path in (journal_root(), *paths):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
