"""The inbox (the ops page ``/``) and a stalled run's page for a person (spec §5.9, ADR
0080): waiting runs first, the longest waiting first, with their hand-over note; who took
a run on, for everyone to see; the views "waiting" and "mine"; the form that answers the
node where a run stalled, and what it shows when refused.

Personas: maria and omar (support lead, ops: may resolve), vic (may only read runs).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.template import Context, Template
from django.test import Client

from access_app.callers import Caller
from runs_app import adoption, agent_steps, moves, selectors
from runs_app.models import Claim, Run, Step
from runs_app.verification import verify
from tests.support.drafting import REFUND_REWORDED

pytestmark = pytest.mark.django_db

AGENT = Caller(key="key:desk", name="desk", key_name="desk")


def signed_in(name: str, group: str | None) -> Client:
    user = User.objects.create_user(name, is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    else:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="runs_app", codename="view_run")
        )
    client = Client()
    client.force_login(user)
    return client


def start(values: dict[str, str] | None = None, ref: str = "") -> str:
    started = agent_steps.run_start(caller=AGENT, flow_id="refund_request", values=values, ref=ref)
    return str(started["run_id"])


def stall_at_order(ref: str = "") -> str:
    run_id = start(ref=ref)
    agent_steps.run_answer(
        caller=AGENT, run_id=run_id, choice=None, values={"order_number": "__unknown__"}, at=None
    )
    return run_id


def stall_at_reason() -> str:
    run_id = start({"order_number": "A00118"})
    agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="__unknown__", values=None, at=None)
    return run_id


def rows(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('data-run="')[1:]]


def test_the_inbox_lists_waiting_runs_first_longest_waiting_first() -> None:
    older, newer = stall_at_order("older"), stall_at_order("newer")
    Run.objects.filter(public_id=older).update(
        stalled_at=Run.objects.get(public_id=older).stalled_at - timedelta(hours=2)
    )
    active = start(ref="active")  # the most recent activity, yet after the waiting runs
    client = signed_in("maria", "Support lead")

    html = client.get("/").content.decode()

    assert rows(html) == [older, newer, active]
    assert "The refund could not be decided by the procedure." in html  # the hand-over note
    assert "waiting since" in html


def row_of(html: str, run_id: str) -> str:
    return html.split(f'data-run="{run_id}"', 1)[1].split("</tr>", 1)[0]


def shown_as(moment: datetime) -> str:
    """A time as the page writes it in ``<time datetime=…>``."""
    return Template("{{ t|date:'c' }}").render(Context({"t": moment}))


def test_waiting_since_is_the_stall_not_a_later_adoption_or_move(
    flows_copy: Path, settings: Any
) -> None:
    settings.GUIDEPOST_FLOWS_DIR, settings.GUIDEPOST_FLOWS_POLL = flows_copy, 0
    adopted, moved, later = stall_at_order("adopted"), stall_at_order("moved"), stall_at_order()
    stalls = {
        r: Step.objects.get(run__public_id=r, status="stalled").created_at for r in (adopted, moved)
    }
    adoption.run_adopt(run_id=adopted, owner="key:other", by="staff:maria")
    (flows_copy / "refund_request.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    moves.runs_move(flow_id="refund_request", by="staff:maria", run_ids=[moved])
    assert Run.objects.get(public_id=moved).steps.filter(tool="move").exists()

    html = signed_in("maria", "Support lead").get("/").content.decode()

    assert rows(html) == [adopted, moved, later]  # the longest waiting first
    for run_id, stall in stalls.items():
        assert f'waiting since <time datetime="{shown_as(stall)}"' in row_of(html, run_id)
    assert verify([adopted, moved, later]).problems == []


def test_a_claim_is_visible_to_everyone_and_mine_lists_only_my_runs() -> None:
    taken, free = stall_at_order(), stall_at_order()
    maria, omar = signed_in("maria", "Support lead"), signed_in("omar", "Ops")

    claimed = maria.post(f"/r/{taken}/claim", {"action": "claim", "back": "/?view=waiting"})

    assert (claimed.status_code, claimed["Location"]) == (303, "/?view=waiting")
    seen = omar.get("/").content.decode()
    assert "taken by <b>maria</b>" in seen
    assert rows(maria.get("/?view=mine").content.decode()) == [taken]
    assert rows(omar.get("/?view=mine").content.decode()) == []
    assert sorted(rows(omar.get("/?view=waiting").content.decode())) == sorted([taken, free])
    assert 'Taken by me <span class="count">1</span>' in maria.get("/").content.decode()
    # omar cannot take it over without releasing it; the page says why
    refused = omar.post(f"/r/{taken}/claim", {"action": "claim"}, follow=True)
    assert "the run is taken by maria since" in refused.content.decode()
    omar.post(f"/r/{taken}/claim", {"action": "release"})
    assert not Claim.objects.exists()


def test_a_person_without_the_permission_sees_claims_but_no_forms() -> None:
    run_id = stall_at_order()
    signed_in("maria", "Support lead").post(f"/r/{run_id}/claim", {"action": "claim"})
    vic = signed_in("vic", None)

    inbox = vic.get("/").content.decode()
    page = vic.get(f"/r/{run_id}").content.decode()

    assert "taken by <b>maria</b>" in inbox
    assert "Take it on" not in inbox
    assert "Taken by <b>maria</b>" in page
    assert 'action="/r/' not in page.split('id="run-resolve"')[1].split("</section>")[0]
    assert vic.post(f"/r/{run_id}/resolve", {"note": "x"}).status_code == 403


def test_the_form_offers_an_ask_nodes_labels_with_their_meanings() -> None:
    run_id = stall_at_reason()

    html = signed_in("maria", "Support lead").get(f"/r/{run_id}").content.decode()

    assert 'name="choice" value="damaged"' in html
    assert "The item arrived broken, damaged, or does not work" in html
    assert '<textarea name="note"' in html


def test_the_form_offers_a_collects_empty_slots_with_hints_and_patterns() -> None:
    run_id = stall_at_order()

    html = signed_in("maria", "Support lead").get(f"/r/{run_id}").content.decode()

    assert 'name="slot:order_number"' in html
    assert "The order number is the letter A followed by five digits" in html
    assert "<code>A[0-9]{5}</code>" in html


def test_the_form_and_guide_status_list_the_same_slots_of_a_stalled_collect() -> None:
    """The required slots stalled as unknown are what the person must give: both the
    form and the agent's node view list them, with the optional ones."""
    started = agent_steps.run_start(caller=AGENT, flow_id="identity_check", values=None, ref="")
    run_id = str(started["run_id"])
    agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="__unknown__", values=None, at=None)

    html = signed_in("maria", "Support lead").get(f"/r/{run_id}").content.decode()
    status = selectors.run_status(caller=AGENT, run_id=run_id)

    form = re.findall(r'name="slot:([a-z_0-9]+)"', html)
    assert form == list(status["node"]["slots"])
    assert form == ["member_id", "birth_date", "postal_code", "kana_name", "phone_last4"]


