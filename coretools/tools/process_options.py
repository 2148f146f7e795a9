"""The process options shared by run_shell_command and project-discovered tools (`--shell-timeout`,
`--shell-env`, `--shell-sandbox`...), and the process settings they make for the runner."""

from __future__ import annotations

from dataclasses import dataclass

from coretools.sandbox.process_settings import DEFAULT_INACTIVITY_TIMEOUT, DEFAULT_WALL_TIMEOUT, ProcessSettings


@dataclass(frozen=True)
class ProcessOptions:
    shell_env: tuple[str, ...] = ()
    shell_timeout: float | None = DEFAULT_WALL_TIMEOUT  # 0 or None: no limit
    shell_inactivity_timeout: float | None = DEFAULT_INACTIVITY_TIMEOUT
    shell_sandbox: str | None = "auto"  # None: as "none"
    shell_no_network: bool = False
    shell_writable: tuple[str, ...] = ()
    shell_no_default_caches: bool = False

    def settings(self) -> ProcessSettings:
        return ProcessSettings(
            wall_timeout=_seconds(self.shell_timeout),
            inactivity_timeout=_seconds(self.shell_inactivity_timeout),
            passthrough=tuple(self.shell_env),
            sandbox=self.shell_sandbox or "none",
            network=not self.shell_no_network,
            writable=tuple(self.shell_writable),
            caches=not self.shell_no_default_caches,
        )


def _seconds(value: float | None) -> float | None:
    return None if value is None or value <= 0 else float(value)
