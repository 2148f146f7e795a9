"""The environment an allowlisted command runs in, whatever its arguments.

`neutralise(env)` is applied by `process_settings.child_env` when the run asks for it (`hardened=True`:
`run_shell_command` under an allowlist): without an allowlist nothing bounds what runs, and the operator's
hooks, aliases and global configuration keep working. It neutralises the ways git runs programs named in
its configuration, so that an allowed `git status` cannot become arbitrary execution through configuration
the model managed to plant:

- the caller's git variables are removed (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_EXEC_PATH`, every `GIT_CONFIG*`,
  `GIT_SSH*`, `GIT_EXTERNAL_DIFF`, `GIT_ASKPASS`, `GIT_TEMPLATE_DIR`, ...), and `ext`/`file` are taken out of
  a caller's `GIT_ALLOW_PROTOCOL` (that list overrides the protocol configuration below);
- system and global configuration are not read (`GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`);
- `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` pin the keys in `PINS`. They are command-line
  scope, read last, so they win over a repository's own value of the same key (each pin is checked against
  a repository-level value in tests/attacks/test_git_exec.py);
- `GIT_PROXY_COMMAND` is set to the empty string rather than removed: git takes the variable before any
  `core.gitProxy`, and the configured proxy is "first match wins", so a pin could not override it;
- pagers and editors are `cat`/`true` and git never prompts;
- bash options from the environment (`BASHOPTS`, `SHELLOPTS`, `GLOBIGNORE`, which turns on dotglob) and
  `CDPATH` are removed, so globs and `cd` mean what the shell policy read.

Two git behaviours shape the pins. The far side of a local transport (`git push ../repo`, `file://`) runs
with `GIT_CONFIG_COUNT` cleared by git itself, so it would honour the hooks of a repository the model
wrote: `protocol.file.allow=never` turns local transports off. Symlinks checked out from history the model
fetched can point into `.git/`, where plain file writes through them would plant configuration:
`core.symlinks=false` checks them out as small files holding the target.

What cannot be pinned is any key whose name the writer chooses (`alias.*`, `filter.<driver>.*`,
`diff.<driver>.textconv`/`command`, `merge.<driver>.driver`, `remote.<name>.uploadpack`...), and
`diff.external`: an empty value does not unset it, it makes every `git diff` fail ("external diff died").
Those stay out of reach because the model cannot write git configuration: the argument policy
(`coretools/sandbox/exec_policy`) refuses `git config` writes, aliases, `--git-dir` and writes into
`.git/`, and write_file refuses protected paths.

Commits keep working: the operator's `user.name`/`user.email`, read once with the server's own environment,
are passed as `GIT_AUTHOR_*`/`GIT_COMMITTER_*` unless those are already set.
"""

from __future__ import annotations

import functools
import os
import subprocess

DROPPED = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_EXEC_PATH", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS",
                     "GIT_TEMPLATE_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                     "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
                     "GIT_SHALLOW_FILE", "GIT_PREFIX", "SSH_ASKPASS",
                     "BASHOPTS", "SHELLOPTS", "GLOBIGNORE", "CDPATH"})  # fmt: skip
DROPPED_PREFIXES = ("GIT_CONFIG", "GIT_SSH", "GIT_TRACE")
UNSAFE_PROTOCOLS = {"ext", "file"}
PINS: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
    ("core.alternateRefsCommand", "true"),
    ("core.symlinks", "false"),
    ("credential.helper", ""),  # an empty value empties the helper list gathered so far
    ("protocol.ext.allow", "never"),
    ("protocol.file.allow", "never"),
    ("safe.bareRepository", "explicit"),
    ("init.templateDir", ""),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
)
FIXED = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_PROXY_COMMAND": "",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_TERMINAL_PROMPT": "0",
}
IDENTITY = (("user.name", ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")),
            ("user.email", ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")))  # fmt: skip


def neutralise(env: dict[str, str]) -> dict[str, str]:
    """Return `env` with the settings that neutralise exec-capable configuration."""
    out = {k: v for k, v in env.items() if k not in DROPPED and not k.startswith(DROPPED_PREFIXES)}
    if "GIT_ALLOW_PROTOCOL" in out:
        kept = [p for p in out["GIT_ALLOW_PROTOCOL"].split(":") if p and p not in UNSAFE_PROTOCOLS]
        out["GIT_ALLOW_PROTOCOL"] = ":".join(kept)
    out.update(FIXED)
    out["GIT_CONFIG_COUNT"] = str(len(PINS))
    for index, (key, value) in enumerate(PINS):
        out[f"GIT_CONFIG_KEY_{index}"] = key
        out[f"GIT_CONFIG_VALUE_{index}"] = value
    for name, value in operator_identity().items():
        out.setdefault(name, value)
    return out


@functools.lru_cache(maxsize=1)
def operator_identity() -> dict[str, str]:
    """The operator's git identity as their own git sees it (system and global configuration, their
    environment), as GIT_AUTHOR_*/GIT_COMMITTER_* values. Read once per process, from `/` so that no
    repository's configuration takes part."""
    found: dict[str, str] = {}
    for key, names in IDENTITY:
        try:
            done = subprocess.run(["git", "config", "--get", key], cwd="/", env=dict(os.environ),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            continue
        value = done.stdout.strip()
        if done.returncode == 0 and value:
            found.update(dict.fromkeys(names, value))
    return found
