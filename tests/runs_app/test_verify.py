"""``verify`` proves everything a run is and notices what is missing (ADR 0067): each field
of a run edited in the database is named with its run; a deleted run is named from the
ledger; an edited, deleted or added audit record in a sealed block is named; heads
written by ``--heads`` catch a consistent rewrite that ``verify`` alone cannot; a run
recorded in the old format still verifies; an adoption recorded as a step verifies.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F
from django.test.utils import override_settings
from django.utils import timezone

from access_app.callers import Transport
from access_app.models import AuditRecord
from flowcore.flow.building import content_hash
from flows_app.models import FlowVersion
from guidepost.mcp.dispatch import dispatch
from runs_app import adoption, ledger
from runs_app.chain import FORMAT_VALUES, chain_append, iso, step_hash
from runs_app.models import GENESIS_HASH, Run, Seal, Step

pytestmark = pytest.mark.django_db

AGENT = Transport(peer="127.0.0.1", client_name="pytest", client_version="1", key_name="support")
OWNER = "key:support"
ORDER = {"order_number": "A00118"}


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, AGENT)
    assert not outcome.is_error, outcome.payload
    return dict(outcome.payload)


def walked(*, ref: str | None = "T-1", request_id: str | None = None, close: bool = False) -> str:
    """A run started (with a ref and a request_id), answered twice, maybe closed."""
    arguments: dict[str, Any] = {"flow_id": "refund_request", "values": ORDER}
    if ref is not None:
        arguments["ref"] = ref
    if request_id is not None:
        arguments["request_id"] = request_id
    run_id = str(call("guide_start", arguments)["run_id"])
    call("guide_answer", {"run_id": run_id, "choice": "damaged"})
    call("guide_answer", {"run_id": run_id, "choice": "yes"})
    if close:
        call("guide_close", {"run_id": run_id, "reason": "the person left"})
    return run_id


def seal_everything() -> int:
    """Seal every record up to now (no margin: nothing else writes during a test)."""
    return ledger.seal_all(now=timezone.now(), margin=0)


def verify(*args: str) -> tuple[bool, list[str], str]:
    """``verify``'s exit (True: 0), its lines, and its error message."""
    out = io.StringIO()
    try:
        call_command("verify", *args, stdout=out)
    except CommandError as error:
        return False, out.getvalue().splitlines(), str(error)
    return True, out.getvalue().splitlines(), ""


def runs(run_id: str) -> Any:
    return Run.objects.filter(public_id=run_id)


def other_version() -> FlowVersion:
    """Another stored version of refund_request: the same flow with a comment added, so
    its replay is the same and only the pin tells."""
    pinned = FlowVersion.objects.get(flow_id="refund_request")
    text = pinned.source + "\n# edited\n"
    return FlowVersion.objects.create(
        content_hash=content_hash(text),
        flow_id="refund_request",
        title=pinned.title,
        source=text,
        created_at=pinned.created_at,
    )


# Each edit of one field of a run, and the line verify must print for it.
FIELD_EDITS: dict[str, tuple[Callable[[str], Any], str]] = {
    "owner": (
        lambda r: runs(r).update(owner="key:mallory"),
        "owner is 'key:mallory'; its steps say 'key:support'",
    ),
    "ref": (lambda r: runs(r).update(ref="T-2"), "ref differs from what step 1 recorded"),
    "request_id": (
        lambda r: runs(r).update(request_id="req-2"),
        "request_id differs from what step 1 recorded",
    ),
    "close_reason": (
        lambda r: runs(r).update(close_reason="resolved"),
        "close_reason differs from what its close step recorded",
    ),
    "started_at": (
        lambda r: runs(r).update(started_at=F("started_at") - timedelta(days=1)),
        "started_at is '",
    ),
    "updated_at": (
        lambda r: runs(r).update(updated_at=F("updated_at") + timedelta(seconds=1)),
        "updated_at is '",
    ),
    "flow_id": (lambda r: runs(r).update(flow_id="payment_failed"), "flow_id is 'payment_failed'"),
    "flow version": (
        lambda r: runs(r).update(flow_version=other_version()),
        "flow revision is '",
    ),
    "state": (
        lambda r: runs(r).update(state="active"),
        "the run's state is 'active'; the replay gives 'closed'",
    ),
    "node": (lambda r: runs(r).update(node="n_photos"), "the run's node is 'n_photos'"),
    "outcome": (lambda r: runs(r).update(outcome="refunded"), "the run's outcome is 'refunded'"),
    "engine_state": (
        lambda r: runs(r).update(packed_state=b"{}"),
        "the stored state differs from the replay of the steps",
    ),
    "revision": (
        lambda r: runs(r).update(revision=F("revision") + 1),
        "the hash chain breaks at step 5",
    ),
    "head_hash": (lambda r: runs(r).update(head_hash=GENESIS_HASH), "the hash chain breaks at"),
}


