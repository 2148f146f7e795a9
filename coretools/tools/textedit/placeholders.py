"""Omission placeholders: a comment such as `// ... existing code ...` or `# rest of the file unchanged` in
content a model wrote stands for code it left out, and writing it would lose that code.

What counts is the shape of a whole line, never a pattern inside code:

- a comment-only line (`#`, `//`, `/* */`, `<!-- -->`, `{/* */}`, `--`, `;`, `%`, or a `*` continuation line)
  whose text is nothing but dots (`// ...`, `<!-- ... -->`, `# …`), or is made only of omission vocabulary
  ("rest", "existing", "unchanged", "same as before", "omitted", ... and "code", "file", "methods", ...) in
  one of three shapes: with dots (`// ... other methods ...`); with a word saying it was left as it was
  (`# rest of code unchanged`, `/* remains the same */`); or a whole-code noun after "rest"/"existing"/
  "remaining"/"previous" (`// existing code`);
- a bare or bracketed line (`(rest of methods ...)`, `[... existing code ...]`) made only of that vocabulary,
  with dots and a phrase.

A note's marker before the comment's text (`# TODO: keep the rest as it is`, `// NOTE: rest of the file
unchanged`) counts when the rest says something was left as it was ("as it is" reads as "unchanged"); a note
naming work to do (`# TODO: rest of implementation`) does not. In documentation files a plain line of that
vocabulary that says the rest was left as it was (`The rest of the document is unchanged.`, `Keep the rest as
it is.`) is a placeholder too, where an edit cut the document (`prose`): a new document may well say it.

So `def f(): ...`, `x[..., 0]`, `...args`, `{...obj}`, doctest `...` lines, `# TODO ...`, prose in code files
and new documents ("and so on...", "The rest of the code is unchanged."), a comment with any other word
(`// rest of the args are passed through`, `# Other methods` as a section title) and text inside string
literals all pass. VB's `'` and `REM`
comments are not recognised. In documentation files (Markdown, reStructuredText, AsciiDoc, plain text) lines in
fenced code blocks are examples, not placeholders.

Whether a placeholder matters depends on what it replaces (`omission`): new content (a brand-new file) is refused
with any placeholder, as Gemini CLI does; an edit of existing text only when the placeholder is new and lines of
the old text are gone, which is what a placeholder standing for omitted code does.

Scanning is linear: one C-level search finds lines with a dot run or a vocabulary stem, and only those lines (at
most `MAX_LINE` characters each) are looked at in Python.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left
from collections.abc import Iterator

MAX_LINE = 240
MAX_WORDS = 16

_DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc")
# Comment-only lines worth a look: a dot run, or the stem of a word that can make a placeholder without dots.
# The leading line break lets the engine jump from line to line; the first line is looked at on its own.
_STEMS = (
    r"\.\.|\u2026|rest|remain|exist|unchang|unmodif|untouch|previous|omit|elided|snip|skip|truncat|same|before|"
    r"brevity|intact|preserv|retain|kept"
)
_COMMENT_LINE = re.compile(
    r"\n[ \t]*(?:<!--|\{/\*|/\*|//|#|--|;|%|\*)[^\n]{0," + str(MAX_LINE) + r"}?(?:" + _STEMS + ")", re.IGNORECASE
)
# A bare placeholder needs a word saying something was left out or left as it was.
_BARE_STEM = re.compile(
    r"rest|remain|exist|unchang|unmodif|untouch|previous|original|same|omit|elided|snip|skip|truncat|before|"
    r"brevity|intact|preserv|retain|kept|identical"
)
# A doc file's line that may be a prose placeholder (`The rest of the document is unchanged.`).
_PROSE_LINE = re.compile(r"\n[^\n]{0," + str(MAX_LINE) + r"}?(?:rest|remain|existing|previous)", re.IGNORECASE)
# A note's marker before a comment's text (`TODO:`, `NOTE(ana) -`), and "as it is" said in one word.
_MARKER = re.compile(r"(?:todo|note|nb|fixme|xxx)\b(?:\([^)\n]*\))?[\s:\-]*", re.IGNORECASE)
_AS_IS = re.compile(r"\bas (?:it|they) (?:is|are|was|were|stands?)\b|\bas[- ]is\b", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.MULTILINE)
_DOTS = re.compile(r"\.{2,}|\u2026")
_WORD = re.compile(r"[a-z0-9']+")

# Comment openers, longest first; a line opened by a bracket is treated as bare text.
_COMMENT_OPENERS = ("<!--", "{/*", "/*", "//", "#", "--", ";", "%", "*")
_DOC_OPENERS = tuple(o for o in _COMMENT_OPENERS if o != "#")
_DOTS_ONLY_OPENERS = frozenset({"<!--", "{/*", "/*", "//", "#", "--", ";", "%"})
_CLOSERS = ("*/}", "-->", "*/")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that say something was left out or left as it was ...
_STRONG = _words(
    "rest remaining remainder existing previous previously original same omitted omit elided elide snip snipped "
    "skipped truncated"
)
_WEAK = _words("other others more additional further etc everything else")
_STATE = _words(
    "unchanged unmodified untouched remains remain stays stay same before omitted elided snipped skipped "
    "truncated brevity kept preserved intact retained identical"
)
# ... what was left out ...
_WHOLE = _words("code file implementation content contents body logic source")
_OBJECTS = _WHOLE | _words(
    "method function class import test field property propertie member line definition config configuration "
    "setting style rule case handler route component markup html css text section module script declaration "
    "export prop attribute element item entry entrie statement setup helper block stuff part portion "
    "dependency dependencie key value option functionality tag doc documentation comment cell data endpoint "
    "command step variable constant type interface struct fn func def getter setter constructor init loop "
    "page template query querie schema migration example detail snippet classe paragraph "
    "document program app application lib library package column row table index"
)
# ... and the words that glue such a phrase together.
_FILLERS = _words(
    "the of a an this that these those its it it's is are was were be been as here there and or all any your "
    "my our from in to for with goes go not shown no changes change changed above below so on left out "
    "still like similar earlier prior keep keeps keeping leave leaves leaving unchanged' same' file's code's lines"
)
_VOCABULARY = _STRONG | _WEAK | _STATE | _OBJECTS | _FILLERS
_LEADERS = _words("rest remaining remainder existing previous")


def placeholder_line(text: str, path: str | None = None, prose: bool = True) -> str | None:
    """The first line of `text` (stripped) that is an omission placeholder, or None. `path`, when given, lets
    documentation files keep placeholders-as-examples inside fenced code blocks, and (`prose`) counts their
    plain sentences that may be one (which `omission` holds to an edit that cut the document)."""
    for line in placeholder_lines(text, path, prose):
        return line
    return None


def omission(new: str, old: str | None, path: str | None = None) -> str | None:
    """The first placeholder line of `new` that stands for omitted text, or None.

    `old` is what `new` replaces: None for a brand-new file (any placeholder counts), else the old text (the
    whole file for write_file, `old_string` for replace). A placeholder counts there only when `old` has no
    such line and some non-blank line of `old` is missing from `new`: a placeholder that replaces nothing (an
    addition that keeps every old line) leaves nothing out."""
    if old is None:
        return next(placeholder_lines(new, path), None)
    fresh = next((line for line in placeholder_lines(new, path, prose=True) if not _has_line(old, line)), None)
    if fresh is None or not _loses_lines(old, new):
        return None
    return fresh


def placeholder_lines(text: str, path: str | None = None, prose: bool = False) -> Iterator[str]:
    """Every placeholder line of `text`, stripped, in order; with `prose`, in a documentation file, plain
    sentences too (`The rest of the document is unchanged.`): what an edit that cut the rest of a document
    leaves, but a sentence a new document may well say."""
    doc = bool(path) and path.lower().endswith(_DOC_SUFFIXES)  # type: ignore[union-attr]
    fences = _fence_starts(text) if doc else None
    prose = prose and doc
    seen = -1
    scans = [_first_line(text), _comment_lines(text), _dotted_bare_lines(text)]
    if prose:
        scans.append(m.start() + 1 for m in _PROSE_LINE.finditer(text))
    for start in heapq.merge(*scans):
        if start == seen or (fences is not None and _in_fence(fences, start)):
            continue
        seen = start
        end = text.find("\n", start)
        line = text[start:len(text) if end < 0 else end]
        if len(line) <= MAX_LINE and is_placeholder(line.strip(), doc, prose):
            yield line.strip()


def _first_line(text: str) -> Iterator[int]:
    yield 0


def _comment_lines(text: str) -> Iterator[int]:
    """Starts of the comment-only lines (after the first) that have a dot run or a vocabulary stem."""
    for hit in _COMMENT_LINE.finditer(text):
        yield hit.start() + 1


def _dotted_bare_lines(text: str) -> Iterator[int]:
    """Starts of the lines with a dot run that may be a bare or bracketed placeholder: short, with an omission
    word, and no `=`, `;` or quote."""
    pos = 0
    ellipsis = text.find("\u2026")
    while True:
        dots = text.find("...", pos)
        if ellipsis >= 0 and ellipsis < pos:
            ellipsis = text.find("\u2026", pos)
        hit = min(dots, ellipsis) if dots >= 0 and ellipsis >= 0 else max(dots, ellipsis)
        if hit < 0:
            return
        start = text.rfind("\n", 0, hit) + 1
        end = text.find("\n", hit)
        end = len(text) if end < 0 else end
        pos = end + 1
        if end - start > MAX_LINE:
            continue
        line = text[start:end]
        if _BARE_STEM.search(line.lower()) is not None and not any(ch in line for ch in "=;\"`"):
            yield start


def is_placeholder(line: str, doc: bool = False, prose: bool = False) -> bool:
    """Whether one stripped line is an omission placeholder (see the module docstring). In a documentation
    file (`doc`) a `#` line is a heading, not a comment; with `prose`, a plain sentence there may be one."""
    openers = _DOC_OPENERS if doc else _COMMENT_OPENERS
    opener = next((o for o in openers if line.startswith(o)), None)
    if opener is not None:
        body = line[len(opener):].lstrip(opener[-1]).strip()
    else:
        body = line
    body = _strip_closer(body)
    marked = _MARKER.match(body)
    if marked is not None:
        body = body[marked.end():]
    dotted = _DOTS.search(body) is not None
    words = _WORD.findall(_DOTS.sub(" ", _AS_IS.sub(" unchanged ", body)).lower())
    if opener is not None and opener != "*" and not words and marked is None:
        return dotted and opener in _DOTS_ONLY_OPENERS and _only_punctuation(body)
    if not words or len(words) > MAX_WORDS or not all(_known(w) for w in words):
        return False
    if marked is not None:
        return (opener is not None or prose) and _left_as_it_was(words)
    if opener is None:
        if dotted:
            return _bare_phrase(body, words)
        return prose and _left_as_it_was(words) and any(w in _LEADERS for w in words)
    return _phrase(words) or (dotted and any(w not in _FILLERS for w in words))


def _bare_phrase(line: str, words: list[str]) -> bool:
    """A bare or bracketed line (`rest of code ...`, `(rest of methods ...)`) is a placeholder with a phrase
    that names what was left out; a quote makes it part of a string literal."""
    if line[0] in "'\"`" or '"' in line or "`" in line:
        return False
    return _phrase(words) or (any(w in _STRONG for w in words) and any(_is_object(w) for w in words))


def _phrase(words: list[str]) -> bool:
    """A vocabulary-only phrase that says code was left out: something left as it was ("rest of the code
    unchanged", "same as before", "10 lines omitted"), or "rest"/"existing"/... of a whole-code noun."""
    if _left_as_it_was(words):
        return True
    leaders = [i for i, w in enumerate(words) if w in _LEADERS]
    return bool(leaders) and any(w in _WHOLE for w in words[leaders[0] + 1:])


def _left_as_it_was(words: list[str]) -> bool:
    """Whether a vocabulary-only phrase says something was left as it was: "rest of the code unchanged",
    "keep the rest as it is", "same as before", "10 lines omitted". A note's marker (`TODO: rest of
    implementation`) needs this: without it the note names work still to do."""
    state = [w for w in words if w in _STATE]
    others = [w for w in words if w not in _STATE and (w in _STRONG or _is_object(w))]
    return bool(state) and (bool(others) or len(state) >= 2)


def _known(word: str) -> bool:
    return word in _VOCABULARY or word.isdigit() or _is_object(word)


def _is_object(word: str) -> bool:
    """`method`, `methods`, `classes` (listed as `classe`): plural objects without a stemmer."""
    return word in _OBJECTS or (word.endswith("s") and word[:-1] in _OBJECTS)


def _strip_closer(body: str) -> str:
    for closer in _CLOSERS:
        if body.endswith(closer):
            return body[: -len(closer)].strip()
    return body


def _only_punctuation(body: str) -> bool:
    return all(not ch.isalnum() for ch in body) and "'" not in body and '"' not in body and "`" not in body


def _fence_starts(text: str) -> list[int]:
    return [m.start() for m in _FENCE.finditer(text)]


def _in_fence(fences: list[int], pos: int) -> bool:
    """Whether `pos` lies inside a fenced code block: an odd number of fence lines start before it."""
    return bisect_left(fences, pos) % 2 == 1


def _has_line(text: str, line: str) -> bool:
    """Whether `line` (stripped) is a whole line of `text`, give or take surrounding whitespace."""
    pos = text.find(line)
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos + len(line))
        end = len(text) if end < 0 else end
        if text[start:pos].strip() == "" and text[pos + len(line):end].strip() == "":
            return True
        pos = text.find(line, pos + 1)
    return False


def _loses_lines(old: str, new: str) -> bool:
    """Whether some non-blank line of `old` (ignoring surrounding whitespace) is not a line of `new`."""
    kept = {line.strip() for line in new.splitlines()}
    return any(line.strip() not in kept for line in old.splitlines() if line.strip())
