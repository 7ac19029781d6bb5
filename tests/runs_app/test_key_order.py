"""Key order an agent sees is the same on SQLite and PostgreSQL.

PostgreSQL's jsonb sorts object keys; results and values must not come back in
that order.
"""

from __future__ import annotations

import json

import pytest

from access_app.callers import Caller
from runs_app import agent_steps
from runs_app.models import Step
from runs_app.selectors import run_status

pytestmark = pytest.mark.django_db

CALLER = Caller(key="test:order", name="pytest")


def test_status_lists_values_in_the_flows_order_whatever_order_they_were_given_in() -> None:
    given = {"n_symptom": "frozen", "n_error_code": "E07"}
    run_id = agent_steps.run_start(caller=CALLER, flow_id="payment_failed", values=given, ref=None)[
        "run_id"
    ]

    status = run_status(caller=CALLER, run_id=run_id)

    assert list(status["values"]) == ["n_error_code", "n_symptom"]


def test_a_retry_with_at_returns_the_stored_result_with_its_keys_in_the_same_order() -> None:
    run_id = agent_steps.run_start(caller=CALLER, flow_id="payment_failed", values=None, ref=None)[
        "run_id"
    ]
    first = agent_steps.run_answer(
        caller=CALLER, run_id=run_id, choice="E01", values=None, at="n_error_code"
    )
    again = agent_steps.run_answer(
        caller=CALLER, run_id=run_id, choice="E01", values=None, at="n_error_code"
    )

    assert json.dumps(again) == json.dumps({**first, "repeated": True})
    assert list(again["node"]["accepts"]) == ["expired", "new", "valid"]
    stored = Step.objects.get(run__public_id=run_id, seq=2)
    assert stored.result_text == json.dumps(first, ensure_ascii=False, separators=(",", ":"))