@pytest.mark.parametrize("field", list(FIELD_EDITS))
def test_an_edited_field_of_a_run_is_named_with_its_run(field: str) -> None:
    edited, untouched = walked(request_id="req-1", close=True), walked(ref="T-9", close=True)
    seal_everything()
    assert verify()[0]
    edit, line = FIELD_EDITS[field]

    assert edit(edited) == 1
    ok, lines, error = verify()

    assert not ok
    assert any(x.startswith(f"{edited}: {line}") for x in lines), lines
    assert not any(untouched in x for x in lines), lines
    assert edited in error and untouched not in error


def test_a_close_reason_on_a_run_no_step_closed_is_named() -> None:
    run_id = walked()
    runs(run_id).update(close_reason="closed by hand")

    assert verify(run_id)[1] == [f"{run_id}: close_reason is set, but no step closed the run"]


def test_verify_is_clean_on_walked_runs_and_a_sealed_ledger() -> None:
    ids = [walked(request_id="req-1"), walked(ref=None), walked(close=True)]
    call("guide_back", {"run_id": ids[0]})
    assert seal_everything() == 1

    ok, lines, _ = verify()

    assert ok, lines
    assert lines == [
        "3 runs verified: hash chains intact, fields bound, replays equal; 1 seal intact "
        "(11 audit records; 0 not sealed yet)"
    ]


# --- what is missing ---------------------------------------------------------------------------


def test_a_deleted_run_is_named_from_the_ledger() -> None:
    gone, kept = walked(), walked()
    seal_everything()

    runs(gone).delete()  # its steps go with it
    ok, lines, error = verify()

    assert not ok
    assert lines == [f"{gone}: deleted (listed by seal 1)"]
    assert gone in error and kept not in error
    assert verify(gone)[1] == [f"{gone}: no such run", f"{gone}: deleted (listed by seal 1)"]


def test_a_run_cut_back_to_an_earlier_revision_is_named_from_the_seal_that_listed_it() -> None:
    """Its last step deleted and every column put back as it was before that step: the
    chain, the fields and the replay agree; the seal that listed the later step does not."""
    run_id = walked()
    before = runs(run_id).values().get()
    call("guide_back", {"run_id": run_id})
    seal_everything()

    Step.objects.filter(run__public_id=run_id, seq=4).delete()
    runs(run_id).update(**before)
    lines = verify(run_id)[1]

    assert lines == [
        f"{run_id}: step 4 is missing; seal 1 lists the run at it",
        f"{run_id}: its last change ({iso(before['updated_at'])}) is sealed, but seal 1 lists "
        "it at revision 4",
    ]


def rewrite_first_answers_time(run_id: str) -> Run:
    """The time of the run's first answer moved, every hash from it on recomputed (the
    replay does not look at times): the run's chain and fields agree again."""
    run = Run.objects.get(public_id=run_id)
    run.head_hash = GENESIS_HASH
    for step in run.steps.order_by("seq"):
        if step.seq == 2:
            step.created_at -= timedelta(milliseconds=1)
        chain_append(run, step)
        step.save()
    run.save()
    return run


