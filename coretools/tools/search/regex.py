"""The caller's regexes as search_file_content runs them in Python: the pattern for the fallback engine and
for locating matches inside long lines, and `exclude_pattern` for both engines.

Everything runs on RE2, which, like ripgrep's engine, matches in time linear in the text: a pattern such as
`(a|aa)+$` cannot make it spin. Rust-only spellings are translated (`(?<name>...)`); look-around and
backreferences, which neither engine has, are refused with a message naming them. Case-insensitive matching
is RE2's simple case folding, as in ripgrep. Texts are searched as UTF-8 bytes, so match positions are byte
offsets (ripgrep's unit too).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import MAX_MEM, compile_program, encode


def literal(text: str) -> str:
    """`text` as an RE2 pattern that matches exactly it (`fixed_strings`)."""
    out = []
    for ch in text:
        if ch.isascii() and not ch.isalnum() and ch.isprintable():
            out.append("\\" + ch)
        elif not ch.isprintable():
            out.append(f"\\x{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return "".join(out)


class LineRegex:
    """A caller's regex (ripgrep's dialect) on RE2: `search(text)` over one line, `anywhere(text)` over a
    whole text (`^`/`$` at line boundaries), `spans(data)` the byte ranges of its matches in a line.

    `label` names the parameter in error messages ("" for `pattern`, "exclude " for `exclude_pattern`)."""

    def __init__(self, pattern: str, case_sensitive: bool = False, fixed: bool = False, label: str = "") -> None:
        if fixed:
            translated = literal(pattern)
        else:
            problem = _unsupported(pattern)
            if problem:
                raise ToolError(
                    f"Invalid {label}regular expression pattern provided: {pattern}. Error: {problem}",
                    ErrorKind.INVALID_TOOL_PARAMS,
                )
            translated = re.sub(r"\(\?<(?![=!])", "(?P<", pattern)
        flags = "" if case_sensitive else "i"
        try:
            self._line = compile_program(f"(?{flags}:{translated})" if flags else f"(?:{translated})")
            self._text = compile_program(f"(?{flags}m:{translated})")
        except ValueError as exc:
            raise ToolError(
                f"Invalid {label}regular expression pattern provided: {pattern}. Error: {exc}. Fix the pattern "
                "(escape literal characters such as ( ) [ ] { } . * + ? | \\ with a backslash; the fallback "
                "engine reads RE2 syntax, close to ripgrep's).",
                ErrorKind.INVALID_TOOL_PARAMS,
            ) from None
        self._source = f"(?{flags}:{translated})" if flags else f"(?:{translated})"
        self.anchored = not fixed and _ANCHORS.search(pattern) is not None

    def search(self, line: str) -> bool:
        return self._line.search(encode(line))

    def search_bytes(self, data: bytes) -> bool:
        return self._line.search(data)

    def anywhere(self, text: str) -> bool:
        return self._text.search(encode(text))

    def spans(self, data: bytes) -> list[tuple[int, int]]:
        """Where the regex matches in one line (UTF-8 bytes): non-overlapping byte ranges, in order."""
        program = _finder(self._source)
        if program is None:
            return []
        return [m.span() for m in program.finditer(data) if m.end() > m.start()]


@functools.lru_cache(maxsize=16)
def _finder(source: str):
    """RE2's iterating form of a pattern already checked by `compile_program` (None if it still refuses)."""
    import re2

    options = re2.Options()
    options.max_mem = MAX_MEM
    try:
        return re2.compile(source.encode("utf-8", "surrogatepass"), options)
    except Exception:  # noqa: BLE001 - re2 raises its own error type; no spans is the fallback
        return None


def _unsupported(pattern: str) -> str | None:
    if re.search(r"\(\?<?[=!]", pattern):
        return (
            "look-around, including look-ahead and look-behind, is not supported (neither by ripgrep nor by "
            "the fallback engine)."
        )
    if re.search(r"(?<!\\)\\[1-9]", pattern):
        return "backreferences are not supported (neither by ripgrep nor by the fallback engine)."
    return None


_ANCHORS = re.compile(r"\\[Az]")


def decode_text(data: bytes) -> str:
    if data.startswith(b"\xff\xfe") or data.startswith(b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", "surrogateescape")


def text_lines(text: str) -> Iterator[str]:
    """The lines of `text` without their `\\n` (none after a final one), one at a time: a list of them all
    would cost a string object per line, many times the text's size for short lines."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        yield text[start:end]
        start = end + 1
