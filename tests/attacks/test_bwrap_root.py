"""Attacks on `--shell-sandbox bwrap` with the server running as root (the usual case in containers).

Every test drives the real tool (`run_shell_command` through the server's own call path) and asserts on
effects seen from the host: capabilities read inside the sandbox, files outside the roots, host sysctls,
`.git` files that run code on the host later, the content of secret `.env` files. Harmless targets only:
mounts are remounted with `bind` (per-mount flags in the sandbox's own mount namespace, never a
superblock), markers have unique names and are removed if they ever appear, the one sysctl touched is
restored.

Each test's docstring says which layer it proves. The layer tests at the end take one layer at a time
(the seccomp filter without the namespaces, `--disable-userns` without the seccomp filter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from sandbox_probe import BLOCKED, SYSCALL_PROBE, namespaces_forbidden, probe_results
from support import call_tool

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux only"),
]

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
SANDBOX = ("--shell-sandbox", "bwrap")


FORBIDDEN = namespaces_forbidden()
needs_namespaces = pytest.mark.skipif(FORBIDDEN is not None, reason=f"the kernel forbids namespaces: {FORBIDDEN}")


async def sandboxed(root: Path, command: str, *flags: str, directory: str | None = None) -> dict:
    args = {"command": command}
    if directory:
        args["directory"] = directory
    result = await call_tool(root, "run_shell_command", args, *SANDBOX, *flags)
    structured = result.structured
    assert "bwrap" not in (structured.get("error") or {}).get("message", ""), structured
    return structured


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Sandbox Test")
    git(path, "config", "user.email", "sandbox@example.invalid")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "initial")
    return path


def tree_state(path: Path) -> dict[str, bytes | str]:
    """Contents and modes of every file below `path` (or the file itself): what an attack must not change."""
    if path.is_file():
        return {"": path.read_bytes() + oct(path.stat().st_mode).encode()}
    state: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = str(full.relative_to(path))
            state[rel] = "<dir>" if full.is_dir() else full.read_bytes() + oct(full.stat().st_mode).encode()
    return state


@pytest.fixture
def outside() -> Path:
    """A host directory outside the roots and outside /tmp (which the sandbox replaces), writable by anyone
    on the host, so only the sandbox can stop a write into it."""
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    path = Path(tempfile.mkdtemp(prefix="coretools-attack-", dir=base))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


REMOUNT_ALL = 'while read -r _ _ _ _ m _; do mount -o remount,bind,rw "$m" 2>/dev/null; done < /proc/self/mountinfo'


# -- capabilities ----------------------------------------------------------------------------------------


@needs_namespaces
async def test_no_capabilities_inside(root: Path) -> None:
    """--unshare-user + --cap-drop ALL: a fresh process in the sandbox has no capability at all."""
    s = await sandboxed(root, "grep -E '^Cap(Eff|Prm|Bnd|Amb|Inh):' /proc/self/status")
    caps = dict(line.split(":\t") for line in s["stdout"].splitlines())
    assert set(caps) == {"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"}, s
    assert all(int(v, 16) == 0 for v in caps.values()), caps


# -- the file system: remounts, nested namespaces ----------------------------------------------------------


@needs_namespaces
async def test_remount_rw_cannot_write_outside_the_roots(root: Path, outside: Path) -> None:
    """No CAP_SYS_ADMIN: remounting every mount read-write fails, the host directory stays untouched."""
    s = await sandboxed(root, f"{REMOUNT_ALL}; echo pwned > {outside}/remount; cat {outside}/remount")
    assert not (outside / "remount").exists(), s
    assert "pwned" not in s["stdout"]


@needs_namespaces
async def test_unshare_mount_namespace_then_remount(root: Path, outside: Path) -> None:
    """Nested namespaces refused (--disable-userns, seccomp): `unshare -m`/`-Urm` cannot give back
    CAP_SYS_ADMIN to remount and write."""
    (root / "remount.sh").write_text(f"{REMOUNT_ALL}\necho \"$1\" > {outside}/\"$1\"\n")
    cmd = "unshare -m sh remount.sh m; unshare -Urm sh remount.sh urm; unshare -Ur unshare -m sh remount.sh ur-m"
    s = await sandboxed(root, cmd)
    assert sorted(os.listdir(outside)) == [], s


@needs_namespaces
async def test_nsenter_then_remount(root: Path, outside: Path) -> None:
    """setns needs capabilities the sandbox does not have (and seccomp refuses it)."""
    cmd = (
        f"nsenter --mount=/proc/1/ns/mnt -- sh -c 'mount -o remount,bind,rw / && echo a > {outside}/nsenter'; "
        f"nsenter -t 1 -a -- sh -c 'mount -o remount,bind,rw / && echo b > {outside}/nsenter-all'"
    )
    s = await sandboxed(root, cmd)
    assert sorted(os.listdir(outside)) == [], s


@needs_namespaces
async def test_etc_cannot_be_written_after_remount(root: Path) -> None:
    """The system stays read-only: a uniquely named marker in /etc never appears on the host."""
    marker = Path("/etc") / f"coretools-attack-{uuid.uuid4().hex}"
    try:
        s = await sandboxed(root, f"mount -o remount,bind,rw / ; mount -o remount,bind,rw /etc ; touch {marker}")
        assert not marker.exists(), s
    finally:
        marker.unlink(missing_ok=True)


@needs_namespaces
async def test_mount_table_read_only_outside_the_roots(root: Path) -> None:
    """Every mount the sandbox sees is read-only except the roots (and what is pinned inside them), its
    private /tmp, the package caches that exist here, its own /dev and /proc; /proc/sys and the other
    host-wide parts of /proc are read-only."""
    from coretools.sandbox.process_settings import default_caches

    s = await sandboxed(root, "cat /proc/self/mountinfo")
    writable_ok = (str(root), "/tmp", "/dev", "/proc", *(os.path.realpath(c) for c in default_caches()))
    points = {line.split()[4] for line in s["stdout"].splitlines()}
    assert "/proc/sys" in points, s
    for line in s["stdout"].splitlines():
        fields = line.split()
        point, options = fields[4], fields[5].split(",")
        if point in ("/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/sysrq-trigger"):
            assert "ro" in options, line
        elif not any(point == w or point.startswith(w + "/") for w in writable_ok):
            assert "ro" in options, line


# -- /proc: host sysctls and sysrq ---------------------------------------------------------------------------

SYSCTL = Path("/proc/sys/kernel/printk_ratelimit")


@needs_namespaces
@pytest.mark.skipif(not SYSCTL.exists(), reason="no kernel.printk_ratelimit sysctl here")
async def test_host_sysctl_unchanged(root: Path) -> None:
    """/proc/sys is bound read-only over the sandbox's /proc: uid 0 passes the sysctl's own permission check
    (owner root, mode 0644) even without capabilities, so only the read-only mount stops the write."""
    before = SYSCTL.read_text()
    new = str(int(before) + 2)
    try:
        s = await sandboxed(
            root,
            f"echo {new} > {SYSCTL}; mount -o remount,bind,rw /proc/sys; echo {new} > {SYSCTL}; "
            f"sysctl -w kernel.printk_ratelimit={new}; cat {SYSCTL}",
        )
        assert SYSCTL.read_text() == before, s
    finally:
        if SYSCTL.read_text() != before:
            SYSCTL.write_text(before)


@needs_namespaces
@pytest.mark.skipif(not os.path.exists("/proc/sysrq-trigger"), reason="this kernel has no /proc/sysrq-trigger")
async def test_sysrq_trigger_cannot_be_opened_for_writing(root: Path) -> None:
    """/proc/sysrq-trigger (mode 0200, owner root, no capability check) is read-only inside. Only the
    open(2) is tried; nothing is ever written to it."""
    probe = (
        "import os\n"
        "try:\n"
        "    fd = os.open('/proc/sysrq-trigger', os.O_WRONLY)\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n"
        "else:\n"
        "    os.close(fd)\n"
        "    print('opened')\n"
    )
    s = await sandboxed(root, f"{PY} -c \"{probe}\"")
    assert s["stdout"].startswith("refused"), s


# -- git: what runs on the host later ------------------------------------------------------------------------

HOOK = "#!/bin/sh\ntouch /tmp/coretools-hook-ran\n"
PLANT = (
    "printf '#!/bin/sh\\necho pwned\\n' > {git}/hooks/pre-commit; chmod +x {git}/hooks/pre-commit; "
    "printf '#!/bin/sh\\necho pwned\\n' > {git}/hooks/post-checkout; "
    "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> {git}/config; "
    "git config core.fsmonitor 'touch /tmp/pwned'; git config core.hooksPath /tmp; "
    "mv {git}/hooks {git}/hooks.old; rm -rf {git}/hooks; mkdir -p {git}/hooks; "
    "echo x > {git}/hooks/pre-commit; mv {git}/config {git}/config.old; echo x > {git}/config"
)


@needs_namespaces
async def test_git_hooks_and_config_read_only(root: Path) -> None:
    """`.git/config` and `.git/hooks` of a repository at the root are bound read-only."""
    make_repo(root)
    before = {p: tree_state(root / ".git" / p) for p in ("config", "hooks")}
    s = await sandboxed(root, PLANT.format(git=".git"))
    assert {p: tree_state(root / ".git" / p) for p in ("config", "hooks")} == before, s


@needs_namespaces
async def test_git_dir_cannot_be_swapped(root: Path) -> None:
    """The `.git` directory itself is pinned (a mount point): it cannot be renamed away and replaced by one
    whose config runs code."""
    make_repo(root)
    head = git(root, "rev-parse", "HEAD")
    config = (root / ".git" / "config").read_bytes()
    s = await sandboxed(
        root,
        "mv .git .git-old; cp -a .git /tmp/g 2>/dev/null; rm -rf .git/config; "
        "git init -q . ; git config core.fsmonitor 'touch /tmp/pwned'; "
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > .git/config",
    )
    assert not (root / ".git-old").exists(), s
    assert (root / ".git" / "config").read_bytes() == config
    assert git(root, "rev-parse", "HEAD") == head


@needs_namespaces
async def test_missing_hooks_dir_cannot_be_created(root: Path) -> None:
    """A repository without `.git/hooks` (some tools clone without it) gets no hook either."""
    make_repo(root)
    shutil.rmtree(root / ".git" / "hooks")
    s = await sandboxed(root, "mkdir -p .git/hooks; printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit")
    assert not (root / ".git" / "hooks" / "pre-commit").exists(), s


@needs_namespaces
async def test_linked_worktree_and_common_dir(root: Path) -> None:
    """From inside a linked worktree (`.git` is a file): the common dir's config and hooks, the worktree's
    own gitdir and the `.git` file itself are all read-only."""
    main = make_repo(root / "main")
    git(main, "worktree", "add", "-q", "-b", "feature", str(root / "wt"))
    gitdir = main / ".git" / "worktrees" / "wt"
    (gitdir / "config.worktree").write_text("[core]\n")
    watched = [main / ".git" / "config", main / ".git" / "hooks", gitdir / "config.worktree", gitdir / "commondir",
               root / "wt" / ".git"]  # fmt: skip
    before = [tree_state(p) for p in watched]
    cmd = (
        'common=$(git rev-parse --git-common-dir); own=$(git rev-parse --git-dir); '
        + PLANT.format(git="$common")
        + "; printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > $own/config.worktree"
        + f"; echo {root}/evil > $own/commondir; mv $own $own.old"
        + f"; echo 'gitdir: {root}/evil' > .git"
    )
    s = await sandboxed(root, cmd, directory="wt")
    assert [tree_state(p) for p in watched] == before, s


@needs_namespaces
async def test_commondir_redirect_removed(root: Path) -> None:
    """A git directory without `commondir` cannot be given one that sends git to another repository's
    config (whose fsmonitor would run on the host): one created during the run is removed after it, and
    the command is told. `config.worktree` likewise."""
    make_repo(root)
    evil = root / "evil"
    git(root, "init", "-q", "--bare", str(evil))
    (evil / "config").write_text(f"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch {root}/PWNED; false\n")
    s = await sandboxed(root, "echo ../evil > .git/commondir; printf '[core]\\n\\tfsmonitor = false\\n' > .git/config.worktree")
    assert not (root / ".git" / "commondir").exists() and not (root / ".git" / "config.worktree").exists(), s
    assert "removed" in s["stderr"] and "commondir" in s["stderr"], s
    git(root, "status", "--short")
    assert not (root / "PWNED").exists()


@needs_namespaces
async def test_separate_git_dir(root: Path) -> None:
    """`git init --separate-git-dir`: the gitdir that the `.git` file points to is protected too."""
    store = root / "store"
    proj = root / "proj"
    proj.mkdir()
    git(proj, "init", "-q", f"--separate-git-dir={store}")
    watched = [store / "config", store / "hooks", proj / ".git"]
    before = [tree_state(p) for p in watched]
    s = await sandboxed(root, PLANT.format(git="$(git rev-parse --git-dir)"), directory="proj")
    assert [tree_state(p) for p in watched] == before, s


@needs_namespaces
async def test_submodule_gitdirs(root: Path) -> None:
    """`.git/modules/<name>` (a submodule's gitdir, nested submodules too) has config and hooks of its own."""
    make_repo(root)
    for sub in ("modules/lib", "modules/lib/modules/inner"):
        gitdir = root / ".git" / sub
        (gitdir / "hooks").mkdir(parents=True)
        (gitdir / "config").write_text("[core]\n\tbare = false\n")
    watched = [root / ".git/modules/lib", root / ".git/modules/lib/modules/inner"]
    before = [tree_state(p) for p in watched]
    cmd = "; ".join(PLANT.format(git=f".git/{sub}") for sub in ("modules/lib", "modules/lib/modules/inner"))
    s = await sandboxed(root, cmd)
    assert [tree_state(p) for p in watched] == before, s


@needs_namespaces
async def test_nested_repository(root: Path) -> None:
    """A repository below the root (a vendored project, a monorepo member) is protected like the top one."""
    make_repo(root)
    inner = make_repo(root / "packages" / "inner")
    before = {p: tree_state(inner / ".git" / p) for p in ("config", "hooks")}
    s = await sandboxed(root, PLANT.format(git="packages/inner/.git"))
    assert {p: tree_state(inner / ".git" / p) for p in ("config", "hooks")} == before, s


# -- secret files ----------------------------------------------------------------------------------------------


def plant_secrets(root: Path) -> dict[str, str]:
    secrets = {
        ".env": "ROOT_ENV_SECRET_1",
        "app/.env.local": "APP_LOCAL_SECRET_2",
        "app/.ENV.Production": "APP_PROD_SECRET_3",
        "deep/a/b/c/.env": "DEEP_SECRET_4",
        "deep/.env.": "TRAILING_DOT_SECRET_5",
    }
    for rel, value in secrets.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"TOKEN={value}\n")
    (root / ".env.example").write_text("TOKEN=example-value-visible\n")
    return secrets


