"""Agent-supplied text renders escaped everywhere a person reads it.

An agent (or whoever holds a key) chooses a run's ``ref``, its values, an answer outside
the labels, a close reason, a draft's text and its own client name. Each gets a script
tag with its own number, goes in through the MCP dispatcher (the code every tool call
takes), and must come out on the run pages, their live updates, the flow page and the
admin as text: escaped, and present (so the test cannot pass by showing nothing).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from access_app.callers import Transport
from access_app.models import AuditRecord
from flows_app.models import Draft
from guidepost.mcp.dispatch import dispatch
from runs_app.models import Run
from tests.support.drafting import new_flow

pytestmark = pytest.mark.django_db


def hostile(n: int) -> str:
    return f"<script>alert({n})</script>"


def escaped(n: int) -> str:
    return f"&lt;script&gt;alert({n})&lt;/script&gt;"


# The client names itself with markup, as MCP's clientInfo lets it.
AGENT = Transport(peer="127.0.0.1", client_name=hostile(1), client_version="<b>9</b>")
REF, VALUE, ANSWER, REASON, DRAFT = 2, 3, 4, 5, 6


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, AGENT)
    assert not outcome.is_error, outcome.payload
    return outcome.payload


@pytest.fixture
def hostile_runs() -> dict[str, str]:
    """A VPN run with a hostile ref and a free-text value given in advance; a payment run
    answered outside its labels, then closed with a hostile reason; a hostile draft."""
    vpn = call(
        "guide_start",
        flow_id="vpn_cannot_connect",
        ref=hostile(REF),
        values={"error_text": hostile(VALUE)},
    )
    # payment_failed's __other__ route records an error code it does not list and goes on
    # (a completed run could not be closed).
    payment = call("guide_start", flow_id="payment_failed")
    call("guide_answer", run_id=payment["run_id"], choice=hostile(ANSWER))
    call("guide_close", run_id=payment["run_id"], reason=hostile(REASON))
    text = new_flow("gift_card", say=f"'{hostile(DRAFT)}'") + f"# {hostile(DRAFT)}\n"
    assert call("guide_draft", yaml=text)["ok"] is True
    return {"vpn": vpn["run_id"], "payment": payment["run_id"]}


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="root-pass-escape"))
    return client


def html_of(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    if response["Content-Type"].startswith("application/json"):
        # The live update's HTML fragments, which pages.js puts in the page as HTML.
        data = json.loads(response.content)
        return "".join(v for v in data.values() if isinstance(v, str))
    return response.content.decode()


def test_the_agents_text_went_in_as_sent(hostile_runs: dict[str, str]) -> None:
    """The premise: nothing on the way in stripped the markup, so escaping is what the
    pages below are tested for."""
    vpn = Run.objects.get(public_id=hostile_runs["vpn"])
    assert vpn.ref == hostile(REF)
    assert AuditRecord.objects.filter(client__contains=hostile(1)).exists()
    assert hostile(DRAFT) in Draft.objects.get().yaml


@pytest.mark.parametrize(
    ("where", "shown"),
    [
        ("/", [REF]),
        ("/r/{vpn}", [REF, VALUE]),
        ("/r/{vpn}/live?after=0", [VALUE]),
        ("/r/{payment}", [ANSWER, REASON]),
        ("/r/{payment}/live?after=0", [ANSWER, REASON]),
        ("/f/vpn_cannot_connect", [REF]),
        ("/f/payment_failed", [ANSWER]),
        ("/admin/runs_app/run/", [REF]),
        ("/admin/runs_app/run/?q=vpn", [REF]),
        ("/admin/access_app/auditrecord/", [1]),
        ("/admin/flows_app/draft/", []),
        ("/admin/flows_app/draft/{draft}/change/", [DRAFT]),
    ],
)
def test_agent_text_is_escaped_on_every_page_and_in_the_admin(
    hostile_runs: dict[str, str], staff: Client, where: str, shown: list[int]
) -> None:
    draft = Draft.objects.get()
    path = where.format(draft=draft.pk, **hostile_runs)
    html = html_of(staff, path)
    assert "<script>alert" not in html
    assert "<b>9</b>" not in html
    for n in shown:
        assert escaped(n) in html, f"{hostile(n)} is not shown (escaped) on {path}"


def test_a_runs_admin_page_shows_its_steps_inputs_and_caller_escaped(
    hostile_runs: dict[str, str], staff: Client
) -> None:
    for name in ("vpn", "payment"):
        run = Run.objects.get(public_id=hostile_runs[name])
        html = html_of(staff, f"/admin/runs_app/run/{run.pk}/change/")
        assert "<script>alert" not in html
        assert "<b>9</b>" not in html
        assert "&lt;script&gt;alert(" in html
