"""The exception hierarchy that `coretools/errors.py` draws is the one in the code: every exception class of
the server side is in the tree, under its real base and in its real module, and no two share a name (two
`Refused` classes once did, one per policy, and a reader could not tell from an `except` which it caught)."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

import coretools.errors

PACKAGE = Path(__file__).resolve().parent.parent / "coretools"
BUILTIN = {name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)}
ROW = re.compile(r"^(?P<indent> *)[*+-] (?P<name>\w+)(?:\s.*?)?(?:\[(?P<module>[\w.]+)\])?$")


def drawn(doc: str) -> dict[str, tuple[str, str | None]]:
    """name -> (base, module) of each row of the tree in `doc`; a row without a module is a builtin base."""
    rows: dict[str, tuple[str, str | None]] = {}
    parents: list[str] = []
    for line in doc.splitlines():
        found = ROW.match(line)
        if not found:
            continue
        depth = len(found["indent"]) // 2
        parents[depth:] = [found["name"]]
        rows[found["name"]] = (parents[depth - 1] if depth else "Exception", found["module"])
    return rows


def defined(package: Path = PACKAGE) -> list[tuple[str, str, str]]:
    """(name, base, module) of every exception class defined at the top of a server-side module, but those
    private to their module (`_Name`)."""
    classes: list[tuple[str, str, str]] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if "__pycache__" in rel.parts or rel.parts[0] == "client":
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                classes.append((node.name, bases[0] if bases else "object", module))
    exceptions = set(BUILTIN)
    while True:
        more = {name for name, base, _ in classes if base in exceptions} - exceptions
        if not more:
            break
        exceptions |= more
    return [(n, b, m) for n, b, m in classes if n in exceptions and n not in BUILTIN and not n.startswith("_")]


def test_no_two_exception_classes_share_a_name() -> None:
    names = [name for name, _, _ in defined()]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_the_docstring_draws_every_exception_class_under_its_base() -> None:
    tree = drawn(coretools.errors.__doc__ or "")
    in_code = {name: (base, module) for name, base, module in defined()}
    in_tree = {name: row for name, row in tree.items() if row[1] is not None}
    assert in_tree == in_code
    for name, (base, module) in tree.items():
        if module is None:  # a builtin the tree hangs classes under
            assert name in BUILTIN and base == "Exception", name


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class Refused(Exception):\n    pass\n", "Refused"),
        ("class Late(ValueError):\n    pass\n", "Late"),
    ],
)
def test_the_checks_see_an_undrawn_or_doubled_class(tmp_path: Path, source: str, expected: str) -> None:
    """Guard against checks that cannot fail: a class added anywhere is found, under its base."""
    (tmp_path / "one.py").write_text(source)
    (tmp_path / "two.py").write_text(source)
    found = defined(tmp_path)
    assert [name for name, _, _ in found] == [expected, expected]
    assert expected not in drawn(coretools.errors.__doc__ or "")
