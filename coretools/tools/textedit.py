"""What write_file and replace share: faithful decoding and encoding, line endings, omission-placeholder
detection, diff and snippet rendering from known change spans, "did you mean" lines, per-file locking,
user confirmation, and the result both tools return.

Faithfulness: a file is decoded strictly as what it is (UTF-8, UTF-8 with BOM, or UTF-16/32 with BOM) and
encoded back the same way; its line-ending convention is detected and kept; nothing is added at its end.
Changes are described as spans of the old and new text, so even a 50 MB file is diffed without splitting it
into lines.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio

from coretools.errors import ToolError
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.paths import Location, WriteOutcome
from coretools.tools.base import Tool, ToolContext, ToolResult, text_block
from coretools.tools.filetypes import detect_bom

# The largest file an edit reads and the largest content it writes (`--max-edit-bytes`). An edit holds the old
# text, the new text and the new bytes at once, each about this size for an ASCII file, within 300 MiB.
MAX_EDIT_BYTES = 64 * 1024 * 1024
MIB = 1024 * 1024
DIFF_CONTEXT = 3
SNIPPET_CONTEXT = 5
MAX_DIFF_LINES = 400
MAX_SNIPPET_LINES = 400
MAX_CONFIRM_DIFF_LINES = 150
MAX_ECHO_CHARS = 4000
CONFIRM_CHOICES = ("none", "edits")

# ---------------------------------------------------------------------------------------------------------
# server option (one definition, registered by whichever editing tool the parser sees first)


def add_edit_arguments(parser: argparse.ArgumentParser) -> None:
    """`--confirm` and `--max-edit-bytes`, registered once for both editing tools."""
    add_confirm_argument(parser)
    if "--max-edit-bytes" in parser._option_string_actions:  # noqa: SLF001 - both editing tools call this
        return
    parser.add_argument(
        "--max-edit-bytes",
        type=int,
        default=MAX_EDIT_BYTES,
        metavar="BYTES",
        help="largest file replace and write_file read to edit, and largest content one edit may produce; a "
        "bigger edit is refused before it is built, with an error saying how to split it "
        f"(default: {MAX_EDIT_BYTES}, i.e. {MAX_EDIT_BYTES // MIB} MiB)",
    )


def max_edit_bytes(config) -> int:  # noqa: ANN001 - a ServerConfig
    value = config.opt("max_edit_bytes", MAX_EDIT_BYTES)
    return int(value) if value and value > 0 else MAX_EDIT_BYTES


def add_confirm_argument(parser: argparse.ArgumentParser) -> None:
    if "--confirm" in parser._option_string_actions:  # noqa: SLF001 - both editing tools call this
        return
    parser.add_argument(
        "--confirm",
        choices=CONFIRM_CHOICES,
        default="none",
        help="'edits': ask the user (MCP elicitation, showing the diff) before write_file or replace changes "
        "a file; an edit the user declines, or one the client cannot ask about, is not applied. Default "
        "'none': rely on the host's own tool approval",
    )


def confirm_enabled(ctx_or_config) -> bool:
    config = getattr(ctx_or_config, "config", ctx_or_config)
    return config.opt("confirm", "none") == "edits"


CONFIRM_NOTE = (
    " This server asks the user to confirm every edit (showing the diff) before applying it; an edit the user "
    "declines is not applied, and is refused if the client cannot ask the user."
)

# ---------------------------------------------------------------------------------------------------------
# encodings and line endings


@dataclass(frozen=True)
class Codec:
    encoding: str = "utf-8"  # Python codec name
    bom: bytes = b""

    @property
    def label(self) -> str:
        name = {"utf-8": "UTF-8", "utf-16-le": "UTF-16 LE", "utf-16-be": "UTF-16 BE",
                "utf-32-le": "UTF-32 LE", "utf-32-be": "UTF-32 BE"}.get(self.encoding, self.encoding)
        return f"{name} with byte-order mark" if self.bom else name

    @property
    def plain(self) -> bool:
        return self.encoding == "utf-8" and not self.bom


UTF8 = Codec()


class NotText(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def decode(data: bytes) -> tuple[str, Codec]:
    """Decode file content exactly, or raise NotText saying why it is not text we can write back."""
    found = detect_bom(data[:4])
    if found is not None:
        encoding, bom = found
        try:
            return data[len(bom):].decode(encoding), Codec(encoding, bom)
        except UnicodeDecodeError as exc:
            raise NotText(f"it starts with a {Codec(encoding, bom).label} but byte {exc.start + len(bom)} is not "
                          f"valid {encoding.upper()}") from None
    if b"\0" in data:
        raise NotText("it looks binary (it contains NUL bytes) and has no UTF-16/UTF-32 byte-order mark")
    try:
        return data.decode("utf-8"), UTF8
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        raise NotText(f"it is not valid UTF-8 (byte 0x{bad} at offset {exc.start}; perhaps Latin-1 or another "
                      "legacy code page) and has no UTF-16/UTF-32 byte-order mark") from None


def encode(text: str, codec: Codec, shown: str) -> bytes:
    try:
        return codec.bom + text.encode(codec.encoding)
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"Cannot write {shown}: character {text[exc.start:exc.end]!r} at position {exc.start} cannot be encoded "
            f"in {codec.label} (the file's encoding). Nothing was written. Remove it or use a valid character.",
            "invalid_tool_params",
        ) from None


@dataclass(frozen=True)
class Newlines:
    """A text's line breaks: the one most of them use (None if there are none) and whether both kinds occur."""

    dominant: str | None
    crlf: bool  # some line break is CRLF
    mixed: bool  # both CRLF and bare LF occur


