"""Errors: the kinds a failed call reports, the error a tool raises, and the one the CLI reports at start.

A `ToolError` becomes an `isError` result whose text is the message, so the message must say what went
wrong and what to do about it. Its `kind` is an `ErrorKind`: the values mirror Gemini CLI's `ToolErrorType`
where one fits, and are carried as plain strings in the result's structured content (sent with
`--structured-content`) so a program can branch on them without parsing prose. A `ConfigurationError` is
found before anything is served: an unusable root, HTTP setting or tool option; the CLI prints its message
and exits with status 2.

Every exception class of the server side, by base (module in brackets; the client keeps its own, and an
exception private to one module, raised and caught there, is left out):

* ToolError                   a call failed; the model reads the message            [errors]
  + PathError                 a path argument refused or not found                  [errors]
    - InvalidPath             not a path any file can have                          [errors]
    - OutsideWorkspace        resolves outside every root                           [errors]
    - ProtectedPath           `.git` internals, a secret env file                   [errors]
    - MissingPath             not found, with the paths it likely meant             [workspace.hints]
  + PatternError              a glob or ignore pattern the engine refuses           [sandbox.patterns.tree]
  + StaleFile                 changed on disk since the model read it               [workspace.views]
* ConfigurationError          an option, root or setting that cannot work           [errors]
* CommandRefused              the shell policy refused a command                    [sandbox.shell_policy]
* ArgumentRefused             ... one argument of a command it knows                [sandbox.exec_policy.words]
* FetchRefused                the address policy refused a hop of web_fetch         [sandbox.netpolicy]
* FetchError                  a URL could not be fetched                            [sandbox.pinned_http]
* FileFull                    the memory file would pass its size limit             [sandbox.memory_file]
* TooManyJobs                 no room for another background command                [workspace.background]
* NotText                     bytes an edit cannot treat as text                    [tools.textedit.codec]
* Unreadable                  a JSON-RPC message that cannot be served              [server.message_errors]
* ValueError
  + UrlProblem                a URL malformed, of another scheme, with credentials  [sandbox.netpolicy]
  + AmbiguousIndentation      new_string's indentation fits two readings            [tools.textedit.indent]
* OSError
  + EscapeError               resolution would leave the root                       [sandbox.kernel]
  + LandlockError             the kernel refused a Landlock ruleset                 [sandbox.landlock]

Only `ToolError` and its subclasses reach the model; the others are caught by the module that calls the
raiser and turned into a `ToolError`, a result's text or a log line. tests/test_errors.py holds this tree to
the code.

This module is the leaf every layer imports; it imports nothing from the package.
"""

from __future__ import annotations

from enum import Enum


class ErrorKind(str, Enum):
    """Why a call failed. The values are part of the protocol: never rename one."""

    # the call itself
    INVALID_TOOL_PARAMS = "invalid_tool_params"
    EXECUTION_FAILED = "execution_failed"
    UNHANDLED_EXCEPTION = "unhandled_exception"
    CALL_TIMEOUT = "call_timeout"
    SERVER_BUSY = "server_busy"
    CANCELLED_BY_USER = "cancelled_by_user"
    POLICY_VIOLATION = "policy_violation"
    # paths and files
    PATH_NOT_IN_WORKSPACE = "path_not_in_workspace"
    PATH_IS_NOT_A_DIRECTORY = "path_is_not_a_directory"
    FILE_NOT_FOUND = "file_not_found"
    FILE_TOO_LARGE = "file_too_large"
    PERMISSION_DENIED = "permission_denied"
    TARGET_IS_DIRECTORY = "target_is_directory"
    READ_CONTENT_FAILURE = "read_content_failure"
    FILE_WRITE_FAILURE = "file_write_failure"
    NO_SPACE_LEFT = "no_space_left"
    ATTEMPT_TO_CREATE_EXISTING_FILE = "attempt_to_create_existing_file"
    FILE_CHANGED_SINCE_READ = "file_changed_since_read"
    # replace
    EDIT_PREPARATION_FAILURE = "edit_preparation_failure"
    EDIT_NO_OCCURRENCE_FOUND = "edit_no_occurrence_found"
    EDIT_EXPECTED_OCCURRENCE_MISMATCH = "edit_expected_occurrence_mismatch"
    EDIT_NO_CHANGE = "edit_no_change"
    # one tool each
    GREP_EXECUTION_ERROR = "grep_execution_error"
    SHELL_EXECUTE_ERROR = "shell_execute_error"
    DISCOVERED_TOOL_EXECUTION_ERROR = "discovered_tool_execution_error"
    WEB_FETCH_PROCESSING_ERROR = "web_fetch_processing_error"
    WEB_FETCH_FALLBACK_FAILED = "web_fetch_fallback_failed"
    WEB_SEARCH_FAILED = "web_search_failed"
    MEMORY_TOOL_EXECUTION_ERROR = "memory_tool_execution_error"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class ToolError(Exception):
    """A failure the model should read and can act on."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.EXECUTION_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.kind = ErrorKind(kind)


class PathError(ToolError):
    """A path argument was refused or could not be resolved."""


class InvalidPath(PathError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid path: {reason}", ErrorKind.INVALID_TOOL_PARAMS)


class OutsideWorkspace(PathError):
    def __init__(self, path: str, roots: list[str]) -> None:
        listed = ", ".join(roots)
        super().__init__(
            f'Path not in workspace: Attempted path "{path}" resolves outside the allowed workspace '
            f"directories: {listed}",
            ErrorKind.PATH_NOT_IN_WORKSPACE,
        )


class ProtectedPath(PathError):
    def __init__(self, path: str, what: str) -> None:
        super().__init__(
            f'Path is protected: "{path}" is {what}. coretools refuses it by default; the operator can '
            "start the server with --allow-protected to permit it.",
            ErrorKind.PATH_NOT_IN_WORKSPACE,
        )


class ConfigurationError(Exception):
    """A server option that cannot work, found at start: an unusable root (`Workspace.check_root`), an HTTP
    setting (`server.http.settings_from`), a tool's options while the tools are built. The CLI reports the
    message as `coretools-mcp: error: <message>` and exits with status 2; nothing is served."""
