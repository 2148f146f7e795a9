"""Which web addresses web_fetch may reach, decided on the IP addresses a request will really connect to.

Three pieces, all without network I/O of their own:

- `parse_target(text)` turns a URL the model gave (or a redirect's Location) into a `Target`: http/https
  only, no credentials, no control characters, and the host normalised. Numeric hosts are read the way
  browsers and `inet_aton` read them (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1` are all 127.0.0.1),
  so the address that is checked is the address that would be dialled.
- `classify(ip)` puts an address in one of three classes: `blocked` (link-local, cloud metadata,
  unspecified, multicast, broadcast, reserved: never fetched), `local` (loopback and private networks) or
  `public`. IPv6 forms that wrap an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by the
  IPv4 address inside.
- `check_hop(...)` applies the operator's setting and the redirect rule (a public hop may not lead into a
  local one) to every resolved address of a hop, and raises `FetchRefused` naming the address and the rule.

`Network` is the only door to DNS and sockets: the fetcher resolves each host once through it, checks
every address, and then dials exactly those addresses through it (see `pinned_http`). Tests replace
`NETWORK` to control name resolution without sending traffic anywhere but 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

BLOCKED, LOCAL, PUBLIC = "blocked", "local", "public"

# Host names that only ever mean a cloud provider's instance metadata service.
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
    }
)
# Metadata services that do not live in 169.254.0.0/16 or fe80::/10.
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("fd00:ec2::254"),  # AWS (IPv6)
        ipaddress.ip_address("fd20:ce::254"),  # Google Cloud (IPv6)
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_LIMITED_BROADCAST = ipaddress.ip_address("255.255.255.255")

PRIVATE_OPTION = "--web-fetch-private"
_URL_SAFE = "/%:@!$&'()*+,;=-._~"


class UrlProblem(ValueError):
    """A URL that cannot be fetched for reasons of form (malformed, unsupported scheme, credentials)."""


class FetchRefused(Exception):
    """The address policy refused a hop. The message names the address and the rule."""


@dataclass(frozen=True)
class Target:
    url: str  # normalised: scheme://host[:port]/path?query, no fragment, no credentials
    scheme: str
    host: str  # lower case; an IP literal in canonical form (IPv6 without brackets)
    port: int
    ip: IPAddress | None  # set when the host is an IP literal

    @property
    def authority(self) -> str:
        """host[:port] as the Host header carries it."""
        host = f"[{self.host}]" if self.ip is not None and self.ip.version == 6 else self.host
        return host if self.port == (443 if self.scheme == "https" else 80) else f"{host}:{self.port}"

    @property
    def request_target(self) -> str:
        """path?query, as sent on the request line."""
        return self.url.split("://", 1)[1][len(self.authority) :]


# ---------------------------------------------------------------- parsing


def _ipv4_number(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        digits = part[2:]
        return int(digits, 16) if digits == "" or re.fullmatch(r"[0-9a-fA-F]+", digits) else None
    if len(part) > 1 and part.startswith("0"):
        return int(part[1:], 8) if re.fullmatch(r"[0-7]+", part[1:]) else None
    return int(part) if part.isdigit() else None


def _looks_numeric(label: str) -> bool:
    return bool(re.fullmatch(r"[0-9]+|0[xX][0-9a-fA-F]*", label))


def parse_ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address in any spelling browsers accept (1 to 4 parts, decimal, octal or hex), or None if
    `host` is a name. Raises UrlProblem for a host that ends in a number but is not a valid address."""
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # one trailing dot is allowed
    if not parts or not _looks_numeric(parts[-1]):
        return None
    numbers = [_ipv4_number(p) for p in parts] if all(parts) and len(parts) <= 4 else [None]
    if any(n is None for n in numbers):
        raise UrlProblem(f'"{host}" is not a valid IPv4 address')
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise UrlProblem(f'"{host}" is not a valid IPv4 address (a part is out of range)')
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")


def parse_target(text: str) -> Target:
    """Validate and normalise one URL; raises UrlProblem with a message that names the URL."""
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise UrlProblem(f'Malformed URL "{text}": it contains spaces or control characters.')
    if "\\" in text:
        raise UrlProblem(f'Malformed URL "{text}": it contains a backslash.')
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise UrlProblem(f'Malformed URL "{text}": {exc}.') from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        shown = f"{scheme}:" if scheme else "no scheme"
        raise UrlProblem(f'Unsupported protocol in URL "{text}" ({shown}). Only http:// and https:// are supported.')
    if not text[len(parts.scheme) :].startswith("://"):
        raise UrlProblem(f'Malformed URL "{text}": expected "{scheme}://" followed by a host.')
    if "@" in parts.netloc:
        raise UrlProblem(
            f'URL "{text}" contains credentials (user@host). Credentials in URLs are not sent; remove the part '
            "before '@'."
        )
    netloc = parts.netloc
    if netloc.startswith("["):
        end = netloc.find("]")
        raw_host, rest = (netloc[1:end], netloc[end + 1 :]) if end > 0 else ("", "x")
    else:
        raw_host, _, port_text = netloc.partition(":")
        rest = f":{port_text}" if _ else ""
    if rest and not re.fullmatch(r":[0-9]{0,5}", rest):
        raise UrlProblem(f'Malformed URL "{text}": the port is not a number.')
    port = int(rest[1:]) if len(rest) > 1 else (443 if scheme == "https" else 80)
    if not 0 < port < 65536:
        raise UrlProblem(f'Malformed URL "{text}": port {port} is out of range.')
    if not raw_host:
        raise UrlProblem(f'Malformed URL "{text}": it has no host.')
    ip: IPAddress | None
    if netloc.startswith("["):
        try:
            ip = ipaddress.IPv6Address(raw_host.replace("%25", "%"))
        except ValueError:
            raise UrlProblem(f'Malformed URL "{text}": "[{raw_host}]" is not a valid IPv6 address.') from None
        host = str(ip)
    else:
        try:
            host = raw_host.encode("idna").decode("ascii").lower() if not raw_host.isascii() else raw_host.lower()
        except UnicodeError:
            raise UrlProblem(f'Malformed URL "{text}": the host "{raw_host}" is not a valid domain name.') from None
        try:
            ip = parse_ipv4_loose(host)
        except UrlProblem as exc:
            raise UrlProblem(f'Malformed URL "{text}": {exc}.') from None
        if ip is not None:
            host = str(ip)
        elif not _HOST_NAME.fullmatch(host):
            raise UrlProblem(f'Malformed URL "{text}": the host "{raw_host}" is not a valid host name.')
    authority = Target("", scheme, host, port, ip).authority
    path = quote(parts.path or "/", safe=_URL_SAFE)
    query = quote(parts.query, safe=_URL_SAFE + "?")
    url = f"{scheme}://{authority}{path}" + (f"?{query}" if query else "")
    return Target(url=url, scheme=scheme, host=host, port=port, ip=ip)


