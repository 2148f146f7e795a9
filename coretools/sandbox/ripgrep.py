"""ripgrep, driven with coretools' ignore rules, bounded and cancellable.

The binary comes from the `ripgrep` wheel (a dependency). `find_rg()` looks next to the running
interpreter, then on PATH. `CORETOOLS_RG` overrides the choice: a path, or `off` to disable ripgrep.

How our ignore rules (see `coretools.sandbox.ignore`) are expressed in ripgrep's terms
------------------------------------------------------------------------------------------
rg runs with its working directory set to the *opened* search directory (`/proc/<pid>/fd/<n>` of the
descriptor the workspace gateway handed out, so a path swapped after the check cannot redirect it) and
searches `.`. It reads the `.gitignore`s at and below that directory itself (`--no-require-git`: a git
checkout is not required, as in coretools). Everything else is switched off
(`--no-config --no-ignore-parent --no-ignore-global --no-ignore-dot --no-ignore-exclude`) and supplied
explicitly with `--ignore-file`, which rg matches relative to its working directory and ranks *below*
every in-tree `.gitignore`, in this order (lowest first): the default excludes, `<root>/.git/info/exclude`,
the `.gitignore`s of the directories between the root and the search directory (re-anchored at the search
directory, see `coretools.sandbox.rgglobs.reroot`), and `<root>/.geminiignore`. Up to `.geminiignore` this is exactly coretools'
precedence. `.geminiignore` ranks above the `.gitignore`s in coretools but below them in rg, which only
matters when it *un-ignores* (`!pattern`): then `rg_rules` returns None and the caller walks instead
(search then hands rg the walked files by name). Without negations rg can only see a superset (a `.gitignore` `!keep` beating a `.geminiignore`
`keep`): the paths where `.geminiignore` matches a component. So callers re-check what rg reports
(`Recheck`) with `.geminiignore` alone when rg searched a root, and with the whole `IgnoreRules` the walk
uses when the rules had to be re-anchored for a subdirectory (`reroot`) or a `--glob` override (which beats
every ignore rule in rg) was added. Hidden files are searched (`--hidden`), symlinks are never followed
(no `-L`), `.git` is pruned by an override glob; protected names (secret `.env` files, `.git` spelled
otherwise) are always dropped by the re-check.

rg's output is read as records with a bound on each (`RgLine`, `RecordReader`): the bound is part of running
rg within our limits, so the records are read here, by the run (`RgRun`), and the search package shapes them.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from coretools.sandbox import diskio, settings
from coretools.sandbox.durable import is_temp_name
from coretools.sandbox.ignore import (
    DEFAULT_EXCLUDES,
    GEMINIIGNORE,
    GIT_INFO_EXCLUDE,
    GITIGNORE,
    IgnoreOptions,
    IgnoreRules,
)
from coretools.sandbox.matcher import NodeMatcher
from coretools.sandbox.paths import protected_name
from coretools.sandbox.patterns.gitignore import gitignore_segment
from coretools.sandbox.patterns.glob import parse_glob
from coretools.sandbox.patterns.tree import PatternError, alt
from coretools.sandbox.rgglobs import reroot, segment_matcher, strip_trailing_spaces
from coretools.sandbox.runner import Runner, RunSpec, Streamed

BASE_FLAGS = (
    "--no-config",
    "--hidden",
    "--no-ignore-parent",
    "--no-ignore-global",
    "--no-ignore-dot",
    "--no-ignore-exclude",
    "--no-require-git",
    "--no-messages",
)
PROTECTED_GLOBS = ("--iglob", "!.git")


MAX_PATTERN_CHARS = 16_384
MAX_GLOB_CHARS = 4_096


def check_rg_argument(name: str, value: str, limit: int) -> None:
    """A tool parameter bound for ripgrep's command line: no NUL byte can pass there, and the kernel caps an
    argument's length (E2BIG). Refused with a message the model can act on, before anything runs."""
    from coretools.errors import ErrorKind, ToolError

    if "\x00" in value:
        raise ToolError(
            f"The '{name}' parameter contains a NUL character, which no file name or regex here can use; remove it.",
            ErrorKind.INVALID_TOOL_PARAMS,
        )
    if len(value) > limit:
        raise ToolError(
            f"The '{name}' parameter is {len(value)} characters long; the limit is {limit}. Use a shorter, more "
            "specific expression.",
            ErrorKind.INVALID_TOOL_PARAMS,
        )


