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
from coretools.server.ignore import IgnoreOptions, IgnoreRules
from coretools.server.workspace import Location, WalkReport, Workspace, protected_reason

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


class Visibility:
    """The walk's verdict for a file found below a target: protected paths and ignored entries (each
    component below the target judged by the same `IgnoreRules`) are hidden."""

    def __init__(self, ws: Workspace, target: Target, allow_protected: bool) -> None:
        self.rules: IgnoreRules = ws.ignore_rules(target.root, SEARCH_OPTIONS)
        self.base = target.rel
        self.allow_protected = allow_protected
        self._dirs: dict[str, bool] = {"": True}

    def _full(self, rel: str) -> str:
        return f"{self.base}/{rel}" if self.base else rel

    def _hidden(self, rel: str, is_dir: bool) -> bool:
        name = rel.rpartition("/")[2]
        if not self.allow_protected and protected_reason(name):
            return True
        return self.rules.decide(self._full(rel), is_dir)

    def _dir_visible(self, rel: str) -> bool:
        hit = self._dirs.get(rel)
        if hit is None:
            hit = self._dir_visible(rel.rpartition("/")[0]) and not self._hidden(rel, True)
            self._dirs[rel] = hit
        return hit

    def visible(self, rel: str) -> bool:
        """Judged like the walk: each component below the target by its own name and the rules (the
        target itself was checked when it was opened)."""
        return self._dir_visible(rel.rpartition("/")[0]) and not self._hidden(rel, False)


# -- ripgrep ----------------------------------------------------------------------------------------------

_RG_TYPE = re.compile(rb'^\{"type":"(\w+)"')
_LINE_NUMBER = re.compile(rb'"line_number":(\d+)')
_LINES_TEXT = re.compile(rb'"lines":\{"text":"')


def _json_text(obj: dict) -> str:
    if "text" in obj:
        return obj["text"]
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", "surrogateescape")


_BEGIN_TEXT = re.compile(rb'^\{"type":"begin","data":\{"path":\{"text":"((?:[^"\\\\]|\\\\.)*)"\}\}\}$')


def _begin_path(data: bytes) -> str:
    m = _BEGIN_TEXT.match(data)
    if m and b"\\" not in m.group(1):
        return m.group(1).decode("utf-8", "surrogateescape")
    return _json_text(json.loads(data)["data"]["path"])


def _salvage_match(line: ripgrep.RgLine) -> tuple[int, str] | None:
    """A match record too long to keep whole: its line number (near the end) and the start of its text."""
    number = _LINE_NUMBER.findall(line.tail)
    start = _LINES_TEXT.search(line.head)
    if not number or not start:
        return None
    raw = line.head[start.end() : start.end() + 4 * MAX_LINE_CHARS].decode("utf-8", "replace")
    raw = re.sub(r"\\(u[0-9a-fA-F]{0,3})?$", "", raw)
    try:
        text = json.loads(f'"{raw}"')
    except ValueError:
        text = raw
    return int(number[-1]), text[:MAX_LINE_CHARS] + TRUNCATED_MARK


class RipgrepEngine:
    name = "ripgrep"

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def search(self, job: Job) -> bool:
        ws, targets, req, out, check, progress = job.ws, job.targets, job.req, job.out, job.check, job.progress
        """Search every target; False (before anything is collected) when rg cannot express the rules."""
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
            self._one(ws, target, rules, req, out, check, progress)
            if out.stopped:
                break
        return True

    def _one(self, ws, target: Target, rules, req: Request, out: Collector, check, progress) -> None:
        argv = [self.binary, "--json", "--ignore-case", *rules.flags, "--regexp", req.pattern]
        proc_path = f"/proc/{os.getpid()}/fd/{target.fd}"
        if target.is_dir:
            if req.include:
                argv += ["--glob", req.include]
            argv.append(".")
            cwd = ripgrep.dir_cwd(target.fd, target.path)
            visibility = Visibility(ws, target, req.allow_protected)
        else:
            argv.append(proc_path)
            cwd = "/"
            visibility = None
        run = ripgrep.RgRun(argv, cwd, rules.ignore_files, timeout=req.timeout, check=check)
        key: tuple[int, str] | None = None
        keep = False
        count = 0
        lines: list[tuple[int, str]] = []
        last_progress = time.monotonic()
        for line in run.lines():
            kind = _RG_TYPE.match(line.head)
            kind = kind.group(1) if kind else b""
            if kind == b"match":
                if key is None:
                    continue
                count += 1
                if keep and len(lines) < req.cap and out.could_keep(key):
                    hit = _parse_match(line)
                    if hit is not None:
                        lines.append(hit)
            elif kind == b"begin":
                rel = _begin_path(line.data)
                rel = rel[2:] if rel.startswith("./") else rel
                if visibility is not None and not visibility.visible(rel):
                    key = None
                    continue
                shown = target.display_prefix + rel if visibility is not None else target.path
                key = (target.index, shown)
                keep = True
                count = 0
                lines = []
            elif kind == b"end":
                if key is not None and b'"binary_offset":null' in line.head:
                    out.commit(key, count, lines)
                key = None
                lines = []
                now = time.monotonic()
                if now - last_progress > 0.25:
                    last_progress = now
                    progress(out)
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


def _parse_match(line: ripgrep.RgLine) -> tuple[int, str] | None:
    if line.cut:
        return _salvage_match(line)
    data = json.loads(line.data)["data"]
    return data["line_number"], clip(_json_text(data["lines"]))


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
