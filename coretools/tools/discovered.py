"""Project-discovered tools: `--discovery-command` / `--call-command`, as Gemini CLI's
`tools.discoveryCommand` / `tools.callCommand`.

At start the discovery command runs (no shell: its words are split like a shell would, in the primary
root) and prints a JSON array of Gemini function declarations (`{name, description, parameters}` or
`parametersJsonSchema`; objects holding `functionDeclarations` lists are accepted too). Each becomes an MCP
tool, unless its name collides with a core tool or an earlier declaration, or its schema fails the same
Gemini-safety rules our own schemas follow; those are not published, with a warning in the log and the
reason in `coretools-mcp tools`. A call runs `<call command> <tool name>` with the JSON arguments on
stdin, under the shell tool's process rules (own process group, timeouts, output cap, scrubbed
environment, the sandbox when configured), and returns its stdout; on failure the model gets stdout,
stderr, the error, exit code and signal.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coretools.errors import ConfigurationError, ErrorKind, ToolError
from coretools.tools.base import Tool, ToolContext, ToolResult, option
from coretools.sandbox import Runner, run_blocking, signal_name, stop_message
from coretools.tools.process_options import ProcessOptions

logger = logging.getLogger("coretools")

MAX_SHOWN_CHARS = 100_000
DISCOVERY_TIMEOUT = 60.0
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
CORE_NAMES = {
    "read_file", "write_file", "replace", "read_many_files", "search_file_content", "grep_search", "glob",
    "list_directory", "run_shell_command", "web_fetch", "google_web_search", "save_memory",
    "list_background_processes", "read_background_output",
}  # fmt: skip
SCHEMA_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
FORBIDDEN_KEYS = ("$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "additionalProperties")


def schema_problems(schema: Any, where: str = "parameters") -> list[str]:
    """Why a parameter schema is not Gemini-safe (empty when it is): every node typed with one of the six
    JSON types, arrays with `items`, no `$ref`/`$defs`, no `anyOf`/`oneOf`/`allOf`/`not`, no
    `additionalProperties`, no `null` types, enum members only strings."""
    if not isinstance(schema, dict):
        return [f"{where} is not an object"]
    problems = []
    kind = schema.get("type")
    if isinstance(kind, list):
        problems.append(f"{where}: type lists (such as [X, 'null']) are not accepted; use one type")
    elif kind not in SCHEMA_TYPES:
        problems.append(f"{where}: every schema needs a type (one of {', '.join(sorted(SCHEMA_TYPES))})")
    for key in FORBIDDEN_KEYS:
        if key in schema:
            problems.append(f"{where}: '{key}' is not accepted")
    if "enum" in schema and not all(isinstance(v, str) for v in schema.get("enum") or []):
        problems.append(f"{where}: enum members must be strings")
    if kind == "array":
        if "items" not in schema:
            problems.append(f"{where}: arrays need 'items'")
        else:
            problems += schema_problems(schema["items"], f"{where}.items")
    if kind == "object":
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            problems.append(f"{where}.properties is not an object")
        else:
            for name, sub in props.items():
                problems += schema_problems(sub, f"{where}.properties.{name}")
    return problems


def _lower_types(node: Any) -> Any:
    """Gemini's `Type` enum is spelled in capitals (`OBJECT`); JSON Schema uses lower case."""
    if isinstance(node, dict):
        out = {k: _lower_types(v) for k, v in node.items()}
        if isinstance(out.get("type"), str):
            out["type"] = out["type"].lower()
        return out
    if isinstance(node, list):
        return [_lower_types(v) for v in node]
    return node


def _declarations(data: Any) -> list[Any]:
    items = data if isinstance(data, list) else [data]
    found: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            nested = item.get("functionDeclarations", item.get("function_declarations"))
            if isinstance(nested, list):
                found.extend(nested)
                continue
        found.append(item)
    return found


@dataclass(frozen=True)
class DiscoveryOptions(ProcessOptions):
    """`--discovery-command`, `--call-command`, and the process options these tools share with
    run_shell_command."""

    discovery_command: str | None = option(
        None,
        "--discovery-command",
        "at start, run CMD; it prints a JSON array of function declarations, each published as a tool",
        metavar="CMD",
    )
    call_command: str | None = option(
        None,
        "--call-command",
        "run a discovered tool as `CMD <tool name>` with its JSON arguments on stdin",
        metavar="CMD",
    )


OPTIONS = DiscoveryOptions


class Unpublished(Tool):
    """A declaration that is not published; it exists only to carry the reason to `coretools-mcp tools`."""

    input_schema = {"type": "object", "properties": {}}

    def __init__(self, name: str, reason: str) -> None:
        super().__init__()
        self.name = name
        self.reason = reason

    def unavailable_reason(self) -> str | None:
        return self.reason


