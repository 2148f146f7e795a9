"""The process options shared by run_shell_command and project-discovered tools (`--shell-timeout`,
`--shell-env`, `--shell-sandbox`...), and the process settings they make for the runner."""

from __future__ import annotations

from dataclasses import dataclass

from coretools.sandbox import (
    DEFAULT_INACTIVITY_TIMEOUT, DEFAULT_WALL_TIMEOUT, SANDBOX_MODES, ProcessSettings, limit_option,
)
from coretools.tools.base import option


@dataclass(frozen=True)
class ProcessOptions:
    shell_env: tuple[str, ...] = option(
        (),
        "--shell-env",
        "pass this environment variable to commands even though its name looks secret (repeatable)",
        metavar="NAME",
    )
    shell_timeout: float | None = option(  # 0 or None: no limit
        DEFAULT_WALL_TIMEOUT,
        "--shell-timeout",
        f"wall-clock limit per command, also for discovered tools; 0 disables (default: {DEFAULT_WALL_TIMEOUT:g})",
        metavar="SECONDS",
    )
    shell_inactivity_timeout: float | None = option(
        DEFAULT_INACTIVITY_TIMEOUT,
        "--shell-inactivity-timeout",
        f"stop a command after this long without output; 0 disables (default: {DEFAULT_INACTIVITY_TIMEOUT:g})",
        metavar="SECONDS",
    )
    shell_sandbox: str | None = option(  # None: as "none"
        "auto",
        "--shell-sandbox",
        "the OS sandbox of every command: bwrap (bubblewrap: system read-only, only the roots, a private /tmp "
        "and the package caches writable), landlock (the kernel's Landlock, no namespaces needed: writes limited "
        "the same way), none (unconfined), or auto: bwrap where it works, else landlock, else none with a "
        "warning (default: auto)",
        choices=list(SANDBOX_MODES),
    )
    shell_no_network: bool = option(
        False,
        "--shell-no-network",
        "commands get no network (bwrap: only loopback; landlock: no TCP, needs Linux 6.7); the server refuses "
        "to start if the sandbox cannot hold it",
    )
    shell_writable: tuple[str, ...] = option(
        (), "--shell-writable", "let sandboxed commands write DIR too (repeatable)", metavar="DIR"
    )
    shell_no_default_caches: bool = option(
        False,
        "--shell-no-default-caches",
        "do not let sandboxed commands write the package caches (XDG cache, npm, cargo, go, maven, gradle)",
    )

    def settings(self) -> ProcessSettings:
        return ProcessSettings(
            wall_timeout=_seconds(limit_option(self.shell_timeout, "--shell-timeout")),
            inactivity_timeout=_seconds(limit_option(self.shell_inactivity_timeout, "--shell-inactivity-timeout")),
            passthrough=tuple(self.shell_env),
            sandbox=self.shell_sandbox or "none",
            network=not self.shell_no_network,
            writable=tuple(self.shell_writable),
            caches=not self.shell_no_default_caches,
        )


def _seconds(value: float | None) -> float | None:
    return None if value is None else float(value)
