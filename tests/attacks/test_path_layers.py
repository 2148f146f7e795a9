"""Each path defence on its own, so a regression in one shows even while another still catches the input.

Layer 1 is lexical (`Workspace.locate`: a path that climbs out by `..` is refused before any I/O). Layer 2
is the contained open (`kernel.open_beneath`: openat2's RESOLVE_BENEATH, or the O_NOFOLLOW walk). Layer 3 is
the protected-path rule applied to the real path behind a symlink. Here each is fed an input that only it
would stop: the other layers are bypassed or unable to see it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from coretools.errors import OutsideWorkspace, PathError, ProtectedPath
from coretools.sandbox import kernel
from coretools.sandbox.gateway import Workspace
from coretools.sandbox.paths import Location

ESCAPES = ["../root-evil/secret.txt", "sub/../../root-evil/secret.txt", "./../root-evil"]


@pytest.fixture(params=["openat2", "walker"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "openat2" and not kernel.have_openat2():
        pytest.skip("openat2 is not available on this kernel")
    if request.param == "walker":
        monkeypatch.setattr(kernel, "_openat2", None)
    return request.param


@pytest.fixture
def ws(root: Path) -> Workspace:
    (root / "sub").mkdir()
    (root / "inside.txt").write_text("inside\n")
    os.symlink("../root-evil/secret.txt", root / "link_out")
    os.symlink("inside.txt", root / "link_in")
    (root / ".env").write_text("ENV SECRET\n")
    os.symlink(".env", root / "notes")
    workspace = Workspace([str(root)])
    yield workspace
    workspace.close()


@pytest.mark.parametrize("path", ESCAPES)
def test_lexical_check_refuses_without_io(ws: Workspace, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_io(*args, **kwargs):
        raise AssertionError("the lexical check let the path reach the kernel")

    monkeypatch.setattr(kernel, "open_beneath", no_io)
    monkeypatch.setattr(kernel, "open_plain", no_io)
    with pytest.raises(OutsideWorkspace):
        ws.locate(path)


@pytest.mark.parametrize("rel", ["../root-evil/secret.txt", "sub/../../root-evil/secret.txt", "link_out"])
def test_contained_open_refuses_what_the_lexical_check_never_saw(ws: Workspace, backend: str, rel: str) -> None:
    """A Location built by hand skips `locate`: only the kernel-checked open stands between it and the decoy."""
    loc = Location(0, rel, f"{ws.primary.shown}/{rel}")
    with pytest.raises(PathError):
        node = ws.open_node(loc)
        node.close()
    with pytest.raises((PathError, kernel.EscapeError, OSError)):
        fd, _ = kernel.open_beneath([kernel.Anchor(r.fd, r.path) for r in ws.roots], 0, rel, os.O_RDONLY)
        os.close(fd)


@pytest.mark.parametrize("name", ["link_out", "link_in"])
def test_unfollowed_final_link_is_the_link_itself(ws: Workspace, backend: str, name: str) -> None:
    """follow_final=False opens the symlink, never its target (in the root or out of it)."""
    if not kernel.O_PATH:
        pytest.skip("no O_PATH: a symlink itself cannot be opened on this platform")
    anchors = [kernel.Anchor(r.fd, r.path) for r in ws.roots]
    fd, _ = kernel.open_beneath(anchors, 0, name, kernel.O_PATH, follow_final=False)
    try:
        assert stat.S_ISLNK(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        fd, _ = kernel.open_beneath(anchors, 0, name, os.O_RDONLY, follow_final=False)
        os.close(fd)


def test_protection_follows_the_real_path(ws: Workspace, backend: str) -> None:
    """`notes -> .env`: the name is harmless, the lexical rule passes it, the real path is protected."""
    loc = ws.locate("notes")
    with pytest.raises(ProtectedPath):
        ws.open_node(loc).close()