class DiscoveredTool(Tool):
    Options = DiscoveryOptions
    options: DiscoveryOptions
    hint = "a tool this project defines; its description says what it does."
    read_only = False
    destructive = True
    idempotent = False
    open_world = True

    def __init__(self, options: DiscoveryOptions, decl: dict[str, Any], schema: dict[str, Any], runner: Runner) -> None:
        super().__init__(options)
        self.name = decl["name"]
        self.title = decl["name"]
        call = options.call_command or ""
        summary = str(decl.get("description") or "").strip()
        self.description = (
            f"{summary}\n\nThis tool is defined by the project. coretools runs `{call} {self.name}` in the project "
            "root with the arguments as JSON on stdin and returns what it prints on stdout; on failure you get its "
            "stdout, stderr, error, exit code and signal."
        ).strip()
        self.input_schema = schema
        self.runner = runner
        self.settings = options.settings()
        self.argv = [*shlex.split(call), self.name]

    async def aclose(self) -> None:
        await self.runner.aclose()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ws = ctx.workspace
        cwd = ws.primary.path
        payload = json.dumps(args, ensure_ascii=False).encode("utf-8")
        spec = self.settings.spec(
            self.runner, self.argv, cwd=cwd, roots=[r.path for r in ws.roots], stdin_data=payload,
            keep_background=False, readable=program_dirs(self.argv),
        )
        outcome = await self.runner.run(spec, cwd_fd=ws.primary.fd)
        stdout, _ = self.runner.present(outcome, outcome.stdout, MAX_SHOWN_CHARS)
        if outcome.ok:
            return ToolResult.text(stdout)
        stderr, _ = self.runner.present(outcome, outcome.stderr, MAX_SHOWN_CHARS)
        error = stop_message(outcome, self.settings.output_cap)
        sig = outcome.signal
        text = "\n".join(
            [
                f"Stdout: {stdout or '(empty)'}",
                f"Stderr: {stderr or '(empty)'}",
                f"Error: {error or '(none)'}",
                f"Exit Code: {'(none)' if outcome.exit_code is None else outcome.exit_code}",
                f"Signal: {'(none)' if sig is None else f'{sig} ({signal_name(sig)})'}",
            ]
        )
        raise ToolError(text, ErrorKind.DISCOVERED_TOOL_EXECUTION_ERROR)


def provide(
    options: DiscoveryOptions, *, roots: Sequence[str] = (), reserved: set[str] | frozenset[str] = frozenset()
) -> list[Tool]:
    """The tools the discovery command declares (run now, in the primary root), and the declarations not
    published with why; raises `ConfigurationError` for options that cannot work."""
    discovery = options.discovery_command
    call = options.call_command
    if not discovery and not call:
        return []
    if not discovery or not call:
        raise ConfigurationError("--discovery-command and --call-command go together; pass both")
    try:
        argv = shlex.split(discovery)
        shlex.split(call)
    except ValueError as exc:
        raise ConfigurationError(f"--discovery-command/--call-command: cannot split into words ({exc})") from None
    settings = options.settings()
    problem = settings.problem()
    if problem:
        raise ConfigurationError(problem)
    runner = Runner("coretools-discovered")
    cwd = os.path.realpath(roots[0]) if roots else os.getcwd()
    spec = settings.spec(runner, argv, cwd=cwd, roots=[cwd], keep_background=False, readable=program_dirs(argv))
    spec.wall_timeout = min(spec.wall_timeout or DISCOVERY_TIMEOUT, DISCOVERY_TIMEOUT)
    outcome = run_blocking(runner, spec)
    failure = stop_message(outcome, settings.output_cap)
    if failure or outcome.exit_code != 0:
        reason = (
            f"the discovery command `{discovery}` failed: "
            f"{failure or f'exit code {outcome.exit_code}'}; stderr: {outcome.stderr.text().strip()[:500] or '(empty)'}"
        )
        logger.warning("%s", reason)
        return [Unpublished("discovered:*", reason)]
    try:
        declarations = _declarations(json.loads(outcome.stdout.text()))
    except json.JSONDecodeError as exc:
        reason = f"the discovery command `{discovery}` did not print JSON ({exc.msg} at position {exc.pos})"
        logger.warning("%s", reason)
        return [Unpublished("discovered:*", reason)]
    taken = set(reserved) | CORE_NAMES
    from coretools.tools import TOOL_MODULES

    taken |= set(TOOL_MODULES)
    tools: list[Tool] = []
    seen: set[str] = set()
    for index, decl in enumerate(declarations):
        name = decl.get("name") if isinstance(decl, dict) else None
        label = name if isinstance(name, str) and name else f"discovered declaration #{index + 1}"
        reason = None
        schema: dict[str, Any] = {}
        if not isinstance(name, str) or not NAME_RE.match(name):
            reason = "its name is missing or not a valid tool name (letters, digits, _ . -; at most 64 characters)"
        elif name in taken:
            reason = f"its name collides with the core tool {name}; rename it in the discovery output"
        elif name in seen:
            reason = "it is declared twice by the discovery command; the first declaration is published"
        else:
            raw = decl.get("parametersJsonSchema", decl.get("parameters"))
            schema = _lower_types(raw) if raw is not None else {"type": "object", "properties": {}}
            problems = schema_problems(schema)
            if schema.get("type") != "object":
                problems.insert(0, "parameters must be an object schema")
            if problems:
                reason = "its parameter schema is not Gemini-safe: " + "; ".join(problems)
        if reason:
            logger.warning("discovered tool %s is not published: %s", label, reason)
            tools.append(Unpublished(f"discovered:{label}", reason))
            continue
        seen.add(name)
        tools.append(DiscoveredTool(options, decl, schema, runner))
    return tools


def program_dirs(argv: list[str]) -> list[str]:
    """The directory of an operator's command named by path (`--discovery-command /x/discover.sh`): the
    sandbox shows it read-only, wherever it is."""
    program = argv[0] if argv else ""
    return [os.path.dirname(os.path.realpath(program))] if os.sep in program else []
