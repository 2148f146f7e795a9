"""`settle_heap`: after it, glibc serves large blocks from mappings of their own, every time. By default the
first large block freed raises glibc's mmap threshold to its size, so the next ones come from the heap,
which fragments and keeps the server's RSS at its high-water mark (bench_peers measured ~8 MiB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
if sys.argv[1] == "settled":
    from coretools.server.app import settle_heap
    settle_heap()
first = bytearray(1 << 20)
del first
second = bytearray(1 << 20)
print(libc.mallinfo2().hblkhd >= 1 << 20)
"""


def _glibc_with_mallinfo2() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL(None), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc_with_mallinfo2(), reason="glibc 2.33+ only")
@pytest.mark.parametrize(("mode", "mapped"), [("settled", "True"), ("default", "False")])
def test_a_large_block_after_a_freed_one_is_mapped_only_once_settled(mode: str, mapped: str) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PYTHONPATH": str(REPO)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == mapped
