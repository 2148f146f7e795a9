"""Omission placeholders: a line such as `// ... rest of methods ...` in content a model wrote means code
was left out, and writing it would lose that code."""

from __future__ import annotations

import re

_PLACEHOLDER_PHRASES = {
    "rest of", "rest of method", "rest of methods", "rest of code", "rest of the code", "rest of file",
    "rest of the file", "rest of implementation", "rest of the implementation", "rest of function",
    "rest of the function", "rest of class", "rest of the class", "unchanged code", "unchanged method",
    "unchanged methods", "existing code", "remaining code", "remaining methods", "other methods",
    "previous code", "code unchanged", "same as before",
}
_COMMENT_OPENERS = ("<!--", "/*", "//", "--", "#", ";", "*", "%")
_COMMENT_CLOSERS = ("-->", "*/")
_DOTS = re.compile(r"(?:\.{3,}|\u2026)")


def placeholder_line(text: str) -> str | None:
    """The first line that is nothing but an omission placeholder, such as `// ... rest of methods ...`,
    `(rest of code ...)`, `# ... unchanged code ...`. A placeholder inside code (a string literal, a call)
    is not one: the line must consist of an optional comment marker, optional brackets, the phrase and dots."""
    for raw in text.splitlines():
        line = raw.strip()
        if "..." not in line and "\u2026" not in line:
            continue
        for opener in _COMMENT_OPENERS:
            if line.startswith(opener):
                line = line[len(opener):].strip()
                break
        for closer in _COMMENT_CLOSERS:
            if line.endswith(closer):
                line = line[: -len(closer)].strip()
        while len(line) >= 2 and line[0] + line[-1] in ("()", "[]", "{}", "<>"):
            line = line[1:-1].strip()
        if not _DOTS.search(line):
            continue
        phrase = " ".join(_DOTS.sub(" ", line).lower().split()).strip(" :")
        if phrase in _PLACEHOLDER_PHRASES:
            return raw.strip()
    return None
