"""No single call freezes the server: hostile pages, and a wall-clock budget for every call.

A page the model is steered to fetch may be built to make a parser work quadratically: hundreds of kilobytes
of unclosed `<script>` tags or unclosed `<!--` comments. While such a page is converted, every other call
of every client must still be answered (the conversion may not hold the event loop or the interpreter), and
the conversion itself must end in reasonable time. Separately, `--call-timeout` ends any call that runs too
long with an error naming the limit, and kills what the call started.

The pages are served by a real HTTP server on 127.0.0.1 (addressed by IP, so no name is resolved); the
coretools server is a real subprocess, spoken to by the official MCP client over stdio (one connection:
the second call shares it) or HTTP (two client sessions).
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from support import REPO, call_tool, linked_files, stdio_params, text_of

pytestmark = pytest.mark.anyio
log = logging.getLogger(__name__)

HOSTILE_BYTES = 160 * 1024  # the regex and html.parser converter spent 14 s (scripts) and 36 s (comments) on these
TRICKLE_SECONDS = 2.5  # keeps the hostile call open while the second client is timed
SECOND_CALL_BUDGET = 1.0


PAGES = {  # kind: (repeated unit, size)
    "scripts": (b"<script>x", HOSTILE_BYTES),
    "comments": (b"<!--x", HOSTILE_BYTES),
    "paragraphs": (b"<p>word</p>", 1024 * 1024),  # not hostile to a linear parser, only long to convert
}


def hostile_page(kind: str) -> bytes:
    unit, size = PAGES[kind]
    return b"<html><head><title>hostile</title></head><body><p>before</p>" + unit * (size // len(unit))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook
        path, _, query = self.path.partition("?")
        self.server.served.append(path)  # type: ignore[attr-defined]
        if path == "/trickle":
            return self._trickle(float(query or TRICKLE_SECONDS))
        if path.startswith("/hostile/"):
            body = hostile_page(path.rsplit("/", 1)[1])
        elif path == "/page":
            body = b"<html><head><title>fine</title></head><body><h1>Fine</h1><p>an ordinary page</p></body></html>"
        else:
            self.send_response(404)
            self.end_headers()
            return None
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.server.finished.append(path)  # type: ignore[attr-defined]
        return None

    def _trickle(self, seconds: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self.wfile.write(b".")
                self.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Web:
    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.served = []  # type: ignore[attr-defined]
        self.httpd.finished = []  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def finished(self, path: str) -> bool:
        return path in self.httpd.finished  # type: ignore[attr-defined]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def web():
    server = Web()
    yield server
    server.close()


# ---------------------------------------------------------------- a second client while a hostile page is converted


async def _second_call_latency(hostile_client, second_client, root: Path, web: Web, kind: str) -> tuple[float | None, bool]:
    """Start the hostile web_fetch on `hostile_client`; once its page is served (the server is converting it),
    time a small list_directory on `second_client`. Returns the latency (None: no answer within the budget,
    and the hostile call is abandoned) and whether the hostile call was still running when the answer came."""
    page = f"/hostile/{kind}"
    prompt = f"Summarise {web.url(page)} and {web.url('/trickle')}"
    outcome: dict = {}

    async def hostile() -> None:
        outcome["result"] = await hostile_client.call_tool("web_fetch", {"prompt": prompt})

    async with anyio.create_task_group() as tg:
        tg.start_soon(hostile)
        with anyio.fail_after(15):
            while not web.finished(page):
                await anyio.sleep(0.02)
        await anyio.sleep(0.2)  # the page is in the server: it is being converted now
        start = time.monotonic()
        with anyio.move_on_after(SECOND_CALL_BUDGET) as scope:
            listing = await second_client.call_tool("list_directory", {"path": str(root)})
        latency = time.monotonic() - start
        still_running = "result" not in outcome
        if scope.cancelled_caught:
            tg.cancel_scope.cancel()
            log.info("%s page: no answer to the second call within %.1f s", kind, SECOND_CALL_BUDGET)
            return None, still_running
        assert not listing.is_error and "marker.txt" in text_of(listing)
        with anyio.fail_after(30):
            while "result" not in outcome:
                await anyio.sleep(0.05)
    text = text_of(outcome["result"])
    assert "=== [1]" in text and "Status: 200" in text, text[:2000]
    log.info("%s page: second call answered in %.3f s (hostile call still running: %s)", kind, latency, still_running)
    return latency, still_running


def _check(latency: float | None, running: bool, kind: str) -> None:
    assert latency is not None, (
        f"list_directory got no answer within {SECOND_CALL_BUDGET} s while a page of unclosed {kind} was converted"
    )
    assert latency < SECOND_CALL_BUDGET
    assert running, "the hostile call ended before the second call was answered: the test proved nothing"


@pytest.mark.parametrize("kind", ["scripts", "comments", "paragraphs"])
async def test_second_call_answered_while_a_hostile_page_is_converted_stdio(root: Path, web: Web, kind: str, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import stdio_client

    (root / "marker.txt").write_text("x\n")
    params = stdio_params([root], "--web-fetch-private", "allow", forked=True)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            await client.call_tool("web_fetch", {"prompt": web.url("/page")})  # warm: imports done
            latency, running = await _second_call_latency(client, client, root, web, kind)
    _check(latency, running, kind)


@pytest.mark.parametrize("kind", ["scripts", "comments"])
async def test_second_client_answered_while_a_hostile_page_is_converted_http(root: Path, web: Web, kind: str) -> None:
    from http_harness import HttpServer, http_client

    (root / "marker.txt").write_text("x\n")
    with HttpServer.start([root], "--web-fetch-private", "allow", forked=True) as server:
        async with http_client(server.url) as first, http_client(server.url) as second:
            await first.call_tool("web_fetch", {"prompt": web.url("/page")})
            latency, running = await _second_call_latency(first, second, root, web, kind)
    _check(latency, running, kind)


# ---------------------------------------------------------------- the converter itself is linear

CONVERT = """
import sys, time
from coretools.tools.web_fetch import html_to_markdown
for shape, unit in (line.split("\\t", 1) for line in sys.stdin.read().splitlines()):
    html = "<html><body>" + unit * (10 * 1024 * 1024 // len(unit))
    start = time.process_time()
    html_to_markdown(html, "http://127.0.0.1/")
    print(f"{shape}\\t{time.process_time() - start:.3f}", flush=True)
"""

SHAPES = {
    "unclosed scripts": "<script>x",
    "unclosed comments": "<!--x",
    "unclosed styles": "<style>x",
    "unclosed textareas": "<textarea>x",
    "unclosed titles": "<title>x",
    "unclosed tag openers": "<a x",
    "unclosed end tags": "</a x",
    "unclosed declarations": "<!x",
    "unclosed processing instructions": "<?x",
    "unclosed CDATA": "<![CDATA[x",
    "nested divs": "<div>",
    "nested lists": "<ul><li>",
    "nested tables": "<table><tr><td>",
    "nested anchors": "<a>",
    "many paragraphs": "<p>word</p>",
    "many links": '<a href="/a">l</a>',
    "many entities": "&amp;&#x41;",
}
# Linear time, judged on the machine at hand: each shape may take at most RELATIVE_BUDGET times the CPU of the
# same 10 MB of plain paragraphs, converted in the same process (a superlinear shape takes minutes, not a small
# multiple); the paragraphs themselves at most BENIGN_BUDGET seconds of CPU, a sanity bound for a slow machine.
RELATIVE_BUDGET = 3.0
BENIGN = "many paragraphs"
BENIGN_BUDGET = 30.0
CONVERT_DEADLINE = 240.0  # wall seconds for all of them, a guard only (a loaded machine is slow, not wrong)


@pytest.fixture(scope="module")
def conversion_times() -> dict[str, float]:
    """CPU seconds to convert a whole response body (the 10 MB cap) of each hostile shape, measured in one fresh
    process that is killed at the deadline: a shape missing from the answer did not finish in time."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", CONVERT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    shapes = {BENIGN: SHAPES[BENIGN], **SHAPES}  # the reference first
    proc.stdin.write("".join(f"{shape}\t{unit}\n" for shape, unit in shapes.items()))
    proc.stdin.close()
    times: dict[str, float] = {}

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            shape, seconds = line.rstrip("\n").split("\t")
            times[shape] = float(seconds)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(CONVERT_DEADLINE)
    proc.kill()
    proc.wait()
    return dict(times)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_hostile_html_converts_in_bounded_time(shape: str, conversion_times: dict[str, float]) -> None:
    assert shape in conversion_times, f"converting 10 MB of {shape} did not finish (or the shapes before it took long)"
    assert BENIGN in conversion_times, "the plain paragraphs did not finish"
    seconds, benign = conversion_times[shape], conversion_times[BENIGN]
    log.info("%s: converted in %.3f s of CPU (plain paragraphs: %.3f s)", shape, seconds, benign)
    assert benign < BENIGN_BUDGET, f"converting 10 MB of plain paragraphs took {benign} s"
    assert seconds <= RELATIVE_BUDGET * benign, f"converting 10 MB of {shape} took {seconds} s, plain paragraphs {benign} s"


# ---------------------------------------------------------------- the converter's parts, against the expressions they replace

OLD_STRIP = re.compile(r"(?is)<(script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->")
OPENER = re.compile(r"(?i)<(?:script|style|noscript|template)\b|<!--")
FRAGMENTS = ["<script>", "</script>", "</SCRIPT >", "<script", "<scripts>", "<STYLE x=1>", "</style\n>", "<style_",
             "<noscript>", "</noscript>", "<template>", "</template  >", "<!--", "-->", "--", "<", ">", "</", "a",
             " ", "\n", "<p>", "</p>", "\u0130", "\u212a"]


def _reference_strip(html: str) -> tuple[str, bool]:
    """The old expression's removals, up to the first comment or element it leaves open, and whether it
    left one open."""
    out, pos = [], 0
    while (opener := OPENER.search(html, pos)) is not None:
        whole = OLD_STRIP.match(html, opener.start())
        out.append(html[pos : opener.start()])
        if whole is None:
            return "".join(out), True
        pos = whole.end()
    return "".join(out) + html[pos:], False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40), st.integers(min_value=0, max_value=60))
