"""Values marked personal (spec §1.2, ADR 0087) through the JSON API: masked for Ops (the
values, the steps' inputs and every echo in their results), as given for a support lead;
and no log line of a run's calls holds a value.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from guidepost.mcp.dispatch import dispatch
from tests.runs_app.test_verify import AGENT

pytestmark = pytest.mark.django_db

GIVEN = {"member_id": "M00012345", "birth_date": "1985-04-01"}
BAD_POSTAL = "99-99999999"  # does not fit the pattern: echoed back in the result


def identity_run() -> str:
    started = dispatch("guide_start", {"flow_id": "identity_check", "values": GIVEN}, AGENT)
    run_id = str(started.payload["run_id"])
    dispatch("guide_answer", {"run_id": run_id, "values": {"postal_code": BAD_POSTAL}}, AGENT)
    return run_id


def test_the_api_masks_personal_values_for_ops_everywhere(ops_client: Any) -> None:
    run_id = identity_run()
    body = ops_client.get(f"/api/runs/{run_id}").json()
    assert body["values"]["member_id"] == "••••2345"
    assert body["values"]["birth_date"] == "••••4-01"
    answered = body["steps"][1]
    assert answered["input"]["values"]["postal_code"] == "••••9999"
    assert answered["result"]["status"] == "unmatched"
    text = str(body)
    for given in (*GIVEN.values(), BAD_POSTAL):
        assert given not in text


def test_the_api_shows_personal_values_to_a_support_lead(client: Any) -> None:
    lead = User.objects.create_user("lead", password="x", is_staff=True)
    lead.groups.add(Group.objects.get(name="Support lead"))
    client.force_login(lead)
    run_id = identity_run()
    body = client.get(f"/api/runs/{run_id}").json()
    assert body["values"]["member_id"] == GIVEN["member_id"]
    assert BAD_POSTAL in str(body["steps"][1])


def test_no_log_line_of_a_runs_calls_holds_a_value(
    caplog: pytest.LogCaptureFixture, django_capture_on_commit_callbacks: Any
) -> None:
    # Every logger the project writes to, whether or not it hands its lines to the root.
    loggers = [logging.getLogger(name) for name in ("guidepost", "access_app", "runs_app")]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.DEBUG), django_capture_on_commit_callbacks(execute=True):
            run_id = identity_run()
            dispatch("guide_status", {"run_id": run_id}, AGENT)
            dispatch("guide_close", {"run_id": run_id, "reason": "left"}, AGENT)
    finally:
        for logger in loggers:
            logger.removeHandler(caplog.handler)
    assert any(r.name == "guidepost.access" for r in caplog.records)  # the access log wrote
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for given in (*GIVEN.values(), BAD_POSTAL):
        assert given not in logged
