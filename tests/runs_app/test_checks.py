"""Check nodes end to end (ADR 0117): over the MCP dispatcher a run passes a check in the
same call as the answer that reached it; guide_status, the JSON API and the step record
what it took and read; the step stores its date, and ``verify`` replays the run on a later
day to the same branch. A flow without a check stores no date.
"""

from __future__ import annotations

from datetime import UTC, date, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.utils import timezone

from access_app.callers import Transport
from guidepost.mcp.dispatch import dispatch
from guidepost.mcp.tools import registry
from runs_app.models import Run
from runs_app.verification import verify

pytestmark = pytest.mark.django_db

AGENT = Transport(peer="127.0.0.1", client_name="pytest", client_version="1", key_name="checks")

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


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, AGENT)
    assert not outcome.is_error, outcome.payload
    declared = registry.get(tool)
    assert declared is not None and declared.output_schema is not None
    errors = jsonschema.Draft202012Validator(declared.output_schema).iter_errors(outcome.payload)
    assert not [e.message for e in errors], outcome.payload
    return dict(outcome.payload)


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
    assert [s.input.get("today") for s in steps] == [today().isoformat()] * 2
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


def test_a_flow_without_a_check_stores_no_date_with_its_steps() -> None:
    started = call("guide_start", {"flow_id": "refund_request"})
    run = Run.objects.get(public_id=started["run_id"])
    assert "today" not in run.steps.get().input
