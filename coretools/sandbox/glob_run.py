"""An `rg --files` run given the name part of a glob as `--glob`s (glob's fast path, see `walk.find_files`),
and what it asks of the re-check: such an override glob lets what it matches past every ignore rule, so
rg's verdict on those paths is judged again here by ours."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Protocol

from coretools.sandbox import ripgrep
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import DEFAULT_EXCLUDES, GEMINIIGNORE, GIT_INFO_EXCLUDE, GITIGNORE, IgnoreOptions
from coretools.sandbox.matcher import GlobSet
from coretools.sandbox.rgglobs import NameFilter


class FileSink(Protocol):
    """Where the files rg listed were kept (the walk's stat sink)."""

    def dirs(self) -> set[str]: ...

    def drop(self, below: set[str], hidden: Callable[[str], bool]) -> None: ...


class GlobRun:
    """What an `rg --files` run given the name part of a glob as `--glob`s asks of the re-check. Such an
    override glob lets what it matches past every ignore rule: rg matches no ignore rule against a file
    (about a quarter faster than with a file type, which rg applies after the rules), and it descends into
    an ignored directory whose own name matches. So, beyond the usual re-check (`recheck_options`; None:
    protected names only):

    * a directory whose name one of the globs matches is judged by all the rules, as it comes;
    * a listed file is judged by all the rules once rg is done (`judge_files`), and only where a rule could
      hide it by its own name: below a directory with such a rule (`ripgrep.NameRules`), and when its name
      is one such a rule could match (`ripgrep.file_name_test`); in a source tree, hardly anywhere. rg
      itself says which directories have a `.gitignore` (it is given `--glob .gitignore` too, and lists
      them), instead of a stat of each directory; as it may list one after the files it governs, files are
      judged at the end, and dropped from the sink then."""

    def __init__(
        self, ws: Workspace, root: int, base: str, options: IgnoreOptions, names: NameFilter,
        recheck_options: IgnoreOptions | None,
    ) -> None:
        self._ws, self._root, self._base, self._options, self._names = ws, root, base, options, names
        self.globs = list(names.globs) + ([GITIGNORE] if options.git else [])
        self._every = ws.ignore_rules(root, options)
        self._usual = ws.ignore_rules(root, recheck_options) if recheck_options is not None else None
        # the names the globs stand for, case ignored (a superset is safe: such a directory is judged by
        # every rule, which agrees with rg's verdict wherever rg applied the rules itself)
        self._let_in = GlobSet.of([*names.names, GITIGNORE], True, paths=False, negate=False)
        self._dir_tails = dir_tails([glob for glob in self.globs if glob != GITIGNORE])
        # files are never judged by rules here (see judge_files): `files` says no directory needs it
        self.recheck = ripgrep.Recheck(
            DirRules(self._every, self._usual, self._let_in), base, ws.allow_protected, files=lambda _dir: False
        )
        self._ignore_dirs: set[str] = set()  # root-relative directories below `base` rg listed a .gitignore in

    def flags(self) -> list[str]:
        return [arg for glob in self.globs for arg in ("--glob", glob)]

    def plain(self, joined: bytes) -> bool:
        """Does no path of a batch (rg's paths joined by NULs) need the re-check? So when only protected
        names (all with a leading dot) and directories the globs let in can be hidden, and there are
        none."""
        if self._usual is not None or b"/." in joined or self._dir_tails is None:
            return False
        lower = joined.lower()
        return not any(tail in lower for tail in self._dir_tails)

    def note_ignore_files(self, batch: list[bytes], joined: bytes) -> tuple[list[bytes], bytes]:
        """Remember where rg listed a `.gitignore` in a batch (`joined`: its paths joined by NULs); such a
        path stays in the batch only if the glob asked for it (rg lists them for us)."""
        end = joined.find(GITIGNORE_TAIL)
        if end < 0:
            return batch, joined
        removed = False
        while end >= 0:
            stop = end + len(GITIGNORE_TAIL)
            if stop == len(joined) or joined[stop] == 0:  # the whole name, at the end of a path
                raw = joined[joined.rfind(b"\0", 0, end) + 1 : stop]
                head = raw[2:-len(GITIGNORE_TAIL)].decode("utf-8", "surrogateescape")
                self._ignore_dirs.add(f"{self._base}/{head}" if self._base and head else self._base or head)
                if self._names.regex.search(raw) is None:
                    batch.remove(raw)
                    removed = True
            end = joined.find(GITIGNORE_TAIL, stop)
        return batch, b"\0".join(batch) if removed else joined

    def judge_files(self, sink: FileSink, complete: bool) -> None:
        """Drop from `sink` the files the rules hide by their own name (their directories were judged as
        they came). After a `complete` run every `.gitignore` below `base` was listed, so only those are
        read; otherwise every directory that holds a file is asked about, with a stat each. Files are
        given to the ignore engine only where a rule could hide them: in a directory `NameRules` names,
        and with a name that one of the rules there could match (`file_name_test`)."""
        source = self._listed_source if complete else self._ws_source
        read = functools.lru_cache(maxsize=None)(source)  # (each file is asked about twice)
        may_hide = ripgrep.NameRules(read, self._options, list(self._names.names))
        dirs = self._ignore_dirs if complete else sink.dirs()
        below = {self._base} if may_hide(self._base) else {d for d in dirs if may_hide(d)}
        if not below:
            return
        named = ripgrep.file_name_test(self._every_line(dirs, read)) if complete else lambda name: True
        every = self._every
        sink.drop(below, lambda rel: named(rel.rpartition("/")[2]) and every.decide(rel, False))

    def _every_line(self, dirs: set[str], read: Callable[[str], bytes | None]) -> list[str]:
        """The lines of every ignore file the rules read for the files below `base`, if `.gitignore`s are
        found in `dirs` only (below `base`)."""
        options, lines = self._options, []
        sources = [GEMINIIGNORE] if options.gemini else []
        if options.defaults:
            lines += DEFAULT_EXCLUDES
        if options.git:
            sources.append(GIT_INFO_EXCLUDE)
            parts = self._base.split("/") if self._base else []
            above = ["/".join(parts[:depth]) for depth in range(len(parts) + 1)]  # the root down to `base`
            sources += [f"{d}/{GITIGNORE}" if d else GITIGNORE for d in [*above, *dirs]]
        for source in sources:
            lines += ripgrep.ignore_lines(read(source))
        return lines

    def _ws_source(self, rel_file: str) -> bytes | None:
        return self._ws.ignore_source(self._root, rel_file)

    def _listed_source(self, rel_file: str) -> bytes | None:
        head, _, name = rel_file.rpartition("/")
        below_base = head != self._base and (not self._base or head.startswith(f"{self._base}/"))
        if name == GITIGNORE and below_base and head not in self._ignore_dirs:
            return None  # rg walked that directory and listed no .gitignore there
        return self._ws_source(rel_file)


GITIGNORE_TAIL = f"/{GITIGNORE}".encode()


class DirRules:
    """The rules `GlobRun`'s re-check judges directories by (files never get here): a directory the globs
    let in by all of them (`every`), any other as the usual re-check would (`usual`; None: not at all)."""

    def __init__(self, every, usual, let_in: Callable[[str], object]) -> None:
        self._every, self._usual, self._let_in = every, usual, let_in

    def decide(self, rel: str, is_dir: bool) -> bool:
        rules = self._every if self._let_in(rel.rpartition("/")[2]) else self._usual
        return rules is not None and rules.decide(rel, is_dir)


def dir_tails(globs: list[str]) -> list[bytes] | None:
    """What a batch of rg's paths (joined by NULs, lower-cased) must contain for one of its directories to
    match one of `globs`: the text after a glob's last `*`, lower-cased (a class `[xX]` is a letter either
    way), then "/". None when a glob ends in `*` or a `{..}` stands after it (any directory can match)."""
    tails = []
    for glob in globs:
        tail = glob.rpartition("*")[2]
        if not tail or "{" in tail:  # (an alternation of a letter's case pairs: any directory, to be safe)
            return None
        tails.append((re.sub(r"\[(.)[^\]]*\]", r"\1", tail).lower() + "/").encode())
    return tails