# ---------------------------------------------------------------- classification


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if int(ip) >> 32 == 0 and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(int(ip))
    return None


def classify(ip: IPAddress) -> tuple[str, str]:
    """`(class, what)`: class is BLOCKED, LOCAL or PUBLIC; `what` describes the address for messages."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        inner = _embedded_ipv4(ip)
        if inner is not None:
            klass, what = classify(inner)
            return klass, f"{inner} wrapped in IPv6, {what}"
    if ip in METADATA_ADDRESSES:
        return BLOCKED, "a cloud metadata address"
    if ip.is_link_local:
        return BLOCKED, "a link-local address (where cloud metadata services live)"
    if ip.is_unspecified or (ip.version == 4 and int(ip) >> 24 == 0):
        return BLOCKED, "an unspecified ('this network') address"
    if ip.is_multicast or ip == _LIMITED_BROADCAST:
        return BLOCKED, "a multicast or broadcast address"
    if ip.is_loopback:
        return LOCAL, "a loopback address"
    if ip.is_reserved:
        return BLOCKED, "a reserved address"
    if not ip.is_global:
        return LOCAL, "a private-network address"
    return PUBLIC, "a public address"


def is_metadata_name(host: str) -> bool:
    return host.rstrip(".") in METADATA_NAMES


# ---------------------------------------------------------------- policy


@dataclass
class Hop:
    """One vetted hop: the addresses that may be dialled for `target`, in order."""

    target: Target
    addresses: list[str]
    public: bool


def check_hop(target: Target, addresses: list[IPAddress], *, allow_private: bool, after_public: str | None) -> Hop:
    """Apply the policy to every address `target` resolved to. `after_public` is the public address of an
    earlier hop of the same fetch (a redirect chain), if any. Returns the hop, or raises FetchRefused."""
    source = "" if target.ip is not None else f" (resolved from {target.host})"
    public = False
    for ip in addresses:
        klass, what = classify(ip)
        where = f"{ip}{source}"
        if klass == BLOCKED:
            raise FetchRefused(f"Refused {target.url}: {where} is {what}; link-local, cloud-metadata and non-unicast "
                          "addresses are never fetched.")
        if klass == LOCAL and not allow_private:
            raise FetchRefused(
                f"Refused {target.url}: {where} is {what}, and this server was started with "
                f"{PRIVATE_OPTION} deny, which refuses loopback and private-network addresses."
            )
        if klass == LOCAL and after_public:
            raise FetchRefused(
                f"Refused {target.url}: a redirect from a public address ({after_public}) into {where}, {what}, "
                "is not followed; a public site may not send the fetcher into the local network. Fetch the "
                "local URL directly if you meant to."
            )
        public = public or klass == PUBLIC
    return Hop(target, [str(_dialled(ip)) for ip in addresses], public)


def _dialled(ip: IPAddress) -> IPAddress:
    """The address to connect to: an IPv4-mapped IPv6 address is dialled as the IPv4 address it maps (what
    the kernel would do anyway), so the socket goes to exactly the address that was classified."""
    return ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip


def refuse_name(target: Target) -> None:
    if target.ip is None and is_metadata_name(target.host):
        raise FetchRefused(f"Refused {target.url}: {target.host.rstrip('.')} is a cloud metadata host name; metadata services are "
                      "never fetched.")


# ---------------------------------------------------------------- the door to DNS and sockets


class Network:
    """Name resolution and TCP connection. The real one; tests substitute their own."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        import anyio

        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        out: list[IPAddress] = []
        for _family, _type, _proto, _canon, sockaddr in infos:
            ip = ipaddress.ip_address(sockaddr[0])
            if ip not in out:
                out.append(ip)
        return out

    async def connect(self, address: str, port: int, timeout: float | None) -> Any:
        """An httpcore2 network stream connected to exactly `address` (an IP literal, never a name)."""
        import httpcore2

        return await httpcore2.AnyIOBackend().connect_tcp(address, port, timeout=timeout)


NETWORK = Network()
