"""Why the ignore rules leave out a directory a tool was pointed at, in words a model can act on: which
directory is ignored (the one named, or one containing it), by which source and line, and which of the
tool's options would bring it back.

The verdict itself is always the ignore engine's (`IgnoreRules.decide`, directory by directory from the
root down, as a walk prunes); the source and line are found afterwards by replaying, for that one
directory, the lines of each source the options turn on, in the engine's order of precedence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coretools.sandbox.gateway import Workspace
from coretools.sandbox.ignore import DEFAULT_EXCLUDES, GEMINIIGNORE, GIT_INFO_EXCLUDE, GITIGNORE, IgnoreOptions
from coretools.sandbox.matcher import RuleSet
from coretools.sandbox.ripgrep import ignore_lines

DEFAULTS = "the default excludes"
UNKNOWN = "the ignore rules"
# The tool parameters (Gemini CLI's names) that turn a source off, by `IgnoreOptions` field: glob takes them
# as they are, list_directory and read_many_files inside `file_filtering_options`.
RESPECT_PARAMETERS = {"git": "respect_git_ignore", "gemini": "respect_gemini_ignore"}


@dataclass(frozen=True)
class Ignored:
    """One source's verdict that a directory is ignored."""

    rel: str  # the ignored directory, root-relative: the path asked about or one containing it
    shown: str  # that directory as shown to the model
    contains: bool  # True when it is a directory containing the path asked about
    source: str  # ".gitignore", "src/.gitignore", ".git/info/exclude", ".geminiignore", DEFAULTS or UNKNOWN
    line: str | None  # the deciding line, as written in the source
    option: str | None  # the `IgnoreOptions` field that turns the source off ("git", "gemini", "defaults")

    @property
    def where(self) -> str:
        return f"{self.source} (rule '{self.line}')" if self.line else self.source

    def describe(self) -> str:
        """`"<dir>" is ignored by <source> (rule '<line>')`, with ", which contains it," after the directory
        when it is not the path asked about."""
        inside = ", which contains it," if self.contains else ""
        return f'"{self.shown}"{inside} is ignored by {self.where}'


def ignored_by(ws: Workspace, root: int, rel: str, options: IgnoreOptions) -> Ignored | None:
    """Why the directory `rel` (root-relative) is ignored under `options`: the first directory on the way
    down from the root that the rules hide, and the rule that hides it; None when nothing hides it (the root
    itself never is)."""
    if not rel or ws.is_scratch(root):
        return None
    rules = ws.ignore_rules(root, options)
    if not rules.active:
        return None
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        if rules.decide(here, True):
            source, line, option = _deciding_rule(ws, root, here, options)
            return Ignored(here, ws.shown_path(root, here), here != rel, source, line, option)
    return None


def ignored_chain(ws: Workspace, root: int, rel: str, options: IgnoreOptions) -> list[Ignored]:
    """Every verdict in turn that keeps the directory `rel` out: the deciding one under `options`, then the
    one that decides once that source is turned off too, and so on until nothing hides it or a source that
    cannot be named decides. Empty when `rel` is not ignored. A tool tells from it which of its options
    bring the directory back, and whether any do."""
    chain: list[Ignored] = []
    while True:
        verdict = ignored_by(ws, root, rel, options)
        if verdict is None:
            return chain
        chain.append(verdict)
        if verdict.option is None:
            return chain
        options = dataclasses.replace(options, **{verdict.option: False})


def describe_chain(chain: list[Ignored]) -> str:
    """`"<dir>" is ignored by A (rule ..) and by B (rule ..)`: each source that hides it, deciding first."""
    text = chain[0].describe()
    for verdict in chain[1:]:
        text += f" and by {verdict.where}" if verdict.rel == chain[0].rel else f", and {verdict.describe()}"
    return text


def include_hint(
    chain: list[Ignored], params: Mapping[str, str], spell: Callable[[list[str]], str], action: str
) -> str:
    """How to `action` ("include it", "list it") with the tool's own parameters: `params` names, for each
    `IgnoreOptions` field the tool can turn off, its parameter; `spell(names)` writes those parameters set
    to false as the tool takes them. Says so plainly when some source in the chain cannot be turned off."""
    names: list[str] = []
    for verdict in chain:
        name = params.get(verdict.option or "")
        if name is None:
            fixed = "the default excludes always apply" if verdict.source == DEFAULTS else "the ignore rules apply"
            if not names:
                return f"{fixed}, and no parameter of this tool turns them off"
            return f"{spell(names)} would not {action}, as {fixed} and no parameter of this tool turns them off"
        if name not in names:
            names.append(name)
    return f"pass {spell(names)} to {action}"


def _deciding_rule(ws: Workspace, root: int, rel: str, options: IgnoreOptions) -> tuple[str, str | None, str | None]:
    """The source, line and option that decide that the directory `rel` is ignored (its parents are not):
    of the sources `options` turn on, in their order of precedence, the last line that matches it."""
    probe = rel + "/"
    layers: list[tuple[str, str, list[str], str]] = []  # (source, option, lines, the path as it sees it)
    if options.defaults:
        layers.append((DEFAULTS, "defaults", list(DEFAULT_EXCLUDES), probe))
    if options.git:
        layers.append((GIT_INFO_EXCLUDE, "git", ignore_lines(ws.ignore_source(root, GIT_INFO_EXCLUDE)), probe))
        parent = rel.rpartition("/")[0]
        bits = parent.split("/") if parent else []
        for here in ["", *("/".join(bits[: i + 1]) for i in range(len(bits)))]:  # the root down to the parent
            name = f"{here}/{GITIGNORE}" if here else GITIGNORE
            seen = probe[len(here) + 1 :] if here else probe
            layers.append((name, "git", ignore_lines(ws.ignore_source(root, name)), seen))
    if options.gemini:
        layers.append((GEMINIIGNORE, "gemini", ignore_lines(ws.ignore_source(root, GEMINIIGNORE)), probe))
    verdict: tuple[str, str | None, str | None] = (UNKNOWN, None, None)
    for source, option, lines, path in layers:
        for line in lines:
            hit = RuleSet.from_lines([line]).check(path)
            if hit is True:
                verdict = (source, line, option)
            elif hit is False:
                verdict = (UNKNOWN, None, None)
    return verdict
