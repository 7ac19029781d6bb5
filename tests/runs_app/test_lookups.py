"""Lookups through the MCP dispatcher (ADR 0119), against a real endpoint on loopback: the
call is made with no transaction open; an endpoint on an address the guard refuses fails
the call; each call is an event with its latency; the run page shows what each lookup
answered and how long it took; a person answers a stalled lookup on the run's page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from events_app.endpoints import endpoint_add
from events_app.models import Event
from events_app.services import subscription_add
from flowcore.checks.tests_dir import check_flows_dir
from flowcore.common.limits import MAX_LOOKUPS_PER_STEP
from guidepost.mcp.dispatch import dispatch
from runs_app.capture import run_capture
from runs_app.lookups import LOOKUP_CALLS
from runs_app.models import Run
from runs_app.verification import verify
from tests.guidepost.mcp.test_lookups_http import FLOW, GUARDED, SHIPPED
from tests.runs_app.test_resolve import NOTE
from tests.runs_app.test_typed_values import AGENT, call
from tests.support.receiver import Receiver, receiving

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def lookup_flows(flows_copy: Path, settings: Any) -> None:
    (flows_copy / "order_lookup.yaml").write_text(FLOW, encoding="utf-8")
    (flows_copy / "order_lookup_guarded.yaml").write_text(GUARDED, encoding="utf-8")
    settings.GUIDEPOST_FLOWS_DIR = flows_copy
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture
def endpoint() -> Iterator[Receiver]:
    with receiving(reply=json.dumps(SHIPPED).encode()) as receiver:
        receiver.secret = endpoint_add(name="orders", url=receiver.url, timeout=1.0).secret
        yield receiver


def start(flow: str = "order_lookup", order: str = "A-1") -> dict[str, Any]:
    return call("guide_start", {"flow_id": flow, "values": {"order_id": order}})


@pytest.mark.django_db(transaction=True)
def test_the_call_is_made_with_no_transaction_open(endpoint: Receiver) -> None:
    # The dispatcher's connection (this thread's; ``connection`` would be the endpoint's
    # thread's own), seen from the endpoint while it holds the call.
    caller = connections["default"]
    seen: list[bool] = []
    endpoint.during = lambda: seen.append(caller.in_atomic_block)
    assert start()["outcome"] == "shipped"
    assert seen == [False]


def test_an_endpoint_on_an_address_the_guard_refuses_fails_the_call(
    endpoint: Receiver, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    result = start("order_lookup_guarded")
    assert result["outcome"] == "unchecked"
    assert result["looked_up"][0]["failed"].startswith(
        "lookup failed: address refused: 127.0.0.1 resolves to 127.0.0.1, not a public address"
    )
    assert not endpoint.received


def test_each_call_is_an_event_with_what_came_back_and_how_long_it_took(
    endpoint: Receiver,
) -> None:
    subscription_add(url=endpoint.url, events=["run.looked_up", "run.stalled"])
    endpoint.then = 500
    run_id = start()["run_id"]
    kinds = list(Event.objects.order_by("id").values_list("kind", flat=True))
    assert kinds == ["run.looked_up", "run.stalled"]
    looked = Event.objects.get(kind="run.looked_up").data
    assert looked["run_id"] == run_id
    assert looked["lookup"]["node"] == "l_status"
    assert looked["lookup"]["endpoint"] == "orders"
    assert looked["lookup"]["took"] == "__error__"
    assert looked["lookup"]["failed"].startswith("lookup failed: HTTP 500: ")
    assert looked["lookup"]["ms"] > 0
    assert Event.objects.get(kind="run.stalled").data["reason"] == "lookup_failed"


def test_the_run_page_shows_each_lookup_with_its_answer_and_latency(
    endpoint: Receiver, ops_client: Any
) -> None:
    run_id = start()["run_id"]
    page = ops_client.get(f"/r/{run_id}").content.decode()
    assert '<li id="lookup-l_status">' in page
    assert '<span class="mono">orders</span> answered <code>shipped</code> in ' in page
    assert 'Sent: <span class="mono">order_id</span> = A-1.' in page


def test_a_person_answers_a_stalled_lookup_on_the_runs_page(
    endpoint: Receiver, ops_client: Any
) -> None:
    endpoint.then = 500
    run_id = start()["run_id"]
    page = ops_client.get(f"/r/{run_id}").content.decode()
    assert 'name="choice" value="shipped"' in page
    assert 'name="slot:shipped_on"' in page
    assert 'the call of <span class="mono">orders</span> failed: HTTP 500' in page

    ops_client.post(
        f"/r/{run_id}/resolve",
        {"choice": "pending", "note": NOTE},
    )

    run = Run.objects.get(public_id=run_id)
    assert (run.state, run.outcome) == ("completed", "pending")
    assert len(endpoint.received) == 1
    assert verify([run_id]).problems == []


def test_a_captured_run_stubs_its_endpoint_and_passes_as_a_scenario(
    endpoint: Receiver, flows_copy: Path
) -> None:
    run_id = start()["run_id"]

    captured = run_capture(run_id=run_id)

    text = captured.path.read_text(encoding="utf-8")
    assert 'endpoints: {orders: {label: shipped, values: {shipped_on: "2026-03-01"}}}' in text
    checked = check_flows_dir(flows_copy, ["order_lookup"])
    assert checked.ok, checked
    assert len(endpoint.received) == 1, "a scenario calls no endpoint"


def test_what_a_personal_lookup_answered_is_masked_for_people_without_the_permission(
    endpoint: Receiver, ops_client: Any, flows_copy: Path
) -> None:
    personal = FLOW.replace("id: order_lookup", "id: order_lookup_personal").replace(
        "    call: orders\n", "    call: orders\n    personal: true\n"
    )
    (flows_copy / "order_lookup_personal.yaml").write_text(personal, encoding="utf-8")
    run_id = start("order_lookup_personal")["run_id"]

    page = ops_client.get(f"/r/{run_id}").content.decode()
    api = ops_client.get(f"/api/runs/{run_id}").content.decode()

    assert "2026-03-01" not in page and "2026-03-01" not in api
    assert "••••3-01" in page  # the value, masked as any personal value is


def chained(lookups: int) -> str:
    """A flow whose start passes ``lookups`` lookups in a row, each calling ``orders``."""
    nodes = "".join(
        f"""  - id: l_{i}
    kind: lookup
    say: look up part {i}
    call: orders
    returns: {{shipped: it left}}
    next: {{shipped: {f"l_{i + 1}" if i + 1 < lookups else "e_done"}}}
