"""The pinned corpus of `bench_peers.py`: the Django 5.1 source distribution (package, tests, docs) unpacked
as a git work tree, plus 7,000 generated files under a `.gitignore`d `build/`, and a scratch folder (also
ignored) for the write and small-read benchmarks.

Everything lives under `benchmarks/.corpus/` (git-ignored) and is built once: the sdist is fetched from
PyPI with pip (`pip download django==5.1 --no-deps --no-binary :all:`) and checked against its SHA-256, so
every machine measures the same bytes. The work tree gets `git init` (no commit) so that ripgrep's default
filters read its `.gitignore`, as ours do.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / ".corpus"
VERSION = "5.1"
SDIST = f"Django-{VERSION}.tar.gz"
SHA256 = "848a5980e8efb76eea70872fb0e4bc5e371619c70fffbe48e3e1b50b2c09455d"
IGNORED_FILES = 7000
GITIGNORE = "\n# benchmark additions\n/build/\n/_scratch/\n"


def sdist() -> Path:
    """The pinned sdist, downloaded once into `.corpus/dl/`."""
    target = CORPUS / "dl" / SDIST
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        spec = [f"django=={VERSION}", "--no-deps", "--no-binary", ":all:", "-d", str(target.parent), "-q"]
        for pip in ([sys.executable, "-m", "pip", "download"], ["python3", "-m", "pip", "download"],
                    ["uvx", "pip", "download"]):  # fmt: skip
            if subprocess.run([*pip, *spec], check=False, stderr=subprocess.DEVNULL).returncode == 0:
                break
        if not target.exists():
            sys.exit(f"could not download {SDIST} (pip download django=={VERSION})")
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != SHA256:
        sys.exit(f"{target}: sha256 {digest}, expected {SHA256}")
    return target


def build() -> Path:
    """The corpus root, built if needed."""
    root = CORPUS / f"django-{VERSION}"
    if (root / ".complete").exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    tmp = CORPUS / f"django-{VERSION}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist()) as tar:
        tar.extractall(tmp, filter="data")
    (tmp / f"Django-{VERSION}").rename(root)
    tmp.rmdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    with open(root / ".gitignore", "a") as fh:
        fh.write(GITIGNORE)
    _ignored_bulk(root / "build")
    (root / "_scratch").mkdir()
    (root / ".complete").write_text("ok\n")
    return root


def _ignored_bulk(base: Path) -> None:
    """`IGNORED_FILES` Python files that the rules hide, each with lines the search pattern would match,
    so that a broken ignore rule shows in the totals."""
    for i in range(IGNORED_FILES):
        folder = base / f"lib{i // 500}" / f"pkg{(i // 50) % 10}"
        if i % 50 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def test_generated_{i}_{k}(self):\n    return {k}\n\n" for k in range(3))
        (folder / f"gen_{i}.py").write_text(body)


def read_set(root: Path, count: int = 150, target_bytes: int = 950_000) -> list[Path]:
    """`count` files of the `django/` package whose sizes are closest to the mean that makes
    `target_bytes` in all, in path order: the same set on every machine."""
    mean = target_bytes / count
    files = sorted(p for p in (root / "django").rglob("*.py") if p.is_file())
    chosen = sorted(files, key=lambda p: (abs(p.stat().st_size - mean), str(p)))[:count]
    return sorted(chosen)


if __name__ == "__main__":
    where = build()
    picked = read_set(where)
    print(where, len(picked), "files,", sum(p.stat().st_size for p in picked), "bytes")
