"""Safe by default: a server started with no shell option runs every command in an OS sandbox, and each
sandbox holds on its own.

Every server here is a real subprocess (`python -m coretools serve --transport http`), its `$HOME` a
temporary directory outside the root, and every scene lives under `/var/tmp` (outside the roots, and
outside the `/tmp` a sandbox may replace): so a write the sandbox lets through lands on the host, where
the test looks for it. A command may write the root and its temporary directory; it may not write
`$HOME`, `/etc` (the server runs as root in CI and containers) or the root's `root-evil` sibling. The same
holds with no option (`auto`: bubblewrap where user namespaces work, else Landlock), with `--shell-sandbox
landlock` (no namespace at all: Landlock alone), with `--shell-sandbox bwrap`, and with `auto` where
namespaces are refused (the server under a seccomp filter that refuses them, as Docker's default profile
does), which must fall back to Landlock. `--shell-writable` adds a directory, `--shell-no-default-caches`
takes the toolchains' caches away, `--shell-sandbox none` writes anywhere, and `--shell-no-network` under
Landlock stops a TCP connection to a listener the test runs on 127.0.0.1.

Markers have unique names and are removed if they ever appear.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client

from http_harness import HttpServer, http_client, server_command
from support import snapshot

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="the OS sandboxes are Linux only"),
]

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
SANDBOXED = {
    "default": (),
    "landlock": ("--shell-sandbox", "landlock"),
    "bwrap": ("--shell-sandbox", "bwrap"),
    "auto-without-namespaces": (),
}
# Runs the server under the bubblewrap sandbox's own seccomp filter, which refuses every namespace (as
# Docker's default profile and hardened kernels do): bubblewrap cannot start there, Landlock can. With
# `--no-landlock` first, a second filter makes Landlock's three calls fail with ENOSYS (an older kernel).
NO_NAMESPACES = r"""
import ctypes, os, struct, sys
from coretools.sandbox.seccomp import filter_program
libc = ctypes.CDLL(None, use_errno=True)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
def install(program):
    code = ctypes.create_string_buffer(program, len(program))
    fprog = Fprog(len(program) // 8, ctypes.addressof(code))
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0):  # NO_NEW_PRIVS, SECCOMP
        sys.exit(f"seccomp: errno {ctypes.get_errno()}")
program = filter_program()
if program is None:
    sys.exit("no seccomp filter for this machine")
install(program)
args = sys.argv[1:]
if args[:1] == ["--no-landlock"]:
    args = args[1:]
    load, jeq, ret = 0x20, 0x15, 0x06
    no_landlock = [(load, 0, 0, 0), (jeq, 3, 0, 444), (jeq, 2, 0, 445), (jeq, 1, 0, 446),
                   (ret, 0, 0, 0x7FFF0000), (ret, 0, 0, 0x00050000 | 38)]
    install(b"".join(struct.pack("=HBBI", *ins) for ins in no_landlock))
os.execv(sys.executable, [sys.executable, "-m", "coretools", *args])
"""
NOT_SANDBOXED = re.compile(r"\b(not|un|no|without( an?)?)[ -]?(os )?sandbox", re.IGNORECASE)


def confined(scene_root: Path, *launcher_flags: str) -> list[str]:
    """The server's command line, run through the seccomp launcher above."""
    argv = server_command([scene_root], "--structured-content")
    return [sys.executable, "-c", NO_NAMESPACES, *launcher_flags, *argv[argv.index("coretools") + 1 :]]


# The toolchains' caches a sandboxed command may write by default (each made in the scene's $HOME)...
CACHES = (".cache", ".npm", ".cargo/registry", ".cargo/git", "go/pkg/mod", ".m2/repository", ".gradle/caches")
# ...and, next to them, what runs code on the host later: these stay read-only.
CODE_DIRS = (".cargo/bin", "go/bin", ".gradle/init.d")
CODE_FILES = (".cargo/env", ".cargo/config.toml", ".cargo/bin/cargo-pwn", "go/bin/pwn", ".gradle/init.d/pwn.gradle",
              ".gradle/gradle.properties", ".m2/settings.xml")  # fmt: skip


