"""The syntax check after an edit: an error the edit introduced is noted with its line, the edit stays
applied; an already-broken file, a valid edit and an unknown kind of file get no note."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coretools.tools.textedit import syntax_note
from tests.conftest import call_tool, text_of
from tests.support import REPO

pytestmark = pytest.mark.anyio

# name, valid text, the same text broken on line 3 (1-based), what the note names
CASES = [
    ("m.py", "import os\n\ndef f():\n    return 1\n", "import os\n\ndef f(:\n    return 1\n", "Python"),
    ("d.json", '{\n  "a": 1,\n  "b": 2\n}\n', '{\n  "a": 1,\n  "b" 2\n}\n', "JSON"),
    ("c.toml", "[tool]\nname = 'x'\nversion = '1'\n", "[tool]\nname = 'x'\nversion = \n", "TOML"),
    ("w.yaml", "jobs:\n  build:\n    runs-on: x\n", "jobs:\n  build:\n    runs-on: [x\n", "YAML"),
    ("s.sh", "#!/bin/sh\necho hi\nif true; then echo; fi\n", "#!/bin/sh\necho hi\nif true; then echo\n", "shell"),
    ("a.js", "const a = 1;\nfunction f() {\n  return a;\n}\n", "const a = 1;\nfunction f() {\n  return a +;\n}\n",
     "JavaScript"),
    ("a.ts", "let a: number = 1;\nfunction f(): number {\n  return a;\n}\n",
     "let a: number = 1;\nfunction f(): number {\n  return a +;\n}\n", "TypeScript"),
    ("a.tsx", "const a = 1;\nconst b = <div>\n{a}</div>;\n", "const a = 1;\nconst b = <div>\n{a </div>;\n", "TSX"),
    ("m.go", "package m\nfunc F() int {\n\treturn 1\n}\n", "package m\nfunc F() int {\n\treturn 1 +\n}\n", "Go"),
    ("l.rs", "fn main() {\n    let a = 1;\n    println!(\"{}\", a);\n}\n",
     "fn main() {\n    let a = 1;\n    let = ;\n}\n", "Rust"),
]


@pytest.mark.parametrize(("name", "good", "bad", "label"), CASES, ids=[c[0] for c in CASES])
async def test_replace_that_breaks_the_file_says_where(root: Path, name: str, good: str, bad: str, label: str) -> None:
    f = root / name
    f.write_text(good)
    good_line, bad_line = good.splitlines()[2], bad.splitlines()[2]
    res = await call_tool(root, "replace", {"file_path": str(f), "old_string": good_line, "new_string": bad_line})
    assert not res.is_error, text_of(res)
    assert f.read_text() == bad  # the edit stays applied
    note = next(line for line in text_of(res).splitlines() if line.startswith("Note: after this edit"))
    assert note.startswith("Note: after this edit, line ") and f"({label}" in note, note
    assert f"line {_expected_line(name)} has a syntax error" in note, note
    assert "please" not in note.lower() and "fix" not in note.lower()


def _expected_line(name: str) -> int:
    """Where each parser places the error of the broken line 3: YAML and shell at the end of what was left
    open, tree-sitter's TSX at the start of the statement it could not recover."""
    return {"w.yaml": 4, "s.sh": 4, "a.tsx": 2}.get(name, 3)


@pytest.mark.parametrize(("name", "good", "bad", "label"), CASES, ids=[c[0] for c in CASES])
async def test_already_broken_file_is_not_nagged(root: Path, name: str, good: str, bad: str, label: str) -> None:
    f = root / name
    f.write_text(bad + "\n")
    res = await call_tool(root, "write_file", {"file_path": str(f), "content": bad + "\n\n"})
    assert not res.is_error, text_of(res)
    assert "syntax error" not in text_of(res)


@pytest.mark.parametrize(("name", "good", "bad", "label"), CASES, ids=[c[0] for c in CASES])
async def test_valid_edit_has_no_note(root: Path, name: str, good: str, bad: str, label: str) -> None:
    f = root / name
    f.write_text(good)
    res = await call_tool(root, "write_file", {"file_path": str(f), "content": good + "\n"})
    assert not res.is_error, text_of(res)
    assert "syntax error" not in text_of(res)


