"""`coretools-mcp doctor`: a good setup passes (exit 0), and each problem it knows is reported on a line of its
own with its fix: the roots, ripgrep, the shell sandbox, the state directory, the HTTP settings and the host
configuration files that register coretools, found under a temporary HOME and XDG_CONFIG_HOME and in the
current directory. Real `coretools-mcp doctor` processes for the whole runs; the host files in process."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from coretools.cli import main

BIN = Path(sys.executable).parent
CORETOOLS_MCP = BIN / "coretools-mcp"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A home, a config home, a state directory and a project of their own; the current directory is the
    project (where project host files live)."""
    paths = {name: tmp_path / name for name in ("home", "config", "state", "project")}
    for path in paths.values():
        path.mkdir()
    monkeypatch.setenv("HOME", str(paths["home"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(paths["config"]))
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(paths["state"]))
    monkeypatch.delenv("CORETOOLS_RG", raising=False)
    monkeypatch.chdir(paths["project"])
    return paths


def doctor(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [str(CORETOOLS_MCP)] if CORETOOLS_MCP.exists() else [sys.executable, "-m", "coretools"]
    return subprocess.run([*command, "doctor", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=120)  # fmt: skip


def lines(out: str, level: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(level + " ")]


def write(path: Path, data: object | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def executable(path: Path) -> Path:
    write(path, "#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_good_setup_exits_0(setup: dict[str, Path]) -> None:
    command = executable(setup["home"] / ".local/bin/coretools-mcp")
    write(setup["home"] / ".gemini/settings.json",
          {"mcpServers": {"coretools": {"command": str(command), "args": ["--root", str(setup["project"])]}}})
    done = doctor("--root", str(setup["project"]), cwd=setup["project"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines(done.stdout, "error") == []
    for topic in ("roots", "ripgrep", "shell sandbox", "state directory", "tools"):
        assert any(line.split(None, 1)[1].startswith(topic + ":") for line in done.stdout.splitlines()), topic
    assert f"ok       roots: root {setup['project']}" in done.stdout
    assert "ok       ripgrep: ripgrep " in done.stdout
    assert f"ok       Gemini CLI ~/.gemini/settings.json mcpServers.coretools: runs {command} --root" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("0 errors")


def test_a_broken_setup_says_each_problem_and_its_fix(setup: dict[str, Path]) -> None:
    """One run, every machine-side problem at once: each is its own line, and the exit status is 1."""
    project, state = setup["project"], setup["state"]
    (project / "file.txt").write_text("x")
    (state / "journal").mkdir()
    (state / "journal").chmod(0o755)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        done = doctor(
            "--root", str(project / "missing"), "--root", str(project / "file.txt"), "--root", "/",
            "--root", str(setup["home"]), "--search-engine", "ripgrep", "--shell-writable", str(project / "nowhere"),
            "--transport", "http", "--port", str(port),
            cwd=project, env={"CORETOOLS_RG": str(project / "rg")},
        )  # fmt: skip
    finally:
        busy.close()
    assert done.returncode == 1, done.stdout + done.stderr
    errors = lines(done.stdout, "error")
    expected = [
        f"roots: root does not exist: {project / 'missing'}",
        f"roots: root is not a directory: {project / 'file.txt'}",
        "roots: refusing to serve the whole file system (/)",
        f"roots: refusing to serve the home directory itself ({setup['home']})",
        f"ripgrep: CORETOOLS_RG={project / 'rg'} is not a ripgrep binary that runs",
        f"shell sandbox: --shell-sandbox auto: --shell-writable {project / 'nowhere'}: not an existing directory",
        f"http: cannot listen on 127.0.0.1:{port}",
    ]
    for text in expected:
        assert any(text in line for line in errors), (text, done.stdout)
    assert any("Fix: point CORETOOLS_RG at an rg binary, or unset it" in line for line in errors)
    assert any("Fix: stop what listens there, or choose another --port" in line for line in errors)
    assert any(f"{state / 'journal'} open to other users" in line and f"Fix: chmod 700 {state / 'journal'}" in line
               for line in lines(done.stdout, "warning"))  # fmt: skip
    assert done.stdout.splitlines()[-1].startswith(f"{len(errors)} errors")


def test_a_bad_option_is_reported_as_serve_reports_it(setup: dict[str, Path]) -> None:
    done = doctor("--shell-sandbox", "jail", cwd=setup["project"])
    assert done.returncode == 2
    assert "doctor: error: argument --shell-sandbox: invalid choice: 'jail'" in done.stderr


def run_doctor(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    code = main(["doctor", *args])
    return code, capsys.readouterr().out


def test_state_directory_problems(setup: dict[str, Path], capsys: pytest.CaptureFixture,
                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    project = setup["project"]
    inside = project / ".state"
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(inside))
    code, out = run_doctor(capsys, "--root", str(project))
    assert code == 0
    assert any(f"the root {project} contains {inside}" in line and "Fix: set CORETOOLS_STATE_DIR" in line
               for line in lines(out, "warning")), out  # fmt: skip
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(write(setup["home"] / "state-file", "x")))
    code, out = run_doctor(capsys, "--root", str(project))
    assert code == 1
    assert any("is not a directory" in line for line in lines(out, "error")), out
    locked = setup["home"] / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(locked / "state"))
    code, out = run_doctor(capsys, "--root", str(project))
    if os.geteuid() != 0:  # root writes anywhere
        assert code == 1 and any(f"{locked} is not writable" in line for line in lines(out, "error")), out


def test_protected_roots_and_the_journal_switch(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    git = setup["project"] / ".git"
    git.mkdir()
    code, out = run_doctor(capsys, "--root", str(git), "--no-journal")
    assert code == 0
    assert any(f"root {git} is inside a .git directory, a protected path" in line for line in lines(out, "warning"))
    assert "info     edit journal: off (--no-journal)" in out
    code, out = run_doctor(capsys, "--root", str(git), "--allow-protected")
    assert f"ok       roots: root {git}" in out


def test_http_settings(setup: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    project = str(setup["project"])
    code, out = run_doctor(capsys, "--root", project, "--transport", "http", "--host", "0.0.0.0", "--port", "0")
    assert code == 1 and "refusing to serve on 0.0.0.0" in "".join(lines(out, "error")), out
    monkeypatch.delenv("DOCTOR_TOKEN", raising=False)
    code, out = run_doctor(capsys, "--root", project, "--transport", "http", "--port", "0", "--auth-token-env",
                           "DOCTOR_TOKEN")  # fmt: skip
    assert code == 1 and "the environment variable DOCTOR_TOKEN is unset or empty" in "".join(lines(out, "error"))
    monkeypatch.setenv("DOCTOR_TOKEN", "short")
    code, out = run_doctor(capsys, "--root", project, "--transport", "http", "--host", "0.0.0.0", "--port", "0",
                           "--auth-token-env", "DOCTOR_TOKEN")  # fmt: skip
    assert code == 0, out
    warnings = "\n".join(lines(out, "warning"))
    assert "the token in DOCTOR_TOKEN has 5 characters" in warnings
    assert "without --allowed-host" in warnings
    assert any(line.startswith("ok       http: http://0.0.0.0:0/mcp is free") for line in out.splitlines()), out
    code, out = run_doctor(capsys, "--root", project)
    assert "http:" not in out  # stdio: nothing to check


def test_a_sandbox_of_none_is_a_warning(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    code, out = run_doctor(capsys, "--root", str(setup["project"]), "--shell-sandbox", "none")
    assert code == 0
    assert any("shell sandbox: none (--shell-sandbox none)" in line for line in lines(out, "warning")), out


def test_the_sandbox_says_what_auto_gives_and_why(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    from coretools.sandbox import ProcessSettings
    from coretools.sandbox.landlock import abi

    chosen = ProcessSettings(sandbox="auto").chosen
    code, out = run_doctor(capsys, "--root", str(setup["project"]))
    line = next(line for line in out.splitlines() if "shell sandbox:" in line)
    assert f"auto gives {chosen.mode} here" in line and chosen.reason in line
    if chosen.mode != "none":
        assert (f"Landlock ABI {abi()}" if abi() else "no Landlock") in line


# -- host configuration files ----------------------------------------------------------------------------


def test_host_files_registering_coretools(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    home, config, project = setup["home"], setup["config"], setup["project"]
    good = executable(home / ".local/bin/coretools-mcp")
    other = {"command": "/usr/bin/some-other-server", "args": ["--root", "/nowhere"]}
    # Gemini CLI: a bare command (comments and a trailing comma, as its settings allow)
    write(home / ".gemini/settings.json", '{\n  // mine\n  "mcpServers": {"ct": {"command": "coretools-mcp", '
          f'"args": ["--root", "{project}"],}}, "other": {json.dumps(other)}}},\n}}\n')  # fmt: skip
    # Claude Desktop on Linux: a command that is not there
    write(config / "Claude/claude_desktop_config.json",
          {"mcpServers": {"ct": {"command": str(home / "gone/coretools-mcp"), "args": ["--root", str(project)]}}})
    # Claude Code, local scope in ~/.claude.json: an option serve does not take
    write(home / ".claude.json", {"projects": {str(project): {"mcpServers": {
        "ct": {"command": str(good), "args": ["--root", str(project), "--shell-sandbox", "jail"]}}}}})
    # Cursor: uvx without --from
    write(home / ".cursor/mcp.json", {"mcpServers": {"ct": {"command": "/usr/bin/uvx",
                                                            "args": ["coretools-mcp", "--root", str(project)]}}})
    # VS Code, the project's file: ${workspaceFolder} filled in from where the file is
    write(project / ".vscode/mcp.json", {"servers": {"ct": {"type": "stdio", "command": str(good),
                                                            "args": ["--root", "${workspaceFolder}"]}}})
    # VS Code, user settings: a root that does not exist
    write(config / "Code/User/settings.json", {"mcp": {"servers": {"ct": {
        "command": str(good), "args": ["serve", "--root", str(project / "missing")]}}}})
    # Zed, the older nested command form, and no root
    write(config / "zed/settings.json", {"context_servers": {"ct": {"command": {"path": str(good), "args": []}}}})
    # Claude Code, the project's .mcp.json: not JSON
    write(project / ".mcp.json", "{not json")
    code, out = run_doctor(capsys, "--root", str(project))
    assert code == 1
    warnings, errors = "\n".join(lines(out, "warning")), "\n".join(lines(out, "error"))
    assert "Gemini CLI ~/.gemini/settings.json mcpServers.ct: command coretools-mcp is not an absolute path" in (
        warnings + errors)
    assert "some-other-server" not in out
    assert (f"Claude Desktop {config}/Claude/claude_desktop_config.json mcpServers.ct: command "
            f"{home}/gone/coretools-mcp does not exist") in errors
    assert ("Claude Code ~/.claude.json projects[" + json.dumps(str(project)) + "].mcpServers.ct: its arguments do "
            "not parse: argument --shell-sandbox: invalid choice: 'jail'") in errors
    assert "Cursor ~/.cursor/mcp.json mcpServers.ct: uvx without --from" in errors
    assert f"ok       VS Code {project}/.vscode/mcp.json servers.ct: runs {good} --root ${{workspaceFolder}}" in out
    assert f"VS Code {config}/Code/User/settings.json mcp.servers.ct: root does not exist: {project / 'missing'}" in errors
    assert f"Zed {config}/zed/settings.json context_servers.ct: no --root" in warnings
    assert f"Claude Code {project}/.mcp.json: is not valid JSON" in errors
    for line in lines(out, "error") + lines(out, "warning"):
        assert " Fix: " in line or "refusing" in line or "does not exist" in line, line


def test_host_entries_run_through_uv_and_python(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    home, project = setup["home"], setup["project"]
    uvx = executable(home / "bin/uvx")
    python = executable(home / "bin/python3")
    write(home / ".cursor/mcp.json", {"mcpServers": {
        "a": {"command": str(uvx), "args": ["--from", "/clone/coretools", "coretools-mcp", "--root", str(project)]},
        "b": {"command": str(python), "args": ["-m", "coretools", "tools", "--root", str(project)]},
        "c": {"command": str(uvx), "args": ["--from", "/clone", "coretools-mcp", "--root", "relative/dir"]},
        "d": {"command": str(executable(home / "bin/uv")), "args": ["run", "coretools-mcp", "--root", str(project)]},
        "e": {"command": "/gone", "args": ["-m", "coretools"], "disabled": True},
    }})
    write(setup["config"] / "Code/User/mcp.json", {"servers": {"ct": {"command": str(python),
          "args": ["-m", "coretools", "--root", "${workspaceFolder}"]}}})  # fmt: skip
    code, out = run_doctor(capsys, "--root", str(project))
    assert "mcpServers.d: uv run without --directory" in out
    assert "mcpServers.e" not in out  # a disabled entry is not started
    assert "Code/User/mcp.json servers.ct: arguments ${workspaceFolder} name variables the host fills in" in out
    assert "servers.ct: no --root" not in out
    assert f"ok       Cursor ~/.cursor/mcp.json mcpServers.a: runs {uvx} --from /clone/coretools" in out
    assert "mcpServers.b: its arguments do not parse: they run `coretools-mcp tools`, not the server" in out
    assert "mcpServers.c: root relative/dir is relative" in out
    assert code == 1


def test_no_host_file_is_an_info_line(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    code, out = run_doctor(capsys, "--root", str(setup["project"]))
    assert code == 0
    assert "info     hosts: no host configuration file found that registers coretools" in out


def test_doctor_creates_nothing(setup: dict[str, Path], capsys: pytest.CaptureFixture,
                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    state = setup["home"] / "fresh-state"
    monkeypatch.setenv("CORETOOLS_STATE_DIR", str(state))
    code, out = run_doctor(capsys, "--root", str(setup["project"]))
    assert code == 0 and "will be created" in out
    assert not state.exists()
    assert stat.S_ISDIR(os.stat(setup["project"]).st_mode) and not any(setup["project"].iterdir())


def test_doctor_is_a_listed_subcommand(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "doctor" in capsys.readouterr().out


def test_a_project_host_file_cannot_reach_the_terminal(setup: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    """A repository's .mcp.json is the repository's to write: its names and arguments are shown with control
    characters escaped (no cursor moves, no colours, no second line), and nothing it names is run."""
    marker = setup["project"] / "ran"
    write(setup["project"] / ".mcp.json", {"mcpServers": {"x\x1b[2J\nerror   fake": {
        "command": "/usr/bin/coretools-mcp", "args": ["--discovery-command", f"touch {marker}", "--root", "\x1b[31m"]}}})
    code, out = run_doctor(capsys, "--root", str(setup["project"]))
    assert "\x1b" not in out and "\\x1b[2J\\nerror   fake" in out
    assert not any(line.startswith("error   fake") for line in out.splitlines())
    assert not marker.exists()


def test_no_root_in_a_directory_that_cannot_serve_is_a_warning(setup: dict[str, Path], capsys: pytest.CaptureFixture,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Run from the home directory to check the host files: a server without --root still serves its
    clients' roots, so this is worth a warning, not a failed check."""
    monkeypatch.chdir(setup["home"])
    code, out = run_doctor(capsys)
    assert code == 0
    assert any("roots: no --root, and the current directory cannot serve as one (refusing to serve the home "
               "directory itself" in line and "Fix: pass --root /path/to/project" in line
               for line in lines(out, "warning")), out  # fmt: skip
    monkeypatch.chdir(setup["project"])
    code, out = run_doctor(capsys)
    assert f"info     roots: no --root: the client's roots, else the current directory ({setup['project']})" in out
