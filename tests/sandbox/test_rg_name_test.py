"""`ripgrep.file_name_test`: the string-comparison path for plain rules (`*.pyc`, `node_modules`) answers as
the compiled matcher does, for ASCII and other names alike."""

from __future__ import annotations

import random

from coretools.sandbox.ignore import DEFAULT_EXCLUDES
from coretools.sandbox.matcher import NodeMatcher
from coretools.sandbox.patterns.gitignore import gitignore_segment
from coretools.sandbox.patterns.tree import PatternError, alt
from coretools.sandbox.rgglobs import strip_trailing_spaces
from coretools.sandbox.ripgrep import file_name_test


def reference(lines: list[str], name: str) -> bool:
    """The test as the compiled matcher alone gives it."""
    alternatives = {}
    for line in lines:
        body = strip_trailing_spaces(line[1:] if line.startswith("!") else line).rstrip("/")
        last = body.rpartition("/")[2]
        if not last or "**" in last:
            return True
        try:
            alternatives[gitignore_segment(last)] = None
        except PatternError:
            continue
    return bool(alternatives) and NodeMatcher(alt(*alternatives), True, "reference")(name)


def test_the_default_excludes_by_name() -> None:
    test = file_name_test(list(DEFAULT_EXCLUDES))
    assert not test("mod1.py") and not test("pyc") and not test("README.md")
    assert test("x.PYC") and test("a.pyo") and test("NODE_MODULES") and test(".ds_store") and test("Build")
    assert test("ſ.pyc")  # not ASCII: the compiled matcher decides


def test_random_rules_and_names_agree_with_the_matcher() -> None:
    rng = random.Random(5)
    rule_chars = "abKkSs._-*?[]#!\\ /\u017f\u212a" + "PYCpyc"
    name_chars = "abcKkSsPYCpyc._-#\u017f\u212a\u00df"
    fixed = [
        list(DEFAULT_EXCLUDES), ["*.log", "!Foo.TXT", "build/", "a/b/*.tmp", "x\\ "], ["*"], ["*.p?c"], ["K"], ["ss"]
    ]
    rules = fixed + [
        ["".join(rng.choice(rule_chars) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 3))]
        for _ in range(300)
    ]
    for lines in rules:
        test = file_name_test(lines)
        for _ in range(100):
            name = "".join(rng.choice(name_chars) for _ in range(rng.randint(1, 6)))
            assert test(name) == reference(lines, name), (lines, name)
