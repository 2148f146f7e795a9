"""The two engines behind search_file_content: ripgrep (the normal one) and a pure-Python fallback.

Both search the same files (the workspace walk's: ignore rules unless `no_ignore`, protected paths hidden,
symlinks skipped, binary files skipped), line by line, with the same options (case, literal pattern,
context, excluded lines, limits), and report into one `Collector`, so the tool formats their results
identically and the tests can compare them. Lines are shown through `results.show_line`, and the
matches inside a very long line are located with RE2 (`regex`) for both engines.

When a `.geminiignore` un-ignores (`!pattern`), ripgrep cannot express our precedence of the rules; the
search still runs on ripgrep: the workspace walk (the pattern engine, exact rules) picks the files, and
ripgrep searches them named on its command line, a batch at a time.

rg reports files in no particular order when it runs on several threads (as it does), so the lines of a file
that may be among those shown are kept as rg wrote them, and checked and decoded only for the files still
shown once rg is done (`RipgrepEngine._confirm_deferred`).

rg runs under a memory bound (`ripgrep.RG_DATA_LIMIT`). A pass that runs out of memory is run again on one
thread with memory maps (a line tens of MB long then costs nothing); if that fails too, a pattern too complex
is the error, else the workspace walk names the files (an in-tree `.gitignore` rg cannot compile is applied by
the pattern engine instead) and a batch that still fails is halved down to the one file left out
(`RipgrepEngine._run`). The answer names what was left out (`Collector.skipped`).

The fallback (no working rg binary, or `--search-engine python`) runs the caller's regex on RE2
(`regex.LineRegex`). Files are decoded as UTF-8 (UTF-16 with a byte-order mark is transcoded, as
ripgrep does); an invalid byte is one character that `.` matches, where ripgrep's `.` does not.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from coretools.errors import ErrorKind, ToolError
from coretools.sandbox import (
    Location, NodeMatcher, WalkReport, Workspace, include_flags, parse_include, ripgrep, walk,
)
from coretools.tools.search.regex import LineRegex, decode_text, text_lines
from coretools.tools.search.reported import (
    BEGIN,
    CONTEXT,
    END,
    MATCH,
    Deferral,
    GatewayCopy,
    Reported,
    begin_rel,
    claim_fields,
    confirms,
    many_fields,
    matched_lines,
)
from coretools.tools.search import listing
from coretools.tools.search.results import Collector, FileLines, Job, Request, Target, show_line


# -- ripgrep ----------------------------------------------------------------------------------------------
#
# Nothing rg read is shown on its word: what it reports of each file is checked against the workspace
# gateway's own copy of the file (`reported`).


# a reported file opened through the gateway: its collector key and its descriptor
_Opened = tuple[tuple[int, str], int]


class RipgrepEngine:
    name = "ripgrep"

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def search(self, job: Job) -> bool:
        """Search every target (always True: ripgrep searches whatever the rules)."""
        ws, targets, req = job.ws, job.targets, job.req
        plans: list[tuple[Target, ripgrep.RgRules | None]] = []
        for target in targets:
            if target.is_dir:
                unread: list[str] = []  # the ignore files that were absent, or too large to apply
                rules = ripgrep.rg_rules(
                    functools.partial(_ignore_source, ws, target.root, unread), target.rel, req.ignore,
                    req.allow_protected,
                )  # None: rg cannot express them; the walk picks the files (`_listed`)
                if unread:
                    job.out.skipped += listing.large_ignore_notes(job, target, unread)
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

    def _open_reported(self, ws: Workspace, target: Target, rel: str | None, view) -> _Opened | None:
        """Open a file rg reported (`rel` below the target; None for a single-file target) through the
        gateway, following no symlink: its collector key and descriptor (the caller closes it); None if it
        cannot be (gone, swapped for a link, not a regular file, protected)."""
        if rel is None:
            try:
                with ws.open_file(Location(target.root, target.rel, target.path)) as (_, handle):
                    return (target.index, target.path), os.dup(handle.fileno())
            except ToolError:
                return None
        fd = view.open_regular(f"{target.rel}/{rel}" if target.rel else rel)
        return None if fd is None else ((target.index, target.display_prefix + rel), fd)

    def _one(self, job: Job, target: Target, rules: ripgrep.RgRules | None, view) -> None:
        ws, req = job.ws, job.req
        if rules is None:
            self._listed(job, target, view)
            return
        args = [*_with_messages(rules.flags), *_pattern_flags(req)]
        if target.is_dir:
            options = rules.recheck_options(req.ignore)
            names = rules.recheck_names() if options is not None else None
            if req.include:
                flags, overrides = include_flags(req.include)
                args += flags
                if overrides:
                    options, names = req.ignore, None
            args.append(".")
            cwd = ripgrep.dir_cwd(target.fd, target.path)
            recheck = ripgrep.Recheck.of(ws, target.root, target.rel, options, req.allow_protected, names=names)
            threads = ripgrep.rg_threads(spare=0)
            call = _RgCall(args, cwd, rules.ignore_files, threads, req.timeout)
        else:
            cwd, recheck = "/", None  # one file: rg streams it, read through a memory map
            call = _RgCall(args, cwd, rules.ignore_files, 1, req.timeout, [f"/proc/{os.getpid()}/fd/{target.fd}"])
        self._run(job, target, call, recheck, view)

    def _run(
        self, job: Job, target: Target, call: _RgCall, recheck, view, done: set[str] | None = None,
        careful: bool = False,
    ) -> None:
        """One rg search, in one pass unless rg runs out of memory (`RG_DATA_LIMIT`). With several threads,
        each was holding a file's whole output until the file was done (a file matching on every line,
        say); and a file read into rg's buffer needs a line's length of memory (one line of tens of MB). So
        the search is run once more `careful`ly: on one thread, which writes each record as it is found,
        and with files read through memory maps (`_CAREFUL`), where rg searches a line in place. The files
        whose output an earlier pass gave in full (`done`) are passed over. When a careful pass runs out of
        memory too, `_salvage` finds out what rg cannot take and searches the rest."""
        deadline = time.monotonic() + call.timeout
        done = set() if done is None else done
        started_careful = careful
        while True:
            argv = [
                self.binary, "--json", "--threads", str(1 if careful else call.threads),
                *(_CAREFUL if careful else ()), *(_SORTED if careful or call.threads == 1 else ()), *call.args,
                *(("--", *call.files) if call.files is not None else ()),
            ]  # fmt: skip
            too_long = ripgrep.PathTooLong()
            run = ripgrep.RgRun(
                argv, call.cwd, call.ignore_files, timeout=deadline - time.monotonic(), check=job.check,
                data_limit=ripgrep.RG_DATA_LIMIT, count_in_stderr=too_long,
            )
            self._collect(job, target, run, recheck, view, done)
            if not run.out_of_memory:
                if too_long.first is not None:
                    job.out.skipped.append(listing.too_long_note(target, too_long.first, run.stderr_hits))
                break
            if time.monotonic() >= deadline:
                job.out.stopped = f"the search was stopped after {job.req.timeout:g} seconds"
                return
            if careful:
                if not started_careful:
                    self._probe(job)
                self._salvage(job, target, call, recheck, view, done, deadline)
                return
            careful = True
        _finish(run, job.req, job.out)

    def _probe(self, job: Job) -> None:
        """Raise the error of a pattern too complex for rg's memory bound: rg compiles it before it reads
        anything, so it fails alike on an empty input."""
        run = ripgrep.RgRun(
            [self.binary, "--json", "--threads", "1", "--no-config", *_pattern_flags(job.req), "--", os.devnull],
            "/", timeout=10.0, check=job.check, data_limit=ripgrep.RG_DATA_LIMIT,
        )  # fmt: skip
        for _ in run.records():
            pass
        if run.out_of_memory:
            raise ToolError(
                f"Error during search: ripgrep needed more than the {ripgrep.RG_DATA_LIMIT >> 20} MiB of memory a "
                "search may use to compile the pattern, and was stopped. Long repetitions (such as \\w{1000}) "
                "need that much: simplify the pattern.",
                ErrorKind.GREP_EXECUTION_ERROR,
            )

    def _salvage(
        self, job: Job, target: Target, call: _RgCall, recheck, view, done: set[str], deadline: float
    ) -> None:
        """The rest of a search whose careful pass ran out of memory though the pattern is fine (`_probe`).
        A directory rg walked: the workspace walk names the files instead (`_listed`), so rg reads no
        ignore file (one of thousands of glob lines is too much for it). Named files: searched again in
        halves, down to one file, which is then not searched and named in the answer (a line tens of MB
        long that rg could not read through a memory map, say, in a file it transcodes from UTF-16)."""
        if call.files is None:
            self._listed(job, target, view, careful=True, done=done, deadline=deadline)
            return
        files = [name for name in call.files if name[2:] not in done]
        if not files:
            return
        if len(files) == 1:
            shown = target.display_prefix + files[0][2:] if target.is_dir else target.path
            job.out.skipped.append(listing.skipped_file_note(shown, ripgrep.RG_DATA_LIMIT))
            job.out.skipped_files += 1
            if job.out.skipped_files >= _MAX_SKIPPED_FILES:
                job.out.stopped = (
                    f"the search was stopped after ripgrep ran out of memory on {_MAX_SKIPPED_FILES} files searched "
                    "one at a time (leave such files out with 'include', or simplify the pattern)"
                )
            return
        middle = len(files) // 2
        for part in (files[:middle], files[middle:]):
            left = deadline - time.monotonic()
            if left <= 0:
                job.out.stopped = f"the search was stopped after {job.req.timeout:g} seconds"
                return
            self._run(job, target, replace(call, files=part, timeout=left), recheck, view, done, careful=True)
            if job.out.stopped:
                return

    def _listed(
        self, job: Job, target: Target, view, careful: bool = False, done: set[str] | None = None,
        deadline: float | None = None,
    ) -> None:
        """A directory whose rules rg cannot express (a `.geminiignore` that un-ignores), or whose walk rg
        could not take (`_salvage`): the workspace walk picks the files (`listing.listed_files`),
        and rg searches them, named on its command line (where no ignore rule applies), a batch at a
        time. Files in `done` were searched already."""
        req, out = job.req, job.out
        deadline = time.monotonic() + req.timeout if deadline is None else deadline
        done = set() if done is None else done
        files = (rel for rel in listing.listed_files(job, target) if rel not in done)
        cwd = ripgrep.dir_cwd(target.fd, target.path)
        for batch in listing.batches(files):
            left = deadline - time.monotonic()
            if left <= 0:
                out.stopped = f"the search was stopped after {req.timeout:g} seconds"
                return
            call = _RgCall([*_LISTED_FLAGS, *_pattern_flags(req)], cwd, (), ripgrep.rg_threads(), left, batch)
            self._run(job, target, call, None, view, done, careful)
            if out.stopped:
                return

    def _collect(self, job: Job, target: Target, run: ripgrep.RgRun, recheck, view, done: set[str]) -> None:
        """Read one rg run's JSON into the collector: each file it reports opened again through the gateway
        (and, with `recheck`, judged by our rules first), each line kept only as that copy confirms it. Once
        nothing more of a file is wanted but its count (`Reported.settled`), the reader skips to its `end`
        record, whose statistics give the count of the rest; a file that is not searched on is skipped
        whole. The paths of the files whose `end` arrives are added to `done`; those already there are
        skipped whole (an earlier pass reported them).

        A file none of whose lines can be kept (the collector is full of files that sort before it) and
        whose lines need no other look (no exclude pattern, no context) is only counted (`_count_only`):
        its first match checked against the gateway's copy, the rest counted from its `end` record."""
        ws, req, out = job.ws, job.req, job.out
        exclude = _exclude_regex(req)
        spans = _span_finder(req)
        current: Reported | None = None
        counting = exclude is None and not req.before and not req.after
        counted: tuple[int, int] | None = None  # the count-only file at hand: (matches, lines not confirmed)
        held = 0  # the count-only file's matches so far, while its records are passed over
        last_progress = time.monotonic() - 0.15  # the first report after 0.1 s, then every 0.25 s

        def tick() -> None:
            nonlocal last_progress
            now = time.monotonic()
            if now - last_progress > 0.25:
                out.pending = records.tallied - tallied_before + (current.found.count if current else held)
                if out.pending or out.total_files:  # nothing to tell yet: ask again at the next chunk
                    last_progress = now
                    job.progress(out)

        records = ripgrep.RecordReader.of(run)
        records.on_chunk = tick
        tallied_before = 0
        name: str | None = None
        deferral = Deferral()
        deferred: dict[tuple[int, str], tuple[str | None, bool, GatewayCopy | None]] = {}  # see _confirm_deferred
        try:
            for line in records:  # bytes, or an RgLine for a record too long to keep whole
                head = line if type(line) is bytes else line.head
                if head.startswith(MATCH):
                    if current is not None:
                        if not current.settled():
                            current.line(line, True)
                            if current.seen == 1 and current.deferral is not None:
                                current.take_rest(records)
                            if not current.settled():
                                continue
                        tallied_before = records.tallied
                        line = records.skip_to(END, MATCH)
                        tallied_before = records.tallied
                        if line is None:
                            break
                        head = line if type(line) is bytes else line.head
                        current.count_rest(line)
                elif head.startswith(CONTEXT):
                    if current is not None:
                        current.line(line, False)
                    continue
                elif head.startswith(BEGIN):
                    if current is not None:  # pragma: no cover - rg always ends a file before the next
                        current.close()
                    current = counted = None
                    name = begin_rel(head) if target.is_dir else None
                    opened = None if name in done else self._open_begun(job, target, name, recheck, view)
                    if opened is None:
                        line = records.skip_to(END)  # a file not searched on: passed over whole
                    elif counting and not out.could_keep(opened[0]) and records.next_is(MATCH):
                        held = self._count_only(next(records, None), opened[1])
                        tallied_before = records.tallied
                        line = records.skip_to(END, MATCH) if held >= 0 else None
                        tallied_before = records.tallied
                        if line is not None:
                            counted = _count_rest(held, line)
                        held = 0
                    else:
                        current = Reported(*opened)
                        current.start(req, exclude, spans, out.could_keep(current.key), deferral)
                        continue
                    if line is None:
                        break
                    head = line if type(line) is bytes else line.head
                if head.startswith(END):
                    out.pending = 0
                    if name is not None:
                        done.add(name)
                    if counted is not None:
                        if b'"binary_offset":null' in head:
                            out.count(counted[0])
                            if counted[1]:
                                out.unverified_files += 1
                        counted = None
                    if current is not None:
                        current.close()
                        if b'"binary_offset":null' in head:
                            out.commit(current.key, current.found)
                            if current.rejected:
                                out.unverified_files += 1
                            if current.found.deferred:
                                copy = current.copy.kept() if len(current.copy.block) <= deferral.left else None
                                if copy is not None:
                                    deferral.left -= len(copy.block)
                                deferred[current.key] = (name, bool(current.rejected), copy)
                    current = None
        finally:
            records.close()
            if current is not None:
                current.close()
        if deferred:
            self._confirm_deferred(job, target, view, deferred, spans)

    def _confirm_deferred(
        self,
        job: Job,
        target: Target,
        view,
        deferred: dict[tuple[int, str], tuple[str | None, bool, GatewayCopy | None]],
        spans,
    ) -> None:
        """Check the deferred lines (see `DEFER_RECORD`) of the files the collector still keeps against the
        gateway's copy: each file's `(rel, counted as unverified, copy)` in `deferred`, the copy the gateway
        read when rg reported the file if it holds the whole file, else the file opened again. A line that
        does not confirm (the file changed, or was swapped since) is left out, as in `Reported.line`."""
        out = job.out
        for key, (rel, counted, held) in deferred.items():
            lines = out.kept.get(key)
            if lines is None or (len(lines) == 1 and type(lines[0]) is tuple):
                continue  # pushed out, or all but its first line (checked at once) were
            opened = held is not None
            fd = -1
            copy = held
            checked: list[tuple[int, str]] = []
            failed = 0
            # each deferred record's fields (a deferred record is whole, so never cut for length)
            parsed = iter(many_fields([item for item in lines if type(item) is not tuple]))
            try:
                for item in lines:
                    if type(item) is tuple:
                        checked.append(item)
                        continue
                    if not opened:
                        opened = True
                        reported = self._open_reported(job.ws, target, rel, view)
                        if reported is not None:
                            fd = reported[1]
                            copy = GatewayCopy(fd)
                    fields = next(parsed)
                    if copy is None:
                        failed += 1
                        continue
                    if fields is None:
                        fields = claim_fields(item)
                    try:
                        ok = fields is not None and copy.read(fields[1], len(fields[2])) == fields[2]
                    except OSError:
                        ok = False
                    if ok:
                        checked.append((fields[0], show_line(fields[2], spans)))
                    else:
                        failed += 1
            finally:
                if fd >= 0:
                    os.close(fd)
            out.confirmed(key, checked, failed)
            if failed and not counted:
                out.unverified_files += 1

    def _open_begun(self, job: Job, target: Target, rel: str | None, recheck, view) -> _Opened | None:
        """The file a `begin` record names (`rel` below a directory target, None for a file target), opened
        through the gateway: its collector key and descriptor; None when our rules hide it (`recheck`) or
        it cannot be opened (counted as unverified)."""
        if rel is not None and recheck is not None and not recheck.visible(rel):
            return None
        opened = self._open_reported(job.ws, target, rel, view)
        if opened is None:
            job.out.unverified_files += 1
        return opened

    @staticmethod
    def _count_only(record: bytes | ripgrep.RgLine | None, fd: int) -> int:
        """The first match `record` of a file that is only counted, checked against the gateway's copy
        (open at `fd`, closed here) as `Reported.line` checks a line it does not keep: 1 if it confirms,
        else 0 (the file then counts as unverified and its other matches are not counted); -1 if the stream
        ended inside the record."""
        try:
            if record is None:
                return -1
            fields = claim_fields(record)  # cut for length: checked by its start
            if fields is None:
                return 0
            try:
                return int(confirms(fd, fields[1], fields[2]))
            except OSError:  # unreadable now: not confirmed
                return 0
        finally:
            os.close(fd)


