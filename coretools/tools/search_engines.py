"""The two engines behind search_file_content: ripgrep (the normal one) and a pure-Python fallback.

Both search the same files (the workspace walk's: ignore rules, protected paths hidden, symlinks skipped,
binary files skipped), case-insensitively, line by line, and report into one `Collector`, so the tool
formats their results identically and the tests can compare them.

Python fallback vs ripgrep's regex dialect (documented differences): patterns are translated for the
common Rust-only spellings (`(?<name>...)`, `\\z`, `\\x{...}`, `[[:alpha:]]` classes); `\\p{...}` classes,
look-around and backreferences are refused (ripgrep has no look-around or backreferences either). Python's
`re` backtracks, so the fallback refuses nested repetition such as `(a+)+` that could run for exponential
time; ripgrep's engine is linear and accepts it. Case-insensitive matching uses Python's case folding,
which differs from Rust's for a few characters. Files are decoded as UTF-8 (UTF-16 with a byte-order mark
is transcoded, as ripgrep does); invalid bytes can match `.` in Python but not in ripgrep.
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from coretools.errors import ToolError
from coretools.server import ripgrep
from coretools.server.ignore import IgnoreOptions
from coretools.server.workspace import Location, WalkReport, Workspace

MAX_LINE_CHARS = 2000
TRUNCATED_MARK = "... [truncated]"
SEARCH_OPTIONS = IgnoreOptions(git=True, gemini=True, defaults=True)


# -- what is searched, and what was found ------------------------------------------------------------------


@dataclass
class Target:
    """One opened place to search: a directory (walked) or a single file."""

    index: int  # order among the targets (multi-root searches)
    root: int
    rel: str
    path: str  # absolute, as shown
    fd: int  # the gateway's descriptor for it (kept open while searching)
    is_dir: bool
    display_prefix: str  # prepended to paths relative to the target when showing them


@dataclass
class Request:
    pattern: str
    include: str | None
    cap: int
    timeout: float
    allow_protected: bool


@dataclass
class Job:
    """One search as an engine receives it: where, what, where to put results, and how to report."""

    ws: Workspace
    targets: list[Target]
    req: Request
    out: Collector
    check: Callable[[], None]  # raises when the call was cancelled
    progress: Callable[[Collector], None]


class Collector:
    """Counts every match, keeps the first `cap` matching lines in (target, path, line) order."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total_matches = 0
        self.total_files = 0
        self.kept: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self._order: list[tuple[int, str]] = []  # the keys of `kept`, sorted
        self.stored = 0
        self.stopped: str | None = None
        self.unverified_files = 0  # files rg reported that the gateway's copy did not (wholly) confirm

    def could_keep(self, key: tuple[int, str]) -> bool:
        return self.stored < self.cap or key < self._order[-1]

    def commit(self, key: tuple[int, str], count: int, lines: list[tuple[int, str]]) -> None:
        if count <= 0:
            return
        self.total_matches += count
        self.total_files += 1
        if not lines or not self.could_keep(key):
            return
        self.kept[key] = sorted(lines)
        bisect.insort(self._order, key)
        self.stored += len(lines)
        while self.stored > self.cap:
            last = self._order[-1]
            self.kept[last].pop()
            self.stored -= 1
            if not self.kept[last]:
                del self.kept[last]
                self._order.pop()

    def groups(self) -> list[tuple[str, list[tuple[int, str]]]]:
        return [(path, self.kept[(index, path)]) for index, path in self._order]


def clip(text: str) -> str:
    text = text.rstrip("\r\n").rstrip()
    if len(text) > MAX_LINE_CHARS:
        return text[:MAX_LINE_CHARS] + TRUNCATED_MARK
    return text


# -- ripgrep ----------------------------------------------------------------------------------------------
#
# rg walks the tree by name, so a directory swapped for a symlink between the gateway's check of the search
# directory and rg's descent could make rg read a file outside the roots. Nothing rg read is shown: for each
# file it reports, the file is opened again through the workspace gateway (a contained open of its
# root-relative path), and each reported line is read from that descriptor at the byte offset rg gives and
# compared with the line rg reported. Only lines that verify are counted and shown, and the text shown is the
# gateway's. A file that cannot be opened through the gateway, or a line that differs, is left out and
# counted as unverified.

