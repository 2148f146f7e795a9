"""Near-miss recovery: where an `old_string` that is not literally in the file was meant to be, found by a
cascade of ever looser strategies, or a refusal saying what is nearest.

The strategies, in order (the first that finds at least one match decides; its count is then held to
`expected_replacements` by the caller, never passed on to a looser strategy):

1. lines: line by line ignoring leading and trailing whitespace (so indentation, tabs against spaces,
   trailing blanks and the indentation of blank lines); `new_string` is re-indented to the file's
   indentation (see `indent`).
2. unescaped: `old_string` and `new_string` alike with `\\n`, `\\t`, `\\"`, ... written as two characters
   turned into what they stand for; the pair is tried literally, then line by line as in 1.
3. tokens: the same tokens (words, numbers, single punctuation characters) with any whitespace between them;
   lines are free to break differently. Whitespace the caller kept from `old_string` stays the file's.
4. fuzzy: the one window of the file's lines clearly closest to a block of 3+ lines (see `fuzzy`).

Before and after the cascade, a repeated edit is recognised (`replayed`, `around`, `closer_to_new`): once an
edit is applied its old_string is gone or only similar to the edited lines, and a near-miss strategy would
edit the look-alike; the caller answers "already applied" instead.

Everything works on the text with CRLF made LF; spans are in that text and replacements are LF text (the
caller maps both back to the file's line endings). Matching is linear in the file (KMP over line and token
keys); only the fuzzy search is more, and it is bounded.
"""

from __future__ import annotations

import difflib
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from coretools.tools.textedit import fuzzy
from coretools.tools.textedit.indent import indentation_differs, merge_lines

MAX_TOKEN_CHARS = 16 * 1024 * 1024  # token and fuzzy matching run only on texts up to this many characters
MAX_MATCHES_KEPT = 1000
CHECK_EVERY = 8192
_TOKEN = re.compile(r"\w+|[^\w\s]")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "`": "`", "\\": "\\"}


@dataclass
class Recovery:
    """What the cascade found: the deciding strategy and its matches (spans of the LF text, each with its LF
    replacement), or, when nothing matched, `nearest`: a report of the closest text for the refusal."""

    strategy: str = ""
    note: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)
    replacements: list[str] = field(default_factory=list)
    count: int = 0  # matches found (may exceed the spans kept, MAX_MATCHES_KEPT)
    nearest: str = ""


@dataclass(frozen=True)
class _Block:
    """A string cut into lines, minus one line break at either end (remembered)."""

    lines: list[str]
    lead: bool
    trail: bool

    @classmethod
    def of(cls, s: str) -> _Block:
        lead = s.startswith("\n") and len(s) > 1
        s = s[1:] if lead else s
        trail = s.endswith("\n")
        s = s[:-1] if trail else s
        return cls(s.split("\n") if s or lead or trail else [], lead, trail)


