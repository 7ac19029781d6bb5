"""A budget of refused requests per address, in this process.

A request refused for a bad or missing agent key costs a key lookup and an audit record:
a flood of them from one address once took a legitimate caller's median from 10 to 85
ms. Past ``GUIDEPOST_REFUSED_BURST`` refusals (refilled at
``GUIDEPOST_REFUSED_PER_SECOND``), a request from that address that does not prove a key
this process already knows is answered 429 at once. The buckets live in the process, so
a flood costs a dictionary look-up, not the statement it is trying to cause; with N
workers an address gets N budgets, still a bound, and at most ``max_addresses`` are kept.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from django.conf import settings

from access_app import keyring, ratelimit
from access_app.agent_keys import bearer_token, key_digest
from flowcore.common.errors import NotAuthenticated, RateLimited, Refusal
from flowcore.common.limits import REFUSED_ADDRESSES


class RefusalBudget:
    """Per-address token buckets of refused requests, thread-safe."""

    def __init__(
        self, max_addresses: int = REFUSED_ADDRESSES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_addresses = max_addresses
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, address: str, now: float) -> float:
        burst = float(settings.GUIDEPOST_REFUSED_BURST)
        tokens, stamp = self._buckets.get(address, (burst, now))
        return min(burst, tokens + max(0.0, now - stamp) * settings.GUIDEPOST_REFUSED_PER_SECOND)

    def _wait(self, tokens: float) -> float:
        return max(0.1, math.ceil((1.0 - tokens) / settings.GUIDEPOST_REFUSED_PER_SECOND * 10) / 10)

    def exhausted(self, address: str) -> float | None:
        """Seconds until ``address`` may be refused again, when its budget is spent;
        None while it has some left. Takes nothing."""
        if settings.GUIDEPOST_REFUSED_BURST == 0:
            return None
        with self._lock:
            if address not in self._buckets:
                return None
            tokens = self._level(address, self.clock())
        return None if tokens >= 1 else self._wait(tokens)

    def charge(self, address: str) -> float | None:
        """Count one refusal of ``address``: None when its budget had room for it, else
        the seconds until it has (the refusal becomes a 429)."""
        if settings.GUIDEPOST_REFUSED_BURST == 0:
            return None
        now = self.clock()
        with self._lock:
            tokens = self._level(address, now)
            allowed = tokens >= 1
            self._buckets[address] = (tokens - 1 if allowed else tokens, now)
            self._buckets.move_to_end(address)
            while len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)
        return None if allowed else self._wait(tokens)


refusal_budget = RefusalBudget()


def over_budget(retry_after: float) -> RateLimited:
    ratelimit.count_refusal("refused keys")
    return RateLimited(
        "rate limited",
        "too many requests from this address were refused (a missing, unknown or revoked key)",
        f"Wait {retry_after:g} seconds (retry_after), then call again with a valid agent key: "
        "Authorization: Bearer <key>.",
        retry_after=retry_after,
    )


def refuse_address_over_budget(address: str, authorization: str | None) -> None:
    """Raise RateLimited when ``address`` has spent its budget of refusals, unless the
    request carries a key this process has known as active (a good key behind the same
    address as a flood is still looked up and served)."""
    wait = refusal_budget.exhausted(address)
    if wait is None:
        return
    token = bearer_token(authorization)
    if token is not None and keyring.known(key_digest(token)):
        return
    raise over_budget(wait)


def authenticated[T](address: str, attempt: Callable[[], T]) -> T:
    """``attempt()`` (an agent key's check); its NotAuthenticated charged to ``address``'s
    budget, and raised as RateLimited once that is spent."""
    try:
        return attempt()
    except NotAuthenticated as refusal:
        raise refused(address, refusal) from None


def refused(address: str, refusal: Refusal) -> Refusal:
    """What to answer ``address`` for ``refusal`` (an authentication refusal): the refusal
    itself while the address has budget left, else RateLimited."""
    wait = refusal_budget.charge(address)
    return refusal if wait is None else over_budget(wait)
