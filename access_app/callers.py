"""Who is calling: what a transport knows about a call, and the caller the guards make of it."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

# A caller without a key: "anon:<address>[:<client name>]"; with one: "key:<name>".
ANONYMOUS = "anon:"
KEY_OWNER = "key:"
# A caller with an OAuth access token counts as a key of this name: "oauth:<subject>". Key
# names hold no colon, so it is nobody else's, and its runs are a key's ("key:oauth:...").
OAUTH = "oauth:"
# A signed-in person: "staff:<user name>".
STAFF = "staff:"
# The permission that lets a person see every run (the "Ops" group holds it).
RUNS_VIEW = "runs_app.view_run"
# The permission to claim, answer and close stalled runs (the "Ops" and "Support lead"
# groups hold it).
RUNS_RESOLVE = "runs_app.resolve_run"


@dataclass(frozen=True)
class Limits:
    """An agent key's own limits (``createkey --rate-burst/--rate-per-second/--runs-per-day``,
    the admin's key form); ``None`` takes the server's setting."""

    burst: int | None = None
    per_second: float | None = None
    runs_per_day: int | None = None


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Transport:
    """What the transport knows about a call: where it came from, who says it is, and the
    agent key its request proved (``key_name``; "" when it presented none) with that key's
    own limits."""

    peer: str = ""
    client_name: str = ""
    client_version: str = ""
    key_name: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    key_limits: Limits = DEFAULT_LIMITS
    # The client's connection as the server saw it ("ADDRESS:PORT"): what tells one
    # conversation from another on calls that name no run and give no ref.
    connection: str = ""
    # The scopes of the OAuth access token the request proved (its subject is the
    # key_name "oauth:SUBJECT"); None when it proved none.
    token_scopes: frozenset[str] | None = None


@dataclass(frozen=True)
class Caller:
    """Who is calling: ``key`` owns runs and scopes failure counts ("key:NAME" for an agent
    key, "key:oauth:SUBJECT" for an OAuth access token, "staff:NAME" for a person,
    "anon:..." for a caller without a key); ``name`` is for the record; ``key_name`` is
    the agent key's name ("oauth:SUBJECT" for a token), when one was accepted;
    ``permissions`` are the rights a signed-in person holds (``app_label.codename``);
    ``address`` is a keyless caller's address, which its limits count by (its client
    name is its own to choose, so it cannot buy a fresh budget); ``limits`` are its key's
    own; ``scopes`` are an OAuth caller's (None for every other caller: no scope limits
    it)."""

    key: str
    name: str = ""
    permissions: frozenset[str] = frozenset()
    key_name: str = ""
    address: str = ""
    limits: Limits = DEFAULT_LIMITS
    scopes: frozenset[str] | None = None

    @property
    def limit_key(self) -> str:
        """The rate limit's bucket of this caller: its key, or a keyless caller's address."""
        return address_bucket(self.address) if self.key.startswith(ANONYMOUS) else self.key

    @property
    def runs_owned_by(self) -> tuple[str, str]:
        """The owners whose runs count as this caller's against a cap of runs a day: the
        key, or every keyless caller on the same address (``anon:ADDRESS`` alone, and
        followed by ``:`` and any client name)."""
        if self.key.startswith(ANONYMOUS):
            owner = ANONYMOUS + (self.address or "local")
            return owner, owner + ":"
        return self.key, ""


def address_bucket(peer: str) -> str:
    """The rate limit's bucket of a caller without a key: its address alone, whatever
    client name it sends. An IPv6 address counts by its /64, the block one host is
    usually given, so that walking through it makes no new buckets.

    >>> address_bucket("127.0.0.1"), address_bucket("2001:db8:1:2:a:b:c:d"), address_bucket("")
    ('anon:127.0.0.1', 'anon:2001:db8:1:2::/64', 'anon:local')
    """
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return ANONYMOUS + (peer[:64] or "local")
    if address.version == 6 and address.ipv4_mapped is None:
        return ANONYMOUS + str(ipaddress.ip_network(f"{address}/64", strict=False))
    return ANONYMOUS + str(getattr(address, "ipv4_mapped", None) or address)
