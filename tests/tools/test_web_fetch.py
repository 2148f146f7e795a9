"""web_fetch against real HTTP(S) servers on 127.0.0.1.

Name resolution is controlled by the tests: `FakeNetwork` answers for invented names, and "routes" a few
invented public addresses to the local server, so the redirect and rebinding rules can be exercised without
sending a packet anywhere but 127.0.0.1. It refuses (and records) any attempt to dial a non-loopback address
that is not routed, so a policy hole fails the test instead of reaching the network.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import shutil
import ssl
import subprocess
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpcore2
import pytest

from coretools.tools import web_fetch
from coretools.sandbox import netpolicy
from coretools.sandbox.netpolicy import LOCAL, PUBLIC, BLOCKED, UrlProblem, classify, parse_target
from tests.conftest import call_tool, connect, text_of

pytestmark = pytest.mark.anyio

PUBLIC_IP = "93.184.216.34"  # a global address; only ever "routed" to 127.0.0.1 by FakeNetwork
PUBLIC_IP_2 = "93.184.216.35"

HTML_PAGE = b"""<!DOCTYPE html><html><head><title>Test Page</title><style>body{color:red}</style>
<script>var secret = "SCRIPT-SHOULD-NOT-APPEAR";</script></head>
<body><h1>Main Heading</h1><p>Some <b>bold</b> text and a <a href="/relative/link">relative link</a>.</p>
<ul><li>first</li><li>second</li></ul><img src="data:image/png;base64,AAAA" alt="inline picture">
<pre><code>print("hi")</code></pre></body></html>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str | None = "text/plain; charset=utf-8", **headers):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):  # noqa: C901 - a router
        srv = self.server
        srv.requests.append((self.path, dict(self.headers)))
        path, _, query = self.path.partition("?")
        if path == "/html":
            return self._send(200, HTML_PAGE, "text/html; charset=utf-8")
        if path == "/untyped-html":
            return self._send(200, b"<html><body><h2>No type</h2></body></html>", None)
        if path == "/text":
            return self._send(200, "plain text body: caf\u00e9\n".encode())
        if path == "/latin1":
            return self._send(200, "caf\u00e9 cr\u00e8me".encode("latin-1"), "text/plain; charset=iso-8859-1")
        if path == "/json":
            return self._send(200, json.dumps({"key": "value", "n": [1, 2]}).encode(), "application/json")
        if path == "/markdown":
            return self._send(200, b"# Title\n\n<b>kept as is</b>\n", "text/markdown")
        if path == "/png":
            return self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png")
        if path == "/echo-host":
            return self._send(200, f"host={self.headers.get('Host')}".encode())
        if path == "/404":
            return self._send(404, b"<html><body><p>nothing here</p></body></html>", "text/html")
        if path == "/500":
            return self._send(500, b"x" * 10_000)
        if path == "/size":
            return self._send(200, b"a" * int(query))
        if path.startswith("/chain/"):
            n = int(path.rsplit("/", 1)[1])
            if n == 0:
                return self._send(200, b"end of chain")
            return self._send(302, b"", Location=f"/chain/{n - 1}")
        if path == "/to":
            return self._send(302, b"", Location=query)
        if path == "/slow":
            time.sleep(3)
            return self._send(200, b"too late")
        if path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(30):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(12 * 1024 * 1024))
            self.end_headers()
            chunk = b"0123456789abcdef" * 4096
            try:
                for _ in range(12 * 16):
                    self.wfile.write(chunk)
                    srv.huge_sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if path == "/gzip":
            body = gzip.compress("gzip-encoded caf\u00e9 text\n".encode() * 100)
            return self._send(200, body, "text/plain; charset=utf-8", Content_Encoding="gzip")
        if path == "/deflate-raw":
            c = zlib.compressobj(wbits=-15)
            body = c.compress(b"raw deflate body\n") + c.flush()
            return self._send(200, body, "text/plain", Content_Encoding="deflate")
        if path == "/bomb":
            return self._send(200, srv.bomb, "text/plain", Content_Encoding="gzip")
        if path == "/brotli":
            return self._send(200, b"not really brotli", "text/plain", Content_Encoding="br")
        if path == "/corrupt-gzip":
            return self._send(200, b"\x1f\x8b\x08\x00garbage-garbage", "text/plain", Content_Encoding="gzip")
        if path == "/big-html":
            para = b"<p>" + b"word " * 200 + b"</p>"
            return self._send(200, b"<html><body>" + para * 200 + b"</body></html>", "text/html")
        return self._send(404, b"no such route")


