"""Sessions do not share the sandbox, and the server's own secrets never reach a command.

Two clients of one HTTP server are two MCP sessions (stateful: two `Mcp-Session-Id`s; stateless: every
request is a session of its own). Session A leaves what a model leaves behind: a file in its temporary
directory (`$TMPDIR`, or `/tmp` inside bubblewrap), a background command whose log holds a marker, and a
command whose output was too long and was saved to a file. Session B then tries to read them: with
`cat`/`ls` through `run_shell_command`, at the paths A was told and at its own `$TMPDIR`, and with
`read_file` on the log and saved-output paths. Markers are unique per run and appear only in A's output,
never in B's commands, so finding one in B's answer is a leak. Without a sandbox (`--shell-sandbox none`)
a command has the server's rights over the whole file system, so there only the file tools and B's own
`$TMPDIR` are checked.

Secrets: the variable named by `--auth-token-env` is the server's credential whatever its name (here
`MCP_BEARER` and `CORETOOLS_AUTH`, neither of which looks secret): a command sees neither the variable
nor its value, and, in either sandbox, cannot read it from another process's environment (the server's)
either.

Each server is a real subprocess on 127.0.0.1, driven with plain JSON-RPC over HTTP so that session A stays
open (its background command running) while B tries.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from http_harness import HttpServer

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="the OS sandboxes are Linux only"),
]

MODES = {"default": (), "landlock": ("--shell-sandbox", "landlock"), "none": ("--shell-sandbox", "none")}
# The variable each stateful server takes its bearer token from: names that do not look secret.
TOKEN_VARIABLE = {"default": "MCP_BEARER", "landlock": "MCP_BEARER", "none": "CORETOOLS_AUTH"}
SANDBOXED = ("default", "landlock")
# Host directories every process may write: if a sandbox let A write one, B must not read it there.
SHARED_DIRS = ("/dev/shm", "/var/tmp")
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "attack", "version": "0"}}


class Session:
    """One MCP session over plain HTTP (for a stateless server: one session per request)."""

    def __init__(self, http: httpx2.Client, url: str, token: str | None = None) -> None:
        self.http, self.url = http, url
        self.headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
        self.next_id = 0
        response = self._post({"jsonrpc": "2.0", "id": self._id(), "method": "initialize", "params": INIT})
        session = response.headers.get("mcp-session-id")
        if session:
            self.headers["Mcp-Session-Id"] = session
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _post(self, body: dict) -> httpx2.Response:
        response = self.http.post(self.url, headers=self.headers, content=json.dumps(body))
        assert response.status_code in (200, 202), (response.status_code, response.text)
        return response

    def call(self, name: str, arguments: dict) -> dict:
        """The CallToolResult of one tool call (from a JSON or an event-stream answer)."""
        rid = self._id()
        response = self._post({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                               "params": {"name": name, "arguments": arguments}})  # fmt: skip
        if response.headers.get("content-type", "").startswith("application/json"):
            messages = [response.json()]
        else:
            messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        for message in messages:
            if message.get("id") == rid:
                assert "result" in message, message
                return message["result"]
        raise AssertionError(f"no answer to request {rid}: {response.text[:2000]}")

    def shell(self, command: str, **extra: object) -> dict:
        """The structured result of run_shell_command (or, for a refused call, its error text)."""
        result = self.call("run_shell_command", {"command": command, **extra})
        text = "\n".join(block.get("text", "") for block in result["content"])
        return result.get("structuredContent") or {"refused": text}

    def probe(self, command: str) -> dict:
        """An attempt that must have run (its last line says so), whatever it could read or list."""
        s = self.shell(f"{command}; echo probe-ran")
        assert s.get("stdout", "").rstrip().endswith("probe-ran"), s
        return s

    def read(self, path: str) -> str:
        result = self.call("read_file", {"absolute_path": path})
        return "\n".join(block.get("text", "") for block in result["content"])


@dataclass
class Left:
    """What session A left behind, and the markers that only its data holds."""

    name: str  # the temporary file's name
    temp_dir: str  # A's $TMPDIR (or /tmp) as A saw it
    temp_marker: str
    log_path: str | None  # None: background commands refused (a stateless server may)
    log_marker: str
    saved_path: str | None  # None: no saved output (a stateless server may keep none)
    saved_marker: str


def leave_traces(a: Session, *, stateless: bool = False) -> Left:
    tag = secrets.token_hex(6)
    left = Left(f"a-{tag}", "", f"A-TEMP-{tag}", "", f"A-LOG-{tag}", "", f"A-SAVED-{tag}")
    shared = " ".join(f"{d}/{left.name}" for d in SHARED_DIRS)
    s = a.shell(f'for f in {shared}; do echo {left.temp_marker} > "$f"; done 2>/dev/null; '
                f'd="${{TMPDIR:-/tmp}}"; echo {left.temp_marker} > "$d/{left.name}" && echo "$d"')  # fmt: skip
    assert s["exit_code"] == 0, s
    left.temp_dir = s["stdout"].strip()
    bg = a.shell(f'cd "${{TMPDIR:-/tmp}}" && echo {left.log_marker} && exec sleep 60', is_background=True,
                 delay_ms=500)  # fmt: skip
    if stateless and ("refused" in bg or "error" in bg):
        left.log_path = None
    else:
        assert bg.get("background") is True, bg
        left.log_path = bg["log_path"]
    long = a.shell(f"for i in $(seq 1 3000); do echo {left.saved_marker}-$i; done")
    if stateless and "saved_output" not in long:
        left.saved_path = None
    else:
        assert "saved_output" in long, long
        left.saved_path = long["saved_output"]["stdout"]
    return left


def start(*flags: str, env: dict[str, str] | None = None, root: Path) -> HttpServer:
    try:
        return HttpServer.start([root], "--structured-content", *flags, env=env, forked=True)
    except RuntimeError as exc:
        pytest.fail(f"the server did not start with {' '.join(flags)}: {exc}")


@dataclass
class Stage:
    mode: str
    server: HttpServer
    http: httpx2.Client
    token: tuple[str, str] | None  # the --auth-token-env variable and its value
    a: Session
    left: Left

    def session(self) -> Session:
        return Session(self.http, self.server.url, token=self.token[1] if self.token else None)


@pytest.fixture(scope="module", params=list(MODES))
def stateful(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    """One server (with a bearer token), session A open with its traces left; each test opens a session B
    of its own."""
    root = tmp_path_factory.mktemp(f"sessions-{request.param}") / "root"
    root.mkdir()
    token = (TOKEN_VARIABLE[request.param], "tok" + secrets.token_hex(24))
    server = start("--auth-token-env", token[0], *MODES[request.param], env=dict([token]), root=root)
    try:
        with httpx2.Client(timeout=60, trust_env=False) as http:
            a = Session(http, server.url, token=token[1])
            yield Stage(request.param, server, http, token, a, leave_traces(a))
    finally:
        server.stop()
        for d in SHARED_DIRS:
            for left in Path(d).glob("a-*"):
                if left.read_bytes().startswith(b"A-TEMP-"):
                    left.unlink()


# Without a sandbox a command may read any file the server can: these run in the sandboxed modes only.
sandboxed_only = pytest.mark.parametrize("stateful", SANDBOXED, indirect=True)


# -- stateful sessions ------------------------------------------------------------------------------------


def test_a_reads_its_own_traces(stateful: Stage) -> None:
    """Control: within session A, its temporary file, its log and its saved output are all readable (so
    the paths B tries are real)."""
    a, left = stateful.a, stateful.left
    s = a.shell(f'cat "${{TMPDIR:-/tmp}}/{left.name}"')
    assert s["stdout"].strip() == left.temp_marker, s
    assert left.log_marker in a.read(left.log_path)
    assert left.saved_marker in a.read(left.saved_path)


def test_b_has_its_own_temporary_directory(stateful: Stage) -> None:
    """B's `$TMPDIR` (or `/tmp`) does not hold A's file: `ls` does not list it, `cat` cannot read it."""
    b, left = stateful.session(), stateful.left
    listing = b.probe('ls -a "${TMPDIR:-/tmp}"')
    assert left.name not in listing["stdout"], listing
    read = b.probe(f'cat "${{TMPDIR:-/tmp}}/{left.name}"')
    assert left.temp_marker not in read["stdout"], read


@sandboxed_only
def test_b_cannot_read_a_temporary_file_at_its_path(stateful: Stage) -> None:
    """At the absolute path A's command used, B finds nothing of A's."""
    b, left = stateful.session(), stateful.left
    listing = b.probe(f"ls -a {left.temp_dir}")
    assert left.name not in listing["stdout"], listing
    read = b.probe(f"cat {left.temp_dir}/{left.name}")
    assert left.temp_marker not in read["stdout"], read


@sandboxed_only
def test_b_cannot_read_a_background_log_with_a_command(stateful: Stage) -> None:
    """A's background log (its path is in A's answer) can be neither read nor listed by B's commands."""
    b, left = stateful.session(), stateful.left
    read = b.probe(f"cat {left.log_path}")
    assert left.log_marker not in read["stdout"], read
    listing = b.probe(f"ls -a {os.path.dirname(left.log_path)}")
    assert os.path.basename(left.log_path) not in listing["stdout"], listing


