"""The command line: `call` and `tools` as real subprocesses, exit codes, root checks, help and version,
the notice shown when `serve` is started by hand in a terminal, and `python -m coretools`."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from coretools import __version__
from coretools.cli import build_parser, main
from tests.conftest import REPO

BIN = Path(sys.executable).parent
CORETOOLS_MCP = str(BIN / "coretools-mcp") if (BIN / "coretools-mcp").exists() else None
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 30


def run(*args: str, cwd: Path | None = None, stdin: str | None = None, env: dict | None = None):
    """`coretools-mcp ARGS` as a real subprocess (the console script when installed, else `python -m`)."""
    command = [CORETOOLS_MCP] if CORETOOLS_MCP else [sys.executable, "-m", "coretools"]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


@pytest.fixture
def project(root: Path) -> Path:
    (root / "hello.txt").write_text("hello from the cli\n")
    (root / "pic.png").write_bytes(PNG)
    return root


# -- call ------------------------------------------------------------------------------------------------


def test_call_success_prints_what_the_model_sees(project: Path) -> None:
    args = json.dumps({"absolute_path": str(project / "hello.txt")})
    proc = run("call", "read_file", args, "--root", str(project), "--log-level", "debug")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello from the cli\n"  # logs (debug here) never reach stdout


def test_call_tool_error_exits_1(project: Path) -> None:
    proc = run("call", "read_file", '{"absolute_path": "missing.txt"}', "--root", str(project))
    assert proc.returncode == 1
    assert proc.stdout == f"File not found: {project / 'missing.txt'}\n"


def test_call_invalid_parameters_exit_1(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["call", "list_directory", '{"path": ".", "limit": 3}', "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "Invalid parameters for list_directory:" in out
    assert "unknown parameter 'limit'" in out


def test_call_bad_json_exits_2(project: Path) -> None:
    proc = run("call", "read_file", "{absolute_path: x}", "--root", str(project))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "coretools-mcp: error: arguments are not valid JSON" in proc.stderr
    assert '{"path": "."}' in proc.stderr  # shows how to write it


def test_call_unknown_tool_exits_2_with_suggestion(project: Path) -> None:
    proc = run("call", "list_dir", "{}", "--root", str(project))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert 'Tool "list_dir" not found.' in proc.stderr and '"list_directory"' in proc.stderr


def test_call_bad_root_exits_2(tmp_path: Path) -> None:
    proc = run("call", "read_file", "{}", "--root", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert f"root does not exist: {tmp_path / 'missing'}" in proc.stderr


def test_call_reads_arguments_from_stdin(
    project: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"absolute_path": "hello.txt"}'))
    assert main(["call", "read_file", "-", "--root", str(project)]) == 0
    assert capsys.readouterr().out == "hello from the cli\n"


def test_call_json_prints_the_call_tool_result(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["call", "read_file", '{"absolute_path": "pic.png"}', "--json", "--root", str(project)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["isError"] is False
    image = [b for b in payload["content"] if b["type"] == "image"]
    assert image and image[0]["mimeType"] == "image/png"
    assert main(["call", "read_file", '{"absolute_path": "nope"}', "--json", "--root", str(project)]) == 1
    failed = json.loads(capsys.readouterr().out)
    assert failed["isError"] is True and "structuredContent" not in failed  # what the server sends by default
    argv = ["call", "read_file", '{"absolute_path": "nope"}', "--json", "--structured-content", "--root", str(project)]
    assert main(argv) == 1
    assert json.loads(capsys.readouterr().out)["structuredContent"]["error"]["kind"] == "file_not_found"


def test_call_renders_media_as_a_summary(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["call", "read_file", '{"absolute_path": "pic.png"}', "--root", str(project)]) == 0
    out = capsys.readouterr().out
    assert "[image image/png, about 3" in out
    assert "\x89PNG" not in out


def test_call_without_root_uses_the_current_directory(
    project: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    assert main(["call", "read_file", '{"absolute_path": "hello.txt"}']) == 0
    assert capsys.readouterr().out == "hello from the cli\n"


def test_call_without_a_usable_root_is_a_usage_error(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --root and a current directory that cannot serve: exit 2 with the CLI's own message, before any
    tool runs (not the server's "Restart coretools" advice, printed as a tool result)."""
    monkeypatch.chdir("/")
    assert main(["call", "list_directory", '{"path": "."}']) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "coretools-mcp: error: no --root, and the current directory cannot serve as one (refusing to serve the "
        "whole file system (/); pick a project directory, or pass --allow-broad-root if you really mean it); "
        "pass --root /path/to/project\n"
    )
    assert "Restart" not in captured.err