class Server:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.requests = []
        self.httpd.huge_sent = 0
        self.httpd.bomb = gzip.compress(b"A" * (64 * 1024 * 1024), compresslevel=9)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    @property
    def requests(self) -> list:
        return self.httpd.requests

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def web():
    server = Server()
    yield server
    server.close()


class FakeNetwork(netpolicy.Network):
    """Answers name lookups from `names` (a list of answers is consumed one lookup at a time, to model a
    rebinding name) and routes invented public addresses to 127.0.0.1."""

    def __init__(self) -> None:
        self.names: dict[str, list] = {}
        self.routes: dict[str, tuple[str, int | None]] = {}
        self.lookups: list[str] = []
        self.connects: list[tuple[str, int]] = []
        self.refused_dials: list[str] = []

    def answer(self, name: str, *answers: list[str]) -> None:
        self.names[name] = list(answers)

    async def resolve(self, host: str, port: int):
        self.lookups.append(host)
        if host not in self.names:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        answers = self.names[host]
        current = answers.pop(0) if len(answers) > 1 else answers[0]
        return [ipaddress.ip_address(a) for a in current]

    async def connect(self, address: str, port: int, timeout):
        self.connects.append((address, port))
        real, real_port = self.routes.get(address, (address, None))
        if not ipaddress.ip_address(real).is_loopback:
            self.refused_dials.append(address)
            raise httpcore2.ConnectError(f"test network: refusing to dial non-loopback {address}")
        return await super().connect(real, real_port or port, timeout)


@pytest.fixture(autouse=True)
def net(monkeypatch, web):
    fake = FakeNetwork()
    fake.routes[PUBLIC_IP] = ("127.0.0.1", None)
    fake.routes[PUBLIC_IP_2] = ("127.0.0.1", None)
    fake.answer("localhost", ["127.0.0.1"])
    monkeypatch.setattr(netpolicy, "NETWORK", fake)
    yield fake
    assert fake.refused_dials == [], "web_fetch tried to dial a non-loopback address"


async def fetch(root, prompt: str, *flags: str):
    return await call_tool(root, "web_fetch", {"prompt": prompt}, *flags)


# ---------------------------------------------------------------- content


async def test_html_page_becomes_markdown(root, web):
    res = await fetch(root, f"Summarise {web.url('/html')} please")
    text = text_of(res)
    assert not res.is_error, text
    assert f"=== [1] {web.url('/html')} ===" in text
    assert "Status: 200 OK" in text
    assert "text/html; charset=utf-8 (converted to markdown)" in text
    assert "Title: Test Page" in text
    assert "# Main Heading" in text
    assert "**bold**" in text
    assert f"[relative link]({web.url('/relative/link')})" in text  # made absolute
    assert "- first\n- second" in text
    assert "SCRIPT-SHOULD-NOT-APPEAR" not in text and "color:red" not in text
    assert "base64" not in text and "inline picture" in text
    assert "<untrusted_context>" in text and "untrusted data" in text
    assert res.structured["results"][0]["status"] == 200


async def test_non_html_types_as_they_are(root, web):
    prompt = " ".join(web.url(p) for p in ("/text", "/json", "/markdown", "/png", "/untyped-html", "/latin1"))
    res = await fetch(root, prompt)
    text = text_of(res)
    assert not res.is_error, text
    assert "plain text body: caf\u00e9" in text
    assert '{"key": "value", "n": [1, 2]}' in text
    assert "<b>kept as is</b>" in text  # markdown is returned untouched, not converted
    assert "Content-Type: image/png" in text and "[Binary content (108 bytes) is not shown" in text
    assert "\x89PNG" not in text
    assert "Content-Type: (none given) (converted to markdown)" in text and "## No type" in text
    assert "caf\u00e9 cr\u00e8me" in text  # declared charset honoured
    assert "Fetched 6 of 6 URL(s)" in text