_BEGIN = b'{"type":"begin"'
_MATCH = b'{"type":"match"'
_END = b'{"type":"end"'
_JSON_STR = rb'"((?:[^"\\]|\\.)*)"'
_LINE_NUMBER = re.compile(rb'"line_number":(\d+)')
_OFFSET = re.compile(rb'"absolute_offset":(\d+)')
_LINES_TEXT = re.compile(rb'"lines":\{"text":"')
_MATCH_FIELDS = re.compile(
    rb'"lines":\{"(text|bytes)":"([^"\\]*(?:\\.[^"\\]*)*)"\},"line_number":(\d+),"absolute_offset":(\d+),'
)
_BEGIN_TEXT = re.compile(rb'^\{"type":"begin","data":\{"path":\{"text":' + _JSON_STR + rb'\}\}\}$')
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _json_text(obj: dict) -> str:
    if "text" in obj:
        return obj["text"]
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", "surrogateescape")


def _begin_path(data: bytes) -> str:
    m = _BEGIN_TEXT.match(data)
    if m and b"\\" not in m.group(1):
        return m.group(1).decode("utf-8", "surrogateescape")
    return _json_text(json.loads(data)["data"]["path"])


def _unescape(raw: bytes) -> bytes | None:
    """The bytes of a JSON string body as rg wrote it (rg's `text` is valid UTF-8)."""
    if b"\\" not in raw:
        return raw
    if raw.endswith(b"\\n") and b"\\" not in raw[:-2]:
        return raw[:-2] + b"\n"
    try:
        return json.loads(b'"' + raw + b'"').encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return None


@dataclass
class RgMatch:
    """What rg claims about one matching line: where it is and what it says. `cut`: `data` is only the
    start of a line too long to keep whole."""

    number: int
    offset: int
    data: bytes
    cut: bool = False


def parse_match(line: bytes | ripgrep.RgLine) -> RgMatch | None:
    """One `match` record of rg's JSON (bytes, or an `RgLine` cut for length), without a full JSON parse in
    the common case."""
    if not isinstance(line, bytes):
        return _salvage_match(line)
    m = _MATCH_FIELDS.search(line)
    if m is not None:
        raw = m.group(2)
        data = _unescape(raw) if m.group(1) == b"text" else base64.b64decode(raw)
        return None if data is None else RgMatch(int(m.group(3)), int(m.group(4)), data)
    try:
        obj = json.loads(line)["data"]
        text = obj["lines"]
        data = text["text"].encode("utf-8") if "text" in text else base64.b64decode(text.get("bytes", ""))
        return RgMatch(int(obj["line_number"]), int(obj["absolute_offset"]), data)
    except (ValueError, KeyError, TypeError, UnicodeEncodeError):
        return None


def _salvage_match(line: ripgrep.RgLine) -> RgMatch | None:
    """A match record too long to keep whole: its line number and offset (near the end) and the start of
    its text."""
    number = _LINE_NUMBER.findall(line.tail)
    offset = _OFFSET.findall(line.tail)
    start = _LINES_TEXT.search(line.head)
    if not number or not offset or not start:
        return None
    raw = line.head[start.end() : start.end() + 4 * MAX_LINE_CHARS].decode("utf-8", "replace")
    raw = re.sub(r"\\(u[0-9a-fA-F]{0,3})?$", "", raw)
    try:
        text = json.loads(f'"{raw}"')
    except ValueError:
        return None
    # the chunk may end inside a character (decoded as U+FFFD): compare only what is surely whole
    text = text[:MAX_LINE_CHARS].rstrip("\ufffd")
    return RgMatch(int(number[-1]), int(offset[-1]), text.encode("utf-8", "surrogateescape"), cut=True)


