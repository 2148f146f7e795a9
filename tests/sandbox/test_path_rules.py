"""The path rules have one home, `sandbox/paths.py`: "inside that root", "below that root" and which names are
`.git`. Every other module asks it instead of comparing strings by hand (a hand-written `startswith(root +
"/")` once missed the root `/`, for which it asks for `//`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coretools.sandbox.paths import is_dotgit, is_git_name, protected_name, strip_prefix, within

PACKAGE = Path(__file__).resolve().parent.parent.parent / "coretools"
HAND_WRITTEN = re.compile(r"startswith\((?:[^()]|\([^()]*\))*\+\s*(?:os\.sep|[\"']/[\"'])\s*\)")


@pytest.mark.parametrize(
    ("path", "root", "inside", "below"),
    [
        ("/a/b", "/a/b", True, ""),
        ("/a/b/c/d", "/a/b", True, "c/d"),
        ("/a/bc", "/a/b", False, None),
        ("/a", "/a/b", False, None),
        ("/a/b/c", "/a/b/", True, "c"),
        ("/x/y", "/", True, "x/y"),
        ("/", "/", True, ""),
    ],
)
def test_inside_a_root_is_decided_component_wise(path: str, root: str, inside: bool, below: str | None) -> None:
    assert within(path, root) is inside
    assert strip_prefix(path, root) == below


@pytest.mark.parametrize(
    ("name", "protected", "git_reads_it"),
    [(".git", True, True), (".GIT", True, True), (".git.", True, False), (".git ", True, False),
     (".gitignore", False, False), ("git", False, False)],
)
def test_the_two_git_questions_differ_only_where_git_never_looks(name: str, protected: bool, git_reads_it: bool) -> None:
    """Protection covers every spelling some file system takes for `.git`; git itself opens one name."""
    assert is_git_name(name) is protected and protected_name(name) is protected
    assert is_dotgit(name) is git_reads_it
    assert not git_reads_it or protected  # what git reads is always protected


def hand_written_containment(source: str) -> list[str]:
    return HAND_WRITTEN.findall(source)


def test_no_module_but_paths_compares_a_path_with_a_root_by_hand() -> None:
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if "__pycache__" not in path.parts and path.name != "paths.py" and "client" not in path.parts
        and (hits := hand_written_containment(path.read_text()))
    }
    assert found == {}


@pytest.mark.parametrize(
    "source",
    ['ok = p == r or p.startswith(r + os.sep)\n', 'ok = p.startswith(r.rstrip("/") + "/")\n'],
)
def test_the_scan_sees_a_hand_written_check(source: str) -> None:
    """Guard against a scan that cannot fail: the two spellings the modules used are found."""
    assert hand_written_containment(source)