async def test_error_status_is_reported_with_the_start_of_the_page(root, web):
    res = await fetch(root, f"check {web.url('/404')} and {web.url('/500')}")
    text = text_of(res)
    assert res.is_error  # nothing fetched successfully
    assert "All 2 URL(s) failed." in text
    assert "Status: 404 Not Found (the server reported an error" in text and "nothing here" in text
    assert "x" * 2000 + "\n[...]" in text and "x" * 2001 not in text
    res = await fetch(root, f"check {web.url('/404')} and {web.url('/text')}")
    assert not res.is_error and "Fetched 1 of 2 URL(s)" in text_of(res)


async def test_gzip_and_deflate_bodies_are_decoded(root, web):
    res = await fetch(root, f"{web.url('/gzip')} {web.url('/deflate-raw')}")
    text = text_of(res)
    assert not res.is_error, text
    assert text.count("gzip-encoded caf\u00e9 text") == 100
    assert "raw deflate body" in text
    assert web.requests[-1][1].get("Accept-Encoding") == "gzip, deflate"


async def test_unsupported_or_corrupt_encoding_is_a_clear_error(root, web):
    res = await fetch(root, f"{web.url('/brotli')} {web.url('/corrupt-gzip')}")
    text = text_of(res)
    assert res.is_error
    assert "Content-Encoding 'br', which web_fetch cannot decode" in text
    assert "gzip-encoded body is corrupt" in text


async def test_huge_body_stops_at_the_cap(root, web):
    res = await fetch(root, web.url("/huge"))
    text = text_of(res)
    assert not res.is_error, text
    assert "larger than the 10 MB limit; only its beginning was read" in text
    assert "[Content truncated: showing 76,000 of 10,485,760 characters" in text  # 80,000 less the reserve
    record = res.structured["results"][0]
    assert record["truncated"] is True and record["chars"] == 76_000


async def test_gzip_bomb_is_cut_at_the_decompressed_cap(root, web):
    res = await fetch(root, web.url("/bomb"))  # 64 MB of 'A' in ~64 KB of gzip
    text = text_of(res)
    assert not res.is_error, text
    assert "larger than the 10 MB limit" in text
    assert "showing 76,000 of 10,485,760 characters" in text


async def test_budget_is_shared_smallest_first(root, web):
    res = await fetch(root, f"{web.url('/size?70000')} {web.url('/size?90000')} {web.url('/size?1000')}")
    text = text_of(res)
    records = {r["url"].rsplit("?", 1)[1]: r for r in res.structured["results"]}
    assert records["1000"]["chars"] == 1000 and not records["1000"]["truncated"]
    assert records["70000"]["chars"] == 37_500 and records["90000"]["chars"] == 37_500
    assert "showing 37,500 of 90,000 characters. The 76,000-character budget is shared by the 3 URL(s)" in text
    assert sum(r["chars"] for r in records.values()) == 76_000
    assert len(text) <= 80_000


async def test_without_a_result_budget_the_text_budget_is_100000(root, web):
    res = await fetch(root, web.url("/huge"), "--max-result-chars", "0")
    assert "[Content truncated: showing 100,000 of 10,485,760 characters" in text_of(res)


def test_share_budget_unit():
    assert web_fetch.share_budget([10, 20], 100) == [10, 20]
    assert web_fetch.share_budget([300, 10, 300], 100) == [45, 10, 45]
    assert web_fetch.share_budget([], 100) == []


async def test_html_conversion_keeps_large_pages(root, web):
    res = await fetch(root, web.url("/big-html"))
    text = text_of(res)
    assert "[Content truncated: showing 76,000 of" in text


# ---------------------------------------------------------------- redirects and time


async def test_redirect_chain_is_followed_up_to_five(root, web):
    res = await fetch(root, web.url("/chain/5"))
    text = text_of(res)
    assert not res.is_error, text
    assert f"Final URL: {web.url('/chain/0')} (after 5 redirect(s))" in text
    assert "end of chain" in text
    res = await fetch(root, web.url("/chain/6"))
    text = text_of(res)
    assert res.is_error
    assert "more than 5 redirects" in text and f"pointed to {web.url('/chain/0')}" in text