class GatewayCopy:
    """A file rg reported, as the workspace gateway reads it: rg's byte offsets are into the stream it
    searched, which is the file without a UTF-8 byte-order mark, or transcoded to UTF-8 when the file has a
    UTF-16 one; this reproduces that stream. Reads go through a small block cache (matches come in order)."""

    BLOCK = 1 << 16
    MAX_TRANSCODED = 64 << 20

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.block_start = 0
        self.block = os.pread(fd, self.BLOCK, 0)  # most files: the only read
        head = self.block[:3]
        self.shift = 3 if head == UTF8_BOM else 0
        self.whole = False
        if head[:2] in UTF16_BOMS:
            size = os.fstat(self.fd).st_size
            data = os.pread(self.fd, size, 0) if size <= self.MAX_TRANSCODED else b""
            self.block = data.decode("utf-16", "replace").encode("utf-8") if data else b""
            self.whole = True

    def read(self, offset: int, size: int) -> bytes:
        if self.whole:
            return self.block[offset : offset + size]
        offset += self.shift
        end = offset + size
        if not (self.block_start <= offset and end <= self.block_start + len(self.block)):
            self.block = os.pread(self.fd, max(size, self.BLOCK), offset)
            self.block_start = offset
        return self.block[offset - self.block_start : end - self.block_start]

    def confirm(self, claim: RgMatch) -> str | None:
        """The line's text as read through the gateway if it is what rg reported, else None."""
        data = self.read(claim.offset, len(claim.data))
        if data != claim.data:
            return None
        text = data.decode("utf-8", "surrogateescape")
        return text[:MAX_LINE_CHARS] + TRUNCATED_MARK if claim.cut else clip(text)


class _Reported:
    """The matches rg reports for one file, kept only as far as the gateway's copy confirms them."""

    def __init__(self, key: tuple[int, str], fd: int) -> None:
        self.key = key
        self.fd = fd
        self.copy = GatewayCopy(fd)
        self.count = 0
        self.rejected = 0
        self.lines: list[tuple[int, str]] = []

    def match(self, line: bytes | ripgrep.RgLine, want_text: bool) -> None:
        claim = parse_match(line)
        try:
            text = self.copy.confirm(claim) if claim is not None else None
        except OSError:
            text = None
        if text is None:
            self.rejected += 1
            return
        self.count += 1
        if want_text:
            self.lines.append((claim.number, text))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def include_flags(include: str) -> tuple[list[str], bool]:
    """rg flags for an `include` glob, and whether they can override ignore rules. A glob without a slash
    matches file names, which an rg file type does too, and types (unlike `--glob`, whose matches beat
    every ignore rule) only narrow what the ignore rules let through."""
    if "/" in include or ":" in include or include.startswith("!"):
        return ["--glob", include], True
    return ["--type-add", f"coretoolsinclude:{include}", "--type", "coretoolsinclude"], False