class _Lines:
    """The file's lines with the offset of each in the LF text, made only when asked for (the fuzzy search,
    which runs on bounded files): the line-by-line match streams them instead."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: list[str] | None = None
        self.starts: list[int] = []

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.split("\n")
            pos = 0
            for line in self._lines:
                self.starts.append(pos)
                pos += len(line) + 1
        return self._lines

    def count(self) -> int:
        return self.text.count("\n") + 1

    def span(self, first: int, count: int, old: _Block, new: _Block) -> tuple[int, int]:
        """The span of `count` lines from `first`, widened over a line break `old_string` had at either end
        and `new_string` has not."""
        lines = self.lines
        last = first + count - 1
        return _widen(self.text, self.starts[first], self.starts[last] + len(lines[last]), old, new)


def _widen(text: str, start: int, end: int, old: _Block, new: _Block) -> tuple[int, int]:
    if old.trail and not new.trail and end < len(text):
        end += 1
    if old.lead and not new.lead and start > 0:
        start -= 1
    return start, end


def _each_line(text: str, window: deque[tuple[int, str]]) -> Iterator[str]:
    """The lines of `text` stripped, one at a time, keeping the last few (offset, line) in `window`."""
    pos = 0
    while True:
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        window.append((pos, line))
        yield line.strip()
        if end < 0:
            return
        pos = end + 1


def recover(text: str, old: str, new: str, check: Callable[[], None] | None = None) -> Recovery:
    """Run the cascade on `text` (LF) for `old` and `new` (LF)."""
    lines = _Lines(text)
    found = _line_flexible(lines, old, new, check)
    if found.count:
        return found
    u_old, u_new = unescape(old), unescape(new)
    if u_old != old:
        found = _unescaped(lines, u_old, u_new, check)
        if found.count:
            return found
    if len(text) > MAX_TOKEN_CHARS:
        return Recovery()
    found = _token_flexible(text, old, new, check)
    if found.count:
        return found
    return _fuzzy(lines, old, new, check)


def replayed(text: str, old: str, new: str, check: Callable[[], None] | None = None,
             deletions: bool = False) -> list[tuple[int, int]]:
    """Where `new` already stands in `text` (LF): the same tokens, whatever the whitespace between them (or
    over-escaped as in the cascade), from the start of a line to the end of one. None when its presence says
    nothing: `new` has no token, or its tokens are a run of `old`'s (a deletion leaves text of old_string
    that was in the file before the edit too), unless `deletions` (asked once nothing near `old` is found).
    The caller asks only when `old` is not literally there.

    Hosts and models retry: the same edit sent again finds its old_string gone and its new_string in place,
    and any near-miss strategy would then edit whatever else resembles old_string."""
    if len(text) > MAX_TOKEN_CHARS:
        return []
    for o, n in ((old, new), (unescape(old), unescape(new))):
        want = _TOKEN.findall(n)
        if not want or not deletions and _contains(_TOKEN.findall(o), want):
            return []
        if any(tok not in text for tok in set(want)):
            continue
        spans = []
        for run in token_runs(text, want, check):
            start, end = run[0][0], run[-1][1]
            before, after = text[text.rfind("\n", 0, start) + 1 : start], text[end : _line_end(text, end)]
            if before.strip(" \t") or after.strip(" \t"):
                continue
            spans.append((start, end))
            if len(spans) > MAX_MATCHES_KEPT:
                break
        if spans:
            return spans
    return []


def around(text: str, old: str, new: str) -> list[tuple[int, int]]:
    """The occurrences of `new` in `text` (LF) that hold every literal occurrence of `old`, when `new` holds
    `old` (an edit that only adds text before or after it): such an edit is applied already, and applying
    it again would add its text twice. Else none."""
    at = new.find(old)
    if not old or at < 0:
        return []
    offsets = [at]
    while (at := new.find(old, at + 1)) >= 0:
        offsets.append(at)
    spans: list[tuple[int, int]] = []
    pos = text.find(old)
    while pos >= 0:
        start = next((pos - k for k in offsets if pos >= k and text.startswith(new, pos - k)), None)
        if start is None:
            return []
        if not spans or spans[-1][0] != start:
            spans.append((start, start + len(new)))
        pos = text.find(old, pos + len(old))
    return spans


def closer_to_new(text: str, old: str, new: str, span: tuple[int, int]) -> bool:
    """Whether the file's lines where a fuzzy match of `old` begins are closer to `new` than to `old`: the
    edit is there already (a repeated call whose old_string is now only similar to the edited lines), and
    applying it again would change what it changed once more."""
    start = _line_start(text, span[0])
    theirs = [line.strip() for line in _Block.of(new).lines]
    ours = [line.strip() for line in _Block.of(old).lines]
    here = [line.strip() for line in text[start:].split("\n", len(theirs) + len(ours))]
    shorter = max(0, len(ours) - len(theirs))  # lines deleted at the start of old_string: new_string's are further on
    best = max(fuzzy.similarity(here[d : d + len(theirs)], theirs) for d in range(shorter + 1))
    return best > fuzzy.similarity(here[: len(ours)], ours)


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _contains(outer: list[str], inner: list[str]) -> bool:
    """Whether the items `inner` are a run of the items `outer`."""
    n = len(inner)
    return any(outer[i : i + n] == inner for i in range(len(outer) - n + 1))


def unescape(s: str) -> str:
    """`s` with each backslash escape a model over-escapes turned into its character, read left to right
    (so `\\\\n` is a backslash and an n); other backslashes are kept."""
    return _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), s)


# -- 1. line by line ------------------------------------------------------------------------------------------


def _line_flexible(lines: _Lines, old: str, new: str, check: Callable[[], None] | None) -> Recovery:
    ob, nb = _Block.of(old), _Block.of(new)
    keys = [line.strip() for line in ob.lines]
    if not any(keys) or any(key not in lines.text for key in set(keys)):
        return Recovery()
    m = len(keys)
    recent: deque[tuple[int, str]] = deque(maxlen=m)
    out = Recovery("lines")
    for _ in _kmp(_each_line(lines.text, recent), keys, check):
        out.count += 1
        if out.count > MAX_MATCHES_KEPT:
            continue
        window = [line for _, line in recent]
        start, last = recent[0][0], recent[-1]
        out.spans.append(_widen(lines.text, start, last[0] + len(last[1]), ob, nb))
        out.replacements.append(_render(ob, nb, window, lines.text))
        if out.count == 1:
            out.note = _lines_note(ob.lines, window, nb.lines)
    return out if out.count else Recovery()


def _render(ob: _Block, nb: _Block, window: list[str], text: str) -> str:
    body = "\n".join(merge_lines(ob.lines, nb.lines, window, text)) if nb.lines else ""
    if nb.trail and not ob.trail:
        body += "\n"
    if nb.lead and not ob.lead:
        body = "\n" + body
    return body


def _lines_note(caller: list[str], window: list[str], new: list[str]) -> str:
    differs = []
    if indentation_differs(caller, window):
        differs.append("indentation")
    if any(c.strip() and c.rstrip() != c and f.rstrip() == f or f.rstrip() != f and c.rstrip() == c
           for c, f in zip(caller, window) if c.strip()):
        differs.append("trailing whitespace")
    if any(not c.strip() and c != f for c, f in zip(caller, window)):
        differs.append("the whitespace of blank lines")
    what = " and ".join(differs) or "whitespace"
    note = f"old_string was not found exactly; it matched line by line ignoring {what}"
    if "indentation" in differs and new:
        note += "; the replacement was re-indented to match the file"
    return note + "."


def _kmp(items: Iterator[str], pattern: list[str], check: Callable[[], None] | None) -> Iterator[int]:
    """Start indices of the non-overlapping occurrences of `pattern` in the sequence `items` (equal strings),
    found left to right in one pass (Knuth-Morris-Pratt over ids of the pattern's items)."""
    ids: dict[str, int] = {}
    pat = [ids.setdefault(p, len(ids)) for p in pattern]
    fail = [0] * len(pat)
    k = 0
    for i in range(1, len(pat)):
        while k and pat[i] != pat[k]:
            k = fail[k - 1]
        if pat[i] == pat[k]:
            k += 1
        fail[i] = k
    k = 0
    for i, item in enumerate(items):
        if check is not None and not i % CHECK_EVERY:
            check()
        x = ids.get(item, -1)
        while k and x != pat[k]:
            k = fail[k - 1]
        if x == pat[k]:
            k += 1
            if k == len(pat):
                yield i - k + 1
                k = 0


# -- 2. over-escaped ------------------------------------------------------------------------------------------


def _unescaped(lines: _Lines, old: str, new: str, check: Callable[[], None] | None) -> Recovery:
    text = lines.text
    spans = []
    pos = text.find(old)
    while pos >= 0:
        spans.append((pos, pos + len(old)))
        pos = text.find(old, pos + len(old))
    if spans:
        found = Recovery("unescaped", count=len(spans), spans=spans[:MAX_MATCHES_KEPT],
                         replacements=[new] * min(len(spans), MAX_MATCHES_KEPT))
    else:
        found = _line_flexible(lines, old, new, check)
        if not found.count:
            return found
        found.strategy = "unescaped"
    found.note = ("old_string looked over-escaped (\\n, \\t or \\\" written as two characters); it matched "
                  "once unescaped" + (" and line by line" if not spans else "") + ", and new_string was "
                  "unescaped alike. Send literal text.")
    return found


# -- 3. token by token ----------------------------------------------------------------------------------------


def _token_flexible(text: str, old: str, new: str, check: Callable[[], None] | None) -> Recovery:
    old_toks = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(old)]
    if not old_toks:
        return Recovery()
    m = len(old_toks)
    found = Recovery("tokens")
    spans_at: list[list[tuple[int, int]]] = []
    for run in token_runs(text, [t for t, _, _ in old_toks], check):
        found.count += 1
        if len(spans_at) < MAX_MATCHES_KEPT:
            spans_at.append(run)
    if not found.count:
        return found
    new_toks = [(mt.group(), mt.start(), mt.end()) for mt in _TOKEN.finditer(new)]
    for spans in spans_at:
        start = _line_start(text, spans[0][0]) if _at_line_start(old, old_toks) else spans[0][0]
        found.spans.append((start, spans[-1][1]))
        found.replacements.append(_merge_tokens(text, start, spans, old, old_toks, new, new_toks))
    found.note = ("old_string was not found exactly; it matched token by token ignoring the whitespace between "
                  "tokens, and the spacing you did not change is the file's.")
    return found