@needs_namespaces
async def test_env_files_masked(root: Path) -> None:
    """Secret env files (the set the file tools refuse) read as empty; `.env.example` stays readable."""
    secrets = plant_secrets(root)
    cmd = (
        "cat .env app/.env.local app/.ENV.Production deep/a/b/c/.env 'deep/.env.' .env.example; "
        "grep -r TOKEN . ; cp .env /tmp/copy && cat /tmp/copy; ln .env hard 2>/dev/null && cat hard; "
        "tar cf - . 2>/dev/null | strings"
    )
    s = await sandboxed(root, cmd)
    out = s["stdout"] + s["stderr"]
    assert "example-value-visible" in out
    for value in secrets.values():
        assert value not in out, (value, s)


@needs_namespaces
async def test_env_files_masked_from_a_subdirectory(root: Path) -> None:
    """The mask does not depend on where the command runs."""
    secrets = plant_secrets(root)
    s = await sandboxed(root, "cat .env.local .ENV.Production ../.env; cd ..; cat .env", directory="app")
    for value in secrets.values():
        assert value not in s["stdout"] + s["stderr"], (value, s)


@needs_namespaces
async def test_env_symlinks_masked_at_their_target(root: Path, outside: Path) -> None:
    """A `.env` that is a symbolic link (absolute or relative, even to a file outside the roots) is masked
    where it points; a dangling one does not stop the sandbox from starting."""
    (outside / "prod.env").write_text("TOKEN=OUTSIDE_LINKED_SECRET\n")
    (root / "real-secret").write_text("TOKEN=RELATIVE_LINKED_SECRET\n")
    (root / "a").mkdir()
    (root / "a" / ".env").symlink_to(outside / "prod.env")
    (root / "a" / ".env.local").symlink_to("../real-secret")
    (root / ".env").symlink_to("/nonexistent/coretools/.env")
    s = await sandboxed(root, "cat a/.env a/.env.local; echo end")
    assert s["exit_code"] == 0 and s["stdout"].split() == ["end"], s


