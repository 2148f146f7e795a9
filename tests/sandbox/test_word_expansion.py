"""The expansion rule alone (`exec_policy/expansion.py`): a word is judged as bash will pass it, never by
its spelling; what bash would compute at run time is unknown; brace expansion is bounded. Checked against
the real bash, word by word, and the protected-path rule (`paths.word_protected_reason`) on its own."""

from __future__ import annotations

import subprocess
import time

import pytest

from coretools.sandbox.exec_policy.expansion import Budget, expand_words
from coretools.sandbox.exec_policy.words import ArgumentRefused, Pattern
from coretools.sandbox.paths import word_protected_reason
from coretools.sandbox.shell_policy import CommandRefused, ShellPolicy, _parser


def expand(words: str) -> list[str | None]:
    """The argv the checker sees for `printf %s <words>` (without printf and its format)."""
    source = f"printf %s {words}"
    data = source.encode()
    command = _parser().parse(data).root_node.named_children[0]
    nodes = [c for c in command.children if (c.is_named or c.type == "$") and c.type != "command_name"][1:]
    groups: list[list] = []
    for node in nodes:
        if groups and groups[-1][-1].end_byte == node.start_byte:
            groups[-1].append(node)
        else:
            groups.append([node])
    text = lambda n: data[n.start_byte : n.end_byte].decode()  # noqa: E731
    return [e.value for group in groups for e in expand_words(group, text, Budget())]


def bash_words(words: str) -> list[str]:
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})  # fmt: skip
    return done.stdout.split("\0")[:-1]


AS_BASH = [".{g..g}it/config", "{.git,.git}/config", "a{b,c}d", "{a,b}{1..3}", "{05..10..3}", "{-05..5..5}",
           "{a..e..2}", "{e..a}", "{a{b,c}}", "{x{1..2}}", "{a,{b}}", "{}{a,b}", "{},b}", "x{},b}", "{x}-,2}",
           "{a..b..c}x,y}", "{1..{a,b}}", "x{,}y", "{a,b}}", "{{a,b}", "'{a,b}'", '"{"a,b}',
           "\\{a,b}", "a\\ {b,c}", ".g'i'{t,t}", "$'\\x2egit'", "$'\\056git'", "$'a\\tb'", "$'\\u002e'",
           "$'\\cA'", "$'x\\0y'", '"a b"{1,2}', "''", '""{,}', "~'x'/y", "'~'/y", "\\~/y"]  # fmt: skip


@pytest.mark.parametrize("words", AS_BASH)
def test_words_are_what_bash_passes(words: str) -> None:
    assert expand(words) == bash_words(words)


@pytest.mark.parametrize("words", ["~/x", "~", "~root/x", "~+/x", "a=~/x", "a=b:~/x", "$HOME/x", '"$HOME"{a,b}',
                                   "$(date)", "`date`", "$((1+2))", '$"text"'])  # fmt: skip
def test_what_bash_computes_is_unknown(words: str) -> None:
    assert None in expand(words)


def test_known_words_after_a_tilde_are_not_unknown() -> None:
    assert expand("--opt=~/x") == ["--opt=~/x"]  # not an assignment: bash leaves the tilde
    assert expand('"$HOME"{a,b}') == [None, None]  # brace expansion still counts the words


def test_globs_are_patterns_with_quoted_characters_escaped() -> None:
    [word] = expand(".g?t")
    assert isinstance(word, Pattern) and word.glob == ".g?t"
    [word] = expand("'*'x*")
    assert isinstance(word, Pattern) and word == "*x*" and word.glob == "[*]x*"
    [word] = expand("'*.txt'")
    assert not isinstance(word, Pattern)


@pytest.mark.parametrize("words", ["x{1..100000}", "{1..9999999999999}", "{a,b}" * 11, "{1..40}{1..40}"])
def test_brace_expansion_is_bounded(words: str) -> None:
    started = time.process_time()
    with pytest.raises(ArgumentRefused, match="more than"):
        expand(words)
    assert time.process_time() - started < 5


