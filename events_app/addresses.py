"""Where a webhook may go: http or https to a host whose every address is public.

A subscription's URL is checked when it is added and again at every try, on the addresses
the name resolves to then (a name can be pointed at 127.0.0.1 after it was added: DNS
rebinding); the try connects to the address that was checked, not to a second lookup.
``GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1`` lets private and loopback addresses through (a
receiver on the same machine or network, and the tests).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
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
    """Why ``url`` cannot be a subscription's (None: it can), without resolving it."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return f"{url} is not a URL"
    if parts.scheme not in ("http", "https"):
        return "a webhook URL starts with https:// (or http://)"
    if not parts.hostname:
        return f"{url} names no host"
    if parts.username or parts.password:
        return "a webhook URL carries no user name or password (the signature authenticates)"
    return None


def resolve(url: str) -> Target:
    """The URL's target, its name resolved now and every address checked.

    Raises AddressRefused for a URL that is not http(s), a name that does not resolve, or
    one that resolves to any private, loopback, link-local or otherwise non-public address
    (unless GUIDEPOST_WEBHOOK_ALLOW_PRIVATE)."""
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
            if not ipaddress.ip_address(address.split("%")[0]).is_global:
                raise AddressRefused(
                    f"{host} resolves to {address}, a private or loopback address; "
                    "set GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1 to allow such receivers"
                )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, addresses[0])
