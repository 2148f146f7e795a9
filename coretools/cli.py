"""Command line: `coretools-mcp [serve] ...`, `tools`, `call`, `history`, `undo`, `doctor`, and the client bridge's
commands.

This is the only module that writes to stdout (besides the client CLI): for `tools` and `call`. While
serving over stdio, stdout belongs to JSON-RPC and everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from coretools import __version__

SUBCOMMANDS = ("serve", "tools", "call", "history", "undo", "doctor", "client", "chat")
SERVER_SIDE = ("serve", "tools", "call", "history", "undo", "doctor")
PROGRAMS = ("coretools-mcp", "coretools")
EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2
# What each subcommand's --help shows of serve's options (the destinations); it accepts all of them, so a
# server's command line can be reused as it is. `serve` shows them all.
WORKSPACE = ("roots", "allow_broad_root", "allow_protected", "log_level")
JOURNAL = ("no_journal", "journal_max_entries", "journal_max_bytes")
SHOWN = {
    "tools": (*WORKSPACE, "tools", "schema_dialect", "structured_content"),
    "call": (*WORKSPACE, "tools", "schema_dialect", "structured_content", "max_result_chars", "call_timeout"),
    "history": (*WORKSPACE, *JOURNAL),
    "undo": (*WORKSPACE, *JOURNAL),
    "doctor": (*WORKSPACE, "shell_sandbox", "shell_no_network", "shell_writable", "search_engine", "no_journal",
               "transport", "host", "port", "auth_token_env", "insecure_no_auth", "allowed_host"),
}
ACCEPTS_SERVE = "It also takes every option of `serve` (see `{prog} serve --help`), so a server's command line can be reused."


def program() -> str:
    """The name this process was run as (`coretools` or `coretools-mcp`); `coretools-mcp` otherwise (`python -m
    coretools`, an embedding program)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name in PROGRAMS else "coretools-mcp"


def _shown_only(parser: argparse.ArgumentParser, shown: tuple[str, ...]) -> None:
    """Leave serve's options out of `parser`'s --help but those in `shown` (it still takes them all); called
    before the subcommand adds its own."""
    for action in parser._actions:  # noqa: SLF001 - argparse has no public list of a parser's actions
        if action.option_strings and action.dest not in shown and action.dest != "help":
            action.help = argparse.SUPPRESS


def _common_parser() -> argparse.ArgumentParser:
    """Options shared by `serve`, `tools`, `call`, `history`, `undo` and `doctor`: the workspace and every tool's
    own options. Built anew for each subcommand: the ones that are not `serve` hide most of it from --help."""
    from coretools.server.config import DEFAULT_CALL_TIMEOUT, DEFAULT_RESULT_CHARS, DEFAULT_SCHEMA_DIALECT
    from coretools.sandbox import settings
    from coretools.server.toolset import add_tool_arguments

    common = argparse.ArgumentParser(add_help=False)
    ws = common.add_argument_group("workspace")
    ws.add_argument(
        "--root",
        dest="roots",
        action="append",
        default=[],
        metavar="DIR",
        help="a workspace directory (repeatable; the first is primary). Default: the client's roots, else the "
        "current directory",
    )
    ws.add_argument(
        "--allow-broad-root",
        action="store_true",
        help="allow / or the home directory itself as a root (refused by default)",
    )
    ws.add_argument(
        "--allow-protected",
        action="store_true",
        help="allow tools to touch .git internals and .env secret files (refused by default)",
    )
    common.add_argument(
        "--log-level",
        default=settings.log_level(),
        choices=["debug", "info", "warning", "error"],
        help="log verbosity; logs always go to stderr (default: warning)",
    )
    common.add_argument(
        "--structured-content",
        action="store_true",
        help="also send each result's fields as MCP structuredContent (off by default: Claude Code and VS Code "
        "then show the model those fields instead of the answer's text)",
    )
    common.add_argument(
        "--max-result-chars",
        type=int,
        default=DEFAULT_RESULT_CHARS,
        metavar="CHARS",
        help=f"the most text one tool result holds (default: {DEFAULT_RESULT_CHARS}, about 20,000 tokens: under the "
        "25,000-token cap of the strictest common host). A longer answer is cut and says how to get the rest; 0: no "
        "limit",
    )
    common.add_argument(
        "--schema-dialect",
        choices=["seed", "latest"],
        default=DEFAULT_SCHEMA_DIALECT,
        help="which Gemini CLI version's tool names and parameter schemas to publish: 'seed' (default; "
        "absolute_path, offset/limit, expected_replacements...) or 'latest' (file_path, start_line/end_line, "
        "allow_multiple, grep_search...). Calls in either dialect's names are accepted either way; choose "
        "'latest' for hosts that check arguments against the published schema before sending them",
    )
    common.add_argument(
        "--call-timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="SECONDS",
        help="wall-clock limit of every tool call: a call still running then is stopped (the processes it started "
        "are killed) and answered with an error naming this limit. A tool's own limit (--shell-timeout, "
        "--search-timeout, --web-fetch-timeout) still applies, and the smaller one ends the call; 0 disables "
        f"(default: {DEFAULT_CALL_TIMEOUT:g}, Gemini CLI's timeout for an MCP tool call)",
    )
    tools = common.add_argument_group("tool options")
    add_tool_arguments(tools)  # type: ignore[arg-type]
    return common


