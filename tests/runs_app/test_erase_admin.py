"""The run admin's "Erase" action (ADR 0086): a support lead (the "Support lead" group,
given "erase runs" by runs_app migration 0015) is asked for a reason, then each ended
run selected is erased in their name; an open run is left with its reason; Ops, without
the permission, is not offered the action and a forged request erases nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from runs_app.models import Run
from tests.runs_app.test_verify import verify, walked

pytestmark = pytest.mark.django_db
LIST = "/admin/runs_app/run/"


@pytest.fixture
def lead_client() -> Any:
    user = User.objects.create_user("lead", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="Support lead"))
    client = Client()
    client.force_login(user)
    return client


def test_a_support_lead_erases_ended_runs_with_a_reason_and_open_ones_are_left(
    lead_client: Any,
) -> None:
    ended, still_open = walked(close=True), walked(close=False)
    ids = [Run.objects.get(public_id=r).pk for r in (ended, still_open)]

    asked = lead_client.post(LIST, {"action": "erase_selected", "_selected_action": ids})
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Reason (recorded in each run's chain" in page and ended in page

    done = lead_client.post(
        LIST,
        {
            "action": "erase_selected",
            "_selected_action": ids,
            "confirm": "yes",
            "reason": "GDPR request 4411",
        },
        follow=True,
    )
    text = done.content.decode()
    assert f"Erased {ended}." in text
    assert f"Not erased {still_open}: run {still_open} is active" in text
    assert Run.objects.get(public_id=still_open).erased_at is None
    erase = Run.objects.get(public_id=ended).steps.get(tool="erase")
    assert (erase.caller, erase.input["reason"]) == ("staff:lead", "GDPR request 4411")
    assert verify(ended)[0]


def test_ops_is_not_offered_the_erase_action_and_a_forged_one_erases_nothing(
    ops_client: Any,
) -> None:
    run_id = walked(close=True)
    listing = ops_client.get(LIST)
    assert listing.status_code == 200
    assert "erase_selected" not in listing.content.decode()

    ops_client.post(
        LIST,
        {
            "action": "erase_selected",
            "_selected_action": [Run.objects.get(public_id=run_id).pk],
            "confirm": "yes",
            "reason": "forged",
        },
    )

    assert Run.objects.get(public_id=run_id).erased_at is None


def test_the_run_admin_shows_a_steps_input_only_to_people_who_may_see_personal_values(
    ops_client: Any, lead_client: Any
) -> None:
    run_id = walked(ref="T-8", close=True)
    change = f"{LIST}{Run.objects.get(public_id=run_id).pk}/change/"

    as_ops = ops_client.get(change)
    as_lead = lead_client.get(change)

    assert as_ops.status_code == as_lead.status_code == 200
    assert "A00118" not in as_ops.content.decode()  # neither the run's values nor inputs
    assert "A00118" in as_lead.content.decode()
