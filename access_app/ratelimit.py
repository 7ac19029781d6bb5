"""Per-caller token buckets, shared by every worker and instance.

A caller's bucket holds up to ``burst`` tokens and refills at ``rate`` tokens a
second; a call takes one, and a call that finds less than one is refused with how
long to wait. The bucket is one row, updated by one atomic statement per call
(an upsert with RETURNING, the same SQL on SQLite and PostgreSQL), or, when
``REDIS_URL`` is set, one Lua script run atomically by Redis.

The clock is the caller's (this process's), passed in: instances with skewed
clocks never refill a bucket backwards (a time before the bucket's own stamp
refills nothing), they only refill it late by the skew.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from prometheus_client import Counter

logger = logging.getLogger(__name__)

# Buckets untouched this long are full again: ``buckets_prune`` deletes them.
PRUNE_AFTER = 3600.0

# Refusals for a budget spent, by which budget, for /metrics; each exists at zero from the
# start, so a scrape shows the series before the first refusal.
REFUSAL_SCOPES = ("calls", "drafts", "refused keys", "runs per day")
REFUSALS = Counter(
    "guidepost_rate_limit_refusals",
    "Calls refused for a spent budget: calls (the rate limit), drafts (an hour), "
    "refused keys (a flood of bad keys from one address), runs per day",
    ["scope"],
)
for _scope in REFUSAL_SCOPES:
    REFUSALS.labels(scope=_scope)


def count_refusal(scope: str) -> None:
    """Count a refusal for a spent budget (one of ``REFUSAL_SCOPES``)."""
    REFUSALS.labels(scope=scope).inc()


@dataclass(frozen=True)
class Decision:
    allowed: bool
    tokens: float  # left after this call
    retry_after: float  # seconds until a call would be allowed (0 when allowed)


def _decision(allowed: bool, tokens: float, rate: float) -> Decision:
    wait = 0.0 if allowed else max(0.0, (1.0 - tokens) / rate)
    return Decision(allowed, tokens, wait)


# --- the database -------------------------------------------------------------------------

# level = min(burst, tokens + max(0, now - stamp) * rate), written with CASE so that the
# same text runs on SQLite (no LEAST/GREATEST) and PostgreSQL. In ON CONFLICT ... DO
# UPDATE, the bare column names are the row's values before the update, "excluded" the
# proposed row (whose stamp is now).
_LEVEL = (
    "(CASE WHEN b.tokens + (CASE WHEN excluded.stamp > b.stamp "
    "THEN (excluded.stamp - b.stamp) * %(rate)s ELSE 0 END) > %(burst)s THEN %(burst)s "
    "ELSE b.tokens + (CASE WHEN excluded.stamp > b.stamp "
    "THEN (excluded.stamp - b.stamp) * %(rate)s ELSE 0 END) END)"
)
_UPSERT = (
    "INSERT INTO runs_app_ratebucket AS b (caller, tokens, stamp, allowed) "
    "VALUES (%(caller)s, %(first)s, %(now)s, %(first_allowed)s) "
    "ON CONFLICT (caller) DO UPDATE SET "
    f"tokens = CASE WHEN {_LEVEL} >= %(want)s THEN {_LEVEL} - %(want)s ELSE {_LEVEL} END, "
    f"allowed = ({_LEVEL} >= %(want)s), "
    "stamp = CASE WHEN excluded.stamp > b.stamp THEN excluded.stamp ELSE b.stamp END "
    "RETURNING tokens, allowed"
)


def _serialized() -> Any:
    """The database's queue for a write outside a transaction, where it has one
    (guidepost's SQLite backend: a process's writers queue for the write lock instead of
    sleeping in SQLite's busy handler); nothing elsewhere."""
    serialized = getattr(connection, "serialized", None)
    return serialized() if serialized is not None else contextlib.nullcontext()


def _db_take(key: str, burst: int, rate: float, now: float, want: int) -> Decision:
    params: dict[str, float | str | bool] = {
        "caller": key,
        "first": float(burst - want if burst >= want else burst),
        "now": now,
        "first_allowed": burst >= want,
        "rate": rate,
        "burst": float(burst),
        "want": float(want),
    }
    with _serialized(), connection.cursor() as cursor:
        cursor.execute(_UPSERT, params)
        tokens, allowed = cursor.fetchone()
    return _decision(bool(allowed), float(tokens), rate)


def buckets_prune(*, now: float | None = None) -> int:
    """Delete the database buckets untouched for PRUNE_AFTER seconds (they would be full
    again anyway); ``serve`` does it at start-up, off the path of every call. Redis
    buckets expire by themselves. Returns how many were deleted."""
    moment = time.time() if now is None else now
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM runs_app_ratebucket WHERE stamp < %s", [moment - PRUNE_AFTER])
        return int(cursor.rowcount)


# --- Redis --------------------------------------------------------------------------------

_LUA = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local saved = redis.call('HMGET', KEYS[1], 't', 's')
local tokens = tonumber(saved[1])
local stamp = tonumber(saved[2])
if tokens == nil or stamp == nil then
  tokens = burst
  stamp = now
end
if now > stamp then
  tokens = math.min(burst, tokens + (now - stamp) * rate)
  stamp = now
end
local allowed = 0
if tokens >= want then
  tokens = tokens - want
  allowed = 1
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 's', string.format('%.17g', stamp))
redis.call('EXPIRE', KEYS[1], ttl)
return {allowed, string.format('%.17g', tokens)}
"""
REDIS_PREFIX = "guidepost:rate:"
_redis_lock = threading.Lock()
_redis_script: Any = None
_redis_for: str = ""


def _script() -> Any:
    global _redis_script, _redis_for
    with _redis_lock:
        if _redis_script is None or _redis_for != settings.REDIS_URL:
            import redis  # only needed when REDIS_URL is set

            client = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=1.0, socket_connect_timeout=1.0
            )
            _redis_script = client.register_script(_LUA)
            _redis_for = settings.REDIS_URL
        return _redis_script


def _redis_take(key: str, burst: int, rate: float, now: float, want: int) -> Decision:
    ttl = math.ceil(burst / rate) + 60  # a bucket untouched this long is full anyway
    allowed, tokens = _script()(keys=[REDIS_PREFIX + key], args=[burst, rate, now, ttl, want])
    return _decision(bool(int(allowed)), float(tokens), rate)


# --- the one entry point ------------------------------------------------------------------


def bucket_take(
    key: str,
    *,
    burst: int | None = None,
    rate: float | None = None,
    now: float | None = None,
    lease: bool = False,
) -> Decision:
    """Take one token from ``key``'s bucket (``burst`` and ``rate`` default to the settings).

    With ``lease``, this process takes ``lease_size(burst, rate)`` tokens at once and
    spends them on its next calls for ``key`` within LEASE_SECONDS, with no statement
    each; what is left then is dropped. A process holds one lease per key, whatever
    its threads: they wait for the one taking it. So a caller is never let through
    beyond its bucket, and is refused early by at most what other processes' leases
    hold for it.
    Raises whatever the store raises: the guard decides what a failing store means.
    """
    burst = settings.GUIDEPOST_RATE_BURST if burst is None else burst
    rate = settings.GUIDEPOST_RATE_PER_SECOND if rate is None else rate
    size = lease_size(burst, rate) if lease else 1
    if size > 1:
        return _leased_take(key, burst, rate, now, size)
    return _store_take(key, burst, rate, time.time() if now is None else now, 1)


def _leased_take(key: str, burst: int, rate: float, now: float | None, size: int) -> Decision:
    # One thread of this process at a time takes a key's next lease; the others wait for
    # it and spend from it. Threads that each took a lease and kept their own would
    # overwrite each other's, and the tokens of every lease overwritten were lost: taken
    # from the bucket and never spent.
    while True:
        moment = time.time() if now is None else now
        with _leasing:
            held = _leases.get(key)
            if held is not None and held.tokens >= 1 and held.since <= moment < held.until:
                held.tokens -= 1
                return Decision(True, float(held.tokens), 0.0)
            low = (_low.get(key) or 0.0) > moment
            taking = None if low else _taking.get(key)
            if not low and taking is None:
                _taking[key] = threading.Event()  # this thread takes the next lease
        if low:
            return _store_take(key, burst, rate, moment, 1)
        if taking is None:
            return _take_lease(key, burst, rate, now, moment, size)
        taking.wait()


def _take_lease(
    key: str, burst: int, rate: float, now: float | None, moment: float, size: int
) -> Decision:
    """Take ``size`` tokens for this process (the caller marked the key in ``_taking``)
    and keep all but the one this call spends. A bucket holding less, or a store that
    fails, marks the key low: its calls take a token each for a second, at once rather
    than waiting their turn to take a lease."""
    decision: Decision | None = None
    try:
        decision = _store_take(key, burst, rate, moment, size)
    finally:
        with _leasing:
            if decision is not None and decision.allowed:
                _keep(_leases, key, _Lease(size - 1, moment, moment + LEASE_SECONDS))
            else:  # from when the store answered: a failing one may take its time-out
                answered = time.time() if now is None else moment
                _keep(_low, key, answered + LEASE_SECONDS)
            _taking.pop(key).set()
    return decision if decision.allowed else _store_take(key, burst, rate, moment, 1)


def _store_take(key: str, burst: int, rate: float, now: float, want: int) -> Decision:
    if settings.REDIS_URL:
        return _redis_take(key, burst, rate, now, want)
    return _db_take(key, burst, rate, now, want)


# --- leases: tokens taken ahead by this process -------------------------------------------

LEASE_SECONDS = 1.0
LARGEST_LEASE = 10
# Callers whose leases or "low" marks a process keeps (most recent first): a flood of
# new addresses can only push old entries out, never grow the process.
LEASES_KEPT = 10_000


@dataclass
class _Lease:
    tokens: int  # taken from the shared bucket, not yet spent
    since: float
    until: float  # then the rest is dropped


_leasing = threading.Lock()  # guards the three:
_leases: OrderedDict[str, _Lease] = OrderedDict()
_low: OrderedDict[str, float] = OrderedDict()  # taken from one token at a time until
# Keys whose next lease a thread is taking now: set when it is kept (or was refused). One
# entry per thread at most, so it needs no bound.
_taking: dict[str, threading.Event] = {}


def _keep[V](kept: OrderedDict[str, V], key: str, value: V) -> None:
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > LEASES_KEPT:
        kept.popitem(last=False)


def lease_size(burst: int, rate: float) -> int:
    """How many tokens a lease takes: at most a tenth of the burst, and at most what a
    quarter of a second refills, so that a lease dropped unspent each second costs a
    steady caller at most a quarter of its rate; 1 (no lease) for small limits.

    >>> lease_size(120, 40.0), lease_size(1_000_000, 40.0), lease_size(30, 10.0), lease_size(3, 1.0)
    (10, 10, 2, 1)
    """
    return max(1, min(LARGEST_LEASE, burst // 10, int(rate * LEASE_SECONDS / 4)))


def leases_forget() -> None:
    """Drop this process's leases (a test's next bucket starts from the store)."""
    with _leasing:
        _leases.clear()
        _low.clear()


def store_name() -> str:
    return "redis" if settings.REDIS_URL else "database"
