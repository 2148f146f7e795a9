"""The syntax check after an edit: when the new text of a file has a syntax error and the old text had none,
the result says where, as a fact ("Note: after this edit, line 42 has a syntax error (Python 3.11: unexpected
indent)."). A file that was already broken is not mentioned, nor is anything the checker cannot judge: an
unknown kind of file, or any failure of the checker itself. A check skipped for its cost is said to be,
with why ("Note: the syntax of this file was not checked (...)"). `introduced_error` asks the same of an
edit not yet written (replace refuses a recovered edit that would break the file).

Python is parsed by this interpreter's own parser (so the note names its version: newer syntax can be reported
as an error), JSON by `json`, TOML by `tomllib`, YAML by PyYAML's parser (events only, so custom tags are
fine), and shell, JavaScript, TypeScript/TSX, Go and Rust by tree-sitter grammars. The new text is parsed
first; the old one only when the new one has an error, and not even then when it is the text an earlier edit
of the file wrote (its outcome is remembered, by length and hash, for the last `MAX_REMEMBERED` files). Cost:
one parse, about 5 ms for a 20 KB Python file.

What a parse costs in memory depends on the text far more than on its size, so each parse is bounded where
it can be. A tree-sitter parse is given up after `MAX_TREE_SECONDS` of CPU, or once the server's resident
memory grew by `MAX_TREE_BYTES` during it (checked as it goes: error recovery on hostile input such as 2 MB
of `x = ((((` in JavaScript took 480 MiB, which a time bound alone lets a fast CPU reach). tree-sitter
cannot be stopped inside one step of its error recovery, and the shell grammar's grows with the square of a
pipeline's length (4,096 stages: 230 MiB in one step), so a shell script with a longer pipeline than
`MAX_PIPELINE` is not parsed. Python's parser cannot be stopped midway and needs up to about 1 KB per
character (`a;a;a;`), so it is given at most `MAX_PYTHON_CHARS`; no checker is given more than
`MAX_CHECK_CHARS`. JSON, TOML and YAML build little (YAML is only scanned).
"""

from __future__ import annotations

import ast
import gc
import json
import os
import re
import resource
import sys
import time
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from functools import cache

from coretools.sandbox import MAX_PIPELINE, ascii_view, longest_pipeline

MAX_CHECK_CHARS = 2 * 1024 * 1024
MAX_PYTHON_CHARS = 128 * 1024  # at most about 1 KB each: 128 MiB
MAX_TREE_SECONDS = 0.3  # of this thread's CPU time
MAX_TREE_BYTES = 128 * 1024 * 1024
MAX_SHOWN = 80
_CHUNK = 64 * 1024
MAX_REMEMBERED = 256
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is in bytes there, in KiB on Linux
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MEASURE_EVERY = 8  # tree-sitter progress calls (each about 100 parser operations) between two measures


