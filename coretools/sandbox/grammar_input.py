"""What a tree-sitter grammar is shown of untrusted text: the same bytes with every non-ASCII byte replaced
by `x`.

Grammar scanners are C code that classify the lookahead code point with `<ctype.h>` functions, which are
defined only for values up to 255; a larger code point indexes past the table. tree-sitter-bash 0.25.1
does this after a `{` (tree-sitter/tree-sitter-bash#337) and dies of SIGSEGV in about half of all process
layouts, taking the whole server with it. Showing the grammar ASCII only keeps every such call in range,
whatever grammar and whatever function.

The view keeps every byte offset, so node ranges index the original bytes, which callers slice for text.
For the languages parsed here, a non-ASCII character can only be part of a word, a string or a comment,
so a letter in its place keeps the tree's shape. The one difference leans the safe way for the shell
policy: `$é` reads as an expansion where bash reads a literal, which the policy treats as not literal.

Memory, too, depends on what the grammar is shown: tree-sitter-bash holds state that grows with the square
of a pipeline's length in one step that cannot be interrupted (8,192 stages: 650 MiB to 1 GiB), so shell
text with a pipeline of over `MAX_PIPELINE` stages (`longest_pipeline`, a linear scan) is not parsed.
"""

from __future__ import annotations

import itertools
import re

MAX_PIPELINE = 256  # `|`s in one shell pipeline (a script's longest has a few dozen)
_PIPE_CONTINUES = re.compile(r"\|[ \t]*\\?\n")  # a pipe at the end of a line: the pipeline goes on
_COMMAND_END = re.compile(r"[;&\n]")

_ASCII_ONLY = bytes(range(128)) + b"x" * 128


def ascii_view(data: bytes) -> bytes:
    """`data` with each byte from 0x80 up replaced by `x`: the same length and offsets, ASCII only."""
    return data.translate(_ASCII_ONLY)


def longest_pipeline(text: str) -> int:
    """The number of `|` in the longest pipeline of shell text, by a linear scan that may also count a `|`
    in a string or comment (such a text is only left unparsed)."""
    joined = _PIPE_CONTINUES.sub("|", text.replace("||", ";").replace("|&", "|").replace("\\\n", " "))
    return max(map(str.count, _COMMAND_END.split(joined), itertools.repeat("|")))
