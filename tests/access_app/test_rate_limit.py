"""The rate limit (ADR 0034): a token bucket per caller, in the database (SQLite and
PostgreSQL passes) or in Redis, refusing with the error object (spec §7) and
``retry_after``, never counted in the failure streak, and one statement per lease of
tokens a process takes."""

from __future__ import annotations

import ipaddress
import secrets
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from access_app import ratelimit
from access_app.callers import Transport
from access_app.models import FailureStreak, RateBucket
from guidepost.mcp.dispatch import dispatch
from runs_app.models import Run
from tests.support.stores import redis_or_skip

pytestmark = pytest.mark.django_db


def fresh_address() -> str:
    """An address of its own per test: Redis is shared, and buckets there outlive the test."""
    return str(ipaddress.IPv4Address(0x0A000000 + secrets.randbelow(1 << 24)))


def transport(name: str = "", peer: str = "") -> Transport:
    return Transport(
        peer=peer or fresh_address(), client_name=name or f"rate-{uuid.uuid4().hex[:10]}"
    )


def call(tool: str, arguments: dict[str, Any], via: Transport) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, via)
    return {"is_error": outcome.is_error, **outcome.payload}


@pytest.fixture(params=["database", "redis"])
def store(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    """Each test runs on both stores."""
    settings.REDIS_URL = redis_or_skip() if request.param == "redis" else ""
    yield request.param


def test_a_caller_over_its_burst_is_rate_limited_with_retry_after(
    settings: Any, store: str
) -> None:
    settings.GUIDEPOST_RATE_BURST = 3
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01  # one token every 100 s: no refill in the test
    via = transport()
    accepted = [call("guide_flows", {}, via) for _ in range(3)]
    refused = call("guide_flows", {}, via)

    assert [r["is_error"] for r in accepted] == [False, False, False]
    assert refused.pop("is_error")
    assert refused["error"] == "rate limited"
    assert refused["retryable"] is True
    assert 99 <= refused["retry_after"] <= 100
    assert set(refused) == {"error", "reason", "next", "retryable", "retry_after"}
    assert "retry_after" in refused["next"]


def test_each_caller_has_its_own_bucket(settings: Any, store: str) -> None:
    settings.GUIDEPOST_RATE_BURST = 1
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    one, two = transport(), transport()

    assert not call("guide_flows", {}, one)["is_error"]
    assert call("guide_flows", {}, one)["error"] == "rate limited"
    assert not call("guide_flows", {}, two)["is_error"]


def test_a_keyless_caller_is_limited_by_its_address_whatever_name_it_sends(
    settings: Any, store: str
) -> None:
    """Issue 18: a new clientInfo.name on every request passed 80 of 80 calls and made a
    bucket row per name. The bucket is the address's: one row, and the 4th call refused."""
    settings.GUIDEPOST_RATE_BURST = 3
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    address = fresh_address()
    results = [call("guide_flows", {}, transport(f"name-{i}", address)) for i in range(8)]

    assert [r["is_error"] for r in results] == [False] * 3 + [True] * 5
    assert {r["error"] for r in results[3:]} == {"rate limited"}
    if store == "database":
        assert list(RateBucket.objects.values_list("caller", flat=True)) == [f"anon:{address}"]
    # Another address has its own bucket.
    assert not call("guide_flows", {}, transport("name-0"))["is_error"]


def test_an_ipv6_caller_is_limited_by_its_64_block(settings: Any, store: str) -> None:
    settings.GUIDEPOST_RATE_BURST = 2
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    block = f"2001:db8:{secrets.randbelow(1 << 16):x}:{secrets.randbelow(1 << 16):x}"
    results = [call("guide_flows", {}, transport(peer=f"{block}::{i + 1:x}")) for i in range(4)]

    assert [r["is_error"] for r in results] == [False, False, True, True]


def test_the_bucket_refills_at_its_rate_and_never_past_its_burst(settings: Any, store: str) -> None:
    settings.GUIDEPOST_RATE_BURST = 2
    settings.GUIDEPOST_RATE_PER_SECOND = 4.0
    key = f"refill-{uuid.uuid4().hex}"
    t = 1_000_000.0
    taken = [ratelimit.bucket_take(key, now=t) for _ in range(3)]
    assert [d.allowed for d in taken] == [True, True, False]
    assert taken[2].retry_after == pytest.approx(0.25)

    assert not ratelimit.bucket_take(key, now=t + 0.2).allowed  # 0.8 token: not yet
    assert ratelimit.bucket_take(key, now=t + 0.25).allowed  # a full token
    # An hour idle refills to the burst, not to 14,400 tokens.
    later = [ratelimit.bucket_take(key, now=t + 3600).allowed for _ in range(3)]
    assert later == [True, True, False]


def test_a_clock_behind_the_bucket_refills_nothing(settings: Any, store: str) -> None:
    """Another instance whose clock is 50 s late neither refills the bucket nor breaks it."""
    settings.GUIDEPOST_RATE_BURST = 1
    settings.GUIDEPOST_RATE_PER_SECOND = 1.0
    key = f"skew-{uuid.uuid4().hex}"
    assert ratelimit.bucket_take(key, now=5000.0).allowed
    assert not ratelimit.bucket_take(key, now=4950.0).allowed
    assert ratelimit.bucket_take(key, now=5001.0).allowed


def test_a_rate_limited_call_is_not_counted_in_the_failure_streak(
    settings: Any, store: str
) -> None:
    settings.GUIDEPOST_RATE_BURST = 2
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    via = transport()
    first = call("guide_flows", {"category": "nope"}, via)
    assert first["attempt"] == 1
    streak = FailureStreak.objects.get(caller__endswith=via.client_name, scope="*")
    call("guide_flows", {"category": "nope"}, via)
    limited = [call("guide_flows", {"category": "nope"}, via) for _ in range(5)]

    assert {r["error"] for r in limited} == {"rate limited"}
    assert all("attempt" not in r and r["retryable"] for r in limited)
    streak.refresh_from_db()
    assert streak.failures == 2  # the two refused by the flow, none of the rate-limited


def test_a_rate_limited_start_writes_no_run(settings: Any, store: str) -> None:
    settings.GUIDEPOST_RATE_BURST = 1
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    via = transport()
    call("guide_flows", {}, via)
    refused = call("guide_start", {"flow_id": "payment_failed"}, via)

    assert refused["error"] == "rate limited"
    assert Run.objects.count() == 0


def test_a_burst_of_zero_turns_the_limit_off(settings: Any) -> None:
    settings.GUIDEPOST_RATE_BURST = 0
    via = transport()
    assert not any(call("guide_flows", {}, via)["is_error"] for _ in range(50))
    assert RateBucket.objects.count() == 0


def test_the_limit_costs_one_statement_per_lease_and_none_within_it(settings: Any) -> None:
    """The bucket is one upsert with RETURNING, taking a lease of tokens: the call that
    takes it pays one statement, the calls it covers none."""
    via = transport()
    call("guide_flows", {}, via)  # the caller's streak row and bucket exist from here on

    def statements() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert not call("guide_flows", {}, via)["is_error"]
        return len(queries)

    settings.GUIDEPOST_RATE_BURST = 0
    without = statements()
    settings.GUIDEPOST_RATE_BURST = 30
    assert ratelimit.lease_size(30, settings.GUIDEPOST_RATE_PER_SECOND) == 3
    ratelimit.leases_forget()
    with_limit = [statements() - without for _ in range(4)]
    assert with_limit == [1, 0, 0, 1]


def test_a_failing_store_lets_the_call_through(settings: Any) -> None:
    """Redis unreachable (a closed port): the limit is not applied, the call is served."""
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.GUIDEPOST_RATE_BURST = 1
    via = transport()
    results = [call("guide_flows", {}, via) for _ in range(3)]

    assert [r["is_error"] for r in results] == [False, False, False]


def test_the_api_answers_429_with_retry_after(ops_client: Any, settings: Any) -> None:
    settings.GUIDEPOST_RATE_BURST = 2
    settings.GUIDEPOST_RATE_PER_SECOND = 0.5
    statuses = [ops_client.get("/api/runs").status_code for _ in range(3)]
    response = ops_client.get("/api/runs")

    assert statuses == [200, 200, 429]
    assert response.status_code == 429
    assert response["Retry-After"] == "2"
    body = response.json()
    assert (body["error"], body["retryable"]) == ("rate limited", True)
    assert 0 < body["retry_after"] <= 2


def test_a_rate_limited_page_answers_429(ops_client: Any, settings: Any) -> None:
    settings.GUIDEPOST_RATE_BURST = 1
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    assert ops_client.get("/").status_code == 200
    response = ops_client.get("/")

    assert response.status_code == 429
    assert response.json()["error"] == "rate limited"


def test_buckets_untouched_for_an_hour_are_pruned(settings: Any) -> None:
    settings.REDIS_URL = ""
    ratelimit.bucket_take("old", now=1000.0)
    ratelimit.bucket_take("recent", now=1000.0 + ratelimit.PRUNE_AFTER)

    assert ratelimit.buckets_prune(now=1001.0 + ratelimit.PRUNE_AFTER) == 1
    assert list(RateBucket.objects.values_list("caller", flat=True)) == ["recent"]


# --- leases: tokens taken ahead by a process -------------------------------------------------


def test_a_leased_caller_costs_one_statement_per_lease_not_per_call(store: str) -> None:
    key = f"lease-{uuid.uuid4().hex}"
    size = ratelimit.lease_size(120, 40.0)
    assert size == 10
    with CaptureQueriesContext(connection) as queries:
        taken = [
            ratelimit.bucket_take(key, burst=120, rate=40.0, now=1000.0, lease=True)
            for _ in range(3 * size)
        ]
    assert all(d.allowed for d in taken)
    upserts = [q for q in queries.captured_queries if "runs_app_ratebucket" in q["sql"]]
    assert len(upserts) == (3 if store == "database" else 0)


def test_leases_never_let_a_caller_past_its_bucket_however_many_processes_take_them(
    store: str,
) -> None:
    """Processes (each with leases of its own: forgotten between them here) draw on one
    bucket of 95 tokens at one moment, seven calls each. Each takes a lease of 9, spends
    7 and drops 2 (they were taken: the bucket never gives them twice), until the bucket
    holds less than a lease; its last 5 tokens are then spent one at a time."""
    key = f"lease-{uuid.uuid4().hex}"
    assert ratelimit.lease_size(95, 40.0) == 9
    allowed = []
    for _ in range(15):
        ratelimit.leases_forget()  # the next process
        allowed += [
            ratelimit.bucket_take(key, burst=95, rate=40.0, now=1000.0, lease=True).allowed
            for _ in range(7)
        ]
    assert allowed == [True] * 70 + [True] * 5 + [False] * 30


def test_a_bucket_holding_less_than_a_lease_is_spent_to_its_last_token(store: str) -> None:
    key = f"lease-{uuid.uuid4().hex}"
    taken = [
        ratelimit.bucket_take(key, burst=25, rate=40.0, now=1000.0, lease=True).allowed
        for _ in range(30)
    ]
    assert taken == [True] * 25 + [False] * 5


def test_a_lease_ends_after_a_second_and_its_rest_is_not_spent_later(store: str) -> None:
    key = f"lease-{uuid.uuid4().hex}"
    assert ratelimit.bucket_take(key, burst=20, rate=40.0, now=1000.0, lease=True).allowed
    with CaptureQueriesContext(connection) as queries:
        later = ratelimit.bucket_take(key, burst=20, rate=40.0, now=1001.5, lease=True)
    assert later.allowed
    upserts = [q for q in queries.captured_queries if "runs_app_ratebucket" in q["sql"]]
    assert len(upserts) == (1 if store == "database" else 0)


@pytest.mark.hostile
def test_threads_taking_leases_at_once_lose_no_token(settings: Any) -> None:
    """Issue 48: threads of one process that found the lease spent each took one and kept
    their own, overwriting the others': their tokens were taken from the bucket and never
    spent. 12 threads at one moment (no refill) get exactly the bucket's 95 tokens.
    (On Redis: threads here reach it on connections of their own, and the test's database
    is in a transaction they do not see; the server test has both stores.)"""
    settings.REDIS_URL = redis_or_skip()
    key = f"threads-{uuid.uuid4().hex}"
    start = threading.Barrier(12)
    allowed: list[bool] = []

    def calls() -> None:
        start.wait()
        allowed.extend(
            ratelimit.bucket_take(key, burst=95, rate=40.0, now=1000.0, lease=True).allowed
            for _ in range(10)
        )

    threads = [threading.Thread(target=calls) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert (allowed.count(True), allowed.count(False)) == (95, 25)


def test_a_store_that_fails_slowly_keeps_no_thread_waiting_for_another(settings: Any) -> None:
    """A Redis that accepts connections and never answers fails each take after its 1 s
    time-out. The thread taking a caller's lease fails so; the others waiting for it then
    take their own token, all at once, not one lease try after another (6 s here)."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        settings.REDIS_URL = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        key = f"silent-{uuid.uuid4().hex}"
        start = threading.Barrier(6)
        failed: list[float] = []

        def take() -> None:
            start.wait()
            began = time.monotonic()
            try:
                ratelimit.bucket_take(key, burst=120, rate=40.0, lease=True)
            except Exception:
                failed.append(time.monotonic() - began)

        threads = [threading.Thread(target=take) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)

    assert len(failed) == 6
    assert max(failed) < 3.5, failed  # the lease's try, then each thread's own at once