def _add_transport_arguments(parser: argparse.ArgumentParser) -> None:
    from coretools.server import config

    http = parser.add_argument_group("transport")
    http.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default=config.DEFAULT_TRANSPORT,
        help=f"default: {config.DEFAULT_TRANSPORT}",
    )
    http.add_argument("--host", default=config.DEFAULT_HOST, help=f"HTTP bind address (default: {config.DEFAULT_HOST})")
    http.add_argument(
        "--port", type=int, default=config.DEFAULT_PORT, help=f"HTTP port (default: {config.DEFAULT_PORT})"
    )
    http.add_argument("--path", default=config.DEFAULT_PATH, help=f"HTTP endpoint path (default: {config.DEFAULT_PATH})")
    http.add_argument("--stateless", action="store_true", help="stateless HTTP (no sessions; for load balancers)")
    http.add_argument("--allowed-host", action="append", default=[], metavar="HOST", help="accepted Host header")
    http.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN", help="accepted Origin")
    http.add_argument(
        "--auth-token-env",
        metavar="NAME",
        help="require 'Authorization: Bearer <token>' where the token is in environment variable NAME",
    )
    http.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow binding a non-loopback address without --auth-token-env",
    )
    http.add_argument(
        "--max-calls",
        type=int,
        default=config.DEFAULT_MAX_CALLS,
        metavar="N",
        help=f"tool calls running at once, overall; 0 for no limit (default: {config.DEFAULT_MAX_CALLS})",
    )
    http.add_argument(
        "--max-session-calls",
        type=int,
        default=config.DEFAULT_MAX_SESSION_CALLS,
        metavar="N",
        help="tool calls running at once per client session; 0 for no limit "
        f"(default: {config.DEFAULT_MAX_SESSION_CALLS})",
    )
    http.add_argument(
        "--max-queued-calls",
        type=int,
        default=config.DEFAULT_MAX_QUEUED_CALLS,
        metavar="N",
        help="calls over those limits wait in a queue; this many at most, overall; 0 for no queue "
        f"(default: {config.DEFAULT_MAX_QUEUED_CALLS})",
    )
    http.add_argument(
        "--max-session-queued-calls",
        type=int,
        default=config.DEFAULT_MAX_SESSION_QUEUED_CALLS,
        metavar="N",
        help="calls of one client session waiting in the queue at most; 0 for no queue "
        f"(default: {config.DEFAULT_MAX_SESSION_QUEUED_CALLS})",
    )
    http.add_argument(
        "--queue-timeout",
        type=float,
        default=config.DEFAULT_QUEUE_TIMEOUT,
        metavar="SECONDS",
        help="the longest a queued call waits, at most --call-timeout; 0 for no queue "
        f"(default: {config.DEFAULT_QUEUE_TIMEOUT:g})",
    )
    http.add_argument(
        "--max-sessions",
        type=int,
        default=config.DEFAULT_MAX_SESSIONS,
        metavar="N",
        help="HTTP sessions open at once; a new one over the limit gets HTTP 503; 0 for no limit "
        f"(default: {config.DEFAULT_MAX_SESSIONS})",
    )
    http.add_argument(
        "--session-idle-timeout",
        type=float,
        default=config.DEFAULT_SESSION_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="end an HTTP session after this long with no request and no open stream; 0 for never "
        f"(default: {config.DEFAULT_SESSION_IDLE_TIMEOUT:g})",
    )
    http.add_argument(
        "--max-connections",
        type=int,
        default=config.DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="HTTP connections open at once, at most half the descriptor limit; at the limit a new connection "
        f"displaces one that has not sent a request (default: {config.DEFAULT_MAX_CONNECTIONS})",
    )
    http.add_argument(
        "--read-timeout",
        type=float,
        default=config.DEFAULT_READ_TIMEOUT,
        metavar="SECONDS",
        help="close an HTTP connection that has not sent a complete request within this time "
        f"(default: {config.DEFAULT_READ_TIMEOUT:g})",
    )
    http.add_argument(
        "--max-message-bytes",
        type=int,
        default=config.DEFAULT_MAX_MESSAGE_BYTES,
        metavar="BYTES",
        help="the largest JSON-RPC message read, one stdio line or one HTTP request body; a larger one is "
        f"discarded unread and answered with an error (default: {config.DEFAULT_MAX_MESSAGE_BYTES}, 4 MiB)",
    )