_SPACES = re.compile(r"\s*")
ANCHOR_CANDIDATES = 8  # of the needle's longest distinct tokens, the rarest in the text anchors the search
MAX_ANCHORED_TOKENS = 1_000_000  # tokens read around anchors before the search falls back to one linear pass


def token_runs(text: str, want: list[str], check: Callable[[], None] | None = None) -> Iterator[list[tuple[int, int]]]:
    """The non-overlapping runs of tokens equal to `want` in `text` (whatever the whitespace between them), left
    to right, each as its tokens' spans.

    The text is never tokenized whole: the needle's rarest token (of its longest few, counted in C) anchors
    the search, each place it stands as a whole token is found with `str.find`, and only there are the
    tokens before and after it read and compared. Runs come in the order of their anchors, which is the order
    of their starts, so the first found is the leftmost and each next one begins after the one before."""
    m = len(want)
    if not m:
        return
    longest = sorted(set(want), key=len, reverse=True)[:ANCHOR_CANDIDATES]
    anchor = min(longest, key=text.count)
    k = want.index(anchor)
    done = 0  # a run may begin here or later
    budget = [MAX_ANCHORED_TOKENS]
    pos = text.find(anchor)
    seen = 0
    while pos >= 0:
        seen += 1
        if check is not None and not seen % CHECK_EVERY:
            check()
        spans = _run_at(text, pos, anchor, want, k, budget)
        if budget[0] < 0:
            # A text built to make each anchor read far before failing: the rest in one linear pass.
            recent: list[tuple[int, int]] = []
            for _ in _kmp(_remember(_TOKEN.finditer(text, done), recent, m), want, check):
                yield recent[-m:]
            return
        if spans is not None and spans[0][0] >= done:
            yield spans
            done = spans[-1][1]
            pos = text.find(anchor, max(done, pos + 1))
            continue
        pos = text.find(anchor, pos + 1)


