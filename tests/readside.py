"""Helpers shared by the read-side suites (read_file, list_directory, glob, read_many_files, ignore)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from tests.conftest import text_of


def write_files(root: Path, files: Mapping[str, str | bytes], *, mtime: float | None = None) -> None:
    """Create files (and their directories) below `root`; optionally set their modification time."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if mtime is not None:
            os.utime(path, (mtime, mtime))


def error_text(result, kind: str | None = None) -> str:
    """The text of an isError result, after checking it is one (and of the given kind)."""
    assert result.is_error, text_of(result)
    if kind is not None:
        assert result.structured["error"]["kind"] == kind, result.structured
    return text_of(result)


def fake_rg(monkeypatch, records: list[dict]) -> None:  # noqa: ANN001 - pytest's MonkeyPatch
    """Replace rg's output with `records` (the JSON objects rg would print), for the search engine's checks
    of what rg claims."""
    from coretools.sandbox import ripgrep

    class FakeRun:
        def __init__(self, *args, **kwargs) -> None:
            self.stopped = None
            self.returncode = 0
            self.stderr = b""
            self.out_of_memory = False

        def batches(self):
            yield [json.dumps(record, separators=(",", ":")).encode() for record in records]

    monkeypatch.setattr(ripgrep, "RgRun", FakeRun)