class RipgrepEngine:
    name = "ripgrep"

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def search(self, job: Job) -> bool:
        """Search every target; False (before anything is collected) when rg cannot express the rules."""
        ws, targets, req = job.ws, job.targets, job.req
        plans = []
        for target in targets:
            if target.is_dir:
                rules = ripgrep.rg_rules(
                    lambda rel, t=target: ws.ignore_source(t.root, rel), target.rel, SEARCH_OPTIONS,
                    req.allow_protected,
                )
                if rules is None:
                    return False
            else:
                rules = ripgrep.RgRules(["--no-config", "--no-messages"])
            plans.append((target, rules))
        for target, rules in plans:
            if target.is_dir:
                with ws.no_follow(target.root) as view:
                    self._one(job, target, rules, view)
            else:
                self._one(job, target, rules, None)
            if job.out.stopped:
                break
        return True

    def _open_reported(self, ws: Workspace, target: Target, rel: str | None, view) -> _Reported | None:
        """Open a file rg reported (`rel` below the target; None for a single-file target) through the
        gateway, following no symlink; None if it cannot be (gone, swapped for a link, not a regular file,
        protected)."""
        if rel is None:
            try:
                with ws.open_file(Location(target.root, target.rel, target.path)) as (_, handle):
                    return _Reported((target.index, target.path), os.dup(handle.fileno()))
            except ToolError:
                return None
        fd = view.open_regular(f"{target.rel}/{rel}" if target.rel else rel)
        return None if fd is None else _Reported((target.index, target.display_prefix + rel), fd)

    def _one(self, job: Job, target: Target, rules: ripgrep.RgRules, view) -> None:
        ws, req, out = job.ws, job.req, job.out
        argv = [self.binary, "--json", "--ignore-case", *rules.flags, "--regexp", req.pattern]
        if target.is_dir:
            options = rules.recheck_options(SEARCH_OPTIONS)
            if req.include:
                flags, overrides = include_flags(req.include)
                argv += flags
                options = SEARCH_OPTIONS if overrides else options
            argv.append(".")
            cwd = ripgrep.dir_cwd(target.fd, target.path)
            recheck = ripgrep.Recheck.of(ws, target.root, target.rel, options, req.allow_protected)
        else:
            argv.append(f"/proc/{os.getpid()}/fd/{target.fd}")
            cwd = "/"
            recheck = None
        run = ripgrep.RgRun(argv, cwd, rules.ignore_files, timeout=req.timeout, check=job.check)
        current: _Reported | None = None
        last_progress = time.monotonic()
        try:
            for batch in run.batches():
                for line in batch:  # bytes, or an RgLine for a record too long to keep whole
                    head = line if type(line) is bytes else line.head
                    if head.startswith(_MATCH):
                        if current is not None:
                            current.match(line, len(current.lines) < req.cap and out.could_keep(current.key))
                    elif head.startswith(_BEGIN):
                        if current is not None:  # pragma: no cover - rg always ends a file before the next
                            current.close()
                        current = None
                        rel = None
                        if recheck is not None:
                            rel = _begin_path(head)
                            rel = rel[2:] if rel.startswith("./") else rel
                            if not recheck.visible(rel):
                                continue
                        current = self._open_reported(ws, target, rel, view)
                        if current is None:
                            out.unverified_files += 1
                    elif head.startswith(_END):
                        if current is not None:
                            current.close()
                            if b'"binary_offset":null' in head:
                                out.commit(current.key, current.count, current.lines)
                                if current.rejected:
                                    out.unverified_files += 1
                        current = None
                now = time.monotonic()
                if now - last_progress > 0.25:
                    last_progress = now
                    job.progress(out)
        finally:
            if current is not None:
                current.close()
        if run.stopped:
            out.stopped = run.stopped
            return
        if run.returncode not in (0, 1):
            message = run.stderr.decode("utf-8", "replace").strip()
            if "regex" in message:
                raise ToolError(
                    f"Invalid regular expression pattern provided: {req.pattern}. Error: {_rg_error(message)} "
                    "Fix the pattern (ripgrep / Rust regex syntax; escape literal characters such as "
                    "( ) [ ] { } . * + ? | \\ with a backslash).",
                    "invalid_tool_params",
                )
            if message and run.returncode != 2:
                raise ToolError(f"Error during search: ripgrep failed: {message[:2000]}", "grep_execution_error")
            # exit code 2 otherwise means some files could not be read; the rest stands


def _rg_error(message: str) -> str:
    lines = [ln.rstrip() for ln in message.splitlines() if ln.strip()]
    detail = next((ln.split("error:", 1)[1].strip() for ln in lines if ln.startswith("error:")), "")
    return (detail or " ".join(lines))[:500] + ("." if detail and not detail.endswith(".") else "")


# -- pure Python ------------------------------------------------------------------------------------------

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "ascii": "\\x00-\\x7F",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "word": "A-Za-z0-9_",
    "xdigit": "0-9A-Fa-f",
}


def python_regex(pattern: str) -> re.Pattern[str]:
    """Compile a ripgrep (Rust regex) pattern for Python's `re`, or raise a ToolError naming the problem."""
    problem = _unsupported(pattern)
    if problem:
        raise ToolError(
            f"Invalid regular expression pattern provided: {pattern}. Error: {problem}",
            "invalid_tool_params",
        )
    translated = pattern.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!")
    translated = re.sub(r"(?<!\\)\\z", r"\\Z", translated)
    translated = re.sub(r"\\x\{([0-9a-fA-F]{1,6})\}", lambda m: f"\\U{int(m.group(1), 16):08x}", translated)
    translated = re.sub(
        r"\[:(\^?)(\w+):\]",
        lambda m: ("^" if m.group(1) else "") + _POSIX_CLASSES.get(m.group(2), m.group(0)),
        translated,
    )
    try:
        return re.compile(translated, re.IGNORECASE | re.MULTILINE)
    except re.error as exc:
        raise ToolError(
            f"Invalid regular expression pattern provided: {pattern}. Error: {exc}. Fix the pattern (escape "
            "literal characters such as ( ) [ ] { } . * + ? | \\ with a backslash).",
            "invalid_tool_params",
        ) from None