@dataclass
class Scene:
    base: Path
    root: Path
    evil: Path  # the root's sibling, outside every root
    home: Path  # the server's $HOME
    extra: Path  # a directory outside the roots that --shell-writable names

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "XDG_CACHE_HOME": str(self.home / ".cache")}


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    base = Path(tempfile.mkdtemp(prefix="coretools-safe-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    s = Scene(base, base / "root", base / "root-evil", base / "home", base / "extra")
    for d in (s.root, s.evil, s.extra, *(s.home / c for c in CACHES), *(s.home / d for d in CODE_DIRS)):
        d.mkdir(parents=True, exist_ok=True)
    (s.evil / "secret.txt").write_text("DECOY SECRET\n")
    (s.home / ".bashrc").write_text("# the user's own\n")
    (s.home / ".cargo" / "env").write_text("# sourced by the user's shell profile\n")
    yield s
    shutil.rmtree(base, ignore_errors=True)


def start(scene: Scene, *flags: str, command: list[str] | None = None) -> HttpServer:
    try:
        return HttpServer.start([scene.root], "--structured-content", *flags, env=scene.env(), command=command,
                                forked=command is None)
    except RuntimeError as exc:
        pytest.fail(f"the server did not start with {' '.join(flags) or 'no shell option'}: {exc}")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-wide, so that a module's sessions (below) live across its tests."""
    return "asyncio"


@pytest.fixture(scope="module", params=list(SANDBOXED))
async def sandboxed(request: pytest.FixtureRequest, scene: Scene) -> AsyncIterator[Client]:
    """A session with a server in each sandbox mode, for every command of the module's tests."""
    command = confined(scene.root) if request.param == "auto-without-namespaces" else None
    server = start(scene, *SANDBOXED[request.param], command=command)
    try:
        async with http_client(server.url) as client:
            yield client
    finally:
        server.stop()


async def shell(to: Client | HttpServer, command: str) -> dict:
    """Run `command` in an open session, or in a session of its own to a server."""
    if isinstance(to, HttpServer):
        async with http_client(to.url) as client:
            return await shell(client, command)
    result = await to.call_tool("run_shell_command", {"command": command})
    assert result.structured_content is not None, result
    return result.structured_content


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# -- what a sandboxed command cannot write --------------------------------------------------------------


async def test_home_is_not_writable(sandboxed: Client, scene: Scene) -> None:
    """`$HOME` (shell start-up files, ssh keys, tool configuration that runs code) is read-only."""
    name = unique("probe")
    bashrc = (scene.home / ".bashrc").read_bytes()
    try:
        s = await shell(sandboxed, f'echo "$HOME"; echo pwned > "$HOME/{name}"; echo pwned >> "$HOME/.bashrc"; '
                                   f'mkdir "$HOME/.ssh-{name}"')  # fmt: skip
        assert s["stdout"].splitlines()[0] == str(scene.home), s  # the command aimed at the right place
        assert not (scene.home / name).exists(), s
        assert (scene.home / ".bashrc").read_bytes() == bashrc, s
        assert not (scene.home / f".ssh-{name}").exists(), s
    finally:
        (scene.home / name).unlink(missing_ok=True)
        (scene.home / ".bashrc").write_bytes(bashrc)
        shutil.rmtree(scene.home / f".ssh-{name}", ignore_errors=True)


async def test_etc_is_not_writable(sandboxed: Client) -> None:
    """`/etc` is read-only even to a server running as root."""
    marker = Path("/etc") / unique("coretools-probe")
    try:
        s = await shell(sandboxed, f"touch {marker}; echo done")
        assert s["stdout"].strip() == "done", s
        assert not marker.exists(), s
    finally:
        marker.unlink(missing_ok=True)


async def test_outside_the_roots_is_not_writable(sandboxed: Client, scene: Scene) -> None:
    """The root's sibling directory (a path outside every root, reached through `..`) is read-only."""
    before = snapshot(scene.evil)
    name = unique("pwned")
    try:
        s = await shell(sandboxed, f"echo pwned > ../root-evil/{name}; echo pwned >> ../root-evil/secret.txt; "
                                   f"mv ../root-evil/secret.txt ../root-evil/moved; echo done")  # fmt: skip
        assert s["stdout"].strip() == "done", s
        assert snapshot(scene.evil) == before, s
    finally:
        for extra in set(os.listdir(scene.evil)) - {"secret.txt"}:
            (scene.evil / extra).unlink()
        (scene.evil / "secret.txt").write_text("DECOY SECRET\n")


async def test_links_in_the_root_do_not_reach_outside(sandboxed: Client, scene: Scene) -> None:
    """A symbolic link in the root to the sibling, and a hard link in the root to a file of the sibling
    (same file system), give no write access to it: the sandbox judges the file, not the name."""
    before = snapshot(scene.evil)
    name = unique("link")
    try:
        s = await shell(sandboxed, f"ln -s ../root-evil {name}-sym; echo pwned > {name}-sym/{name}; "
                                   f"ln ../root-evil/secret.txt {name}-hard && echo pwned >> {name}-hard; "
                                   f"echo done")  # fmt: skip
        assert s["stdout"].strip() == "done", s
        assert snapshot(scene.evil) == before, s
    finally:
        for extra in set(os.listdir(scene.evil)) - {"secret.txt"}:
            (scene.evil / extra).unlink()
        (scene.evil / "secret.txt").write_text("DECOY SECRET\n")
        for link in scene.root.glob(f"{name}-*"):
            link.unlink()


async def test_the_command_has_no_capabilities(sandboxed: Client) -> None:
    """Even when the server runs as root, a sandboxed command holds no capability (effective, permitted,
    bounding, ambient, inheritable): root's capabilities reach past any path rule (loading a kernel
    module, raw I/O, device nodes, mounts)."""
    s = await shell(sandboxed, "grep -E '^Cap(Eff|Prm|Bnd|Amb|Inh):' /proc/self/status")
    caps = dict(line.split(":\t") for line in s["stdout"].splitlines())
    assert set(caps) == {"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"}, s
    assert all(int(v, 16) == 0 for v in caps.values()), caps


DEVICE_PROBE = """
import os, stat, sys
for path in ("/dev/kmsg", "/dev/loop0"):
    try:
        os.close(os.open(path, os.O_WRONLY))  # opened, never written
        print(path, "opened")
    except OSError as exc:
        print(path, "refused", exc.errno)
for kind, number in ((stat.S_IFCHR, os.makedev(1, 3)), (stat.S_IFBLK, os.makedev(7, 0))):
    try:
        os.mknod(sys.argv[1] + str(kind), 0o600 | kind, number)
        print("mknod", kind, "made")
    except OSError as exc:
        print("mknod", kind, "refused", exc.errno)
"""


async def test_devices_are_out_of_reach(sandboxed: Client, scene: Scene) -> None:
    """A device is a way around every path rule (a disk's block device is the whole disk): the command can
    neither open a host device other than the usual ones for writing nor make a device node in the root,
    even as root. Only the open(2) and mknod(2) are tried; nothing is written to a device."""
    name = unique("node")
    (scene.root / f"{name}.py").write_text(DEVICE_PROBE)
    try:
        s = await shell(sandboxed, f"{PY} {name}.py {name}-")
        lines = s["stdout"].splitlines()
        assert len(lines) == 4 and all(" refused " in line for line in lines), s
    finally:
        for made in scene.root.glob(f"{name}*"):
            made.unlink()


async def test_the_root_and_the_temporary_directory_are_writable(sandboxed: Client, scene: Scene) -> None:
    """What a build needs still works: the root and the command's temporary directory are writable."""
    name = unique("inside")
    s = await shell(sandboxed, f'echo ok > {name} && t="${{TMPDIR:-/tmp}}/{name}" && echo tmp-ok > "$t" && cat "$t"')
    assert s["exit_code"] == 0 and s["stdout"].strip() == "tmp-ok", s
    assert (scene.root / name).read_text() == "ok\n"
    (scene.root / name).unlink()


async def test_the_default_caches_are_writable(sandboxed: Client, scene: Scene) -> None:
    """The toolchains' caches (XDG, npm, cargo, go, maven, gradle) stay writable: package managers work."""
    name = unique("cache")
    paths = [f'"$HOME/{cache}/{name}"' for cache in CACHES]
    s = await shell(sandboxed, f"for p in {' '.join(paths)}; do echo x > \"$p\" || echo failed: $p; done; echo done")
    try:
        assert s["stdout"].strip() == "done", s
        assert all((scene.home / cache / name).exists() for cache in CACHES), s
    finally:
        for cache in CACHES:
            (scene.home / cache / name).unlink(missing_ok=True)


async def test_what_runs_code_next_to_the_caches_is_not_writable(sandboxed: Client, scene: Scene) -> None:
    """Only the caches themselves: `~/.cargo/env` (sourced by the user's profile), `~/.cargo/bin` and
    `~/go/bin` (on the user's PATH), cargo's and maven's configuration, gradle's init scripts and
    properties all run code on the host later, and stay read-only."""
    before = {f: (scene.home / f).read_bytes() if (scene.home / f).exists() else None for f in CODE_FILES}
    try:
        s = await shell(sandboxed, "; ".join(f'echo pwned >> "$HOME/{f}"' for f in CODE_FILES) + "; echo done")
        assert s["stdout"].strip() == "done", s
        after = {f: (scene.home / f).read_bytes() if (scene.home / f).exists() else None for f in CODE_FILES}
        assert after == before, s
    finally:
        for f, content in before.items():
            if content is None:
                (scene.home / f).unlink(missing_ok=True)
            else:
                (scene.home / f).write_bytes(content)


# -- each sandbox alone ----------------------------------------------------------------------------------


landlock_only = pytest.mark.parametrize("sandboxed", ["landlock"], indirect=True)


@landlock_only
async def test_landlock_alone_uses_no_namespace(sandboxed: Client, scene: Scene) -> None:
    """`--shell-sandbox landlock` holds without bubblewrap: the command runs in the server's own user,
    mount and PID namespaces, and a write outside what it may write is refused by the kernel's access
    check (EACCES), not by a read-only mount (EROFS)."""
    kinds = ("user", "mnt", "pid")
    name = unique("probe")
    namespaces = " ".join(f"/proc/self/ns/{k}" for k in kinds)
    s = await shell(sandboxed, f'readlink {namespaces} && echo pwned > "$HOME/{name}"')
    try:
        assert s["stdout"].split() == [os.readlink(f"/proc/self/ns/{k}") for k in kinds], s
        assert "Permission denied" in s["stderr"] and "Read-only file system" not in s["stderr"], s
        assert not (scene.home / name).exists(), s
    finally:
        (scene.home / name).unlink(missing_ok=True)


async def test_writable_directories_are_the_operators_choice(scene: Scene) -> None:
    """`--shell-writable DIR` makes DIR writable; `--shell-no-default-caches` takes the caches away;
    `$HOME` stays read-only."""
    name = unique("extra")
    server = start(scene, "--shell-writable", str(scene.extra), "--shell-no-default-caches")
    try:
        s = await shell(server, f'echo ok > {scene.extra}/{name}; mkdir "$HOME/.cache/{name}"; '
                                f'echo pwned > "$HOME/{name}"; echo done')  # fmt: skip
        assert s["stdout"].strip() == "done", s
        assert (scene.extra / name).read_text() == "ok\n", s
        assert not (scene.home / ".cache" / name).exists(), s
        assert not (scene.home / name).exists(), s
    finally:
        server.stop()
        (scene.extra / name).unlink(missing_ok=True)
        shutil.rmtree(scene.home / ".cache" / name, ignore_errors=True)
        (scene.home / name).unlink(missing_ok=True)


async def test_no_sandbox_only_when_asked_for(scene: Scene) -> None:
    """`--shell-sandbox none` runs commands with the server's rights: they write `$HOME` and outside the
    roots (the operator asked for it)."""
    name = unique("unsandboxed")
    server = start(scene, "--shell-sandbox", "none")
    try:
        s = await shell(server, f'echo a > "$HOME/{name}" && echo b > ../root-evil/{name} && echo ok')
        assert s["stdout"].strip() == "ok", s
        assert (scene.home / name).read_text() == "a\n" and (scene.evil / name).read_text() == "b\n"
    finally:
        server.stop()
        (scene.home / name).unlink(missing_ok=True)
        (scene.evil / name).unlink(missing_ok=True)


async def test_auto_without_either_sandbox_says_so(scene: Scene) -> None:
    """Where neither bubblewrap (no namespaces) nor Landlock (ENOSYS) can run, `auto` still serves commands,
    but says so: at start (naming both sandboxes) and in the instructions the model reads."""
    server = start(scene, command=confined(scene.root, "--no-landlock"))
    try:
        async with http_client(server.url) as client:
            instructions = client.instructions or ""
            result = await client.call_tool("run_shell_command", {"command": "echo ok"})
        assert result.structured_content["stdout"].strip() == "ok", result
        said = "".join(server.stderr).lower()
        assert "landlock" in said and ("bubblewrap" in said or "bwrap" in said), said
        assert NOT_SANDBOXED.search(instructions), instructions
    finally:
        server.stop()


# -- the network under Landlock ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[int, list[int]]]:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1], accepted
    sock.close()


def connect_command(port: int) -> str:
    return f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"


@landlock_only
async def test_landlock_with_network(sandboxed: Client, listener: tuple[int, list[int]]) -> None:
    """Without `--shell-no-network`, a command under Landlock reaches a local server."""
    port, accepted = listener
    before = len(accepted)
    s = await shell(sandboxed, connect_command(port))
    assert s["stdout"].strip() == "connected", s
    assert len(accepted) > before


@pytest.fixture(scope="module")
async def offline(scene: Scene) -> AsyncIterator[Client]:
    server = start(scene, "--shell-sandbox", "landlock", "--shell-no-network")
    try:
        async with http_client(server.url) as client:
            yield client
    finally:
        server.stop()


async def test_landlock_no_network_refuses_tcp(offline: Client, listener: tuple[int, list[int]]) -> None:
    """`--shell-no-network --shell-sandbox landlock`: the connection is refused; the listener never sees
    it."""
    port, accepted = listener
    before = len(accepted)
    s = await shell(offline, connect_command(port))
    assert s["stdout"].strip() == "refused", s
    assert len(accepted) == before


async def test_landlock_no_network_sends_no_datagram(offline: Client) -> None:
    """No network means UDP too (Landlock's own rules cover only TCP; DNS is UDP, and a datagram carries
    data out as well as a connection): a datagram to a local UDP socket never arrives."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(1.0)
    try:
        port = sock.getsockname()[1]
        s = await shell(offline, f"for i in 1 2 3; do echo leak > /dev/udp/127.0.0.1/{port}; done 2>/dev/null; "
                                 f"{PY} -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                                 f".sendto(b\"leak\", (\"127.0.0.1\", {port}))' 2>/dev/null; echo done")  # fmt: skip
        assert s["stdout"].strip() == "done", s
        try:
            data = sock.recv(64)
        except TimeoutError:
            data = b""
        assert data == b"", f"a datagram left the sandbox: {data!r}"
    finally:
        sock.close()
