"""The adversarial sandbox suite: nothing outside the roots is ever read or changed.

Every attack runs against the real tools and directly against the `Workspace` API, under every
containment backend:

* `openat2`  - the kernel's RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux >= 5.6);
* `walker`   - the O_NOFOLLOW component walk (`kernel._openat2 = None`, as `CORETOOLS_NO_OPENAT2=1` does);
* `portable` - the walker without O_PATH descriptors (`kernel.O_PATH = 0`), the code path of macOS and
  the BSDs: nodes are opened O_RDONLY|O_NONBLOCK and files are re-opened by name and compared by inode.

The invariant, checked after every attack: the output never contains the decoy content (`DECOY SECRET`
from the `root-evil` sibling of the `root` fixture, and the other outside files below), and a snapshot of
everything outside the root is unchanged. Races are made deterministic by performing the swap inside a
patched function, exactly between a check and a use.

Hard links are the one documented exception: a hard link inside a root *is* a file inside the root (the
kernel cannot tell it from any other name of the inode), so its content is readable by design, and a
write changes the file's content in place, which every name of it sees.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from coretools.errors import PathError, ToolError
from coretools.sandbox import kernel
from coretools.sandbox import gateway as workspace_mod
from coretools.sandbox import walker as walk_mod
from coretools.sandbox import writes as writes_mod
from coretools.sandbox.ignore import IgnoreOptions
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.paths import WalkReport
from tests.conftest import call_tool, snapshot, stdio_params, text_of

SECRETS = ("DECOY SECRET", "OUTSIDE SECRET", "ENV SECRET", "GIT SECRET")
DECOY_NAME = "DECOYNAME"  # a file name that exists only outside the root (listings must never show it)
NOT_IN_WORKSPACE = "Path not in workspace"

# -- backends -------------------------------------------------------------------------------------------

BACKENDS = ["openat2", "walker", "portable"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force one containment backend for everything in the test (in-process)."""
    name = request.param
    if name == "openat2" and not kernel.have_openat2():
        pytest.skip("openat2 is not available on this kernel")
    if name in ("walker", "portable"):
        monkeypatch.setattr(kernel, "_openat2", None)
    if name == "portable":
        monkeypatch.setattr(kernel, "O_PATH", 0)
    return name


# -- the scene ------------------------------------------------------------------------------------------


@dataclass
class Scene:
    tmp: Path
    root: Path
    decoy: Path  # <tmp>/root-evil: the prefix sibling
    outside: Path  # <tmp>/outside: hops for chains, the hard-link source
    specials: set[str] = field(default_factory=set)  # special files that could be created here

    def outside_state(self) -> dict:
        """Everything outside the root: the decoy and outside trees, and the names directly in tmp."""
        return {
            "decoy": snapshot(self.decoy),
            "outside": snapshot(self.outside),
            "tmp": sorted(p.name for p in self.tmp.iterdir()),
        }