def test_a_history_rewritten_after_its_seal_is_named_from_the_seal() -> None:
    """The time of an answer moved and every later hash recomputed: the chain, the fields
    and the replay agree; the seal that listed the run does not."""
    run_id = walked()
    seal_everything()

    run = rewrite_first_answers_time(run_id)
    lines = verify(run_id)[1]

    assert lines == [
        f"{run_id}: step 3 differs from seal 1",
        f"{run_id}: its last change ({iso(run.updated_at)}) is sealed, but seal 1 lists it at "
        "revision 3",
    ]


def test_a_run_changed_inside_sealed_time_without_its_seal_is_named() -> None:
    """A step appended by hand with a time inside the sealed window, chain and fields
    made consistent: only the ledger knows the run was not at that revision then."""
    run_id = walked()
    seal_everything()
    run = Run.objects.get(public_id=run_id)
    last = run.steps.get(seq=3)
    forged = Step(
        run=run,
        seq=4,
        tool="guide_back",
        input={},
        result_text=Step.objects.get(pk=last.pk).result_text,
        status=last.status,
        node_before=last.node_after,
        node_after=last.node_after,
        caller=OWNER,
        created_at=last.created_at,
    )
    run.revision = 4
    chain_append(run, forged)
    forged.save()
    run.save()

    lines = verify(run_id)[1]

    changed = iso(run.updated_at)
    assert (
        f"{run_id}: its last change ({changed}) is sealed, but seal 1 lists it at revision 3"
        in (lines)
    )


# --- the audit records -------------------------------------------------------------------------


def test_an_edited_deleted_or_added_audit_record_in_a_sealed_block_is_named() -> None:
    walked()
    seal_everything()
    first, second, *_ = AuditRecord.objects.order_by("id")
    AuditRecord.objects.filter(pk=first.pk).update(outcome="run not found")
    AuditRecord.objects.filter(pk=second.pk).delete()
    added = AuditRecord.objects.create(
        at=first.at, tool="guide_status", outcome="ok", status=200, duration_ms=1.0
    )

    ok, lines, error = verify()

    assert not ok
    assert lines == [
        f"audit record {first.pk}: differs from seal 1",
        f"audit record {second.pk}: deleted (sealed in seal 1)",
        f"audit record {added.pk}: not in seal 1, which covers its time",
    ]
    assert f"audit record {first.pk}" in error


def test_audit_records_pruned_by_retention_are_reported_not_failed() -> None:
    walked()
    seal_everything()
    later = walked(ref="T-2")
    sealed = Seal.objects.get(seq=1)

    pruned = ledger.audit_prune(before=sealed.until)
    ok, lines, _ = verify()

    assert pruned == 3 and ok, lines
    assert lines[0].startswith("seal 1: 3 audit records pruned by retention at ")
    assert "(0 audit records, 3 pruned by retention; 3 not sealed yet)" in lines[-1]
    assert runs(later).exists()


def test_a_record_added_to_a_pruned_window_is_named() -> None:
    walked()
    seal_everything()
    ledger.audit_prune(before=Seal.objects.get(seq=1).until)
    record = AuditRecord.objects.create(
        at=Seal.objects.get(seq=1).since + timedelta(seconds=1),
        tool="guide_status",
        outcome="ok",
        status=200,
        duration_ms=1.0,
    )

    ok, lines, _ = verify()

    assert not ok
    assert f"audit record {record.pk}: not in seal 1, which covers its time" in lines


# --- the seals themselves ----------------------------------------------------------------------


def test_an_edited_or_missing_seal_is_named() -> None:
    walked()
    seal_everything()
    walked(ref="T-2")
    seal_everything()
    walked(ref="T-3")
    seal_everything()
    assert Seal.objects.count() == 3

    Seal.objects.filter(seq=1).update(runs=[])
    Seal.objects.filter(seq=2).delete()
    lines = verify()[1]

    assert "seal 1: its content differs from its hash" in lines
    assert "seal 3: seal 2 is missing" in lines
    assert any(line.startswith("seal 3: its window starts at ") for line in lines)