"""
        for i in range(lookups)
    )
    return f"""\
id: chained_lookups
title: Many lookups
category: payments
entry: l_0
nodes:
{nodes}  - id: e_done
    kind: end
    say: done
    outcome: done
"""


@pytest.mark.parametrize(
    ("lookups", "error"),
    [(MAX_LOOKUPS_PER_STEP, None), (MAX_LOOKUPS_PER_STEP + 1, "too many lookups")],
)
def test_a_step_makes_at_most_its_bound_of_calls(
    endpoint: Receiver, flows_copy: Path, lookups: int, error: str | None
) -> None:
    endpoint.reply = b'{"label": "shipped"}'
    (flows_copy / "chained_lookups.yaml").write_text(chained(lookups), encoding="utf-8")
    outcome = dispatch("guide_start", {"flow_id": "chained_lookups"}, AGENT)
    assert outcome.payload.get("error") == error
    assert Run.objects.exists() is (error is None), "a refused step writes nothing"
    assert len(endpoint.received) == MAX_LOOKUPS_PER_STEP


def test_a_retried_start_with_its_request_id_never_calls_again(endpoint: Receiver) -> None:
    given = {"flow_id": "order_lookup", "values": {"order_id": "A-9"}, "request_id": "req-9"}
    first = call("guide_start", given)
    again = call("guide_start", given)
    assert again == {**first, "repeated": True}
    assert len(endpoint.received) == 1


def counted(result: str) -> float:
    return LOOKUP_CALLS.labels(endpoint="orders", result=result)._value.get()


def test_each_call_is_counted_for_the_metrics_by_endpoint_and_result(
    endpoint: Receiver, ops_client: Any
) -> None:
    answered, failed = counted("answered"), counted("failed")
    start()
    endpoint.then = 500
    start("order_lookup_guarded")
    assert (counted("answered"), counted("failed")) == (answered + 1, failed + 1)
    scraped = ops_client.get("/metrics").content.decode()
    assert 'guidepost_lookup_calls_total{endpoint="orders",result="answered"}' in scraped
    assert 'guidepost_lookup_seconds_count{endpoint="orders"}' in scraped