def build_parser(*, with_client: bool = True, prog: str | None = None) -> argparse.ArgumentParser:
    prog = prog or program()
    common = _common_parser()
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Gemini CLI's core tools as an MCP server, and a Gemini <-> MCP client bridge.",
        epilog=f"With no subcommand, `serve` is assumed, so a host config needs only `{prog} --root DIR`. "
        f"`{prog} doctor` says what is wrong with a setup and how to fix it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the tools over MCP (stdio by default)",
        description="Serve the tools over MCP. Over stdio (the default) stdout carries only JSON-RPC.",
    )
    _add_transport_arguments(serve)
    serve.set_defaults(func=cmd_serve)

    tools = sub.add_parser(
        "tools",
        parents=[_common_parser()],
        help="print the published tool list as JSON",
        description="Print the tools this configuration publishes (names, descriptions, input schemas) as JSON, "
        "and why any tool is not published.",
        epilog=ACCEPTS_SERVE.format(prog=prog),
    )
    _shown_only(tools, SHOWN["tools"])
    tools.set_defaults(func=cmd_tools)

    call = sub.add_parser(
        "call",
        parents=[_common_parser()],
        help="run one tool and print what the model would see",
        description="Run one tool through the same validation, sandbox and formatting as the server. "
        "Exit 0 on success, 1 on a tool error, 2 on bad usage.",
        epilog=ACCEPTS_SERVE.format(prog=prog),
    )
    _shown_only(call, SHOWN["call"])
    call.add_argument("tool", help="tool name, e.g. read_file")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments (default: {}); - reads stdin")
    call.add_argument("--json", action="store_true", help="print the whole MCP CallToolResult as JSON")
    call.set_defaults(func=cmd_call)

    _add_journal_commands(sub, prog)
    doctor = sub.add_parser(
        "doctor",
        parents=[_common_parser()],
        help="check this setup and say how to fix what is wrong",
        description="Check what a server started with these options would meet here: the roots, ripgrep, the "
        "shell sandbox (which one, and why), the edit journal's state directory, the HTTP settings (with "
        "--transport http), and every host configuration file (Gemini CLI, Claude Desktop, Claude Code, Cursor, "
        "VS Code, Zed) that registers coretools. One line a finding, with its fix. Exit 0 when nothing is an "
        "error (warnings are printed), 1 otherwise.",
        epilog=ACCEPTS_SERVE.format(prog=prog),
    )
    _add_transport_arguments(doctor)
    _shown_only(doctor, SHOWN["doctor"])
    doctor.set_defaults(func=cmd_doctor)
    if with_client:  # the bridge's commands; `serve` does not pay for importing the client
        from coretools.client.cli import register

        register(sub)
    return parser