# --- heads stored elsewhere --------------------------------------------------------------------


def forge(run_id: str) -> None:
    """The careful forger: the run rewritten (``rewrite_first_answers_time``) and the
    ledger rebuilt from scratch, so that ``verify`` alone finds nothing."""
    rewrite_first_answers_time(run_id)
    Seal.objects.all().delete()
    seal_everything()


def test_heads_round_trip_and_a_change_before_them_is_detected(tmp_path: Path) -> None:
    sealed, unsealed = walked(), walked(ref="T-2")
    seal_everything()
    call("guide_back", {"run_id": unsealed})  # changed after the last seal: in the heads
    heads = tmp_path / "heads.json"

    with override_settings(GUIDEPOST_SEAL_MARGIN=3600):
        ok, lines, _ = verify("--heads", str(heads))
    assert ok, lines
    assert (
        lines[-1] == f"heads written to {heads}: seal 1, 1 run not sealed yet; store it elsewhere"
    )
    assert set(ledger.heads_read(heads).runs) == {unsealed}
    ok, lines, _ = verify("--since", str(heads))
    assert ok and lines[-1].endswith(
        "nothing changed since the heads of " + ledger.heads_read(heads).written_at
    )

    forge(sealed)
    forge(unsealed)
    assert verify()[0]  # without the heads, a consistent rewrite goes unseen
    ok, lines, error = verify("--since", str(heads))

    written = ledger.heads_read(heads).written_at
    assert not ok
    assert f"seal 1: differs from the heads of {written}" in lines
    assert f"{unsealed}: step 4 differs from the heads of {written}" in lines
    assert "seal 1" in error and unsealed in error


def test_heads_name_a_run_deleted_before_it_was_sealed(tmp_path: Path) -> None:
    run_id = walked()
    heads = tmp_path / "heads.json"
    with override_settings(GUIDEPOST_SEAL_MARGIN=3600):
        assert verify("--heads", str(heads))[0]
        runs(run_id).delete()
        ok, lines, _ = verify("--since", str(heads))

    written = ledger.heads_read(heads).written_at
    assert not ok and lines == [f"{run_id}: deleted since the heads of {written}"]


@pytest.mark.parametrize("sealed", [False, True], ids=["not sealed since", "sealed since"])
def test_since_names_a_run_cut_back_below_its_heads_whether_or_not_it_was_sealed(
    tmp_path: Path, sealed: bool
) -> None:
    """The heads hold the run at step 4; then step 4 is deleted and every column put back
    as it was before it, so the chain, the fields and the replay agree."""
    run_id = walked()
    before = runs(run_id).values().get()
    call("guide_back", {"run_id": run_id})
    heads = tmp_path / "heads.json"
    with override_settings(GUIDEPOST_SEAL_MARGIN=3600):
        assert verify("--heads", str(heads))[0]
    assert ledger.heads_read(heads).runs[run_id][0] == 4
    if sealed:
        seal_everything()

    Step.objects.filter(run__public_id=run_id, seq=4).delete()
    runs(run_id).update(**before)
    ok, lines, error = verify("--since", str(heads))

    written = ledger.heads_read(heads).written_at
    assert not ok and run_id in error
    assert f"{run_id}: step 4 is missing; the heads of {written} hold the run at it" in lines


def test_heads_are_written_once_and_only_for_a_history_that_verifies(tmp_path: Path) -> None:
    run_id = walked()
    heads = tmp_path / "heads.json"
    heads.write_text("kept", encoding="utf-8")
    with pytest.raises(CommandError, match="exists: heads are written once"):
        call_command("verify", "--heads", str(heads), stdout=io.StringIO())
    assert heads.read_text(encoding="utf-8") == "kept"

    runs(run_id).update(owner="key:mallory")
    fresh = tmp_path / "fresh.json"
    ok, _, _ = verify("--heads", str(fresh))

    assert not ok and not fresh.exists()