_LISTED_FLAGS = ("--no-config", "--no-ignore-messages", "--no-ignore", "--hidden")
# Files one search may leave out for want of memory (`RipgrepEngine._salvage`): past a few, the pattern is why.
_MAX_SKIPPED_FILES = 16
# A careful pass (`RipgrepEngine._run`) has rg read files through memory maps, also when it walks a directory
# (by default it does only for a few files named on its command line): a mapped file's pages are the page
# cache's, not counted in its data limit, and a line is searched in place instead of being copied whole into
# a buffer that grows to hold it. Not the default: for many small files, mapping each costs more than reading
# it. rg still reads a file it transcodes (UTF-16 with a byte-order mark) into its buffer.
_CAREFUL = ("--mmap",)
# On one thread rg reports files in directory order (unsorted); sorted by path, which is nearly the
# collector's order (it compares whole paths, rg each component), the first files fill the collector and
# are rarely pushed out, and every file after them only needs its count (no line kept, deferred or
# confirmed). rg sorts only on one thread, so with more the order stays rg's.
_SORTED = ("--sort", "path")
# rg's lazy DFA keeps a cache per thread that may grow to about a gigabyte by default on a pattern that makes
# ever new states (`(?i)(a|b|c|d|e|f)[^\n]{300}q` took 1.3 GB on the Django tree); held to a few MB, rg falls
# back to its other engines instead (that search: 23 MiB, and faster). Normal patterns never fill it.
_DFA_CACHE = "4M"


