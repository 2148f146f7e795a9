"""Workspace services: what the tools keep about a workspace beyond the boundary itself. The sandbox
(`coretools.sandbox`) decides what may be touched; this layer remembers and explains. Tools enter it here,
by the names below; its modules import one another directly.

* `journal`: the edit journal behind `history`, `undo` and the undo tool (`JournalSettings`), kept in
  append-only record files (`records`) in per-workspace folders (`journal_folders`); `made_directories`:
  which directories a `mkdir -p` makes, and their removal when it is undone (neither is for tools);
* `views`: the stale-write record, each file as the session last saw it (`FileViews`);
* `hints`: the paths a not-found path likely meant; `HintedWorkspace` is the gateway with those hints, the
  workspace the server and the CLI give the tools;
* `background`: commands the shell tool left running, and their output (`BackgroundJobs`), found by the
  session's other tools (`SessionJobs`); `terminal`: the screen of one that runs in a pseudo-terminal;
* `ignore_reason`: which ignore rule hid a path, for glob's and list_directory's notes (`ignored_by`);
* `resource_walk`: a walk that resumes after a position, for the server's resource pages (`walk_after`).

It imports `coretools.sandbox` and `coretools.errors`; the tools, the server and the CLI import it; the
sandbox never does.
"""

from __future__ import annotations

from coretools.workspace import journal
from coretools.workspace.background import (
    DEFAULT_LIFETIME, DEFAULT_MAX_JOBS, DEFAULT_MAX_SERVER_JOBS, JOBS_KEY, BackgroundJob, BackgroundJobs, Limits,
    SessionJobs, Slots, TERMINAL_SIZE, TooManyJobs,
)
from coretools.workspace.hints import HintedWorkspace
from coretools.workspace.ignore_reason import (
    RESPECT_PARAMETERS, Ignored, describe_chain, ignored_by, ignored_chain, include_hint,
)
from coretools.workspace.journal import JournalSettings
from coretools.workspace.resource_walk import Position, walk_after
from coretools.workspace.views import FileViews

__all__ = [
    "journal", "JournalSettings", "FileViews", "HintedWorkspace",
    "BackgroundJobs", "BackgroundJob", "Limits", "TooManyJobs", "DEFAULT_LIFETIME", "DEFAULT_MAX_JOBS",
    "DEFAULT_MAX_SERVER_JOBS", "JOBS_KEY", "SessionJobs", "Slots", "TERMINAL_SIZE",
    "Ignored", "RESPECT_PARAMETERS", "describe_chain", "ignored_by", "ignored_chain", "include_hint",
    "Position", "walk_after",
]
