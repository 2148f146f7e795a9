"""A corpus of near-miss `replace` calls built from real third-party code: files of packages the locked
environment installs (pinned in PINS, the versions uv.lock resolves), so nothing is downloaded and every run
builds the same cases (fixed seeds).

Each positive case takes a block of real lines, makes an edit to it (rename a word, insert a line, delete a
line), and then writes both old_string and new_string the way a model gets them wrong:

- reindent: the block shifted (dedented to column 0, or indented 2 or 4 more);
- trailing_ws: trailing spaces on some lines;
- blank_indent: blank lines indented like the line after them;
- tabs: 4-space indentation written with tabs;
- tabs_file: a tab-indented file's block written with 4 spaces per tab;
- escaped: both strings over-escaped (\\n, \\t, \\" and \\\\ as two characters);
- token_ws: different whitespace between tokens (no space after commas, spaces inside brackets, none around =);
- typo: one character wrong (substituted, dropped, doubled) in an unchanged line of a block of 6+ lines.

The expected file is the original with the true block replaced by the true edit. Negatives must be refused
with the file untouched:

- ambiguous_lines: the block also occurs elsewhere at another indentation, old_string at a third;
- ambiguous_fuzzy: a copy of the block with one typo elsewhere, old_string with another typo;
- too_distant: a fifth of the block's characters changed;
- foreign: a block of another file.

Some positive cases use the file with CRLF line endings (old_string and new_string stay LF).

Run `python benchmarks/nearmiss_corpus.py` for a summary of the cases.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

PINS = {
    "anyio": "4.16.0", "httpx2": "2.16.2", "pydantic": "2.14.3", "markdownify": "1.2.3", "h11": "0.16.0",
    "attrs": "26.1.0", "lxml": "6.1.3", "jsonschema-specifications": "2025.9.1", "urllib3": "2.8.0",
    "uvicorn": "0.54.0", "mcp": "2.3.0", "pygments": "2.21.0",
}
SOURCES = [
    ("anyio", "anyio/_core/_fileio.py"),
    ("httpx2", "httpx2/_models.py"),
    ("pydantic", "pydantic/fields.py"),
    ("markdownify", "markdownify/__init__.py"),
    ("h11", "h11/_connection.py"),
    ("attrs", "attr/__init__.pyi"),
    ("lxml", "lxml/includes/libxslt/transform.h"),
    ("lxml", "lxml/includes/libxslt/xsltInternals.h"),
    ("lxml", "lxml/includes/xpath.pxd"),
    ("jsonschema-specifications", "jsonschema_specifications/schemas/draft7/metaschema.json"),
    ("urllib3", "urllib3/contrib/emscripten/emscripten_fetch_worker.js"),
    ("uvicorn", "uvicorn/protocols/http/h11_impl.py"),
    ("mcp", "mcp/server/lowlevel/server.py"),
]
BIG_SOURCE = ("pygments", "pygments/lexers/javascript.py")  # about 60 KB, for timing
POSITIVE = ("reindent", "trailing_ws", "blank_indent", "tabs", "tabs_file", "escaped", "token_ws", "typo")
NEGATIVE = ("ambiguous_lines", "ambiguous_fuzzy", "too_distant", "foreign")
SEED = 19


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    source: str  # "<package>==<version>:<path>"
    text: str  # the file's content as written
    old: str
    new: str
    expected: str | None  # the file after a correct edit; None: the call must be refused

    @property
    def positive(self) -> bool:
        return self.expected is not None


@dataclass(frozen=True)
class Source:
    label: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


def read_source(dist: str, path: str) -> Source:
    """A file of an installed distribution, refused if the installed version is not the pinned one (the corpus
    and the rates measured on it belong to those versions)."""
    version = metadata.version(dist)
    if version != PINS[dist]:
        raise RuntimeError(f"{dist} is {version}, the near-miss corpus is pinned to {PINS[dist]}: update PINS "
                           "in benchmarks/nearmiss_corpus.py (and re-check the measured rates)")
    located = metadata.distribution(dist).locate_file(path)
    return Source(f"{dist}=={version}:{path}", located.read_text(encoding="utf-8"))  # type: ignore[union-attr]


def sources() -> list[Source]:
    return [read_source(d, p) for d, p in SOURCES]


# -- blocks and edits -----------------------------------------------------------------------------------------


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _occurrences(lines: list[str], block: list[str]) -> int:
    keys = [b.strip() for b in block]
    stripped = [line.strip() for line in lines]
    return sum(1 for i in range(len(lines) - len(keys) + 1) if stripped[i : i + len(keys)] == keys)


def _pick_block(rng: random.Random, src: Source, size: tuple[int, int], ok: Callable[[list[str]], bool],
                tries: int = 400) -> tuple[int, list[str]] | None:
    lines = src.lines
    for _ in range(tries):
        n = rng.randint(*size)
        if len(lines) < n + 2:
            return None
        start = rng.randrange(0, len(lines) - n - 1)
        block = lines[start : start + n]
        content = [b for b in block if b.strip()]
        if len(content) < 3 or sum(len(b.strip()) for b in content) < 60 or not block[0].strip():
            continue
        if ok(block) and _occurrences(lines, block) == 1:
            return start, block
    return None


@dataclass(frozen=True)
class Edit:
    kind: str  # rename, insert, delete
    line: int
    word: str = ""

    def apply(self, block: list[str], style: Callable[[list[str]], list[str]] | None = None) -> list[str]:
        """The edited block; `style` writes the inserted line (as the caller wrote it, where the tool cannot
        know the file's spacing for new code)."""
        out = list(block)
        if self.kind == "rename":
            out[self.line] = out[self.line].replace(self.word, self.word + "_v2", 1)
        elif self.kind == "insert":
            added = _indent(block[self.line]) + f"log_step({self.line})"
            out.insert(self.line + 1, style([added])[0] if style else added)
        else:
            del out[self.line]
        return out


def _pick_edit(rng: random.Random, block: list[str], avoid: int = -1) -> Edit | None:
    choices = [i for i, b in enumerate(block) if b.strip() and i != avoid]
    if not choices:
        return None
    j = rng.choice(choices)
    kind = rng.choice(("rename", "rename", "insert", "delete" if len(block) >= 4 else "insert"))
    if kind == "rename":
        words = [w for w in re.findall(r"[A-Za-z_]\w{2,}", block[j])]
        if not words:
            return Edit("insert", j)
        return Edit(kind, j, rng.choice(words))
    return Edit(kind, j)


def _typo(rng: random.Random, line: str, kinds: tuple[str, ...] = ("sub", "drop", "double")) -> str:
    body = [i for i, c in enumerate(line) if not c.isspace() and (c.isalnum() or "sub" not in kinds[1:])]
    i = rng.choice(body or [len(line) - 1])
    what = rng.choice(kinds)
    if what == "drop":
        return line[:i] + line[i + 1 :]
    if what == "double":
        return line[:i] + line[i] + line[i:]
    c = line[i]
    repl = rng.choice([x for x in "abcdefghijklmnopqrstuvwxyz0123456789_" if x != c.lower() and x != c])
    return line[:i] + repl + line[i + 1 :]


# -- the ways a model gets a block wrong ------------------------------------------------------------------------


def _line_seed(line: str) -> int:
    return zlib.crc32(line.encode())


def _reindent(shift: int) -> Callable[[list[str]], list[str]]:
    def apply(lines: list[str]) -> list[str]:
        if shift < 0:
            return [line[-shift:] if line.strip() else "" for line in lines]
        return [" " * shift + line if line.strip() else line for line in lines]
    return apply


def _trailing(lines: list[str]) -> list[str]:
    return [line + " " * (1 + _line_seed(line) % 3) if line.strip() and _line_seed(line) % 2 else line
            for line in lines]


def _blank_indent(lines: list[str]) -> list[str]:
    out = list(lines)
    for i, line in enumerate(lines):
        if not line.strip():
            nxt = next((x for x in lines[i + 1 :] if x.strip()), "")
            out[i] = _indent(nxt)
    return out


def _spaces_to_tabs(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        ind = _indent(line)
        out.append("\t" * (len(ind) // 4) + " " * (len(ind) % 4) + line[len(ind):] if " " in ind else line)
    return out


def _tabs_to_spaces(lines: list[str]) -> list[str]:
    return [_indent(line).replace("\t", "    ") + line.lstrip(" \t") for line in lines]


def _token_ws(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        ind, body = _indent(line), line.lstrip(" \t")
        body = body.replace(", ", ",").replace("(", "( ").replace(")", " )").replace(" = ", "=")
        out.append(ind + body)
    return out


def escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace('"', '\\"')


# -- cases ----------------------------------------------------------------------------------------------------


def _requirements(kind: str) -> Callable[[list[str]], bool]:
    def indented(b: list[str]) -> bool:
        return any(_indent(x).startswith("    ") for x in b)
    return {
        "reindent": lambda b: True,
        "trailing_ws": lambda b: not any(x != x.rstrip() for x in b) and _trailing(b) != b,
        "blank_indent": lambda b: any(not x for x in b[1:-1]) and _blank_indent(b) != b,
        "tabs": lambda b: indented(b) and "\t" not in "".join(b),
        "tabs_file": lambda b: any(x.startswith("\t") and x.strip() for x in b),
        "escaped": lambda b: True,
        "token_ws": lambda b: _token_ws(b) != b,
        "typo": lambda b: sum(len(x.strip()) for x in b) >= 200,
    }[kind]


def _size(kind: str) -> tuple[int, int]:
    return (6, 14) if kind == "typo" else (3, 10)


def _transform(kind: str, rng: random.Random, block: list[str]) -> Callable[[list[str]], list[str]]:
    if kind == "reindent":
        low = min(len(_indent(x)) for x in block if x.strip())
        shifts = [2, 4] + ([-low] if low and "\t" not in "".join(block) else [])
        return _reindent(rng.choice(shifts))
    return {"trailing_ws": _trailing, "blank_indent": _blank_indent, "tabs": _spaces_to_tabs,
            "tabs_file": _tabs_to_spaces, "token_ws": _token_ws}.get(kind, lambda lines: list(lines))


def _join(lines: list[str], trail: bool) -> str:
    return "\n".join(lines) + ("\n" if trail else "")


def positive(kind: str, rng: random.Random, srcs: list[Source], n: int) -> Case | None:
    src = rng.choice(srcs)
    picked = _pick_block(rng, src, _size(kind), _requirements(kind))
    if picked is None:
        return None
    start, block = picked
    typo_at = -1
    caller_block = block
    if kind == "typo":
        typo_at = rng.choice([i for i, b in enumerate(block) if len(b.strip()) >= 8] or [0])
        caller_block = list(block)
        caller_block[typo_at] = _typo(rng, block[typo_at])
    edit = _pick_edit(rng, block, avoid=typo_at)
    if edit is None:
        return None
    trail = rng.random() < 0.7
    t = _transform(kind, rng, block)
    old, new = _join(t(caller_block), trail), _join(t(edit.apply(caller_block)), trail)
    if kind == "escaped":
        old, new = escape(old), escape(new)
    lines = src.lines
    true_old = _join(block, trail)
    true_new = _join(edit.apply(block, _token_ws if kind == "token_ws" else None), trail)
    before = "".join(line + "\n" for line in lines[:start])
    after = ("" if trail else "\n") + "\n".join(lines[start + len(block) :])
    text, expected = before + true_old + after, before + true_new + after
    assert text == src.text
    if old in text or old == new or expected == text:
        return None
    if rng.random() < 0.2:
        text, expected = text.replace("\n", "\r\n"), expected.replace("\n", "\r\n")
    return Case(f"{kind}-{n}", kind, src.label, text, old, new, expected)


def negative(kind: str, rng: random.Random, srcs: list[Source], n: int) -> Case | None:
    src = rng.choice(srcs)
    picked = _pick_block(rng, src, (4, 9), lambda b: sum(len(x.strip()) for x in b) >= 100)
    if picked is None:
        return None
    start, block = picked
    lines = src.lines
    edit = _pick_edit(rng, block)
    if edit is None:
        return None
    at = rng.choice([i for i in range(len(lines)) if not start <= i <= start + len(block)])
    if kind == "ambiguous_lines":
        copy = [" " * 4 + x if x.strip() else x for x in block]
        text_lines = lines[:at] + copy + lines[at:]
        caller = [" " * 2 + x if x.strip() else x for x in block]
    elif kind == "ambiguous_fuzzy":
        t1, t2 = rng.sample([i for i, b in enumerate(block) if len(b.strip()) >= 8] or [0, 0], 2)
        copy = list(block)
        copy[t1] = _typo(rng, block[t1], ("sub",))
        text_lines = lines[:at] + [""] + copy + [""] + lines[at:]
        caller = list(block)
        caller[t2] = _typo(rng, block[t2], ("sub",))
    elif kind == "too_distant":
        text_lines = lines
        caller = [_mutate(rng, x, 0.2) for x in block]
    else:
        other = rng.choice([s for s in srcs if s is not src])
        got = _pick_block(rng, other, (4, 9), lambda b: True)
        if got is None:
            return None
        text_lines, caller = lines, got[1]
    text = "\n".join(text_lines)
    old, new = _join(caller, True), _join(edit.apply(caller) if len(caller) == len(block) else caller + ["x"], True)
    if old == new:
        return None
    return Case(f"{kind}-{n}", kind, src.label, text, old, new, None)


def _mutate(rng: random.Random, line: str, share: float) -> str:
    chars = list(line)
    for i, c in enumerate(chars):
        if not c.isspace() and rng.random() < share:
            chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
    return "".join(chars)


def corpus(per_class: int = 25, per_negative: int = 15, seed: int = SEED) -> list[Case]:
    """`per_class` cases of each positive class and `per_negative` of each negative one, always the same
    for the same arguments (and pinned packages)."""
    srcs = sources()
    cases: list[Case] = []
    for kinds, count, make in ((POSITIVE, per_class, positive), (NEGATIVE, per_negative, negative)):
        for kind in kinds:
            rng = random.Random(f"{seed}:{kind}")
            usable = [s for s in srcs if kind != "tabs_file" or "\n\t" in s.text]
            made, tries = 0, 0
            while made < count and tries < count * 40:
                tries += 1
                case = make(kind, rng, usable, made)
                if case is not None:
                    cases.append(case)
                    made += 1
    return cases


if __name__ == "__main__":
    from collections import Counter

    all_cases = corpus()
    print(f"{len(all_cases)} cases from {len({c.source for c in all_cases})} files")
    for kind, count in Counter(c.kind for c in all_cases).items():
        print(f"  {kind:16} {count}")
