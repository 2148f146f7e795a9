"""The tools. One module per tool; each module exposes `TOOL`, the class implementing it.

A module may instead (or also) expose `provide(options, *, roots, reserved) -> list[Tool]` for tools that
exist only under some configuration (tools discovered from a project command, say), with the class of its
`options` as `OPTIONS`; its fields are command-line flags like a tool's `Options` (see `base.option`). The
server lists tools in the order below, and registers their flags in that order; a module that is not
present is simply not published. A tool that is not one of Gemini CLI's core tools says so (`Tool.opt_in`)
and is published only when the operator names it (`--tools`, see `coretools.server.toolset`).
"""

from __future__ import annotations

import importlib

TOOL_MODULES = (
    "read_file",
    "write_file",
    "replace",
    "read_many_files",
    "search",
    "glob",
    "list_directory",
    "run_shell_command",
    "web_fetch",
    "google_web_search",
    "save_memory",
    "undo",
    "create_directory",
    "move_file",
    "delete_file",
    "edit_file",
    "apply_patch",
    "list_background_processes",
    "read_background_output",
    "write_background_input",
    "stop_background_process",
    "discovered",
)


def tool_modules():
    """Import the tool modules that exist, in publishing order."""
    for name in TOOL_MODULES:
        try:
            yield importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
