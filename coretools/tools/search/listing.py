"""The files a search names to ripgrep when rg does not walk a directory itself, and what the walk's bounds
left out of them.

rg walks a directory target itself, applying the rules as `ripgrep.rg_rules` expresses them. Where it
cannot (a `.geminiignore` that un-ignores), or where its walk needs more than the memory a search may use
(`ripgrep.RG_DATA_LIMIT`: an in-tree `.gitignore` of thousands of glob lines, which rg compiles into one
large program), the workspace walk picks the files instead: the pattern engine's exact rules, each ignore
file read only up to `MAX_IGNORE_FILE_BYTES`, no deeper than `LISTED_BOUNDS.max_depth` and no more than
`LISTED_BOUNDS.max_entries` entries. What that leaves out is said in the answer (`Collector.skipped`): an
ignore file too large to apply, where the walk stopped descending, how far it got; and so are a file rg
could not search within its bound and the paths too long for rg to name (the notes are phrased here).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from coretools.sandbox import (
    GITIGNORE, MAX_IGNORE_FILE_BYTES, Location, NodeMatcher, WalkBounds, WalkReport, parse_include, walk,
)
from coretools.tools.search.results import Job, Target

LISTED_BOUNDS = WalkBounds(max_entries=1_000_000, max_depth=64)
SHOWN_PATH = 160  # characters of a path named in a note (longer ones keep their start and end)


def listed_files(job: Job, target: Target, bounds: WalkBounds = LISTED_BOUNDS) -> Iterator[str]:
    """The files below the directory `target` that the search takes, relative to it, in the walk's order:
    the request's ignore rules (protected names hidden, symlinks skipped) and its `include`. Once the walk
    is done, what its bounds left out is added to `job.out.skipped`."""
    ws, req, out = job.ws, job.req, job.out
    cut = len(target.rel) + 1 if target.rel else 0
    include = NodeMatcher(parse_include(req.include), source=req.include) if req.include else None
    report = WalkReport()
    too_deep: str | None = None
    large: list[tuple[str, int]] = []
    loc = Location(target.root, target.rel, target.path)
    for entry in walk(ws, loc, req.ignore, bounds=bounds, report=report, include_dirs=True, cancelled=job.check):
        rel = entry.rel[cut:]
        if entry.kind == "dir":
            if too_deep is None and rel.count("/") + 1 >= bounds.max_depth:
                too_deep = rel  # listed, not entered
            continue
        if entry.name == GITIGNORE and req.ignore.git and entry.size > MAX_IGNORE_FILE_BYTES:
            large.append((target.display_prefix + rel, entry.size))
        if include is None or include(rel):
            yield rel
    out.skipped += [ignore_file_note(name, size) for name, size in large]
    if too_deep is not None:
        where = shown_path(target.display_prefix + too_deep)
        out.skipped.append(f"the walk did not descend below depth {bounds.max_depth} (first at {where})")
    elif report.truncated:
        out.skipped.append(f"the walk of {shown_path(target.path)} {report.truncated}")


BATCH_FILES = 2000
BATCH_BYTES = 96 * 1024  # of arguments per rg run, well below the kernel's limits


def batches(files: Iterable[str]) -> Iterator[list[str]]:
    """Paths (relative to rg's working directory) as `./path` arguments, in batches; one batch naming
    /dev/null when there are none, so that rg still checks the regex."""
    batch: list[str] = []
    size = 0
    given = False
    for rel in files:
        batch.append("./" + rel)
        size += len(rel) + 3
        if len(batch) >= BATCH_FILES or size >= BATCH_BYTES:
            yield batch
            given = True
            batch, size = [], 0
    if batch or not given:
        yield batch or [os.devnull]


def large_ignore_notes(job: Job, target: Target, unread: list[str]) -> list[str]:
    """The notes on the ignore files (root-relative) that the rules of a search of `target` read from
    outside it (`ripgrep.rg_rules`: the root's `.geminiignore`, the `.gitignore`s above it) and found
    absent: those that exist but are too large to apply. rg reads the ones inside the target itself."""
    found = job.ws.lstat_many(target.root, unread)
    return [
        ignore_file_note(job.ws.shown_path(target.root, name), st.st_size)
        for name, st in zip(unread, found)
        if st is not None and st.st_size > MAX_IGNORE_FILE_BYTES
    ]


def ignore_file_note(name: str, size: int) -> str:
    return (
        f"the rules in {shown_path(name)} were not applied (the file has {_size(size)}; an ignore file may have "
        f"{_size(MAX_IGNORE_FILE_BYTES)}), so files it would leave out may be searched"
    )


def skipped_file_note(name: str, limit: int) -> str:
    return (
        f"{shown_path(name)} was not searched: ripgrep needed more than {limit >> 20} MiB for it (a line tens of "
        "MB long, as in minified or generated data)"
    )


def too_large_note(name: str, limit: int) -> str:
    return (
        f"{shown_path(name)} was not searched: it is larger than the {limit >> 20} MiB a file may have for the "
        "Python search engine, which reads it whole (ripgrep, the default engine, has no such bound)"
    )


def too_long_note(target: Target, first: str, count: int) -> str:
    """What a search says of the paths rg could not name (`ripgrep.PathTooLong`): `count` of them, the
    first `first` as rg wrote it."""
    shown = target.display_prefix + first[2:] if target.is_dir and first.startswith("./") else first
    return (
        f"{count} {'path' if count == 1 else 'paths'} nested too deep for the system to name (longer than "
        f"{PATH_MAX} bytes) {'was' if count == 1 else 'were'} not searched, the first {shown_path(shown)}"
    )


PATH_MAX = 4096  # Linux's


def shown_path(path: str) -> str:
    if len(path) <= SHOWN_PATH:
        return path
    half = (SHOWN_PATH - 3) // 2
    return f"{path[:half]}...{path[-half:]}"


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n >> 10} KiB"