# -- tools ---------------------------------------------------------------------------------------------


def test_tools_prints_the_tool_list_as_json(project: Path) -> None:
    proc = run("tools", "--root", str(project))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    names = [t["name"] for t in data["tools"]]
    assert {"read_file", "list_directory", "glob", "read_many_files"} <= set(names)
    for tool in data["tools"]:
        assert tool["description"] and tool["inputSchema"]["type"] == "object"
    for name, reason in data.get("unavailable", {}).items():
        assert name not in names and reason


def test_tools_reports_unavailable_tools_with_a_reason(project: Path, capsys: pytest.CaptureFixture) -> None:
    from coretools.server.toolset import ToolSet
    from tests.conftest import make_config

    toolset = ToolSet(make_config([project]))
    if not toolset.unavailable:
        pytest.skip("every tool is available in this configuration")
    assert main(["tools", "--root", str(project)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["unavailable"] == toolset.unavailable


# -- configuration errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["tools"], ["call", "read_file", "{}"], ["serve"], ["serve", "--transport", "http", "--port", "0"]]
)
def test_unusable_tool_options_exit_2_with_a_clear_message(
    command: list[str], project: Path, capsys: pytest.CaptureFixture
) -> None:
    """A tool that finds its options unusable raises ConfigurationError while the tools are built; the CLI
    reports it and exits 2 before serving anything."""
    assert main([*command, "--root", str(project), "--discovery-command", "true"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "coretools-mcp: error: --discovery-command and --call-command go together; pass both\n"
    assert captured.out == ""


# -- roots ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["tools", "call", "serve"])
def test_bad_roots_exit_2_with_a_clear_message(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "file.txt").write_text("x")
    extra = ["read_file", "{}"] if command == "call" else []
    cases = {
        str(tmp_path / "missing"): "root does not exist",
        str(tmp_path / "file.txt"): "root is not a directory",
        "/": "refusing to serve the whole file system",
        str(home): "refusing to serve the home directory itself",
        "~": "refusing to serve the home directory itself",
    }
    for bad, message in cases.items():
        assert main([command, *extra, "--root", str(tmp_path), "--root", bad]) == 2, bad
        err = capsys.readouterr().err
        assert f"coretools-mcp: error: {message}" in err, bad
        if bad in ("/", str(home)):
            assert "--allow-broad-root" in err


def test_allow_broad_root_accepts_slash_and_home(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["tools", "--root", "/", "--allow-broad-root"]) == 0
    assert json.loads(capsys.readouterr().out)["tools"]
    assert main(["tools", "--root", str(tmp_path), "--allow-broad-root"]) == 0


# -- help and version ----------------------------------------------------------------------------------


def subcommands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(actions[0].choices)


def test_help_on_every_subcommand(capsys: pytest.CaptureFixture) -> None:
    names = subcommands()
    assert {"serve", "tools", "call"} <= set(names)
    for name in [None, *names]:
        argv = ["--help"] if name is None else [name, "--help"]
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0, argv
        out = capsys.readouterr().out
        assert out.startswith(f"usage: coretools-mcp{' ' + name if name else ''}"), argv
    serve_help = _help("serve", capsys)
    for option in ("--root", "--allow-broad-root", "--allow-protected", "--log-level"):
        assert option in serve_help
    assert "Exit 0 on success, 1 on a tool error, 2 on bad usage" in _help("call", capsys)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("history", ("--root", "--allow-broad-root", "--no-journal", "--journal-max-entries")),
        ("undo", ("--root", "--to", "--force", "--no-journal")),
        ("tools", ("--root", "--tools", "--schema-dialect")),
        ("call", ("--root", "--json", "--call-timeout", "--max-result-chars")),
        ("doctor", ("--root", "--shell-sandbox", "--transport", "--port", "--auth-token-env")),
    ],
)
def test_each_subcommand_helps_with_its_own_options(
    name: str, shown: tuple[str, ...], capsys: pytest.CaptureFixture
) -> None:
    """`history`, `undo`, `tools`, `call` and `doctor` show what they use (they printed every tool's shell, web
    and search options, 168-218 lines); each still takes serve's options, and says so."""
    with pytest.raises(SystemExit):
        main([name, "--help"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 80, out
    for option in shown:
        assert option in out, option
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  -")}
    for option in ("--shell-timeout", "--web-fetch-timeout", "--search-max-matches", "--max-sessions"):
        assert option not in listed and f"[{option}" not in out, option
    assert "takes every option of `serve`" in " ".join(out.split())
    assert "--shell-timeout SECONDS" in _help("serve", capsys)


def test_help_names_the_program_it_was_run_as(root: Path) -> None:
    """`coretools --help` says `coretools`; `coretools-mcp` says `coretools-mcp`, as its errors do."""
    for script in ("coretools", "coretools-mcp"):
        proc = subprocess.run([str(BIN / script), "history", "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"usage: {script} history"), proc.stdout
        assert f"see `{script} serve --help`" in " ".join(proc.stdout.split())
    proc = subprocess.run([str(BIN / "coretools"), "tools", "--root", str(root / "missing")], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.startswith("coretools: error: root does not exist")


def _help(name: str, capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_version_as_console_script() -> None:
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"coretools-mcp {__version__}"


def test_python_dash_m_coretools() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "coretools", "--version"], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"coretools-mcp {__version__}"


def test_both_console_scripts_are_installed() -> None:
    for script in ("coretools-mcp", "coretools"):
        if not (BIN / script).exists():
            pytest.fail(f"console script {script} is not installed next to {sys.executable}")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["call"])
    assert exit_.value.code == 2
    assert "the following arguments are required: tool" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--log-level", "loud"])
    assert exit_.value.code == 2


# -- serve ---------------------------------------------------------------------------------------------


def test_serve_in_a_terminal_says_it_is_waiting(root: Path) -> None:
    master, slave = pty.openpty()
    command = [CORETOOLS_MCP] if CORETOOLS_MCP else [sys.executable, "-m", "coretools"]
    proc = subprocess.Popen(
        [*command, "serve", "--root", str(root)],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    os.close(slave)
    killer = threading.Timer(30, proc.kill)
    killer.start()
    notice = []
    try:
        while True:
            line = proc.stderr.readline()
            if not line:
                break
            notice.append(line)
            if "Ctrl-C" in line:
                break
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        killer.cancel()
        os.close(master)
    text = "".join(notice)
    assert "waiting for an MCP client" in text
    assert "coretools-mcp tools" in text and "coretools-mcp call" in text
    assert out == ""  # nothing but JSON-RPC on stdout, and no client spoke


def test_serve_without_a_terminal_prints_no_notice_and_exits_on_eof(root: Path) -> None:
    command = [CORETOOLS_MCP] if CORETOOLS_MCP else [sys.executable, "-m", "coretools"]
    proc = subprocess.run(
        [*command, "--root", str(root)], input="", capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout == ""
    assert "waiting for an MCP client" not in proc.stderr
