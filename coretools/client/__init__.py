"""The client bridge: Gemini's (and OpenAI-shaped) function calling over many MCP servers.

Depends on ``mcp`` (and ``httpx2``) only; ``google-genai`` is optional. It never imports the
server side of this package.

Tools can be called natively (``tool_style="json"``) or as XML written in the model's text
(``"xml"``, for models and OpenAI-compatible servers without function calling); ``None``
decides per provider and model (:mod:`coretools.client.style`).

Servers that ask the user for input are answered through ``Bridge(..., elicitation_callback=...)``
(:class:`TerminalElicitation` asks in a terminal); remote servers that need OAuth sign in with
``Bridge(..., sign_in=BrowserSignIn())``.

Typical use::

    async with Bridge.from_config("mcp.json") as bridge:
        result = await run_rest(bridge, "What is in README.md?", model="gemini-2.5-flash", api_key=key)
        answer = result.text  # the model's final text; result.contents holds the whole history
"""

from .arguments import coerce_arguments
from .bridge import Bridge, PublishedTool, ServerFailure, list_all_tools
from .config import ConfigError, ServerConfig, load_config, parse_config
from .convert import (
    CallLedger,
    Media,
    ToolOutcome,
    declaration_from_openai,
    function_declaration,
    function_response_content,
    function_response_part,
    gemini_tools_to_openai,
    native_tool_calls_event,
    openai_tool,
    openai_tools_to_gemini,
    outcome_from_result,
    tool_choice_to_tool_config,
    tool_config,
    tool_config_to_tool_choice,
    tool_result_to_function_response,
)
from .elicitation import asking_server
from .history import (
    PLACEHOLDER_SIGNATURE,
    StreamAccumulator,
    anthropic_messages_to_gemini,
    function_calls,
    openai_messages_to_gemini,
    response_text,
)
from .loop import (
    CodeAssistBackend,
    GeminiHTTPError,
    GenaiBackend,
    RestBackend,
    RunResult,
    run_code_assist,
    run_genai,
    run_loop,
    run_rest,
)
from .names import NAME_PATTERN, publish_names, sanitize_part
from .oauth import BrowserSignIn, SignInRequired
from .openai_loop import OpenAIChatBackend, run_openai
from .schema import sanitize_schema, to_json_profile, to_openapi_profile
from .style import DEFAULT_POLICY, KILO_POLICY, StylePolicy, ToolStyle, resolve_tool_style
from .terminal_prompt import TerminalElicitation
from .xml_dispatch import run_parsed_calls
from .xml_format import render_call, render_results
from .xml_parser import CallParser, ParsedCall, parse_calls
from .xml_prompt import render_tool_prompt

__all__ = [
    "DEFAULT_POLICY",
    "KILO_POLICY",
    "NAME_PATTERN",
    "PLACEHOLDER_SIGNATURE",
    "Bridge",
    "BrowserSignIn",
    "CallLedger",
    "CallParser",
    "CodeAssistBackend",
    "ConfigError",
    "GeminiHTTPError",
    "GenaiBackend",
    "Media",
    "OpenAIChatBackend",
    "ParsedCall",
    "PublishedTool",
    "RestBackend",
    "RunResult",
    "ServerConfig",
    "ServerFailure",
    "SignInRequired",
    "StreamAccumulator",
    "StylePolicy",
    "TerminalElicitation",
    "ToolOutcome",
    "ToolStyle",
    "anthropic_messages_to_gemini",
    "asking_server",
    "coerce_arguments",
    "declaration_from_openai",
    "function_calls",
    "function_declaration",
    "function_response_content",
    "function_response_part",
    "gemini_tools_to_openai",
    "list_all_tools",
    "load_config",
    "native_tool_calls_event",
    "openai_messages_to_gemini",
    "openai_tool",
    "openai_tools_to_gemini",
    "outcome_from_result",
    "parse_calls",
    "parse_config",
    "publish_names",
    "render_call",
    "render_results",
    "render_tool_prompt",
    "resolve_tool_style",
    "response_text",
    "run_code_assist",
    "run_genai",
    "run_loop",
    "run_openai",
    "run_parsed_calls",
    "run_rest",
    "sanitize_part",
    "sanitize_schema",
    "to_json_profile",
    "to_openapi_profile",
    "tool_choice_to_tool_config",
    "tool_config",
    "tool_config_to_tool_choice",
    "tool_result_to_function_response",
]
