"""Where a webhook may go (spec §8): every address that is not global is refused, at
``webhook add`` and at every try, each range by an address of its own; an IPv6 address
that carries an IPv4 address is refused when that one is not global, however it carries
it. Literal addresses and ``localhost`` resolve without a network."""

from __future__ import annotations

from typing import Any

import pytest

from events_app.addresses import AddressRefused, resolve

pytestmark = pytest.mark.database_free

# One address in each range a webhook may not reach, by the range's name.
NOT_GLOBAL = {
    "IPv4 loopback": "127.0.0.1",
    "IPv4 loopback, not the first": "127.45.6.7",
    "this network": "0.0.0.0",
    "private 10/8": "10.1.2.3",
    "private 172.16/12": "172.31.255.254",
    "private 192.168/16": "192.168.1.1",
    "link-local (cloud metadata)": "169.254.169.254",
    "shared address space 100.64/10": "100.64.0.1",
    "shared address space, its end": "100.127.255.254",
    "IPv4 multicast": "224.0.0.251",
    "IPv4 multicast, administratively scoped": "239.255.255.250",
    "reserved 240/4": "240.0.0.1",
    "limited broadcast": "255.255.255.255",
    "IETF protocol assignments 192.0.0/24": "192.0.0.8",
    "documentation 192.0.2/24": "192.0.2.10",
    "benchmarking 198.18/15": "198.18.0.1",
    "IPv6 loopback": "::1",
    "IPv6 unspecified": "::",
    "IPv6 link-local": "fe80::1",
    "IPv6 unique-local fc00::/7": "fd12:3456:789a::1",
    "IPv6 site-local (deprecated)": "fec0::1",
    "IPv6 multicast, link scope": "ff02::1",
    "IPv6 multicast, global scope": "ff0e::1",
    "IPv6 documentation 2001:db8::/32": "2001:db8::1",
    "IPv6 documentation 3fff::/20": "3fff::1",
    "IPv6 discard-only 100::/64": "100::1",
    "NAT64 for local use 64:ff9b:1::/48": "64:ff9b:1::808:808",
    "IPv4-mapped loopback": "::ffff:127.0.0.1",
    "IPv4-mapped private": "::ffff:10.0.0.1",
    "IPv4-mapped link-local": "::ffff:169.254.169.254",
    "IPv4-compatible loopback": "::127.0.0.1",
    "IPv4-compatible private": "::192.168.0.1",
    "IPv4-translated loopback": "::ffff:0:127.0.0.1",
    "NAT64 of loopback": "64:ff9b::127.0.0.1",
    "NAT64 of the metadata address": "64:ff9b::a9fe:a9fe",
    "NAT64 of shared address space": "64:ff9b::100.64.0.1",
    "6to4 of loopback": "2002:7f00:1::1",
    "6to4 of private": "2002:c0a8:101::1",
    "Teredo of a private client": "2001:0:4136:e378:8000:63bf:f5ff:fffe",
}

# Public addresses, and IPv6 forms of a public IPv4 address (an IPv6-only network's
# DNS64 answers NAT64 addresses for every IPv4-only receiver).
PUBLIC = {
    "IPv4": "8.8.8.8",
    "IPv6": "2001:4860:4860::8888",
    "IPv4-mapped public": "::ffff:8.8.8.8",
    "NAT64 of a public address": "64:ff9b::808:808",
}


def url(address: str) -> str:
    return f"https://[{address}]/hook" if ":" in address else f"https://{address}/hook"


@pytest.fixture(autouse=True)
def private_refused(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False


@pytest.mark.parametrize("address", NOT_GLOBAL.values(), ids=NOT_GLOBAL.keys())
def test_an_address_that_is_not_global_is_refused(address: str) -> None:
    with pytest.raises(AddressRefused, match="not a public address"):
        resolve(url(address))


def test_a_name_that_resolves_to_loopback_is_refused() -> None:
    with pytest.raises(AddressRefused, match="localhost resolves to"):
        resolve("http://localhost:8000/hook")


@pytest.mark.parametrize("address", PUBLIC.values(), ids=PUBLIC.keys())
def test_a_public_address_is_connected_to_as_checked(address: str) -> None:
    target = resolve(url(address))
    assert (target.address, target.port, target.path) == (address, 443, "/hook")