def _add_journal_commands(sub, prog: str) -> None:
    about = (
        "FILE is absolute, or relative to the current directory. With no --root, the workspace is the one whose "
        "journal last recorded FILE (else the current directory)."
    )
    history = sub.add_parser(
        "history",
        parents=[_common_parser()],
        epilog=ACCEPTS_SERVE.format(prog=prog),
        help="list the journaled edits of a workspace or of one file",
        description="List the edits write_file and replace made (and undos), oldest first: id, time, tool, size "
        "before and after, file. " + about,
    )
    _shown_only(history, SHOWN["history"])
    history.add_argument("file", nargs="?", metavar="FILE", help="only the edits of this file")
    history.add_argument("--json", action="store_true", help="print the entries as JSON")
    history.set_defaults(func=cmd_history)
    undo = sub.add_parser(
        "undo",
        parents=[_common_parser()],
        epilog=ACCEPTS_SERVE.format(prog=prog),
        help="restore a file from the edit journal",
        description="Restore FILE (default: the file of the last journaled edit) to its content before its last "
        "edit, or before edit ID; a file the edit created is removed. Refused when the file changed since its "
        "last journaled edit, unless --force. The undo is journaled, so it can be undone. Exit 0 when done, 1 "
        "when refused. " + about,
    )
    _shown_only(undo, SHOWN["undo"])
    undo.add_argument("file", nargs="?", metavar="FILE", help="the file to restore")
    undo.add_argument("--to", type=int, metavar="ID", help="restore the content from before edit ID (see `history`)")
    undo.add_argument("--force", action="store_true", help="undo even if the file changed since its last journaled edit")
    undo.set_defaults(func=cmd_undo)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _config(args: argparse.Namespace):
    """The typed configuration of a parsed command line; raises `ConfigurationError` for an unusable `--root`."""
    from coretools.sandbox.gateway import Workspace
    from coretools.server.config import ServerConfig
    from coretools.server.toolset import tool_options

    roots = [Workspace.check_root(r, allow_broad=args.allow_broad_root) for r in args.roots]
    return ServerConfig.from_namespace(args, roots=roots, tool_options=tool_options(args))


def _recover_interrupted_writes() -> None:
    """Before any tool runs: put back the old content of files whose in-place write was cut short."""
    from coretools.sandbox import durable

    try:
        durable.recover()
    except OSError as exc:
        logging.getLogger("coretools").warning("could not check for interrupted writes: %s", exc)


def _fail(message: str) -> int:
    sys.stderr.write(f"{program()}: error: {message}\n")
    return EXIT_USAGE


def _keep_descendants() -> None:
    """Make this process a child subreaper, so an orphan of any command comes back to it rather than to
    init (`sandbox/process_groups.py`). Only for a process that is the server: one that embeds it (a test
    runner) keeps the children it starts itself to itself."""
    from coretools.sandbox.process_groups import become_subreaper

    become_subreaper()


def cmd_serve(args: argparse.Namespace) -> int:
    from coretools.errors import ConfigurationError

    try:
        config = _config(args)
    except ConfigurationError as exc:
        return _fail(str(exc))
    _recover_interrupted_writes()
    _keep_descendants()
    try:
        return _serve(args, config)
    except ConfigurationError as exc:  # a tool found its options unusable while the server was being built
        return _fail(str(exc))


