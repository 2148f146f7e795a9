"""apply_patch on real multi-file changes: the commits of a package's history (pyte, in the locked
environment), each rendered as a Codex-format patch and applied to the files as they were before it through the
real tool; the rate at which the result is exactly the commit's files, then the rate when the patch's context
lines carry the whitespace slips models make:

- trailing: every context line ends in two spaces;
- tabs: every context line's leading 4-space groups written as tabs (and tabs as 4 spaces);
- blanks: every blank context line left out;
- all three at once.

A slip case is "ok" when the files are exactly the commit's, "refused" when the tool refused with no file
changed, "wrong" otherwise (applied, but not to the commit's content; or a refusal that changed a file).

The corpus (benchmarks/data/patch_corpus_pyte.json.xz: each commit's changed files, before and after) is made
once from a clone of https://github.com/selectel/pyte with `--build PATH_TO_CLONE`; the run needs nothing but
it. The renderer writes what a careful model writes: 3 lines of context, the hunks of one file in order, and
where the context alone would first match earlier in the file, more context or an @@ line naming a line just
above the hunk; a file whose last line break changes is left out (the format cannot say it).

Run: uv run python benchmarks/bench_patch_corpus.py [--build /path/to/pyte] [--limit N]
"""

from __future__ import annotations

import argparse
import difflib
import json
import lzma
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CORPUS = REPO / "benchmarks" / "data" / "patch_corpus_pyte.json.xz"
SOURCE = "https://github.com/selectel/pyte"
MAX_FILE_BYTES = 64 * 1024
MAX_CASES = 150
SLIPS = ("trailing", "tabs", "blanks", "all")


# -- the corpus -----------------------------------------------------------------------------------------------


def build(clone: Path, limit: int) -> dict:
    """The newest `limit` commits of `clone` (no merges) that change 2 to 12 text files, each file's content
    before and after (None: absent), renames followed."""
    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True).stdout

    cases = []
    for line in git("log", "--no-merges", "--format=%H %P").decode().splitlines():
        commit, *parents = line.split()
        if len(parents) != 1:
            continue
        fields = git("diff", "--name-status", "-M", "-z", parents[0], commit).decode().split("\0")
        files, i, usable = [], 0, True
        while i < len(fields) - 1:
            status = fields[i]
            if status.startswith("R"):
                old_path, new_path, i = fields[i + 1], fields[i + 2], i + 3
            else:
                old_path = new_path = fields[i + 1]
                i += 2
            old = _blob(git, parents[0], old_path) if status[0] != "A" else None
            new = _blob(git, commit, new_path) if status[0] != "D" else None
            if old is False or new is False:
                usable = False
                break
            files.append({"old_path": old_path, "new_path": new_path, "old": old, "new": new})
        if usable and 2 <= len(files) <= 12:
            subject = git("log", "-1", "--format=%s", commit).decode().strip()
            cases.append({"commit": commit, "subject": subject, "files": files})
        if len(cases) >= limit:
            break
    return {"source": SOURCE, "cases": cases}


def _blob(git, commit: str, path: str) -> str | None | bool:
    """The file's text at `commit`; False when it is not UTF-8 text within the size bound."""
    try:
        data = git("show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return False
    if len(data) > MAX_FILE_BYTES or b"\0" in data:
        return False
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return False


# -- rendering ------------------------------------------------------------------------------------------------


def render(case: dict) -> tuple[str | None, list[dict]]:
    """The case as a Codex patch, and the files it changes; None when a file cannot be said in the format."""
    body, files = [], []
    for f in case["files"]:
        old, new = f["old"], f["new"]
        if old is not None and new is not None and old and new and old.endswith("\n") != new.endswith("\n"):
            return None, []
        if old is None:
            if new and not new.endswith("\n"):
                return None, []
            body.append(f"*** Add File: {f['new_path']}")
            body += ["+" + line for line in new.split("\n")[:-1]] if new else []
        elif new is None:
            body.append(f"*** Delete File: {f['old_path']}")
        else:
            body.append(f"*** Update File: {f['old_path']}")
            if f["new_path"] != f["old_path"]:
                body.append(f"*** Move to: {f['new_path']}")
            body += _hunks(old, new)
        files.append(f)
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]), files


def _lines(text: str) -> list[str]:
    return (text[:-1] if text.endswith("\n") else text).split("\n") if text else []


def _hunks(old: str, new: str) -> list[str]:
    """The hunks of one file: difflib's groups with 3 lines of context, each widened (or given an @@ line)
    until, searched as the tool searches from where the previous hunk ended, it is found first where it is."""
    a, b = _lines(old), _lines(new)
    out, at = [], 0
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3):
        start, end = group[0][1], group[-1][2]
        ops = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                ops += [(" ", line) for line in a[i1:i2]]
            else:
                ops += [("-", line) for line in a[i1:i2]] + [("+", line) for line in b[j1:j2]]
        header = ""
        while _first(a, [t for m, t in ops if m != "+"], at) != start:
            if start > at:
                start -= 1
                ops.insert(0, (" ", a[start]))
            else:
                break
        if _first(a, [t for m, t in ops if m != "+"], at) != start:
            header = next((a[h] for h in range(start - 1, at - 1, -1) if a[h].strip() and _first(a, [a[h]], at) == h
                           and _first(a, [t for m, t in ops if m != "+"], h + 1) == start), "")
        out.append(f"@@ {header}" if header else "@@")
        out += [m + t for m, t in ops]
        at = end
    return out


