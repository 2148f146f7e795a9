"""The CLI subcommands, mounted on a throwaway parser exactly as the main CLI will mount them."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_support import RUNNER, broken, toy, write_config
from fake_gemini import Chunk, FakeGemini, Request, check

from coretools.client.cli import register

pytestmark = pytest.mark.timeout(120)


# Runs RUNNER in a process of its own for each order it reads (one JSON line: argv, environment, working
# directory, and the files that become its stdin, stdout and stderr), forked from this one, which has imported
# the client already (~0.7 s of CPU that each command would otherwise spend again); answers each with the exit
# code. Orders come on fd 0 through os.read, so sys.stdin's buffer stays empty for the commands.
ZYGOTE = """
import json, os, sys, threading, traceback
from coretools.client.cli import register

RUNNER = sys.argv[1]
assert threading.active_count() == 1, "forking a process with threads"
while True:
    order = b""
    while not order.endswith(b"\\n"):
        chunk = os.read(0, 1 << 16)
        if not chunk:
            sys.exit(0)
        order += chunk
    order = json.loads(order)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd, (path, flags) in enumerate(zip(order["files"], (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY))):
                os.dup2(os.open(path, flags), fd)
            os.chdir(order["cwd"])
            os.environ.clear()
            os.environ.update(order["env"])
            sys.argv = ["-c", *order["argv"]]
            try:
                exec(compile(RUNNER, "<string>", "exec"), {"__name__": "__main__"})
                code = 0
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    os.write(1, b"%d\\n" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
_zygote: list[subprocess.Popen] = []


@pytest.fixture(scope="module", autouse=True)
def _zygote_ends_with_the_module() -> Iterator[None]:
    """The zygote lives as long as this module's tests, no longer: other tests look for the processes the
    test process has left behind. (A module-scoped fixture also keeps the module on one xdist worker, so one
    zygote serves all its commands.)"""
    yield
    for zygote in _zygote:
        zygote.stdin.close()
        zygote.wait(timeout=30)
        zygote.stdout.close()
    _zygote.clear()


def _forker() -> subprocess.Popen:
    """The zygote, started on first use; it ends when its stdin closes."""
    if not _zygote or _zygote[0].poll() is not None:
        errors = tempfile.TemporaryFile()
        _zygote[:] = [subprocess.Popen([sys.executable, "-c", ZYGOTE, RUNNER], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=errors, start_new_session=True)]
        errors.close()
    return _zygote[0]


def cli(*argv: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """RUNNER ARGV in a process of its own (forked from one that has imported the client), its output."""
    zygote = _forker()
    with tempfile.TemporaryDirectory() as scratch:
        files = [os.path.join(scratch, name) for name in ("stdin", "stdout", "stderr")]
        Path(files[0]).write_text(stdin)
        for path in files[1:]:
            Path(path).touch()
        order = {"argv": argv, "env": {**os.environ, **(env or {})}, "cwd": os.getcwd(), "files": files}
        zygote.stdin.write(json.dumps(order).encode() + b"\n")
        zygote.stdin.flush()
        if not select.select([zygote.stdout], [], [], 90)[0]:
            os.killpg(zygote.pid, signal.SIGKILL)
            zygote.wait()
            raise subprocess.TimeoutExpired([*argv], 90)
        reply = zygote.stdout.readline()
        assert reply, "the zygote died"
        out, err = (Path(path).read_text() for path in files[1:])
    return subprocess.CompletedProcess([*argv], int(reply), out, err)


def test_register_adds_the_subcommands() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command", required=True))
    tools = parser.parse_args(["client", "tools", "--config", "x.json", "--format", "openai"])
    call = parser.parse_args(["client", "call", "a__echo", '{"text": "x"}'])
    chat = parser.parse_args(["chat", "--model", "gemini-2.5-flash", "--tool-style", "json"])
    assert (tools.format, tools.config, tools.prefix) == ("openai", "x.json", "auto")
    assert (call.name, call.arguments, call.config) == ("a__echo", '{"text": "x"}', "mcp.json")
    assert (chat.model, chat.tool_style) == ("gemini-2.5-flash", "json")
    assert all(callable(ns.func) for ns in (tools, call, chat))
    with pytest.raises(SystemExit):
        parser.parse_args(["client"])


def test_client_tools_prints_declarations_and_reports_failures(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": toy("a", includeTools=["echo", "add"]), "b": toy("b", includeTools=["echo"]), "dead": broken()})
    done = cli("client", "tools", "--config", str(config))
    assert done.returncode == 1, done.stderr
    [tool] = json.loads(done.stdout)
    assert [d["name"] for d in tool["functionDeclarations"]] == ["a__echo", "a__add", "b__echo"]
    assert tool["functionDeclarations"][1]["parametersJsonSchema"]["properties"]["a"] == {"type": "integer"}
    assert "dead: the server exited with code 3" in done.stderr and "TOY_TOKEN_THAT_IS_NEVER_SET" in done.stderr


def test_client_tools_openai_and_openapi_formats(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": toy("a", includeTools=["shape"])}, key="servers")
    done = cli("client", "tools", "--config", str(config), "--format", "openai")
    assert done.returncode == 0, done.stderr
    [tool] = json.loads(done.stdout)
    assert tool["type"] == "function" and tool["function"]["name"] == "shape"
    strict = cli("client", "tools", "--config", str(config), "--profile", "openapi", "--prefix", "always")
    [declaration] = json.loads(strict.stdout)[0]["functionDeclarations"]
    assert declaration["name"] == "a__shape" and declaration["parameters"]["properties"]["kind"]["type"] == "string"


def test_client_call(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": toy("a"), "b": toy("b")})
    done = cli("client", "call", "a__add", '{"a": 1, "b": 2}', "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"functionResponse": {"name": "a__add", "response": {"output": {"sum": 3}}}}
    failed = cli("client", "call", "b__fail", '{"why": "because"}', "--config", str(config), "--format", "text")
    assert failed.returncode == 1 and failed.stdout.strip() == "Error: it failed: because"
    unknown = cli("client", "call", "echo", "{}", "--config", str(config))
    assert unknown.returncode == 2 and "no tool named 'echo'" in unknown.stderr and "a__echo" in unknown.stderr
    bad_json = cli("client", "call", "a__echo", "{oops", "--config", str(config))
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": {"command": "x", "args": ["ok", 5]}})
    done = cli("client", "tools", "--config", str(config))
    assert done.returncode == 2
    assert "mcpServers.a.args[1]: expected a string" in done.stderr and done.stdout == ""


def chat_env(fake: FakeGemini) -> dict[str, str]:
    return {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url}


def test_chat_session_with_tools_and_history(tmp_path: Path, fake_gemini: FakeGemini) -> None:
    config = write_config(tmp_path, {"a": toy("a"), "b": toy("b")})

    def ask(request: Request) -> list[Chunk]:
        check(request.headers.get("x-goog-api-key") == "test-key", "the key comes from GEMINI_API_KEY")
        check(request.stream, "chat streams by default")
        return [[{"functionCall": {"name": "a__echo", "args": {"text": "hello"}}, "thoughtSignature": fake_gemini.new_signature()}]]

    def answer(request: Request) -> list[Chunk]:
        check(request.last_responses()[0]["response"] == {"output": "a: hello"}, f"{request.last_responses()}")
        return [[{"text": "The server "}], [{"text": "said hello."}]]

    def second(request: Request) -> list[Chunk]:
        check(len(request.contents) == 5, f"the chat keeps its history: {len(request.contents)} contents")
        check(request.contents[-1]["parts"] == [{"text": "and again?"}], "the new question is last")
        return [[{"text": "Still hello."}]]

    fake_gemini.script(ask, answer, second)
    done = cli("chat", "--config", str(config), "--model", "gemini-2.5-flash", "--yes", stdin="say hi\n\nand again?\n/exit\n", env=chat_env(fake_gemini))
    assert done.returncode == 0, done.stderr
    assert fake_gemini.errors == [] and not fake_gemini.steps
    assert done.stdout == "The server said hello.\nStill hello.\n"
    assert '> a__echo {"text": "hello"}' in done.stderr and "< a__echo: ok" in done.stderr


def test_chat_shows_a_compact_view_of_each_result(tmp_path: Path, fake_gemini: FakeGemini) -> None:
    """Each tool result's first lines (an edit's note and diff, the start of an output), not just "ok"; the
    rest counted, and all of it with --full-results. The model gets the whole result either way."""
    config = write_config(tmp_path, {"a": toy("a")})
    text = "\n".join(f"line {i}" for i in range(1, 31))
    call = lambda request: [[{"functionCall": {"name": "echo", "args": {"text": text}}, "thoughtSignature": fake_gemini.new_signature()}]]  # noqa: E731
    whole = lambda request: (check(request.last_responses()[0]["response"] == {"output": f"a: {text}"}, "whole"), [[{"text": "ok"}]])[1]  # noqa: E731
    for extra in ([], ["--full-results"]):
        fake_gemini.script(call, whole)
        done = cli("chat", "--config", str(config), "--model", "gemini-2.5-flash", "--yes", *extra, stdin="go\n",
                   env=chat_env(fake_gemini))  # fmt: skip
        assert done.returncode == 0 and fake_gemini.errors == [], done.stderr
        assert "< echo: ok\n  a: line 1\n  line 2\n" in done.stderr, done.stderr
        if extra:
            assert "  line 30\n" in done.stderr and "more lines" not in done.stderr
        else:
            assert "  line 12\n  … 18 more lines (--full-results shows them)\n" in done.stderr
            assert "  line 13\n" not in done.stderr


def test_result_view_of_errors_values_and_long_lines() -> None:
    from coretools.client.cli import RESULT_WIDTH, result_view

    assert result_view({"name": "t", "response": {"error": "it failed: because"}}) == "< t: error\n  it failed: because"
    assert result_view({"name": "t", "response": {"output": {"sum": 3}}}) == '< t: ok\n  {\n    "sum": 3\n  }'
    long = result_view({"name": "t", "response": {"output": "x" * 500}})
    assert long == f"< t: ok\n  {'x' * RESULT_WIDTH} …"
    assert result_view({"name": "t", "response": {"output": "x" * 500}}, full=True) == f"< t: ok\n  {'x' * 500}"
    media = {"name": "t", "response": {"output": "see"}, "parts": [{"inlineData": {"mimeType": "image/png"}}]}
    assert result_view(media) == "< t: ok\n  see\n  [1 attachment(s)]"


@pytest.mark.parametrize(("reply", "expected"), [("y", {"output": "a: hi"}), ("n", {"error": "the user declined to run this tool"})])
def test_chat_asks_before_running_untrusted_tools(tmp_path: Path, fake_gemini: FakeGemini, reply: str, expected: dict) -> None:
    config = write_config(tmp_path, {"a": toy("a")})
    fake_gemini.script(
        lambda request: [[{"functionCall": {"name": "echo", "args": {"text": "hi"}}, "thoughtSignature": fake_gemini.new_signature()}]],
        lambda request: (check(request.last_responses()[0]["response"] == expected, f"{request.last_responses()}"), [[{"text": "ok"}]])[1],
    )
    done = cli("chat", "--config", str(config), "--model", "gemini-2.5-flash", "--no-stream", stdin=f"go\n{reply}\n", env=chat_env(fake_gemini))
    assert done.returncode == 0, done.stderr
    assert fake_gemini.errors == [] and '? run echo {"text": "hi"} [y/N]' in done.stderr
    assert done.stdout == "ok\n"


def test_chat_usage_errors(tmp_path: Path, fake_gemini: FakeGemini) -> None:
    config = write_config(tmp_path, {"a": toy("a")})
    bad_style = cli("chat", "--config", str(config), "--model", "m", "--tool-style", "yaml", env=chat_env(fake_gemini))
    assert bad_style.returncode == 2 and "--tool-style" in bad_style.stderr
    no_openai_key = cli("chat", "--config", str(config), "--model", "m", "--api", "openai", env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""})
    assert no_openai_key.returncode == 2 and "OPENAI_API_KEY" in no_openai_key.stderr
    no_key = cli("chat", "--config", str(config), "--model", "m", env={"GEMINI_API_KEY": ""})
    assert no_key.returncode == 2 and "GEMINI_API_KEY" in no_key.stderr


# ------------------------------------------------------------------------------------ the real entry point


def coretools_mcp(*argv: str, **options: object) -> subprocess.CompletedProcess[str]:
    """``coretools-mcp ARGV`` as a user runs it (the main CLI, its logging set up)."""
    return subprocess.run([sys.executable, "-m", "coretools", *argv], text=True, timeout=90, **options)  # type: ignore[call-overload]


def test_a_closed_stdout_ends_the_command_quietly(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": toy("a"), "b": toy("b")})
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        done = coretools_mcp("client", "tools", "--config", str(config), stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_head_reads_one_line_of_a_large_result(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": toy("a")})
    command = f"{sys.executable} -m coretools client call big '{{\"size\": 2000000}}' --format text --config {config} | head -c 3"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=90)
    assert done.stdout == "xxx"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_prefix_never_with_colliding_names_is_a_usage_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": toy("a", includeTools=["echo", "pid"]), "b": toy("b", includeTools=["echo"])})
    done = coretools_mcp("client", "tools", "--config", str(config), "--prefix", "never", capture_output=True)
    assert done.returncode == 2 and done.stdout == ""
    assert "error: with prefix never, tool names collide: echo (servers a, b); choose --prefix auto or always" in done.stderr
    assert "Traceback" not in done.stderr


def test_each_problem_is_reported_once(tmp_path: Path) -> None:
    noisy = {"command": sys.executable, "args": [str(Path(__file__).parent / "servers" / "raw_server.py"), "garbage"]}
    config = write_config(tmp_path, {"noisy": noisy, "dead": broken(), "a": toy("a", includeTools=["echo"])})
    done = coretools_mcp("client", "call", "noisy__echo", '{"size": 2}', "--config", str(config), capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("dead: the server exited with code 3") == 1, done.stderr
    assert done.stderr.count("noisy: transport error") == 1, done.stderr
    assert "more than one server" not in done.stderr, "prefixes keep shared tools apart: nothing to warn about"


def test_chat_passes_the_servers_instructions_unless_told_not_to(tmp_path: Path, fake_gemini: FakeGemini) -> None:
    config = write_config(tmp_path, {"a": toy("a", "--instructions", "Greet with a__echo.")})
    systems: list[object] = []
    step = lambda request: (systems.append(request.body.get("systemInstruction")), [[{"text": "ok"}]])[1]  # noqa: E731
    for extra in ([], ["--no-server-instructions"]):
        fake_gemini.script(step)
        done = cli("chat", "--config", str(config), "--model", "gemini-2.5-flash", "--system", "Be brief.", *extra, stdin="hi\n", env=chat_env(fake_gemini))
        assert done.returncode == 0 and fake_gemini.errors == [], done.stderr
    assert systems == [
        {"parts": [{"text": "Be brief."}, {"text": 'Instructions from MCP server "a":\nGreet with a__echo.'}]},
        {"parts": [{"text": "Be brief."}]},
    ]
