"""What the operator sets besides the flags' own meaning: the environment coretools reads, all read here, and
the rule every limit option follows.

* `CORETOOLS_STATE_DIR`: the private state directory (edit journal, recovery records, edit locks); default
  `$XDG_STATE_HOME/coretools`, else `~/.local/state/coretools`;
* `CORETOOLS_RG`: the ripgrep binary to run, or `off` (`0`, `none`, `false`, empty) for none; default the
  `rg` beside the Python interpreter, then the one on PATH;
* `CORETOOLS_NO_OPENAT2`: any non-empty value resolves paths by the O_NOFOLLOW component walk instead of
  openat2 (default: openat2 wherever the kernel has it);
* `CORETOOLS_STDIO`: `sdk` serves stdio through the MCP SDK's transport instead of coretools' own;
* `CORETOOLS_LOG_LEVEL`: the default of `--log-level` (debug, info, warning, error); default `warning`.

They are for operators and tests, not for what a tool call may change: each is read when it is asked for
(not when this module is imported), so a test or an embedding program can set one before the first use.
The client side reads its own (`CORETOOLS_OAUTH_DIR`) on its side of the wall.

A limit option (`--max-calls`, `--shell-timeout`, `--max-media-bytes`...) of 0 means no limit, and
`limit_option` is the one place that says so. No numeric option takes a negative value: `refuse_negative`
refuses one, naming the option, when the configuration is built (`ServerConfig`, each tool's options),
whether from the command line or in code.
"""

from __future__ import annotations

import os
from typing import TypeVar

from coretools.errors import ConfigurationError

STATE_DIR = "CORETOOLS_STATE_DIR"
RG = "CORETOOLS_RG"
NO_OPENAT2 = "CORETOOLS_NO_OPENAT2"
STDIO = "CORETOOLS_STDIO"
LOG_LEVEL = "CORETOOLS_LOG_LEVEL"

RG_OFF = ("", "0", "off", "none", "false")

Number = TypeVar("Number", int, float)


def state_dir() -> str:
    """The user's private state directory for coretools (`CORETOOLS_STATE_DIR`, else XDG's)."""
    explicit = os.environ.get(STATE_DIR)
    if explicit:
        return explicit
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "coretools")


def rg_override() -> str | None:
    """What `CORETOOLS_RG` asks for: None when it is unset (look for ripgrep), '' when ripgrep is turned off,
    else the binary's path."""
    value = os.environ.get(RG)
    if value is None:
        return None
    return "" if value.lower() in RG_OFF else value


def openat2_disabled() -> bool:
    """Whether `CORETOOLS_NO_OPENAT2` turns openat2 off (the kernel module then walks with O_NOFOLLOW)."""
    return bool(os.environ.get(NO_OPENAT2))


def sdk_stdio() -> bool:
    """Whether `CORETOOLS_STDIO=sdk` asks for the MCP SDK's stdio transport."""
    return os.environ.get(STDIO) == "sdk"


def log_level(default: str = "warning") -> str:
    """The default log level (`CORETOOLS_LOG_LEVEL`); `--log-level` overrides it."""
    return os.environ.get(LOG_LEVEL, default)


def limit_option(value: Number | None, flag: str) -> Number | None:
    """A limit option's value as the code uses it: None (no limit) for 0 or None, else the value itself; a
    negative one is refused (`refuse_negative`)."""
    refuse_negative(flag, value)
    return value if value else None


def refuse_negative(flag: str, value: object) -> None:
    """Refuse a negative number (or NaN) given to the option `flag`, naming it (`ConfigurationError`): no
    numeric option of coretools means anything by one, and where 0 means no limit, 0 says so."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not value >= 0:
        raise ConfigurationError(f"{flag} {value:g}: use a number of 0 or more")
