"""A stalled run someone else has taken on, on its page: who took it and since when, as
a person reads a time ("taken by maria since 02:23 UTC"), and no form the server would
refuse; the taker still has the forms, and a refusal raced in between says the same.

Personas: maria and omar (support lead, ops: both may resolve runs).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from access_app.callers import Caller
from runs_app import agent_steps
from runs_app.models import Claim

pytestmark = pytest.mark.django_db

AGENT = Caller(key="key:desk", name="desk", key_name="desk")


def signed_in(name: str, group: str) -> Client:
    user = User.objects.create_user(name, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    client = Client()
    client.force_login(user)
    return client


def stalled_at_reason() -> str:
    started = agent_steps.run_start(
        caller=AGENT, flow_id="refund_request", values={"order_number": "A00118"}, ref=""
    )
    run_id = str(started["run_id"])
    agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="__unknown__", values=None, at=None)
    return run_id


def taken_by_maria_at_0223(run_id: str) -> Client:
    maria = signed_in("maria", "Support lead")
    maria.post(f"/r/{run_id}/claim", {"action": "claim"})
    at = timezone.now().replace(hour=2, minute=23, second=40, microsecond=0)
    assert Claim.objects.filter(run__public_id=run_id).update(at=at) == 1
    return maria


def panel(page: str) -> str:
    return page.split('id="run-resolve"')[1].split("</section>")[0]


def test_a_run_taken_by_another_shows_who_since_when_and_no_form() -> None:
    run_id = stalled_at_reason()
    maria = taken_by_maria_at_0223(run_id)

    seen = panel(signed_in("omar", "Ops").get(f"/r/{run_id}").content.decode())

    assert "Taken by <b>maria</b> since" in seen
    assert ">02:23 UTC</time>" in seen
    assert "Only maria can answer or close the run while it is taken" in seen
    assert 'name="note"' not in seen and 'name="reason"' not in seen
    assert "Release maria's claim" in seen  # omar may still free the run
    # maria, who holds it, answers it there.
    mine = panel(maria.get(f"/r/{run_id}").content.decode())
    assert "Taken by <b>maria</b> (you) since" in mine
    assert 'name="note"' in mine and 'name="reason"' in mine


def test_an_answer_raced_by_a_claim_is_refused_in_words_keeping_the_note() -> None:
    run_id = stalled_at_reason()
    omar = signed_in("omar", "Ops")
    omar.get(f"/r/{run_id}")  # the form, before maria takes the run on
    taken_by_maria_at_0223(run_id)

    refused = omar.post(f"/r/{run_id}/resolve", {"choice": "damaged", "note": "Photo by email."})

    assert refused.status_code == 409
    seen = panel(refused.content.decode())
    said = seen.split('role="alert">')[1].split("</div>")[0]
    assert "Run claimed by another person</b>: the run is taken by maria since 02:23 UTC." in said
    assert "T02:23" not in said
    assert "Your note, not sent: <q>Photo by email.</q>" in seen
    assert 'name="note"' not in seen
