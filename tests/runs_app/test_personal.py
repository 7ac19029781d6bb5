"""Values marked personal (spec §1.2, ADR 0087): a run walked to its end, then every
surface read as people who may not see personal values read it, and searched for what
the person said (the run page and its live updates, the runs list, the JSON API's run
with its path and steps, the flow page and its usage, the admin's run pages, the
webhooks sent, the logs, /metrics); the JSON API shows them as given to a support lead;
no log line of a run's calls holds a value.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from access_app.callers import Transport
from access_app.services import key_create
from events_app import services as events
from events_app.endpoints import endpoint_add
from guidepost.mcp.dispatch import dispatch
from runs_app.models import Run
from tests.events_app.test_delivery import work_until
from tests.runs_app.test_verify import AGENT
from tests.support.receiver import Receiver, receiving

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


@contextmanager
def every_log_line(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every line the project logs, in ``caplog``, whether or not its logger hands its
    lines to the root."""
    names = ("guidepost", "access_app", "events_app", "flows_app", "runs_app")
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.DEBUG):
            yield
    finally:
        for logger in loggers:
            logger.removeHandler(caplog.handler)


def test_no_log_line_of_a_runs_calls_holds_a_value(
    caplog: pytest.LogCaptureFixture, django_capture_on_commit_callbacks: Any
) -> None:
    with every_log_line(caplog), django_capture_on_commit_callbacks(execute=True):
        run_id = identity_run()
        dispatch("guide_status", {"run_id": run_id}, AGENT)
        dispatch("guide_close", {"run_id": run_id, "reason": "left"}, AGENT)
    assert any(r.name == "guidepost.access" for r in caplog.records)  # the access log wrote
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for given in (*GIVEN.values(), BAD_POSTAL):
        assert given not in logged


# --- every surface --------------------------------------------------------------------------

# A personal ask node without __other__ (an answer outside its labels is rejected and
# echoed), a personal ask node with __other__ (an answer outside its labels, a short code
# made of the person's own words, goes on, recorded on the path), a personal slot
# with a pattern, and a personal lookup that sends the slot and sets an address.
ADDRESS_CHANGE = """\
id: address_change
title: Change of address
category: account
entry: n_reason
nodes:
  - id: n_reason
    kind: ask
    personal: true
    say: Ask why they call about their address
    accepts:
      moved: They moved house
      typo: The address on file has a typo
    next:
      moved: n_where
      typo: n_member
  - id: n_where
    kind: ask
    personal: true
    say: Ask where they live now
    accepts:
      abroad: They moved abroad
    next:
      abroad: n_member
      __other__: n_member
  - id: n_member
    kind: collect
    say: Collect their member id
    slots:
      member_id:
        ask: the member id
        required: true
        pattern: "M[0-9]{8}"
        hint: M and eight digits
        personal: true
    next: n_address
  - id: n_address
    kind: lookup
    personal: true
    say: Look up the address on file
    call: crm
    send: [member_id]
    returns:
      found: the member is known
    sets:
      postal_address: text
    next:
      found: n_done
      __error__: n_done
  - id: n_done
    kind: end
    outcome: updated
    say: Tell them the address is updated
"""
# What the person said, by where it was said.
SAID = {
    "an answer rejected at a personal ask node": "a fire at Quillfeather Lane",
    "their own words at a personal ask node": "12_Whiskerton_Row_Plumtree",
    "a personal slot's value rejected": "M4417-ZEBRA",
    "a personal slot's value": "M00071539",
    "the answer of a personal lookup": "7 Quince Court, Bramblebury",
}
MEMBER_MASKED = "••••1539"
ANSWERED = "the answer of a personal lookup"


