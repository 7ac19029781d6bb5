"""Check nodes end to end (ADR 0117): over the MCP dispatcher a run passes a check in the
same call as the answer that reached it; guide_status, the JSON API and the step record
what it took and read; the step stores its date, and ``verify`` replays the run on a later
day to the same branch. A flow without a check stores no date.
"""

from __future__ import annotations

from datetime import UTC, date, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from runs_app.erasure import run_erase
from runs_app.models import Run
from runs_app.verification import verify
from tests.runs_app.test_typed_values import call

pytestmark = pytest.mark.django_db

CHECKED = """\
id: checked_refund
title: A refund that a check routes
category: payments
entry: c_order
on_unknown: escalate
nodes:
  - id: c_order
    kind: collect
    say: Collect the refund's details
    slots:
      amount: {ask: the amount to refund, required: true, type: number}
      bought_on: {ask: the date of purchase, required: true, type: date}
      card: {ask: the card number, personal: true}
    next: k_route
  - id: k_route
    kind: check
    say: Refunds above 100 go to a supervisor; purchases older than 30 days are refused
    when:
      - if: amount > 100.0
        next: e_supervisor
      - if: bought_on < today - duration('720h')
        next: e_too_old
      - if: has(card) && card.size() > 4
        next: e_refunded
    else: e_refunded
  - id: e_supervisor
    kind: end
    say: Tell them a supervisor decides
    outcome: escalated
  - id: e_too_old
    kind: end
    say: Tell them it is too old to refund
    outcome: refused
  - id: e_refunded
    kind: end
    say: Confirm the refund
    outcome: refunded
"""


@pytest.fixture(autouse=True)
def checked_flow(flows_copy: Path, settings: Any) -> None:
    (flows_copy / "checked_refund.yaml").write_text(CHECKED, encoding="utf-8")
    settings.GUIDEPOST_FLOWS_DIR = flows_copy


def today() -> date:
    return timezone.now().astimezone(UTC).date()


def test_a_run_passes_a_check_in_the_same_call_and_verify_agrees_a_month_later() -> None:
    started = call("guide_start", {"flow_id": "checked_refund"})
    assert started["node"]["id"] == "c_order"
    recent = (today() - timedelta(days=20)).isoformat()

    done = call(
        "guide_answer",
        {"run_id": started["run_id"], "values": {"amount": 40, "bought_on": recent}},
    )

    assert done["status"] == "completed"
    assert done["outcome"] == "refunded"
    assert done["checked"] == [
        {
            "id": "k_route",
            "say": "Refunds above 100 go to a supervisor; purchases older than 30 days are refused",
            "took": "else",
            "next": "e_refunded",
        }
    ]
    status = call("guide_status", {"run_id": started["run_id"]})
    assert status["path"][-1] == {
        "id": "k_route",
        "kind": "check",
        "via": "check",
        "value": "else",
        "read": {"amount": 40.0, "bought_on": recent, "today": today().isoformat(), "card": None},
    }
    run = Run.objects.get(public_id=started["run_id"])
    steps = list(run.steps.order_by("seq"))
    # Only the step that passed the check stores the date: no other step reads it.
    assert [s.input.get("today") for s in steps] == [None, today().isoformat()]
    # Forty days on, the purchase would be too old; the replay decides on the step's date.
    later = timezone.now() + timedelta(days=40)
    assert verify([started["run_id"]], now=later).problems == []


def test_a_check_takes_the_first_condition_that_holds_over_mcp() -> None:
    old = (today() - timedelta(days=90)).isoformat()
    started = call(
        "guide_start", {"flow_id": "checked_refund", "values": {"amount": "250", "bought_on": old}}
    )
    assert started["outcome"] == "escalated"
    assert started["checked"][0]["took"] == "amount > 100.0"


def test_the_api_masks_a_personal_value_a_check_read(ops_client: Any) -> None:
    given = {"amount": "10", "bought_on": today().isoformat(), "card": "4929123412341234"}
    run_id = call("guide_start", {"flow_id": "checked_refund", "values": given})["run_id"]

    body = ops_client.get(f"/api/runs/{run_id}").json()

    assert body["path"][-1]["read"]["card"] == "••••1234"
    assert body["path"][-1]["value"] == "has(card) && card.size() > 4"


def test_a_step_that_passes_no_check_stores_no_date() -> None:
    started = call("guide_start", {"flow_id": "checked_refund"})
    run = Run.objects.get(public_id=started["run_id"])
    assert "today" not in run.steps.get().input


def test_a_flow_without_a_check_stores_no_date_with_its_steps() -> None:
    started = call("guide_start", {"flow_id": "payment_failed"})
    run = Run.objects.get(public_id=started["run_id"])
    assert "today" not in run.steps.get().input


def test_the_run_page_shows_the_condition_that_held_and_the_values_it_read(
    ops_client: Any,
) -> None:
    given = {"amount": "250", "bought_on": today().isoformat(), "card": "4929123412341234"}
    run_id = call("guide_start", {"flow_id": "checked_refund", "values": given})["run_id"]

    page = ops_client.get(f"/r/{run_id}").content.decode()

    assert '<li id="check-k_route">' in page
    assert "<code>amount &gt; 100.0</code> held, on to <span" in page
    assert '<span class="mono">amount</span> = 250.0' in page
    # The check drawn as its own shape, its edges labelled with their conditions.
    assert 'class="node kind-check state-checked' in page
    assert "4929123412341234" not in page


def test_erasing_a_run_keeps_the_condition_and_drops_the_values_a_check_read() -> None:
    given = {"amount": "250", "bought_on": today().isoformat(), "card": "4929123412341234"}
    run_id = call("guide_start", {"flow_id": "checked_refund", "values": given})["run_id"]

    assert run_erase(run_id=run_id, reason="asked by the person", by="staff:alice")

    path = Run.objects.get(public_id=run_id).engine_state["path"]
    assert path[-1] == ["k_route", "check", "check", "amount > 100.0", {}]
    assert "4929123412341234" not in str(path) and "250" not in str(path)
    verdict = verify([run_id])
    assert verdict.problems == []