@sandboxed_only
def test_b_cannot_read_a_saved_output_with_a_command(stateful: Stage) -> None:
    b, left = stateful.session(), stateful.left
    read = b.probe(f"cat {left.saved_path}")
    assert left.saved_marker not in read["stdout"], read
    listing = b.probe(f"ls -a {os.path.dirname(left.saved_path)}")
    assert os.path.basename(left.saved_path) not in listing["stdout"], listing


@sandboxed_only
def test_b_cannot_read_what_a_left_in_a_shared_directory(stateful: Stage) -> None:
    """A also tried `/dev/shm` and `/var/tmp`, which every host process may write. `/var/tmp` is closed to
    commands. `/dev/shm` is private under bubblewrap; under Landlock, which cannot give each session its own,
    POSIX shared memory stays usable but the directory cannot be listed, so B cannot find A's names (a file
    there is reachable by its exact name, as the README says)."""
    b, left = stateful.session(), stateful.left
    read = b.probe(f"cat /var/tmp/{left.name} 2>/dev/null; ls -a /dev/shm 2>/dev/null")
    assert left.temp_marker not in read["stdout"] and left.name not in read["stdout"], read
    if stateful.mode != "landlock":
        read = b.probe(f"cat /dev/shm/{left.name} 2>/dev/null")
        assert left.temp_marker not in read["stdout"], read


