"""kernel.py on its own: contained resolution (`open_beneath` / `walk_open`) under both backends, the
absolute-symlink mapping between roots, link limits, descriptor helpers, and the openat2 probe."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coretools.sandbox import kernel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="descriptor checks read /proc/self/fd")

PATH_FLAGS = kernel.O_PATH | kernel.O_CLOEXEC


@pytest.fixture(params=["openat2", "walker"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "openat2" and not kernel.have_openat2():
        pytest.skip("openat2 is not available on this kernel")
    if request.param == "walker":
        monkeypatch.setattr(kernel, "_openat2", None)
    return request.param


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[list[kernel.Anchor], Path, Path]]:
    """Two roots `r` and `r2`, the prefix sibling `r-evil`, and links of every kind in `r`."""
    r, r2, evil = tmp_path / "r", tmp_path / "r2", tmp_path / "r-evil"
    for d in (r, r2, evil):
        d.mkdir()
    (evil / "secret.txt").write_text("DECOY SECRET\n")
    (r2 / "two.txt").write_text("TWO\n")
    (r / "a" / "b").mkdir(parents=True)
    (r / "a" / "b" / "f.txt").write_text("F\n")
    (r / "top.txt").write_text("TOP\n")
    (r / "deep").symlink_to("a/b")  # deep/.. is a (physically), not r
    (r / "to_r2").symlink_to(r2 / "two.txt")
    (r / "to_r2_dir").symlink_to(r2)
    (r / "to_evil").symlink_to(evil / "secret.txt")
    (r / "to_evil_dotdot").symlink_to(f"{r}/../r-evil/secret.txt")  # starts with the root's path
    (r / "to_self_abs").symlink_to(f"{r}/./top.txt")
    (r / "file_as_dir").symlink_to("top.txt")
    anchors = []
    for d in (r, r2):
        anchors.append(kernel.Anchor(os.open(d, kernel.O_PATH | os.O_DIRECTORY | kernel.O_CLOEXEC), str(d)))
    yield anchors, r, evil
    for a in anchors:
        os.close(a.fd)


def real(fd: int) -> str:
    try:
        return kernel.fd_real_path(fd) or ""
    finally:
        os.close(fd)


def test_dotdot_is_physical_after_a_link(backend: str, tree) -> None:
    anchors, r, _ = tree
    fd, index = kernel.open_beneath(anchors, 0, "deep/../b/f.txt", PATH_FLAGS)
    assert (real(fd), index) == (str(r / "a" / "b" / "f.txt"), 0)
    fd, _ = kernel.open_beneath(anchors, 0, "a/b/../..", PATH_FLAGS)
    assert real(fd) == str(r)


@pytest.mark.parametrize(
    "rel", ["..", "a/../..", "deep/../../..", "to_evil", "to_evil_dotdot", "a/b/../../../r-evil/secret.txt"]
)
def test_escapes_raise(backend: str, tree, rel: str) -> None:
    anchors, _, _ = tree
    with pytest.raises(OSError) as info:
        kernel.open_beneath(anchors, 0, rel, PATH_FLAGS)
    assert info.value.errno == errno.EXDEV


def test_absolute_links_map_onto_roots(backend: str, tree) -> None:
    anchors, r, _ = tree
    fd, index = kernel.open_beneath(anchors, 0, "to_r2", PATH_FLAGS)
    assert index == 1 and real(fd).endswith("/r2/two.txt")
    fd, index = kernel.open_beneath(anchors, 0, "to_r2_dir/two.txt", PATH_FLAGS)
    assert index == 1 and real(fd).endswith("/r2/two.txt")
    fd, index = kernel.open_beneath(anchors, 0, "to_self_abs", PATH_FLAGS)
    assert (real(fd), index) == (str(r / "top.txt"), 0)
    with pytest.raises(OSError) as info:  # the second root's `..` is its own root boundary
        kernel.open_beneath(anchors, 0, "to_r2_dir/../r/top.txt", PATH_FLAGS)
    assert info.value.errno == errno.EXDEV


def test_locate_absolute_compares_components() -> None:
    anchors = [kernel.Anchor(-1, "/srv/r"), kernel.Anchor(-1, "/srv/r2")]
    assert kernel._locate_absolute(anchors, "/srv/r") == (0, "")
    assert kernel._locate_absolute(anchors, "/srv/r/") == (0, "")
    assert kernel._locate_absolute(anchors, "/srv/r/x/y") == (0, "x/y")
    assert kernel._locate_absolute(anchors, "/srv/r2/x") == (1, "x")
    for outside in ("/srv/r-evil/x", "/srv/r_backup", "/srv/r.bak", "/srv", "/", "//srv/r/x"):
        with pytest.raises(kernel.EscapeError):
            kernel._locate_absolute(anchors, outside)
    assert kernel._locate_absolute([kernel.Anchor(-1, "/")], "/etc/x") == (0, "etc/x")


def test_link_limits(backend: str, tree) -> None:
    anchors, r, _ = tree
    (r / "l0").symlink_to("top.txt")
    for i in range(1, kernel.MAX_SYMLINKS + 2):
        (r / f"l{i}").symlink_to(f"l{i - 1}")
    fd, _ = kernel.open_beneath(anchors, 0, f"l{kernel.MAX_SYMLINKS - 1}", PATH_FLAGS)
    assert real(fd) == str(r / "top.txt")
    with pytest.raises(OSError) as info:
        kernel.open_beneath(anchors, 0, f"l{kernel.MAX_SYMLINKS + 1}", PATH_FLAGS)
    assert info.value.errno == errno.ELOOP
    (r / "loop_a").symlink_to("loop_b")
    (r / "loop_b").symlink_to("loop_a/x")
    with pytest.raises(OSError) as info:
        kernel.open_beneath(anchors, 0, "loop_a", PATH_FLAGS)
    assert info.value.errno == errno.ELOOP


def test_final_link_not_followed_when_asked(backend: str, tree) -> None:
    anchors, r, _ = tree
    fd, _ = kernel.open_beneath(anchors, 0, "to_evil", PATH_FLAGS, follow_final=False)
    try:
        assert stat.S_ISLNK(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as info:  # a real open of a final link with O_NOFOLLOW: ELOOP, not a walk
        kernel.open_beneath(anchors, 0, "to_evil", os.O_RDONLY, follow_final=False)
    assert info.value.errno == errno.ELOOP


def test_non_directory_components(backend: str, tree) -> None:
    anchors, _, _ = tree
    for rel in ("top.txt/x", "file_as_dir/x"):
        with pytest.raises(OSError) as info:
            kernel.open_beneath(anchors, 0, rel, PATH_FLAGS)
        assert info.value.errno == errno.ENOTDIR


def test_walker_treats_an_absolute_rel_as_relative(tree) -> None:
    anchors, r, _ = tree
    fd, _ = kernel.walk_open(anchors, 0, "/top.txt", PATH_FLAGS)
    assert real(fd) == str(r / "top.txt")
    with pytest.raises(FileNotFoundError):
        kernel.walk_open(anchors, 0, str(tree[2] / "secret.txt"), PATH_FLAGS)


def test_persistent_eagain_falls_back_to_the_walker(tree, monkeypatch: pytest.MonkeyPatch) -> None:
    anchors, r, _ = tree
    calls = []

    def busy(*args, **kw):
        calls.append(args)
        raise OSError(errno.EAGAIN, "try again")

    monkeypatch.setattr(kernel, "_openat2", busy)
    fd, _ = kernel.open_beneath(anchors, 0, "a/b/f.txt", PATH_FLAGS)
    assert real(fd) == str(r / "a" / "b" / "f.txt") and len(calls) == 8
    with pytest.raises(OSError) as info:
        kernel.open_beneath(anchors, 0, "to_evil", PATH_FLAGS)
    assert info.value.errno == errno.EXDEV


@pytest.mark.timeout(10)
def test_reopen_uses_the_inode_and_never_blocks(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("ORIGINAL\n")
    node = os.open(f, kernel.O_PATH | kernel.O_CLOEXEC)
    f.rename(tmp_path / "moved.txt")
    f.write_text("REPLACEMENT\n")
    fd = kernel.reopen(node, os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"ORIGINAL\n"
    finally:
        os.close(fd)
        os.close(node)
    os.mkfifo(tmp_path / "p")
    node = os.open(tmp_path / "p", kernel.O_PATH | kernel.O_CLOEXEC)
    try:
        fd = kernel.reopen(node, os.O_RDONLY | os.O_NONBLOCK)
        assert fd is not None
        os.close(fd)
    finally:
        os.close(node)


def test_fd_real_path_and_deleted_files(tmp_path: Path) -> None:
    odd = tmp_path / "x (deleted)"  # a real name that merely looks like the kernel's marker
    odd.write_text("x")
    fd = os.open(odd, os.O_RDONLY | kernel.O_CLOEXEC)
    try:
        assert kernel.fd_real_path(fd) == str(odd)
        odd.unlink()
        assert kernel.fd_real_path(fd) is None
    finally:
        os.close(fd)


def test_probe_does_not_leak_descriptors() -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        kernel._load_openat2()
    assert len(os.listdir("/proc/self/fd")) == before


def test_backend_can_be_forced_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORETOOLS_NO_OPENAT2", "1")
    assert kernel._load_openat2() is None
    monkeypatch.delenv("CORETOOLS_NO_OPENAT2")
    assert (kernel._load_openat2() is None) == (not kernel.have_openat2())


def test_open_plain_takes_only_symlink_free_paths(tmp_path) -> None:
    """The fast path opens a path only if no step of it is a symlink (so the path given is the real one);
    a link anywhere, or an escape, hands the path back to the general resolution (None)."""
    if not kernel.have_openat2():
        pytest.skip("openat2 is not available here")
    root = tmp_path / "r"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("x")
    (root / "link").symlink_to("d")
    (root / "flink").symlink_to("d/f.txt")
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = kernel.open_plain(rfd, "d/f.txt", os.O_RDONLY)
        assert fd is not None
        os.close(fd)
        fd = kernel.open_plain(rfd, "d/../d/f.txt", os.O_RDONLY)
        assert fd is not None
        os.close(fd)
        assert kernel.open_plain(rfd, "link/f.txt", os.O_RDONLY) is None
        assert kernel.open_plain(rfd, "flink", os.O_RDONLY) is None
        assert kernel.open_plain(rfd, "../r/d/f.txt", os.O_RDONLY) is None
        with pytest.raises(FileNotFoundError):
            kernel.open_plain(rfd, "d/missing", os.O_RDONLY)
    finally:
        os.close(rfd)