@example(["<script", "<STYLE x=1>", "</style\n>", "a"], 0)  # open script, then a closed style: the old
# expression removes the style, and what it leaves ("<scripta") no longer reads as an opener
def test_strip_raw_elements_removes_what_the_old_expression_removed(parts: list[str], limit: int) -> None:
    from coretools.tools.html_markdown import strip_raw_elements

    html = "".join(parts)
    expected, left_open = _reference_strip(html)
    if not left_open:
        assert expected == OLD_STRIP.sub("", html)  # nothing left open: exactly the old removals
    assert strip_raw_elements(html, limit) == (expected[:limit], len(expected) > limit)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="\n \ta\r", max_size=40))
def test_tidy_is_the_two_old_substitutions(text: str) -> None:
    from coretools.tools.html_markdown import tidy

    expected = re.sub(r"\n{3,}", "\n\n", re.sub(r"\n[ \t]+\n", "\n\n", text)).strip()
    assert tidy(text) == expected


def test_page_conversion_stops_at_its_element_budget() -> None:
    from coretools.tools.web_fetch import html_to_markdown

    _, text = html_to_markdown("<html><body>" + "<a>x</a>" * 1000, "http://127.0.0.1/", limit=2_000)
    assert text.endswith("[Only the first 200 HTML elements of this page were converted.]")
    assert text.count("x") < 200


