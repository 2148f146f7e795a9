"""The argument policy's option parser alone (`exec_policy/getopt.py`): a command line read as glibc's
getopt_long reads it, from the program's option table."""

from __future__ import annotations

import subprocess

import pytest

from coretools.sandbox.exec_policy.getopt import Spec, parse
from coretools.sandbox.exec_policy.launchers import ENV, LAUNCHERS, XARGS
from coretools.sandbox.exec_policy.words import ArgumentRefused

SCAN = Spec("e:f:o::x", "pre: pre-glob: regexp:=e file:=f exact=x")


def read(spec: Spec, *args: str | None) -> tuple[list[tuple[str, str | None]], list[str | None]]:
    parsed = parse("prog", spec, list(args))
    return [(o.name, o.value) for o in parsed.options], parsed.operands


@pytest.mark.parametrize(
    "args,options,operands",
    [
        (["-0a", "FILE", "sh"], [("-0", None), ("-a", "FILE")], ["sh"]),
        (["-0aFILE", "sh"], [("-0", None), ("-a", "FILE")], ["sh"]),
        (["-0n", "1", "rm"], [("-0", None), ("-n", "1")], ["rm"]),
        (["--arg-file=F", "sh"], [("-a", "F")], ["sh"]),
        (["--arg-file", "F", "sh"], [("-a", "F")], ["sh"]),
        (["--arg", "F", "sh"], [("-a", "F")], ["sh"]),  # a unique prefix
        (["-i{}", "echo"], [("-i", "{}")], ["echo"]),  # an optional value only attaches
        (["-i", "{}", "echo"], [("-i", None)], ["{}", "echo"]),
        (["--replace", "echo"], [("-i", None)], ["echo"]),
        (["--replace=X", "echo"], [("-i", "X")], ["echo"]),
        (["--", "-a", "x"], [], ["-a", "x"]),
        (["-r", "-", "x"], [("-r", None)], ["-", "x"]),
        (["sh", "-a", "x"], [], ["sh", "-a", "x"]),  # `+`: the first operand ends the options
    ],
)  # fmt: skip
def test_xargs_is_read_as_getopt_reads_it(args: list[str], options: list, operands: list) -> None:
    assert read(XARGS, *args) == (options, operands)


def test_the_reading_agrees_with_the_real_xargs(tmp_path) -> None:
    """`-0a FILE` is `-0 -a FILE`: the real xargs runs the word after FILE, with FILE's NUL-separated items."""
    (tmp_path / "items").write_bytes(b"one\0two\0")
    done = subprocess.run(["xargs", "-0a", "items", "echo"], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout == "one two\n"
    assert read(XARGS, "-0a", "items", "echo")[1] == ["echo"]


@pytest.mark.parametrize(
    "program,args,command",
    [
        ("timeout", ["-vs", "KILL", "5", "rm"], ["5", "rm"]),
        ("timeout", ["--sig", "KILL", "5", "rm"], ["5", "rm"]),
        ("timeout", ["-k5", "-s9", "5", "rm"], ["5", "rm"]),
        ("ionice", ["-tc", "3", "rm"], ["rm"]),
        ("ionice", ["--classd", "7", "-c", "2", "rm"], ["rm"]),
        ("nice", ["-5", "rm"], ["rm"]),
        ("nice", ["--adj", "5", "rm"], ["rm"]),
        ("nice", ["-n5", "rm"], ["rm"]),
        ("stdbuf", ["--out", "L", "rm"], ["rm"]),
        ("chrt", ["-T", "1000", "-d", "0", "rm"], ["0", "rm"]),
    ],
)  # fmt: skip
def test_launchers_find_the_command(program: str, args: list[str], command: list[str]) -> None:
    spec, _ = LAUNCHERS[program]
    assert parse(program, spec, args).operands == command


def test_env_reads_its_options_and_stops_at_the_first_operand() -> None:
    assert read(ENV, "-iu", "HOME", "-C", "d", "ls", "-u") == ([("-i", None), ("-u", "HOME"), ("-C", "d")], ["ls", "-u"])
    assert read(ENV, "--spl=x")[0] == [("-S", "x")]


@pytest.mark.parametrize("args,part", [(["-Q", "sh"], "`-Q`"), (["-0Q", "sh"], "`-Q`"), (["--bogus", "sh"], "--bogus")])
def test_an_unknown_option_of_a_launcher_is_refused_naming_it(args: list[str], part: str) -> None:
    with pytest.raises(ArgumentRefused) as info:
        parse("xargs", XARGS, args)
    assert part in info.value.why and "not one the shell policy knows" in info.value.why


def test_a_word_that_is_not_literal_before_the_command_is_refused() -> None:
    with pytest.raises(ArgumentRefused, match="not literal"):
        parse("xargs", XARGS, ["-0", None, "sh"])


def test_an_ambiguous_abbreviation_is_refused() -> None:
    with pytest.raises(ArgumentRefused, match="ambiguous"):
        parse("rg", SCAN, ["--pr=sh"])
    assert read(SCAN, "--pre=sh")[0] == [("--pre", "sh")]  # an exact name wins over longer ones


def test_a_scanned_program_reads_unknown_options_as_flags_and_keeps_looking() -> None:
    """Unknown letters and names do not hide the words after them: `-Q --pre=sh` still finds --pre."""
    options, operands = read(SCAN, "-Qx", "--bogus", "--pre=sh", "-Zesh", "pattern", "--file", "f", "path")
    assert options == [("-Q", None), ("-x", None), ("--bogus", None), ("--pre", "sh"), ("-Z", None), ("-e", "sh"),
                       ("-f", "f")]  # fmt: skip
    assert operands == ["pattern", "path"]  # GNU permutation: options after operands still count


def test_an_option_value_is_not_read_as_an_option() -> None:
    assert read(SCAN, "-e", "--pre=sh", "x") == ([("-e", "--pre=sh")], ["x"])
    assert read(SCAN, "-o", "--pre=sh") == ([("-o", None), ("--pre", "sh")], [])  # `o::` only attaches


def test_the_table_notation() -> None:
    spec = Spec("+ab:c::", "long: opt:: flag=a")
    assert spec.shorts == {"a": "flag", "b": "value", "c": "optional"}
    assert spec.longs == {"long": ("value", "--long"), "opt": ("optional", "--opt"), "flag": ("flag", "-a")}
    assert not spec.permutes and SCAN.permutes
