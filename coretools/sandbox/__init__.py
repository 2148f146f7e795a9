"""The boundary: what keeps the tools inside their workspace. Tools enter it here, by the names below; its
modules import one another directly, never through this door.

The door (`__all__`), by what a tool asks of the boundary:

* the workspace gateway, the only way to a user path: `Workspace` (`gateway`, writes in `writes`), the
  values it hands out (`Location`, `Node`, `DirEntry`, `Written`, `WriteOutcome`, `EditLock` from `locks`),
  the scratch area's answers (`scratch`), the session a call belongs to (`session`), and the one reading of
  a protected name (`protected_name`, `paths`);
* the walker (`walker`): `walk` (the descriptor walk), `walk_files` and `find_files` (on `rg --files` where
  it can, glob's fast path included), with their bounds and reports (`WalkBounds`, `WalkReport`);
* ignore rules and patterns: `IgnoreOptions` (`ignore`, the ignore engine), the in-process matcher
  (`matcher`), the glob and include dialects (`patterns`) and their ripgrep form (`rgglobs`);
* programs: `Runner`, `RunSpec` and `Outcome` (`runner`, the one process runner, on `process_groups`),
  `ProcessSettings` (`process_settings`: timeouts, the sandbox mode: `bwrap`, `landlock` and `seccomp`,
  `hardened_env`), and `ripgrep`, rg run with our rules and read as bounded records (`RgRun`);
* policies: `ShellPolicy` and `CommandRefused` (`shell_policy` and `exec_policy`: which commands may run),
  `GitWatch` (`git_watch`: repositories a command changed), `netpolicy` and `pinned_http` (which
  addresses web_fetch may reach, and the client that keeps to them; imported on first use: it loads an
  HTTP stack);
* `memory_file` (save_memory's file), `grammar_input` (the view of untrusted text tree-sitter is shown),
  and the settings read from the environment and option values (`settings`).

Below the door, not for tools: `kernel` (resolution beneath a root descriptor), `durable` and `diskio`
(crash-safe writes), `nofollow`, `casefold`, `git_config`, `reaper` (run as a script).
"""

from __future__ import annotations

from coretools.sandbox import memory_file, netpolicy, ripgrep
from coretools.sandbox.exec_policy import runs_programs
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.git_watch import GitState, GitWatch, changes, warning
from coretools.sandbox.grammar_input import MAX_PIPELINE, ascii_view, longest_pipeline
from coretools.sandbox.ignore import GITIGNORE, MAX_IGNORE_FILE_BYTES, IgnoreOptions
from coretools.sandbox.locks import EditLock
from coretools.sandbox.matcher import MAX_MEM, NodeMatcher, compile_program, encode, globmatch, name_matches
from coretools.sandbox.paths import (
    DirEntry, Location, Node, WalkBounds, WalkReport, WriteOutcome, protected_name, strip_prefix,
)
from coretools.sandbox.patterns.glob import glob_escape, has_magic, split_literal_prefix
from coretools.sandbox.patterns.include import parse_include
from coretools.sandbox.process_settings import (
    DEFAULT_INACTIVITY_TIMEOUT, DEFAULT_WALL_TIMEOUT, SANDBOX_MODES, ProcessSettings, signal_name, stop_message,
)
from coretools.sandbox.rgglobs import include_flags, name_filter
from coretools.sandbox.ripgrep import MAX_GLOB_CHARS, MAX_PATTERN_CHARS, check_rg_argument, find_rg
from coretools.sandbox.runner import (
    Outcome, Runner, RunSpec, run_blocking, shorten, show_controls, strip_ansi, terminal_argv,
)
from coretools.sandbox.scratch import read_only_error, user_parent
from coretools.sandbox.session import PROCESS, SessionScope
from coretools.sandbox.settings import limit_option, refuse_negative
from coretools.sandbox.shell_policy import CommandRefused, ShellPolicy, agreeing_locale
from coretools.sandbox.walker import (
    FileTable, Scope, depth_cut, find_files, relative_to, search_scopes, walk, walk_files, walk_order,
)
from coretools.sandbox.writes import Written

__all__ = [
    # the gateway and its values
    "Workspace", "Location", "Node", "DirEntry", "Written", "WriteOutcome", "EditLock", "protected_name",
    "strip_prefix", "read_only_error", "user_parent", "PROCESS", "SessionScope",
    # the walker
    "walk", "walk_files", "find_files", "FileTable", "Scope", "WalkBounds", "WalkReport", "depth_cut",
    "relative_to", "search_scopes", "walk_order",
    # ignore rules and patterns
    "IgnoreOptions", "GITIGNORE", "MAX_IGNORE_FILE_BYTES", "NodeMatcher", "MAX_MEM", "compile_program", "encode",
    "globmatch", "name_matches", "glob_escape", "has_magic", "split_literal_prefix", "parse_include",
    "include_flags", "name_filter",
    # programs
    "Runner", "RunSpec", "Outcome", "run_blocking", "shorten", "strip_ansi", "terminal_argv", "ProcessSettings",
    "SANDBOX_MODES", "show_controls",
    "DEFAULT_INACTIVITY_TIMEOUT", "DEFAULT_WALL_TIMEOUT", "signal_name", "stop_message",
    "ripgrep", "find_rg", "check_rg_argument", "MAX_GLOB_CHARS", "MAX_PATTERN_CHARS",
    # policies
    "ShellPolicy", "CommandRefused", "agreeing_locale", "runs_programs", "GitWatch", "GitState", "changes",
    "warning", "netpolicy", "pinned_http",
    # the rest
    "memory_file", "MAX_PIPELINE", "ascii_view", "longest_pipeline", "limit_option", "refuse_negative",
]
