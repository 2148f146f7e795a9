"""Near-miss recovery of `replace`: per-class recovery rates, wrong or corrupting edits and negative refusals
on the corpus of `nearmiss_corpus.py` (real third-party code, pinned versions), then the time of one
replace call on a file of about 60 KB, per class, fuzzy included, with worst cases for the fuzzy search
(blocks of 10 to 80 lines that are near nothing, so every window is examined).

Two more classes are built here from the same files:

- mixed_indent: old_string and new_string each in an indentation of their own (old_string dedented to
  column 0 or shifted by 2, new_string in the file's indentation, dedented to column 0, or at column 2); the
  edit must land in the file's indentation;
- replay: an edit sent twice (a literal one, or a corpus near miss); the first applies, the second must be
  answered "already applied" with the file as the first left it. Recovered counts those answers.

Every call goes through the real tool (validation, sandbox, plan, atomic write) in one server tool set.

Run: uv run python benchmarks/bench_nearmiss.py [--per-class 60] [--per-negative 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.nearmiss_corpus import (
    BIG_SOURCE,
    NEGATIVE,
    POSITIVE,
    Case,
    Edit,
    Source,
    corpus,
    negative,
    positive,
    read_source,
    sources,
)

MIXED = ("old 0, new file", "old +2, new file", "old +2, new 0", "old 0, new 2", "old +2 trailing, new 0")


class Tools:
    def __init__(self, root: Path) -> None:
        from coretools.cli import build_parser
        from coretools.sandbox.gateway import Workspace
        from coretools.workspace.hints import HintedWorkspace
        from coretools.server.config import ServerConfig
        from coretools.server.toolset import ToolSet, tool_options

        ns = build_parser().parse_args(["serve", "--root", str(root)])
        roots = [Workspace.check_root(r, allow_broad=True) for r in ns.roots]
        self.config = ServerConfig.from_namespace(ns, roots=roots, tool_options=tool_options(ns))
        self.toolset = ToolSet(self.config)
        self.ws = HintedWorkspace(self.config.roots, allow_protected=self.config.allow_protected)

    async def replace(self, path: Path, old: str, new: str):
        from coretools.tools.base import ToolContext

        args = {"file_path": str(path), "old_string": old, "new_string": new}
        return await self.toolset.call("replace", args, ToolContext(workspace=self.ws))


def case_file(root: Path, case: Case) -> Path:
    """The case's file, named with its source's suffix (the syntax check goes by it)."""
    return root / f"case{Path(case.source.split(':', 1)[-1]).suffix or '.txt'}"


async def run(tools: Tools, root: Path, case: Case) -> tuple[str, float]:
    """'ok', 'missed', 'wrong', or 'broken': a positive whose right result has a syntax error the file has
    not, refused with the file untouched (applied, it is 'wrong')."""
    from coretools.tools.textedit import introduced_error

    f = case_file(root, case)
    data = case.text.encode()
    f.write_bytes(data)
    t0 = time.perf_counter()
    res = await tools.replace(f, case.old, case.new)
    took = time.perf_counter() - t0
    after = f.read_bytes()
    if case.positive:
        assert case.expected is not None
        if introduced_error(f.name, case.text, case.expected) is not None:
            return ("broken" if res.is_error and after == data else "wrong"), took
        if res.is_error:
            return ("missed" if after == data else "wrong"), took
        return ("ok" if after == case.expected.encode() else "wrong"), took
    return ("ok" if res.is_error and after == data else "wrong"), took


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" "))]


def _block(rng: random.Random, src: Source) -> tuple[int, list[str]] | None:
    """A block of 3 to 10 real lines, space-indented, that occurs once in the file (ignoring whitespace)."""
    lines = src.lines
    keys = [line.strip() for line in lines]
    for _ in range(200):
        n = rng.randint(3, 10)
        start = rng.randrange(0, max(1, len(lines) - n - 1))
        block = lines[start : start + n]
        content = [b for b in block if b.strip()]
        if len(content) < 3 or sum(len(b.strip()) for b in content) < 60 or not block[0].strip():
            continue
        if "\t" in "".join(block):
            continue
        want = keys[start : start + n]
        if sum(1 for i in range(len(lines) - n + 1) if keys[i : i + n] == want) == 1:
            return start, block
    return None


def _edit(rng: random.Random, block: list[str]) -> Edit:
    """Rename a word, insert a line or delete one, as the corpus' edits do."""
    j = rng.choice([i for i, b in enumerate(block) if b.strip()])
    kind = rng.choice(("rename", "insert", "delete" if len(block) >= 4 else "insert"))
    words = [w for w in block[j].replace("(", " ").replace(".", " ").split() if w.isidentifier() and len(w) > 2]
    if kind == "rename":
        return Edit("rename", j, rng.choice(words)) if words else Edit("insert", j)
    return Edit(kind, j)


