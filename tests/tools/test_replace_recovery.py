"""replace recovers near misses (indentation, trailing whitespace, tabs, over-escaping, token spacing, typos),
never at the wrong place: each strategy, the "first strategy decides" rule, refusals with the nearest text,
and the near-miss corpus of real third-party code through the real tool."""

from __future__ import annotations

import codecs
import time
from pathlib import Path

import pytest

from benchmarks.nearmiss_corpus import NEGATIVE, POSITIVE, Case, corpus
from coretools.tools.textedit import fuzzy, introduced_error
from tests.support import ToolSession, text_of

pytestmark = pytest.mark.anyio


async def edit(root: Path, content: bytes | str, old: str, new: str, **more) -> tuple[object, bytes]:
    f = root / "f.txt"
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    async with ToolSession(root) as run:
        res = await run.call("replace", file_path=str(f), old_string=old, new_string=new, **more)
    return res, f.read_bytes()


# -- 1. line by line ------------------------------------------------------------------------------------------


async def test_reindented_block_is_matched_and_new_string_reindented(root: Path) -> None:
    src = "class A:\n    def f(self):\n        x = 1\n        return x\n"
    res, data = await edit(root, src, "def f(self):\n    x = 1\n    return x\n",
                           "def f(self):\n    x = 1\n    if x:\n        x += 1\n    return x\n")
    assert not res.is_error, text_of(res)
    assert data.decode() == "class A:\n    def f(self):\n        x = 1\n        if x:\n            x += 1\n        return x\n"
    assert "matched line by line ignoring indentation; the replacement was re-indented to match" in text_of(res)


async def test_tabs_written_for_spaces_become_the_files_spaces(root: Path) -> None:
    src = "def f():\n    if a:\n        b()\n    c()\n"
    res, data = await edit(root, src, "def f():\n\tif a:\n\t\tb()\n\tc()\n", "def f():\n\tif a:\n\t\tb()\n\t\td()\n\tc()\n")
    assert not res.is_error, text_of(res)
    assert data.decode() == "def f():\n    if a:\n        b()\n        d()\n    c()\n"


async def test_spaces_written_for_tabs_become_the_files_tabs(root: Path) -> None:
    src = "int f() {\n\tif (a) {\n\t\tb();\n\t}\n}\n"
    res, data = await edit(root, src, "    if (a) {\n        b();\n    }\n", "    if (a) {\n        b();\n        c();\n    }\n")
    assert not res.is_error, text_of(res)
    assert data.decode() == "int f() {\n\tif (a) {\n\t\tb();\n\t\tc();\n\t}\n}\n"


async def test_trailing_whitespace_and_blank_line_indentation_are_ignored(root: Path) -> None:
    src = "x\na = 1\n\nb = 2\nc = 3\n"
    res, data = await edit(root, src, "a = 1  \n    \nb = 2  \n", "a = 1  \n    \nb = 22  \n")
    assert not res.is_error, text_of(res)
    assert data.decode() == "x\na = 1\n\nb = 22\nc = 3\n"
    assert "trailing whitespace and the whitespace of blank lines" in text_of(res)


async def test_lines_kept_from_old_string_are_the_files_own(root: Path) -> None:
    res, data = await edit(root, "a = 1   \n\tb = 2\n", "a = 1\n    b = 2\n", "a = 1\n    b = 3\n")
    assert not res.is_error, text_of(res)
    assert data.decode() == "a = 1   \n\tb = 3\n"


async def test_crlf_file_with_bom_and_no_final_newline(root: Path) -> None:
    src = codecs.BOM_UTF8 + b"def f():\r\n    a = 1\r\n    return a"
    res, data = await edit(root, src, "def f():\n  a = 1\n  return a\n", "def f():\n  a = 2\n  return a\n")
    assert not res.is_error, text_of(res)
    assert data == codecs.BOM_UTF8 + b"def f():\r\n    a = 2\r\n    return a"


async def test_line_flexible_count_mismatch_is_refused_with_the_count(root: Path) -> None:
    src = "if a:\n    x = 1\n    y = 2\nif b:\n        x = 1\n        y = 2\n"
    res, data = await edit(root, src, "x = 1\ny = 2\n", "x = 3\ny = 4\n")
    assert res.is_error and data.decode() == src
    msg = text_of(res)
    assert "expected 1 occurrence but found 2" in msg and "matched line by line" in msg
    assert "line(s) 2, 5" in msg and res.structured["error"]["kind"] == "edit_expected_occurrence_mismatch"
    res, data = await edit(root, src, "x = 1\ny = 2\n", "x = 3\ny = 4\n", expected_replacements=2)
    assert not res.is_error and data.decode() == src.replace("x = 1\n    y = 2", "x = 3\n    y = 4").replace(
        "x = 1\n        y = 2", "x = 3\n        y = 4")


async def test_first_strategy_decides_no_falling_through(root: Path) -> None:
    # Two places match line by line; a looser strategy would single out neither, and is never asked.
    src = "f(a, b)\n  g()\nf(a, b)\n    g()\n"
    res, data = await edit(root, src, "f(a, b)\ng()", "h()")
    assert res.is_error and "found 2" in text_of(res) and data.decode() == src


# -- 2. over-escaped ------------------------------------------------------------------------------------------