@functools.lru_cache(maxsize=1)
def find_rg() -> str | None:
    """The ripgrep binary to use, or None when there is none that runs."""
    override = settings.rg_override()
    if override is not None:
        if not override:
            return None
        candidates = [override]
    else:
        candidates = [os.path.join(os.path.dirname(sys.executable), "rg"), shutil.which("rg")]
    for cand in candidates:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            probe = _RUNNER.stream(RunSpec([cand, "--version"], wall_timeout=10))
            try:
                out = b"".join(probe.chunks())
            except OSError:
                continue
            if probe.outcome.exit_code == 0 and out.startswith(b"ripgrep "):
                return cand
    return None


# -- rules ------------------------------------------------------------------------------------------------


@dataclass
class RgRules:
    """Flags plus the contents of the `--ignore-file`s (lowest precedence first)."""

    flags: list[str] = field(default_factory=list)
    ignore_files: list[bytes] = field(default_factory=list)
    recheck: str = "full"  # what rg's verdict may get wrong: "none", "gemini" (.geminiignore only), "full"
    # the lines of the rules behind `recheck`, as written: a file of a name none of them can match is judged
    # by rg's own rules (`.gitignore`s at and below the search directory) and its directories alone
    rechecked_lines: tuple[str, ...] = ()

    def recheck_names(self) -> Callable[[str], bool]:
        """Whether the rules the re-check applies could hide a file by its name (`file_name_test`): where
        they cannot, rg's verdict on the file stands (see `Recheck`). Not for a search with a `--glob`
        override, which puts files past rg's own rules too."""
        return _file_name_test(self.rechecked_lines)

    def recheck_options(self, options: IgnoreOptions) -> IgnoreOptions | None:
        """The ignore sources a reported path must still be judged by (None: protected names only)."""
        if self.recheck == "full":
            return options
        if self.recheck == "gemini":
            return IgnoreOptions(git=False, gemini=True, defaults=False)
        return None


def rg_rules(
    read_source: Callable[[str], bytes | None], base_rel: str, options: IgnoreOptions, allow_protected: bool
) -> RgRules | None:
    """Our rules for a search of the directory `base_rel` of a root, or None if rg cannot express them.

    `read_source(rel_file)` returns the bytes of an ignore file of the root (or None); the workspace
    supplies it, so ignore files are read through the gateway and shared with the Python matcher.
    """
    rules = RgRules(list(BASE_FLAGS))
    if not allow_protected:
        rules.flags += PROTECTED_GLOBS
    if not options.git:
        rules.flags.append("--no-ignore-vcs")
    tail = [p for p in base_rel.split("/") if p]
    layers: list[list[str]] = []
    written: list[str] = []  # the layers' lines before `reroot`
    if options.defaults:
        layers.append(list(DEFAULT_EXCLUDES))
        written += DEFAULT_EXCLUDES
    if options.git:
        lines = _lines(read_source(GIT_INFO_EXCLUDE))
        layers.append(reroot(lines, tail))
        written += lines
        for depth in range(len(tail)):
            here = "/".join(tail[:depth])
            lines = _lines(read_source(f"{here}/{GITIGNORE}" if here else GITIGNORE))
            layers.append(reroot(lines, tail[depth:]))
            written += lines
    gemini: list[str] = []
    if options.gemini:
        gemini = _lines(read_source(GEMINIIGNORE))
        if any(line.startswith("!") for line in gemini):
            return None
        layers.append(reroot(gemini, tail))
        written += gemini
    rules.ignore_files = [("\n".join(layer) + "\n").encode("utf-8", "surrogateescape") for layer in layers if layer]
    rules.recheck = "full" if tail else "gemini" if gemini else "none"
    rules.rechecked_lines = tuple(written if tail else gemini)
    return rules


