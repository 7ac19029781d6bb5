"""Erasure keeps the proof (ADR 0086): a run erased verifies as erased (by whom, when,
why) and its neighbours still verify; what it held is gone from its row, its steps and
its audit records; a sealed audit record erased with its run is not reported as edited;
an erased run's fields are still bound (an edit after erasure is named); an open run is
not erased; ``erase --ref`` erases every ended run of a ref.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from access_app.models import AuditRecord
from flowcore.common.errors import Refusal, StepNotAllowed
from flowcore.drawing.usage import flow_usage
from flows_app.selectors import flow_live
from runs_app.capture import run_capture
from runs_app.erasure import ERASE, run_erase
from runs_app.models import Run, Step
from runs_app.selectors import flow_usage_inputs
from tests.runs_app.test_verify import (
    ORDER,
    as_recorded_before_digests,
    call,
    seal_everything,
    verify,
    walked,
)

pytestmark = pytest.mark.django_db


def erase(*args: str) -> tuple[bool, str]:
    out = io.StringIO()
    try:
        call_command("erase", *args, stdout=out)
    except CommandError as error:
        return False, out.getvalue() + str(error)
    return True, out.getvalue()


def test_an_erased_run_verifies_as_erased_and_its_neighbours_still_verify() -> None:
    before = walked(close=True)
    target = walked(ref="T-9", request_id="req-9", close=True)
    after = walked(close=False)
    seal_everything()

    ok, out = erase(target, "--reason", "GDPR request 4411", "--by", "alice")
    assert ok, out

    ok, lines, error = verify()
    assert ok, (lines, error)
    assert any(
        line.startswith(f"{target}: erased by operator:alice at ")
        and line.endswith(": GDPR request 4411")
        for line in lines
    ), lines
    assert "(1 erased: path, statuses, times and who acted proven, values gone)" in lines[-1]
    for neighbour in (before, after):
        assert verify(neighbour)[0]
    assert verify(target)[0]


def test_erasing_removes_the_values_from_the_run_its_steps_and_its_audit_records() -> None:
    run_id = walked(ref="T-7", request_id="req-7", close=True)
    seal_everything()
    assert AuditRecord.objects.filter(run_id=run_id).exclude(peer="").exists()

    assert run_erase(run_id=run_id, reason="asked by the person", by="staff:alice")

    run = Run.objects.get(public_id=run_id)
    assert (run.ref, run.request_id, run.close_reason, run.salt) == ("", "", "", "")
    assert run.engine_state["values"] == {}
    assert run.state == "closed" and run.erased_at is not None
    steps = list(run.steps.order_by("seq"))
    assert [s.tool for s in steps][-1] == ERASE
    assert all(s.input == {} and s.result_text == "{}" and s.payload for s in steps[:-1])
    assert not AuditRecord.objects.filter(run_id=run_id).exclude(client="", peer="").exists()
    # The sealed audit records changed by the erasure are reported as erased, not edited.
    ok, lines, error = verify()
    assert ok, (lines, error)
    assert "erased with their runs" in lines[-1]


def test_erasing_twice_changes_nothing() -> None:
    run_id = walked(close=True)
    assert run_erase(run_id=run_id, reason="first", by="staff:alice")
    revision = Run.objects.get(public_id=run_id).revision
    assert not run_erase(run_id=run_id, reason="second", by="staff:alice")
    assert Run.objects.get(public_id=run_id).revision == revision


def test_an_open_run_is_not_erased() -> None:
    run_id = walked(close=False)
    with pytest.raises(StepNotAllowed, match="only a completed or closed run is erased"):
        run_erase(run_id=run_id, reason="too early", by="staff:alice")
    assert Run.objects.get(public_id=run_id).erased_at is None


def test_the_ref_is_kept_only_when_asked_and_is_then_bound_by_the_erase_step() -> None:
    run_id = walked(ref="T-5", close=True)
    assert run_erase(run_id=run_id, reason="keep the ticket", by="staff:alice", keep_ref=True)
    assert Run.objects.get(public_id=run_id).ref == "T-5"
    assert verify(run_id)[0]
    Run.objects.filter(public_id=run_id).update(ref="T-6")
    ok, lines, _ = verify(run_id)
    assert not ok
    assert f"{run_id}: ref differs from what the erase step recorded" in lines


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (lambda r: Run.objects.filter(public_id=r).update(owner="key:mallory"), "owner is"),
        (lambda r: Run.objects.filter(public_id=r).update(outcome="refunded"), "outcome is"),
        (
            lambda r: Step.objects.filter(run__public_id=r, seq=2).update(status="completed"),
            "the hash chain breaks at step 2",
        ),
        (
            lambda r: Step.objects.filter(run__public_id=r, tool=ERASE).update(caller="staff:eve"),
            "the hash chain breaks at step",
        ),
        (
            lambda r: Step.objects.filter(run__public_id=r, seq=1).update(input={"ref": "x"}),
            "step 1 still holds values",
        ),
    ],
    ids=["owner", "outcome", "a step's status", "who erased", "a value put back"],
)
def test_an_erased_runs_fields_and_steps_are_still_bound(edit: Any, line: str) -> None:
    run_id = walked(close=True)
    assert run_erase(run_id=run_id, reason="asked", by="staff:alice")
    edit(run_id)
    ok, lines, _ = verify(run_id)
    assert not ok
    assert any(text.startswith(f"{run_id}: {line}") for text in lines), lines


def test_erase_by_ref_erases_every_ended_run_of_the_ref_and_names_the_open_ones() -> None:
    ended = [walked(ref="TICKET-1", close=True), walked(ref="TICKET-1", close=True)]
    still_open = walked(ref="TICKET-1", close=False)
    other = walked(ref="TICKET-2", close=True)

    ok, out = erase("--ref", "TICKET-1", "--reason", "GDPR request")

    assert not ok  # one run of the ref is still open
    assert f"{still_open}: not erased: still open" in out
    erased = set(Run.objects.filter(erased_at__isnull=False).values_list("public_id", flat=True))
    assert erased == set(ended)
    assert Run.objects.get(public_id=other).erased_at is None
    call("guide_close", {"run_id": still_open, "reason": "done"})
    assert erase("--ref", "TICKET-1", "--reason", "GDPR request")[0]
    assert Run.objects.get(public_id=still_open).erased_at is not None


def test_the_run_page_and_the_api_show_erased_where_values_were(ops_client: Any) -> None:
    run_id = walked(ref="T-3", close=True)
    assert run_erase(run_id=run_id, reason="GDPR request 4411", by="staff:lead")

    page = ops_client.get(f"/r/{run_id}").content.decode()
    assert 'Erased</b> by <span class="mono">staff:lead</span>' in page
    assert "GDPR request 4411" in page
    assert "<i>reason erased</i>" in page and "A00118" not in page and "T-3" not in page
    listing = ops_client.get(f"/?q={run_id}").content.decode()
    assert "<i>erased</i>" in listing

    data = ops_client.get(f"/api/runs/{run_id}").json()
    assert data["erasure"]["by"] == "staff:lead"
    assert data["erasure"]["reason"] == "GDPR request 4411"
    assert data["erased_at"] and data["ref"] is None and data["values"] == {}
    erased_steps = [s for s in data["steps"] if s["tool"] != ERASE]
    assert erased_steps and all(
        s["input"] == {"erased": True} and s["result"]["erased"] is True for s in erased_steps
    )
    assert [s["status"] for s in erased_steps][-1] == "closed"


def test_an_erased_run_is_not_captured_as_a_scenario() -> None:
    run_id = walked(close=True)
    assert run_erase(run_id=run_id, reason="asked", by="staff:lead")
    with pytest.raises(Refusal, match="its calls' inputs are gone") as refused:
        run_capture(run_id=run_id)
    assert refused.value.error == "run erased"


def test_a_run_recorded_before_digests_is_erased_and_keeps_its_links() -> None:
    """Steps of format 1 hashed their values as they are: once erased, their hashes are
    kept and only their links are checked; the erase step is hashed as any other."""
    run_id = walked(close=True)
    as_recorded_before_digests(run_id)
    assert run_erase(run_id=run_id, reason="asked", by="staff:lead")
    assert verify(run_id)[0]
    # A step cut out of the chain is still named.
    Step.objects.filter(run__public_id=run_id, seq=2).update(prev_hash="0" * 64)
    ok, lines, _ = verify(run_id)
    assert not ok and f"{run_id}: the hash chain breaks at step 2" in lines


def test_erasing_keeps_the_counts_the_flow_pages_show() -> None:
    """Per node and edge, runs and leaks: the same before and after (an answer in the
    person's own words counts as a leak by __other__ either way; its words go)."""
    words = call("guide_start", {"flow_id": "refund_request", "values": ORDER})["run_id"]
    call("guide_answer", {"run_id": words, "choice": "gift_from_aunt_Mathilda"})
    rejected = call("guide_start", {"flow_id": "refund_request", "values": ORDER})["run_id"]
    call("guide_answer", {"run_id": rejected, "choice": "damagd"})  # a slip: unmatched
    call("guide_close", {"run_id": rejected, "reason": "left"})
    walked(close=True)
    flow = flow_live("refund_request")
    since = timezone.now() - timedelta(days=1)

    def usage() -> Any:
        inputs = flow_usage_inputs("refund_request", since=since)
        found = flow_usage(flow, inputs.states, inputs.rejected)
        return (
            found.runs,
            found.nodes,
            found.edges,
            [(x.node, x.kind, x.count) for x in found.leaks],
        )

    before = usage()
    for run_id in Run.objects.values_list("public_id", flat=True):
        run_erase(run_id=run_id, reason="retention", by="operator:retention")

    assert usage() == before
