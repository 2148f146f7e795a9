"""Command-line entry points of the bridge, for the main CLI to mount.

``register(subparsers)`` adds:

* ``client tools --config mcp.json [--format gemini|openai] [--profile json|openapi]``: start
  the servers, print the merged, prefixed, sanitised declarations (no model needed: the way to
  check a config), report servers that failed on stderr;
* ``client call NAME [JSON] --config mcp.json``: run one tool by its published name and print
  the ``functionResponse``;
* ``chat --config mcp.json --model NAME``: an interactive terminal chat with Gemini over the
  servers' tools (key from ``GEMINI_API_KEY``, endpoint from ``GOOGLE_GEMINI_BASE_URL``), or
  with ``--api openai`` with any OpenAI-compatible chat-completions endpoint (``OPENAI_BASE_URL``,
  ``OPENAI_API_KEY``). ``--tool-style json|xml|auto``: native function calling, calls written as
  XML in the text (for models and servers without function calling), or decided by
  :func:`coretools.client.style.resolve_tool_style` for the provider and model.

* ``client login ALIAS --config mcp.json``: sign in to a remote server ahead of time (OAuth:
  the authorization URL is printed and opened in the browser, the code comes back to a loopback
  listener, tokens are stored per server URL); ``client logout ALIAS`` forgets them.

Servers may ask for input while a call runs (elicitation). ``--elicitation ask`` (the default)
asks in the terminal when stdin is one and declines otherwise; ``decline`` always declines;
``defaults`` accepts a form whose required fields all have defaults (scripted runs).
``--sign-in auto`` (the default) runs an OAuth sign-in when a server needs one and stdin is a
terminal; ``always`` also without a terminal (``$BROWSER`` decides what opens the URL);
``never`` fails with the ``client login`` command to run. ``--protocol`` chooses the protocol
negotiation (``legacy``: the ``initialize`` handshake; ``auto``: 2026-07-28 when offered).

Each subcommand's ``func(args) -> int`` is its exit code: 0 success, 1 a tool or server
failed (the output is still printed), 2 a usage or configuration error (including tool names
that collide under ``--prefix never``), 141 when stdout was closed early (``... | head -1``):
that ends the command quietly, without a traceback.

``chat`` passes the servers' instructions to the model in its system instruction, after
``--system``; ``--no-server-instructions`` leaves them out.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread

from .bridge import Bridge, PublishedTool
from .config import ConfigError, ServerConfig, load_config
from .convert import function_response_part
from .elicitation import ElicitationCallback, accept_defaults, decline
from .loop import GEMINI_BASE_URL, GeminiHTTPError, RunResult, choose_tool_style, run_rest, supports_multimodal_function_responses
from .names import PREFIX_MODES, NameCollisionError
from .oauth import SIGN_IN_TIMEOUT, BrowserSignIn
from .openai_loop import OPENAI_BASE_URL, run_openai
from .schema import PROFILES
from .style import STYLE_CHOICES
from .terminal_prompt import TerminalElicitation
from .token_store import TokenStore

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

TOOL_STYLES = STYLE_CHOICES
APIS = ("gemini", "openai")
ELICITATION_POLICIES = ("ask", "decline", "defaults")
SIGN_IN_POLICIES = ("auto", "always", "never")
PROTOCOLS = ("legacy", "auto", "2026-07-28")
RESULT_LINES = 12
"""How many lines of a tool result `chat` shows unless ``--full-results``."""
RESULT_WIDTH = 200
"""The longest line of a tool result `chat` shows unless ``--full-results``; a longer one is cut."""
EXIT_CLOSED_PIPE = 141
"""128 + SIGPIPE, what a shell reports for a command whose reader went away."""

Command = Callable[[argparse.Namespace], int]


def quiet_on_closed_pipe(command: Command) -> Command:
    """Run ``command``; if its reader closed stdout, stop quietly with :data:`EXIT_CLOSED_PIPE`.

    The Python documentation's recipe (``signal`` module, "Note on SIGPIPE"): stdout is pointed
    at ``/dev/null`` so that the interpreter's final flush does not fail a second time."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            code = command(args)
            sys.stdout.flush()
            return code
        except BaseException as exc:
            if not _is_closed_pipe(exc):
                raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_CLOSED_PIPE

    return run


