"""Attacks on `--shell-sandbox bwrap` with the server running as an ordinary user (uid 65534, no groups).

The server is a real subprocess started through `setpriv --reuid 65534 --regid 65534 --clear-groups`,
spoken to by the official MCP client over stdio. The roots live in a directory that user owns (not under
the test's /tmp, whose parents are private to root). Effects are checked from the host as in
test_bwrap_root.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from sandbox_probe import BLOCKED, SYSCALL_PROBE, namespaces_forbidden, probe_results
from support import REPO

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux only"),
    pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]

NOBODY = 65534
SETPRIV = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


FORBIDDEN = namespaces_forbidden()
needs_namespaces = pytest.mark.skipif(FORBIDDEN is not None, reason=f"the kernel forbids namespaces: {FORBIDDEN}")


def as_nobody(argv: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([*SETPRIV, *argv], cwd=cwd, env=env, capture_output=True, text=True, check=check)


@pytest.fixture
def base() -> Path:
    """A directory owned by uid 65534 outside /tmp: its `root` is the workspace, `outside` a directory
    the user could write without the sandbox, `home` its HOME."""
    where = "/var/tmp" if os.path.isdir("/var/tmp") else None
    path = Path(tempfile.mkdtemp(prefix="coretools-nobody-", dir=where))
    for sub in ("root", "outside", "home"):
        (path / sub).mkdir()
    for dirpath, _, filenames in os.walk(path):
        for name in [".", *filenames]:
            os.chown(os.path.join(dirpath, name), NOBODY, NOBODY)
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def interpreter_usable() -> None:
    """The server runs this very interpreter as uid 65534: say what to change if that user cannot."""
    done = subprocess.run([*SETPRIV, sys.executable, "-c", "import coretools, mcp"], cwd=REPO,
                          env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(
            f"uid {NOBODY} cannot run {sys.executable} with coretools and mcp from this checkout "
            f"({done.stderr.strip()[-200:]}): clone it where every user can read it to run this test"
        )


@asynccontextmanager
async def nobody_server(base: Path, *flags: str) -> AsyncIterator:
    """An official MCP client talking over stdio to a coretools server running as uid 65534."""
    from mcp import Client, StdioServerParameters, stdio_client

    interpreter_usable()
    args = [*SETPRIV[1:], sys.executable, "-m", "coretools", "serve", "--root", str(base / "root"),
            "--shell-sandbox", "bwrap", "--structured-content", *flags]  # fmt: skip
    params = StdioServerParameters(
        command=SETPRIV[0], args=args, env={"PYTHONPATH": str(REPO), "HOME": str(base / "home")}, cwd=str(REPO)
    )
    with open(base / "server-stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            yield client
    log = (base / "server-stderr.log").read_text()
    assert "Traceback" not in log, log


async def shell(client, command: str, directory: str | None = None) -> dict:
    args = {"command": command, **({"directory": directory} if directory else {})}
    result = await client.call_tool("run_shell_command", args, read_timeout_seconds=60)
    return result.structured_content


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, NOBODY, NOBODY)
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "config", "user.name", "Nobody"],
                 ["git", "config", "user.email", "nobody@example.invalid"]):  # fmt: skip
        as_nobody(argv, path)
    (path / "README").write_text("hello\n")
    os.chown(path / "README", NOBODY, NOBODY)
    as_nobody(["git", "add", "README"], path)
    as_nobody(["git", "commit", "-q", "-m", "initial"], path)
    return path


def files_under(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() else b"<dir>") for p in path.rglob("*")}


@needs_namespaces
async def test_nonroot_capabilities_and_mounts(base: Path) -> None:
    """CapEff 0 as an ordinary user too; remounts (directly, in a nested namespace, via nsenter) write
    nothing outside the roots, although the user may write `outside` on the host."""
    outside = base / "outside"
    async with nobody_server(base) as client:
        s = await shell(client, "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; id -u")
        caps = [line.split(":\t") for line in s["stdout"].splitlines()[:4]]
        assert [int(v, 16) for _, v in caps] == [0, 0, 0, 0], s
        assert s["stdout"].splitlines()[-1] == str(NOBODY), s
        remount = "mount -o remount,bind,rw /"
        s = await shell(client, f"{remount}; echo 1 > {outside}/a; unshare -Urm sh -c '{remount}; echo 2 > {outside}/b'; "
                        f"nsenter --mount=/proc/1/ns/mnt -- sh -c '{remount}; echo 3 > {outside}/c'")  # fmt: skip
    assert sorted(os.listdir(outside)) == [], s


@needs_namespaces
async def test_nonroot_git_and_env(base: Path) -> None:
    """As an ordinary user who owns the repository: hooks, config and the `.git` directory stay as they
    were, the `.env` content never shows; `git add` and `git commit` still work."""
    root = base / "root"
    make_repo(root)
    (root / ".env").write_text("TOKEN=NOBODY_ENV_SECRET\n")
    (root / "app").mkdir()
    (root / "app" / ".env.local").write_text("TOKEN=NOBODY_APP_SECRET\n")
    for p in (root / ".env", root / "app", root / "app" / ".env.local"):
        os.chown(p, NOBODY, NOBODY)
    before = {p: files_under(root / ".git" / p) for p in ("config", "hooks")}
    async with nobody_server(base) as client:
        plant = await shell(
            client,
            "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
            "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config; git config core.hooksPath /tmp; "
            "mv .git .git-old; mv .git/hooks .git/h2",
        )
        leak = await shell(client, "cat .env app/.env.local; grep -r TOKEN . ; cp .env /tmp/c && cat /tmp/c")
        work = await shell(client, "echo change >> README && git add README && git commit -q -m sandboxed && "
                           "git log --format=%s -1")  # fmt: skip
    assert {p: files_under(root / ".git" / p) for p in ("config", "hooks")} == before, plant
    assert not (root / ".git-old").exists(), plant
    out = leak["stdout"] + leak["stderr"]
    assert "NOBODY_ENV_SECRET" not in out and "NOBODY_APP_SECRET" not in out, leak
    assert work["exit_code"] == 0 and work["stdout"].split() == ["sandboxed"], work
    log = as_nobody(["git", "log", "--format=%s", "-1"], root).stdout
    assert log.strip() == "sandboxed"


@needs_namespaces
async def test_nonroot_kernel_surface(base: Path) -> None:
    """Nested user namespaces and the seccomp-covered calls are refused for an ordinary user too."""
    root = base / "root"
    (root / "probe.py").write_text(SYSCALL_PROBE)
    async with nobody_server(base) as client:
        nested = await shell(client, "unshare -U true && echo nested; unshare -Ur true && echo nested-r; echo done")
        probe = await shell(client, f"{PY} probe.py")
    assert nested["stdout"].split() == ["done"], nested
    results = probe_results(probe["stdout"])
    assert {k: results[k] for k in BLOCKED} == dict.fromkeys(BLOCKED, "EPERM"), probe


@needs_namespaces
async def test_nonroot_etc_marker(base: Path) -> None:
    """Nothing appears in /etc, even after a remount attempt (held before for an ordinary user: DAC)."""
    marker = Path("/etc") / f"coretools-attack-{uuid.uuid4().hex}"
    try:
        async with nobody_server(base) as client:
            s = await shell(client, f"mount -o remount,bind,rw /; touch {marker}")
        assert not marker.exists(), s
    finally:
        marker.unlink(missing_ok=True)
