"""The rate limit under concurrency (issue 48, point 2): many conversations of one key at
once, through a real server with 2 workers, on the database store and on Redis, are
refused only when the bucket's arithmetic says so: no token taken from the bucket is
lost, and none is let through twice.

The arithmetic, with the client's clock (the server's moments lie inside the client's
windows):

- never past the bucket: allowed <= burst + rate x (last answer - first call sent);
- never refused early: when a call is refused at moment t, the bucket held less than a
  token, so allowed >= burst + rate x (t - first take) - TOLERANCE, t no earlier than
  that call was sent and the first take no later than the first answer came back.

TOLERANCE: the tokens taken from the bucket and not yet spent at that moment. A worker
holds at most one lease of a key's tokens (``lease_size - 1`` left once its first call
is served), so 2 workers hold at most 2 x 9 on the defaults; 1 more for the fraction of
a token the refused call found. (A lease's rest is dropped after a second, by design;
under this load every lease is spent well within it.)
"""

from __future__ import annotations

import http.client
import importlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from access_app import ratelimit
from tests.support.mcp_http import RPC_HEADERS
from tests.support.servers import Server, copy_flows, django_eval, fresh_database, start_server
from tests.support.stores import redis_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.hostile]

PROJECT_SETTINGS = importlib.import_module("guidepost.settings")
BURST = PROJECT_SETTINGS.GUIDEPOST_RATE_BURST
RATE = PROJECT_SETTINGS.GUIDEPOST_RATE_PER_SECOND
WORKERS = 2
TOLERANCE = WORKERS * (ratelimit.lease_size(BURST, RATE) - 1) + 1
ROUNDS = (40, 80, 120)  # conversations at once, each with a key of its own

MAKE_KEYS = f"""
import uuid
from access_app.services import key_create
result = [key_create(name="platform-" + uuid.uuid4().hex[:8])[1] for _ in range({len(ROUNDS)})]
"""


@dataclass
class Call:
    sent: float
    answered: float
    refused: bool


@pytest.fixture(params=["database", "redis"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, list[str]]]:
    """A server with 2 workers on the shipped limits, with the given store, and a key
    per round."""
    redis_url = redis_or_skip() if request.param == "redis" else ""
    with fresh_database(tmp_path) as database_url:
        keys = django_eval(database_url, MAKE_KEYS)
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            workers=WORKERS,
            env={
                "GUIDEPOST_RATE_BURST": str(BURST),
                "GUIDEPOST_RATE_PER_SECOND": str(RATE),
                "REDIS_URL": redis_url,
            },
        )
        try:
            yield server, keys
        finally:
            server.stop()


def tool_call(base: str, key: str, tool: str, arguments: dict[str, Any]) -> tuple[Call, Any]:
    """One call on a connection of its own (so the calls spread over both workers)."""
    address = urlsplit(base)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    sent = time.monotonic()
    try:
        connection.request("POST", "/mcp/", body, {**RPC_HEADERS, "Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        text = response.read()
    finally:
        connection.close()
    answered = time.monotonic()
    assert response.status == 200, (response.status, text[:500])
    result = json.loads(text)["result"]
    payload = json.loads(result["content"][0]["text"])
    refused = bool(result.get("isError"))
    assert not refused or payload["error"] == "rate limited", payload
    return Call(sent, answered, refused), payload


def conversation(
    base: str, key: str, start: threading.Barrier, calls: list[Call], errors: list[str]
) -> None:
    """A start and two answers, as an agent platform's conversation makes them; a refused
    call ends it (the next answer would be out of turn)."""
    start.wait()
    try:
        made, started = tool_call(base, key, "guide_start", {"flow_id": "refund_request"})
        calls.append(made)
        for answer in ({"values": {"order_number": "A00118"}}, {"choice": "changed_mind"}):
            if made.refused:
                return
            made, _ = tool_call(base, key, "guide_answer", {"run_id": started["run_id"], **answer})
            calls.append(made)
    except Exception as exc:
        errors.append(repr(exc))


def conversations_at_once(base: str, key: str, count: int) -> list[Call]:
    calls: list[Call] = []
    errors: list[str] = []
    start = threading.Barrier(count)
    threads = [
        threading.Thread(target=conversation, args=(base, key, start, calls, errors))
        for _ in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    return calls


def test_concurrent_conversations_of_one_key_are_refused_only_by_the_buckets_arithmetic(
    served: tuple[Server, list[str]],
) -> None:
    server, keys = served
    for count, key in zip(ROUNDS, keys, strict=True):
        calls = conversations_at_once(server.base, key, count)
        allowed = sum(not c.refused for c in calls)
        refused = [c for c in calls if c.refused]
        first_sent = min(c.sent for c in calls)
        first_answered = min(c.answered for c in calls)
        last_answered = max(c.answered for c in calls)
        seen = f"{count} conversations: {allowed} allowed, {len(refused)} refused"

        assert allowed <= BURST + RATE * (last_answered - first_sent), seen
        if refused:
            refused_at = max(c.sent for c in refused)
            owed = BURST + RATE * (refused_at - first_answered) - TOLERANCE
            assert allowed >= owed, f"{seen}: tokens lost ({owed:.0f} were owed)"
        if count == 40:
            # 120 calls, the burst: one could be refused only while a worker held a lease's
            # rest (9 tokens), i.e. if they all came within 9/40 s, before that refilled.
            assert refused == [], seen
