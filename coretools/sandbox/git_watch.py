"""The watch of git's host-run settings: what a command leaves in a repository for git to run later, outside
any sandbox.

A sandboxed command cannot change an existing repository's `.git/config` or hooks (bubblewrap binds them
read-only), but it can create a *new* repository inside a root with `core.fsmonitor` or an `!` alias in its
configuration, and `git add` it as a gitlink: the user's next `git status` in the outer repository runs that
program on the host, and nothing in git says so. Without a sandbox a command can edit any configuration.
`snapshot` records, before and after a command, the git configuration files and hooks git would read inside
the roots; `changes` names each setting that runs a program and was not there before (`warning` renders them):
which file, which key, and when git would run it.

What is looked at, per root: a breadth-first walk (at most `DIR_BUDGET` directories, no symbolic link
followed, `.git` internals and bulky tool directories skipped, as `bwrap.find_protected` walks) finds `.git`
directories, `.git` files (`gitdir:` pointers), bare repositories and `.gitmodules` files. Each git directory
gives its `config` and `config.worktree`, its common directory (`commondir`), its hooks (`hooks/` and
`core.hooksPath`), its linked worktrees' and submodules' git directories (`worktrees/*`, `modules/*`) and the
files its configuration includes (`include.path`, `includeIf.*.path`, whatever their condition). The
repository that holds a root (found upwards) and the user's global configuration are read too. Git is never
run: `git_config` parses its configuration and knows which settings run programs.

Cost: each snapshot starts from the previous one. A directory whose (device, inode, mtime) is unchanged is not
listed again and a file whose (device, inode, size, mtime, mode) is unchanged is not read again, so a quiet
root costs one `lstat` per directory. An entry whose mtime lies within `RACY_NS` of the moment it was read is
read again anyway: a change within the same clock tick leaves the mtime as it was.

What it cannot see: a repository or hook beyond one of its bounds (`DIR_BUDGET`, `MAX_GITDIRS`, `MAX_FILES`,
`MAX_HOOKS`: a command that makes a root cross one is told) or inside a skipped directory (`node_modules`,
...), a file larger than `CONFIG_CAP` past its first bytes (its change is reported as such), a change that
keeps a file's size, inode and mtime (which git's own index cannot see either), and everything that is not
git: build files, `.envrc`, package.json scripts, Makefiles, scripts that hooks call, editor and tool settings.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
import time
from collections import deque
from dataclasses import dataclass, field

from coretools.sandbox.bwrap import MODULES_DEPTH, SKIP_DIRS
from coretools.sandbox.git_config import hook_runs, parse_config, runs
from coretools.sandbox.paths import is_dotgit, within

DIR_BUDGET = 4096  # directories walked per root and snapshot
MAX_GITDIRS = 256  # git directories followed per snapshot
MAX_FILES = 2048  # configuration files and hooks recorded per snapshot
MAX_HOOKS = 4096  # entries of one hooks directory looked at
CONFIG_CAP = 256 * 1024  # bytes of one configuration file parsed
HOOK_CAP = 1 << 20  # bytes of one hook hashed
POINTER_CAP = 4096  # bytes of a `.git` file or `commondir` read
INCLUDE_DEPTH = 10  # git's own limit on nested includes
RACY_NS = 2_000_000_000  # a listing or file read this soon after its mtime is read again (FAT: 2 s ticks)
SHOWN_FINDINGS = 40
SHOWN_VALUE = 200

_BARE = frozenset({"HEAD", "objects", "refs"})  # the names that make a directory a git directory
_DOTTED = frozenset({".git", ".gitmodules"})
_MARKS = _BARE | _DOTTED
_SIZE, _CUT = "(size)", "(not checked)"  # the keys of the two findings that are not settings


# -- what a snapshot holds --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting that runs a program: `key` as git spells it canonically (`core.fsmonitor`, or
    `hook NAME` for an executable hook), its value (a hook's: its size and hash), and when it runs."""

    key: str
    value: str | None
    when: str


@dataclass(frozen=True)
class Finding:
    """A setting that was not there before the command: in which file, for which repository."""

    file: str
    key: str
    value: str | None
    when: str
    repository: str

    def line(self) -> str:
        if self.key == _CUT:
            return f"{_shown(self.file)}: {self.when}"
        if self.key.startswith("hook "):
            what = f"new or changed executable {self.key}"
        elif self.key == _SIZE:
            what = f"changed ({self.value})"
        else:
            what = self.key if self.value is None else f"{self.key} = {_quoted(self.value)}"
        return f"{_shown(self.file)}: {what}: {self.when} in {_shown(self.repository)}"

    def as_dict(self) -> dict[str, str | None]:
        runs = self.when if self.key == _CUT else f"{self.when} in {self.repository}"
        return {"file": self.file, "key": self.key, "value": self.value, "runs": runs}