async def test_slow_server_times_out_without_holding_the_others(root, web):
    res = await fetch(root, f"{web.url('/slow')} {web.url('/trickle')} {web.url('/text')}", "--web-fetch-timeout", "0.5")
    text = text_of(res)
    assert not res.is_error, text
    assert text.count("no complete response within 0.5 seconds") == 2
    assert "plain text body" in text


async def test_timeout_option_parsed_and_default(root):
    from coretools.tools.web_fetch import WebFetch
    from tests.conftest import make_config

    options = make_config([root]).tool_options[WebFetch.Options]
    assert options.web_fetch_timeout == 10.0
    assert options.web_fetch_private == "allow"
    assert make_config([root], "--web-fetch-timeout", "2.5").tool_options[WebFetch.Options].web_fetch_timeout == 2.5


# ---------------------------------------------------------------- prompt parsing


async def test_prompt_url_errors_name_every_bad_url(root):
    res = await fetch(root, "read file:///etc/passwd and gopher://x.org/1 and http://user:pw@example.com/ and http:///nohost")
    text = text_of(res)
    assert res.is_error and res.structured["error"]["kind"] == "invalid_tool_params"
    assert 'Unsupported protocol in URL "file:///etc/passwd" (file:)' in text
    assert 'Unsupported protocol in URL "gopher://x.org/1"' in text
    assert 'URL "http://user:pw@example.com/" contains credentials' in text
    assert 'Malformed URL "http:///nohost": it has no host.' in text
    assert "Fix or remove these URLs" in text


@pytest.mark.parametrize(
    "prompt, message",
    [
        ("   ", "The 'prompt' parameter cannot be empty"),
        ("summarise example.com for me", "must contain at least one valid URL"),
    ],
)
async def test_prompt_without_urls(root, prompt, message):
    res = await fetch(root, prompt)
    assert res.is_error and message in text_of(res)


async def test_more_than_twenty_urls_refused(root):
    prompt = " ".join(f"http://127.0.0.1:1/{i}" for i in range(21))
    res = await fetch(root, prompt)
    assert res.is_error
    assert "21 distinct URLs; web_fetch fetches at most 20" in text_of(res)


def test_find_urls_trims_punctuation_and_dedupes():
    urls, problems = web_fetch.find_urls(
        "See (https://Example.COM/a), [doc](https://en.wikipedia.org/wiki/Foo_(bar)) and https://example.com/a. "
        'Also "http://x.org:8080/p?q=1#frag" and <https://y.org/>'
    )
    assert problems == []
    assert urls == [
        "https://example.com/a",
        "https://en.wikipedia.org/wiki/Foo_(bar)",
        "http://x.org:8080/p?q=1",
        "https://y.org/",
    ]


def test_raw_github():
    assert (
        web_fetch.raw_github("https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/web-fetch.md")
        == "https://raw.githubusercontent.com/google-gemini/gemini-cli/main/docs/tools/web-fetch.md"
    )
    assert web_fetch.raw_github("https://github.com/o/r/tree/main/x") == "https://github.com/o/r/tree/main/x"


async def test_github_blob_is_fetched_from_raw(root, net):
    net.answer("raw.githubusercontent.com", [PUBLIC_IP])
    net.routes[PUBLIC_IP] = ("127.0.0.1", 9)  # nothing listens: we only check where it went
    res = await fetch(root, "https://github.com/owner/repo/blob/main/README.md")
    text = text_of(res)
    assert net.lookups == ["raw.githubusercontent.com"]
    assert net.connects == [(PUBLIC_IP, 443)]
    assert "https://raw.githubusercontent.com/owner/repo/main/README.md" in text


# ---------------------------------------------------------------- address policy


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "2852039166",  # decimal
        "0xa9fea9fe",  # hex
        "0251.0376.0251.0376",  # octal
        "0xa9.254.43518",  # mixed, three parts
        "[::ffff:169.254.169.254]",  # IPv4-mapped IPv6
        "[::ffff:a9fe:a9fe]",
        "[64:ff9b::a9fe:a9fe]",  # NAT64
    ],
)
async def test_metadata_address_spellings_are_refused(root, net, host):
    res = await fetch(root, f"get http://{host}/latest/meta-data/")
    text = text_of(res)
    assert res.is_error and res.structured["error"]["kind"] == "web_fetch_processing_error"
    assert "169.254.169.254" in text
    assert "link-local" in text and "never fetched" in text
    assert net.connects == []


