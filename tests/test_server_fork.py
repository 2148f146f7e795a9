"""The fork server the suites start their servers from (`server_fork`): a forked server must mean what the
interpreter started directly means, to the test and to the client alike."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import server_fork
from http_harness import REPO, pid_alive, server_env

REPORT = "import json, os, sys; print(json.dumps([sys.argv, sys.path[0], os.getcwd(), os.environ.get('MARK'), os.getppid(), sys.stdin.read()]))"


def run(argv: list[str], env: dict[str, str], **options: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=str(REPO), capture_output=True, text=True, timeout=60, **options)  # type: ignore[call-overload]


def test_a_forked_command_sees_what_the_interpreter_gives_it() -> None:
    """Arguments, `sys.path[0]`, working directory, environment, stdin and stdout, exit code: as `python -c`,
    but forked (its parent is the fork server, not the launcher)."""
    env = server_env({"MARK": "forked"})
    code = REPORT + "; sys.exit(3)"
    direct = run([sys.executable, "-c", code, "a b", "c"], env, input="in\n")
    forked = run(server_fork.command(["-c", code, "a b", "c"], env), env, input="in\n")
    assert forked.returncode == direct.returncode == 3, (forked, direct)
    *same, parent, stdin = json.loads(forked.stdout)
    assert [*same, stdin] == [*json.loads(direct.stdout)[:4], "in\n"] and same[0] == ["-c", "a b", "c"], forked
    assert parent != os.getpid(), "the command was not forked"


def test_a_forked_script_sees_what_the_interpreter_gives_it(tmp_path: Path) -> None:
    """`python path/to/script.py args`: `sys.argv[0]` as given, `__file__` absolute, `sys.path[0]` the
    directory of the file its link points to, stdin, stdout, exit code: as the interpreter, but forked."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "report.py").write_text(REPORT + "; print(__file__, __name__); sys.exit(4)\n", encoding="utf-8")
    (tmp_path / "report.py").symlink_to(tmp_path / "real" / "report.py")
    script = os.path.relpath(tmp_path / "report.py", REPO)
    env = server_env({"MARK": "script"})
    direct = run([sys.executable, script, "a b", "c"], env, input="in\n")
    forked = run(server_fork.command([script, "a b", "c"], env), env, input="in\n")
    assert forked.returncode == direct.returncode == 4, (forked, direct)
    report, names = forked.stdout.split("\n", 1)
    *same, parent, stdin = json.loads(report)
    assert [*same, stdin, names] == [*json.loads(direct.stdout.split("\n", 1)[0])[:4], "in\n", direct.stdout.split("\n", 1)[1]]
    assert same[:2] == [[script, "a b", "c"], str(tmp_path / "real")], forked
    assert names == f"{REPO / script} __main__\n", forked
    assert parent != os.getpid(), "the script was not forked"


@pytest.mark.parametrize("form", ["code", "script"])
def test_signals_reach_the_forked_command_and_its_end_is_the_launchers(form: str, tmp_path: Path) -> None:
    """SIGTERM to the launcher ends the command, and the launcher dies of it as the command did; SIGKILL,
    which no launcher can pass on, ends the command too (the fork server sees its launcher go)."""
    env = server_env()
    code = "import os, time; print(os.getpid(), os.getppid(), flush=True); time.sleep(60)"
    (tmp_path / "sleeper.py").write_text(code, encoding="utf-8")
    argv = ["-c", code] if form == "code" else [str(tmp_path / "sleeper.py")]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        launcher = subprocess.Popen(server_fork.command(argv, env), env=env, stdout=subprocess.PIPE, text=True)
        pid, parent = map(int, launcher.stdout.readline().split())
        assert launcher.pid not in (pid, parent) and pid_alive(pid), "the command was not forked"
        launcher.send_signal(sig)
        assert launcher.wait(30) == -sig
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_alive(pid), f"the forked command outlived its launcher's {sig!r}"


def test_another_interpreter_setting_runs_the_interpreter_itself() -> None:
    """A `PYTHON*` variable the fork server was not started with changes how an interpreter starts, so the
    launcher runs the interpreter itself (its PID, its parent)."""
    env = server_env()
    argv = server_fork.command(["-c", "import os, sys; print(os.getppid(), sys.flags.dont_write_bytecode)"], env)
    done = run(argv, {**env, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0 and done.stdout.split() == [str(os.getpid()), "1"], done