@dataclass(frozen=True)
class _Dir:
    sig: tuple[int, int, int]  # device, inode, mtime
    seen: int  # when it was listed (ns since the epoch)
    subdirs: tuple[str, ...]  # full paths
    marks: frozenset[str]  # which of `_MARKS` it holds


@dataclass(frozen=True)
class _File:
    kind: str  # "config", "gitmodules" or "hook"
    sig: tuple[int, int, int, int, int]  # device, inode, size, mtime, mode
    seen: int
    settings: frozenset[Setting]


@dataclass(frozen=True)
class GitState:
    """What one snapshot found; the next snapshot starts from it."""

    dirs: dict[str, _Dir] = field(default_factory=dict)
    files: dict[str, _File] = field(default_factory=dict)
    repositories: dict[str, str] = field(default_factory=dict)  # file -> where git runs its settings
    cut: frozenset[tuple[str, str]] = frozenset()  # (where, what): a bound that left something unchecked


def _racy(mtime_ns: int, seen: int) -> bool:
    return mtime_ns + RACY_NS > seen


# -- taking a snapshot ------------------------------------------------------------------------------------


def snapshot(roots: list[str], previous: GitState | None = None, budget: int = DIR_BUDGET) -> GitState:
    """The git configuration and hooks under `roots` (see the module docstring), reusing what `previous`
    read wherever the file system says nothing changed. Each root is walked with its own budget, and a
    directory only once: a command's working directory given first is walked in full even in a large root."""
    scan = _Scan(previous or GitState(), budget)
    for root in roots:
        scan.root(os.path.realpath(root))
    scan.deferred_modules()
    scan.user_config()
    return GitState(scan.dirs, scan.files, scan.repositories, frozenset(scan.cut))


def changes(before: GitState, after: GitState) -> list[Finding]:
    """The settings that run programs in `after` and were not in the same file `before`, and each bound
    (`DIR_BUDGET`, `MAX_GITDIRS`, ...) that left something unchecked after the command but not before it."""
    found: list[Finding] = []
    repositories = set(after.repositories.values())
    for path, record in sorted(after.files.items()):
        old = before.files.get(path)
        new = record.settings - old.settings if old is not None else record.settings
        if not new:
            continue
        where = repo = after.repositories[path]
        outer = [r for r in repositories if r != repo and within(repo, r)]
        if outer:
            where = f"{repo}, and from {max(outer, key=len)} when it tracks {repo} as a submodule (a gitlink)"
        found += [Finding(path, s.key, s.value, s.when, where)
                  for s in sorted(new, key=lambda s: (s.key, s.value or ""))]  # fmt: skip
    found += [Finding(where, _CUT, None, what, where) for where, what in sorted(after.cut - before.cut)]
    return found


def warning(found: list[Finding]) -> str:
    """The plain-text section a result carries, one line per finding; empty when there is none."""
    if not found:
        return ""
    lines = [
        "Warning: this command changed git settings that run programs on the host, outside any sandbox. Check "
        "them before running git there (`git config --show-origin --list`):"
    ]
    lines += [f"- {f.line()}" for f in found[:SHOWN_FINDINGS]]
    if len(found) > SHOWN_FINDINGS:
        lines.append(f"- and {len(found) - SHOWN_FINDINGS} more")
    return "\n".join(lines)


class GitWatch:
    """The latest snapshot of one owner (the shell tool), from which the next one starts."""

    def __init__(self) -> None:
        self._latest: GitState | None = None

    def snapshot(self, roots: list[str]) -> GitState:
        state = snapshot(roots, self._latest)
        self._latest = state
        return state