def _shift(lines: list[str], cols: int, trailing: bool = False) -> list[str]:
    low = min(len(_indent(x)) for x in lines if x.strip())
    out = []
    for line in lines:
        if not line.strip():
            out.append("")
        elif cols >= 0:
            out.append(" " * cols + line + (" " if trailing else ""))
        else:
            out.append(line[low:])
    return out


def mixed_indent(rng: random.Random, srcs: list[Source], n: int) -> Case | None:
    """old_string and new_string written in different indentations (see MIXED)."""
    src = rng.choice(srcs)
    picked = _block(rng, src)
    if picked is None:
        return None
    start, block = picked
    low = min(len(_indent(x)) for x in block if x.strip())
    how = rng.choice(MIXED if low else [m for m in MIXED if not m.startswith("old 0")])
    edit = _edit(rng, block)
    true_new = edit.apply(block)
    old_lines = _shift(block, -1) if how.startswith("old 0") else _shift(block, 2, trailing="trailing" in how)
    if how.endswith("new file"):
        new_lines = list(true_new)
    elif how.endswith("new 0"):
        new_lines = _shift(true_new, -1)
    else:
        new_lines = [" " * 2 + x if x else x for x in _shift(true_new, -1)]
    trail = rng.random() < 0.7
    join = "\n".join
    before = "".join(line + "\n" for line in src.lines[:start])
    after = ("" if trail else "\n") + "\n".join(src.lines[start + len(block) :])
    text = before + join(block) + ("\n" if trail else "") + after
    expected = before + join(true_new) + ("\n" if trail else "") + after
    old, new = join(old_lines) + ("\n" if trail else ""), join(new_lines) + ("\n" if trail else "")
    if text != src.text or old in text or old == new or expected == text:
        return None
    return Case(f"mixed-{n}", "mixed_indent", src.label, text, old, new, expected)


def literal_edit(rng: random.Random, srcs: list[Source], n: int) -> Case | None:
    """An edit whose old_string is the file's text exactly (the first of two calls of a replay)."""
    src = rng.choice(srcs)
    picked = _block(rng, src)
    if picked is None:
        return None
    start, block = picked
    new_block = _edit(rng, block).apply(block)
    before = "".join(line + "\n" for line in src.lines[:start])
    after = "\n" + "\n".join(src.lines[start + len(block) :])
    old, new = "\n".join(block), "\n".join(new_block)
    if old == new:
        return None
    return Case(f"literal-{n}", "replay", src.label, src.text, old, new, before + new + after)