def newlines(text: str) -> Newlines:
    if "\r" not in text:  # the common case, decided by one fast scan
        return Newlines("\n" if "\n" in text else None, False, False)
    lf = text.count("\n")
    if not lf:
        return Newlines(None, False, False)
    crlf = text.count("\r\n")
    return Newlines("\r\n" if crlf * 2 >= lf else "\n", crlf > 0, 0 < crlf < lf)


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def with_newline(text: str, newline: str) -> str:
    text = to_lf(text)
    return text if newline == "\n" else text.replace("\n", newline)


# ---------------------------------------------------------------------------------------------------------
# omission placeholders ("// ... rest of methods ...")

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


# ---------------------------------------------------------------------------------------------------------
# change spans, unified diff, snippet


@dataclass
class Span:
    """A changed region, aligned to whole lines: old[os:oe] became new[ns:ne]; text between spans is equal."""

    os: int
    oe: int
    ns: int
    ne: int
    old_line: int = 0  # 0-based line index of `os` in old
    new_line: int = 0
    old_count: int = 0  # lines in old[os:oe]
    new_count: int = 0


def _line_count(text: str, a: int, b: int) -> int:
    if b <= a:
        return 0
    return text.count("\n", a, b) + (0 if text[b - 1] == "\n" else 1)


def _at_line_start(text: str, pos: int) -> bool:
    return pos == 0 or text[pos - 1] == "\n"


def align(old: str, new: str, raw: list[tuple[int, int, int, int]]) -> list[Span]:
    """Turn exact changes (old[s:e] -> new[ns:ne], in order, equal text between them) into whole-line spans,
    merging changes that share a line, and number their lines."""
    spans: list[Span] = []
    for s, e, ns, ne in raw:
        ls = old.rfind("\n", 0, s) + 1
        nls = ls + (ns - s)
        if _at_line_start(old, e) and _at_line_start(new, ne):
            tail = 0
        else:
            nxt = old.find("\n", e)
            tail = (len(old) if nxt < 0 else nxt + 1) - e
        span = Span(ls, e + tail, nls, ne + tail)
        if spans and span.os <= spans[-1].oe:
            spans[-1].oe, spans[-1].ne = span.oe, span.ne
        else:
            spans.append(span)
    line, pos, delta = 0, 0, 0
    for span in spans:
        line += old.count("\n", pos, span.os)
        span.old_line, span.new_line = line, line + delta
        span.old_count = _line_count(old, span.os, span.oe)
        span.new_count = _line_count(new, span.ns, span.ne)
        line += old.count("\n", span.os, span.oe)
        pos = span.oe
        delta += span.new_count - span.old_count
    return spans


