"""One URL fetched under the address policy, with redirects, a size cap and no DNS rebinding.

Imported lazily by web_fetch (it pulls in httpcore2). The connection pool is given a network backend that
cannot resolve names: for each hop the fetcher resolves the host once through `netpolicy.NETWORK`,
checks every address, and pins the vetted list for that host on the backend; the pool's `connect_tcp(host,
port)` then dials only those addresses, and refuses a host nobody vetted. The URL keeps the host name, so
the Host header, TLS SNI and certificate verification all use the name, while the socket goes to the
address that was checked. No proxy is consulted (a proxy would resolve the name itself).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from urllib.parse import urljoin

import anyio
import httpcore2

from coretools.sandbox import netpolicy
from coretools.sandbox.netpolicy import FetchRefused, Target, UrlProblem

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class FetchError(Exception):
    """This URL could not be fetched; the message says why (and names the URL)."""


@dataclass
class Fetched:
    requested: str
    final_url: str
    status: int
    reason: str
    content_type: str
    body: bytes
    address: str  # the IP the final response came from
    redirects: list[str] = field(default_factory=list)
    body_truncated: bool = False


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """A network backend that only connects to addresses the fetcher vetted for the host."""

    def __init__(self, network: netpolicy.Network) -> None:
        self.network = network
        self.pins: dict[str, list[str]] = {}
        self.connected: dict[str, str] = {}  # host -> address of the last connection made

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # noqa: ANN001
        addresses = self.pins.get(host)
        if not addresses:
            raise httpcore2.ConnectError(f"{host} was not checked against the address policy; not connecting")
        problems = []
        for address in addresses:
            try:
                stream = await self.network.connect(address, port, timeout)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout, OSError) as exc:
                problems.append(f"{address}: {exc or type(exc).__name__}")
                continue
            self.connected[host] = address
            return stream
        raise httpcore2.ConnectError(f"could not connect to {host} port {port} ({'; '.join(problems)})")

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # noqa: ANN001
        raise httpcore2.ConnectError("unix sockets are not used by web_fetch")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class _Decoder:
    """Content-Encoding decoding that never produces more than asked for (a gzip bomb stops at the cap)."""

    def __init__(self, encoding: str, url: str) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise FetchError(
                f"{url}: the server sent Content-Encoding '{encoding}', which web_fetch cannot decode "
                "(it asks for gzip or deflate only)."
            )
        self.coding = codings[0] if codings else None
        self.url = url
        self._d = None

    def _new(self, first: bytes):  # noqa: ANN202
        if self.coding == "deflate" and first[:1] != b"\x78":
            return zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
        return zlib.decompressobj(zlib.MAX_WBITS | (16 if self.coding != "deflate" else 0))

    def feed(self, data: bytes, room: int) -> bytes:
        """Decode `data`, producing at most `room + 1` bytes (one more than fits, to detect overflow)."""
        if self.coding is None:
            return data[: room + 1]
        out: list[bytes] = []
        produced = 0
        buf = data
        try:
            while buf and produced <= room:
                if self._d is None:
                    self._d = self._new(buf)
                chunk = self._d.decompress(buf, room + 1 - produced)
                out.append(chunk)
                produced += len(chunk)
                if self._d.eof:
                    buf = self._d.unused_data
                    self._d = None  # a further gzip member may follow
                else:
                    buf = self._d.unconsumed_tail
        except zlib.error as exc:
            raise FetchError(f"{self.url}: the {self.coding}-encoded body is corrupt ({exc}).") from None
        return b"".join(out)


async def _read_capped(response: httpcore2.Response, encoding: str, cap: int, url: str) -> tuple[bytes, bool]:
    decoder = _Decoder(encoding, url)
    parts: list[bytes] = []
    size = 0
    async for raw in response.aiter_stream():
        data = decoder.feed(raw, cap - size)
        if size + len(data) > cap:
            parts.append(data[: cap - size])
            return b"".join(parts), True
        parts.append(data)
        size += len(data)
    return b"".join(parts), False


def _header(response: httpcore2.Response, name: bytes) -> str:
    for key, value in response.headers:
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return ""


async def fetch(
    url: str,
    *,
    allow_private: bool,
    max_bytes: int,
    max_redirects: int,
    user_agent: str,
    accept: str,
) -> Fetched:
    """Fetch one URL (already validated by `netpolicy.parse_target`). Raises FetchError or FetchRefused."""
    network = netpolicy.NETWORK
    backend = PinnedBackend(network)
    target = netpolicy.parse_target(url)
    redirects: list[str] = []
    after_public: str | None = None
    pool = httpcore2.AsyncConnectionPool(
        ssl_context=None,  # httpcore2's default: the system trust store, verifying the host *name*
        network_backend=backend,
        max_connections=4,
        http1=True,
        http2=False,
    )
    async with pool:
        while True:
            hop = await _vet(target, network, allow_private=allow_private, after_public=after_public)
            backend.pins[target.host] = hop.addresses
            request_url = httpcore2.URL(
                scheme=target.scheme.encode(),
                host=target.host.encode(),
                port=target.port,
                target=target.request_target.encode(),
            )
            headers = [
                (b"Host", target.authority.encode()),
                (b"User-Agent", user_agent.encode()),
                (b"Accept", accept.encode()),
                (b"Accept-Encoding", b"gzip, deflate"),
            ]
            try:
                async with pool.stream("GET", request_url, headers=headers) as response:
                    address = backend.connected.get(target.host, hop.addresses[0])
                    location = _header(response, b"location")
                    if response.status in REDIRECT_STATUSES and location:
                        if hop.public and after_public is None:
                            after_public = address
                        target = _next_hop(target, location, redirects, max_redirects)
                        continue
                    body, truncated = await _read_capped(
                        response, _header(response, b"content-encoding"), max_bytes, target.url
                    )
                    reason = response.extensions.get("reason_phrase", b"")
                    return Fetched(
                        requested=url,
                        final_url=target.url,
                        status=response.status,
                        reason=reason.decode("latin-1", "replace") if isinstance(reason, bytes) else "",
                        content_type=_header(response, b"content-type"),
                        body=body,
                        address=address,
                        redirects=redirects,
                        body_truncated=truncated,
                    )
            except httpcore2.TimeoutException as exc:
                raise FetchError(f"{target.url}: the server did not answer in time ({type(exc).__name__}).") from None
            except httpcore2.NetworkError as exc:
                raise FetchError(f"{target.url}: {exc or type(exc).__name__}.") from None
            except httpcore2.ProtocolError as exc:
                raise FetchError(f"{target.url}: the server broke the HTTP protocol ({exc}).") from None


async def _vet(target: Target, network: netpolicy.Network, *, allow_private: bool, after_public: str | None):  # noqa: ANN202
    netpolicy.refuse_name(target)
    if target.ip is not None:
        addresses = [target.ip]
    else:
        try:
            addresses = await network.resolve(target.host, target.port)
        except OSError as exc:
            raise FetchError(f"{target.url}: the host name {target.host} could not be resolved ({exc}).") from None
        if not addresses:
            raise FetchError(f"{target.url}: the host name {target.host} has no addresses.")
    return netpolicy.check_hop(target, addresses, allow_private=allow_private, after_public=after_public)


def _next_hop(target: Target, location: str, redirects: list[str], max_redirects: int) -> Target:
    following = urljoin(target.url, location)
    if len(redirects) >= max_redirects:
        raise FetchError(
            f"{redirects[0] if redirects else target.url}: more than {max_redirects} redirects "
            f"(the last one pointed to {following}); fetch the final address directly."
        )
    redirects.append(target.url)
    try:
        return netpolicy.parse_target(following)
    except UrlProblem as exc:
        raise FetchRefused(f"Refused the redirect from {target.url}: {exc}") from None
