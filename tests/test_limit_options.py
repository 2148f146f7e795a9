"""Limit options: 0 means no limit, and a negative value is refused, naming the option, for every numeric
option of `serve` (the server's, the HTTP transport's and every tool's), whether the configuration comes
from the command line or is built in code. (Some options once took a negative value as "no limit" and
others refused it.)"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from coretools.errors import ConfigurationError
from coretools.sandbox.settings import limit_option
from coretools.server.config import ServerConfig
from coretools.server.http import settings_from
from coretools.server.limits import CallLimiter
from coretools.server.toolset import ToolSet
from support import make_config


def numeric_flags() -> list[str]:
    """Every option of `serve` that takes a number, as its parser declares it."""
    from coretools.cli import build_parser

    parser = build_parser(with_client=False)
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    serve = subparsers.choices["serve"]
    return sorted(
        a.option_strings[0] for a in serve._actions
        if a.option_strings and (a.type in (int, float) or type(a.default) in (int, float)) and a.default is not False
    )  # fmt: skip


def start(roots: list[Path], *flags: str) -> None:
    """Everything `serve` builds from its options before it serves."""
    config = make_config(roots, *flags)
    ToolSet(config)
    CallLimiter.from_config(config)
    settings_from(config)


def test_every_numeric_option_is_found() -> None:
    """Guard against a list that cannot fail: the server's, the transport's and the tools' numbers are in it."""
    flags = numeric_flags()
    for flag in ("--max-result-chars", "--call-timeout", "--max-calls", "--max-sessions", "--port",
                 "--shell-timeout", "--max-media-bytes", "--background-timeout", "--web-fetch-max-bytes"):  # fmt: skip
        assert flag in flags
    assert len(flags) >= 20


@pytest.mark.parametrize("flag", numeric_flags())
def test_a_negative_value_is_refused_naming_the_option(tmp_path: Path, flag: str) -> None:
    start([tmp_path])  # the defaults start
    with pytest.raises(ConfigurationError, match=f"^{flag} -1"):
        start([tmp_path], flag, "-1")


@pytest.mark.parametrize(
    "flag", ["--max-calls", "--max-session-calls", "--call-timeout", "--shell-timeout", "--max-media-bytes",
             "--background-timeout", "--max-sessions", "--session-idle-timeout", "--max-result-chars"],
)  # fmt: skip
def test_zero_means_no_limit_and_starts(tmp_path: Path, flag: str) -> None:
    start([tmp_path], flag, "0")


def test_no_limit_is_zero_or_none() -> None:
    assert limit_option(0, "--x") is None and limit_option(None, "--x") is None and limit_option(0.0, "--x") is None
    assert limit_option(5, "--x") == 5 and limit_option(2.5, "--x") == 2.5
    for bad in (-1, -0.5, math.nan):
        with pytest.raises(ConfigurationError, match="--x"):
            limit_option(bad, "--x")


def test_a_configuration_built_in_code_is_held_to_the_same_rule(tmp_path: Path) -> None:
    from coretools.tools.process_options import ProcessOptions
    from coretools.tools.run_shell_command import RunShellCommand, ShellOptions

    with pytest.raises(ConfigurationError, match="^--max-calls -1: use a number of 0 or more$"):
        ServerConfig(roots=[str(tmp_path)], max_calls=-1)
    with pytest.raises(ConfigurationError, match="^--shell-timeout -2.5: "):
        RunShellCommand(ShellOptions(shell_timeout=-2.5))
    assert ProcessOptions(shell_timeout=0).settings().wall_timeout is None
