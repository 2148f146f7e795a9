"""How large the answers to a dozen typical calls are, for two checkouts of coretools side by side.

Run: ``uv run python benchmarks/bench_answer_sizes.py [--before DIR] [--after DIR]`` where each DIR is a
checkout of the repository (default: this one for both). To compare with an older revision:
``git worktree add /tmp/before <rev>`` then ``--before /tmp/before``.

Each call runs as ``python -m coretools call TOOL ARGS --root ROOT`` with ``PYTHONPATH`` pointing at the
checkout, so both revisions are measured the same way; the size is what the command prints, which is what a
model would read. The fixture: a 30,000-file tree, a 20,000-entry directory, a 6 MB minified file of
50,000-character lines, a 15 KB source file, built once in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def build(root: Path) -> None:
    for d in range(100):
        sub = root / "pkg" / f"module_{d:03d}"
        sub.mkdir(parents=True)
        for f in range(300):
            (sub / f"file_{f:03d}.py").write_text(f"import os\n\ndef f_{f}():\n    return {f}\n")
    wide = root / "wide"
    wide.mkdir()
    for i in range(20_000):
        (wide / f"entry-{i:05d}.txt").touch()
    line = ("function a(b){return b+1};var c=" + "x" * 49_950 + ";")[:50_000]
    (root / "app.min.js").write_text("\n".join([line] * 120) + "\n")
    (root / "src.py").write_text("".join(f"def handler_{i}(request):\n    return request.value + {i}\n\n" for i in range(300)))
    (root / "README.md").write_text("# project\n")


def calls(root: Path) -> list[tuple[str, str, dict]]:
    return [
        ("glob **/*.py (30,000 files)", "glob", {"pattern": "**/*.py"}),
        ("glob *.md", "glob", {"pattern": "*.md"}),
        ("list_directory root", "list_directory", {"path": str(root)}),
        ("list_directory 20,000 entries", "list_directory", {"path": str(root / "wide")}),
        ("read_file 15 KB source", "read_file", {"absolute_path": str(root / "src.py")}),
        ("read_file window 100+50", "read_file", {"absolute_path": str(root / "src.py"), "offset": 100, "limit": 50}),
        ("read_file 6 MB minified", "read_file", {"absolute_path": str(root / "app.min.js")}),
        ("read_many_files pkg/**/*.py", "read_many_files", {"paths": ["pkg/**/*.py"]}),
        ("search 'import' (30,000 files)", "search_file_content", {"pattern": "import"}),
        ("search 'return b' in minified", "search_file_content", {"pattern": "return b", "include": "*.js"}),
        ("shell ls -R pkg", "run_shell_command", {"command": "ls -R pkg"}),
        ("replace 12 lines in 15 KB", "replace", {
            "file_path": str(root / "src.py"),
            "old_string": "".join(f"def handler_{i}(request):\n    return request.value + {i}\n\n" for i in (10, 11, 12, 13)),
            "new_string": "".join(f"def handler_{i}(request):\n    return request.value - {i}\n\n" for i in (10, 11, 12, 13)),
        }),
    ]


def size(checkout: Path, root: Path, tool: str, args: dict) -> int:
    env = {**os.environ, "PYTHONPATH": str(checkout), "CORETOOLS_STATE_DIR": str(root.parent / "state")}
    proc = subprocess.run(
        [sys.executable, "-m", "coretools", "call", tool, json.dumps(args), "--root", str(root)],
        capture_output=True, text=True, env=env, cwd=checkout, timeout=300,
    )
    return len(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, default=REPO)
    parser.add_argument("--after", type=Path, default=REPO)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        columns = []
        for checkout in (opts.before, opts.after):
            if root.exists():
                subprocess.run(["rm", "-rf", str(root)], check=True)
            root.mkdir()
            build(root)
            columns.append([size(checkout, root, tool, args) for _, tool, args in calls(root)])
        print(f"{'call':34} {'before':>10} {'after':>10}")
        for (label, _, _), before, after in zip(calls(root), *columns):
            print(f"{label:34} {before:>10,} {after:>10,}")

if __name__ == "__main__":
    main()
