"""The first key does not orphan work in flight (issue 20; ADR 0072): `createkey` says how
many runs started without a key are active or stalled, and `--adopt-keyless` makes them
the new key's, in the transaction that creates it, each adoption in the audit trail."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from access_app import guards
from access_app.callers import Caller, Transport
from access_app.models import AgentKey, AuditRecord
from flowcore.common.errors import NotFound
from flows_app.models import Draft
from guidepost.mcp.dispatch import dispatch
from guidepost.mcp.resources import READ_RESOURCE
from runs_app import agent_steps, selectors
from runs_app.models import Run
from tests.support.drafting import REFUND_CHANGE

pytestmark = pytest.mark.django_db

KEYLESS = Caller(key="anon:127.0.0.1:claude-code", name="claude-code", address="127.0.0.1")


def keyless_runs() -> dict[str, str]:
    """Three runs started without a key: one active, one stalled, one completed."""
    active = agent_steps.run_start(caller=KEYLESS, flow_id="refund_request", values=None, ref=None)
    stalled = agent_steps.run_start(caller=KEYLESS, flow_id="refund_request", values=None, ref=None)
    done = agent_steps.run_start(caller=KEYLESS, flow_id="refund_request", values=None, ref=None)
    Run.objects.filter(public_id=stalled["run_id"]).update(state=Run.State.STALLED)
    Run.objects.filter(public_id=done["run_id"]).update(state=Run.State.COMPLETED)
    return {"active": active["run_id"], "stalled": stalled["run_id"], "done": done["run_id"]}


def createkey(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("createkey", *args, stdout=out)
    return out.getvalue().splitlines()


def test_createkey_warns_how_many_keyless_runs_it_orphans() -> None:
    runs = keyless_runs()
    lines = createkey("support-bot")

    assert lines[0].startswith("Warning: 1 active and 1 stalled run(s) were started without a key.")
    assert "--adopt-keyless" in lines[0]
    assert Run.objects.get(public_id=runs["active"]).owner == KEYLESS.key
    with pytest.raises(NotFound):
        selectors.run_get(guards.key_caller("support-bot"), runs["active"])


def test_createkey_says_nothing_of_keyless_runs_when_none_is_open() -> None:
    lines = createkey("support-bot")

    assert len(lines) == 2
    assert lines[0].startswith("Created the agent key support-bot")


def test_adopt_keyless_hands_the_open_runs_to_the_new_key_and_records_each() -> None:
    runs = keyless_runs()
    lines = createkey("support-bot", "--adopt-keyless")

    assert lines[0] == (
        "2 run(s) started without a key now belong to support-bot: "
        "its agent carries them on with the key."
    )
    owners = dict(Run.objects.values_list("public_id", "owner"))
    assert owners == {
        runs["active"]: "key:support-bot",
        runs["stalled"]: "key:support-bot",
        runs["done"]: KEYLESS.key,  # over: it stays as it was
    }
    key = guards.key_caller("support-bot")
    answered = agent_steps.run_answer(
        caller=key,
        run_id=runs["active"],
        choice=None,
        values={"order_number": "A00118"},
        at=None,
    )
    assert answered["status"] == "advanced"
    records = AuditRecord.objects.filter(tool="adopt keyless run").order_by("run_id")
    assert sorted((r.run_id, r.caller, r.key_name, r.outcome) for r in records) == sorted(
        (run_id, KEYLESS.key, "support-bot", "adopted")
        for run_id in (runs["active"], runs["stalled"])
    )


def test_a_refused_key_adopts_nothing() -> None:
    runs = keyless_runs()
    createkey("support-bot")
    with pytest.raises(Exception, match="already has an active key"):
        createkey("support-bot", "--adopt-keyless")

    assert Run.objects.get(public_id=runs["active"]).owner == KEYLESS.key
    assert AgentKey.objects.count() == 1
    assert not AuditRecord.objects.filter(tool="adopt keyless run").exists()


def test_adopt_keyless_records_an_adopt_step_that_verify_proves() -> None:
    """The owner is bound by the run's chain (ADR 0067): an adoption rewritten by an
    UPDATE alone would read as a tampered owner; one recorded as a step verifies."""
    from runs_app.verification import verify

    run_id = agent_steps.run_start(
        caller=KEYLESS, flow_id="refund_request", values=None, ref="T-1"
    )["run_id"]

    createkey("support-bot", "--adopt-keyless")

    run = Run.objects.get(public_id=run_id)
    last = run.steps.order_by("-seq").first()
    assert last is not None
    assert (last.tool, last.caller, last.input) == (
        "adopt",
        "operator:createkey",
        {"owner": "key:support-bot"},
    )
    assert verify([run_id]).problems == []


@pytest.mark.hostile
def test_adopt_keyless_lets_the_key_read_the_drafts_made_without_one() -> None:
    """A draft proposed before the first key is read with that key afterwards (it was
    `draft not found`); the draft still says who submitted it, and the adoption is in the
    audit trail."""
    keyless = Transport(peer="127.0.0.1", client_name="claude-code")
    proposed = dispatch("guide_draft", {"yaml": REFUND_CHANGE}, keyless)
    assert not proposed.is_error, proposed.payload
    draft_id = proposed.payload["draft_id"]

    lines = createkey("support-bot", "--adopt-keyless")

    assert "1 draft(s) submitted without a key now belong to support-bot" in "\n".join(lines)
    read = dispatch(
        "resources/read",
        {"uri": f"guidepost://drafts/{draft_id}"},
        Transport(key_name="support-bot"),
        READ_RESOURCE,
    )
    assert not read.is_error, read.payload
    assert json.loads(read.payload["text"])["draft_id"] == draft_id
    assert Draft.objects.get(public_id=draft_id).submitted_by == KEYLESS.key
    record = AuditRecord.objects.get(tool="adopt keyless draft")
    assert (record.caller, record.key_name, record.outcome) == (
        KEYLESS.key,
        "support-bot",
        "adopted",
    )