class Recheck:
    """Our verdict on the paths rg reported below `base` (root-relative), where rg's could differ: protected
    names always (each component), and each component judged by `rules` when given (see `RgRules.recheck`).
    A directory is judged once; `hidden` counts what was left out (a directory once, like the walk).
    `files(dir)`, if given, says whether the rules can hide a file of the root-relative directory `dir` by its
    own name (see `NameRules`); where they cannot, files are not judged by them. `names(name)`, if given,
    says the same of a file's name, wherever it is (see `RgRules.recheck_names`)."""

    @classmethod
    def of(
        cls, ws, root: int, base: str, options: IgnoreOptions | None, allow_protected: bool,
        files: Callable[[str], bool] | None = None, names: Callable[[str], bool] | None = None,
    ) -> Recheck:
        """The re-check of a search of `base` in root `root` of the workspace `ws`, with `options` from
        `RgRules.recheck_options`."""
        rules = ws.ignore_rules(root, options) if options is not None else None
        return cls(rules, base, allow_protected, files, names)

    def __init__(
        self, rules: IgnoreRules | None, base: str, allow_protected: bool, files: Callable[[str], bool] | None = None,
        names: Callable[[str], bool] | None = None,
    ) -> None:
        self.rules = rules
        self.base = base
        self.allow_protected = allow_protected
        self.hidden = 0
        self._dirs: dict[str, bool] = {"": True}
        self._files = files
        self._names = names
        self._plain: dict[str, bool] = {}  # visible directories whose files only a protected name can hide

    def _rules_judge_files(self, head: str) -> bool:
        return self._files is None or self._files(f"{self.base}/{head}" if self.base and head else self.base or head)

    def _hidden(self, rel: str, is_dir: bool) -> bool:
        name = rel.rpartition("/")[2]
        if not self.allow_protected and protected_name(name):
            return True
        if self.rules is None:
            return False
        return self.rules.decide(f"{self.base}/{rel}" if self.base else rel, is_dir)

    def _dir_visible(self, rel: str) -> bool:
        hit = self._dirs.get(rel)
        if hit is None:
            hit = self._dir_visible(rel.rpartition("/")[0])
            if hit and self._hidden(rel, True):
                hit = False
                self.hidden += 1
            self._dirs[rel] = hit
        return hit

    def visible(self, rel: str) -> bool:
        """`rel` is relative to `base`; judged like the walk, each component below `base` by its own name
        and the rules (`base` itself was checked when it was opened)."""
        head, _, name = rel.rpartition("/")
        if name[:1] != "." and self._plain.get(head):
            return True  # the common case, decided once per directory
        if is_temp_name(name):
            return False  # an edit's temporary file, never shown (not counted as ignored)
        seen = self._dirs.get(head)
        if not (seen if seen is not None else self._dir_visible(head)):
            return False
        if self.rules is None or not self._rules_judge_files(head):  # protected names only
            self._plain[head] = True
            if name[:1] == "." and not self.allow_protected and protected_name(name):
                self.hidden += 1
                return False
            return True
        if self._names is not None and not self._names(name):  # protected names only, for this one
            if name[:1] == "." and not self.allow_protected and protected_name(name):
                self.hidden += 1
                return False
            return True
        if self._hidden(rel, False):
            self.hidden += 1
            return False
        return True


class NameRules:
    """Which directories have ignore rules that could hide, by its own name, a file whose name matches one of
    the glob alternatives `names` (text and `*`): called with a root-relative directory, it looks at the rule
    sources `options` enable there (the root's, and the `.gitignore` of each directory down to it).
    Conservative: any negation counts, and a rule counts unless its last component provably cannot match
    such a name. A rule that is not counted can still hide a file through a parent directory, which the
    walk judges on its own."""

    def __init__(self, read_source: Callable[[str], bytes | None], options: IgnoreOptions, names: list[str]) -> None:
        self._read = read_source
        self._git = options.git
        self._names = [n.lower() for n in names]
        root = list(DEFAULT_EXCLUDES) if options.defaults else []
        if options.git:
            root += _lines(read_source(GIT_INFO_EXCLUDE))
        if options.gemini:
            root += _lines(read_source(GEMINIIGNORE))
        self._root = self._may_hide(root)
        self._dirs: dict[str, bool] = {}

    def __call__(self, dir_rel: str) -> bool:
        hit = self._dirs.get(dir_rel)
        if hit is None:
            if dir_rel:
                hit = self(dir_rel.rpartition("/")[0])
            else:
                hit = self._root
            if not hit and self._git:
                hit = self._may_hide(_lines(self._read(f"{dir_rel}/{GITIGNORE}" if dir_rel else GITIGNORE)))
            self._dirs[dir_rel] = hit
        return hit

    def _may_hide(self, lines: list[str]) -> bool:
        return any(self._line_may_hide(line) for line in lines)

    def _line_may_hide(self, line: str) -> bool:
        if line.startswith("!") or not line.isascii():
            return True
        last = strip_trailing_spaces(line).rstrip("/").rpartition("/")[2]
        if not last:
            return True
        wild = any(ch in _WILD for ch in last)
        for name in self._names:
            if "*" not in name:
                if segment_matcher(last, True)(name):
                    return True
            elif not wild:
                if _name_matcher(name)(last.lower()):
                    return True
            else:  # both end in literal text after their last wildcard: a name can end in both only if one ends the other
                cut = max(last.rfind(ch) for ch in _WILD)
                tail = last[cut + 1 :].lower()
                mine = name.rpartition("*")[2]
                if tail.endswith(mine) or mine.endswith(tail):
                    return True
        return False