@needs_namespaces
async def test_env_files_cannot_be_changed_or_removed(root: Path) -> None:
    """A masked file cannot be overwritten or deleted through the mask."""
    plant_secrets(root)
    before = (root / ".env").read_bytes()
    s = await sandboxed(root, "echo TOKEN=changed > .env; rm -f .env; mv .env gone")
    assert (root / ".env").read_bytes() == before, s


# -- kernel surface: nested namespaces, seccomp ---------------------------------------------------------------

@needs_namespaces
async def test_kernel_attack_surface_refused(root: Path) -> None:
    """ptrace, io_uring, keyctl, bpf, userfaultfd, nested unshare/clone/setns/mount all fail with EPERM;
    clone3 reports ENOSYS so that libc falls back to clone, whose flags the filter can see."""
    (root / "probe.py").write_text(SYSCALL_PROBE)
    s = await sandboxed(root, f"{PY} probe.py")
    results = probe_results(s["stdout"])
    assert {k: results[k] for k in BLOCKED} == dict.fromkeys(BLOCKED, "EPERM"), s
    assert results["clone3"] == "ENOSYS", s


@needs_namespaces
async def test_nested_user_namespace_refused(root: Path) -> None:
    """`unshare -U` (and `-r`) fail inside: no nested user namespace to regain capabilities in."""
    s = await sandboxed(root, "unshare -U true && echo nested-U; unshare -Ur true && echo nested-Ur; echo done")
    assert s["stdout"].split() == ["done"], s