async def test_over_escaped_pair_is_unescaped_alike(root: Path) -> None:
    src = 'print("hi")\nx = 1\n'
    res, data = await edit(root, src, 'print(\\"hi\\")\\nx = 1', 'print(\\"bye\\")\\nx = 2')
    assert not res.is_error, text_of(res)
    assert data.decode() == 'print("bye")\nx = 2\n' and "over-escaped" in text_of(res)


def test_unescape_reads_left_to_right() -> None:
    from coretools.tools.textedit.nearmiss import unescape

    assert unescape("a\\\\nb\\n\\t\\q") == "a\\nb\n\t\\q"


# -- 3. token by token ----------------------------------------------------------------------------------------


async def test_token_whitespace_differs_and_kept_spacing_is_the_files(root: Path) -> None:
    src = "x = foo(a, b)  # note\ny = 2\n"
    res, data = await edit(root, src, "x=foo( a,b )", "x=foo( a,c )")
    assert not res.is_error, text_of(res)
    assert data.decode() == "x = foo(a, c)  # note\ny = 2\n" and "token by token" in text_of(res)


async def test_tokens_do_not_merge_words(root: Path) -> None:
    res, data = await edit(root, "foobar = 1\n", "foo bar = 1", "x")
    assert res.is_error and data == b"foobar = 1\n"


# -- 4. fuzzy -------------------------------------------------------------------------------------------------

BLOCK = "def handle(request):\n    user = lookup(request.user_id)\n    if user is None:\n        raise NotFound()\n    return render(user)\n"


async def test_one_character_typo_in_a_block_is_matched_at_the_one_close_place(root: Path) -> None:
    src = "import x\n\n" + BLOCK + "\n\ndef other():\n    return 42\n"
    typo = BLOCK.replace("lookup(", "lokup(")
    res, data = await edit(root, src, typo, typo.replace("render(user)", "render(user, full=True)"))
    assert not res.is_error, text_of(res)
    assert data.decode() == src.replace("render(user)", "render(user, full=True)")  # the typo did not land
    assert "clearly the closest text" in text_of(res)


async def test_two_close_windows_are_refused_with_both_shown(root: Path) -> None:
    twin = BLOCK.replace("NotFound", "NotFund")
    src = BLOCK + "\n" + twin
    res, data = await edit(root, src, BLOCK.replace("NotFound", "NotFoud"), "pass\n")
    assert res.is_error and data.decode() == src
    msg = text_of(res)
    assert "neither was edited" in msg and "     1| def handle(request):" in msg and "     7| def handle" in msg


async def test_too_distant_block_is_refused_with_the_nearest_text(root: Path) -> None:
    src = "head\n" + BLOCK
    far = BLOCK.replace("lookup(request.user_id)", "lookup(request.id)").replace("NotFound", "Missing")  # 88%
    res, data = await edit(root, src, far, "pass\n")
    assert res.is_error and data.decode() == src
    msg = text_of(res)
    assert "The nearest text, lines 2-6, is only 88% similar" in msg and "     3|     user = lookup(request.user_id)" in msg


async def test_fuzzy_needs_three_lines(root: Path) -> None:
    src = "alpha = compute_everything(1, 2)\nbeta = 2\n"
    res, data = await edit(root, src, "alpha = compute_everythin(1, 2)\nbeta = 2\n", "x\n")
    assert res.is_error and data.decode() == src


def test_levenshtein_agrees_with_the_textbook_definition() -> None:
    import random

    def slow(a: str, b: str) -> int:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]

    rng = random.Random(7)
    for _ in range(2000):
        a = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 14)))
        b = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 70)))
        assert fuzzy.levenshtein(a, b) == slow(a, b), (a, b)


# -- the corpus -----------------------------------------------------------------------------------------------


async def run_case(run: ToolSession, root: Path, case: Case) -> str:
    """'ok', 'missed' (refused a positive), 'broken' (refused a positive whose right result has a syntax error
    the file has not: a recovered edit never breaks the file) or 'wrong' (edited wrongly, or edited a
    negative)."""
    f = root / f"case{Path(case.source.split(':', 1)[1]).suffix}"
    data = case.text.encode()
    f.write_bytes(data)
    res = await run.call("replace", file_path=str(f), old_string=case.old, new_string=case.new)
    after = f.read_bytes()
    if case.positive:
        assert case.expected is not None
        if introduced_error(f.name, case.text, case.expected) is not None:
            return "broken" if res.is_error and after == data else "wrong"
        if res.is_error:
            return "missed" if after == data else "wrong"
        return "ok" if after == case.expected.encode() else "wrong"
    return "ok" if res.is_error and after == data else "wrong"


async def test_near_miss_corpus_recovered_and_never_wrong(root: Path) -> None:
    cases = corpus()
    outcome: dict[str, list[str]] = {}
    slowest = 0.0
    async with ToolSession(root) as run:
        for case in cases:
            t0 = time.process_time()  # CPU, not wall time: other work on the machine must not count
            outcome.setdefault(case.kind, []).append(await run_case(run, root, case))
            slowest = max(slowest, time.process_time() - t0)
    wrong = {k: v.count("wrong") for k, v in outcome.items() if "wrong" in v}
    assert wrong == {}
    positives = [r for k in POSITIVE for r in outcome[k] if r != "broken"]
    assert len(positives) >= 150 and positives.count("ok") / len(positives) >= 0.9, outcome
    for kind in NEGATIVE:
        assert outcome[kind] and set(outcome[kind]) == {"ok"}, kind
    assert slowest < 2.0  # CPU seconds of the slowest case; bench_nearmiss.py measures the real times
