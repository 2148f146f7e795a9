"""The placeholder guard: comment-only lines that stand for omitted code are refused in any comment syntax and
wording, through write_file and replace, leaving the file byte-identical; legitimate `...` passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from coretools.tools.textedit import omission, placeholder_line
from tests.conftest import call_tool, text_of

pytestmark = pytest.mark.anyio

POSITIVES = [
    "# ... rest of code unchanged ...",
    "// ... existing code ...",
    "/* rest of the file remains the same */",
    "<!-- ... -->",
    "-- ...",
    "# …",
    "// ...",
    "    // ...",
    "# ...",
    "/* ... */",
    "{/* ... */}",
    ";; ...",
    "% ...",
    "// ... rest of methods ...",
    "(rest of methods ...)",
    "# ... unchanged code ...",
    "// rest of code unchanged",
    "# rest of the file unchanged",
    "// existing code",
    "# existing code",
    "// ... existing methods ...",
    "# same as before",
    "// Same as before",
    "/* ... same as before ... */",
    "<!-- rest of the document remains the same -->",
    "<!-- existing content -->",
    "-- rest of the query unchanged",
    "-- ... existing columns ...",
    "; rest of the file unchanged",
    "% ... rest of the document unchanged ...",
    "// ... other methods ...",
    "# ... more tests ...",
    "// ... 120 lines omitted ...",
    "# (implementation omitted for brevity)",
    "// implementation unchanged",
    "# ... previous code ...",
    "// previous implementation remains",
    "/* remaining code is the same */",
    "# remaining code",
    "// rest of the implementation",
    "# Rest of file remains unchanged.",
    "// ... rest of the function body unchanged ...",
    "   * ... existing fields ...",
    "[... existing code ...]",
    "rest of code ...",
    "... rest of the file unchanged ...",
    "//... keep existing code ...",
    "/** ... rest of class ... */",
    "# ... (unchanged) ...",
    "// … remaining methods …",
    "#  [...]",
    "// (...)",
    "# ... existing imports ...",
    "// ... existing code here ...",
    "<!-- ... rest of the html unchanged ... -->",
    "// other methods unchanged",
    "-- same as before",
    "// The rest of the code stays the same",
    "# code omitted",
    "// TODO: keep the rest as it is",
    "# NOTE: rest of the file unchanged",
    "/* TODO - leave the rest of the class as it is */",
    "# keep the rest as is",
]
NEGATIVES = [
    "...",
    "    ...",
    "def f(): ...",
    "    def method(self) -> int: ...",
    "x[..., 0]",
    "arr[..., None] = 1",
    "Ellipsis",
    "return ...",
    "function f(...args) {",
    "const y = {...obj, a: 1};",
    "  ...rest,",
    "foo(...args);",
    "export function f(a: string): void;",
    "func Printf(format string, a ...any) (n int, err error)",
    "fn sum(xs: &[i32]) -> i32 { xs.iter().sum() }",
    "And so on...",
    "and so on...",
    "Wait for it...",
    "The rest of the code is unchanged.",
    "# TODO ...",
    "# TODO: rest of implementation",
    ">>> for i in range(3):",
    "...     print(i)",
    "... ",
    "// rest of the args are passed through",
    "# Other methods",
    "// Existing tests",
    "# Remaining methods",
    "# unchanged",
    "# Same as above",
    "print(\"... rest of code ...\")",
    "msg = '// ... existing code ...'",
    "    \"// ... existing code ...\",",
    "x = 1  # ...",
    "#!/usr/bin/env python",
    "#include <stdio.h>",
    "# type: ignore[...]",
    "-- The rest of the rows are skipped if the key is missing",
    "// Keep the existing behaviour for old clients",
    "* item one",
    " * ...",
    " * @param args ... the remaining arguments",
    "--verbose ...",
    "---",
    "% This document describes the previous design in more detail",
    "[...]",
    "(...)",
    "{...}",
    "# Unchanged from upstream",
    "<!-- TODO: link the API docs -->",
    "if (...) {",
    "/* ...args */",
    "// previous value of x",
    "# TODO: keep the API stable",
    "// NOTE: rest of the args are optional",
    "# FIXME: the rest",
    "Keep the rest as it is.",
]

OLD = "class A {\n  m() {\n    return 1;\n  }\n  n() {\n    return 2;\n  }\n}\n"


def test_tables_are_big_enough() -> None:
    assert len(POSITIVES) >= 40 and len(NEGATIVES) >= 40


@pytest.mark.parametrize("line", POSITIVES)
def test_positive_is_found_alone_and_among_code(line: str) -> None:
    assert placeholder_line(line) == line.strip()
    assert placeholder_line(f"x = 1\n{line}\r\ny = 2\n") == line.strip()


@pytest.mark.parametrize("line", NEGATIVES)
def test_negative_passes_alone_and_among_code(line: str) -> None:
    assert placeholder_line(line) is None
    assert placeholder_line(f"x = 1\n{line}\ny = 2\n") is None


@pytest.mark.parametrize("line", POSITIVES)
async def test_write_file_refuses_placeholder_that_replaces_lines(root: Path, line: str) -> None:
    f = root / "a.js"
    f.write_text(OLD)
    res = await call_tool(root, "write_file", {"file_path": str(f), "content": f"class A {{\n{line}\n}}\n"})
    assert res.is_error, line
    assert "looks like a placeholder for omitted code" in text_of(res) and line.strip() in text_of(res)
    assert res.structured["error"]["kind"] == "invalid_tool_params"
    assert f.read_bytes() == OLD.encode()


@pytest.mark.parametrize("line", POSITIVES[:12])
async def test_write_file_refuses_placeholder_in_a_new_file(root: Path, line: str) -> None:
    res = await call_tool(root, "write_file", {"file_path": "new.js", "content": f"class A {{\n{line}\n}}\n"})
    assert res.is_error and "omission placeholder" in text_of(res)
    assert not (root / "new.js").exists()


@pytest.mark.parametrize("line", NEGATIVES)
async def test_write_file_accepts_legitimate_dots(root: Path, line: str) -> None:
    content = f"start\n{line}\nend\n"
    res = await call_tool(root, "write_file", {"file_path": "ok.txt", "content": content})
    assert not res.is_error, text_of(res)
    assert (root / "ok.txt").read_text() == content


@pytest.mark.parametrize("line", POSITIVES[:20])
async def test_replace_refuses_placeholder_for_old_lines(root: Path, line: str) -> None:
    f = root / "a.js"
    f.write_text(OLD)
    args = {"file_path": str(f), "old_string": "  m() {\n    return 1;\n  }\n", "new_string": f"  m() {{\n{line}\n  }}\n"}
    res = await call_tool(root, "replace", args)
    assert res.is_error and "omission placeholder" in text_of(res), line
    assert f.read_bytes() == OLD.encode()


async def test_existing_placeholder_lines_may_be_kept(root: Path) -> None:
    f = root / "a.py"
    f.write_text("def f():\n    # ...\n    pass\n\nx = 1\n")
    res = await call_tool(root, "write_file", {"file_path": str(f), "content": "def f():\n    # ...\n    pass\n"})
    assert not res.is_error, text_of(res)


async def test_placeholder_that_replaces_nothing_is_an_addition(root: Path) -> None:
    f = root / "a.py"
    f.write_text("x = 1\n")
    content = "x = 1\n\n\ndef later():\n    # ... existing code ...\n    pass\n"
    res = await call_tool(root, "write_file", {"file_path": str(f), "content": content})
    assert not res.is_error, text_of(res)
    assert f.read_text() == content


async def test_markdown_code_examples_are_not_placeholders(root: Path) -> None:
    doc = "# Usage\n\n```js\nfunction f() {\n  // ...\n}\n```\n\n<!-- TODO -->\n"
    res = await call_tool(root, "write_file", {"file_path": "README.md", "content": doc})
    assert not res.is_error, text_of(res)
    res = await call_tool(root, "write_file", {"file_path": "OTHER.md", "content": "# Intro\n<!-- ... -->\n"})
    assert res.is_error


def test_omission_needs_lost_lines_and_a_new_placeholder() -> None:
    assert omission("a\n// ... existing code ...\n", None) == "// ... existing code ..."
    assert omission("a\n// ... existing code ...\nc\n", "a\nb\nc\n") == "// ... existing code ..."
    assert omission("a\nb\n// ... existing code ...\nc\n", "a\nb\nc\n") is None
    assert omission("a\n// ... existing code ...\n", "a\nb\n// ... existing code ...\n") is None


def test_scan_is_linear_on_big_inputs() -> None:
    import time

    text = "const y = {...obj}; // same as before\n" * 200_000 + "  f(...args)\n" * 200_000
    start = time.process_time()  # CPU, not wall time: other work on the machine must not count
    assert placeholder_line(text) is None
    assert time.process_time() - start < 5
    assert placeholder_line("// ..." * 1_000_000) is None  # one long line is not a placeholder
