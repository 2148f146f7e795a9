"""What write_file and replace share, one noun per module:

- `codec`: faithful decoding and encoding (UTF-8, with or without BOM, UTF-16/32 with BOM) and line endings;
- `placeholders`: omission-placeholder detection (`// ... existing code ...`);
- `diff`: change spans, the unified diff and the compact numbered diff rendered from them;
- `syntax`: the note on a syntax error an edit introduced (or would introduce);
- `similar`: the "most similar lines" report of a failed match;
- `nearmiss`, `indent`, `fuzzy`: where a near-miss old_string was meant to be, and its replacement re-indented;
  whether an edit is applied already;
- `replacement`: one replacement of old_string by new_string in a text, literal or recovered (replace's one
  edit, each of edit_file's);
- `patch`: the Codex CLI's patch format read, and each hunk placed in its file (apply_patch's; imported as
  `textedit.patch`, not through this package's names);
- `plan`: the plan of one edit and the size limit it is made within;
- `freshness`: the stale-write guard (the file as the session last saw it);
- `edit_tool`: the options, the locked plan -> confirm -> write sequence and the result of the editing tools.

The editing tools import this package (`from coretools.tools import textedit as te`), never each other.
"""

from __future__ import annotations

from coretools.tools.textedit.codec import (
    UTF8, Codec, Newlines, NotText, decode, encode, newlines, style_notes, to_lf, with_newline,
)
from coretools.tools.textedit.diff import (
    Rendered, Span, align, compact_diff, numbered, unified_diff, whole_file_spans,
)
from coretools.tools.textedit.edit_tool import (
    EditOptions, EditTool, apply, confirm, echo, result,
)
from coretools.tools.textedit.indent import AmbiguousIndentation
from coretools.tools.textedit.nearmiss import Recovery, around, closer_to_new, recover, replayed
from coretools.tools.textedit.placeholders import omission, placeholder_line
from coretools.tools.textedit.plan import MAX_EDIT_BYTES, Plan, edit_limit, limit_in_force, read_existing, too_big
from coretools.tools.textedit.replacement import (
    Replacement, Wording, breaks_message, encoded_len, plural, replace_text,
)
from coretools.tools.textedit.similar import similar_lines
from coretools.tools.textedit.syntax import introduced_error, syntax_note

__all__ = [
    "MAX_EDIT_BYTES", "UTF8", "AmbiguousIndentation", "Codec", "EditOptions", "EditTool", "Newlines", "NotText", "Plan", "Rendered", "Span",
    "align", "apply", "confirm", "decode", "echo", "edit_limit", "encode",
    "limit_in_force", "newlines", "placeholder_line", "read_existing", "result", "similar_lines",
    "style_notes", "to_lf", "too_big", "unified_diff", "whole_file_spans", "with_newline",
    "compact_diff", "numbered", "omission", "syntax_note",
    "Recovery", "around", "closer_to_new", "introduced_error", "recover", "replayed",
    "Replacement", "Wording", "breaks_message", "encoded_len", "plural", "replace_text",
]