_WILD = "*?[]\\"


@functools.lru_cache(maxsize=256)
def _name_matcher(name: str):
    """A name pattern of text and `*` (`*` any text) as a test of a string."""
    return NodeMatcher(parse_glob(name, paths=False, negate=False).segments[0], False, name)


def file_name_test(lines: list[str]) -> Callable[[str], bool]:
    """A test of a file name that is true whenever one of the gitignore `lines` could match a file by that
    name (its last component, case ignored; negations count too): a superset, to skip the ignore engine for
    the files it cannot judge differently by their own names. `**` as the last component matches any.

    A search asks this of every file rg reports, so when every last component is plain ASCII text or `*`
    followed by such text (`*.pyc`, `node_modules`, the default excludes), an ASCII name is judged by string
    comparisons (case folds as `lower()` does within ASCII); other names go to the compiled matcher."""
    alternatives = {}  # (a dict: one of each, in order)
    names: set[str] | None = set()  # the plain alternatives, lower-cased: whole names, and `*`'s suffixes
    suffixes: list[str] = []
    for line in lines:
        body = strip_trailing_spaces(line[1:] if line.startswith("!") else line).rstrip("/")
        last = body.rpartition("/")[2]
        if not last or "**" in last:
            return lambda name: True
        try:
            alternatives[gitignore_segment(last)] = None
        except PatternError:  # a line git discards hides nothing
            continue
        if names is not None:
            text = last[1:] if last[0] == "*" else last
            if not text.isascii() or any(ch in _WILD for ch in text):
                names = None
            elif text is last:
                names.add(last.lower())
            else:
                suffixes.append(text.lower())
    if not alternatives:
        return lambda name: False
    matcher = NodeMatcher(alt(*alternatives), True, "ignore rules")
    if names is None:
        return matcher
    ends = tuple(suffixes)

    def test(name: str) -> bool:
        if name.isascii():
            low = name.lower()
            return low in names or low.endswith(ends)
        return matcher(name)

    return test


@functools.lru_cache(maxsize=32)
def _file_name_test(lines: tuple[str, ...]) -> Callable[[str], bool]:
    return file_name_test(list(lines))


def ignore_lines(data: bytes | None) -> list[str]:
    """The pattern lines of an ignore file's bytes (comments and blank lines left out)."""
    return _lines(data)


def _lines(data: bytes | None) -> list[str]:
    if not data:
        return []
    out = []
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.lstrip()  # as coretools' parser does
        if line and not line.startswith("#"):
            out.append(line)
    return out


# -- running ----------------------------------------------------------------------------------------------

_RUNNER = Runner("coretools-rg")

# What a search's rg may map privately (`RgRun(data_limit=...)`). A normal search of a large tree stays
# near 30 MiB even with 12 threads; what grows past this is rg holding a file's whole output before writing
# it (several threads), a line tens of MB long, or a regex compiled to a huge program. rg then aborts (see
# `RgRun.out_of_memory`) instead of taking the machine's memory.
RG_DATA_LIMIT = 128 << 20
RG_PIPE = 1 << 20  # rg's output pipe: fewer wake-ups of reader and writer on a large output


def dir_cwd(fd: int, fallback: str) -> str:
    """A working directory for a child that is exactly the directory open at `fd` (Linux: via /proc)."""
    proc = f"/proc/{os.getpid()}/fd/{fd}"
    return proc if os.path.isdir(proc) else fallback


