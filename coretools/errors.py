"""Errors a tool reports to the model.

A `ToolError` becomes an `isError` result whose text is the message, so the message must say what went
wrong and what to do about it. `kind` mirrors Gemini CLI's `ToolErrorType` values where one fits; it is
carried in the result's structured content (sent with `--structured-content`) so a program can branch on
it without parsing prose.
"""

from __future__ import annotations


class ToolError(Exception):
    """A failure the model should read and can act on."""

    def __init__(self, message: str, kind: str = "execution_failed") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class PathError(ToolError):
    """A path argument was refused or could not be resolved."""


class InvalidPath(PathError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid path: {reason}", "invalid_tool_params")


class OutsideWorkspace(PathError):
    def __init__(self, path: str, roots: list[str]) -> None:
        listed = ", ".join(roots)
        super().__init__(
            f'Path not in workspace: Attempted path "{path}" resolves outside the allowed workspace '
            f"directories: {listed}",
            "path_not_in_workspace",
        )


class ProtectedPath(PathError):
    def __init__(self, path: str, what: str) -> None:
        super().__init__(
            f'Path is protected: "{path}" is {what}. coretools refuses it by default; the operator can '
            "start the server with --allow-protected to permit it.",
            "path_not_in_workspace",
        )
