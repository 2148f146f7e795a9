"""The one ignore engine every walking or filtering tool uses.

Sources, in precedence order (a later source that matches a path decides it, so a `.geminiignore`
`!pattern` can bring back a file a `.gitignore` hid):

1. the default excludes (Gemini CLI's common directory and file excludes),
2. `<root>/.git/info/exclude`,
3. every `.gitignore` from the root down to the path's directory, each anchored at its own directory,
4. `<root>/.geminiignore`.

Each ignore file is one `RuleSet` of the pattern engine (`coretools.sandbox`): git's pattern rules and
precedence, matched in time linear in the path whatever the lines say. A directory is tested with a
trailing `/`, so `dist/` hides the
directory `dist` in every tool. As in git, once a directory is ignored nothing below it comes back.
`.gitignore` files above a root, the global git excludes and `.ignore`/`.rgignore` files are not read:
the rules depend on the workspace alone. `.gitignore`s apply whether or not the root is a git checkout.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from coretools.sandbox.matcher import RuleSet
from coretools.sandbox.patterns.gitignore import rule_lines

DEFAULT_EXCLUDED_DIRS = (
    "node_modules",
    ".git",
    "bower_components",
    ".svn",
    ".hg",
    ".vscode",
    ".idea",
    "dist",
    "build",
    "coverage",
    "__pycache__",
)
DEFAULT_EXCLUDED_FILES = ("*.pyc", "*.pyo", ".DS_Store")
DEFAULT_EXCLUDES = tuple(f"{d}/" for d in DEFAULT_EXCLUDED_DIRS) + DEFAULT_EXCLUDED_FILES

GITIGNORE = ".gitignore"
GEMINIIGNORE = ".geminiignore"
GIT_INFO_EXCLUDE = ".git/info/exclude"

# The bytes an ignore file may have to be applied; a larger one is not read (as if absent), and a search that
# walks past it says so. Parsing costs up to about 0.3 MB of memory and 10 ms of CPU per KiB of glob lines
# (a 1 MiB file of `name7/*.tmp` lines: 347 MiB and 9 s; at this bound about 20 MiB and 0.6 s), and a
# walk parses every ignore file on its way; real `.gitignore`s have a few KiB.
MAX_IGNORE_FILE_BYTES = 64 << 10


@functools.lru_cache(maxsize=1)
def _default_rules() -> RuleSet:
    return RuleSet.from_lines(DEFAULT_EXCLUDES)


@dataclass(frozen=True)
class IgnoreOptions:
    """Which sources apply. The tool parameters `respect_git_ignore`, `respect_gemini_ignore` and
    `useDefaultExcludes` map onto these fields."""

    git: bool = True
    gemini: bool = True
    defaults: bool = True


class SpecCache:
    """Parsed ignore files (and their bytes), keyed by (root, file) and invalidated when the file's stat
    changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._specs: dict[tuple[int, str], tuple[object, RuleSet | None, bytes | None]] = {}

    def entry(
        self, root: int, rel_file: str, signature: object, load: Callable[[], bytes | None]
    ) -> tuple[RuleSet | None, bytes | None]:
        """`(spec, raw bytes)` of one ignore file; the bytes let ripgrep be given the very same rules."""
        key = (root, rel_file)
        with self._lock:
            hit = self._specs.get(key)
        if hit is not None and hit[0] == signature:
            return hit[1], hit[2]
        data = load() if signature is not None else None
        spec = _parse(data) if data else None
        with self._lock:
            self._specs[key] = (signature, spec, data)
        return spec, data


def _parse(data: bytes) -> RuleSet | None:
    rules = RuleSet.from_lines(rule_lines(data))
    return rules if len(rules) else None


class IgnoreRules:
    """The rules of one root under one set of options.

    `lookup(rel_file)` returns the parsed spec of an ignore file at `rel_file` inside the root (or None);
    the workspace supplies it so that ignore files, too, are only ever read through the gateway.
    """

    def __init__(self, lookup: Callable[[str], RuleSet | None], options: IgnoreOptions) -> None:
        self.options = options
        self._lookup = lookup
        self._root_layers: list[RuleSet] | None = None
        self._dir_specs: dict[str, RuleSet | None] = {}
        self._chains: dict[str, list[tuple[int, RuleSet]]] = {}
        self._dirs: dict[str, bool] = {}  # directory -> ignored, itself or through an ancestor

    @property
    def active(self) -> bool:
        o = self.options
        return o.git or o.gemini or o.defaults

    def _root(self) -> list[RuleSet]:
        if self._root_layers is None:
            layers = []
            if self.options.defaults:
                layers.append(_default_rules())
            if self.options.git:
                spec = self._lookup(GIT_INFO_EXCLUDE)
                if spec is not None:
                    layers.append(spec)
            self._root_layers = layers
        return self._root_layers

    def _gitignore(self, dir_rel: str) -> RuleSet | None:
        if dir_rel not in self._dir_specs:
            self._dir_specs[dir_rel] = self._lookup(f"{dir_rel}/{GITIGNORE}" if dir_rel else GITIGNORE)
        return self._dir_specs[dir_rel]

    def _gemini(self) -> RuleSet | None:
        if "\0gemini" not in self._dir_specs:
            self._dir_specs["\0gemini"] = self._lookup(GEMINIIGNORE)
        return self._dir_specs["\0gemini"]

    def _chain(self, dir_rel: str) -> list[tuple[int, RuleSet]]:
        """The `.gitignore`s that apply to entries of `dir_rel`, root first, with the length of the prefix
        to cut from a path to make it relative to each one's directory."""
        chain = self._chains.get(dir_rel)
        if chain is None:
            parent = dir_rel.rpartition("/")[0] if dir_rel else None
            chain = list(self._chain(parent)) if parent is not None else []
            spec = self._gitignore(dir_rel)
            if spec is not None:
                chain.append((len(dir_rel) + 1 if dir_rel else 0, spec))
            self._chains[dir_rel] = chain
        return chain

    def decide(self, rel: str, is_dir: bool) -> bool:
        """Is this one path ignored, judging only its own name (its parents are assumed visible)?

        Walks call this for each entry: they never descend into an ignored directory, so the parents
        of anything they ask about are already known to be visible.
        """
        if not rel:
            return False
        probe = rel + "/" if is_dir else rel
        verdict: bool | None = None
        for spec in self._root():
            hit = spec.check(probe)
            if hit is not None:
                verdict = hit
        if self.options.git:
            for cut, spec in self._chain(rel.rpartition("/")[0]):
                hit = spec.check(probe[cut:])
                if hit is not None:
                    verdict = hit
        if self.options.gemini:
            spec = self._gemini()
            if spec is not None:
                hit = spec.check(probe)
                if hit is not None:
                    verdict = hit
        return bool(verdict)

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Is `rel` ignored, itself or through any ancestor directory?"""
        if not rel or not self.active:
            return False
        parent = rel.rpartition("/")[0]
        if parent and self._dir_ignored(parent):
            return True
        return self.decide(rel, is_dir)

    def _dir_ignored(self, rel: str) -> bool:
        """`ignored(rel, True)`, remembered: the files of one directory ask the same question of every
        ancestor. The memory lives as long as these rules, which are made for one call."""
        unknown = []
        while rel and rel not in self._dirs:
            unknown.append(rel)
            rel = rel.rpartition("/")[0]
        verdict = self._dirs.get(rel, False)
        for rel in reversed(unknown):
            verdict = verdict or self.decide(rel, True)
            self._dirs[rel] = verdict
        return verdict