# rg's output as records (lines): whole ones as bytes, ones too long to keep whole as `RgLine`s, read one at
# a time from the raw stream with ways to pass over the ones not wanted in C (`RecordReader`).


@dataclass
class RgLine:
    """A record too long to keep whole (`RgRun.batches` gives the others as plain bytes): its first
    `max_line` bytes and its last 4 KB."""

    data: bytes  # always b"": the whole record was not kept
    head: bytes
    tail: bytes
    cut: bool


class RecordReader:
    """rg's output as records read one at a time from the raw stream (whole ones as bytes, ones longer than
    `limit` as `RgLine`s), without splitting each chunk into a list. `skip_to` passes over records in C
    (`bytes.find`), so a consumer that only needs a file's `end` record makes no object per match. A
    partial last record (the stream cut short) is dropped, as by `RgRun.batches`."""

    def __init__(self, chunks: Iterator[bytes], sep: bytes = b"\n", limit: int = 256 * 1024) -> None:
        self._chunks = chunks
        self._buf = b""
        self._pos = 0
        self.sep, self.limit = sep, limit
        self.on_chunk: Callable[[], None] | None = None  # called as each chunk arrives (progress reports)
        self.tallied = 0  # records counted by `skip_to`

    def __iter__(self) -> RecordReader:
        return self

    def __next__(self) -> bytes | RgLine:
        while True:
            end = self._buf.find(self.sep, self._pos)
            if end >= 0:
                record = self._buf[self._pos : end]
                self._pos = end + 1
                if len(record) <= self.limit:
                    return record
                return RgLine(b"", record[: self.limit], record[-4096:], True)
            if len(self._buf) - self._pos > self.limit:
                return self._cut()
            if not self._more():
                raise StopIteration

    def skip_to(self, prefix: bytes, tally: bytes | None = None) -> bytes | RgLine | None:
        """The next record that starts with `prefix` (None if the stream ends first); those before it are
        read past unparsed. The ones among them that start with `tally` are counted in `tallied` as far as
        they were passed before more of the stream is read (`on_chunk` sees them; the caller learns the
        rest from the record returned). Neither prefix may contain `sep`, which no record does either."""
        marker = self.sep + prefix
        at = self._buf.find(marker, self._pos)
        if at >= 0:  # the usual case: the record is read already (and so is enough of the one at hand)
            if not self._buf.startswith(prefix, self._pos):
                self._pos = at + 1
            return next(self, None)
        while len(self._buf) - self._pos < max(len(prefix), len(tally or b"")) and self._more():
            pass  # the record at hand must be long enough to tell what it is
        if self._buf.startswith(prefix, self._pos):
            return next(self, None)
        counted = self.sep + tally if tally is not None else b""
        first = bool(counted) and self._buf.startswith(tally, self._pos)
        overlap = max(len(marker), len(counted)) - 1  # what may be the start of a prefix cut by the chunk's end
        while True:
            at = self._buf.find(marker, self._pos)
            if at >= 0:
                self._pos = at + 1
                return next(self, None)
            if counted:
                self.tallied += self._buf.count(counted, self._pos) + first
                first = False
            self._pos = max(self._pos, len(self._buf) - overlap)  # everything before is counted and passed
            if not self._more():
                return None

    def next_is(self, prefix: bytes) -> bool:
        """Whether the next record starts with `prefix` (reading on as far as it takes to tell); nothing is
        consumed."""
        while len(self._buf) - self._pos < len(prefix) and self._more():
            pass
        return self._buf.startswith(prefix, self._pos)

    def take_to(self, prefix: bytes, limit: int) -> bytes | None:
        """The records before the next one that starts with `prefix`, as they are (each ending with `sep`),
        if that one is already read and they come to at most `limit` bytes; else None, and nothing is
        consumed. `prefix` may not contain `sep`."""
        buf, pos = self._buf, self._pos
        if buf.startswith(prefix, pos):
            return b""
        at = buf.find(self.sep + prefix, pos, pos + limit + len(prefix))
        if at < 0:
            return None
        self._pos = at + 1
        return buf[pos : at + 1]

    @classmethod
    def of(cls, run) -> RecordReader:
        """The records of `run`: an `RgRun`'s raw stream, or for anything that only gives `batches()` (a
        double replaying recorded output), those batches joined back into a stream."""
        reader = getattr(run, "reader", None)
        if reader is not None:
            return reader()
        sep = getattr(run, "sep", b"\n")
        return cls((sep.join(batch) + sep for batch in run.batches() if batch), sep)

    def close(self) -> None:
        """Stop reading: rg is killed and reaped now if it is still running."""
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()

    def _more(self) -> bool:
        """Append the next chunk to what is left unread; False at the end of the stream."""
        chunk = next(self._chunks, None)
        if chunk is None:
            self._buf, self._pos = b"", 0
            return False
        if self.on_chunk is not None:
            self.on_chunk()
        self._buf = self._buf[self._pos :] + chunk if self._pos < len(self._buf) else chunk
        self._pos = 0
        return True

    def _cut(self) -> RgLine:
        """A record too long to keep: its first `limit` bytes and last 4 KB, the rest read past."""
        head, tail = self._buf[self._pos : self._pos + self.limit], self._buf[self._pos :][-4096:]
        self._buf, self._pos = b"", 0
        for chunk in self._chunks:
            if self.on_chunk is not None:
                self.on_chunk()
            end = chunk.find(self.sep)
            if end >= 0:
                self._buf, self._pos = chunk, end + 1
                return RgLine(b"", head, (tail + chunk[:end])[-4096:], True)
            tail = (tail + chunk)[-4096:]
        raise StopIteration