def _run_at(text: str, pos: int, anchor: str, want: list[str], k: int,
            budget: list[int]) -> list[tuple[int, int]] | None:
    """The spans of the run of `want` whose token `k` is `anchor` at `pos`, or None. Each token read is taken
    from `budget[0]`."""
    end = pos + len(anchor)
    if _is_word(anchor[0]) and pos and _is_word(text[pos - 1]):
        return None  # inside a longer word
    if _is_word(anchor[-1]) and end < len(text) and _is_word(text[end]):
        return None
    before: list[tuple[int, int]] = []
    cursor = pos
    for j in range(k - 1, -1, -1):
        while cursor and text[cursor - 1].isspace():
            cursor -= 1
        if not cursor:
            return None
        start = cursor - 1
        if _is_word(text[start]):
            while start and _is_word(text[start - 1]):
                start -= 1
        budget[0] -= 1
        if text[start:cursor] != want[j]:
            return None
        before.append((start, cursor))
        cursor = start
    spans = [*reversed(before), (pos, end)]
    cursor = end
    for j in range(k + 1, len(want)):
        cursor = _SPACES.match(text, cursor).end()  # type: ignore[union-attr]
        token = _TOKEN.match(text, cursor)
        budget[0] -= 1
        if token is None or token.group() != want[j]:
            return None
        spans.append(token.span())
        cursor = token.end()
    return spans