class Skipped:
    """A check not done for its cost, and why (`reason` finishes "the syntax ... was not checked (...)")."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


# (line, message) of the first syntax error of a text, None when it parses, or `Skipped`.
Outcome = "tuple[int, str] | Skipped | None"
Checker = Callable[[str], Outcome]
_PYTHON = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
_TOML_AT = re.compile(r"\(at line (\d+), column \d+\)|\(at end of document\)")
_SHEBANG = re.compile(r"#![^\n]*\b(python[0-9.]*|bash|sh|zsh|ksh|node)\b")


def syntax_note(path: str, old: str, new: str) -> str | None:
    """The note for the result of an edit of `path` from `old` ('' for a new file) to `new`, or None."""
    try:
        return _note(path, old, new)
    except Exception:  # noqa: BLE001 - a checker that fails says nothing about the file
        return None


def _note(path: str, old: str, new: str) -> str | None:
    kind = language(path, new)
    if kind is None:
        return None
    label, check = kind
    error = _outcome(path, label, check, new)
    if isinstance(error, Skipped):
        _remember(path, label, new, error)
        return f"Note: the syntax of this file was not checked ({label}: {error.reason})."
    found = _introduced(path, label, check, old, new, error)
    _remember(path, label, new, error)
    return None if found is None else f"Note: after this edit, {found}."


def introduced_error(path: str, old: str, new: str) -> str | None:
    """"line N has a syntax error (label: message): `text`" when `new` has a syntax error and `old` had none;
    else None (a check skipped or failed included). Unlike `syntax_note`, it remembers nothing: it judges a
    candidate that may never be written."""
    try:
        kind = language(path, new)
        if kind is None:
            return None
        label, check = kind
        error = _outcome(path, label, check, new)
        return None if isinstance(error, Skipped) else _introduced(path, label, check, old, new, error)
    except Exception:  # noqa: BLE001 - a checker that fails says nothing about the file
        return None


def _introduced(path: str, label: str, check: Checker, old: str, new: str, error: Outcome) -> str | None:
    """What `syntax_note` and `introduced_error` say of the new text's `error`, None when there is none or
    the old text was broken too (an old text whose check was skipped is not known to be broken)."""
    if error is None or bool(old.strip()) and _known_error(_outcome(path, label, check, old)):
        return None
    line, message = error  # type: ignore[misc]
    text = _line_text(new, line)
    shown = f": `{text}`" if text else ""
    return f"line {line} has a syntax error ({label}: {message}){shown}"


# path -> (checker label, text length, text hash, outcome) of the text the last edit of the file wrote
_outcomes: OrderedDict[str, tuple[str, int, int, Outcome]] = OrderedDict()
_outcomes_lock = threading.Lock()


def _outcome(path: str, label: str, check: Checker, text: str) -> Outcome:
    """`check(text)`, or its outcome when `text` is the one remembered for `path`."""
    with _outcomes_lock:
        known = _outcomes.get(path)
    if known is not None and known[:3] == (label, len(text), hash(text)):
        return known[3]
    if len(text) > MAX_CHECK_CHARS:
        return _too_long(MAX_CHECK_CHARS)
    return check(text)


def _known_error(outcome: Outcome) -> bool:
    return outcome is not None and not isinstance(outcome, Skipped)


def _too_long(limit: int) -> Skipped:
    return Skipped(f"the file is over {limit:,} characters, the most this check parses")


def _remember(path: str, label: str, text: str, outcome: Outcome) -> None:
    """Remember `text`, of outcome `outcome`, as the text of `path` from now on."""
    with _outcomes_lock:
        _outcomes.pop(path, None)
        _outcomes[path] = (label, len(text), hash(text), outcome)
        while len(_outcomes) > MAX_REMEMBERED:
            _outcomes.popitem(last=False)


def language(path: str, text: str) -> tuple[str, Checker] | None:
    """(label, checker) for a file, by its name, or by a `#!` line for a file without an extension."""
    name = path.rsplit("/", 1)[-1].lower()
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]()
    if not suffix and (bang := _SHEBANG.match(text)):
        program = bang.group(1)
        key = "py" if program.startswith("python") else "js" if program == "node" else "sh"
        return _BY_SUFFIX[key]()
    return None


def _python() -> tuple[str, Checker]:
    return _PYTHON, _check_python


def _check_python(text: str) -> Outcome:
    if len(text) > MAX_PYTHON_CHARS:
        return _too_long(MAX_PYTHON_CHARS)
    # No garbage collection while the tree is built: none of it is garbage before the parse returns, and the
    # collections its allocations set off, each going through the server's heap, doubled the time of a 20 KB
    # file. Whoever found collection on turns it back on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                # On a syntax error CPython opens the "file name" to quote the bad line; the default name,
                # "<unknown>", is looked up in the server's working directory (and read, if such a file exists)
                # on every failed parse. An empty name is never a file; the line comes from the text instead.
                ast.parse(text, filename="")
            except SyntaxError as exc:
                return exc.lineno or 1, exc.msg
            except ValueError as exc:  # e.g. a NUL character
                return 1, str(exc)
        return None
    finally:
        if collecting:
            gc.enable()


def _json() -> tuple[str, Checker]:
    return "JSON", _check_json


def _check_json(text: str) -> tuple[int, str] | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno, exc.msg
    except RecursionError:
        return None
    return None


def _toml() -> tuple[str, Checker] | None:
    try:
        import tomllib  # noqa: F401 - Python 3.11+
    except ImportError:
        return None
    return "TOML", _check_toml


def _check_toml(text: str) -> tuple[int, str] | None:
    import tomllib

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_AT.search(message)
        line = int(found.group(1)) if found and found.group(1) else max(1, text.count("\n"))
        return line, _TOML_AT.sub("", message).strip()
    return None


def _yaml() -> tuple[str, Checker]:
    return "YAML", _check_yaml


def _check_yaml(text: str) -> tuple[int, str] | None:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for _ in yaml.parse(text, Loader=loader):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        return (mark.line + 1 if mark else 1), (exc.problem or exc.context or "invalid YAML")
    except yaml.YAMLError as exc:
        return 1, str(exc).splitlines()[0]
    return None


@cache
def _grammar(module: str, attribute: str) -> object | None:
    """A tree-sitter Language from a grammar package, or None when it is missing or incompatible."""
    try:
        import importlib

        import tree_sitter

        return tree_sitter.Language(getattr(importlib.import_module(module), attribute)())
    except Exception:  # noqa: BLE001 - a grammar that does not load just means no check
        return None


def _tree_sitter(
    label: str, module: str, attribute: str = "language", *, refuse: Callable[[str], Skipped | None] | None = None
) -> Callable[[], tuple[str, Checker] | None]:
    """A tree-sitter checker; `refuse(text)`, if given, says why a text is not to be parsed at all."""

    def kind() -> tuple[str, Checker] | None:
        grammar = _grammar(module, attribute)
        if grammar is None:
            return None
        if refuse is None:
            return label, lambda text: _check_tree(grammar, text)
        return label, lambda text: refuse(text) or _check_tree(grammar, text)

    return kind


def _long_pipeline(text: str) -> Skipped | None:
    """Whether a shell text has a pipeline of over `MAX_PIPELINE` stages (a linear scan, which may count a `|`
    in a string or comment too: such a text is only left unchecked)."""
    longest = longest_pipeline(text)
    if longest <= MAX_PIPELINE:
        return None
    return Skipped(f"it has a pipeline of {longest + 1:,} commands, over the {MAX_PIPELINE + 1:,} the check parses")


def _check_tree(grammar: object, text: str) -> Outcome:
    """The first error of a tree-sitter parse, or None; `Skipped` when the parse outgrew its bounds (see the
    module's docstring). The grammar sees the ASCII view of the text (`grammar_input`), so no scanner meets a
    code point it cannot classify."""
    import tree_sitter

    data = text.encode("utf-8")
    view = ascii_view(data)
    with _ParseBudget() as budget:
        try:
            tree = tree_sitter.Parser(grammar).parse(  # type: ignore[arg-type]
                lambda offset, _point: view[offset : offset + _CHUNK], progress_callback=budget.spent
            )
        except ValueError:  # cancelled by the progress callback
            return budget.skipped or Skipped("the parse was cancelled")
    if tree is None:
        return None
    node = tree.root_node
    if not node.has_error:
        return None
    while True:
        if node.is_missing:
            return node.start_point[0] + 1, f"missing `{node.type}`"
        if node.is_error:
            return node.start_point[0] + 1, _unexpected(node, data)
        child = next((c for c in node.children if c.has_error or c.is_missing), None)
        if child is None:
            return node.start_point[0] + 1, "syntax error"
        node = child


class _ParseBudget:
    """What one tree-sitter parse may spend: `MAX_TREE_SECONDS` of this thread's CPU time and `MAX_TREE_BYTES`
    more resident memory than the server had when it began (read from /proc/self/statm; where there is none,
    the peak is compared instead). `spent` is the parser's progress callback (True stops the parse); both
    are measured every `_MEASURE_EVERY` calls."""

    def __init__(self) -> None:
        try:
            self._statm: int | None = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._statm = None
        self._cpu = time.thread_time() + MAX_TREE_SECONDS
        self._memory = self._resident() + MAX_TREE_BYTES
        self._calls = 0
        self.skipped: Skipped | None = None

    def __enter__(self) -> _ParseBudget:
        return self

    def __exit__(self, *_: object) -> None:
        if self._statm is not None:
            os.close(self._statm)

    def _resident(self) -> int:
        if self._statm is None:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _RSS_UNIT
        return int(os.pread(self._statm, 64, 0).split()[1]) * _PAGE

    def spent(self, *_: object) -> bool:
        self._calls += 1
        if self._calls % _MEASURE_EVERY:
            return False
        if self._resident() > self._memory:
            self.skipped = Skipped(f"the parse needed more than {MAX_TREE_BYTES >> 20} MiB of memory")
        elif time.thread_time() > self._cpu:
            self.skipped = Skipped(f"the parse took more than {MAX_TREE_SECONDS:g} s")
        return self.skipped is not None


def _unexpected(node: object, data: bytes) -> str:
    """What an ERROR node holds: its first token, shown short."""
    leaf = node
    while leaf.children:  # type: ignore[attr-defined]
        leaf = leaf.children[0]  # type: ignore[attr-defined]
    raw = data[leaf.start_byte : leaf.end_byte]  # type: ignore[attr-defined]
    token = raw.decode("utf-8", "replace").split("\n", 1)[0].strip()
    return f"unexpected `{token[:20]}`" if token else "unexpected input"


def _line_text(text: str, line: int) -> str:
    """Line `line` (1-based) of `text`, stripped and shortened for the note."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    end = text.find("\n", start)
    shown = text[start:len(text) if end < 0 else end].strip().replace("`", "'")
    return shown if len(shown) <= MAX_SHOWN else shown[:MAX_SHOWN] + "..."


_BY_SUFFIX: dict[str, Callable[[], tuple[str, Checker] | None]] = {
    "py": _python, "pyi": _python, "pyw": _python,
    "json": _json,
    "toml": _toml,
    "yaml": _yaml, "yml": _yaml,
    "sh": _tree_sitter("shell", "tree_sitter_bash", refuse=_long_pipeline),
    "bash": _tree_sitter("shell", "tree_sitter_bash", refuse=_long_pipeline),
    "js": _tree_sitter("JavaScript", "tree_sitter_javascript"),
    "mjs": _tree_sitter("JavaScript", "tree_sitter_javascript"),
    "cjs": _tree_sitter("JavaScript", "tree_sitter_javascript"),
    "jsx": _tree_sitter("JavaScript", "tree_sitter_javascript"),
    "ts": _tree_sitter("TypeScript", "tree_sitter_typescript", "language_typescript"),
    "mts": _tree_sitter("TypeScript", "tree_sitter_typescript", "language_typescript"),
    "cts": _tree_sitter("TypeScript", "tree_sitter_typescript", "language_typescript"),
    "tsx": _tree_sitter("TSX", "tree_sitter_typescript", "language_tsx"),
    "go": _tree_sitter("Go", "tree_sitter_go"),
    "rs": _tree_sitter("Rust", "tree_sitter_rust"),
}