@pytest.mark.parametrize(
    "url, address",
    [
        ("http://[fd00:ec2::254]/", "fd00:ec2::254"),
        ("http://100.100.100.200/", "100.100.100.200"),
        ("http://[fe80::1%25eth0]/", "fe80::1"),
        ("http://0.0.0.0:8080/", "0.0.0.0"),
        ("http://[::]/", "::"),
        ("http://224.0.0.1/", "224.0.0.1"),
        ("http://255.255.255.255/", "255.255.255.255"),
        ("http://240.0.0.1/", "240.0.0.1"),
    ],
)
async def test_always_refused_addresses(root, net, url, address):
    res = await fetch(root, url)
    text = text_of(res)
    assert res.is_error, text
    assert f"Refused {url.split('%')[0]}" in text or "Refused http://[fe80::1" in text
    assert address in text and "never fetched" in text
    assert net.connects == []


async def test_metadata_host_names_refused_before_resolution(root, net):
    res = await fetch(root, "http://metadata.google.internal/computeMetadata/v1/ http://METADATA.GOOGLE.INTERNAL./x")
    text = text_of(res)
    assert res.is_error
    assert text.count("metadata.google.internal is a cloud metadata host name") == 2
    assert net.lookups == [] and net.connects == []


async def test_name_resolving_to_metadata_is_refused(root, net):
    net.answer("evil.example", ["169.254.169.254"])
    res = await fetch(root, "http://evil.example/latest/meta-data/")
    text = text_of(res)
    assert res.is_error
    assert "169.254.169.254 (resolved from evil.example) is a link-local address" in text
    assert net.connects == []


async def test_any_bad_address_among_several_refuses_the_host(root, net):
    net.answer("mixed.example", [PUBLIC_IP, "169.254.169.254"])
    res = await fetch(root, "http://mixed.example/")
    assert res.is_error and "169.254.169.254 (resolved from mixed.example)" in text_of(res)
    assert net.connects == []


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "127.000.000.001", "[::ffff:127.0.0.1]"])
async def test_loopback_spellings_are_normalised_and_allowed(root, web, host):
    res = await fetch(root, f"http://{host}:{web.port}/text")
    text = text_of(res)
    assert not res.is_error, text
    canonical = "[::ffff:7f00:1]" if host.startswith("[") else "127.0.0.1"
    assert f"=== [1] http://{canonical}:{web.port}/text ===" in text
    assert "plain text body" in text


async def test_private_deny_refuses_loopback_and_private(root, web, net):
    net.answer("intranet.example", ["10.1.2.3"])
    res = await fetch(
        root,
        f"{web.url('/text')} {web.url('/text', host='localhost')} http://intranet.example/ http://0x7f000001:{web.port}/",
        "--web-fetch-private",
        "deny",
    )
    text = text_of(res)
    assert res.is_error
    assert text.count("started with --web-fetch-private deny") == 4
    assert "127.0.0.1 is a loopback address" in text
    assert "127.0.0.1 (resolved from localhost) is a loopback address" in text
    assert "10.1.2.3 (resolved from intranet.example) is a private-network address" in text
    assert net.connects == []


async def test_private_deny_still_fetches_public_names(root, web, net):
    net.answer("public.example", [PUBLIC_IP])
    res = await fetch(root, f"http://public.example:{web.port}/echo-host", "--web-fetch-private", "deny")
    text = text_of(res)
    assert not res.is_error, text
    assert f"host=public.example:{web.port}" in text  # the Host header carries the name, not the address
    assert f"Address: {PUBLIC_IP}" in text
    assert net.connects == [(PUBLIC_IP, web.port)]


async def test_redirect_from_public_into_loopback_is_refused(root, web, net):
    net.answer("public.example", [PUBLIC_IP])
    target = web.url("/text")
    before = len(web.requests)
    res = await fetch(root, f"http://public.example:{web.port}/to?{target}")
    text = text_of(res)
    assert res.is_error
    assert f"Refused {target}: a redirect from a public address ({PUBLIC_IP}) into 127.0.0.1" in text
    assert "a loopback address" in text
    assert [p for p, _ in web.requests[before:]] == [f"/to?{target}"]  # the local URL was never requested
    assert net.connects == [(PUBLIC_IP, web.port)]


