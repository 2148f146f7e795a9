"""read_many_files: directories, globs, excludes, default excludes, media on request, skips and caps."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest
from mcp import types

from tests.conftest import call_tool, text_of
from tests.readside import write_files as make

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\ntrailer<<>>\n%%EOF\n"


async def rmf(root: Path | list[Path], paths: list[str], **extra):
    return await call_tool(root, "read_many_files", {"paths": paths, **extra})


def read_paths(result) -> list[str]:
    """Absolute paths of the files whose text was included, in output order."""
    return re.findall(r"^--- (/.*) ---$", text_of(result), flags=re.M)


def skipped(result) -> dict[str, str]:
    return {item["path"]: item["reason"] for item in result.structured["skipped"]}


@pytest.fixture
def project(root: Path) -> Path:
    make(
        root,
        {
            "README.md": "readme\n",
            "src/a.py": "A = 1\n",
            "src/sub/b.py": "B = 2\n",
            "src/a.test.py": "test\n",
            "docs/guide.md": "guide\n",
            "docs/pic.png": PNG,
            "node_modules/pkg/index.js": "module\n",
            "build/out.js": "built\n",
            "GEMINI.md": "memory\n",
            "tool.zip": b"PK\x03\x04zip",
        },
    )
    return root


async def test_directory_is_read_recursively_with_separators(project: Path) -> None:
    result = await rmf(project, ["src"])
    assert not result.is_error
    text = text_of(result)
    assert read_paths(result) == [str(project / "src/a.py"), str(project / "src/a.test.py"), str(project / "src/sub/b.py")]
    assert f"--- {project / 'src/a.py'} ---\n\nA = 1\n\n" in text
    assert "\n--- End of content ---" in text
    assert result.structured["files"] == read_paths(result)


async def test_recursive_false_reads_only_the_top_of_a_directory(project: Path) -> None:
    result = await rmf(project, ["src"], recursive=False)
    assert read_paths(result) == [str(project / "src/a.py"), str(project / "src/a.test.py")]


async def test_glob_patterns_and_file_names(project: Path) -> None:
    result = await rmf(project, ["src/**/*.py", "README.md"])
    assert read_paths(result) == [
        str(project / "README.md"),
        str(project / "src/a.py"),
        str(project / "src/a.test.py"),
        str(project / "src/sub/b.py"),
    ]


async def test_include_is_merged_with_paths(project: Path) -> None:
    result = await rmf(project, ["README.md"], include=["docs/*.md"])
    assert read_paths(result) == [str(project / "README.md"), str(project / "docs/guide.md")]


async def test_brace_glob_is_case_insensitive(project: Path) -> None:
    make(project, {"NOTES.TXT": "upper\n"})
    result = await rmf(project, ["*.{md,txt}"])
    assert str(project / "NOTES.TXT") in read_paths(result)
    assert str(project / "README.md") in read_paths(result)


async def test_a_file_named_twice_is_read_once(project: Path) -> None:
    result = await rmf(project, ["README.md", "./README.md", "*.md", str(project / "README.md")])
    assert read_paths(result).count(str(project / "README.md")) == 1


async def test_exclude_patterns_are_skipped_with_reason(project: Path) -> None:
    result = await rmf(project, ["src"], exclude=["**/*.test.py"])
    assert str(project / "src/a.test.py") not in read_paths(result)
    assert skipped(result)[str(project / "src/a.test.py")] == "excluded by pattern"
    assert "Skipped" in text_of(result) and "excluded by pattern" in text_of(result)


async def test_default_excludes_on(project: Path) -> None:
    result = await rmf(project, ["**/*"])
    got = read_paths(result)
    assert str(project / "node_modules/pkg/index.js") not in got
    assert str(project / "build/out.js") not in got
    assert str(project / "GEMINI.md") not in got
    assert str(project / "tool.zip") not in got
    assert skipped(result)[str(project / "GEMINI.md")] == "excluded by pattern"
    assert any("ignored" in reason for reason in skipped(result).values())


async def test_default_excludes_off(project: Path) -> None:
    result = await rmf(project, ["**/*"], useDefaultExcludes=False)
    got = read_paths(result)
    assert str(project / "node_modules/pkg/index.js") in got
    assert str(project / "build/out.js") in got
    assert str(project / "GEMINI.md") in got
    # A binary file is still never dumped.
    assert skipped(result)[str(project / "tool.zip")] == "binary file"


async def test_gitignore_respected_unless_turned_off(project: Path) -> None:
    make(project, {".gitignore": "*.log\n", "app.log": "log line\n"})
    on = await rmf(project, ["*.log"])
    assert read_paths(on) == []
    assert "No files matching the criteria were found or all were skipped." in text_of(on)
    assert any("ignored" in r for r in skipped(on).values())
    off = await rmf(project, ["*.log"], respect_git_ignore=False)
    assert read_paths(off) == [str(project / "app.log")]


async def test_named_ignored_file_is_skipped(project: Path) -> None:
    make(project, {".geminiignore": "private.txt\n", "private.txt": "no\n"})
    result = await rmf(project, ["private.txt"])
    assert read_paths(result) == []
    assert "1 file(s)" in skipped(result)


async def test_media_only_when_requested(project: Path) -> None:
    result = await rmf(project, ["docs"])
    assert not any(isinstance(b, types.ImageContent) for b in result.content)
    assert skipped(result)[str(project / "docs/pic.png")] == (
        "asset file (image/pdf/audio) was not explicitly requested by name or extension"
    )
    for request in (["docs/*.png"], ["docs/pic.png"], ["docs/*.{png,md}"], ["docs/pic.*"]):
        result = await rmf(project, request)
        images = [b for b in result.content if isinstance(b, types.ImageContent)]
        assert len(images) == 1, request
        assert images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data) == PNG


async def test_pdf_by_extension_is_an_embedded_blob(project: Path) -> None:
    make(project, {"docs/spec.pdf": PDF})
    result = await rmf(project, ["docs/*.pdf"])
    res = [b for b in result.content if isinstance(b, types.EmbeddedResource)]
    assert len(res) == 1
    assert res[0].resource.mime_type == "application/pdf"
    assert base64.b64decode(res[0].resource.blob) == PDF


async def test_long_file_is_truncated_with_warning(project: Path) -> None:
    make(project, {"long.txt": "".join(f"{i}\n" for i in range(2500))})
    result = await rmf(project, ["long.txt"])
    text = text_of(result)
    assert "[WARNING: This file was truncated (showing lines 1-2000 of 2500)." in text
    assert "'read_file'" in text and "'offset'" in text
    assert "\n1999\n" in text and "\n2000\n" not in text


async def test_missing_and_outside_paths_are_skipped_with_reasons(project: Path) -> None:
    result = await rmf(project, ["README.md", "missing.txt", "../root-evil/secret.txt"])
    assert read_paths(result) == [str(project / "README.md")]
    reasons = skipped(result)
    assert "File not found" in reasons["missing.txt"]
    assert "Path not in workspace" in reasons["../root-evil/secret.txt"]
    assert "DECOY" not in text_of(result)


async def test_absolute_glob_in_root_and_outside(project: Path) -> None:
    inside = await rmf(project, [f"{project}/docs/*.md"])
    assert read_paths(inside) == [str(project / "docs/guide.md")]
    outside = await rmf(project, [f"{project.parent}/root-evil/*.txt"])
    assert read_paths(outside) == []
    assert "DECOY" not in text_of(outside)


async def test_literal_name_with_brackets(project: Path) -> None:
    make(project, {"page[id].tsx": "page\n", "pagei.tsx": "other\n"})
    result = await rmf(project, ["page[id].tsx"])
    assert read_paths(result) == [str(project / "page[id].tsx")]


async def test_nothing_matched(project: Path) -> None:
    result = await rmf(project, ["*.nothing"])
    assert not result.is_error
    assert text_of(result).startswith("No files matching the criteria were found or all were skipped.")
    assert result.structured["files"] == []


async def test_several_roots_are_globbed(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    make(other, {"notes.md": "other root\n"})
    result = await rmf([project, other], ["*.md"])
    assert str(other / "notes.md") in read_paths(result)
    assert str(project / "README.md") in read_paths(result)


async def test_file_count_cap(root: Path) -> None:
    make(root, {f"many/f{i:03d}.txt": f"{i}\n" for i in range(503)})
    result = await rmf(root, ["many"])
    assert len(read_paths(result)) == 500
    capped = [p for p, r in skipped(result).items() if r == "file limit reached (500 files per call)"]
    assert sorted(capped) == [str(root / f"many/f{i}.txt") for i in (500, 501, 502)]
    assert "Skipped 3 item(s):" in text_of(result)


async def test_total_size_cap(root: Path) -> None:
    chunk = "".join("x" * 199 + "\n" for _ in range(1990))  # ~400k characters, under the line window
    make(root, {f"big{i}.txt": chunk for i in range(4)})
    result = await call_tool(root, "read_many_files", {"paths": ["big*.txt"]}, "--max-result-chars", "0")
    text = text_of(result)
    assert read_paths(result) == [str(root / f"big{i}.txt") for i in range(3)]
    assert "this result's size limit (1,000,000 characters" in text
    assert skipped(result)[str(root / "big3.txt")] == "result size limit reached (1,000,000 characters per result)"
    assert len(text) < 1_100_000


async def test_the_result_budget_cuts_with_the_way_to_the_rest(root: Path) -> None:
    chunk = "".join(f"{i:05d}" + "x" * 194 + "\n" for i in range(1990))
    make(root, {f"big{i}.txt": chunk for i in range(4)})
    result = await rmf(root, ["big*.txt"])
    text = text_of(result)
    assert len(text) <= 80_000
    assert read_paths(result) == [str(root / "big0.txt")]
    offset = int(re.search(r"read the rest of this file with read_file and offset: (\d+)", text).group(1))
    last_shown = text.split("\n[... cut:")[0].rsplit("\n", 1)[-1]
    assert chunk.split("\n")[offset].startswith(f"{offset:05d}") and not last_shown.startswith(f"{offset + 1:05d}")
    assert skipped(result)[str(root / "big3.txt")] == "result size limit reached (80,000 characters per result)"


async def test_symlinked_file_outside_is_not_read(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("OUTSIDE\n")
    os.symlink(secret, project / "src" / "link.txt")
    for request in (["src"], ["src/link.txt"], ["**/*.txt"]):
        assert "OUTSIDE" not in text_of(await rmf(project, request)), request