@needs_namespaces
async def test_new_session(root: Path) -> None:
    """--new-session: the command leads a session inside the sandbox (no TIOCSTI into the server's terminal),
    so its session id is visible in its own PID namespace (a leader outside it shows as 0)."""
    s = await sandboxed(root, "awk '{print $6}' /proc/self/stat")
    assert s["stdout"].strip() not in ("", "0"), s


# -- already held before ---------------------------------------------------------------------------------------


@needs_namespaces
async def test_plain_write_outside_roots_refused(root: Path, outside: Path) -> None:
    """The system is read-only (held before: --ro-bind / /)."""
    s = await sandboxed(root, f"echo x > {outside}/plain; touch /usr/coretools-attack-{uuid.uuid4().hex}")
    assert not (outside / "plain").exists() and "Read-only file system" in s["stderr"], s


@needs_namespaces
async def test_no_network_has_only_loopback(root: Path) -> None:
    """--shell-no-network: only `lo` exists (held before: --unshare-net)."""
    s = await sandboxed(root, "tail -n +3 /proc/net/dev | cut -d: -f1", "--shell-no-network")
    assert s["stdout"].split() == ["lo"], s


# -- one layer at a time ---------------------------------------------------------------------------------------


def run_raw(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, **kwargs)


@needs_namespaces
def test_layer_seccomp_alone(tmp_path: Path) -> None:
    """The seccomp filter on its own, as root WITHOUT a user namespace (all capabilities kept): every call
    it covers still fails with EPERM, so the filter is not just repeating what missing capabilities do."""
    from coretools.sandbox.bwrap import bwrap_binary
    from coretools.sandbox.seccomp import filter_program

    program = filter_program()
    if program is None:
        pytest.skip(f"no seccomp filter for {os.uname().machine}")
    (tmp_path / "probe.py").write_text(SYSCALL_PROBE)
    read, write = os.pipe()
    os.write(write, program)
    os.close(write)
    argv = [bwrap_binary(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(tmp_path), "/tmp",
            "--seccomp", str(read), "--", "sh", "-c", f"grep CapEff /proc/self/status; {PY} /tmp/probe.py"]  # fmt: skip
    try:
        done = run_raw(argv, pass_fds=(read,))
    finally:
        os.close(read)
    if os.getuid() == 0:
        assert int(done.stdout.split()[1], 16) != 0, done  # root keeps its capabilities: only the filter acts
    results = probe_results(done.stdout)
    assert {k: results[k] for k in BLOCKED} == dict.fromkeys(BLOCKED, "EPERM"), done
    assert results["clone3"] == "ENOSYS", done


@needs_namespaces
def test_layer_without_seccomp_still_refuses_nesting(root: Path, tmp_path: Path) -> None:
    """With the seccomp filter left out, --disable-userns still refuses a nested user namespace and
    --cap-drop ALL still leaves CapEff 0."""
    from coretools.sandbox.bwrap import bwrap_argv

    private = tmp_path / "private-tmp"
    private.mkdir()
    cmd = "grep CapEff /proc/self/status; unshare -U true && echo nested; unshare -Urm true && echo nested-m; echo end"
    argv = bwrap_argv(["bash", "-c", cmd], writable=[str(root)], private_tmp=str(private), cwd=str(root),
                      seccomp_fd=None)  # fmt: skip
    assert "--seccomp" not in argv
    done = run_raw(argv)
    assert done.stdout.split() == ["CapEff:", "0000000000000000", "end"], done