async def test_redirect_from_public_into_private_name_is_refused(root, web, net):
    net.answer("public.example", [PUBLIC_IP])
    net.answer("db.internal", ["192.168.1.10"])
    res = await fetch(root, f"http://public.example:{web.port}/to?http://db.internal/admin")
    text = text_of(res)
    assert res.is_error
    assert "into 192.168.1.10 (resolved from db.internal), a private-network address, is not followed" in text


async def test_redirect_public_to_public_and_local_to_local_are_followed(root, web, net):
    net.answer("public.example", [PUBLIC_IP])
    net.answer("other.example", [PUBLIC_IP_2])
    res = await fetch(
        root,
        f"http://public.example:{web.port}/to?http://other.example:{web.port}/text "
        f"{web.url('/to')}?{web.url('/json', host='localhost')}",
    )
    text = text_of(res)
    assert not res.is_error, text
    assert "Fetched 2 of 2" in text
    assert f"Final URL: http://other.example:{web.port}/text (after 1 redirect(s))" in text
    assert '"key": "value"' in text


async def test_redirect_to_another_scheme_is_refused(root, web):
    res = await fetch(root, f"{web.url('/to')}?file:///etc/passwd")
    text = text_of(res)
    assert res.is_error
    assert f"Refused the redirect from {web.url('/to')}?file:///etc/passwd" in text
    assert 'Unsupported protocol in URL "file:///etc/passwd"' in text


async def test_no_dns_rebinding_between_check_and_connect(root, web, net):
    # First answer public (checked), then the metadata address: a fetcher that resolved again to connect
    # would dial 169.254.169.254. It must resolve once and connect to what it checked.
    net.answer("rebind.example", [PUBLIC_IP], ["169.254.169.254"])
    res = await fetch(root, f"http://rebind.example:{web.port}/echo-host")
    text = text_of(res)
    assert not res.is_error, text
    assert net.lookups == ["rebind.example"]
    assert net.connects == [(PUBLIC_IP, web.port)]


async def test_every_hop_is_resolved_and_checked_again(root, web, net):
    net.answer("rebind.example", [PUBLIC_IP], ["169.254.169.254"])
    res = await fetch(root, f"http://rebind.example:{web.port}/to?/text")
    text = text_of(res)
    assert res.is_error
    assert "169.254.169.254 (resolved from rebind.example) is a link-local address" in text
    assert net.lookups == ["rebind.example", "rebind.example"]


async def test_unresolvable_name_is_reported(root, net):
    res = await fetch(root, "http://nowhere.invalid/")
    text = text_of(res)
    assert res.is_error and res.structured["error"]["kind"] == "web_fetch_fallback_failed"
    assert "the host name nowhere.invalid could not be resolved" in text


async def test_proxy_environment_is_not_used(root, web, net, monkeypatch):
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://10.9.9.9:3128")
    res = await fetch(root, web.url("/text"))
    assert not res.is_error, text_of(res)
    assert net.connects == [("127.0.0.1", web.port)]


async def test_backend_refuses_hosts_nobody_vetted():
    from coretools.sandbox.pinned_http import PinnedBackend

    backend = PinnedBackend(netpolicy.NETWORK)
    with pytest.raises(httpcore2.ConnectError, match="not checked against the address policy"):
        await backend.connect_tcp("unvetted.example", 80)


# ---------------------------------------------------------------- TLS: pinned address, name for SNI/verification


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d: Path = tmp_path_factory.mktemp("tls")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=coretools test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=secure.example")
    (d / "ext.cnf").write_text(
        "subjectAltName=DNS:secure.example\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n"
    )
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.pem",
        "-days", "2", "-extfile", "ext.cnf")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "srv.pem", d / "srv.key")
    server = Server(tls=ctx)
    server.ca = str(d / "ca.pem")
    server.sni: list[str] = []
    ctx.sni_callback = lambda sock, name, _ctx: server.sni.append(name)
    yield server
    server.close()