def _is_closed_pipe(exc: BaseException) -> bool:
    """A ``BrokenPipeError``, or an exception group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_closed_pipe(inner) for inner in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def register(subparsers: Any) -> None:
    """Add the ``client`` (``tools``, ``call``, ``login``, ``logout``) and ``chat`` subcommands."""
    client = subparsers.add_parser("client", help="use MCP servers' tools through the Gemini bridge")
    client_commands = client.add_subparsers(dest="client_command", metavar="{tools,call,login,logout}")
    client_commands.required = True

    tools = client_commands.add_parser("tools", help="print the merged, prefixed, sanitised tool declarations")
    _add_bridge_options(tools)
    tools.add_argument("--format", choices=("gemini", "openai"), default="gemini", help="declaration shape (default gemini)")
    tools.add_argument("--profile", choices=PROFILES, default="json", help="schema profile for --format gemini (default json)")
    tools.set_defaults(func=quiet_on_closed_pipe(tools_command))

    call = client_commands.add_parser("call", help="run one tool by its published name")
    _add_bridge_options(call)
    call.add_argument("name", help="the published tool name, e.g. fs__read_file")
    call.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object (default {})")
    call.add_argument("--format", choices=("json", "text"), default="json", help="print the functionResponse (json) or plain text")
    call.set_defaults(func=quiet_on_closed_pipe(call_command))

    login = client_commands.add_parser("login", help="sign in to a remote MCP server (OAuth) and keep its tokens")
    login.add_argument("alias", help="the server's name in mcp.json")
    login.add_argument("--config", default="mcp.json", help="the mcp.json to load (default ./mcp.json)")
    login.add_argument("--no-browser", action="store_true", help="print the authorization URL without opening it")
    login.add_argument("--timeout", type=float, default=SIGN_IN_TIMEOUT, help="seconds to wait for the sign-in (default 300)")
    login.add_argument("--connect-timeout", type=float, default=30.0, help="seconds for the server to answer (default 30)")
    login.add_argument("--protocol", choices=PROTOCOLS, default="legacy", help="protocol negotiation (default legacy)")
    login.set_defaults(func=login_command)

    logout = client_commands.add_parser("logout", help="forget the tokens kept for a remote MCP server")
    logout.add_argument("alias", help="the server's name in mcp.json")
    logout.add_argument("--config", default="mcp.json", help="the mcp.json to load (default ./mcp.json)")
    logout.set_defaults(func=logout_command)

    chat = subparsers.add_parser("chat", help="chat with Gemini in the terminal, using the MCP servers' tools")
    _add_bridge_options(chat)
    chat.add_argument("--model", required=True, help="the model, e.g. gemini-2.5-flash")
    chat.add_argument(
        "--api",
        choices=APIS,
        default="gemini",
        help="gemini (GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL) or an OpenAI-compatible chat-completions endpoint (OPENAI_BASE_URL, OPENAI_API_KEY)",
    )
    chat.add_argument(
        "--tool-style",
        choices=TOOL_STYLES,
        default="auto",
        help="json: native function calling; xml: tools in the system prompt, calls written in the text; auto (default): decided by provider and model",
    )
    chat.add_argument("--provider", default=None, help="provider name for --tool-style auto (default: the --api name)")
    chat.add_argument("--profile", choices=PROFILES, default="json", help="schema profile for the declarations")
    chat.add_argument("--system", default=None, help="a system instruction (the servers' instructions follow it)")
    chat.add_argument(
        "--no-server-instructions",
        dest="server_instructions",
        action="store_false",
        help="leave the MCP servers' instructions out of the system instruction",
    )
    chat.add_argument("--max-turns", type=int, default=20, help="model requests per question (default 20)")
    chat.add_argument("--no-stream", action="store_true", help="use generateContent instead of SSE streaming")
    chat.add_argument("--yes", action="store_true", help="run tools of untrusted servers without asking")
    chat.add_argument(
        "--full-results",
        action="store_true",
        help=f"show each tool result whole (default: its first {RESULT_LINES} lines: an edit's note and diff, the "
        "start of an output)",
    )
    chat.set_defaults(func=quiet_on_closed_pipe(chat_command))


def _add_bridge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="mcp.json", help="the mcp.json to load (default ./mcp.json)")
    parser.add_argument("--prefix", choices=PREFIX_MODES, default="auto", help="alias__ prefixes: auto (several servers), always, never")
    parser.add_argument("--connect-timeout", type=float, default=30.0, help="seconds per server to connect (default 30)")
    parser.add_argument(
        "--elicitation",
        choices=ELICITATION_POLICIES,
        default="ask",
        help="servers' requests for input: ask in the terminal (declined without one), decline, or accept defaults",
    )
    parser.add_argument(
        "--sign-in",
        dest="sign_in",
        choices=SIGN_IN_POLICIES,
        default="auto",
        help="OAuth sign-in when a server needs one: auto (with a terminal), always, never",
    )
    parser.add_argument("--no-browser", action="store_true", help="print OAuth authorization URLs without opening them")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="legacy", help="protocol negotiation (default legacy)")


def _run_with_bridge(args: argparse.Namespace, body: Callable[[Bridge], Awaitable[int]]) -> int:
    """Load the config, start the bridge, report failed servers, run ``body``; the exit code."""
    try:
        configs = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    bridge = Bridge(
        configs,
        prefix=args.prefix,
        connect_timeout=args.connect_timeout,
        server_instructions=getattr(args, "server_instructions", True),
        elicitation_callback=_elicitation_callback(args.elicitation),
        sign_in=_sign_in(args),
        mode=args.protocol,
    )

    async def main() -> int:
        # Failed servers are reported by the bridge's own warning, once.
        async with bridge:
            return await body(bridge)

    try:
        return anyio.run(main)
    except NameCollisionError as exc:
        print(f"error: {exc}; choose --prefix auto or always, or drop tools with includeTools/excludeTools", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def _elicitation_callback(policy: str) -> ElicitationCallback:
    if policy == "defaults":
        return accept_defaults
    if policy == "ask" and sys.stdin.isatty():
        return TerminalElicitation(_LINES.read)
    return decline


def _sign_in(args: argparse.Namespace) -> BrowserSignIn | None:
    if args.sign_in == "never" or (args.sign_in == "auto" and not sys.stdin.isatty()):
        return None
    return BrowserSignIn(open_browser=not args.no_browser)


def tools_command(args: argparse.Namespace) -> int:
    async def body(bridge: Bridge) -> int:
        tools = bridge.openai_tools() if args.format == "openai" else bridge.gemini_tools(args.profile)
        print(json.dumps(tools, indent=2, ensure_ascii=False))
        return 1 if bridge.failures else 0

    return _run_with_bridge(args, body)


def call_command(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments)
    except ValueError as exc:
        print(f"error: the arguments are not valid JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("error: the arguments must be a JSON object", file=sys.stderr)
        return 2

    async def body(bridge: Bridge) -> int:
        if bridge.lookup(args.name) is None:
            names = ", ".join(t.name for t in bridge.tools) or "none"
            print(f"error: no tool named {args.name!r}; published: {names}", file=sys.stderr)
            return 2
        outcome = await bridge.call(args.name, arguments)
        if args.format == "text":
            print(outcome.as_text())
        else:
            print(json.dumps(function_response_part(outcome, multimodal=True), indent=2, ensure_ascii=False))
        return 0 if outcome.ok else 1

    return _run_with_bridge(args, body)


def chat_command(args: argparse.Namespace) -> int:
    if args.api == "openai":
        base_url = os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        api_key = os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and base_url == OPENAI_BASE_URL:
            print("error: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)", file=sys.stderr)
            return 2
    else:
        api_key = os.environ.get("GEMINI_API_KEY")
        if not api_key:
            print("error: set GEMINI_API_KEY", file=sys.stderr)
            return 2
        base_url = os.environ.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_BASE_URL
    provider = args.provider or args.api
    lines = _LINES

    async def confirm(tool: PublishedTool, arguments: dict[str, Any]) -> bool:
        print(f"? run {tool.name} {json.dumps(arguments, ensure_ascii=False)} [y/N] ", end="", file=sys.stderr, flush=True)
        answer = await lines.read()
        return (answer or "").strip().lower() in ("y", "yes")

    def on_event(kind: str, payload: Any) -> None:
        if kind == "text":
            print(payload, end="", flush=True)
        elif kind == "tool_call":
            print(f"\n> {payload.get('name')} {json.dumps(payload.get('args') or {}, ensure_ascii=False)}", file=sys.stderr, flush=True)
        elif kind == "tool_result":
            print(result_view(payload["functionResponse"], full=args.full_results), file=sys.stderr, flush=True)

    async def ask(bridge: Bridge, history: list[dict[str, Any]], style: str) -> RunResult:
        options: dict[str, Any] = {"max_turns": args.max_turns, "tool_style": style, "on_event": on_event}
        if args.api == "openai":
            return await run_openai(
                bridge, history, model=args.model, base_url=base_url, api_key=api_key, provider=provider,
                stream=not args.no_stream, system_prompt=args.system, **options,
            )  # fmt: skip
        return await run_rest(
            bridge, history, model=args.model, api_key=api_key, base_url=base_url, stream=not args.no_stream,
            profile=args.profile, system_instruction=args.system,
            multimodal=supports_multimodal_function_responses(args.model), **options,
        )  # fmt: skip

    async def body(bridge: Bridge) -> int:
        if not args.yes:
            bridge.confirm = confirm
        style = choose_tool_style(bridge, args.tool_style, provider=provider, model=args.model)
        servers = ", ".join(bridge.connected) or "no servers"
        print(f"{len(bridge.tools)} tools from {servers}; tool style {style}; /exit to quit", file=sys.stderr)
        history: list[dict[str, Any]] = []
        interactive = sys.stdin.isatty()
        while True:
            if interactive:
                print("you> ", end="", file=sys.stderr, flush=True)
            line = await lines.read()
            if line is None or line.strip() in ("/exit", "/quit"):
                return 0
            if not line.strip():
                continue
            if line.strip() == "/tools":
                print("\n".join(t.name for t in bridge.tools), file=sys.stderr)
                continue
            question = line.rstrip("\n")
            if args.api == "openai":
                history.append({"role": "user", "content": question})
            else:
                history.append({"role": "user", "parts": [{"text": question}]})
            try:
                result = await ask(bridge, history, style)
            except GeminiHTTPError as exc:
                print(f"\nerror: {exc}", file=sys.stderr)
                history.pop()
                continue
            print(flush=True)
            if not result.completed:
                print(f"(stopped after {args.max_turns} model requests)", file=sys.stderr)
            history = result.contents

    return _run_with_bridge(args, body)


def result_view(response: dict[str, Any], *, full: bool = False) -> str:
    """A tool result as `chat` shows it: ``< NAME: ok`` (or ``error``), then the text the model got, indented:
    whole with ``full``, else its first :data:`RESULT_LINES` lines, each cut at :data:`RESULT_WIDTH`
    characters (an edit's note and diff, the start of an output), and how much was left out."""
    body = response.get("response") or {}
    failed = "error" in body
    value = body.get("error") if failed else body.get("output")
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    lines = text.splitlines() if value is not None else []
    shown = lines if full else [line if len(line) <= RESULT_WIDTH else line[:RESULT_WIDTH] + " …" for line in lines[:RESULT_LINES]]
    view = [f"< {response.get('name')}: {'error' if failed else 'ok'}", *(f"  {line}" for line in shown)]
    if len(lines) > len(shown):
        view.append(f"  … {len(lines) - len(shown)} more lines (--full-results shows them)")
    if response.get("parts"):
        view.append(f"  [{len(response['parts'])} attachment(s)]")
    return "\n".join(view)


class _LineReader:
    """Reads stdin lines in a worker thread (prompts and confirmations share one reader)."""

    async def read(self) -> str | None:
        line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return line if line else None


_LINES = _LineReader()


def _remote_server(args: argparse.Namespace) -> ServerConfig | str:
    """The remote server named ``args.alias``, or what is wrong with the request. Only its entry is read:
    another server's unset variable is no concern of this one's sign-in."""
    try:
        configs = load_config(args.config, only=args.alias)
    except ConfigError as exc:
        return f"{args.config}: {exc}" if exc.key else str(exc)
    if not configs:
        return f"{args.config}: {args.alias!r} is disabled (\"disabled\": true)"
    config = configs[0]
    if config.url is None:
        return f"{args.alias!r} is a stdio server; only remote servers (httpUrl, url) sign in"
    return config


def login_command(args: argparse.Namespace) -> int:
    config = _remote_server(args)
    if isinstance(config, str):
        print(f"error: {config}", file=sys.stderr)
        return 2
    store = TokenStore(config.url or "")
    store.forget_tokens()  # a login signs in afresh; the client registration is kept
    sign_in = BrowserSignIn(open_browser=not args.no_browser, timeout=args.timeout)
    bridge = Bridge([config], connect_timeout=args.connect_timeout, sign_in=sign_in, mode=args.protocol)

    async def main() -> list[Any]:
        async with bridge:
            return bridge.failures

    try:
        failures = anyio.run(main)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    if failures:  # the bridge has reported it, once
        return 1
    if not store.has_tokens():
        print(f"{args.alias}: the server did not ask for a sign-in; nothing was stored", file=sys.stderr)
        return 0
    print(f"signed in to {args.alias}; tokens kept in {store.path}", file=sys.stderr)
    return 0


def logout_command(args: argparse.Namespace) -> int:
    config = _remote_server(args)
    if isinstance(config, str):
        print(f"error: {config}", file=sys.stderr)
        return 2
    store = TokenStore(config.url or "")
    if store.forget():
        print(f"forgot the tokens and client registration kept for {args.alias}", file=sys.stderr)
    else:
        print(f"{args.alias}: nothing was stored", file=sys.stderr)
    return 0