def _unsupported(pattern: str) -> str | None:
    if re.search(r"\(\?<?[=!]", pattern):
        return "look-around, including look-ahead and look-behind, is not supported."
    if re.search(r"(?<!\\)\\[1-9]", pattern):
        return "backreferences are not supported."
    if re.search(r"(?<!\\)\\[pP]", pattern):
        return r"Unicode classes (\p{...}) are not supported by the fallback search engine."
    if _nested_repetition(pattern):
        return (
            "nested repetition such as (a+)+ can take exponential time in the fallback search engine "
            "(ripgrep is not available); simplify the pattern."
        )
    return None


def _nested_repetition(pattern: str) -> bool:
    """A group that contains an unbounded repetition and is itself repeated without bound."""
    stack: list[bool] = []
    inner = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            end = pattern.find("]", i + 2)
            i = end + 1 if end > 0 else len(pattern)
            continue
        if ch == "(":
            stack.append(inner)
            inner = False
        elif ch == ")" and stack:
            repeated = _unbounded_at(pattern, i + 1)
            if inner and repeated:
                return True
            inner = stack.pop() or inner or repeated
        elif _unbounded_at(pattern, i):
            inner = True
        i += 1
    return False


def _unbounded_at(pattern: str, i: int) -> bool:
    if i >= len(pattern):
        return False
    if pattern[i] in "*+":
        return True
    return bool(re.match(r"\{\d*,\}", pattern[i:]))


_ANCHORS = re.compile(r"\\[AZ]")


def decode_text(data: bytes) -> str:
    if data.startswith(b"\xff\xfe") or data.startswith(b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", "surrogateescape")


class PythonEngine:
    name = "python"

    def search(self, job: Job) -> bool:
        ws, targets, req, out, check, progress = job.ws, job.targets, job.req, job.out, job.check, job.progress
        rx = python_regex(req.pattern)
        include = ripgrep.glob_regex(req.include) if req.include else None
        deadline = time.monotonic() + req.timeout
        last = time.monotonic()
        for target in targets:
            if target.is_dir:
                loc = Location(target.root, target.rel, target.path)
                report = WalkReport()
                files = (
                    (e.rel, e.rel[len(target.rel) + 1 :] if target.rel else e.rel)
                    for e in ws.walk(loc, SEARCH_OPTIONS, report=report, cancelled=check)
                )
            else:
                files = iter([(target.rel, None)])
            for rel, shown_rel in files:
                if shown_rel is not None and include is not None and not include.fullmatch(shown_rel):
                    continue
                if time.monotonic() > deadline:
                    out.stopped = f"the search was stopped after {req.timeout:g} seconds"
                    return True
                self._file(ws, target, rel, shown_rel, rx, req, out)
                now = time.monotonic()
                if now - last > 0.25:
                    last = now
                    check()
                    progress(out)
        return True

    def _file(self, ws: Workspace, target: Target, rel: str, shown_rel, rx, req: Request, out: Collector) -> None:
        loc = Location(target.root, rel, ws.shown_path(target.root, rel))
        try:
            _, data = ws.read_bytes(loc)
        except ToolError:
            return
        if b"\0" in data and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return
        text = decode_text(data)
        if rx.search(text) is None and not _ANCHORS.search(rx.pattern):
            return  # a match in a line is a match in the text (MULTILINE), unless \\A or \\Z anchor it
        key = (target.index, target.display_prefix + shown_rel if shown_rel is not None else target.path)
        count = 0
        lines: list[tuple[int, str]] = []
        rows = text.split("\n")
        if rows and rows[-1] == "":
            rows.pop()
        for number, line in enumerate(rows, 1):
            if rx.search(line) is not None:
                count += 1
                if len(lines) < req.cap:
                    lines.append((number, clip(line)))
        out.commit(key, count, lines)