class RgRun:
    """One rg run on the process runner (`Runner.stream`: its own process group, a deadline, a bound on the
    whole output, `check` (cancellation) polled while waiting, the group killed and reaped when the
    iteration ends), its stdout read as a stream of records (lines, or `sep`-terminated) with a bound on
    each record. `count_in_stderr(line)`: count the stderr lines it accepts (in `stderr_hits`).
    `data_limit`: a cap on rg's private memory in bytes (see `RG_DATA_LIMIT`, `out_of_memory`)."""

    def __init__(
        self,
        argv: list[str],
        cwd: str,
        ignore_files: list[bytes] | tuple[bytes, ...] = (),
        timeout: float = 60.0,
        max_line: int = 256 * 1024,
        max_total: int = 1 << 30,
        check: Callable[[], None] | None = None,
        sep: bytes = b"\n",
        count_in_stderr: Callable[[bytes], bool] | None = None,
        data_limit: int | None = None,
    ) -> None:
        self.argv, self.cwd, self.ignore_files = argv, cwd, list(ignore_files)
        self.data_limit = data_limit
        self.timeout, self.max_line, self.max_total = timeout, max_line, max_total
        self.check, self.sep, self.count_in_stderr = check, sep, count_in_stderr
        self.stderr_hits = 0
        self._err_pending = b""
        self._run: Streamed | None = None

    @property
    def stderr(self) -> bytes:
        return bytes(self._run.outcome.stderr.data) if self._run is not None else b""

    @property
    def returncode(self) -> int | None:
        """rg's exit status once it ran to the end (negative: the signal that ended it), else None."""
        if self._run is None:
            return None
        outcome = self._run.outcome
        return -outcome.signal if outcome.signal is not None else outcome.exit_code

    @property
    def out_of_memory(self) -> bool:
        """Whether rg died for want of memory under its `data_limit`: Rust's allocator reports `memory
        allocation of N bytes failed` and aborts the whole process (every thread, mid-write perhaps)."""
        return self.returncode == -signal.SIGABRT and b"memory allocation of" in self.stderr

    @property
    def stopped(self) -> str | None:
        """Why the stream was cut short (timeout, output bound)."""
        reason = self._run.outcome.stopped if self._run is not None else None
        if reason == "timeout":
            return f"the search was stopped after {self.timeout:g} seconds"
        if reason == "output_cap":
            return f"the search output passed {self.max_total >> 20} MB and was stopped"
        return None

    def records(self) -> Iterator[list[bytes]]:
        """The records in batches as they arrive (records longer than `max_line` are dropped)."""
        for batch in self.batches():
            yield [item for item in batch if not isinstance(item, RgLine)]

    def batches(self) -> Iterator[list[bytes | RgLine]]:
        """The records in batches as they arrive: whole ones as bytes, cut ones as `RgLine`s."""
        yield from self._split(self._chunks())

    def reader(self) -> RecordReader:
        """The records one at a time, with `RecordReader.skip_to` to pass over the ones not wanted."""
        return RecordReader(self._chunks(), self.sep, self.max_line)

    def _chunks(self) -> Iterator[bytes]:
        """rg's raw standard output; rg starts with the iteration and is reaped when it ends."""
        fds: list[int] = []
        argv = list(self.argv)
        if not any(arg.startswith(("-j", "--threads")) for arg in argv):
            argv[1:1] = ["--threads", str(rg_threads())]
        try:
            for data in self.ignore_files:
                fd = diskio.anonymous_file("coretools-ignore", data)
                fds.append(fd)
                argv[1:1] = ["--ignore-file", f"/proc/self/fd/{fd}"]
            spec = RunSpec(
                argv, cwd=self.cwd, env=_RG_ENV, wall_timeout=self.timeout, output_cap=self.max_total,
                pass_fds=tuple(fds), data_limit=self.data_limit, pipe_size=RG_PIPE,
            )
            on_stderr = self._count_stderr if self.count_in_stderr is not None else None
            self._run = _RUNNER.stream(spec, check=self.check, on_stderr=on_stderr)
            yield from self._run.chunks()
        finally:
            for fd in fds:
                os.close(fd)

    def _count_stderr(self, chunk: bytes) -> None:
        """Count the whole lines so far; of a line longer than 4 KiB its first and last 2 KiB are kept (what
        is counted is near the start, or in the message after the path: a path may be longer than that)."""
        assert self.count_in_stderr is not None
        lines = (self._err_pending + chunk).split(b"\n")
        pending = lines.pop()
        self._err_pending = pending if len(pending) <= 4096 else pending[:2048] + pending[-2048:]
        self.stderr_hits += sum(map(self.count_in_stderr, lines))

    def _split(self, chunks: Iterator[bytes]) -> Iterator[list[bytes | RgLine]]:
        sep, limit = self.sep, self.max_line
        pending = b""
        cut_head: bytes | None = None  # set while inside a record too long to keep
        tail = b""
        for chunk in chunks:
            batch: list[bytes | RgLine] = []
            if cut_head is not None:
                end = chunk.find(sep)
                if end < 0:
                    tail = (tail + chunk)[-4096:]
                    continue
                batch.append(RgLine(b"", cut_head, (tail + chunk[:end])[-4096:], True))
                cut_head, tail = None, b""
                chunk = chunk[end + 1 :]
            parts = (pending + chunk if pending else chunk).split(sep)
            pending = parts.pop()
            for part in parts:
                batch.append(part if len(part) <= limit else RgLine(b"", part[:limit], part[-4096:], True))
            if len(pending) > limit:
                cut_head, tail, pending = pending[:limit], pending[-4096:], b""
            if batch:
                yield batch