@dataclass
class _RgCall:
    """What one search asks of rg (see `RipgrepEngine._run`): its arguments after `--threads`, where it
    runs, its ignore files, how many threads to start with, the seconds it may take, and the files it
    searches (None: it walks its working directory)."""

    args: list[str]
    cwd: str
    ignore_files: list[bytes] | tuple[bytes, ...]
    threads: int
    timeout: float
    files: list[str] | None = None  # the files rg is given by name (each `./` + path, or one absolute path)


def _ignore_source(ws: Workspace, root: int, unread: list[str], rel: str) -> bytes | None:
    data = ws.ignore_source(root, rel)
    if data is None:
        unread.append(rel)
    return data


def _with_messages(flags: list[str]) -> list[str]:
    """rg's `flags` for a search: rg reports the files and directories it cannot read on standard error
    (which `_finish` and `ripgrep.PathTooLong` read), but not the lines of an ignore file it cannot parse."""
    return [flag if flag != "--no-messages" else "--no-ignore-messages" for flag in flags]


def _pattern_flags(req: Request) -> list[str]:
    """rg's flags for how the pattern matches and what context it reports, ending with the pattern."""
    flags = ["--dfa-size-limit", _DFA_CACHE]
    if not req.case_sensitive:
        flags.append("--ignore-case")
    if req.fixed_strings:
        flags.append("--fixed-strings")
    if req.before:
        flags += ["--before-context", str(req.before)]
    if req.after:
        flags += ["--after-context", str(req.after)]
    return [*flags, "--regexp", req.pattern]