class _Scan:
    def __init__(self, previous: GitState, budget: int) -> None:
        self.previous, self.budget = previous, budget
        self.dirs: dict[str, _Dir] = {}
        self.files: dict[str, _File] = {}
        self.repositories: dict[str, str] = {}
        self.cut: set[tuple[str, str]] = set()
        self.start = ""  # the root being walked, which a bound reached meanwhile is reported against
        self.gitdirs: set[str] = set()
        self.commons: set[str] = set()
        self.hook_dirs: set[str] = set()
        self.modules: list[tuple[str, int]] = []

    def root(self, root: str) -> None:
        """Breadth-first over `root` (at most `budget` directories), then the repository holding it."""
        self.start = root
        queue = deque([root])
        walked = 0
        entries: list[str] = []
        while queue and walked < self.budget:
            directory = queue.popleft()
            if directory in self.dirs:  # walked from an earlier start (a command's directory, then its root)
                continue
            walked += 1
            listing = self._listing(directory)
            if listing is None:
                continue
            self.dirs[directory] = listing
            queue.extend(listing.subdirs)
            if listing.marks:
                if ".git" in listing.marks:
                    entries.append(directory)
                if ".gitmodules" in listing.marks:
                    self._file(os.path.join(directory, ".gitmodules"), "gitmodules", directory)
                if _BARE <= listing.marks:
                    self._gitdir(directory, directory)
        if queue:
            self.cut.add((root, f"it holds more than {self.budget} directories now; repositories below the first "
                          f"{self.budget} walked were not checked"))  # fmt: skip
        for directory in entries:
            self._entry(os.path.join(directory, ".git"), directory)
        parent, child = os.path.dirname(root), root
        while parent != child:
            if os.path.lexists(os.path.join(parent, ".git")):
                self._entry(os.path.join(parent, ".git"), parent)
                break
            parent, child = os.path.dirname(parent), parent

    def _listing(self, directory: str) -> _Dir | None:
        try:
            st = os.lstat(directory)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        sig = (st.st_dev, st.st_ino, st.st_mtime_ns)
        old = self.previous.dirs.get(directory)
        if old is not None and old.sig == sig and not _racy(sig[2], old.seen):
            return old
        seen = time.time_ns()
        subdirs: list[str] = []
        marks: set[str] = set()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    if entry.name in _MARKS:
                        marks.add(entry.name)
                    elif is_dotgit(entry.name):  # `.GIT` is `.git` where names ignore case
                        marks.add(".git")
                    elif entry.name.lower() == ".gitmodules":
                        marks.add(".gitmodules")
                    if entry.name in SKIP_DIRS:
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            return None
        return _Dir(sig, seen, tuple(subdirs), frozenset(marks))

    def _entry(self, path: str, repository: str) -> None:
        """A `.git` directory (or a link to one, which git follows too), or a `.git` file: `gitdir: X`."""
        try:
            st = os.stat(path)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode):
            self._gitdir(path, repository)
        elif stat.S_ISREG(st.st_mode):
            target = _pointer(path, "gitdir:")
            if target:
                self._gitdir(target, repository)

    def _gitdir(self, path: str, repository: str) -> None:
        real = os.path.realpath(path)
        if real in self.gitdirs or not os.path.isdir(real):
            return
        if len(self.gitdirs) >= MAX_GITDIRS:
            self.cut.add((self.start, f"more than {MAX_GITDIRS} git directories now; those past them were not checked"))
            return
        self.gitdirs.add(real)
        settings = self._config(os.path.join(real, "config.worktree"), repository)
        common = os.path.realpath(_pointer(os.path.join(real, "commondir"), "", base=real) or real)
        if common not in self.commons and os.path.isdir(common):
            self.commons.add(common)
            settings += self._config(os.path.join(common, "config"), repository)
            self._hooks(os.path.join(common, "hooks"), repository)
            for child in self._subdirs(os.path.join(common, "worktrees")):
                link = _pointer(os.path.join(child, "gitdir"), "", base=child)
                self._gitdir(child, os.path.dirname(link) if link else child)
            self.modules.append((os.path.join(common, "modules"), MODULES_DEPTH))
        self._hooks_paths(settings, repository)

    def _subdirs(self, directory: str) -> list[str]:
        """The directories in a `worktrees` or `modules` directory (at most `MAX_GITDIRS` entries looked at)."""
        try:
            with os.scandir(directory) as it:
                entries = list(itertools.islice(it, MAX_GITDIRS + 1))
        except OSError:
            return []
        if len(entries) > MAX_GITDIRS:
            self.cut.add((directory, f"it holds more than {MAX_GITDIRS} entries now; those past them were not "
                          "checked"))  # fmt: skip
        return sorted(e.path for e in entries[:MAX_GITDIRS] if e.is_dir(follow_symlinks=False))

    def deferred_modules(self) -> None:
        """Submodules' git directories not already reached from their working trees' `.git` files."""
        while self.modules:
            directory, depth = self.modules.pop(0)
            if depth <= 0:
                continue
            for child in self._subdirs(directory):
                if os.path.exists(os.path.join(child, "HEAD")) or os.path.exists(os.path.join(child, "config")):
                    self._gitdir(child, child)
                else:
                    self.modules.append((child, depth - 1))

    def user_config(self) -> None:
        """The user's own configuration, which every repository reads."""
        self.start = everywhere = "every repository of this user"
        home = os.path.expanduser("~")
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        settings = self._config(os.path.join(home, ".gitconfig"), everywhere)
        settings += self._config(os.path.join(xdg, "git", "config"), everywhere)
        self._hooks_paths(settings, everywhere)

    def _config(self, path: str, repository: str, depth: int = 0) -> list[Setting]:
        """The settings of a configuration file and of the files it includes."""
        record = self._file(path, "config", repository)
        if record is None:
            return []
        settings = list(record.settings)
        if depth < INCLUDE_DEPTH:
            for s in record.settings:
                if s.key.endswith(".path") and s.key.split(".", 1)[0] in ("include", "includeif") and s.value:
                    target = os.path.expanduser(s.value) if s.value.startswith("~") else s.value
                    target = os.path.normpath(os.path.join(os.path.dirname(path), target))
                    settings += self._config(target, repository, depth + 1)
        return settings

    def _hooks_paths(self, settings: list[Setting], repository: str) -> None:
        for s in settings:
            if s.key == "core.hookspath" and s.value:
                target = os.path.expanduser(s.value.strip())
                if os.path.isabs(target) or os.path.isdir(repository):
                    self._hooks(os.path.join(repository, target), repository)

    def _hooks(self, directory: str, repository: str) -> None:
        real = os.path.realpath(directory)
        if real in self.hook_dirs:
            return
        self.hook_dirs.add(real)
        try:
            with os.scandir(real) as it:
                names = [e.name for e in itertools.islice(it, MAX_HOOKS + 1)]
        except OSError:
            return
        if len(names) > MAX_HOOKS:
            self.cut.add((real, f"it holds more than {MAX_HOOKS} entries now; hooks past them were not checked"))
        for name in sorted(names[:MAX_HOOKS]):
            if not name.endswith(".sample"):
                self._file(os.path.join(real, name), "hook", repository)

    def _file(self, path: str, kind: str, repository: str) -> _File | None:
        """The record of one file (git follows links to it, and so does this), from the previous snapshot
        when its signature is unchanged; None if it is not a regular file (or a hook not executable)."""
        if path in self.files:
            return self.files[path]
        if len(self.files) >= MAX_FILES:
            self.cut.add((self.start, f"more than {MAX_FILES} configuration files and hooks now; those past them "
                          "were not checked"))  # fmt: skip
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or (kind == "hook" and not st.st_mode & 0o111):
            return None
        sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
        old = self.previous.files.get(path)
        if old is not None and old.kind == kind and old.sig == sig and not _racy(sig[3], old.seen):
            record: _File | None = old
        else:
            record = _read(path, kind)
        if record is not None:
            self.files[path] = record
            self.repositories[path] = repository
        return record