def walk_address_change(transport: Transport) -> str:
    """The run, walked to its end with everything in ``SAID``."""

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        outcome = dispatch(tool, arguments, transport)
        assert not outcome.is_error, outcome.payload
        return dict(outcome.payload)

    run_id = str(call("guide_start", {"flow_id": "address_change"})["run_id"])
    answers: list[dict[str, Any]] = [
        {"choice": SAID["an answer rejected at a personal ask node"]},
        {"choice": "moved"},
        {"choice": SAID["their own words at a personal ask node"]},
        {"values": {"member_id": SAID["a personal slot's value rejected"]}},
        {"values": {"member_id": SAID["a personal slot's value"]}},
    ]
    statuses = [call("guide_answer", {"run_id": run_id, **a})["status"] for a in answers]
    assert statuses == ["unmatched", "advanced", "advanced", "unmatched", "completed"]
    return run_id


def as_read(response: HttpResponse) -> str:
    """A page's text, or a JSON answer's with every character as itself."""
    assert response.status_code == 200, (response.status_code, response.content[:200])
    if response["content-type"].startswith("application/json"):
        return json.dumps(json.loads(response.content), ensure_ascii=False)
    return response.content.decode()


def webhooks_received(receiver: Receiver) -> dict[str, str]:
    """The run's events as each kind of subscription got them."""
    kinds = {"with values": "?values", "without values": "?plain", "for Slack": "?slack"}
    work_until(lambda: len(receiver.received) >= len(kinds))
    bodies = {r.path: r.body.decode() for r in receiver.received}
    return {f"the webhook {name}": bodies["/hook" + query] for name, query in kinds.items()}


def test_no_surface_shows_a_personal_value_to_people_who_may_not_see_it(
    ops_client: Client, caplog: pytest.LogCaptureFixture, flows_copy: Path, settings: Any
) -> None:
    settings.GUIDEPOST_FLOWS_DIR, settings.GUIDEPOST_FLOWS_POLL = flows_copy, 0
    (flows_copy / "address_change.yaml").write_text(ADDRESS_CHANGE, encoding="utf-8")
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on 127.0.0.1
    _, secret = key_create(name="walker")
    answer = {"label": "found", "values": {"postal_address": SAID[ANSWERED]}}
    with (
        receiving() as receiver,
        receiving(reply=json.dumps(answer).encode()) as crm,
        every_log_line(caplog),
    ):
        endpoint_add(name="crm", url=crm.url)
        for query, options in (
            ("?values", {"include_values": True}),
            ("?plain", {}),
            ("?slack", {"format": "slack"}),
        ):
            events.subscription_add(url=receiver.url + query, events=["run.completed"], **options)
        run_id = walk_address_change(Transport(peer="127.0.0.1", key_name="walker"))
        live = reverse("run-live", args=[run_id])
        pk = Run.objects.get(public_id=run_id).pk
        pages = {
            "the run page": f"/r/{run_id}",
            "its live updates from the start": f"{live}?after=0",
            "its live updates after the first answer": f"{live}?after=2",
            "the runs list": "/",
            "the API's run (values, path, steps)": f"/api/runs/{run_id}",
            "the API's runs": "/api/runs",
            "the flow page": "/f/address_change",
            "the API's flow usage": "/api/flows/address_change/usage",
            "the admin's runs": "/admin/runs_app/run/",
            "the admin's run": f"/admin/runs_app/run/{pk}/change/",
            "/metrics": "/metrics",
        }
        read = {name: as_read(ops_client.get(path)) for name, path in pages.items()}
        own = Client().get(f"/api/runs/{run_id}", HTTP_AUTHORIZATION=f"Bearer {secret}")
        read["the API's run, read with the agent's own key"] = as_read(own)
        read.update(webhooks_received(receiver))
    read["the logs"] = "\n".join(record.getMessage() for record in caplog.records)

    shown = {
        surface: [what for what, said in SAID.items() if said in text]
        for surface, text in read.items()
    }
    assert {surface: said for surface, said in shown.items() if said} == {}
    # Masked, not missing: each surface that shows values shows the mask.
    for name in ("the run page", "the API's run (values, path, steps)", "the webhook with values"):
        assert MEMBER_MASKED in read[name], name
        assert "••••bury" in read[name], name