def whole_file_spans(old: str, new: str, max_lines: int = 20000) -> list[Span]:
    """Spans for two whole texts (write_file): common leading and trailing lines are skipped; the middle is
    diffed line by line when it is small enough, else reported as one changed block."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a_mid, b_mid = a[head:len(a) - tail], b[head:len(b) - tail]
    if not a_mid and not b_mid:
        return []
    if len(a_mid) + len(b_mid) <= max_lines:
        ops = [op[1:] for op in difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False).get_opcodes()
               if op[0] != "equal"]
    else:
        ops = [(0, len(a_mid), 0, len(b_mid))]
    a_off = _offsets(a)
    b_off = _offsets(b)
    raw = [(a_off[head + i1], a_off[head + i2], b_off[head + j1], b_off[head + j2]) for i1, i2, j1, j2 in ops]
    return align(old, new, raw)


def _offsets(lines: list[str]) -> list[int]:
    out = [0]
    for line in lines:
        out.append(out[-1] + len(line))
    return out


def _back(text: str, pos: int, lines: int) -> tuple[int, int]:
    """Start of the line `lines` lines before the line starting at `pos`, and how many lines that is."""
    count = 0
    while count < lines and pos > 0:
        pos = text.rfind("\n", 0, pos - 1) + 1
        count += 1
    return pos, count


def _forward(text: str, pos: int, lines: int) -> tuple[int, int]:
    count = 0
    while count < lines and pos < len(text):
        nxt = text.find("\n", pos)
        pos = len(text) if nxt < 0 else nxt + 1
        count += 1
    return pos, count


def _groups(spans: list[Span], context: int, side: str) -> list[list[Span]]:
    groups: list[list[Span]] = []
    for span in spans:
        if groups:
            last = groups[-1][-1]
            if side == "old":
                gap = span.old_line - (last.old_line + last.old_count)
            else:
                gap = span.new_line - (last.new_line + last.new_count)
            if gap <= 2 * context:
                groups[-1].append(span)
                continue
        groups.append([span])
    return groups


def _lines(text: str, a: int, b: int) -> list[str]:
    """Display lines of text[a:b] (line breaks removed); a last line without a break is marked."""
    chunk = text[a:b]
    if not chunk:
        return []
    out = [line[:-1] if line.endswith("\r") else line for line in chunk.split("\n")]
    if chunk.endswith("\n"):
        out.pop()
    else:
        out[-1] += "\n\\ No newline at end of file"
    return out


@dataclass
class Rendered:
    text: str
    truncated: int = 0  # lines left out


def _capped(lines: list[str], limit: int, what: str) -> Rendered:
    if len(lines) <= limit:
        return Rendered("\n".join(lines))
    left = len(lines) - limit
    return Rendered("\n".join(lines[:limit]) + f"\n[... {what} truncated: {left} more lines not shown ...]", left)


def unified_diff(old: str, new: str, spans: list[Span], old_label: str, new_label: str,
                 context: int = DIFF_CONTEXT, limit: int = MAX_DIFF_LINES) -> Rendered:
    out = [f"--- {old_label}", f"+++ {new_label}"]
    for group in _groups(spans, context, "old"):
        first, last = group[0], group[-1]
        start, lead = _back(old, first.os, context)
        end, trail = _forward(old, last.oe, context)
        body: list[str] = [" " + line for line in _lines(old, start, first.os)]
        old_n = new_n = lead + trail
        for i, span in enumerate(group):
            if i:
                between = _lines(old, group[i - 1].oe, span.os)
                body += [" " + line for line in between]
                old_n += len(between)
                new_n += len(between)
            body += ["-" + line for line in _lines(old, span.os, span.oe)]
            body += ["+" + line for line in _lines(new, span.ns, span.ne)]
            old_n += span.old_count
            new_n += span.new_count
        body += [" " + line for line in _lines(old, last.oe, end)]
        o_start = first.old_line - lead + (1 if old_n else 0)
        n_start = first.new_line - lead + (1 if new_n else 0)
        out.append(f"@@ -{o_start},{old_n} +{n_start},{new_n} @@")
        out += body
    return _capped(out, limit, "diff")


def snippet(new: str, spans: list[Span], context: int = SNIPPET_CONTEXT, limit: int = MAX_SNIPPET_LINES) -> Rendered:
    """The changed regions of the new text with `context` lines around them; gaps shown as `...`."""
    if not spans:
        return _capped(_plain_lines(new, 0, len(new)), limit, "content")
    out: list[str] = []
    end = 0
    for group in _groups(spans, context, "new"):
        start, _ = _back(new, group[0].ns, context)
        if start > 0:
            out.append("...")
        end, _ = _forward(new, group[-1].ne, context)
        out += _plain_lines(new, start, end)
    if end < len(new):
        out.append("...")
    return _capped(out, limit, "snippet")


def _plain_lines(text: str, a: int, b: int) -> list[str]:
    return [line.replace("\n\\ No newline at end of file", "") for line in _lines(text, a, b)]


# ---------------------------------------------------------------------------------------------------------
# lines like `old_string`, for a failed match


# Work the "did you mean" report may do on one file: alignment votes counted, and characters compared by difflib
# (each candidate line's length times the probe's, summed). Past either, it reports from what it has seen.
MAX_VOTES = 2_000_000
MAX_FUZZY_WORK = 50_000_000
CHECK_EVERY = 8192  # lines between cancellation checks


def similar_lines(text: str, needle: str, shown_max: int = 3, fuzzy_max_lines: int = 200_000,
                  check: Callable[[], None] | None = None) -> str:
    """A short report of where the file has text like `needle` (whitespace-insensitive line matches first,
    else close matches of its most distinctive line), with 1-based line numbers; '' if nothing is close.

    Bounded whatever the file and needle (see MAX_VOTES, MAX_FUZZY_WORK), never holds all the lines of the
    file at once, and calls `check` (which may raise to cancel) every few thousand lines."""
    wanted = [line.strip() for line in to_lf(needle).strip("\n").split("\n")]
    keys: dict[str, list[int]] = {}
    for k, line in enumerate(wanted):
        if line:
            keys.setdefault(line, []).append(k)
    if not keys:
        return ""
    count = text.count("\n") + 1  # lines, as text.split("\n") would make them
    votes = _votes(text, keys, check)
    width = len(wanted)
    if votes:
        best = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))
        picked: list[int] = []
        for start, _ in best:
            if all(abs(start - p) >= width for p in picked):
                picked.append(start)
            if len(picked) == shown_max:
                break
        total = sum(len(v) for v in keys.values())
        ranges = [(max(start, 0), min(start + width, count)) for start in picked]
        shown = _lines_in(text, ranges)
        parts = []
        for start, (lo, hi) in zip(picked, ranges):
            note = (" (the same lines, differing only in whitespace or indentation)"
                    if votes[start] == total else f" ({votes[start]} of {total} lines match ignoring whitespace)")
            parts.append(f"Lines {lo + 1}-{hi}{note}:\n" + _numbered(shown, lo, hi))
        return "The most similar text in the file:\n" + "\n".join(parts)
    if count > fuzzy_max_lines:
        return ""
    probe = max(keys, key=len)
    scored = _fuzzy(text, probe, check)
    if not scored:
        return ""
    scored.sort(key=lambda t: (-t[0], t[1]))
    top = [i for _, i in scored[:shown_max]]
    shown = _lines_in(text, [(i, i + 1) for i in top])
    parts = [_numbered(shown, i, i + 1) for i in top]
    return f"No line matches exactly; the lines most similar to {_short(probe)!r} are:\n" + "\n".join(parts)


def _votes(text: str, keys: dict[str, list[int]], check: Callable[[], None] | None) -> dict[int, int]:
    """For each alignment of the needle's lines with the file's (needle line k at file line i votes for
    i - k), how many lines agree ignoring whitespace."""
    votes: dict[int, int] = {}
    left = MAX_VOTES
    for i, line in enumerate(_lines_lazily(text)):
        if check is not None and not i % CHECK_EVERY:
            check()
        ks = keys.get(line.strip())
        if ks:
            left -= len(ks)
            if left < 0:
                break
            for k in ks:
                votes[i - k] = votes.get(i - k, 0) + 1
    return votes


def _fuzzy(text: str, probe: str, check: Callable[[], None] | None) -> list[tuple[float, int]]:
    """(similarity, line index) of the lines close to `probe` (difflib ratio of at least 0.6)."""
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(probe)
    scored: list[tuple[float, int]] = []
    left = MAX_FUZZY_WORK
    for i, line in enumerate(_lines_lazily(text)):
        if check is not None and not i % CHECK_EVERY:
            check()
        cand = line.strip()
        if not cand:
            continue
        matcher.set_seq1(cand)
        if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
            left -= len(cand) * len(probe)
            if left < 0:
                break
            ratio = matcher.ratio()
            if ratio >= 0.6:
                scored.append((ratio, i))
    return scored


def _lines_lazily(text: str, block: int = 1 << 20) -> Iterator[str]:
    """The lines of `text.split("\\n")`, split a block of about `block` characters at a time."""
    start = 0
    while len(text) - start > block:
        cut = text.rfind("\n", start, start + block)
        if cut < 0:
            cut = text.find("\n", start + block)
            if cut < 0:
                break
        yield from text[start:cut].split("\n")
        start = cut + 1
    yield from text[start:].split("\n")


def _lines_in(text: str, ranges: list[tuple[int, int]]) -> dict[int, str]:
    """The lines of `text` with an index in one of the half-open `ranges`."""
    needed = {n for lo, hi in ranges for n in range(lo, hi)}
    last = max(needed, default=-1)
    found: dict[int, str] = {}
    for n, line in enumerate(_lines_lazily(text)):
        if n > last:
            break
        if n in needed:
            found[n] = line
    return found


def _numbered(lines: dict[int, str], lo: int, hi: int) -> str:
    return "\n".join(f"{n + 1:>6}| {_short(lines[n].rstrip(chr(13)), 200)}" for n in range(lo, hi))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------------------
# the edit itself: plan (read + compute, under the lock), confirm, apply, report


@dataclass
class Plan:
    loc: Location
    path: str  # shown absolute path
    old: str  # decoded old text ('' for a new file)
    new: str
    data: bytes  # encoded new content
    created: bool
    expect: object = None  # os.stat_result of the file as read (refuse the write if it changed since)
    must_not_exist: bool = False
    spans: list[Span] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    diff: Rendered | None = None

    def render(self) -> None:
        label_old = "/dev/null" if self.created else f"{self.path}\t(original)"
        self.diff = unified_diff(self.old, self.new, self.spans, label_old, f"{self.path}\t(new)")


# The edit limit of the tool whose plan runs in this thread (set around `EditTool.plan`).
_EDIT_LIMIT: ContextVar[int] = ContextVar("coretools_edit_limit", default=MAX_EDIT_BYTES)


def too_big(path: str, size: int, what: str, how: str) -> ToolError:
    """The refusal of an edit whose result would be `size` bytes, over the limit in force."""
    limit = _EDIT_LIMIT.get()
    return ToolError(
        f"Cannot edit {path}: {what} would make the file {size:,} bytes{_in_mib(size)}, more than this server's "
        f"limit of {limit:,} bytes{_in_mib(limit)} for one edit (server option --max-edit-bytes). Nothing was "
        f"changed. {how}",
        "file_too_large",
    )


def _in_mib(size: int) -> str:
    return f" ({size / MIB:.1f} MiB)" if size >= MIB else ""


def edit_limit() -> int:
    return _EDIT_LIMIT.get()


@asynccontextmanager
async def edit_lock(ws: Workspace, loc: Location) -> AsyncIterator[None]:
    """Hold the process-wide lock of the file `loc` names for the whole read-confirm-write sequence."""
    lock = await anyio.to_thread.run_sync(lambda: ws.lock_edit(loc, cancelled=anyio.from_thread.check_cancelled))
    try:
        yield
    finally:
        lock.release()


async def confirm(ctx: ToolContext, plan: Plan, tool: str) -> None:
    """With `--confirm edits`, ask the user; raise a ToolError unless they accept."""
    if not confirm_enabled(ctx):
        return
    if ctx.elicit is None:
        raise ToolError(
            f"Edit not applied: this server requires the user to confirm every edit (--confirm edits), but the "
            f"client cannot ask the user (it does not support MCP elicitation). Nothing was written to {plan.path}. "
            "Tell the user; the operator can use a client that supports elicitation, or restart the server "
            "without --confirm edits to rely on the host's own tool approval.",
            "cancelled_by_user",
        )
    assert plan.diff is not None
    diff = unified_diff(plan.old, plan.new, plan.spans, "original", "proposed", limit=MAX_CONFIRM_DIFF_LINES).text
    verb = "Create" if plan.created else "Apply this change to"
    message = f"{tool}: {verb} {plan.path}?\n\n{diff}"
    try:
        answer = await ctx.elicit(message, {"type": "object", "properties": {}})
    except Exception as exc:  # noqa: BLE001 - a client that fails to answer has not said yes
        raise ToolError(
            f"Edit not applied: asking the user to confirm the edit failed ({type(exc).__name__}: {exc}). Nothing "
            f"was written to {plan.path}.",
            "cancelled_by_user",
        ) from None
    if answer.action == "accept":
        return
    how = "declined" if answer.action == "decline" else "dismissed"
    raise ToolError(
        f"Edit cancelled by the user: they {how} the proposed change to {plan.path}, so nothing was written. Do "
        "not retry the same edit; ask the user how they would like to proceed.",
        "cancelled_by_user",
    )


class EditTool(Tool):
    """What write_file and replace share: annotations, the --confirm option, and the locked
    plan -> confirm -> write sequence. Subclasses implement `plan(ws, loc, args)` (runs in a worker thread
    under the file's lock and returns a Plan, or None when there is nothing to write)."""

    read_only = False
    destructive = True

    def __init__(self, config) -> None:
        super().__init__(config)
        if confirm_enabled(config):
            self.description = type(self).description + CONFIRM_NOTE

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_edit_arguments(parser)

    def plan(self, ws: Workspace, loc: Location, args: dict) -> Plan | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bounded_plan(self, ws: Workspace, loc: Location, args: dict) -> Plan | None:
        """`plan` under this server's edit limit; a plan whose content is over it is refused."""
        token = _EDIT_LIMIT.set(max_edit_bytes(self.config))
        try:
            plan = self.plan(ws, loc, args)
            if plan is not None and len(plan.data) > _EDIT_LIMIT.get():
                raise too_big(plan.path, len(plan.data), "the new content",
                              "Write a smaller file, or generate a large one with run_shell_command.")
            return plan
        finally:
            _EDIT_LIMIT.reset(token)

    async def edit(self, ctx: ToolContext, loc: Location, args: dict) -> tuple[Plan | None, WriteOutcome | None]:
        ws = ctx.workspace
        async with edit_lock(ws, loc):
            plan = await anyio.to_thread.run_sync(self._bounded_plan, ws, loc, args)
            if plan is None:
                return None, None
            await confirm(ctx, plan, self.name)
            outcome = await anyio.to_thread.run_sync(apply, ws, plan)
        plan.path = outcome.path
        return plan, outcome


def apply(ws: Workspace, plan: Plan) -> WriteOutcome:
    return ws.write_atomic(
        plan.loc, plan.data, create_parents=True, must_not_exist=plan.must_not_exist,
        expect=plan.expect,  # type: ignore[arg-type]
    )


def result(plan: Plan, headline: str, args: dict, user_field: str, user_value: str) -> ToolResult:
    """Confirmation, notes, the user's own version if they modified the proposal (`modified_by_user`), the
    changed region of the new file, and the unified diff as a second block."""
    assert plan.diff is not None
    parts = [headline, *plan.notes]
    if args.get("modified_by_user"):
        parts.append(f"User modified the {user_field} to be: {echo(user_value)}")
    shot = snippet(plan.new, [] if plan.created else plan.spans)
    label = "Here is the new file:" if plan.created else "Here is the updated code:"
    text = " ".join(p for p in parts if p) + f"\n{label}\n{shot.text}"
    return ToolResult([text_block(text), text_block(plan.diff.text)])


def echo(value: str) -> str:
    """A user-supplied value repeated back in a message, within reason."""
    if len(value) <= MAX_ECHO_CHARS:
        return value
    return value[:MAX_ECHO_CHARS] + f"[... {len(value) - MAX_ECHO_CHARS} more characters, see the code below ...]"


def style_notes(codec: Codec, breaks: Newlines) -> list[str]:
    """Say what was kept when it is not plain UTF-8 with LF endings (so nobody is surprised either way)."""
    kept = []
    if breaks.mixed:
        kept.append("mixed line endings")
    elif breaks.dominant == "\r\n":
        kept.append("CRLF line endings")
    if not codec.plain:
        kept.append(f"{codec.label} encoding")
    return [f"Kept the file's {' and '.join(kept)}."] if kept else []


def read_existing(ws: Workspace, loc: Location) -> tuple[object, bytes] | None:
    """(stat, bytes) of the file, or None if it does not exist. Directories and special files are refused."""
    limit = _EDIT_LIMIT.get()
    try:
        with ws.open_file(loc) as (node, handle):
            if node.st.st_size > limit:
                size = node.st.st_size
                raise ToolError(
                    f"File is too large to edit ({size:,} bytes{_in_mib(size)}; the limit is {limit:,} "
                    f"bytes{_in_mib(limit)}, server option --max-edit-bytes): {node.path}. Edit it with "
                    "run_shell_command (e.g. sed) instead.",
                    "file_too_large",
                )
            return node.st, handle.read()  # type: ignore[attr-defined]
    except ToolError as exc:
        if exc.kind == "file_not_found":
            return None
        raise


__all__ = [
    "Codec", "EditTool", "NotText", "Plan", "Span", "add_confirm_argument", "add_edit_arguments", "align", "apply",
    "confirm", "decode", "Newlines", "echo", "edit_limit", "edit_lock", "encode", "max_edit_bytes", "newlines",
    "placeholder_line", "read_existing", "result", "similar_lines", "snippet", "style_notes", "to_lf", "too_big",
    "unified_diff", "whole_file_spans", "with_newline",
]