def _first(lines: list[str], pattern: list[str], at: int) -> int | None:
    if not pattern:
        return at
    for i in range(at, len(lines) - len(pattern) + 1):
        if lines[i:i + len(pattern)] == pattern:
            return i
    return None


def slipped(patch: str, slip: str) -> str:
    """`patch` with the slip in its context lines (' ' lines of hunks only)."""
    out, in_hunk = [], False
    for line in patch.split("\n"):
        if line.startswith("@@"):
            in_hunk = True
        elif line.startswith("***"):
            in_hunk = False
        if not (in_hunk and line.startswith(" ")):
            out.append(line)
            continue
        text = line[1:]
        if slip in ("blanks", "all") and not text.strip():
            continue
        if slip in ("tabs", "all"):
            text = _swap_indent(text)
        if slip in ("trailing", "all"):
            text += "  "
        out.append(" " + text)
    return "\n".join(out)


def _swap_indent(text: str) -> str:
    body = text.lstrip(" \t")
    lead = text[: len(text) - len(body)]
    swapped = lead.replace("\t", "    ") if "\t" in lead else lead.replace("    ", "\t")
    return swapped + body


# -- applying -------------------------------------------------------------------------------------------------


class Tools:
    """The server's tool set with apply_patch published, on one root."""

    def __init__(self, root: Path) -> None:
        from coretools.cli import build_parser
        from coretools.sandbox.gateway import Workspace
        from coretools.server.config import ServerConfig
        from coretools.server.toolset import ToolSet, tool_options
        from coretools.workspace.hints import HintedWorkspace

        ns = build_parser().parse_args(["serve", "--root", str(root), "--tools", "apply_patch"])
        roots = [Workspace.check_root(r, allow_broad=True) for r in ns.roots]
        self.config = ServerConfig.from_namespace(ns, roots=roots, tool_options=tool_options(ns))
        self.toolset = ToolSet(self.config)
        self.ws = HintedWorkspace(self.config.roots, allow_protected=self.config.allow_protected)

    async def apply(self, patch: str):
        from coretools.tools.base import ToolContext

        return await self.toolset.call("apply_patch", {"patch": patch}, ToolContext(workspace=self.ws))


def _clear(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_bytes().decode() for p in root.rglob("*") if p.is_file()}


async def attempt(tools: Tools, root: Path, files: list[dict], patch: str) -> tuple[str, str]:
    """('ok' | 'refused' | 'wrong', the tool's text) of one patch on the files before it."""
    _clear(root)
    for f in files:
        if f["old"] is not None:
            (root / f["old_path"]).parent.mkdir(parents=True, exist_ok=True)
            (root / f["old_path"]).write_bytes(f["old"].encode())
    before = _tree(root)
    result = await tools.apply(patch)
    text = "\n".join(getattr(b, "text", "") for b in result.content)
    after = _tree(root)
    if result.is_error:
        return ("refused" if after == before else "wrong"), text
    want = {f["new_path"]: f["new"] for f in files if f["new"] is not None}
    return ("ok" if after == want else "wrong"), text


async def main(limit: int | None, verbose: bool) -> None:
    corpus = json.loads(lzma.decompress(CORPUS.read_bytes()))
    cases = corpus["cases"][:limit]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CORETOOLS_STATE_DIR"] = str(Path(tmp) / "state")
        root = Path(tmp) / "root"
        root.mkdir()
        tools = Tools(root)
        rendered = [(case, *render(case)) for case in cases]
        usable = [(case, patch, files) for case, patch, files in rendered if patch is not None]
        counts = {name: Counter() for name in ("exact", *SLIPS)}
        hunks = sum(patch.count("\n@@") for _, patch, _ in usable)
        for case, patch, files in usable:
            for name in counts:
                outcome, text = await attempt(tools, root, files, patch if name == "exact" else slipped(patch, name))
                counts[name][outcome] += 1
                if verbose and outcome != "ok":
                    print(f"--- {name} {outcome} {case['commit'][:10]} {case['subject']}\n{text[:800]}\n")
    n = len(usable)
    changed = sum(len(files) for _, _, files in usable)
    print(f"corpus: {corpus['source']}, {len(cases)} commits changing 2-12 files; {n} expressible "
          f"({len(cases) - n} change a file's last line break), {changed} files, {hunks} hunks")
    print(f"{'patches':<10} {'ok':>5} {'refused':>8} {'wrong':>6} {'rate':>7}")
    for name, c in counts.items():
        print(f"{name:<10} {c['ok']:>5} {c['refused']:>8} {c['wrong']:>6} {c['ok'] / max(n, 1):>7.1%}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, metavar="CLONE", help="make the corpus from this clone of pyte")
    parser.add_argument("--limit", type=int, help="the first N commits only")
    parser.add_argument("--verbose", action="store_true", help="print each case that is not ok")
    ns = parser.parse_args()
    if ns.build:
        CORPUS.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(build(ns.build, ns.limit or MAX_CASES), ensure_ascii=False, sort_keys=True).encode()
        CORPUS.write_bytes(lzma.compress(data, preset=9))  # versions of the same files: xz keeps one copy
        print(f"wrote {CORPUS} ({CORPUS.stat().st_size:,} bytes)")
    else:
        anyio.run(main, ns.limit, ns.verbose)
