"""Typed slots end to end (ADR 0116): an agent's JSON numbers and booleans through the
tools, results that conform to the declared output schemas, guide_status and the JSON API
giving typed JSON, personal numbers masked as text, a person's answer that does not fit
refused by the API, webhooks' values typed, and ``verify`` clean over all of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.contrib.auth.models import Group, User

from access_app.callers import Transport
from guidepost.mcp.dispatch import dispatch
from guidepost.mcp.tools import registry
from runs_app.events import run_event
from runs_app.models import Run
from runs_app.verification import verify
from tests.runs_app.test_resolve import NOTE, api_client, post_resolve

pytestmark = pytest.mark.django_db

AGENT = Transport(peer="127.0.0.1", client_name="pytest", client_version="1", key_name="typed")

TYPED = """\
id: typed_refund
title: A refund with typed details
category: payments
entry: c_order
on_unknown: escalate
nodes:
  - id: c_order
    kind: collect
    say: Collect the order's details
    slots:
      amount: {ask: the amount paid, required: true, type: number}
      bought_on: {ask: the date of purchase, required: true, type: date}
      customer_no: {ask: the customer number, type: integer, personal: true}
      gift: {ask: whether it was a gift, type: boolean}
      paid_by: {ask: how it was paid, type: choice, options: [card, bank_transfer]}
    next: e_done
  - id: e_done
    kind: end
    say: Confirm the refund
    outcome: refunded
"""


@pytest.fixture(autouse=True)
def typed_flow(flows_copy: Path, settings: Any) -> None:
    (flows_copy / "typed_refund.yaml").write_text(TYPED, encoding="utf-8")
    settings.GUIDEPOST_FLOWS_DIR = flows_copy


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, AGENT)
    assert not outcome.is_error, outcome.payload
    declared = registry.get(tool)
    assert declared is not None and declared.output_schema is not None
    errors = jsonschema.Draft202012Validator(declared.output_schema).iter_errors(outcome.payload)
    assert not [e.message for e in errors], outcome.payload
    return dict(outcome.payload)


def test_json_values_walk_a_typed_run_and_every_result_conforms() -> None:
    started = call("guide_start", {"flow_id": "typed_refund", "values": {"amount": "1.200,00"}})
    assert started["ignored"][0]["key"] == "amount"
    assert started["node"]["slots"]["paid_by"]["options"] == ["card", "bank_transfer"]
    run_id = started["run_id"]
    unmatched = call(
        "guide_answer", {"run_id": run_id, "values": {"amount": 12.5, "bought_on": "2024-3-1"}}
    )
    assert unmatched["rejected_slots"] == {"bought_on": "2024-3-1"}
    done = call(
        "guide_answer",
        {
            "run_id": run_id,
            "values": {
                "bought_on": "2024-03-01",
                "customer_no": 12345678,
                "gift": True,
                "paid_by": "Card",
            },
        },
    )
    assert done["status"] == "completed"

    status = call("guide_status", {"run_id": run_id})

    assert status["values"] == {
        "amount": 12.5,
        "bought_on": "2024-03-01",
        "customer_no": 12345678,
        "gift": True,
        "paid_by": "card",
    }
    assert verify([run_id]).problems == []


def test_the_api_and_the_page_give_typed_values_and_mask_a_personal_number_as_text(
    ops_client: Any,
) -> None:
    given = {"amount": "99.90", "bought_on": "2024-03-01", "customer_no": "12345678", "gift": "yes"}
    run_id = call("guide_start", {"flow_id": "typed_refund", "values": given})["run_id"]

    body = ops_client.get(f"/api/runs/{run_id}").json()
    page = ops_client.get(f"/r/{run_id}").content.decode()

    assert body["values"] == {
        "amount": 99.9,
        "bought_on": "2024-03-01",
        "customer_no": "••••5678",
        "gift": True,
    }
    assert "12345678" not in json.dumps(body)
    # The page shows each value's JSON text.
    for shown in ('">99.9</td>', '">true</td>', '">••••5678</td>'):
        assert shown in page, shown
    assert "12345678" not in page


def test_a_person_answer_that_does_not_fit_is_refused_and_one_that_fits_is_typed() -> None:
    run_id = call("guide_start", {"flow_id": "typed_refund", "values": {"amount": "__unknown__"}})[
        "run_id"
    ]
    lead = User.objects.create_user("maria", password="pw-maria", is_staff=True)
    lead.groups.add(Group.objects.get(name="Support lead"))
    client, headers = api_client(lead)
    answer = {"values": {"amount": "twelve", "bought_on": "2024-03-01"}, "note": NOTE}
    form = client.get(f"/r/{run_id}").content.decode()

    refused = post_resolve(client, headers, run_id, answer)
    answer["values"]["amount"] = 12
    answered = post_resolve(client, headers, run_id, answer)

    assert "it must be a number (type number)" in form  # the form says what fits
    assert (refused.status_code, refused.json()["error"]) == (422, "value does not fit")
    assert "it must be a number (type number)" in refused.json()["reason"]
    assert answered.status_code == 200, answered.content
    assert client.get(f"/api/runs/{run_id}").json()["values"]["amount"] == 12.0
    assert verify([run_id]).problems == []


def test_a_webhooks_values_are_typed_with_a_personal_number_masked() -> None:
    given = {"amount": 40, "bought_on": "2024-03-01", "customer_no": 12345678, "gift": False}
    run_id = call("guide_start", {"flow_id": "typed_refund", "values": given})["run_id"]

    event = run_event("run.completed", Run.objects.get(public_id=run_id))

    assert event.values == {
        "amount": 40.0,
        "bought_on": "2024-03-01",
        "customer_no": "••••5678",
        "gift": False,
    }