async def test_https_connects_to_the_pinned_address_with_the_name_for_sni(root, net, tls_server, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", tls_server.ca)
    net.answer("secure.example", [PUBLIC_IP], ["169.254.169.254"])
    res = await fetch(root, f"https://secure.example:{tls_server.port}/echo-host")
    text = text_of(res)
    assert not res.is_error, text
    assert f"host=secure.example:{tls_server.port}" in text
    assert tls_server.sni[-1] == "secure.example"  # SNI is the name
    assert net.connects == [(PUBLIC_IP, tls_server.port)]  # the socket went to the checked address


async def test_https_certificate_is_verified_against_the_name(root, net, tls_server, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", tls_server.ca)
    net.answer("impostor.example", [PUBLIC_IP])
    res = await fetch(root, f"https://impostor.example:{tls_server.port}/echo-host")
    text = text_of(res)
    assert res.is_error
    assert "CERTIFICATE_VERIFY_FAILED" in text or "certificate" in text.lower()


# ---------------------------------------------------------------- units and MCP


@pytest.mark.parametrize(
    "text, url",
    [
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("HTTP://Example.COM:80/a b", None),
        ("https://example.com:443/x?y=\u00e9", "https://example.com/x?y=%C3%A9"),
        ("http://[::ffff:7f00:1]:8080/", "http://[::ffff:7f00:1]:8080/"),
        ("http://b\u00fccher.example/", "http://xn--bcher-kva.example/"),
        ("http://example.com:99999/", None),
        ("http://256.1.1.1/", None),
        ("http://1.2.3.4.5/", None),
        ("http://exa_mple..com/", None),
        ("http://x.com\\@127.0.0.1/", None),
    ],
)
def test_parse_target(text, url):
    if url is None:
        with pytest.raises(UrlProblem, match="Malformed URL"):
            parse_target(text)
    else:
        assert parse_target(text).url == url


@pytest.mark.parametrize(
    "address, klass",
    [
        ("127.0.0.1", LOCAL),
        ("::1", LOCAL),
        ("10.0.0.1", LOCAL),
        ("172.16.0.1", LOCAL),
        ("192.168.1.1", LOCAL),
        ("100.64.0.1", LOCAL),
        ("198.18.0.1", LOCAL),
        ("fc00::1", LOCAL),
        ("2002:7f00:1::", LOCAL),  # 6to4 wrapping 127.0.0.1
        ("::127.0.0.1", LOCAL),
        ("169.254.169.254", BLOCKED),
        ("fe80::1", BLOCKED),
        ("fd00:ec2::254", BLOCKED),
        ("2002:a9fe:a9fe::", BLOCKED),
        ("0.1.2.3", BLOCKED),
        ("8.8.8.8", PUBLIC),
        ("2606:4700:4700::1111", PUBLIC),
        ("::ffff:8.8.8.8", PUBLIC),
    ],
)
def test_classify(address, klass):
    assert classify(ipaddress.ip_address(address))[0] == klass


async def test_published_over_mcp(root, mode, web):
    async with connect([root], mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        tool = tools["web_fetch"]
        assert tool.input_schema["required"] == ["prompt"]
        assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is True
        result = await client.call_tool("web_fetch", {"prompt": f"read {web.url('/json')}"})
        assert not result.is_error and '"key": "value"' in text_of(result)


def test_html_conversion_is_bounded():
    html = "<html><head><title>Big</title></head><body>" + "<p>para</p>" * 10_000 + "</body></html>"
    title, text = web_fetch.html_to_markdown(html, "http://x/", limit=2_000)
    assert title == "Big"
    assert text.count("para") < 200
    assert text.endswith("[Only the first 2,000 characters of this page's HTML were converted.]")
    _, whole = web_fetch.html_to_markdown(html, "http://x/")
    assert whole.count("para") == 10_000 and "were converted" not in whole


async def test_the_newest_direct_mode_url_is_the_prompt(root, web):
    by_prompt = await call_tool(root, "web_fetch", {"prompt": web.url("/html")})
    by_url = await call_tool(root, "web_fetch", {"url": web.url("/html")})
    assert not by_url.is_error and text_of(by_url) == text_of(by_prompt)
    assert "# Main Heading" in text_of(by_url)