def test_since_refuses_a_file_that_is_not_heads(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"runs": {}}', encoding="utf-8")

    with pytest.raises(CommandError, match="not a heads file"):
        call_command("verify", "--since", str(bad), stdout=io.StringIO())


# --- formats and events ------------------------------------------------------------------------


def as_recorded_before_digests(run_id: str) -> None:
    """The run as the release before digests stored it: no salt, every step in format 1
    (its values hashed as they are), no flow hash."""
    run = Run.objects.get(public_id=run_id)
    run.salt, run.head_hash = "", GENESIS_HASH
    for step in run.steps.order_by("seq"):
        step.flow_hash = ""
        chain_append(run, step)
        step.save()
    run.save()


def test_a_run_recorded_in_the_old_format_still_verifies_and_binds_its_fields() -> None:
    run_id = walked(close=True)
    as_recorded_before_digests(run_id)
    formats = set(Step.objects.filter(run__public_id=run_id).values_list("format", flat=True))
    assert formats == {FORMAT_VALUES}
    assert verify(run_id)[0]

    runs(run_id).update(ref="T-2", owner="key:mallory")
    lines = verify(run_id)[1]

    assert lines == [
        f"{run_id}: owner is 'key:mallory'; its steps say 'key:support'",
        f"{run_id}: ref differs from what step 1 recorded",
    ]


def test_a_run_whose_later_steps_were_rehashed_in_the_old_format_is_named() -> None:
    """A run's steps all have the format of its first: steps 2 and 3 rehashed in format 1
    (their values in clear), the chain relinked, still breaks at step 2."""
    run_id = walked()
    run = Run.objects.get(public_id=run_id)
    prev = run.steps.get(seq=1).hash
    for step in run.steps.filter(seq__gte=2).order_by("seq"):
        step.format, step.prev_hash = FORMAT_VALUES, prev
        step.hash = prev = step_hash(step, run)
        step.save()
    runs(run_id).update(head_hash=prev)

    assert verify(run_id)[1] == [f"{run_id}: the hash chain breaks at step 2"]


def test_an_adoption_recorded_as_a_step_verifies_and_hands_the_run_over() -> None:
    run_id = walked()
    seal_everything()

    assert adoption.run_adopt(run_id=run_id, owner="key:platform", by="operator:createkey")
    assert not adoption.run_adopt(run_id=run_id, owner="key:platform", by="operator:createkey")
    run = Run.objects.get(public_id=run_id)
    adopt = run.steps.get(seq=4)

    assert (run.owner, run.revision, run.state, run.node) == (
        "key:platform",
        4,
        "active",
        "n_refund_method",
    )
    assert (adopt.tool, adopt.caller, adopt.input, adopt.status) == (
        "adopt",
        "operator:createkey",
        {"owner": "key:platform"},
        "adopted",
    )
    assert verify()[0]
    runs(run_id).update(owner=OWNER)  # its owner changed by hand, without a step
    assert verify(run_id)[1] == [f"{run_id}: owner is 'key:support'; its steps say 'key:platform'"]


def test_the_run_after_an_adoption_answers_for_its_new_owner_only() -> None:
    run_id = walked()
    adoption.run_adopt(run_id=run_id, owner="key:platform", by="operator:createkey")

    original = {"run_id": run_id, "choice": "original", "values": {"refund_amount": "20"}}
    refused = dispatch("guide_answer", original, AGENT)
    platform = Transport(peer="127.0.0.1", client_name="p", client_version="1", key_name="platform")
    answered = dispatch("guide_answer", original, platform)

    assert refused.is_error and refused.payload["error"] == "run not found"
    assert not answered.is_error and answered.payload["status"] == "completed"
    assert verify(run_id)[0]


def test_a_step_hash_is_recomputed_in_its_own_format() -> None:
    run_id = walked()
    run = Run.objects.get(public_id=run_id)
    step = run.steps.get(seq=2)

    assert step_hash(step, run) == step.hash