class PathTooLong:
    """A `count_in_stderr` test for rg's error on a path longer than the kernel takes (`ENAMETOOLONG`), which
    rg meets below a tree nested so deep that a path from its working directory passes `PATH_MAX`: rg names
    paths whole, where the workspace walk opens each directory beneath its parent. The first such path is
    kept (`first`, as rg wrote it: `./` and the path, cut in the middle past 4 KiB)."""

    _SUFFIX = f": File name too long (os error {errno.ENAMETOOLONG})".encode()

    def __init__(self) -> None:
        self.first: str | None = None

    def __call__(self, line: bytes) -> bool:
        if not (line.startswith(b"rg: ") and line.endswith(self._SUFFIX)):
            return False
        if self.first is None:
            self.first = line[4 : -len(self._SUFFIX)].decode("utf-8", "replace")
        return True


@functools.lru_cache(maxsize=2)
def rg_threads(spare: int = 1) -> int:
    """rg's worker threads: by default one CPU fewer than we may use (rg's default takes them all), which is
    left to the Python side consuming rg's output as it comes (verifying, re-checking, stat'ing); `spare=0`
    for a consumer that mostly waits on rg (a search, which skips the records it does not need). With more
    than one, rg holds each file's output until the file is done, so its memory grows with the largest
    file's output: run it under a `data_limit`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus - spare, 12))


# rg's environment: nothing of the server's. rg runs no other program here (no `--pre`, no `--search-zip`)
# and takes its configuration from its flags alone (`--no-config`, the ignore files we pass), so it needs
# none; a copy of the server's, filtered for every run, cost CPU on every search.
_RG_ENV = {"LC_ALL": "C.UTF-8"}