@sandboxed_only
def test_b_cannot_reach_a_files_through_a_process(stateful: Stage) -> None:
    """A's background command runs in A's temporary directory: B cannot go through its `/proc/PID/cwd` or
    `/proc/PID/root` (nor see the process at all, in a PID namespace)."""
    b, left = stateful.session(), stateful.left
    paths = f"$p/cwd/{left.name} $p/root{left.temp_dir}/{left.name}"
    read = b.probe(f"for p in /proc/[0-9]*; do cat {paths}; done 2>/dev/null")
    assert left.temp_marker not in read["stdout"], read


def test_b_cannot_read_a_background_log_with_read_file(stateful: Stage) -> None:
    """The file tools give B no way into A's scratch area, with or without a sandbox."""
    b, left = stateful.session(), stateful.left
    assert left.log_marker not in b.read(left.log_path)


def test_b_cannot_read_a_saved_output_with_read_file(stateful: Stage) -> None:
    b, left = stateful.session(), stateful.left
    assert left.saved_marker not in b.read(left.saved_path)


# -- stateless requests ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stateless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    root = tmp_path_factory.mktemp("sessions-stateless") / "root"
    root.mkdir()
    server = start("--stateless", root=root)
    try:
        with httpx2.Client(timeout=60, trust_env=False) as http:
            a = Session(http, server.url)
            yield Stage("default", server, http, None, a, leave_traces(a, stateless=True))
    finally:
        server.stop()


def test_stateless_requests_do_not_share_a_temporary_directory(stateless: Stage) -> None:
    """Every stateless request is a session: a later request neither lists nor reads an earlier one's
    temporary file, at its own `$TMPDIR` or at the earlier one's path."""
    b, left = stateless.session(), stateless.left
    listing = b.probe(f'ls -a "${{TMPDIR:-/tmp}}" {left.temp_dir}')
    assert left.name not in listing["stdout"], listing
    read = b.probe(f'cat "${{TMPDIR:-/tmp}}/{left.name}" {left.temp_dir}/{left.name}')
    assert left.temp_marker not in read["stdout"], read


def test_stateless_requests_do_not_share_logs_or_saved_output(stateless: Stage) -> None:
    """Nor its saved output or its background log (where a stateless server keeps them at all)."""
    b, left = stateless.session(), stateless.left
    kept = [(left.log_path, left.log_marker), (left.saved_path, left.saved_marker)]
    for path, mark in [(path, mark) for path, mark in kept if path]:
        read = b.probe(f"cat {path}")
        assert mark not in read["stdout"], read
        assert mark not in b.read(path)


# -- the server's secrets --------------------------------------------------------------------------------

def test_token_variable_is_not_passed(stateful: Stage) -> None:
    """`echo "[$NAME]"` prints `[]`: the variable named by --auth-token-env is not in the command's
    environment, whatever its name."""
    assert stateful.token
    name = stateful.token[0]
    s = stateful.session().shell(f'echo "[${name}]"')
    assert s["stdout"].strip() == "[]", s


def test_token_value_is_in_no_variable(stateful: Stage) -> None:
    """Nor is its value, under any other name (the command's whole environment, as the kernel has it)."""
    assert stateful.token
    s = stateful.session().shell("env; tr '\\0' '\\n' < /proc/self/environ")
    assert s["exit_code"] == 0 and "PATH=" in s["stdout"], s
    assert stateful.token[1] not in s["stdout"], s


@sandboxed_only
def test_token_cannot_be_read_from_the_servers_environment(stateful: Stage) -> None:
    """In either sandbox, no process's `/proc/PID/environ` the command can open holds the token (the
    server's own included; without a sandbox a command may read it, with the server's rights)."""
    assert stateful.token
    s = stateful.session().shell(f"grep -la -- {stateful.token[1]} /proc/[0-9]*/environ 2>/dev/null; echo end")
    assert s["stdout"].split() == ["end"], s
