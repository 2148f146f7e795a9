"""write_file: create/overwrite, messages, placeholders, faithful round trips, confirmation by elicitation."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import pytest
from mcp import types

from tests.conftest import call_tool, connect, snapshot, text_of

pytestmark = pytest.mark.anyio


async def write(root: Path, path: str, content: str, *extra: str, **more):
    return await call_tool(root, "write_file", {"file_path": path, "content": content, **more}, *extra)


async def test_creates_file_and_missing_parents(root: Path) -> None:
    res = await write(root, "a/b/c.txt", "hello\nworld\n")
    assert not res.is_error, text_of(res)
    assert (root / "a/b/c.txt").read_bytes() == b"hello\nworld\n"
    msg = text_of(res)
    assert len(res.content) == 1
    assert res.content[0].text == (
        f"Successfully created and wrote to new file: {root}/a/b/c.txt.\nContent, numbered:\n1|hello\n2|world"
    )
    assert msg


async def test_new_file_mode_follows_umask(root: Path) -> None:
    old = os.umask(0o027)
    try:
        res = await write(root, "m.txt", "x")
    finally:
        os.umask(old)
    assert not res.is_error
    assert stat.S_IMODE((root / "m.txt").stat().st_mode) == 0o640


async def test_overwrite_reports_changed_region_and_diff(root: Path) -> None:
    f = root / "f.txt"
    lines = [f"l{i}" for i in range(1, 31)]
    f.write_text("\n".join(lines) + "\n")
    lines[14] = "CHANGED"
    res = await write(root, str(f), "\n".join(lines) + "\n")
    assert not res.is_error, text_of(res)
    assert f.read_text() == "\n".join(lines) + "\n"
    assert len(res.content) == 1
    assert res.content[0].text.splitlines() == [
        f"Successfully overwrote file: {f}.", "Diff (numbered with the lines of the file as it is now):",
        "@@ -12,7 +12,7 @@", " 12|l12", " 13|l13", " 14|l14", "-  |l15", "+15|CHANGED", " 16|l16", " 17|l17", " 18|l18",
    ]


async def test_unchanged_content_is_not_rewritten(root: Path) -> None:
    f = root / "same.txt"
    f.write_text("same\n")
    os.utime(f, ns=(1, 1))
    res = await write(root, str(f), "same\n")
    assert not res.is_error and "already has exactly this content" in text_of(res)
    assert f.stat().st_mtime_ns == 1


async def test_directory_target_is_refused(root: Path) -> None:
    (root / "d").mkdir()
    res = await write(root, "d", "x")
    assert res.is_error and text_of(res).startswith(f"Path is a directory, not a file: {root}/d")
    assert res.structured["error"]["kind"] == "target_is_directory"
    assert (root / "d").is_dir()


async def test_outside_workspace_is_refused(root: Path) -> None:
    before = snapshot(root.parent / "root-evil")
    for path in (str(root.parent / "root-evil" / "new.txt"), "../root-evil/secret.txt", "/etc/coretools-test"):
        res = await write(root, path, "PWNED")
        assert res.is_error and "Path not in workspace" in text_of(res), path
    assert snapshot(root.parent / "root-evil") == before


async def test_protected_path_is_refused(root: Path) -> None:
    res = await write(root, ".git/config", "x")
    assert res.is_error and "protected" in text_of(res)
    assert not (root / ".git").exists()


async def test_modified_by_user_is_acknowledged(root: Path) -> None:
    res = await write(root, "u.txt", "user text\n", modified_by_user=True)
    assert "User modified the `content` to be: user text\n" in text_of(res)


# -- placeholders ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "// ... rest of methods ...",
        "  // rest of code ...",
        "(rest of methods ...)",
        "# ... unchanged code ...",
        "/* ... rest of the file ... */",
        "<!-- ... existing code ... -->",
        "    // \u2026 rest of code \u2026",
        "-- rest of ...",
    ],
)
async def test_placeholder_line_is_refused(root: Path, line: str) -> None:
    res = await write(root, "p.js", f"class A {{\n  m() {{}}\n{line}\n}}\n")
    assert res.is_error, line
    msg = text_of(res)
    assert msg.startswith("`content` contains an omission placeholder") and "complete file content" in msg
    assert line.strip() in msg
    assert not (root / "p.js").exists()


@pytest.mark.parametrize(
    "content",
    [
        'const x = "(rest of methods ...)";\n',
        "print('// ... rest of methods ...')\n",
        "def f(*args):\n    ...\n",
        "function f(...args) { return g(...args); }\n",
        "// see the rest of the docs...  for details on loading\n",
        "x = [1, 2, ...]\n",
        "Loading ...\n",
    ],
)
async def test_no_false_alarm(root: Path, content: str) -> None:
    res = await write(root, "ok.txt", content)
    assert not res.is_error, text_of(res)
    assert (root / "ok.txt").read_text() == content


# -- faithfulness -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "initial,content,expected,note",
    [
        pytest.param(b"old\r\nfile\r\n", "new\ncontent\n", b"new\r\ncontent\r\n", "Kept the file's CRLF line endings.",
                     id="crlf-stays-crlf"),
        pytest.param(b"old\nfile\n", "new\r\ncontent\r\n", b"new\ncontent\n", None, id="lf-stays-lf"),
        pytest.param(None, "a\r\nb\nc", b"a\r\nb\nc", None, id="new-file-as-given"),
        pytest.param(b"x\ny\n", "x\nz", b"x\nz", None, id="no-final-newline-gained"),
    ],
)
async def test_line_endings(root: Path, initial: bytes | None, content: str, expected: bytes, note: str | None) -> None:
    f = root / "le.txt"
    if initial is not None:
        f.write_bytes(initial)
    res = await write(root, str(f), content)
    assert not res.is_error, text_of(res)
    assert f.read_bytes() == expected
    if note:
        assert note in text_of(res)
    if not expected.endswith(b"\n"):
        assert "\\ No newline at end of file" in text_of(res)


@pytest.mark.parametrize(
    "encoding,bom",
    [("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE), ("utf-16-be", codecs.BOM_UTF16_BE),
     ("utf-32-be", codecs.BOM_UTF32_BE)],
)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
async def test_bom_encodings_are_kept(root: Path, encoding: str, bom: bytes, newline: str) -> None:
    f = root / "enc.txt"
    f.write_bytes(bom + "alt\nÄnderung ☃\n".replace("\n", newline).encode(encoding))
    res = await write(root, str(f), "neu 𝄞\nzwei\n")
    assert not res.is_error, text_of(res)
    assert f.read_bytes() == bom + "neu 𝄞\nzwei\n".replace("\n", newline).encode(encoding)
    assert "byte-order mark" in text_of(res)


async def test_bom_is_not_doubled_when_content_starts_with_one(root: Path) -> None:
    f = root / "bom.txt"
    f.write_bytes(codecs.BOM_UTF8 + b"a\n")
    res = await write(root, str(f), "\ufeffb\n")
    assert not res.is_error
    assert f.read_bytes() == codecs.BOM_UTF8 + b"b\n"


async def test_plain_utf8_stays_without_bom(root: Path) -> None:
    f = root / "plain.txt"
    f.write_bytes("é\n".encode())
    res = await write(root, str(f), "ü\n")
    assert not res.is_error
    assert f.read_bytes() == "ü\n".encode()
    assert "Kept the file's" not in text_of(res)


async def test_overwriting_non_text_says_it_is_now_utf8(root: Path) -> None:
    f = root / "latin.txt"
    f.write_bytes("caf\xe9\n".encode("latin-1"))
    res = await write(root, str(f), "café\n")
    assert not res.is_error
    assert f.read_bytes() == "café\n".encode()
    assert "not valid UTF-8" in text_of(res) and "written as UTF-8" in text_of(res)


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o444])
async def test_mode_bits_are_kept(root: Path, mode: int) -> None:
    f = root / "x.sh"
    f.write_text("echo hi\n")
    os.chmod(f, mode)
    res = await write(root, str(f), "echo there\n")
    assert not res.is_error, text_of(res)
    assert stat.S_IMODE(f.stat().st_mode) == mode
    assert f.read_text() == "echo there\n"


async def test_big_rewrite_is_summarised_not_dumped(root: Path) -> None:
    f = root / "big.txt"
    f.write_text("".join(f"old {i}\n" for i in range(5000)))
    res = await write(root, str(f), "".join(f"new {i}\n" for i in range(5000)))
    assert not res.is_error
    assert len(res.content) == 1 and "more lines not shown" in text_of(res)
    assert len(text_of(res)) < 13000


# -- schema and confirmation --------------------------------------------------------------------------------


def test_schema_matches_the_seed() -> None:
    from coretools.tools.write_file import WriteFile

    schema = WriteFile.input_schema
    assert list(schema["properties"]) == ["file_path", "content", "modified_by_user"]
    assert schema["required"] == ["file_path", "content"]
    assert [p["type"] for p in schema["properties"].values()] == ["string", "string", "boolean"]


def test_confirm_option_is_defined_once_for_both_tools() -> None:
    from coretools.cli import build_parser

    parser = build_parser()
    ns = parser.parse_args(["serve", "--confirm", "edits"])
    assert ns.confirm == "edits"
    assert parser.parse_args(["call", "write_file"]).confirm == "none"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--confirm", "everything"])


async def test_confirm_accept_and_decline(root: Path) -> None:
    answers = iter(["accept", "decline", "cancel"])
    seen: list[str] = []

    async def callback(context, params: types.ElicitRequestParams):
        seen.append(params.message)
        return types.ElicitResult(action=next(answers))

    f = root / "c.txt"
    f.write_text("v1\n")
    async with connect([root], "legacy", "--confirm", "edits", elicitation_callback=callback) as client:
        ok = await client.call_tool("write_file", {"file_path": str(f), "content": "v2\n"})
        assert not ok.is_error and f.read_text() == "v2\n"
        no = await client.call_tool("write_file", {"file_path": str(f), "content": "v3\n"})
        assert no.is_error and "cancelled by the user" in text_of(no) and f.read_text() == "v2\n"
        gone = await client.call_tool("write_file", {"file_path": str(f), "content": "v4\n"})
        assert gone.is_error and "dismissed" in text_of(gone) and f.read_text() == "v2\n"
    assert f"write_file: Apply this change to {f}?" in seen[0] and "-v1\n+v2" in seen[0]
    assert "-v2\n+v3" in seen[1]


async def test_confirm_without_client_support_refuses(root: Path) -> None:
    res = await write(root, "c.txt", "x", "--confirm", "edits")
    assert res.is_error and "cannot ask the user" in text_of(res)
    assert not (root / "c.txt").exists()
