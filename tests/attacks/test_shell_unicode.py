"""The shell policy's ASCII view of the command (grammar_input.ascii_view) against what bash runs.

Each attack goes through the real `run_shell_command` tool with a real policy and is judged by its
effect: a marker file outside the root that must not appear, a victim that must survive, a file that an
allowlist (which allows redirections only to /dev/null or descriptors) must not let a command write.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import call_tool, text_of

pytestmark = pytest.mark.anyio


async def run(root: Path, command: str, *policy: str, directory: str | None = None):
    args = {"command": command}
    if directory:
        args["directory"] = directory
    return await call_tool([root], "run_shell_command", args, *policy)


# -- a here-document whose delimiter is non-ASCII ------------------------------------------------
#
# The grammar sees `é` (C3 A9) and `ü` (C3 BC) both as `xx`, so it ends the here-document at the line
# `ü`; bash compares real bytes, never finds `é`, and reads the here-document to end of input. What the
# policy checks as a command with a single-quoted (literal) argument is, to bash, here-document text,
# where quotes mean nothing and `$(...)` runs.


def heredoc_smuggle(payload: str, start: str = "<<é", line: str = "ü") -> str:
    return f"echo {start}\n{line}\necho '$({payload})'\n"


@pytest.mark.parametrize(("start", "line"), [("<<é", "ü"), ("<<xx", "é"), ("<<é", "xx"), ("<<-中", "\t文")])
async def test_a_nonascii_heredoc_delimiter_cannot_bypass_the_allowlist(root: Path, tmp_path: Path, start: str, line: str) -> None:
    marker = tmp_path / "pwned-heredoc"
    await run(root, heredoc_smuggle(f"touch {marker}", start, line), "--allow-command", "echo")
    assert not marker.exists(), "`touch` ran under --allow-command echo (here-document delimiter é ended at ü)"


async def test_a_nonascii_heredoc_delimiter_cannot_bypass_the_denylist(root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    await run(root, heredoc_smuggle(f"rm -f {victim}"), "--deny-command", "rm")
    assert victim.exists(), "`rm` ran under --deny-command rm (here-document delimiter é ended at ü)"


async def test_heredoc_same_nonascii_delimiter_is_fine(root: Path, tmp_path: Path) -> None:
    """Control: with the matching delimiter, grammar and bash agree; the substitution is seen and refused."""
    marker = tmp_path / "pwned-heredoc-ok"
    result = await run(root, f"echo <<é\n$(touch {marker})\né\n", "--allow-command", "echo")
    assert not marker.exists()
    assert "refused" in text_of(result).lower()


# -- a Unicode digit is taken for a file descriptor -----------------------------------------------
#
# `redirect()` lets `>&WORD` through when `WORD.isdigit()`. str.isdigit() is true for `²`, `١`, `٣`...;
# bash reads `>&²` as `&>²`: stdout and stderr to the FILE `²`.


@pytest.mark.parametrize("digit", ["²", "١", "߁"])
async def test_a_unicode_digit_is_not_a_descriptor(root: Path, digit: str) -> None:
    await run(root, f"echo planted-content >&{digit}", "--allow-command", "echo")
    assert not (root / digit).exists(), f"`echo >&{digit}` wrote the file {digit!r} under an allowlist"


# -- GBK / GB18030 / Big5 trail bytes -------------------------------------------
#
# `中` is E4 B8 AD in UTF-8. In a GBK, GB18030 or Big5 locale bash pairs the bytes as E4B8 + AD5C, so the
# backslash of `中\;` is the second half of a character and `;` separates commands. The grammar (ASCII view
# `xxx\;`) reads an escaped `;` inside one word. bash takes the locale from the server's environment.


def build_locale(dest: Path, source: str, charmap: str, name: str) -> bool:
    if not shutil.which("localedef") or not Path("/usr/share/i18n/charmaps").is_dir():
        return False
    done = subprocess.run(["localedef", "-i", source, "-f", charmap, str(dest / name)], capture_output=True)
    return (dest / name / "LC_CTYPE").exists() or done.returncode == 0 and (dest / name).exists()


@pytest.mark.parametrize(("source", "charmap", "name"),
                         [("zh_CN", "GBK", "zh_CN.GBK"), ("zh_CN", "GB18030", "zh_CN.GB18030"),
                          ("zh_TW", "BIG5", "zh_TW.BIG5")])  # fmt: skip
async def test_a_legacy_multibyte_locale_cannot_hide_a_separator(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, charmap: str, name: str
) -> None:
    locales = tmp_path / "locales"
    locales.mkdir()
    if not build_locale(locales, source, charmap, name):
        pytest.skip(f"cannot build the {name} locale here")
    monkeypatch.setenv("LOCPATH", str(locales))
    monkeypatch.setenv("LC_ALL", name)
    marker = tmp_path / "pwned-locale"
    await run(root, f"echo 中\\;touch {marker}", "--allow-command", "echo")
    assert not marker.exists(), f"`touch` ran under --allow-command echo in the {name} locale"


# -- refused (or harmless) -------------------------------------------------------------------------------


async def test_plain_non_ascii_is_allowed(root: Path) -> None:
    result = await run(root, "echo héllo wörld 中文 😀", "--allow-command", "echo")
    assert "héllo wörld 中文 😀" in text_of(result)
    result = await run(root, "echo ｆｕｌｌｗｉｄｔｈ", "--allow-command", "echo")
    assert "ｆｕｌｌｗｉｄｔｈ" in text_of(result)


SMUGGLES = [
    # raw bytes (lone surrogates = invalid UTF-8 under surrogateescape) next to an escape or quote
    *(f"echo {b}\\;touch {{M}}" for b in ("\udc80", "\udca0", "\udcc3", "\udce4\udcb8", "\udcff", "\udcf0\udc9f")),
    *(f"echo '{b}';touch {{M}};'" for b in ("\udcc3", "\udce4\udcb8")),
    "echo \\é;touch {M}",  # backslash before a multibyte character
    "echo é\\\ntouch {M}",  # multibyte character before a line continuation
    "echo \"é\\\";touch {M};\"",
    "echo a\u00a0;\u00a0touch {M}",  # no-break space (refused outright)
    "echo a\u3000touch {M}",  # ideographic space
    "echo a\u2003touch {M}",  # em space: not blank to bash in UTF-8
    "echo a；touch {M}",  # fullwidth semicolon
    "echo a\u0338;touch {M}",  # combining mark before ;
    "echo $'\\u003b' touch {M}",  # ANSI-C ; is data
    "echo $'\\u0060touch {M}\\u0060'",
    "$é touch {M}",
    "${é} touch {M}",
    "touch{é,} {M}",
    "{é,touch} {M}",
    "echo @(é|x) ; t\u0301ouch {M}",
    "echo $((é)) ; echo",
    "echo <<'é'\nü\n$(touch {M})\n",  # quoted delimiter: bash does not expand the body either
    "echo <<-é\n\tü\necho '`touch {M}`'\n\té\n",  # terminator present: the grammar sees `é` as a command
]


@pytest.mark.parametrize("template", SMUGGLES)
async def test_smuggle_refused_or_harmless(root: Path, tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    await run(root, template.replace("{M}", str(marker)), "--allow-command", "echo")
    assert not marker.exists()


@pytest.mark.parametrize("command", ["git statusé", "git stat\u00fcs", "git ｓtatus", "gité status"])
async def test_git_status_prefix_not_matched_by_lookalikes(root: Path, command: str) -> None:
    result = await run(root, command, "--allow-command", "git status")
    assert "refused" in text_of(result).lower()


async def test_denylist_lookalike_names_run_nothing_denied(root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    for command in (f"r\u006d {victim}", f"\\rm {victim}", f"rm\u0301 {victim}"):
        await run(root, command, "--deny-command", "rm")
        assert victim.exists(), command
    assert os.path.exists(victim)


async def test_lone_surrogate_is_a_clean_refusal_not_an_internal_error(root: Path) -> None:
    """Minor: a lone surrogate outside U+DC80..U+DCFF passes the policy and the tool fails inside
    subprocess.Popen (UnicodeEncodeError) with an "Internal error ... This is a bug in coretools"."""
    for policy in (("--allow-command", "echo"), ("--deny-command", "rm")):
        result = await run(root, "echo \ud800", *policy)
        assert "Internal error" not in text_of(result), policy