def _serve(args: argparse.Namespace, config) -> int:  # noqa: ANN001 - a ServerConfig
    import anyio

    if config.max_message_bytes < 1:
        return _fail(f"--max-message-bytes {config.max_message_bytes}: use a number of bytes, at least 1")
    if args.transport == "http":
        try:
            from coretools.server.http import serve_http
        except ImportError:
            return _fail("the HTTP transport is not available in this build")
        return serve_http(config)
    if sys.stdin.isatty():
        sys.stderr.write(
            f"coretools-mcp {__version__}: serving MCP over stdio and waiting for an MCP client on stdin.\n"
            "This command is meant to be started by an MCP host (Claude, Cursor, VS Code, Gemini CLI, Zed).\n"
            "To try the tools by hand instead:\n"
            "  coretools-mcp tools                                   # list the tools\n"
            "  coretools-mcp call list_directory '{\"path\": \".\"}'   # run one\n"
            "Press Ctrl-C to stop.\n"
        )
    from coretools.server.app import serve_stdio

    try:
        anyio.run(serve_stdio, config)
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def cmd_tools(args: argparse.Namespace) -> int:
    from coretools.errors import ConfigurationError
    from coretools.server.toolset import ToolSet

    try:
        toolset = ToolSet(_config(args))
    except ConfigurationError as exc:
        return _fail(str(exc))
    out: dict[str, Any] = {
        "tools": [d.model_dump(by_alias=True, exclude_none=True, mode="json") for d in toolset.definitions()],
    }
    if toolset.unavailable:
        out["unavailable"] = toolset.unavailable
    sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def cmd_call(args: argparse.Namespace) -> int:
    import anyio

    from coretools.errors import ConfigurationError, ToolError
    from coretools.sandbox.gateway import Workspace
    from coretools.server.toolset import ToolSet
    from coretools.server.workspaces import Workspaces
    from coretools.tools.base import ToolContext, ToolResult

    try:
        config = _config(args)
    except ConfigurationError as exc:
        return _fail(str(exc))
    if not config.roots:  # then the current directory is the workspace, as for a server without --root
        try:
            Workspace.check_root(os.getcwd(), allow_broad=config.allow_broad_root)
        except ConfigurationError as exc:
            return _fail(f"no --root, and the current directory cannot serve as one ({exc}); pass --root "
                         "/path/to/project")
    _recover_interrupted_writes()
    _keep_descendants()
    raw = sys.stdin.read() if args.arguments == "-" else args.arguments
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _fail(f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); pass a JSON object, "
                     """e.g. '{"path": "."}'""")
    try:
        toolset = ToolSet(config)
    except ConfigurationError as exc:
        return _fail(str(exc))
    published = toolset.find(args.tool)
    if published is None:
        return _fail(toolset.unknown_tool_message(args.tool))

    async def run():
        await toolset.start()
        try:
            try:
                workspace = Workspaces(config).decide(())  # as the server decides for a client without roots
            except ToolError as exc:
                return ToolResult.from_error(exc)
            return await toolset.run(published, args.tool, arguments, ToolContext(workspace=workspace))
        finally:
            await toolset.aclose()

    result = anyio.run(run)
    if args.json:
        sent = result.to_mcp(structured=config.structured_content)  # as the server would send it
        payload = sent.model_dump(by_alias=True, exclude_none=True, mode="json")
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_content(result.content))
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from coretools import doctor

    return doctor.run(args, parse_serve=_parse_serve, config_of=_config)


def _parse_serve(argv: list[str]) -> tuple[argparse.Namespace | None, str | None]:
    """`argv` read as `serve` reads it (a host's arguments, for `doctor`): the namespace, or what argparse
    would say of it, nothing started and nothing printed."""
    import contextlib
    import io

    if argv[:1] == ["serve"]:
        argv = argv[1:]
    elif argv[:1] and argv[0] in SUBCOMMANDS:
        return None, f"they run `{program()} {argv[0]}`, not the server (`serve`)"
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            return _serve_parser().parse_args(["serve", *argv]), None
    except SystemExit:
        lines = said.getvalue().strip().splitlines()
        return None, (lines[-1].split(": error: ", 1)[-1] if lines else "they print and exit (--help, --version), not serve")


_SERVE_PARSERS: list[argparse.ArgumentParser] = []


def _serve_parser() -> argparse.ArgumentParser:
    """One parser for every host entry `doctor` reads (building it imports every tool module)."""
    if not _SERVE_PARSERS:
        _SERVE_PARSERS.append(build_parser(with_client=False))
    return _SERVE_PARSERS[0]


def _journal_workspace(args: argparse.Namespace):
    """(workspace, journal or None, canonical target or None) of `history`/`undo`; raises
    ConfigurationError or ToolError."""
    from coretools.workspace import journal
    from coretools.sandbox.gateway import Workspace
    from coretools.server.toolset import journal_settings
    from coretools.workspace.hints import HintedWorkspace

    settings = journal_settings(args)
    wanted = os.path.realpath(os.path.abspath(args.file)) if args.file else None
    roots = [Workspace.check_root(r, allow_broad=args.allow_broad_root) for r in args.roots]
    if not roots:
        found = journal.Journal.holding(wanted, settings) if wanted else None
        roots = list(found.roots) if found else [os.getcwd()]
    ws = HintedWorkspace(roots, allow_protected=args.allow_protected)
    target = ws.edit_key(ws.locate(wanted)) if wanted else None
    book = journal.Journal.find([r.path for r in ws.roots], target, settings)
    return ws, book, target


