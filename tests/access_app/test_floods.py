"""Floods of unauthenticated requests (issue 18; ADR 0072): each address has a budget of
refused requests in the process; past it the address is answered 429 in the error shape
with Retry-After and no key lookup, and its refusals are recorded as one audit record per
address and second with a count, not one per request. Another address is not affected.
The cost to a legitimate caller is a bench figure (docs/research/limits-under-floods.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx2
import pytest

from access_app import audit
from access_app.audit import Entry, RefusalSummaries
from access_app.floods import RefusalBudget
from tests.support.mcp_http import RPC_HEADERS, bearer, http_client
from tests.support.servers import Server, django_eval, guidepost_command, serving
from tests.support.waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_past_its_budget_of_refusals_waits_for_it_to_refill(settings: Any) -> None:
    settings.GUIDEPOST_REFUSED_BURST = 3
    settings.GUIDEPOST_REFUSED_PER_SECOND = 2.0
    clock = Clock()
    budget = RefusalBudget(clock=clock)

    assert [budget.charge("10.0.0.1") for _ in range(3)] == [None, None, None]
    assert budget.exhausted("10.0.0.1") == 0.5
    assert budget.charge("10.0.0.1") == 0.5
    assert budget.exhausted("10.0.0.2") is None  # another address has its own
    clock.now += 0.5
    assert budget.exhausted("10.0.0.1") is None
    assert budget.charge("10.0.0.1") is None


def test_the_budget_keeps_at_most_its_addresses(settings: Any) -> None:
    settings.GUIDEPOST_REFUSED_BURST = 1
    budget = RefusalBudget(max_addresses=100, clock=Clock())
    for i in range(1000):
        budget.charge(f"10.0.{i // 256}.{i % 256}")

    assert len(budget._buckets) == 100
    assert budget.exhausted("10.0.3.231") is not None  # the most recent are kept


def test_a_seconds_refusals_from_one_address_are_one_summary_with_a_count() -> None:
    clock = Clock()
    summaries = RefusalSummaries(clock=clock)
    bad = Entry(
        tool="POST /mcp", outcome="invalid key", status=401, duration_ms=1.0, peer="10.0.0.1"
    )
    for i in range(1000):
        summaries.add(Entry(**{**bad.__dict__, "duration_ms": i / 100}))
    summaries.add(Entry(**{**bad.__dict__, "peer": "10.0.0.2"}))

    assert summaries.due() == []  # the second is not over
    clock.now += 1
    due = sorted(summaries.due(), key=lambda e: e.peer)
    assert [(e.peer, e.count, e.duration_ms) for e in due] == [
        ("10.0.0.1", 1000, 9.99),
        ("10.0.0.2", 1, 1.0),
    ]
    assert {e.at.timestamp() for e in due if e.at} == {1000.0}
    assert not summaries.pending()


def test_past_its_kinds_refusals_are_summed_as_from_many_addresses() -> None:
    clock = Clock()
    summaries = RefusalSummaries(max_pending=2, clock=clock)
    for i in range(100):
        summaries.add(
            Entry(
                tool="POST /mcp",
                outcome="invalid key",
                status=401,
                duration_ms=1.0,
                peer=f"10.0.0.{i}",
            )
        )
    clock.now += 1

    due = sorted((e.peer, e.count) for e in summaries.due())
    assert due == [("(many)", 98), ("10.0.0.0", 1), ("10.0.0.1", 1)]


def test_a_summary_is_due_once_its_second_is_over_and_taken_once() -> None:
    clock = Clock()
    summaries = RefusalSummaries(clock=clock)
    bad = Entry(tool="GET /api/runs", outcome="not signed in", status=401, duration_ms=1.0)

    summaries.add(bad)
    summaries.add(bad)
    assert summaries.due() == []  # its second is not over
    clock.now += 1
    summaries.add(replace(bad, peer="10.0.0.9"))
    assert [(e.peer, e.count) for e in summaries.due()] == [("", 2)]
    assert summaries.due() == []  # taken: written once
    assert summaries.pending()  # the new second's, not over yet
    clock.now += 1
    assert [(e.peer, e.count) for e in summaries.due()] == [("10.0.0.9", 1)]
    assert not summaries.pending()


def test_importing_the_application_starts_no_loop_writing_refusals() -> None:
    """Only a served application's lifespan starts it: pytest imports guidepost.asgi for its
    doctests, and a writer in a test's process wrote refusals past the test's
    transaction, into every later test's database (over real HTTP, test_audit's lone API
    refusal pins that a served one writes them)."""
    import threading

    import guidepost.asgi  # noqa: F401

    assert "guidepost-refusals" not in {thread.name for thread in threading.enumerate()}


@pytest.mark.django_db(transaction=True)
def test_refusals_summed_in_the_last_second_are_written_as_the_lifespan_ends() -> None:
    """The served application's own lifespan, driven as uvicorn drives it: a refusal
    summed while it serves, its second not yet over, is written before the shutdown is
    reported done (no timer would write it once the process ends)."""
    from access_app.models import AuditRecord
    from guidepost.asgi import application

    refused = Entry(tool="GET /api/runs", outcome="not signed in", status=401, duration_ms=0.4)
    reported: list[str] = []

    async def serve_once() -> None:
        inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})

        async def send(message: dict[str, Any]) -> None:
            reported.append(message["type"])
            if message["type"] == "lifespan.startup.complete":
                audit.refusal_summaries.add(refused)  # as the gate sums it
                await inbox.put({"type": "lifespan.shutdown"})

        await application({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)

    asyncio.run(serve_once())

    assert reported == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    written = list(AuditRecord.objects.values_list("tool", "outcome", "status", "count"))
    assert written == [("GET /api/runs", "not signed in", 401, 1)]
    assert not audit.refusal_summaries.pending()


# --- over real HTTP -----------------------------------------------------------------------

BURST = 10
COUNTS = (
    "from django.db.models import Sum\n"
    "from access_app.models import AuditRecord\n"
    "rows = AuditRecord.objects.exclude(key_name='legit')\n"
    "result = [rows.count(), rows.aggregate(n=Sum('count'))['n'] or 0,"
    " sorted(set(rows.values_list('peer', 'outcome', 'status')))]"
)


@pytest.fixture(scope="module")
def flooded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    tmp = tmp_path_factory.mktemp("floods")
    with serving(
        tmp, env={"GUIDEPOST_REFUSED_BURST": str(BURST), "GUIDEPOST_REFUSED_PER_SECOND": "0.01"}
    ) as running:
        database_url = running.database_url
        done = guidepost_command(database_url, "createkey", "legit")
        assert done.returncode == 0, done.stderr
        yield running, done.stdout.splitlines()[-1]


def tool_call() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "guide_flows"}}


@pytest.mark.slow
def test_a_flood_of_bad_keys_turns_429_and_is_recorded_a_record_a_second(
    flooded: tuple[Server, str],
) -> None:
    server, key = flooded
    with http_client(timeout=30) as http:
        before = http.post(server.url, json=tool_call(), headers={**RPC_HEADERS, **bearer(key)})
        flood = [
            http.post(
                server.url, json=tool_call(), headers={**RPC_HEADERS, **bearer(f"gpk_{i:043d}")}
            )
            for i in range(60)
        ]
        api = http.get(server.base + "/api/runs", headers=bearer("gpk_" + "y" * 43))
        time.sleep(1.2)  # past the keyring's second: the good key is looked up again
        same_address = http.post(
            server.url, json=tool_call(), headers={**RPC_HEADERS, **bearer(key)}
        )
    # Another address (loopback has many) is not limited by this one's refusals.
    with http_client(
        timeout=30, transport=httpx2.HTTPTransport(local_address="127.0.0.2")
    ) as other:
        legit = other.post(server.url, json=tool_call(), headers={**RPC_HEADERS, **bearer(key)})

    statuses = [r.status_code for r in flood]
    assert statuses == [401] * BURST + [429] * (60 - BURST)
    limited = flood[-1]
    assert int(limited.headers["retry-after"]) >= 1
    body = limited.json()
    assert (body["error"], body["retryable"]) == ("rate limited", True)
    assert body["retry_after"] > 0
    assert api.status_code == 429 and api.json()["error"] == "rate limited"
    assert legit.status_code == 200 and not legit.json()["result"].get("isError")
    # A key this server knows is still served from the flooding address itself.
    assert before.status_code == 200
    assert same_address.status_code == 200, same_address.text

    def all_counted() -> list[Any] | None:
        counts: list[Any] = django_eval(server.database_url, COUNTS)
        return counts if counts[1] == 61 else None

    records, requests, kinds = wait_until(
        all_counted, 10, 0.3, message=lambda: str(django_eval(server.database_url, COUNTS))
    )
    assert requests == 61  # every refused request is counted ...
    assert records <= 8  # ... in a record per address, second and kind, not 61 records
    assert {tuple(kind) for kind in kinds} <= {
        ("127.0.0.1", "invalid key", 401),
        ("127.0.0.1", "rate limited", 429),
    }
