"""Results that point at a file the model can read (a saved full output, a background command's log) link to
it with an MCP `resource_link`, and `resources/read` of the link serves the file to its session and no other.

What is checked, with the official client over a real stdio server on the 2026-07-28 protocol: a command's
output too long to show links to its saved copy, and reading the link returns the whole output; a
background command links to its log, and reading the link returns what the command wrote, as it grows.
Over one real HTTP server: two sessions, where B's read of A's link is not found, exactly as B's read of a
made-up name in the same place, while A reads it; a client that negotiated a protocol older than 2025-06-18
gets the same text and no link; a client without a session gets no link (its saved output ends with its
call). In process: the error of a background command the server failed to follow links to its log, and the
git warning that rebuilds a result's text keeps its links.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, MCPError

from http_harness import HttpServer, http_client
from support import ToolSession, stdio_params, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="the OS sandboxes are Linux only"),
]

LONG = "seq 1 20000"  # 108,894 characters of stdout: more than a result shows, so it is saved
WHOLE = "".join(f"{i}\n" for i in range(1, 20001))
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def links(result) -> list:
    return [block for block in result.content if block.type == "resource_link"]


async def refused(client, uri: str) -> MCPError:
    """The error of a refused read, which is invalid params, as every refusal of a resource is."""
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    assert caught.value.error.code == -32602, caught.value
    return caught.value


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("links")
    with HttpServer.start([root], "--structured-content", forked=True) as running:
        yield running


class RawSession:
    """One stateful MCP session over plain HTTP that negotiates `version` (the official client always
    offers the newest one)."""

    def __init__(self, http: httpx2.Client, url: str, version: str) -> None:
        self.http, self.url, self.next_id = http, url, 0
        self.headers = dict(HEADERS)
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}
        answer = self.request("initialize", init)
        assert answer["protocolVersion"] == version, answer
        self.headers["MCP-Protocol-Version"] = version
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _post(self, body: dict) -> httpx2.Response:
        response = self.http.post(self.url, headers=self.headers, content=json.dumps(body))
        assert response.status_code in (200, 202), (response.status_code, response.text)
        if "mcp-session-id" in response.headers:
            self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        return response

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        response = self._post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if response.headers.get("content-type", "").startswith("application/json"):
            messages = [response.json()]
        else:
            messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        answer = next(m for m in messages if m.get("id") == self.next_id)
        assert "result" in answer, answer
        return answer["result"]


# -- stdio, the 2026-07-28 protocol -------------------------------------------------------------------------


async def test_a_saved_output_is_linked_and_its_link_reads_the_whole_output(tmp_path: Path) -> None:
    async with Client(stdio_params([tmp_path], "--structured-content", forked=True), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run_shell_command", {"command": LONG})
        saved = result.structured_content["saved_output"]["stdout"]
        assert f"characters omitted; the full output is in {saved}" in text_of(result)  # the text names it still
        assert [block.type for block in result.content] == ["text", "resource_link"]
        (link,) = links(result)
        assert link.uri == f"file://{saved}" and link.name == Path(saved).name
        assert link.mime_type == "text/plain" and link.size == len(WHOLE) and "stdout" in link.description
        read = (await client.read_resource(link.uri)).contents[0]
        assert read.text == WHOLE and read.uri == link.uri
        assert not links(await client.call_tool("run_shell_command", {"command": "echo short"}))


async def test_a_background_command_links_to_its_log_which_reads_what_it_wrote(tmp_path: Path) -> None:
    command = "echo first-line; sleep 0.3; echo second-line; sleep 60"
    async with Client(stdio_params([tmp_path], "--structured-content", forked=True), mode="auto") as client:
        result = await client.call_tool("run_shell_command", {"command": command, "is_background": True,
                                                               "delay_ms": 100})  # fmt: skip
        log = result.structured_content["log_path"]
        assert f"goes to {log}, which read_file can read" in text_of(result)
        (link,) = links(result)
        assert link.uri == f"file://{log}" and link.mime_type == "text/plain" and link.size is None
        with anyio.fail_after(20):
            while "second-line" not in (text := (await client.read_resource(link.uri)).contents[0].text):
                await anyio.sleep(0.05)
        assert text.startswith("first-line\n")


# -- HTTP: sessions and protocol versions --------------------------------------------------------------------


async def test_a_link_reads_in_its_own_session_and_in_no_other(server: HttpServer) -> None:
    async with http_client(server.url) as a, http_client(server.url) as b:
        result = await a.call_tool("run_shell_command", {"command": LONG})
        (link,) = links(result)
        assert (await a.read_resource(link.uri)).contents[0].text == WHOLE
        made_up = link.uri.rpartition("/")[0] + f"/{secrets.token_hex(8)}-stdout.txt"
        missing = await refused(a, made_up)
        assert missing.error.message == f"Resource not found: {made_up}"  # as any missing file
        # For B, A's file is as absent as a name A never had: the one answer, whatever the name.
        assert (await refused(b, link.uri)).error.message == f"Resource not found: {link.uri}"
        assert (await refused(b, made_up)).error.message == f"Resource not found: {made_up}"
        saved = result.structured_content["saved_output"]["stdout"]
        assert (await b.call_tool("read_file", {"absolute_path": saved})).is_error  # the tool's answer, one rule
        assert (await a.read_resource(link.uri)).contents[0].text == WHOLE


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_a_client_of_an_older_protocol_gets_the_same_text_and_no_link(server: HttpServer, version: str) -> None:
    with httpx2.Client(timeout=60) as http:
        old = RawSession(http, server.url, version)
        result = old.request("tools/call", {"name": "run_shell_command", "arguments": {"command": LONG}})
        new = RawSession(http, server.url, "2025-06-18")
        linked = new.request("tools/call", {"name": "run_shell_command", "arguments": {"command": LONG}})
    assert [block["type"] for block in result["content"]] == ["text"]
    assert [block["type"] for block in linked["content"]] == ["text", "resource_link"]
    saved = result["structuredContent"]["saved_output"]["stdout"]
    assert f"the full output is in {saved}" in result["content"][0]["text"]
    # the same text but for the names and numbers of its own run (the saved file's, the process group's)
    other = linked["structuredContent"]
    text = linked["content"][0]["text"].replace(other["saved_output"]["stdout"], saved)
    assert text.replace(f"PGID: {other['pgid']}", "PGID: -") == result["content"][0]["text"].replace(
        f"PGID: {result['structuredContent']['pgid']}", "PGID: -"
    )


async def test_a_client_without_a_session_gets_no_link_to_what_ends_with_its_call(server: HttpServer) -> None:
    async with http_client(server.url, "auto") as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run_shell_command", {"command": LONG})
        assert "the full output is in" in text_of(result) and not links(result)


# -- in process ----------------------------------------------------------------------------------------------


async def test_a_background_command_the_server_failed_to_follow_links_to_its_log(root: Path, monkeypatch) -> None:
    from coretools.workspace.background import BackgroundJob

    def broken(self, chunk, sink):
        raise RuntimeError("a bug")

    monkeypatch.setattr(BackgroundJob, "_take", broken)
    async with ToolSession(root) as tools:
        result = await tools.call("run_shell_command", command="echo hi; sleep 30", is_background=True,
                                  delay_ms=5000)  # fmt: skip
        assert result.is_error and "The server failed to follow the background command" in text_of(result)
        (link,) = links(result)
        log = link.uri.removeprefix("file://")
        assert f"What it wrote is in {log}." in text_of(result)
        assert "failed to follow the command (RuntimeError: a bug)" in Path(log).read_text()


async def test_the_git_warning_keeps_the_links(root: Path) -> None:
    async with ToolSession(root) as tools:
        result = await tools.call("run_shell_command", command=f"git init -q made && git -C made config "
                                  f"core.fsmonitor 'touch /tmp/x' && {LONG}")  # fmt: skip
        assert "core.fsmonitor" in text_of(result)
        assert [block.type for block in result.content] == ["text", "resource_link"]