def test_nesting_deeper_than_the_parser_allows_is_cut_not_fatal() -> None:
    from coretools.tools.web_fetch import html_to_markdown

    _, text = html_to_markdown("<html><body>" + "<div><b>deep " * 5000, "http://127.0.0.1/")
    assert "deep" in text and text.count("deep") < 1000


# ---------------------------------------------------------------- --call-timeout


async def test_call_timeout_ends_a_slow_call_with_a_clear_error(root: Path, web: Web) -> None:
    start = time.monotonic()
    result = await call_tool(root, "web_fetch", {"prompt": web.url("/trickle?8")}, "--call-timeout", "1",
                             "--web-fetch-timeout", "30")
    elapsed = time.monotonic() - start
    text = text_of(result)
    assert result.is_error, text
    assert result.structured["error"]["kind"] == "call_timeout"
    assert "--call-timeout" in text and "1 second" in text
    assert "fewer" in text or "narrow" in text  # says how to make the call smaller
    assert elapsed < 4, elapsed


async def test_the_tool_timeout_wins_when_it_is_smaller(root: Path, web: Web) -> None:
    result = await call_tool(root, "web_fetch", {"prompt": f"{web.url('/trickle?5')} {web.url('/page')}"},
                             "--call-timeout", "30", "--web-fetch-timeout", "0.5")
    text = text_of(result)
    assert not result.is_error, text
    assert "no complete response within 0.5 seconds" in text and "--call-timeout" not in text


async def test_call_timeout_kills_the_commands_process_group(root: Path) -> None:
    command = f"sleep 60 & echo $! > {root}/pid; wait"
    start = time.monotonic()
    result = await call_tool(root, "run_shell_command", {"command": command}, "--call-timeout", "1",
                             "--shell-timeout", "120", "--shell-sandbox", "landlock")  # host pids
    assert time.monotonic() - start < 5
    text = text_of(result)
    assert result.is_error and "--call-timeout" in text, text
    pid = int((root / "pid").read_text())
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in _state(pid), "the command outlived its call"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