def build_scene(tmp: Path, root: Path) -> Scene:
    decoy = tmp / "root-evil"
    (decoy / f"{DECOY_NAME}.txt").write_text("DECOY SECRET (by name)\n")
    (decoy / "subdir").mkdir()
    (decoy / "subdir" / "deep.txt").write_text("DECOY SECRET deep\n")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "other.txt").write_text("OUTSIDE SECRET\n")
    (outside / "hop").symlink_to(decoy / "secret.txt")  # an outside link a chain passes through
    (outside / "hard-source.txt").write_text("HARDLINKED CONTENT\n")

    (root / "inside.txt").write_text("INSIDE OK\n")
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_text("INNER OK\n")
    (root / ".env").write_text("ENV SECRET\n")
    (root / ".env.example").write_text("EXAMPLE OK\n")
    (root / "sub" / ".env.local").write_text("ENV SECRET local\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("GIT SECRET\n")
    (root / ".git" / "hooks").mkdir()

    links = {
        # pointing out
        "out_file": str(decoy / "secret.txt"),
        "out_rel": "../root-evil/secret.txt",
        "out_dir": str(decoy),
        "out_dir_rel": "../root-evil",
        "up_one": "..",
        "c1": "c2",  # chain: c1 -> c2 -> sub/c3 -> ../../root-evil/secret.txt
        "c2": "sub/c3",
        "sub/c3": "../../root-evil/secret.txt",
        "c_abs": str(outside / "hop"),  # chain through an outside link
        "c_dir": "sub/c_dir2",
        "sub/c_dir2": str(decoy),
        "proc_root": "/proc/self/root",
        "proc_cwd": "/proc/self/cwd",
        "dev_zero": "/dev/zero",
        "dangling_out": str(decoy / "new.txt"),
        "dangling_out_dir": str(decoy / "newdir"),
        # broken
        "loop1": "loop2",
        "loop2": "loop1",
        "self_loop": "self_loop",
        "dangling": "nowhere.txt",
        # staying inside (must keep working)
        "good_link": "inside.txt",
        "good_abs": str(root / "inside.txt"),
        "good_dir": "sub",
        "sub/good_up": "../inside.txt",
        # aliases of protected paths
        "notes": ".env",
        "notes_abs": str(root / ".env"),
        "cfg": ".git",
        "sub/cycle": "..",  # a directory cycle for walkers
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    os.link(outside / "hard-source.txt", root / "hard")

    scene = Scene(tmp, root, decoy, outside)
    os.mkfifo(root / "pipe")
    scene.specials.add("pipe")
    os.symlink("pipe", root / "pipe_link")
    here = os.getcwd()
    try:
        os.chdir(root)  # bind by a short relative name: AF_UNIX paths are limited to ~108 bytes
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("sock")
        sock.close()
        scene.specials.add("sock")
    except OSError:
        pass
    finally:
        os.chdir(here)
    try:
        os.mknod(root / "zerodev", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        scene.specials.add("zerodev")
    except (OSError, AttributeError):
        pass
    return scene


# Tests that only attempt what must be refused, or read: they share one scene per worker (building one is
# most of a test's cost, ~1,800 times over), and each checks that the whole scene, inside the root too,
# is as it found it, so a test that did change it fails itself rather than a later one.
SHARED_SCENE = {
    "test_tools_refuse_escapes", "test_tools_take_odd_names_literally", "test_tools_refuse_invalid_paths",
    "test_tools_refuse_protected_paths", "test_tools_refuse_special_files_without_blocking",
    "test_bulk_tools_stay_inside", "test_workspace_refuses_escapes", "test_workspace_refuses_protected",
    "test_workspace_refuses_special_files_without_blocking", "test_workspace_rejects_invalid_paths_before_io",
}


@pytest.fixture(scope="session")
def shared_scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    tmp = tmp_path_factory.mktemp("scene")
    root = tmp / "root"
    root.mkdir()
    (tmp / "root-evil").mkdir()
    (tmp / "root-evil" / "secret.txt").write_text("DECOY SECRET\n")  # as the `root` fixture makes it
    return build_scene(tmp, root)


@pytest.fixture
def scene(request: pytest.FixtureRequest) -> Iterator[Scene]:
    if request.node.originalname in SHARED_SCENE:
        s = request.getfixturevalue("shared_scene")
        before = s.outside_state(), snapshot(s.root)
        yield s
        assert s.outside_state() == before[0], "something outside the root changed"
        assert snapshot(s.root) == before[1], "the shared scene's root changed"
        return
    s = build_scene(request.getfixturevalue("tmp_path"), request.getfixturevalue("root"))
    before = s.outside_state()
    yield s
    assert s.outside_state() == before, "something outside the root changed"


def assert_no_leak(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"leaked {secret!r}:\n{text}"
    assert DECOY_NAME not in text, f"listed a file from outside the root:\n{text}"


# -- attack paths ---------------------------------------------------------------------------------------

# Each resolves (lexically or through links) outside the root. `{root}`/`{tmp}` are filled in per test.
ESCAPES = [
    "../root-evil/secret.txt",  # A1 relative traversal
    "sub/../../root-evil/secret.txt",
    "sub/../../../../../../../../../etc/passwd",
    "{tmp}/root-evil/secret.txt",  # A2/A3 absolute, prefix sibling
    "{tmp}/root-evil/subdir/deep.txt",
    "{tmp}/root-evil",
    "{tmp}/outside/other.txt",
    "{root}/../root-evil/secret.txt",  # A5 lexical is_relative_to trap
    "{root}/sub/../../root-evil",
    "{root}-evil/secret.txt",
    "/etc/passwd",
    "file://{tmp}/root-evil/secret.txt",  # A8 URI forms, percent-encoding decoded before the check
    "file://localhost{tmp}/root-evil/secret.txt",
    "file://{root}/%2e%2e/root-evil/secret.txt",
    "/proc/self/root{tmp}/root-evil/secret.txt",  # B18 procfs
    "out_file",  # B1 file symlink out
    "out_rel",
    "out_dir",  # B2 directory symlink out
    "out_dir/secret.txt",
    "out_dir/subdir",
    "out_dir_rel/secret.txt",
    "up_one/root-evil/secret.txt",  # B4 relative link up
    "c1",  # B3 chains
    "c_abs",
    "c_dir",
    "c_dir/deep.txt",
    "good_dir/c3",  # an in-root directory link leading to an escaping link
    "proc_root{tmp}/root-evil/secret.txt",
    "proc_cwd",
    "dev_zero",  # B20 a device outside
    "dangling_out",  # B5
    "dangling_out_dir/new.txt",  # B6/B7 symlinked (dangling) parent for a new file
    "out_dir/new.txt",
    "out_dir/a/b/c/new.txt",
]

# Names that look odd but are literal names inside the root on POSIX: not found, never an escape.
LITERALS = [
    "%2e%2e/root-evil/secret.txt",  # A7: percent-encoding is not decoded outside file:// URIs
    "..%2froot-evil%2fsecret.txt",
    "..\\root-evil\\secret.txt",  # A9 backslashes
    "C:\\Windows\\win.ini",  # A10
    "\\\\?\\C:\\Windows\\win.ini",
    "~/.ssh/id_rsa",  # A13: `~` is not expanded
    "~root/.bashrc",
    "$HOME/.ssh/id_rsa",  # A14: no variable expansion
    "\uff0e\uff0e\uff0froot-evil\uff0fsecret.txt",  # A18 fullwidth dots and slash
    "sub\u2215..\u2215..\u2215root-evil\u2215secret.txt",  # division slash
    "README.md:hidden",
]

# Refused before any file-system access.
INVALID = [
    "",
    "   ",
    "ok.txt\x00/../../root-evil/secret.txt",  # A15 NUL byte
    "sub\n../../root-evil/secret.txt",
    "a" * 300,  # A16 overlong component
    "a/" * 2100,  # overlong path
    "\ud800secret",  # a lone surrogate (JSON allows it)
    "file:///tmp/ok.txt%00/../../etc/passwd",  # control characters hidden by percent-encoding
    "file:///tmp/x%0a..",
]

PROTECTED = [
    ".env",
    ".ENV",
    ".Env.Local",
    ".env.production",
    "sub/.env.local",
    ".env.",  # A12 trailing dot / space (Windows and SMB drop them)
    ".env ",
    ".git/config",
    ".GIT/config",
    ".git./config",
    ".git/hooks",
    "sub/../.git/config",
    "{root}/.git/config",
    "notes",  # C4 aliases through links
    "notes_abs",
    "cfg/config",
    "cfg",
]

SPECIALS = ["pipe", "pipe_link", "sock", "zerodev"]  # B20: refused without blocking
LOOPS = ["loop1", "self_loop", "loop1/x"]  # B8


def fill(path: str, scene: Scene) -> str:
    return path.replace("{root}", str(scene.root)).replace("{tmp}", str(scene.tmp))


# -- the tools ------------------------------------------------------------------------------------------

# How each tool takes a path. Searching/reading content uses patterns that never equal a secret, so the
# secret can only appear in the output if it was read.
TOOL_ARGS = {
    "read_file": lambda p: {"absolute_path": p},
    "list_directory": lambda p: {"path": p},
    "glob": lambda p: {"pattern": "**/*", "path": p},
    "read_many_files": lambda p: {"paths": [p]},
    "search_file_content": lambda p: {"pattern": "SECRET|DECOY", "path": p},
    "write_file": lambda p: {"file_path": p, "content": "PWNED\n"},
    "replace": lambda p: {"file_path": p, "old_string": "SECRET", "new_string": "PWNED"},
    "run_shell_command": lambda p: {"command": "cat secret.txt other.txt; ls", "directory": p},
}
FILE_TOOLS = [t for t in TOOL_ARGS if t != "run_shell_command"]
# Tools that take one path and must refuse it outright; read_many_files reports a refused path as skipped.
STRICT = {t for t in TOOL_ARGS if t != "read_many_files"}
REQUIRED_PATH = {"read_file", "list_directory", "write_file", "replace"}


async def attack(scene: Scene, tool: str, path: str, *extra: str):
    result = await call_tool(scene.root, tool, TOOL_ARGS[tool](fill(path, scene)), *extra)
    text = text_of(result)
    assert_no_leak(text)
    return result, text


pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("tool", list(TOOL_ARGS))
async def test_tools_refuse_escapes(scene: Scene, backend: str, tool: str, path: str) -> None:
    result, text = await attack(scene, tool, path)
    if tool in STRICT:
        assert result.is_error, text
        assert NOT_IN_WORKSPACE in text, text


@pytest.mark.parametrize("path", LITERALS)
@pytest.mark.parametrize("tool", ["read_file", "list_directory", "read_many_files", "glob"])
async def test_tools_take_odd_names_literally(scene: Scene, backend: str, tool: str, path: str) -> None:
    result, text = await attack(scene, tool, path)
    if tool in ("read_file", "list_directory"):
        assert result.is_error, text


@pytest.mark.parametrize("path", INVALID)
@pytest.mark.parametrize("tool", FILE_TOOLS)
async def test_tools_refuse_invalid_paths(scene: Scene, tool: str, path: str) -> None:
    result, text = await attack(scene, tool, path)
    if tool in REQUIRED_PATH:  # glob and search may read an empty `path` as "the workspace"
        assert result.is_error, text


@pytest.mark.parametrize("path", PROTECTED)
@pytest.mark.parametrize("tool", FILE_TOOLS)
async def test_tools_refuse_protected_paths(scene: Scene, backend: str, tool: str, path: str) -> None:
    before = snapshot(scene.root / ".git"), (scene.root / ".env").read_bytes()
    result, text = await attack(scene, tool, path)
    if tool in STRICT:
        assert result.is_error, text
        assert "protected" in text.lower(), text
    assert (snapshot(scene.root / ".git"), (scene.root / ".env").read_bytes()) == before


async def test_allow_protected_opts_out(scene: Scene, backend: str) -> None:
    result = await call_tool(scene.root, "read_file", {"absolute_path": "notes"}, "--allow-protected")
    assert not result.is_error and "ENV SECRET" in text_of(result)
    result = await call_tool(scene.root, "read_file", {"absolute_path": ".env.example"})
    assert not result.is_error and "EXAMPLE OK" in text_of(result)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("path", SPECIALS + LOOPS)
@pytest.mark.parametrize("tool", FILE_TOOLS)
async def test_tools_refuse_special_files_without_blocking(scene: Scene, backend: str, tool: str, path: str) -> None:
    if path in ("sock", "zerodev") and path not in scene.specials:
        pytest.skip(f"could not create {path} here")
    result, text = await attack(scene, tool, path)
    if tool in STRICT and tool not in ("glob", "list_directory"):
        assert result.is_error, text
    assert stat.S_ISFIFO(os.lstat(scene.root / "pipe").st_mode)  # not replaced by a write


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "tool,args",
    [
        ("read_many_files", {"paths": ["**/*"]}),
        ("read_many_files", {"paths": ["."], "useDefaultExcludes": False, "respect_git_ignore": False}),
        ("glob", {"pattern": "**/*"}),
        ("glob", {"pattern": "**/*", "respect_git_ignore": False}),
        ("search_file_content", {"pattern": "SECRET|DECOY|INSIDE"}),
        ("search_file_content", {"pattern": "SECRET|DECOY", "include": "**/*"}),
        ("list_directory", {"path": "."}),
        ("list_directory", {"path": "sub"}),
        ("list_directory", {"path": "good_dir"}),
    ],
)
async def test_bulk_tools_stay_inside(scene: Scene, backend: str, tool: str, args: dict) -> None:
    """C7/B9: walks over a root full of escaping links, loops, a cycle and special files: bounded, no hang,
    nothing from outside and no protected content."""
    result = await call_tool(scene.root, tool, args)
    text = text_of(result)
    assert_no_leak(text)
    assert not result.is_error, text
    if tool == "read_many_files":
        assert "INSIDE OK" in text and "INNER OK" in text
        assert "HARDLINKED CONTENT" in text  # a hard link is a file inside the root: see the module docstring


async def test_symlinks_inside_keep_working(scene: Scene, backend: str) -> None:
    """B10: no false denial for links that stay inside the root."""
    for path in ("good_link", "good_abs", "good_dir/inner.txt", "sub/good_up", "{root}/good_dir/good_up"):
        result = await call_tool(scene.root, "read_file", {"absolute_path": fill(path, scene)})
        assert not result.is_error, (path, text_of(result))
        assert "OK" in text_of(result)


async def test_file_swapped_for_symlink_between_calls(scene: Scene, backend: str) -> None:
    victim = scene.root / "victim.txt"
    victim.write_text("VICTIM ORIGINAL\n")
    first = await call_tool(scene.root, "read_file", {"absolute_path": str(victim)})
    assert "VICTIM ORIGINAL" in text_of(first)
    victim.unlink()
    victim.symlink_to(scene.decoy / "secret.txt")
    second = await call_tool(scene.root, "read_file", {"absolute_path": str(victim)})
    assert second.is_error and NOT_IN_WORKSPACE in text_of(second)
    assert_no_leak(text_of(second))


def swap_for_link(path: Path, target: Path, keep: Path | None = None) -> None:
    """Replace `path` by a symlink to `target` (moving the original to `keep`, if given)."""
    if keep is not None:
        os.rename(path, keep)
    elif path.is_dir() and not path.is_symlink():
        os.rename(path, path.with_name(path.name + ".moved"))
    else:
        path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("tool", ["read_file", "write_file", "replace", "read_many_files", "list_directory"])
async def test_swap_between_check_and_open(
    scene: Scene, backend: str, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B12/B13: the path is swapped for an escaping symlink right after the string check (`locate`) and
    before any open. The open itself is the check, so it refuses."""
    victim = scene.root / "victim.txt"
    victim.write_text("VICTIM ORIGINAL SECRET\n")
    original = Workspace.locate
    swapped = []

    def locate(self, path, **kw):
        loc = original(self, path, **kw)
        if not swapped and "victim" in str(path):
            swapped.append(path)
            swap_for_link(victim, scene.decoy / "secret.txt", keep=scene.root / "victim.kept")
        return loc

    monkeypatch.setattr(Workspace, "locate", locate)
    arg = str(victim) if tool != "read_many_files" else "victim.txt"
    result, text = await attack(scene, tool, arg)
    assert swapped, "the patched check never ran"
    assert "VICTIM" not in text or tool == "list_directory"
    if tool != "read_many_files":
        assert result.is_error, text


@pytest.mark.parametrize("tool", ["read_file", "read_many_files"])
async def test_swap_between_open_and_read(
    scene: Scene, backend: str, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the contained open (the node is checked to be a regular file), the name is swapped for a link
    to the decoy before the file is opened for reading. The read must use the inode that was checked (or
    refuse); it never follows the new link."""
    victim = scene.root / "victim.txt"
    victim.write_text("VICTIM ORIGINAL\n")
    original = kernel.open_beneath
    swapped = []

    def open_beneath(anchors, index, rel, flags, mode=0o666, *, follow_final=True):
        result = original(anchors, index, rel, flags, mode, follow_final=follow_final)
        if not swapped and rel.endswith("victim.txt"):
            swapped.append(rel)
            swap_for_link(victim, scene.decoy / "secret.txt", keep=scene.root / "victim.kept")
        return result

    plain = kernel.open_plain

    def open_plain(root_fd, rel, flags, mode=0o666):  # the symlink-free fast path opens first, when it can
        result = plain(root_fd, rel, flags, mode)
        if result is not None and not swapped and rel.endswith("victim.txt"):
            swapped.append(rel)
            swap_for_link(victim, scene.decoy / "secret.txt", keep=scene.root / "victim.kept")
        return result

    monkeypatch.setattr(kernel, "open_beneath", open_beneath)
    monkeypatch.setattr(kernel, "open_plain", open_plain)
    arg = str(victim) if tool == "read_file" else "victim.txt"
    result, text = await attack(scene, tool, arg)
    assert swapped
    # the inode that was checked, or a refusal (the portable backend re-opens by name and meets the link)
    assert "VICTIM ORIGINAL" in text or NOT_IN_WORKSPACE in text or "changed" in text.lower(), text


# -- writes: the races and links of B5-B7, B11, B13 ------------------------------------------------------


@pytest.fixture
def ws(scene: Scene, backend: str) -> Iterator[Workspace]:
    w = Workspace([str(scene.root)])
    yield w
    w.close()


def refused(fn, *args, **kw) -> ToolError:
    with pytest.raises(ToolError) as info:
        fn(*args, **kw)
    assert_no_leak(info.value.message)
    return info.value


def test_write_through_parent_swapped_after_it_was_opened(
    scene: Scene, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B14: the parent directory is replaced by a link to the decoy after it was opened: the write lands in
    the directory that was opened (now renamed), never in the decoy."""
    (scene.root / "sub" / "victim.txt").write_text("old\n")
    original = Workspace.open_parent

    def parent_of(self, loc, *, create):
        opened = original(self, loc, create=create)
        swap_for_link(scene.root / "sub", scene.decoy, keep=scene.root / "sub-old")
        return opened

    monkeypatch.setattr(Workspace, "open_parent", parent_of)
    ws.write_atomic(ws.locate("sub/victim.txt"), b"NEW\n")
    assert (scene.root / "sub-old" / "victim.txt").read_bytes() == b"NEW\n"
    assert not (scene.decoy / "victim.txt").exists()


def test_write_target_swapped_for_link_before_rename(
    scene: Scene, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B13: the target turns into a link to the decoy between the type check and the rename. The rename
    replaces the link itself; the decoy is untouched."""
    target = scene.root / "sub" / "victim.txt"
    target.write_text("old\n")
    original = writes_mod.Writes._replace

    def replace(self, parent_fd, name, *args, **kw):
        swap_for_link(target, scene.decoy / "secret.txt")
        return original(self, parent_fd, name, *args, **kw)

    monkeypatch.setattr(writes_mod.Writes, "_replace", replace)
    ws.write_atomic(ws.locate("sub/victim.txt"), b"NEW\n")
    assert not target.is_symlink() and target.read_bytes() == b"NEW\n"


def test_write_ignores_a_planted_temp_file(scene: Scene, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temp file name is predicted and a link to the decoy planted there: O_EXCL|O_NOFOLLOW refuses it
    and another name is drawn."""
    suffixes = iter(["deadbeef", "cafef00d"])
    monkeypatch.setattr(writes_mod.durable, "temp_name", lambda name: f".{name}.{next(suffixes)}.coretools.tmp")
    plant = scene.root / "sub" / ".victim.txt.deadbeef.coretools.tmp"
    plant.symlink_to(scene.decoy / "secret.txt")
    ws.write_atomic(ws.locate("sub/victim.txt"), b"NEW\n")
    assert (scene.root / "sub" / "victim.txt").read_bytes() == b"NEW\n"
    assert plant.is_symlink()
    assert not list((scene.root / "sub").glob("*.cafef00d.coretools.tmp"))


def test_temp_name_fits_for_long_multibyte_names(scene: Scene, ws: Workspace) -> None:
    name = "\u4e2d" * 85  # 255 bytes: the longest name allowed
    ws.write_atomic(ws.locate(name), b"x")
    assert (scene.root / name).read_bytes() == b"x"


def test_write_refuses_dangling_links(scene: Scene, ws: Workspace) -> None:
    """B5: a dangling link (outside or inside) is never created through."""
    err = refused(lambda: ws.write_atomic(ws.locate("dangling_out"), b"PWNED"))
    assert NOT_IN_WORKSPACE in err.message
    refused(lambda: ws.write_atomic(ws.locate("dangling"), b"PWNED"))
    assert not (scene.root / "nowhere.txt").exists()
    assert (scene.root / "dangling").is_symlink()
    err = refused(lambda: ws.write_atomic(ws.locate("dangling_out_dir/a/new.txt"), b"PWNED"))
    assert NOT_IN_WORKSPACE in err.message


@pytest.mark.parametrize("path", ["out_dir/new.txt", "out_dir/a/b/c/new.txt", "c_dir/new.txt", "up_one/new.txt"])
def test_write_refuses_escaping_parents(scene: Scene, ws: Workspace, path: str) -> None:
    """B6/B7: a symlinked parent (or ancestor, with mkdir -p) pointing out."""
    err = refused(lambda: ws.write_atomic(ws.locate(path), b"PWNED"))
    assert NOT_IN_WORKSPACE in err.message


@pytest.mark.parametrize(
    "path,lands",
    [
        ("good_dir/n1/n2/new.txt", "sub/n1/n2/new.txt"),  # mkdir -p below an in-root directory link
        ("sub/../made/new.txt", "made/new.txt"),  # `..` in a parent that has to be created
        ("sub/n3/../n4/new.txt", "sub/n4/new.txt"),
        ("good_link", "inside.txt"),  # a link to an in-root file: the file is replaced
    ],
)
def test_write_follows_links_that_stay_inside(scene: Scene, ws: Workspace, path: str, lands: str) -> None:
    out = ws.write_atomic(ws.locate(path), b"WRITTEN\n")
    assert (scene.root / lands).read_bytes() == b"WRITTEN\n"
    assert out.path == str(scene.root / lands)


def test_write_refuses_protected_real_paths(scene: Scene, ws: Workspace) -> None:
    """C4/C9: writes are judged on the real path: through links to .git and .env as well."""
    for path in ("cfg/hooks/pre-commit", "notes", "notes_abs", ".git/hooks/pre-commit", ".ENV", "cfg/new/x"):
        err = refused(lambda: ws.write_atomic(ws.locate(path), b"#!/bin/sh\necho PWNED\n"))
        assert "protected" in err.message.lower(), err.message
    assert not (scene.root / ".git" / "hooks" / "pre-commit").exists()
    assert not (scene.root / ".git" / "new").exists()
    assert (scene.root / ".env").read_text() == "ENV SECRET\n"


def test_hard_link_is_inside_by_definition_and_writes_never_reach_its_other_names(scene: Scene, ws: Workspace) -> None:
    """B11: the kernel cannot tell a hard link from any other name of a file, so `hard` (linked to an
    outside file by someone with access to both) reads as a file of the root. A write replaces this name
    with a new file: the outside name keeps its content (see tests/attacks/test_edit_links.py)."""
    _, data = ws.read_bytes(ws.locate("hard"))
    assert data == b"HARDLINKED CONTENT\n"
    inode = os.stat(scene.outside / "hard-source.txt").st_ino
    written = ws.write_atomic(ws.locate("hard"), b"NEW\n")
    assert written.other_names == 1
    assert (scene.root / "hard").read_bytes() == b"NEW\n"
    assert os.stat(scene.root / "hard").st_nlink == 1 and os.stat(scene.root / "hard").st_ino != inode
    assert (scene.outside / "hard-source.txt").read_bytes() == b"HARDLINKED CONTENT\n"
    # The scene is shared: `hard` becomes a link to the outside file again.
    os.unlink(scene.root / "hard")
    os.link(scene.outside / "hard-source.txt", scene.root / "hard")


def test_write_drops_set_id_bits(scene: Scene, ws: Workspace) -> None:
    target = scene.root / "tool"
    target.write_text("#!/bin/sh\n")
    os.chmod(target, 0o6755)
    ws.write_atomic(ws.locate("tool"), b"#!/bin/sh\necho new\n")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755


@pytest.mark.parametrize("path", SPECIALS + LOOPS + ["sub", "good_dir"])
def test_write_refuses_non_files_without_blocking(scene: Scene, ws: Workspace, path: str) -> None:
    if path in ("sock", "zerodev") and path not in scene.specials:
        pytest.skip(f"could not create {path} here")
    before = os.lstat(scene.root / path.split("/")[0])
    refused(lambda: ws.write_atomic(ws.locate(path), b"PWNED"))
    after = os.lstat(scene.root / path.split("/")[0])
    assert (before.st_ino, before.st_mode) == (after.st_ino, after.st_mode)


# -- the Workspace API, every operation ------------------------------------------------------------------


def read_ops(ws: Workspace):
    """Every read-side operation on a path string; each returns what a tool could show."""

    def read(p):
        return ws.read_bytes(ws.locate(p))[1].decode("utf-8", "replace")

    def node(p):
        with ws.open_node(ws.locate(p)) as n:
            return f"{n.path} {n.st.st_size}"

    def listing(p):
        return " ".join(e.name for e in ws.list_dir(ws.locate(p))[1])

    def walk(p):
        return " ".join(e.rel for e in walk_mod.walk(ws, ws.locate(p), IgnoreOptions(), include_dirs=True))

    def exists(p):
        return str(ws.exists(ws.locate(p)))

    return {"read": read, "node": node, "list": listing, "walk": walk, "exists": exists}


@pytest.mark.parametrize("path", ESCAPES)
def test_workspace_refuses_escapes(scene: Scene, ws: Workspace, path: str) -> None:
    for op, fn in read_ops(ws).items():
        err = refused(fn, fill(path, scene))
        assert err.kind == "path_not_in_workspace", (op, err.message)
        assert NOT_IN_WORKSPACE in err.message, (op, err.message)
    err = refused(lambda: ws.write_atomic(ws.locate(fill(path, scene)), b"PWNED"))
    assert NOT_IN_WORKSPACE in err.message


@pytest.mark.parametrize("path", PROTECTED)
def test_workspace_refuses_protected(scene: Scene, ws: Workspace, path: str) -> None:
    for op, fn in read_ops(ws).items():
        if op == "exists":
            continue
        err = refused(fn, fill(path, scene))
        assert "protected" in err.message.lower() or err.kind == "file_not_found", (op, err.message)


@pytest.mark.parametrize("path", INVALID)
def test_workspace_rejects_invalid_paths_before_io(scene: Scene, ws: Workspace, path: str) -> None:
    with pytest.raises(PathError) as info:
        ws.locate(path)
    assert info.value.message.startswith("Invalid path:")


@pytest.mark.parametrize("path", LITERALS)
def test_workspace_takes_odd_names_literally(scene: Scene, ws: Workspace, path: str) -> None:
    err = refused(lambda: ws.read_bytes(ws.locate(path)))
    assert err.kind == "file_not_found", err.message
    literal = scene.root / path
    if "\\\\?" not in path and "/" not in path.strip("/"):
        literal.write_text("LITERAL OK\n")  # the same spelling names a plain file inside the root
        assert ws.read_bytes(ws.locate(path))[1] == b"LITERAL OK\n"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("path", SPECIALS + LOOPS)
def test_workspace_refuses_special_files_without_blocking(scene: Scene, ws: Workspace, path: str) -> None:
    if path in ("sock", "zerodev") and path not in scene.specials:
        pytest.skip(f"could not create {path} here")
    err = refused(lambda: ws.read_bytes(ws.locate(path)))
    if path in LOOPS:
        assert "loop" in err.message.lower(), err.message
    else:
        assert "regular file" in err.message.lower(), err.message


@pytest.mark.parametrize(
    "path,ok",
    [
        ("{root}", True),  # A4 root edge cases
        ("{root}/", True),
        ("{root}//.", True),
        ("{root}/./sub/..", True),
        ("file://{root}", True),
        ("{root}/..", False),
        ("{root}/sub/../..", False),
        ("..", False),
        ("sub/../..", False),
        ("/", False),
    ],
)
def test_root_edge_cases(scene: Scene, ws: Workspace, path: str, ok: bool) -> None:
    fn = read_ops(ws)["list"]
    if ok:
        assert "inside.txt" in fn(fill(path, scene))
    else:
        assert NOT_IN_WORKSPACE in refused(fn, fill(path, scene)).message


def test_root_dotdot_back_in_is_never_outside(scene: Scene, ws: Workspace) -> None:
    """`<root>/../root/inside.txt` climbs above the root and back: refused or the inside file, nothing else."""
    path = f"{scene.root}/../{scene.root.name}/inside.txt"
    try:
        data = ws.read_bytes(ws.locate(path))[1]
    except ToolError as exc:
        assert NOT_IN_WORKSPACE in exc.message
    else:
        assert data == b"INSIDE OK\n"


def test_trailing_slash_and_unicode_forms(scene: Scene, ws: Workspace) -> None:
    (scene.root / "caf\u00e9").mkdir()  # NFC on disk
    (scene.root / "caf\u00e9" / "menu.txt").write_text("MENU OK\n")
    assert ws.read_bytes(ws.locate("caf\u00e9/menu.txt"))[1] == b"MENU OK\n"
    # NFD is a different name on Linux: not found, and never folded into something else
    assert refused(lambda: ws.read_bytes(ws.locate("cafe\u0301/menu.txt"))).kind == "file_not_found"
    assert "inside.txt" in read_ops(ws)["list"](f"{scene.root}/sub/../")


def test_walk_skips_links_and_survives_a_directory_swapped_mid_walk(
    scene: Scene, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B9/B14: links are never followed by a walk, and a directory replaced by a link to the decoy after
    it was listed (before it is entered) is not entered."""
    original = walk_mod.dir_entry
    swapped = []

    def entry(item, parent_rel):
        classified = original(item, parent_rel)
        if classified.rel == "sub" and not swapped:  # classified as a directory; not yet entered
            swapped.append(classified.kind)
            swap_for_link(scene.root / "sub", scene.decoy, keep=scene.root / "sub-old")
        return classified

    monkeypatch.setattr(walk_mod, "dir_entry", entry)
    report = WalkReport()
    rels = [e.rel for e in walk_mod.walk(ws, ws.locate("."), IgnoreOptions(), report=report)]
    assert_no_leak(" ".join(rels))
    assert "inside.txt" in rels
    assert swapped == ["dir"]
    assert not any(r.startswith("sub/") for r in rels)
    assert report.unreadable >= 1 and report.symlinks_skipped >= 10


@pytest.mark.parametrize("backend", ["walker", "portable"], indirect=True)
def test_walker_holds_descriptors_when_a_directory_is_swapped(
    scene: Scene, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The O_NOFOLLOW walker opens `sub`, then `sub` is swapped for a link to the decoy: the walk goes on in
    the directory it opened (wherever it now lives inside the root), never in the decoy."""
    real_open = os.open
    swapped = []

    def spy_open(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if path == "sub" and dir_fd is not None and not swapped:
            swapped.append(fd)
            swap_for_link(scene.root / "sub", scene.decoy, keep=scene.root / "sub-old")
            (scene.decoy / "inner.txt").write_text("DECOY SECRET inner\n")
        return fd

    try:
        with monkeypatch.context() as m:
            m.setattr(os, "open", spy_open)
            try:
                data = ws.read_bytes(ws.locate("sub/inner.txt"))[1]
            except ToolError as exc:  # portable: the re-open by name meets the link and refuses
                assert NOT_IN_WORKSPACE in exc.message
                data = b"INNER OK\n"
    finally:
        (scene.decoy / "inner.txt").unlink(missing_ok=True)
    assert swapped
    assert data == b"INNER OK\n"


# -- roots: moved roots, client-root narrowing, several roots -------------------------------------------


def test_protected_alias_still_refused_after_the_root_moved(scene: Scene, ws: Workspace) -> None:
    """The real name behind `notes -> .env` is found through the root's descriptor even after the root
    directory was renamed while the server runs."""
    moved = scene.tmp / "root-moved"
    os.rename(scene.root, moved)
    try:
        err = refused(lambda: ws.read_bytes(ws.locate("notes")))
        assert "protected" in err.message.lower(), err.message
        assert ws.read_bytes(ws.locate("inside.txt"))[1] == b"INSIDE OK\n"
    finally:
        os.rename(moved, scene.root)


def test_git_info_exclude_is_applied_but_not_through_an_alias(scene: Scene, ws: Workspace) -> None:
    (scene.root / ".git" / "info").mkdir()
    (scene.root / ".git" / "info" / "exclude").write_text("excluded.txt\n")
    assert ws.is_ignored(0, "excluded.txt", False, IgnoreOptions())
    assert refused(lambda: ws.read_bytes(ws.locate(".git/info/exclude"))).kind == "path_not_in_workspace"
    # an exclude file that is a link to .env is not read (its lines would otherwise steer the ignore rules)
    (scene.root / ".env").write_text("ENV SECRET\nfrom-env.txt\n")
    (scene.root / ".git" / "info" / "exclude").unlink()
    (scene.root / ".git" / "info" / "exclude").symlink_to("../../.env")
    fresh = Workspace([str(scene.root)])
    try:
        assert not fresh.is_ignored(0, "from-env.txt", False, IgnoreOptions())
    finally:
        fresh.close()
    (scene.root / ".env").write_text("ENV SECRET\n")


def test_narrowing_never_widens(scene: Scene, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """G7: client roots narrow the operator's roots. A client root that is a link out is dropped, and one
    swapped for such a link between the check and the open is dropped too."""
    assert ws.narrowed([str(scene.root / "out_dir")]) is None
    narrowed = ws.narrowed([str(scene.root / "sub"), str(scene.decoy)])
    assert narrowed is not None and [r.path for r in narrowed.roots] == [str(scene.root / "sub")]
    narrowed.close()

    (scene.root / "client").mkdir()
    real_isdir = os.path.isdir

    def isdir(path):  # runs after the containment check, before the roots are opened
        if str(path).endswith("/client") and not (scene.root / "client").is_symlink():
            swap_for_link(scene.root / "client", scene.decoy)
        return real_isdir(path)

    with monkeypatch.context() as m:
        m.setattr(workspace_mod.os.path, "isdir", isdir)
        narrowed = ws.narrowed([str(scene.root / "client")])
    assert (scene.root / "client").is_symlink(), "the race was not staged"
    if narrowed is not None:
        assert all(str(scene.decoy) not in r.path for r in narrowed.roots)
        narrowed.close()


def test_links_between_roots(scene: Scene, backend: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """An absolute link from one root into another root is inside the workspace; a relative one climbs
    out of its root first and is refused (conservative); a prefix sibling of the second root is outside."""
    second = tmp_path_factory.mktemp("second")
    (second / "s.txt").write_text("SECOND OK\n")
    (scene.root / "to_second").symlink_to(second / "s.txt")
    (scene.root / "to_second_rel").symlink_to("../second/s.txt")
    w = Workspace([str(scene.root), str(second)])
    try:
        node, data = w.read_bytes(w.locate("to_second"))
        assert data == b"SECOND OK\n" and node.root == 1 and node.path == str(second / "s.txt")
        assert NOT_IN_WORKSPACE in refused(lambda: w.read_bytes(w.locate("to_second_rel"))).message
        assert NOT_IN_WORKSPACE in refused(lambda: w.read_bytes(w.locate(f"{second}-evil/x"))).message
        assert NOT_IN_WORKSPACE in refused(lambda: w.read_bytes(w.locate("out_file"))).message
    finally:
        w.close()


def test_magic_link_to_the_root_descriptor(scene: Scene, ws: Workspace) -> None:
    """B18: a link to /proc/self/fd/<root fd> (a magic link) cannot be used to walk out via `..`."""
    (scene.root / "fdroot").symlink_to(f"/proc/self/fd/{ws.primary.fd}")
    for path in ("fdroot/../root-evil/secret.txt", "fdroot/inside.txt"):
        err = refused(lambda: ws.read_bytes(ws.locate(path)))
        assert err.kind in ("path_not_in_workspace", "file_not_found"), err.message


# -- a real stdio session ----------------------------------------------------------------------------------

STDIO_ATTACKS = [
    ("read_file", {"absolute_path": "out_file"}, NOT_IN_WORKSPACE),
    ("read_file", {"absolute_path": "../root-evil/secret.txt"}, NOT_IN_WORKSPACE),
    ("read_file", {"absolute_path": "{tmp}/root-evil/secret.txt"}, NOT_IN_WORKSPACE),
    ("read_file", {"absolute_path": "c1"}, NOT_IN_WORKSPACE),
    ("read_file", {"absolute_path": "out_dir/secret.txt"}, NOT_IN_WORKSPACE),
    ("read_file", {"absolute_path": "notes"}, "protected"),
    ("read_file", {"absolute_path": "pipe"}, "regular file"),
    ("read_file", {"absolute_path": "loop1"}, "loop"),
    ("list_directory", {"path": "out_dir"}, NOT_IN_WORKSPACE),
    ("write_file", {"file_path": "dangling_out", "content": "PWNED"}, NOT_IN_WORKSPACE),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("walker", [False, True], ids=["openat2", "walker"])
async def test_stdio_session_refuses_escapes(
    scene: Scene, mode: str, walker: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A real subprocess server, spoken to by the official client in both protocol eras."""
    from mcp import Client, stdio_client

    env = {"CORETOOLS_NO_OPENAT2": "1"} if walker else {}
    log = tmp_path_factory.mktemp("stdio") / "stderr.log"
    with open(log, "w") as errlog:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                Client(stdio_client(stdio_params([scene.root], env=env, forked=True), errlog=errlog), mode=mode)
            )
            names = {t.name for t in (await client.list_tools()).tools}
            ran = 0
            for tool, args, expected in STDIO_ATTACKS:
                if tool not in names:
                    continue
                args = {k: fill(v, scene) if isinstance(v, str) else v for k, v in args.items()}
                result = await client.call_tool(tool, args, read_timeout_seconds=30)  # a FIFO never blocks
                text = text_of(result)
                assert result.is_error, (tool, args, text)
                assert expected.lower() in text.lower(), (tool, args, text)
                assert_no_leak(text)
                ran += 1
            good = await client.call_tool("read_file", {"absolute_path": "good_dir/good_up"})
            assert text_of(good).strip() == "INSIDE OK"
    assert ran >= 8
    assert "Traceback" not in log.read_text()


def test_backends_really_differ(backend: str) -> None:
    """Guard for the fixture: the walker backends must not reach openat2, the openat2 one must."""
    assert kernel.have_openat2() == (backend == "openat2")
    assert bool(kernel.O_PATH) == (backend != "portable" and sys.platform == "linux")