def _count_rest(first: int, end: bytes | ripgrep.RgLine) -> tuple[int, int]:
    """A count-only file's (matches, lines not confirmed) once its `end` record is read, its first match
    `first` (1: confirmed, 0: not), as `Reported.count_rest` counts a file it passed over."""
    matched = matched_lines(end)
    if matched is None:
        return first, 2 - first
    if not first:
        return 0, 1
    return max(1, matched), 0


def _exclude_regex(req: Request) -> LineRegex | None:
    if not req.exclude:
        return None
    return LineRegex(req.exclude, req.case_sensitive, label="exclude ")


def _span_finder(req: Request) -> Callable[[bytes], list[tuple[int, int]]]:
    """Where the pattern matches in one line, for excerpts of long lines, compiled when a long line first
    needs it; no spans when RE2 cannot read a pattern ripgrep can (the excerpt then shows the line's
    start)."""
    regex: list[LineRegex | None] = []

    def spans(data: bytes) -> list[tuple[int, int]]:
        if not regex:
            try:
                regex.append(LineRegex(req.pattern, req.case_sensitive, req.fixed_strings))
            except ToolError:
                regex.append(None)
        return regex[0].spans(data) if regex[0] is not None else []

    return spans


def _finish(run: ripgrep.RgRun, req: Request, out: Collector) -> None:
    """What a finished rg run's exit says: stopped early, an invalid regex, or a failure."""
    if run.stopped:
        out.stopped = run.stopped
        return
    if run.returncode not in (0, 1):
        message = run.stderr.decode("utf-8", "replace").strip()
        if run.returncode == 2 and message.startswith(("rg: ./", "rg: /")):
            return  # files or directories it could not read (it names each by its path); the rest stands
        if "regex" in message:
            raise ToolError(
                f"Invalid regular expression pattern provided: {req.pattern}. Error: {_rg_error(message)} "
                "Fix the pattern (ripgrep / Rust regex syntax; escape literal characters such as "
                "( ) [ ] { } . * + ? | \\ with a backslash).",
                ErrorKind.INVALID_TOOL_PARAMS,
            )
        if message and run.returncode != 2:
            raise ToolError(f"Error during search: ripgrep failed: {message[:2000]}", ErrorKind.GREP_EXECUTION_ERROR)
        # exit code 2 otherwise means some files could not be read; the rest stands