def _journal_command(args: argparse.Namespace, body) -> int:
    from coretools.errors import ConfigurationError, ToolError
    from coretools.workspace import journal

    if args.no_journal:
        return _fail("the edit journal is off (--no-journal): there is nothing to list or undo")
    try:
        ws, book, target = _journal_workspace(args)
    except ConfigurationError as exc:
        return _fail(str(exc))
    except ToolError as exc:
        return _fail(exc.message)
    try:
        if book is not None and journal.exposed_by(tuple(r.path for r in ws.roots)):
            return _fail("a root contains the state directory, so the edit journal is off for this workspace")
        return body(ws, book, target)
    except ToolError as exc:
        sys.stderr.write(f"coretools-mcp: {exc.message}\n")
        return EXIT_TOOL_ERROR
    finally:
        ws.close()


def cmd_history(args: argparse.Namespace) -> int:
    from coretools.workspace import journal

    def body(ws, book, target) -> int:
        entries = journal.history(book, target) if book is not None else []
        if args.json:
            rows = [_entry_dict(e) for e in entries]
            sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        elif not entries:
            sys.stdout.write("No journaled edits" + (f" of {target}" if target else "") + ".\n")
        else:
            sys.stdout.write("".join(_history_line(e) for e in entries))
        return EXIT_OK

    return _journal_command(args, body)


def cmd_undo(args: argparse.Namespace) -> int:
    from coretools.errors import ErrorKind, ToolError
    from coretools.workspace import journal

    def body(ws, book, target) -> int:
        if book is None:
            raise ToolError("No journaled edit" + (f" of {target}" if target else " in this workspace")
                            + ": nothing to undo.", ErrorKind.FILE_NOT_FOUND)
        done = journal.undo(ws, book, target=target, edit_id=args.to, force=args.force)
        shown = done.record.path if done.record else done.edit.path
        for skipped in done.skipped:
            sys.stderr.write(f"coretools-mcp: edit {skipped.id} of {skipped.path} never took effect; skipped\n")
        sys.stdout.write(done.describe(shown) + "\n")
        return EXIT_OK

    _recover_interrupted_writes()
    return _journal_command(args, body)


def _entry_dict(entry) -> dict:
    from dataclasses import asdict

    return asdict(entry)


def _history_line(entry) -> str:
    import time

    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.time))
    if entry.dirs_change is not None:
        undoes = f"  (undoes {entry.undoes})" if entry.undoes is not None else ""
        return f"{entry.id:>5}  {when}  {entry.tool or '-':<10}  {entry.dirs_change}{undoes}\n"
    if entry.files is not None:
        undoes = f"  (undoes {entry.undoes})" if entry.undoes is not None else ""
        files = f"{len(entry.files)} file{'s' if len(entry.files) != 1 else ''}"
        return f"{entry.id:>5}  {when}  {entry.tool or '-':<10}  {files:>22}  {', '.join(entry.paths)}{undoes}\n"
    before = "new" if entry.before_sha is None else _size(entry.before_size)
    after = "removed" if entry.after_sha is None else _size(entry.after_size)
    notes = [] if entry.kept else ["previous content too large to keep"]
    if entry.undoes is not None:
        notes.append(f"undoes {entry.undoes}")
    if entry.moved_from:
        notes.append(f"moved from {entry.moved_from}")
    note = f"  ({'; '.join(notes)})" if notes else ""
    return f"{entry.id:>5}  {when}  {entry.tool or '-':<10}  {before:>9} -> {after:<9}  {entry.path}{note}\n"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render_content(blocks: list) -> str:
    """Content blocks as a person reads them in a terminal."""
    import mcp_types as types  # not `mcp.types`: that would import the SDK's client and server

    parts = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            size = len(block.data) * 3 // 4
            parts.append(f"[{block.type} {block.mime_type}, about {size} bytes]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            parts.append(f"[embedded resource {res.uri} {res.mime_type or ''}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[link {block.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    text = "\n".join(parts)
    return text if text.endswith("\n") else text + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:  # argparse would print this before reading anything else: skip building it
        sys.stdout.write(f"{program()} {__version__}\n")
        return EXIT_OK
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "serve")
    parser = build_parser(with_client=argv[0] not in SERVER_SIDE)
    args = parser.parse_args(argv)
    _setup_logging(getattr(args, "log_level", "warning"))
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return int(func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