def _read(path: str, kind: str) -> _File | None:
    seen = time.time_ns()
    cap = HOOK_CAP if kind == "hook" else CONFIG_CAP
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
    if kind == "hook":
        digest = hashlib.sha256(data[:cap]).hexdigest()[:16]
        name = os.path.basename(path)
        value = f"{st.st_size} bytes, sha256 {digest}{'...' if len(data) > cap else ''}"
        return _File(kind, sig, seen, frozenset({Setting(f"hook {name}", value, hook_runs(name))}))
    settings = set()
    for section, sub, name, value in parse_config(data[:cap].decode("utf-8", "replace")):
        if kind == "gitmodules" and not (section == "submodule" and name == "update"):
            continue
        when = runs(section, sub, name, value)
        if when is not None:
            key = f"{section}.{sub}.{name}" if sub is not None else f"{section}.{name}"
            settings.add(Setting(key, value, when))
    if len(data) > cap:
        settings.add(Setting(_SIZE, f"{st.st_size} bytes, modified at {st.st_mtime_ns} ns",
                             f"only its first {cap} bytes were checked, and git reads all of it"))  # fmt: skip
    return _File(kind, sig, seen, frozenset(settings))


def _pointer(path: str, prefix: str, base: str | None = None) -> str | None:
    """The path a `.git` file (`gitdir: X`) or a `commondir` file (`X`) names, made absolute."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        line = os.read(fd, POINTER_CAP).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not line.startswith(prefix) or not line[len(prefix) :].strip():
        return None
    return os.path.normpath(os.path.join(base or os.path.dirname(path), line[len(prefix) :].strip()))


def _shown(text: str) -> str:
    """`text` with what is not printable escaped, so a name cannot forge lines of the warning."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" if ord(c) > 0xFF else f"\\x{ord(c):02x}"
                   for c in text)  # fmt: skip


def _quoted(value: str) -> str:
    shown = _shown(value[:SHOWN_VALUE]).replace('"', '\\"')
    return f'"{shown}"' + ("..." if len(value) > SHOWN_VALUE else "")