def _rg_error(message: str) -> str:
    lines = [ln.rstrip() for ln in message.splitlines() if ln.strip()]
    detail = next((ln.split("error:", 1)[1].strip() for ln in lines if ln.startswith("error:")), "")
    return (detail or " ".join(lines))[:500] + ("." if detail and not detail.endswith(".") else "")


# -- pure Python ------------------------------------------------------------------------------------------


# The bytes of a file the Python engine searches: it holds the file whole, and decoded (up to 4 bytes a
# character), up to five times its size; a larger file is left out and named.
PYTHON_MAX_FILE = 16 << 20


class PythonEngine:
    name = "python"

    def search(self, job: Job) -> bool:
        ws, targets, req, out, check, progress = job.ws, job.targets, job.req, job.out, job.check, job.progress
        rx = LineRegex(req.pattern, req.case_sensitive, req.fixed_strings)
        exclude = _exclude_regex(req)
        include = NodeMatcher(parse_include(req.include), source=req.include) if req.include else None
        deadline = time.monotonic() + req.timeout
        last = time.monotonic()
        for target in targets:
            if target.is_dir:
                loc = Location(target.root, target.rel, target.path)
                report = WalkReport()
                files = (
                    (e.rel, e.rel[len(target.rel) + 1 :] if target.rel else e.rel)
                    for e in walk(ws, loc, req.ignore, report=report, cancelled=check)
                )
            else:
                files = iter([(target.rel, None)])
            for rel, shown_rel in files:
                if shown_rel is not None and include is not None and not include(shown_rel):
                    continue
                if time.monotonic() > deadline:
                    out.stopped = f"the search was stopped after {req.timeout:g} seconds"
                    return True
                self._file(ws, target, rel, shown_rel, (rx, exclude), req, out)
                now = time.monotonic()
                if now - last > 0.25:
                    last = now
                    check()
                    progress(out)
        return True

    def _file(self, ws: Workspace, target: Target, rel: str, shown_rel, regexes, req: Request, out) -> None:
        rx, exclude = regexes
        loc = Location(target.root, rel, ws.shown_path(target.root, rel))
        try:
            _, data = ws.read_bytes(loc, PYTHON_MAX_FILE + 1)
        except ToolError:
            return
        if b"\0" in data and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return
        if len(data) > PYTHON_MAX_FILE:
            shown = target.display_prefix + shown_rel if shown_rel is not None else target.path
            out.skipped.append(listing.too_large_note(shown, PYTHON_MAX_FILE))
            return
        text = decode_text(data)
        if not rx.anchored and not rx.anywhere(text):
            return  # a match in a line is a match in the text (multi-line), unless \\A or \\z anchor it
        key = (target.index, target.display_prefix + shown_rel if shown_rel is not None else target.path)
        found = FileLines(req.file_limit, req.before, req.after)
        context = bool(req.before or req.after)
        for number, line in enumerate(text_lines(text), 1):
            if rx.search(line) and not (exclude is not None and exclude.search(line.rstrip("\r"))):
                found.match(number, lambda line=line: show_line(_utf8(line), rx.spans))
            elif context and found.wants_context:
                found.other(number, lambda line=line: show_line(_utf8(line)))
        out.commit(key, found)


def _utf8(line: str) -> bytes:
    return line.encode("utf-8", "surrogateescape")