async def test_call_timeout_default_and_disabled(root: Path, web: Web) -> None:
    from support import make_config

    assert make_config([root]).call_timeout == 600
    result = await call_tool(root, "web_fetch", {"prompt": web.url("/trickle?1.5")}, "--call-timeout", "0")
    assert not result.is_error, text_of(result)


def test_call_timeout_applies_to_the_call_command(root: Path, web: Web) -> None:
    argv = [sys.executable, "-m", "coretools", "call", "--root", str(root), "--call-timeout", "1",
            "web_fetch", '{"prompt": "%s"}' % web.url("/trickle?8")]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          cwd=str(REPO), timeout=30)
    assert time.monotonic() - start < 8
    assert done.returncode == 1, done.stderr
    assert "--call-timeout" in done.stdout


async def test_call_timeout_over_stdio_leaves_the_server_serving(root: Path, web: Web, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import stdio_client

    (root / "marker.txt").write_text("x\n")
    params = stdio_params([root], "--call-timeout", "1", "--web-fetch-timeout", "30", forked=True)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            start = time.monotonic()
            stopped = await client.call_tool("web_fetch", {"prompt": web.url("/trickle?8")})
            elapsed = time.monotonic() - start
            listing = await client.call_tool("list_directory", {"path": str(root)})
    assert stopped.is_error and "--call-timeout" in text_of(stopped)
    assert elapsed < 4
    assert not listing.is_error and "marker.txt" in text_of(listing)


# ---------------------------------------------------------------- hostile files: replace with mixed line endings


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab\r\n", max_size=30), st.text(alphabet="ab\r\n", min_size=1, max_size=6))
@example("\r\n", "\r\r\n")  # a lone "\r" before a line break of old_string: the CR of one of the file's CRLFs
def test_mixed_line_ending_search_matches_the_expression_it_replaces(text: str, old: str) -> None:
    from coretools.tools.textedit.replacement import _find_either_break

    old_lf = old.replace("\r\n", "\n")
    if old_lf.endswith("\r"):
        old_lf += "a"  # a lone final "\r" takes the bounded expression path, tested below
    pattern = re.compile("\r?\n".join(re.escape(part) for part in old_lf.split("\n")))
    assert _find_either_break(text, old_lf) == [m.span() for m in pattern.finditer(text)]


def test_lines_are_split_as_str_split_does_a_block_at_a_time() -> None:
    from coretools.tools.textedit.similar import _lines_lazily

    for text in ("", "\n", "a", "a\n", "\n\nab\n\ncd", "x" * 50 + "\n" + "y" * 3, "ab\n" * 40):
        for block in (1, 2, 3, 7, 1 << 20):
            assert list(_lines_lazily(text, block)) == text.split("\n"), (text, block)


def test_replace_in_a_file_with_mixed_line_endings_is_linear(tmp_path: Path) -> None:
    """1 MB of short lines with one CRLF, and an old_string of 2,000 lines that is nowhere in it: the search
    and the report of similar lines stay linear (a quadratic search took 89 s here and froze the server)."""
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "m.txt").write_bytes(b"x\r\n" + b"a\n" * 500_000)
    args = json.dumps({"file_path": "m.txt", "old_string": "a\n" * 2000 + "b", "new_string": "c"})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run([sys.executable, "-m", "coretools", "call", "--root", str(root), "replace", "-"],
                              input=args, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                              cwd=str(REPO), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("replace took more than 60 s")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    log.info("mixed line endings: replace answered in %.2f CPU-s", cpu)
    assert done.returncode == 1 and "0 occurrences found" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert cpu < 10, cpu  # CPU, not wall time: the machine may be shared


async def test_a_lone_final_cr_in_a_large_mixed_file_is_refused_not_searched(root: Path) -> None:
    (root / "m.txt").write_bytes(b"x\r\n" + b"a\n" * 500_000)
    old = "a\n" * 20 + "\r"
    result = await call_tool(root, "replace", {"file_path": str(root / "m.txt"), "old_string": old, "new_string": "b"})
    assert result.is_error and "carriage return" in text_of(result), text_of(result)


async def test_call_timeout_stops_work_running_in_a_thread(root: Path) -> None:
    """read_many_files runs in a worker thread (which cannot be killed); it stops at its next cancellation
    check, and the call is answered with the timeout error."""
    linked_files((root / f"f{n:04d}.txt" for n in range(3000)), "line\n" * 200)
    start = time.monotonic()
    result = await call_tool(root, "read_many_files", {"paths": ["*.txt"]}, "--call-timeout", "0.05")
    elapsed = time.monotonic() - start
    assert result.is_error and result.structured["error"]["kind"] == "call_timeout", text_of(result)[:300]
    assert "name fewer files" in text_of(result)
    assert elapsed < 2, elapsed