def test_resolving_on_the_page_moves_the_run_on_and_says_so() -> None:
    run_id = stall_at_reason()
    maria = signed_in("maria", "Support lead")

    answered = maria.post(f"/r/{run_id}/resolve", {"choice": "damaged", "note": "Photo seen."})

    assert (answered.status_code, answered["Location"]) == (303, f"/r/{run_id}")
    page = maria.get(f"/r/{run_id}").content.decode()
    assert "Resolved. The run is active at n_photos" in page
    assert 'id="resolve-title"' not in page  # nothing left to resolve
    run = Run.objects.get(public_id=run_id)
    assert (run.state, run.node) == ("active", "n_photos")


@pytest.mark.parametrize(
    ("form", "shown"),
    [
        ({"choice": "damagd", "note": "x"}, "Not a label"),
        ({"choice": "damaged", "note": " "}, "Note required"),
    ],
)
def test_a_refused_answer_is_shown_on_the_page_with_what_was_typed(
    form: dict[str, str], shown: str
) -> None:
    run_id = stall_at_reason()

    refused = signed_in("maria", "Support lead").post(f"/r/{run_id}/resolve", form)

    assert refused.status_code == 422
    html = refused.content.decode()
    assert f'<div class="refusal" role="alert"><b>{shown}</b>' in html
    assert Run.objects.get(public_id=run_id).state == "stalled"


def test_closing_on_the_page_needs_a_reason_and_ends_the_run() -> None:
    run_id = stall_at_reason()
    maria = signed_in("maria", "Support lead")

    assert maria.post(f"/r/{run_id}/close", {"reason": ""}).status_code == 422
    closed = maria.post(f"/r/{run_id}/close", {"reason": "Customer left the chat."})

    assert closed.status_code == 303
    run = Run.objects.get(public_id=run_id)
    assert (run.state, run.close_reason) == ("closed", "Customer left the chat.")


def test_an_agent_taking_a_claimed_run_back_ends_the_claim() -> None:
    run_id = stall_at_reason()
    signed_in("maria", "Support lead").post(f"/r/{run_id}/claim", {"action": "claim"})
    assert Claim.objects.exists()

    agent_steps.run_back(caller=AGENT, run_id=run_id, to=None)

    assert not Claim.objects.exists()


def test_an_agent_closing_a_claimed_run_ends_the_claim() -> None:
    run_id = stall_at_reason()
    signed_in("maria", "Support lead").post(f"/r/{run_id}/claim", {"action": "claim"})

    agent_steps.run_close(caller=AGENT, run_id=run_id, reason="the person left")

    assert not Claim.objects.exists()
