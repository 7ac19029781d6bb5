"""Where a webhook, or a lookup's call, may go: http or https to a host whose every
address is public.

A subscription's or an endpoint's URL is checked when it is added and again at every try,
on the addresses the name resolves to then (a name can be pointed at 127.0.0.1 after it
was added: DNS rebinding); the try connects to the address that was checked, not to a
second lookup.
``GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1`` lets private and loopback addresses through (a
receiver or a system of record on the same machine or network, and the tests).

Python's ``is_global`` is not enough alone: it counts multicast as global, and judges
most IPv6 addresses that carry an IPv4 address (IPv4-compatible ``::127.0.0.1``, NAT64's
``64:ff9b::7f00:1``, 6to4's ``2002:7f00:1::``) by their IPv6 prefix, so the loopback or
private address inside would pass. Such an address is judged by the IPv4 address it
reaches as well.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import urlsplit

from django.conf import settings


class AddressRefused(Exception):
    """The URL may not be called; the message says why, in a sentence."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # the name, for Host and TLS
    port: int
    path: str  # path and query
    address: str  # the checked address to connect to


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a subscription's or an endpoint's (None: it can), without
    resolving it."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return f"{url} is not a URL"
    if parts.scheme not in ("http", "https"):
        return "the URL must start with https:// (or http://)"
    if not parts.hostname:
        return f"{url} names no host"
    if parts.username or parts.password:
        return "the URL may carry no user name or password (the signature authenticates)"
    return None


def resolve(url: str) -> Target:
    """The URL's target, its name resolved now and every address checked.

    Raises AddressRefused for a URL that is not http(s), a name that does not resolve, or
    one that resolves to any address that is not public (``is_public``), unless
    GUIDEPOST_WEBHOOK_ALLOW_PRIVATE."""
    problem = url_problem(url)
    if problem:
        raise AddressRefused(problem)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise AddressRefused(f"{host} does not resolve ({exc})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not addresses:
        raise AddressRefused(f"{host} does not resolve")
    if not settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE:
        for address in addresses:
            if not is_public(ipaddress.ip_address(address.split("%")[0])):
                raise AddressRefused(
                    f"{host} resolves to {address}, not a public address (private, "
                    "loopback, link-local, multicast or reserved); set "
                    "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1 to allow such receivers"
                )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, addresses[0])


# IPv6 forms whose last 32 bits are an IPv4 address a connection reaches: IPv4-compatible
# (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d) and NAT64's well-known prefix.
_IPV4_IN_LAST_32_BITS = tuple(
    ipaddress.IPv6Network(network) for network in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)
# Not globally reachable by IANA's registries, though Python 3.12.1 calls them global:
# IETF protocol assignments (the whole block: its two global anycast addresses serve no
# webhook), IPv6 site-local (deprecated), NAT64 for local use, SRv6 segment ids,
# documentation.
_NOT_GLOBAL = tuple(
    ipaddress.ip_network(network)
    for network in ("192.0.0.0/24", "fec0::/10", "64:ff9b:1::/48", "5f00::/16", "3fff::/20")
)


def is_public(address: IPv4Address | IPv6Address) -> bool:
    """Whether a webhook may connect to ``address``: a global unicast address and, for an
    IPv6 address that carries an IPv4 address, that one too.

    >>> [is_public(ipaddress.ip_address(a)) for a in ("8.8.8.8", "224.0.0.1", "::ffff:10.0.0.1")]
    [True, False, False]
    """
    if address.is_multicast or not address.is_global:
        return False
    if any(address in network for network in _NOT_GLOBAL):
        return False
    if isinstance(address, IPv4Address):
        return True
    carried = embedded_ipv4(address)
    return carried is None or is_public(carried)


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries, where the form's RFC puts it: the last 32
    bits (IPv4-mapped, -compatible, -translated, NAT64), bits 16 to 47 (6to4), or the
    client's address with its bits inverted in the last 32 (Teredo).

    >>> [str(embedded_ipv4(IPv6Address(a))) for a in ("64:ff9b::a00:1", "2002:a00:1::1")]
    ['10.0.0.1', '10.0.0.1']
    """
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in network for network in _IPV4_IN_LAST_32_BITS):
        return IPv4Address(int(address) & 0xFFFF_FFFF)
    return None