def _remember(matches: Iterator[re.Match[str]], recent: list[tuple[int, int]], keep: int) -> Iterator[str]:
    """The tokens' texts, keeping the spans of the last `keep` of them in `recent` (trimmed now and then)."""
    for m in matches:
        recent.append(m.span())
        if len(recent) > 4 * keep + 64:
            del recent[: len(recent) - keep]
        yield m.group()


def _is_word(ch: str) -> bool:
    """Whether `ch` is a character of `\\w` (what `_TOKEN` joins into one token)."""
    return ch.isalnum() or ch == "_"


def _at_line_start(old: str, old_toks: list) -> bool:
    """Whether old_string starts at the start of a line (only spaces or tabs before its first token)."""
    return not old[: old_toks[0][1]].strip(" \t")


def _line_start(text: str, pos: int) -> int:
    """The start of the line of `pos`, if only spaces and tabs precede `pos` on it; else `pos`."""
    start = text.rfind("\n", 0, pos) + 1
    return start if not text[start:pos].strip(" \t") else pos


def _merge_tokens(text: str, start: int, spans: list[tuple[int, int]], old: str, old_toks: list, new: str,
                  new_toks: list) -> str:
    """The replacement of text[start:end of the last matched token]: the caller's tokens with, between two
    of them, the file's whitespace where the caller kept that gap from old_string, else the caller's. Where
    the match starts at a line's start, the indentation before the first token is the file's if the caller
    kept it (that of the first old token the caller kept, after deleting what came before it)."""
    if not new_toks:
        return new.strip() if start == spans[0][0] else text[start : spans[0][0]] + new.strip()
    aligned: dict[int, int] = {}
    sm = difflib.SequenceMatcher(None, [t for t, _, _ in old_toks], [t for t, _, _ in new_toks], autojunk=False)
    for block in sm.get_matching_blocks():
        for d in range(block.size):
            aligned[block.b + d] = block.a + d

    def old_gap(j: int) -> str:
        return old[old_toks[j][2] : old_toks[j + 1][1]]

    def file_gap(j: int) -> str:
        return text[spans[j][1] : spans[j + 1][0]]

    parts = [_lead(text, start, spans, old, old_toks, new, new_toks, aligned.get(0))]
    for k, (tok, _, end) in enumerate(new_toks):
        parts.append(tok)
        if k + 1 == len(new_toks):
            break
        gap = new[end : new_toks[k + 1][1]]
        a, b = aligned.get(k), aligned.get(k + 1)
        if a is not None and b == a + 1 or a is not None and a + 1 < len(old_toks) and gap == old_gap(a):
            gap = file_gap(a)
        elif b is not None and b > 0 and gap == old_gap(b - 1):
            gap = file_gap(b - 1)
        parts.append(gap)
    tail = new[new_toks[-1][2] :]
    tail_old = old[old_toks[-1][2] :]
    parts.append(tail[: len(tail) - len(_common_suffix(tail, tail_old))])
    return "".join(parts)


