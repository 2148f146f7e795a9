"""HTML to markdown for web_fetch, in time and memory linear in the page, whatever the page contains.

Imported lazily by web_fetch (it pulls in lxml, BeautifulSoup and markdownify). Three steps, none of which
a page can make superlinear:

1. `strip_raw_elements` cuts comments and script, style, noscript and template elements out of the text
   with forward-only searches (an element or comment left open ends the page, as it does in a browser),
   and stops once the conversion budget is filled: the budget counts the HTML that can carry content.
2. libxml2 (through lxml, in C) parses what remains into a tree; it stops nesting at 256 levels.
3. One walk over that tree hands BeautifulSoup the events its own lxml builder would have received, and
   markdownify turns the soup into markdown.

Python's html.parser is not used: it rescans unclosed constructs (`<!--`, `<?`, `<!`, `</a x`) from the
start at every step, so a few hundred kilobytes of them take minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urljoin

from bs4 import BeautifulSoup
from bs4.builder._lxml import LXMLTreeBuilder
from lxml import etree
from markdownify import MarkdownConverter

RAW_ELEMENTS = ("script", "style", "noscript", "template")
# Elements converted per character of the budget: ordinary pages have one per 25 characters or more, while
# 1,000,000 characters of `<a>` are 333,333 of them (each costs BeautifulSoup and markdownify about 20 us
# and 500 bytes).
ELEMENTS_PER_CHAR = 0.1
NON_CONTENT = ("head", "script", "style", "noscript", "template", "svg", "iframe", "canvas")
_COMMENT = "<!--"


def strip_raw_elements(html: str, limit: int) -> tuple[str, bool]:
    """The first `limit` characters of `html` without its comments and its script, style, noscript and
    template elements, and whether there was more.

    An element is `<name` (any case, not followed by a letter, digit or underscore) up to the first
    `</name` followed by optional whitespace and `>`; a comment is `<!--` up to `-->`. Each marker is
    searched for forward only, so the work is linear in the part of `html` that is read.
    """
    low = _lower_in_place(html)
    markers = (_COMMENT, *(f"<{name}" for name in RAW_ELEMENTS))
    found = {marker: low.find(marker) for marker in markers}
    kept: list[str] = []
    size = 0  # characters kept so far, counting those not copied once the budget is full
    pos = scan = 0  # text before `pos` is decided; no marker starts in [pos, scan)
    while size <= limit:
        for marker, at in found.items():
            if 0 <= at < scan:
                found[marker] = low.find(marker, scan)
        starts = [(at, marker) for marker, at in found.items() if at >= 0]
        if not starts:
            break
        at, marker = min(starts)
        if marker != _COMMENT and _is_word_char(low, at + len(marker)):
            scan = at + 1  # `<scripts` or `<style_x`: not one of these elements
            continue
        kept.append(html[pos : min(at, pos + limit + 1 - size)])
        size += at - pos
        pos = scan = _end_of(low, marker, at)
        if pos < 0:  # left open: the rest of the page is inside it
            return "".join(kept)[:limit], size > limit
    if size <= limit:
        kept.append(html[pos : pos + limit + 1 - size])
        size += len(html) - pos
    return "".join(kept)[:limit], size > limit


def _lower_in_place(text: str) -> str:
    """`text` lower-cased with every character at its own index (ASCII letters at least are lowered)."""
    low = text.lower()
    if len(low) != len(text):  # U+0130 lower-cases to two characters
        low = text.translate(_ASCII_LOWER)
    return low


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _is_word_char(text: str, index: int) -> bool:
    if index >= len(text):
        return False
    char = text[index]
    return char.isalnum() or char == "_"


def _end_of(low: str, marker: str, start: int) -> int:
    """Where the comment or element opened by `marker` at `start` ends (just after it), or -1."""
    if marker == _COMMENT:
        end = low.find("-->", start + len(_COMMENT))
        return end + 3 if end >= 0 else -1
    closing = "</" + marker[1:]
    at = low.find(closing, start + len(marker))
    while at >= 0:
        after = at + len(closing)
        while after < len(low) and low[after].isspace():
            after += 1
        if after < len(low) and low[after] == ">":
            return after + 1
        at = low.find(closing, after)
    return -1


class TreeWalkBuilder(LXMLTreeBuilder):
    """BeautifulSoup's lxml builder, fed from a tree libxml2 built on its own rather than from parser
    callbacks. Built in C, the tree keeps libxml2's nesting limit, which the callback route lacks (there,
    BeautifulSoup grows trees thousands of levels deep, slowly, and markdownify overflows the stack on them).
    At most `max_elements` elements are handed on; `truncated` says whether there were more."""

    def __init__(self, max_elements: int) -> None:
        super().__init__()
        self.max_elements = max_elements
        self.truncated = False

    def prepare_markup(self, markup, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201 - bs4's hook
        yield markup, None, None, False

    def feed(self, markup: str | bytes) -> None:
        data = markup.encode("utf-8", "replace") if isinstance(markup, str) else markup
        parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True)
        try:
            root = etree.fromstring(data, parser)
        except etree.XMLSyntaxError:
            root = None
        if root is not None:
            self._walk(root)
        self.close()

    def _walk(self, root) -> None:  # noqa: ANN001 - an lxml element
        elements = 0
        for event, data in _events(root):
            if event == "start":
                elements += 1
                if elements > self.max_elements:
                    self.truncated = True  # BeautifulSoup closes the elements left open
                    return
            getattr(self, event)(*data)


def _events(root) -> Iterator[tuple[str, tuple]]:  # noqa: ANN001 - an lxml element
    """The target-parser events (`start`, `data`, `end`) that describe the tree below `root`."""
    for event, element in etree.iterwalk(root, events=("start", "end")):
        if not isinstance(element.tag, str):  # an entity or other node the parser kept
            if event == "end" and element.tail:
                yield "data", (element.tail,)
            continue
        if event == "start":
            yield "start", (element.tag, dict(element.attrib))
            if element.text:
                yield "data", (element.text,)
        else:
            yield "end", (element.tag,)
            if element.tail and element is not root:
                yield "data", (element.tail,)


def convert(html: str, base_url: str, limit: int) -> tuple[str, str]:
    """(title, markdown) of a page: scripts, styles and other non-content elements dropped, links made
    absolute, inline data images reduced to their alt text; only the first `limit` characters of the HTML
    that remains after dropping scripts, styles and comments are converted."""
    kept, clipped = strip_raw_elements(html, limit)
    builder = TreeWalkBuilder(max(1, int(limit * ELEMENTS_PER_CHAR)))
    soup = BeautifulSoup(kept, builder=builder)
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(list(NON_CONTENT)):
        tag.decompose()
    for a in soup.find_all("a", href=True):
        if not a["href"].lower().startswith(("javascript:", "data:")):
            a["href"] = urljoin(base_url, a["href"])
    for img in soup.find_all("img"):
        src = img.get("src", "")
        if not src or src.lower().startswith("data:"):
            img.replace_with(img.get("alt", ""))
        else:
            img["src"] = urljoin(base_url, src)
    text = tidy(MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup))
    if builder.truncated:
        text += f"\n\n[Only the first {builder.max_elements:,} HTML elements of this page were converted.]"
    elif clipped:
        text += f"\n\n[Only the first {limit:,} characters of this page's HTML were converted.]"
    return title, text


def tidy(text: str) -> str:
    """Blank out lines of only spaces and tabs, squeeze runs of blank lines to one, strip the ends.

    Exactly what substituting two line breaks for each `\\n[ \\t]+\\n` and then for each run of three or
    more line breaks does: in particular a line of spaces and tabs right after one that was blanked stays
    (those matches cannot overlap), which keeps the markdown of every page as it was.
    """
    lines = text.split("\n")
    blanked = False
    for n in range(1, len(lines) - 1):
        line = lines[n]
        if not blanked and line and not line.strip(" \t"):
            lines[n] = ""
            blanked = True
        else:
            blanked = False
    return _squeeze_blank_lines(lines).strip()


def _squeeze_blank_lines(lines: list[str]) -> str:
    """The lines joined, with every run of three or more line breaks made two."""
    out: list[str] = []
    empties = 0
    for n, line in enumerate(lines):
        if not line and 0 < n < len(lines) - 1:
            empties += 1
            continue
        if empties:
            out.append("")  # two or more line breaks in a row become exactly two
            empties = 0
        out.append(line)
    return "\n".join(out)
