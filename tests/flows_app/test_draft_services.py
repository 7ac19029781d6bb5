"""Draft services against a real database: intake, supersession, approval and discard.

Approval is tested by what it leaves behind: the flow file in the live directory,
the recorded FlowVersion, and the draft's decision; refusals leave nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from access_app.callers import Caller
from flowcore.common.errors import NotConfirmed, Refusal
from flowcore.flow.building import content_hash
from flowcore.flow.drafts import DRAFT_REFUSED
from flowcore.flow.files import load_catalog
from flows_app import services
from flows_app.models import Draft, FlowVersion
from flows_app.services import (
    DRAFT_BREAKS_TESTS,
    DRAFT_HAS_ERRORS,
    DRAFT_NOT_PENDING,
    FLOW_FILE_NOT_WRITTEN,
    REASON_REQUIRED,
    draft_approve,
    draft_create,
    draft_discard,
)
from runs_app import agent_steps
from tests.support.drafting import (
    BROKEN_GUARANTEE,
    BROKEN_SCENARIO,
    REFUND,
    REFUND_CHANGE,
    REFUND_CHANGE_WITHOUT_HANDOVER,
    REFUND_REWORDED,
    REFUND_TEXT,
    edited,
    new_flow,
)
from tests.support.unwritable import blocked_flow_path, probe_is_refused, read_only_directory

pytestmark = pytest.mark.django_db


def submit(text: str, by: str = "anon:127.0.0.1:agent", via: str = Draft.Via.KEY) -> Draft:
    return draft_create(text=text, submitted_via=via, submitted_by=by).draft


# --- intake -------------------------------------------------------------------------------


def test_a_draft_records_its_flow_title_submitter_findings_and_is_pending(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_CHANGE, by="anon:127.0.0.1:claude")
    stored = Draft.objects.get(public_id=draft.public_id)
    assert (stored.flow_id, stored.title, stored.status) == (
        REFUND,
        "Customer asks for a refund",
        Draft.Status.PENDING,
    )
    assert (stored.submitted_via, stored.submitted_by) == ("key", "anon:127.0.0.1:claude")
    assert stored.content_hash == content_hash(REFUND_CHANGE)
    assert stored.ok is True and stored.yaml == REFUND_CHANGE
    assert stored.decided_at is None and stored.decided_by == ""


@pytest.mark.parametrize(
    "text",
    ["title: 名前のない手順\n", "id: Bad Id\ntitle: x\n", "id: a\ntitle: [unclosed\n", "- id: a\n"],
    ids=["no-id", "bad-id", "does-not-parse", "not-a-mapping"],
)
def test_text_without_a_valid_flow_id_is_refused_and_stored_nowhere(
    live_flows: Path, text: str
) -> None:
    with pytest.raises(Refusal) as refused:
        submit(text)
    assert refused.value.error == DRAFT_REFUSED
    assert not Draft.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_intake_judges_one_draft_at_a_time_and_the_next_waits_for_it(live_flows: Path) -> None:
    # Judging holds the interpreter's lock for up to tens of milliseconds: a second draft
    # judged meanwhile would make every other call wait for both (ADR 0062).
    stored: list[Draft] = []

    def another_draft() -> None:
        try:
            stored.append(submit(new_flow("gift_card")))
        finally:
            connections.close_all()

    with services._JUDGING_A_DRAFT:  # a draft being judged
        waiting = threading.Thread(target=another_draft)
        waiting.start()
        waiting.join(timeout=0.5)
        assert waiting.is_alive() and not stored
    waiting.join()
    assert [draft.flow_id for draft in stored] == ["gift_card"]


def test_an_identical_pending_draft_is_not_stored_again_and_the_submitter_gets_it(
    live_flows: Path,
) -> None:
    first = draft_create(text=REFUND_CHANGE, submitted_via="key", submitted_by="a")
    again = draft_create(text=REFUND_CHANGE, submitted_via="cli", submitted_by="b")
    assert (first.repeated, again.repeated) == (False, True)
    assert again.draft.public_id == first.draft.public_id
    assert Draft.objects.count() == 1


def test_the_same_text_after_a_discard_is_a_new_draft(live_flows: Path) -> None:
    first = submit(REFUND_CHANGE)
    draft_discard(draft=first, discarded_by="lead", reason="not now")
    second = draft_create(text=REFUND_CHANGE, submitted_via="key", submitted_by="a")
    assert second.repeated is False and second.draft.public_id != first.public_id
    assert Draft.objects.get(pk=first.pk).status == Draft.Status.DISCARDED


def test_a_new_draft_of_the_same_flow_supersedes_the_older_pending_one(live_flows: Path) -> None:
    older = submit(REFUND_CHANGE)
    other_flow = submit(new_flow())
    newer_text = edited(REFUND_CHANGE, {'version: "2024.4"': 'version: "2024.5"'})
    submitted = draft_create(text=newer_text, submitted_via="user", submitted_by="maria")
    older.refresh_from_db()
    assert older.status == Draft.Status.SUPERSEDED
    assert older.superseded_by == submitted.draft
    assert older.decided_at is not None
    assert submitted.superseded == older.public_id
    assert submitted.draft.status == Draft.Status.PENDING
    # A draft of another flow is not touched.
    other_flow.refresh_from_db()
    assert other_flow.status == Draft.Status.PENDING


def test_a_draft_with_lint_errors_is_stored_with_them_and_still_supersedes(
    live_flows: Path,
) -> None:
    older = submit(REFUND_CHANGE)
    broken = edited(REFUND_CHANGE, {"      lost: n_refund_method\n": "      lost: n_nowhere\n"})
    draft = submit(broken)
    assert draft.ok is False
    assert "bad_target" in {f["code"] for f in draft.findings}
    older.refresh_from_db()
    assert older.status == Draft.Status.SUPERSEDED


def test_the_database_keeps_at_most_one_pending_draft_per_flow(live_flows: Path) -> None:
    submit(REFUND_CHANGE)
    with pytest.raises(IntegrityError), transaction.atomic():
        Draft.objects.create(
            flow_id=REFUND,
            yaml="x",
            content_hash="0" * 64,
            ok=False,
            submitted_by="sneaky",
            created_at=timezone.now(),
        )


# --- approval -----------------------------------------------------------------------------


def test_approval_writes_the_flow_file_and_records_the_version_with_approver_and_draft(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_REWORDED)
    version = draft_approve(draft=draft, approved_by="maria")
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED
    stored = FlowVersion.objects.get(content_hash=content_hash(REFUND_REWORDED))
    assert stored == version
    assert (stored.flow_id, stored.version, stored.approved_by) == (REFUND, "2024.4", "maria")
    assert stored.draft == draft and stored.approved_at is not None
    assert stored.source == REFUND_REWORDED
    draft.refresh_from_db()
    assert (draft.status, draft.decided_by) == (Draft.Status.APPROVED, "maria")
    assert draft.decided_at == stored.approved_at
    # What every worker will load from the directory.
    catalog = load_catalog(live_flows)
    assert catalog.errors == ()
    assert catalog.flows[REFUND].version == "2024.4"


def test_approving_a_new_flow_adds_its_file(live_flows: Path) -> None:
    draft = submit(new_flow("gift_card"))
    draft_approve(draft=draft, approved_by="maria")
    assert "gift_card" in load_catalog(live_flows).flows


def test_approval_updates_the_version_a_run_already_pinned_instead_of_duplicating_it(
    live_flows: Path,
) -> None:
    # A run pinned the live text; a draft of exactly that text is then approved.
    agent_steps.run_start(caller=Caller(key="k"), flow_id=REFUND, values=None, ref=None)
    pinned = FlowVersion.objects.get(content_hash=content_hash(REFUND_TEXT))
    assert pinned.approved_at is None
    draft = submit(REFUND_TEXT)
    version = draft_approve(draft=draft, approved_by="maria")
    assert version.pk == pinned.pk
    assert FlowVersion.objects.filter(flow_id=REFUND).count() == 1
    pinned.refresh_from_db()
    assert (pinned.approved_by, pinned.draft) == ("maria", draft)
    assert pinned.created_at < pinned.approved_at  # type: ignore[operator]


def test_approval_refuses_a_draft_with_lint_errors_and_names_them(live_flows: Path) -> None:
    broken = edited(REFUND_CHANGE, {"      lost: n_refund_method\n": "      lost: n_nowhere\n"})
    draft = submit(broken)
    with pytest.raises(Refusal) as refused:
        draft_approve(draft=draft, approved_by="maria")
    assert refused.value.error == DRAFT_HAS_ERRORS
    assert "bad_target refund_request/n_tracking/lost" in refused.value.reason
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    draft.refresh_from_db()
    assert draft.status == Draft.Status.PENDING
    assert not FlowVersion.objects.exists()


@pytest.mark.parametrize("flow_id", ["categories", "tests", "nul"])
def test_a_draft_named_like_a_catalog_file_is_kept_with_its_error_and_never_approved(
    live_flows: Path, flow_id: str
) -> None:
    catalog_files = {p.name: p.read_bytes() for p in live_flows.iterdir() if p.is_file()}
    draft = submit(new_flow(flow_id))
    assert (draft.flow_id, draft.ok) == (flow_id, False)
    assert [(f["code"], f["line"]) for f in draft.findings] == [("schema", 1)]
    with pytest.raises(Refusal) as refused:
        draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    assert refused.value.error == DRAFT_HAS_ERRORS
    assert f"error schema {flow_id}: flow id '{flow_id}' cannot be used" in refused.value.reason
    assert {p.name: p.read_bytes() for p in live_flows.iterdir() if p.is_file()} == catalog_files
    assert load_catalog(live_flows).errors == ()
    draft.refresh_from_db()
    assert draft.status == Draft.Status.PENDING
    assert not FlowVersion.objects.exists()


def test_approval_lints_against_the_categories_of_now_not_of_submission(
    live_flows: Path,
) -> None:
    draft = submit(new_flow("gift_card"))
    assert draft.ok is True
    categories = live_flows / "categories.yaml"
    categories.write_text(
        edited(categories.read_text(encoding="utf-8"), {"payments:\n": "billing:\n"}),
        encoding="utf-8",
    )
    for path in live_flows.glob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("category: payments", "category: billing"), "utf-8")
    with pytest.raises(Refusal) as refused:
        draft_approve(draft=draft, approved_by="maria")
    assert "unknown_category" in refused.value.reason
    assert not (live_flows / "gift_card.yaml").exists()


@pytest.mark.parametrize("decided", ["approved", "discarded", "superseded"])
def test_approval_and_discard_refuse_a_draft_that_is_no_longer_pending(
    live_flows: Path, decided: str
) -> None:
    draft = submit(REFUND_REWORDED)
    if decided == "approved":
        draft_approve(draft=draft, approved_by="maria")
    elif decided == "discarded":
        draft_discard(draft=draft, discarded_by="maria", reason="duplicate")
    else:
        submit(edited(REFUND_REWORDED, {'version: "2024.4"': 'version: "2024.5"'}))
    on_disk = (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8")
    stale = Draft.objects.get(pk=draft.pk)
    before = Draft.objects.filter(pk=draft.pk).values().get()
    for decide in (
        lambda: draft_approve(draft=stale, approved_by="tom"),
        lambda: draft_discard(draft=stale, discarded_by="tom", reason="late"),
    ):
        with pytest.raises(Refusal) as refused:
            decide()
        assert refused.value.error == DRAFT_NOT_PENDING
        assert decided in refused.value.reason
    assert Draft.objects.filter(pk=draft.pk).values().get() == before
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == on_disk


def test_a_stale_copy_of_a_draft_cannot_be_approved_twice(live_flows: Path) -> None:
    draft = submit(REFUND_REWORDED)
    first_copy, second_copy = Draft.objects.get(pk=draft.pk), Draft.objects.get(pk=draft.pk)
    draft_approve(draft=first_copy, approved_by="maria")
    with pytest.raises(Refusal, match="already approved by maria"):
        draft_approve(draft=second_copy, approved_by="tom")
    assert FlowVersion.objects.get(draft=draft).approved_by == "maria"


# A draft, and how writing its flow file is made to fail (a directory can stand only
# where no file is yet: a new flow's).
WRITES_REFUSED = {
    "new-flow-a-directory-where-its-file-goes": (
        new_flow("gift_card"),
        lambda flows: blocked_flow_path(flows, "gift_card"),
    ),
    "new-flow-a-read-only-flows-directory": (new_flow("gift_card"), read_only_directory),
    "change-a-read-only-flows-directory": (REFUND_REWORDED, read_only_directory),
}


@pytest.mark.parametrize(("text", "refusing"), WRITES_REFUSED.values(), ids=WRITES_REFUSED.keys())
def test_a_flow_file_that_cannot_be_written_is_a_refusal_and_nothing_is_half_done(
    live_flows: Path, text: str, refusing: Any
) -> None:
    draft = submit(text)
    files = {p.name: p.read_bytes() for p in live_flows.iterdir() if p.is_file()}
    with refusing(live_flows):
        assert probe_is_refused(live_flows) or (live_flows / f"{draft.flow_id}.yaml").is_dir()
        with pytest.raises(Refusal) as refused:
            draft_approve(draft=draft, approved_by="maria")
    assert refused.value.error == FLOW_FILE_NOT_WRITTEN
    assert refused.value.reason.startswith(
        f"{live_flows / draft.flow_id}.yaml could not be written"
    )
    assert "the draft is still pending" in refused.value.next
    draft.refresh_from_db()
    assert draft.status == Draft.Status.PENDING and not draft.live_at_decision_recorded
    assert not FlowVersion.objects.exists()  # neither the draft's nor the one it would replace
    # No temporary file, no half-written flow: the directory holds what it held.
    assert {p.name: p.read_bytes() for p in live_flows.iterdir() if p.is_file()} == files
    assert load_catalog(live_flows).errors == ()
    draft_approve(draft=draft, approved_by="maria")  # once it can be written, it goes through
    assert (live_flows / f"{draft.flow_id}.yaml").read_text(encoding="utf-8") == text


# --- approval and the live tests (ADR 0038) ------------------------------------------------


def test_approval_refuses_a_draft_that_breaks_the_live_tests_without_a_confirmation(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    with pytest.raises(NotConfirmed) as refused:
        draft_approve(draft=draft, approved_by="maria")
    assert refused.value.error == DRAFT_BREAKS_TESTS
    assert refused.value.reason == (
        f"against tests/{REFUND}.yaml, the draft fails 1 of 17 scenarios ({BROKEN_SCENARIO!r}) "
        f"and breaks 1 of 5 guarantees ({BROKEN_GUARANTEE!r})"
    )
    assert refused.value.retryable is True
    # What breaks, as the runner prints it: the failing call, expected and got, and the path.
    details = refused.value.details
    assert f"FAIL {REFUND} › {BROKEN_SCENARIO} › call 1: answer: price_dropped" in details[0]
    assert "    node: expected n_agent_review, got n_price_match" in details
    assert any(line.startswith(f"BROKEN {REFUND} › guarantee") for line in details)
    assert any("counterexample" in line for line in details)
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.tests_at_approval) == (Draft.Status.PENDING, None)
    assert not FlowVersion.objects.exists()


def test_a_confirmed_approval_of_a_draft_that_breaks_tests_records_what_broke(
    live_flows: Path,
) -> None:
    tests_file = live_flows / "tests" / f"{REFUND}.yaml"
    tests_before = tests_file.read_text(encoding="utf-8")
    draft = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.broken_tests_confirmed) == (Draft.Status.APPROVED, True)
    recorded = stored.tests_at_approval
    assert recorded["tests_file"] == f"tests/{REFUND}.yaml"
    assert recorded["summary"] == {
        "flow_id": REFUND,
        "ok": False,
        "findings": [],
        "failed_scenarios": [BROKEN_SCENARIO],
        "broken_guarantees": [BROKEN_GUARANTEE],
        "scenarios": 17,
        "guarantees": 5,
        "coverage": {"nodes": "100%", "edges": "96.1%"},
    }
    # The runner's lines as they were then, the file named within the flows directory.
    assert recorded["report"][:3] == [
        f"FAIL {REFUND} › {BROKEN_SCENARIO} › call 1: answer: price_dropped "
        f"(tests/{REFUND}.yaml:138)",
        "    node: expected n_agent_review, got n_price_match",
        "    outcome: expected escalated, got price_matched",
    ]
    # The passed object says the same, and the tests file is left as it was.
    assert (draft.broken_tests_confirmed, draft.tests_at_approval) == (True, recorded)
    assert tests_file.read_text(encoding="utf-8") == tests_before
    on_disk = (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8")
    assert on_disk == REFUND_CHANGE_WITHOUT_HANDOVER


def test_a_draft_that_passes_the_live_tests_needs_no_confirmation_and_records_that(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_REWORDED)
    draft_approve(draft=draft, approved_by="maria")
    stored = Draft.objects.get(pk=draft.pk)
    assert stored.status == Draft.Status.APPROVED
    assert stored.broken_tests_confirmed is False
    summary = stored.tests_at_approval["summary"]
    assert (summary["ok"], summary["scenarios"], summary["guarantees"]) == (True, 17, 5)


def test_a_confirmation_given_when_nothing_breaks_is_not_recorded_as_breaking(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_REWORDED)
    draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    assert Draft.objects.get(pk=draft.pk).broken_tests_confirmed is False


def test_a_flow_without_a_tests_file_is_approved_and_records_that_there_was_none(
    live_flows: Path,
) -> None:
    draft = submit(new_flow("gift_card"))
    draft_approve(draft=draft, approved_by="maria")
    stored = Draft.objects.get(pk=draft.pk)
    assert stored.tests_at_approval == {
        "tests_file": "tests/gift_card.yaml",
        "summary": None,
        "report": [],
    }
    assert stored.broken_tests_confirmed is False


def test_approval_checks_the_tests_file_as_it_is_at_approval_not_as_it_was_shown(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_REWORDED)
    tests_file = live_flows / "tests" / f"{REFUND}.yaml"
    # After the reviewer read "all pass", someone adds a scenario the draft fails.
    tests_file.write_text(
        tests_file.read_text(encoding="utf-8").replace(
            "guarantees:\n",
            "  - name: the reason is asked in the old words\n"
            "    start:\n"
            "      values: {order_number: A00118}\n"
            "      expect: {status: advanced, node: n_reason, skipped: [n_order]}\n"
            "    calls:\n"
            "      - answer: damaged\n"
            "        expect: {node: n_refund_method}\n"
            "guarantees:\n",
        ),
        encoding="utf-8",
    )
    with pytest.raises(NotConfirmed, match="fails 1 of 18 scenarios"):
        draft_approve(draft=draft, approved_by="maria")
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.PENDING


def test_a_tests_file_with_mistakes_needs_a_confirmation_too(live_flows: Path) -> None:
    (live_flows / "tests" / f"{REFUND}.yaml").write_text("scenarios: [unclosed\n", "utf-8")
    draft = submit(REFUND_REWORDED)
    with pytest.raises(NotConfirmed) as refused:
        draft_approve(draft=draft, approved_by="maria")
    assert refused.value.reason == (
        f"against tests/{REFUND}.yaml, the tests file has errors, so the draft cannot be checked"
    )
    draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    assert Draft.objects.get(pk=draft.pk).broken_tests_confirmed is True


# --- discard ------------------------------------------------------------------------------


def test_discard_keeps_the_draft_with_who_when_and_why(live_flows: Path) -> None:
    draft = submit(REFUND_CHANGE)
    draft_discard(draft=draft, discarded_by="maria", reason="  refunds are frozen this week ")
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.decided_by, stored.decision_reason) == (
        Draft.Status.DISCARDED,
        "maria",
        "refunds are frozen this week",
    )
    assert stored.decided_at is not None and stored.yaml == REFUND_CHANGE
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


@pytest.mark.parametrize("reason", ["", "   ", "x" * 2001], ids=["empty", "blank", "too-long"])
def test_discard_requires_a_reason(live_flows: Path, reason: str) -> None:
    draft = submit(REFUND_CHANGE)
    with pytest.raises(Refusal) as refused:
        draft_discard(draft=draft, discarded_by="maria", reason=reason)
    assert refused.value.error == REASON_REQUIRED
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.PENDING


def test_nothing_changes_a_draft_by_saving_it(live_flows: Path) -> None:
    # Approval is a service, never a side effect of a status flip (style P7, ADR 0026).
    draft = submit(REFUND_CHANGE)
    draft.status = Draft.Status.APPROVED
    draft.save()
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    assert not FlowVersion.objects.exists()