@pytest.mark.parametrize("words", ["{" * 50_000, "{a," * 20_000, "{{" * 10_000 + "a,b" + "}}" * 10_000])
def test_hostile_brace_words_cost_a_bounded_time(words: str) -> None:
    started = time.process_time()
    try:
        expand(words)
    except ArgumentRefused as exc:
        assert "cannot be checked" in exc.why or "more than" in exc.why
    assert time.process_time() - started < 5


def test_a_command_has_one_budget() -> None:
    """Many words each under the bound still share one: the cost of a command is bounded, not per word."""
    policy = ShellPolicy.from_prefixes(["echo"], [])
    policy.check("echo " + "{" * 500)
    with pytest.raises(CommandRefused, match="cannot be checked"):
        policy.check("echo " + " ".join(["{" * 500] * 10))


def test_escapes_that_depend_on_the_locale_are_refused() -> None:
    with pytest.raises(ArgumentRefused, match="locale"):
        expand("$'\\u00e9'")


def test_quoted_commas_alone_are_refused() -> None:
    """bash reads `{a',' b}` as a list even though its comma is quoted; the checker does not guess."""
    with pytest.raises(ArgumentRefused, match="only commas are quoted"):
        expand("{1..3',x'}")


# -- the protected-path rule -----------------------------------------------------------------------------------

PROTECTED = [(".git", None), (".git/config", None), (".GIT/config", None), (".git./config", None),
             ("a/.git", None), ("--file=.git/config", None), ("x:.git/hooks", None), (".env", None),
             (".env.production", None), ("sub/.env.local", None), (".g?t/config", ".g?t/config"),
             (".[g]it", ".[g]it"), (".*", ".*"), (".e*", ".e*"), (".env.m*", ".env.m*"), ("[.]git", "[.]git"),
             (".G*", ".G*")]  # fmt: skip
NOT_PROTECTED = [("src/main.py", None), (".gitignore", None), (".github/x", None), (".env.example", None),
                 (".envrc", None), (".venv/bin/python", None), ("*", "*"), ("*.py", "*.py"), ("?git", "?git"),
                 (".g[*]t", ".g[*]t"), ("notes/.x*", ".x*"), ("a.git", None), (".env/bin", None)]  # fmt: skip


@pytest.mark.parametrize("word,glob", PROTECTED)
def test_protected_words(word: str, glob: str | None) -> None:
    assert word_protected_reason(word, glob) is not None


@pytest.mark.parametrize("word,glob", NOT_PROTECTED)
def test_words_that_are_not_protected(word: str, glob: str | None) -> None:
    assert word_protected_reason(word, glob) is None


def test_one_rule_for_every_layer() -> None:
    """The file tools' rule (`protected_reason`) and the argument policy's agree on plain paths."""
    from coretools.sandbox.paths import is_git_name, protected_reason

    for path in [".git/config", ".GIT", ".git. /x", ".env", ".env.local", "a/.env", ".env.example", "x/.gitx"]:
        assert (protected_reason(path) is None) == (word_protected_reason(path) is None), path
    assert is_git_name(".Git") and is_git_name(".git ") and not is_git_name(".gitignore") and not is_git_name("git")


# -- words as bash splits them -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["printf %s .g\\\nit", "printf %s {\\ .}", "printf %s { {\\,#", "r\\\nm x"])
def test_where_the_grammar_splits_words_unlike_bash_the_command_is_refused(command: str) -> None:
    with pytest.raises(CommandRefused, match="grammar"):
        ShellPolicy.from_prefixes(["printf"], ["rm"]).check(command)


def test_line_continuations_between_words_are_white_space() -> None:
    found = ShellPolicy.from_prefixes(["printf"], []).check("printf '%s\\n' a \\\n  b\\\n c")
    assert found == [["printf", "%s\\n", "a", "b", "c"]]