def _lead(text: str, start: int, spans: list[tuple[int, int]], old: str, old_toks: list, new: str,
          new_toks: list, first: int | None) -> str:
    """What the replacement starts with, before the caller's first token."""
    lead_new, lead_old = new[: new_toks[0][1]], old[: old_toks[0][1]]
    if start == spans[0][0]:
        return lead_new[len(_common_prefix(lead_new, lead_old)) :]
    if first == 0 and lead_new == lead_old:
        return text[start : spans[0][0]]
    if first and lead_new == _after_newline(old[old_toks[first - 1][2] : old_toks[first][1]]):
        return _after_newline(text[spans[first - 1][1] : spans[first][0]])
    return lead_new


def _after_newline(gap: str) -> str:
    return gap[gap.rfind("\n") + 1 :]


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _common_suffix(a: str, b: str) -> str:
    return _common_prefix(a[::-1], b[::-1])[::-1]


# -- 4. fuzzy -------------------------------------------------------------------------------------------------


def _fuzzy(lines: _Lines, old: str, new: str, check: Callable[[], None] | None) -> Recovery:
    ob, nb = _Block.of(old), _Block.of(new)
    if not fuzzy.eligible(ob.lines):
        return Recovery()
    if lines.count() * len(ob.lines) > fuzzy.MAX_CELLS:
        return Recovery(nearest=f"No fuzzy match was tried: the file has too many lines ({lines.count():,}) for a "
                                f"fuzzy search of {len(ob.lines)} lines.")
    verdict = fuzzy.closest(lines.lines, ob.lines, check)
    chosen = fuzzy.decide(verdict)
    m = len(ob.lines)
    if chosen is None:
        return Recovery(nearest=_fuzzy_refusal(lines, m, verdict))
    window = lines.lines[chosen.start : chosen.start + m]
    second = verdict.runner_up.similarity if verdict.runner_up else 0.0
    others = (f"the next closest is {_pct(second)}" if second >= fuzzy.FLOOR
              else f"nothing else is within {_pct(fuzzy.MARGIN)} of it")
    note = (f"old_string was not found exactly; lines {chosen.start + 1}-{chosen.start + m} are clearly the "
            f"closest text ({_pct(chosen.similarity)} similar, {others}), so they were edited; the lines you "
            "kept from old_string are the file's own. Check the result.")
    return Recovery("fuzzy", note, [lines.span(chosen.start, m, ob, nb)], [_render(ob, nb, window, lines.text)],
                    count=1)


def _fuzzy_refusal(lines: _Lines, m: int, verdict: fuzzy.Verdict) -> str:
    best, second = verdict.best, verdict.runner_up
    if verdict.skipped:
        return f"No fuzzy match was tried: {verdict.skipped}."
    if best is None:
        return ""
    if best.similarity >= fuzzy.ACCEPT and second is not None:
        return (f"Two places are close to it and to each other (within {int(fuzzy.MARGIN * 100)}%), so "
                f"neither was edited: lines {best.start + 1}-{best.start + m} ({_pct(best.similarity)} similar) "
                f"and lines {second.start + 1}-{second.start + m} ({_pct(second.similarity)}). Copy the exact "
                "text of the one you mean, with lines that tell them apart.\n"
                + _numbered(lines, best.start, m) + "\n" + _numbered(lines, second.start, m))
    return (f"The nearest text, lines {best.start + 1}-{best.start + m}, is only {_pct(best.similarity)} similar "
            f"(an edit needs {_pct(fuzzy.ACCEPT)}), so nothing was edited:\n" + _numbered(lines, best.start, m))


def _pct(x: float) -> str:
    return f"{int(x * 100)}%"


def _numbered(lines: _Lines, start: int, m: int, shown: int = 8) -> str:
    rows = [f"{n + 1:>6}| {_short(lines.lines[n].rstrip(chr(13)))}" for n in range(start, min(start + m, start + shown))]
    if m > shown:
        rows.append(f"{'':>6}  ... ({m - shown} more lines)")
    return "\n".join(rows)


def _short(line: str, limit: int = 200) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
