"""Who answered a stalled run, and what they said: a support lead answers it on its page,
the page names them (``staff:NAME``) and shows their note on their step, and the agent,
through the MCP tools, is given the note with its next directions: by guide_status, and
by the call it makes next when it did not read the run first.

Personas: maria (support lead) on the pages; a keyless agent through the tool dispatcher.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from access_app.callers import Transport
from guidepost.mcp.dispatch import dispatch

pytestmark = pytest.mark.django_db

AGENT = Transport(peer="127.0.0.1", client_name="desk-agent")
NOTE = "Customer sent a photo of the cracked case by email."


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    outcome = dispatch(name, arguments, AGENT)
    return {"is_error": outcome.is_error, **outcome.payload}


def maria() -> Client:
    user = User.objects.create_user("maria", is_staff=True)
    user.groups.add(Group.objects.get(name="Support lead"))
    client = Client()
    client.force_login(user)
    return client


def stalled_at_reason() -> str:
    started = tool("guide_start", flow_id="refund_request", values={"order_number": "A00118"})
    stalled = tool("guide_answer", run_id=started["run_id"], choice="__unknown__", at="n_reason")
    assert stalled["status"] == "stalled"
    return str(started["run_id"])


def answered_on_the_page(run_id: str, *, choice: str = "damaged", note: str = NOTE) -> Client:
    lead = maria()
    posted = lead.post(f"/r/{run_id}/resolve", {"choice": choice, "note": note})
    assert posted.status_code == 303, posted.content.decode()
    return lead


def test_the_run_page_names_the_person_and_their_note_on_their_step() -> None:
    run_id = stalled_at_reason()
    lead = answered_on_the_page(run_id)

    page = lead.get(f"/r/{run_id}").content.decode()

    *agents, answer = page.split('id="timeline"')[1].split("</li>")[:-1]
    assert '<span class="tool mono">resolve</span>' in answer
    assert "waits at n_photos (by staff:maria)" in answer
    assert f'<span class="cap">note</span> {NOTE}' in answer
    assert len(agents) == 2 and not any("(by " in step for step in agents)


def test_guide_status_after_a_person_answer_gives_the_agent_their_note() -> None:
    run_id = stalled_at_reason()
    answered_on_the_page(run_id, note="Customer sent a photo\nof the cracked case by email.")

    status = tool("guide_status", run_id=run_id)

    assert status["next"].startswith(
        "A person answered n_reason (damaged) and handed the run back to you. "
        f'Their note: "{NOTE}" Tell the person the outcome of that answer'
    )
    # Said until the agent's own next answer.
    tool("guide_answer", run_id=run_id, choice="yes", at="n_photos")
    assert NOTE not in tool("guide_status", run_id=run_id)["next"]


def test_the_agents_next_call_after_a_person_answer_gives_their_note() -> None:
    run_id = stalled_at_reason()
    answered_on_the_page(run_id)

    # The agent had not read the run: it answers the node where it stalled once more.
    refused = tool("guide_answer", run_id=run_id, choice="changed_mind", at="n_reason")

    assert (refused["is_error"], refused["error"]) == (True, "run has moved")
    assert refused["next"].startswith(
        f'A person answered n_reason (damaged) and handed the run back to you. Their note: "{NOTE}"'
    )
    assert "then go on: Answer n_photos instead" in refused["next"]