async def test_new_broken_file_gets_a_note(root: Path) -> None:
    res = await call_tool(root, "write_file", {"file_path": "n.py", "content": "def f():\n  x = 1\n    y = 2\n"})
    assert not res.is_error
    assert "Note: after this edit, line 3 has a syntax error (Python 3." in text_of(res)
    assert "unexpected indent" in text_of(res)


def test_unknown_kinds_and_checker_failures_say_nothing() -> None:
    assert syntax_note("/r/notes.txt", "", "def f(:\n") is None
    deep = syntax_note("/r/deep.py", "", "(" * 100_000)
    assert deep is None or "syntax error" in deep or "not checked" in deep
    assert syntax_note("/r/script", "", "#!/usr/bin/env python3\ndef f(:\n") is not None


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("big.js", "x = (\n" + "y = 1\n" * 400_000, "JavaScript: the file is over 2,097,152 characters, the most"),
        ("big.py", "x = (\n" + "y = 1\n" * 30_000, "Python 3.1"),
        ("pipes.sh", "ls |\n" + "a|" * 300 + "b\n", "shell: it has a pipeline of 302 commands, over the 257"),
    ],
)
def test_a_check_skipped_for_its_cost_says_so(name: str, text: str, why: str) -> None:
    note = syntax_note(f"/r/{name}", "", text)
    assert note is not None and note.startswith(f"Note: the syntax of this file was not checked ({why}"), note
    assert note.endswith(").") and "syntax error" not in note


def test_shell_pipelines_up_to_the_bound_are_checked() -> None:
    short = "cat f | " * 256 + "wc -l\n"
    assert syntax_note("/r/ok.sh", "", short) is None
    assert "has a syntax error" in syntax_note("/r/bad.sh", "", "a || b && c | d |& e\nif true; then\n")
    # (the scan does not know quotes: a string of many pipes leaves the file unchecked, and says so)
    assert syntax_note("/r/strings.sh", "", "echo '" + "| " * 300 + "'\n").startswith("Note: the syntax of this")


MEMORY_BOUND = """
from coretools.tools.textedit import syntax
syntax.MAX_TREE_BYTES = 1 << 20
syntax.MAX_TREE_SECONDS = 60.0
print(syntax.syntax_note("/r/wide.js", "", "x = " + "[" * 200_000))
"""


def test_a_tree_sitter_parse_stops_at_its_memory_bound() -> None:
    """The parse is measured as it goes (the server's resident memory): with the bound at 1 MiB, a text whose
    tree needs more is given up, and said to be. In a process of its own: the growth is of resident memory,
    and a test process's heap may hold freed pages enough for the whole tree."""
    done = subprocess.run([sys.executable, "-c", MEMORY_BOUND], capture_output=True, text=True, timeout=120,
                          cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)})
    why = "JavaScript: the parse needed more than 1 MiB of memory"
    assert done.stdout.strip() == f"Note: the syntax of this file was not checked ({why}).", done.stdout + done.stderr


def test_cost_on_a_60_kb_file_is_small() -> None:
    text = "".join(f"def f{i}(a, b):\n    return a + b * {i}\n\n" for i in range(2000))
    assert 50_000 < len(text) < 90_000
    start = time.process_time()  # CPU, not wall time: other work on the machine must not count
    assert syntax_note("/r/m.py", text, text) is None
    assert time.process_time() - start < 0.5


def test_the_text_an_edit_wrote_is_not_parsed_again(monkeypatch) -> None:
    """A broken file edited again (still broken): its old text is the one the last edit wrote, whose outcome is
    remembered; text written by something else is parsed."""
    from coretools.tools.textedit import syntax

    parsed: list[str] = []
    real = syntax._check_python

    def counting(text: str):
        parsed.append(text)
        return real(text)

    monkeypatch.setitem(syntax._BY_SUFFIX, "py", lambda: (syntax._PYTHON, counting))
    first, second, third = "def f(:\n  pass\n", "def f(:\n  return 1\n", "def g(:\n  return 2\n"
    assert syntax_note("/r/again.py", "x = 1\n", first) is not None
    assert syntax_note("/r/again.py", first, second) is None  # already broken
    assert parsed == [first, "x = 1\n", second]
    assert syntax_note("/r/again.py", "y = (\n", third) is None  # changed since by another program
    assert parsed[3:] == [third, "y = (\n"]
    assert syntax_note("/r/other.py", second, third) is None  # remembered per file
    assert parsed[5:] == [third, second]
