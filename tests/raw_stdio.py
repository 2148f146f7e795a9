"""A real stdio server spoken to in plain newline-delimited JSON-RPC, and the markers that find what its
commands started, shared by the attack suites on the sandbox's processes (tests/attacks/test_kernel_lifetime.py,
tests/attacks/test_redteam_sandbox.py).

The test holds the server's PID and its pipes, so it chooses how the server ends (stdin closed, SIGTERM,
SIGKILL) and can keep several requests in flight. A command gives each process it starts a marker argument
(`sleep 4242.<digits>`), and `holders` finds the marker in the host's `/proc`, however the process renamed
its session or dropped the run's environment marker.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from http_harness import REPO, server_env


class StdioServer:
    """`coretools-mcp serve --structured-content` over its own pipes. The handshake is sent at once and
    awaited by `ready`, so that several servers start together."""

    def __init__(self, root: Path, *flags: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> None:
        self.flags = flags
        self.log = tempfile.TemporaryFile()
        argv = [sys.executable, "-m", "coretools", "serve", "--root", str(root), "--structured-content", *flags]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env or server_env(), cwd=str(cwd))  # fmt: skip
        self.messages: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0
        self.answers: dict[int, dict] = {}
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "attack", "version": "0"}}
        self._init = self.request("initialize", init)

    def ready(self) -> StdioServer:
        """Wait for the handshake's answer; the test fails, naming the flags, if the server did not start."""
        try:
            self.answer(self._init)
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except (RuntimeError, queue.Empty, BrokenPipeError) as exc:
            pytest.fail(f"the server did not start with {' '.join(self.flags) or 'no option'}: {exc}")
        return self

    def _read(self) -> None:
        """Queue each message until the end of the output (None), then close the pipe: here, since a
        process the server left holding it would block a close from another thread."""
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                try:
                    self.messages.put(json.loads(line))
                except ValueError:
                    continue
        self.messages.put(None)

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> int:
        """Send a request; its answer is collected by `answer`, so several can be in flight."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def answer(self, request_id: int, timeout: float = 60.0) -> dict:
        """The result of a request; queue.Empty if none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while request_id not in self.answers:
            message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            if message is None:
                raise RuntimeError(f"the server closed its output; its stderr:\n{self.stderr()}")
            if "id" in message:
                self.answers[message["id"]] = message
        message = self.answers.pop(request_id)
        if "error" in message:
            raise RuntimeError(f"request {request_id}: {message['error']}")
        return message["result"]

    def start_call(self, name: str, arguments: dict) -> int:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def start_shell(self, command: str, **extra: object) -> int:
        return self.start_call("run_shell_command", {"command": command, **extra})

    def shell_result(self, request_id: int) -> dict:
        result = self.answer(request_id)
        assert "structuredContent" in result, result
        return result["structuredContent"]

    def shell(self, command: str, **extra: object) -> dict:
        return self.shell_result(self.start_shell(command, **extra))

    def end(self, how: str = "sigkill") -> None:
        """End the server as a client or an operator would: close stdin, SIGTERM, or SIGKILL."""
        if self.proc.poll() is None:
            if how == "close":
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            elif how == "sigterm":
                self.proc.send_signal(signal.SIGTERM)
            else:
                self.proc.kill()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.log.close()


def marker(prefix: str) -> str:
    """A unique duration for `sleep` (`<prefix>.<nine digits>`), found again in the command lines."""
    return f"{prefix}.{secrets.randbelow(10**9):09d}"


def holders_of(marks: list[str]) -> dict[str, list[int]]:
    """For each mark, the processes with a live thread whose command line holds it, in one scan of `/proc`.
    Each thread's own command line is read: a process whose main thread has exited shows an empty command
    line and a zombie's state, while its other threads run."""
    needles = {mark: mark.encode() for mark in marks}
    found: dict[str, list[int]] = {mark: [] for mark in marks}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            tasks = os.listdir(f"/proc/{entry.name}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{entry.name}/task/{task}/cmdline", "rb") as fh:
                    cmdline = fh.read()
            except OSError:
                continue
            if cmdline:  # every live thread reads the process's one command line
                for mark, needle in needles.items():
                    if needle in cmdline:
                        found[mark].append(int(entry.name))
                break
    return found


def holders(mark: str) -> list[int]:
    return holders_of([mark])[mark]


def kill_holders(marks: list[str]) -> None:
    for pid in {pid for pids in holders_of(marks).values() for pid in pids}:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