def replays(count: int, seed: int = 32) -> list[Case]:
    """Half literal edits, half the corpus' near misses (each class in turn), to be sent twice."""
    rng = random.Random(f"{seed}:replay")
    srcs = sources()
    out: list[Case] = []
    while len(out) < count // 2:
        case = literal_edit(rng, srcs, len(out))
        if case is not None:
            out.append(case)
    near = [c for c in corpus(max(1, count // 2 // len(POSITIVE) + 1), 0) if c.positive]
    out += [Case(f"replay-{c.id}", "replay", c.source, c.text, c.old, c.new, c.expected) for c in near]
    return out[:count]


def mixed_cases(count: int, seed: int = 32) -> list[Case]:
    rng = random.Random(f"{seed}:mixed")
    srcs = [s for s in sources() if "\n    " in s.text]
    out: list[Case] = []
    while len(out) < count:
        case = mixed_indent(rng, srcs, len(out))
        if case is not None:
            out.append(case)
    return out


async def replay(tools: Tools, root: Path, case: Case) -> str:
    """'ok' when the second call is answered "already applied" and the file is as the first call left it;
    'missed' when it is refused otherwise, file untouched; 'wrong' when it changed the file; 'first' when the
    first call did not apply the edit as the corpus expects (not counted)."""
    f = case_file(root, case)
    f.write_bytes(case.text.encode())
    first = await tools.replace(f, case.old, case.new)
    if first.is_error or f.read_bytes() != (case.expected or "").encode():
        return "first"
    second = await tools.replace(f, case.old, case.new)
    if f.read_bytes() != (case.expected or "").encode():
        return "wrong"
    said = "\n".join(b.text for b in second.content if getattr(b, "text", None))
    return "ok" if second.is_error and said.startswith("Already applied at lines") else "missed"


def far_blocks(text: str, rng: random.Random) -> list[Case]:
    """Blocks near nothing in `text`: the fuzzy search examines every window and accepts none."""
    words = text.split()
    cases = []
    for lines in (10, 40, 80):
        block = "\n".join(" ".join(rng.choice(words) for _ in range(6)) for _ in range(lines)) + "\n"
        cases.append(Case(f"far-{lines}", f"fuzzy worst ({lines} lines)", "synthetic", text, block, "x\n", None))
    return cases


async def main(per_class: int, per_negative: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tools = Tools(root)
        await tools.toolset.start()
        cases = corpus(per_class, per_negative)
        outcome: dict[str, Counter] = {}
        for case in cases:
            result, _ = await run(tools, root, case)
            outcome.setdefault(case.kind, Counter())[result] += 1
        print(f"corpus: {len(cases)} cases from {len({c.source for c in cases})} files of pinned packages")
        print("(cases: positives whose right result parses; broken: those whose right result has a syntax error "
              "the file has not, all refused)")
        print(f"{'class':18}{'cases':>7}{'recovered':>11}{'rate':>8}{'wrong':>7}{'broken':>8}")

        def row(kind: str, c: Counter) -> None:
            n = sum(c.values()) - c["broken"] - c["first"]
            print(f"{kind:18}{n:>7}{c['ok']:>11}{c['ok'] / max(n, 1):>8.1%}{c['wrong']:>7}{c['broken']:>8}")

        total: Counter = Counter()
        for kind in POSITIVE:
            total += outcome.get(kind, Counter())
            row(kind, outcome.get(kind, Counter()))
        row("all positives", total)
        row("mixed_indent", Counter([(await run(tools, root, case))[0] for case in mixed_cases(per_class * 2)]))
        row("replay", Counter([await replay(tools, root, case) for case in replays(per_class * 2)]))
        print(f"\n{'negative':18}{'cases':>7}{'refused':>11}{'wrong':>7}")
        for kind in NEGATIVE:
            c = outcome.get(kind, Counter())
            print(f"{kind:18}{sum(c.values()):>7}{c['ok']:>11}{c['wrong']:>7}")

        big = read_source(*BIG_SOURCE)
        print(f"\ntime per replace on {big.label} ({len(big.text.encode()):,} bytes):")
        print(f"{'class':24}{'calls':>6}{'ok':>5}{'p50 ms':>9}{'max ms':>9}")
        rng = random.Random(60)
        timed: dict[str, list[tuple[str, float]]] = {}
        for kind in (*POSITIVE, *NEGATIVE):
            make = positive if kind in POSITIVE else negative
            for n in range(40):
                if kind == "tabs_file":
                    break
                case = make(kind, rng, [big] if kind != "foreign" else [big, read_source("h11", "h11/_connection.py")],
                            n)
                if case is not None and case.text.count("\n") >= big.text.count("\n"):
                    timed.setdefault(kind, []).append(await run(tools, root, case))
        for case in far_blocks(big.text, rng):
            timed.setdefault(case.kind, []).append(await run(tools, root, case))
        for kind, runs in timed.items():
            ms = [t * 1000 for _, t in runs]
            ok = sum(1 for r, _ in runs if r in ("ok", "broken"))  # the right outcome, a refusal for 'broken'
            print(f"{kind:24}{len(runs):>6}{ok:>5}{statistics.median(ms):>9.1f}{max(ms):>9.1f}")
        await tools.toolset.aclose()
        tools.ws.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-class", type=int, default=60)
    parser.add_argument("--per-negative", type=int, default=30)
    ns = parser.parse_args()
    anyio.run(main, ns.per_class, ns.per_negative)
